"""The autoscaler's in-place rescale cuts a sink from 4 to 2 subtasks, and the sink becomes the
bottleneck (the kind of report 01 of issue 22: a job's shape changes under an alert).

`payments-scorer` runs Source: payments (4) -> score (4) -> Sink: payments-jdbc (4), 10 min at
5 s steps. Until minute 5 the sink's 4 writers are half busy (450 ms/s each, 300 records/s
each: 1,200 records/s) and nothing is backpressured. At minute 5 (T) the job restarts with the
sink at parallelism 2 (every task a new attempt, the uptime resets, numRestarts rises): the 2
writers are busy 995 ms/s at 400 records/s each (800 records/s in all), and source and score
are backpressured 900 ms/s. Writes recording.om.gz and plan.json (the plan Flink REST gives
after the rescale: sink parallelism 2), and recording-restart.om.gz: the same restart at T with
every parallelism kept (the sink's 4 writers busy 995 ms/s after it). recording-gap20.om.gz and recording-gap10.om.gz: the rescale with a realistic restart gap (20 s
and 10 s with uptime 0 and no task metrics before the new attempts report). Run `python3 make.py`
here."""
import os, sys, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'reports3', 'tools'))
from gen import *

J = '5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b'
S, P, K = '1a2b3c4d5e6f708192a3b4c5d6e7f801', '2b3c4d5e6f708192a3b4c5d6e7f80912', '3c4d5e6f708192a3b4c5d6e7f8091223'
ts = times(minutes=10, step=5.0)
T = ts[0] + 300
before = [t for t in ts if t < T]
after = [t for t in ts if t >= T]

def verts(sink_par, sink_busy, sink_rate, up_bp, up_rate):
    return [dict(id=S, name='Source: payments', par=4, busy=[200] * 4, bp=[up_bp] * 4, rate=[up_rate] * 4),
            dict(id=P, name='score', par=4, busy=[250] * 4, bp=[up_bp] * 4, rate=[up_rate] * 4),
            dict(id=K, name='Sink: payments-jdbc', par=sink_par, busy=[sink_busy] * sink_par, bp=[0] * sink_par,
                 rate=[sink_rate] * sink_par)]

def write(path, sink_after, gap=0):
    rec = Rec()
    jm_and_tasks(rec, sink_after, gap)
    rec.write(path)

ns = dict(namespace='payments', job='payments/flink-podmonitor')
tm = lambda v, i: f'payments-scorer-taskmanager-1-{i + 1}'
def jm_and_tasks(rec, sink_after, gap):
    # The JobManager's series: one run throughout; its uptime resets at T. With a `gap` (s),
    # the restart takes that long: the uptime reads 0 (RESTARTING, Flink's "not running at
    # the moment") and no task reports until T + gap, when the new attempts start.
    start = T + gap
    after = [t for t in ts if t >= start]
    add_job(rec, J, 'payments-scorer', [], before, extra=ns, uptime0_ms=3600000)
    add_job(rec, J, 'payments-scorer', [], after, extra=ns, uptime0_ms=0, anchor=start)
    if gap:
        rec.add('flink_jobmanager_job_uptime', 'gauge',
                dict(ns, job_id=J, job_name='payments_scorer', host='jm', flink_role='jobmanager'),
                [(t, 0) for t in ts if T <= t < start])
    rec.add('flink_jobmanager_job_numRestarts', 'gauge',
            dict(ns, job_id=J, job_name='payments_scorer', host='jm', flink_role='jobmanager'),
            [(t, 0 if t < T else 1) for t in ts])
    add_job(rec, J, 'payments-scorer', verts(4, 450, 300, 0, 300), before, extra=ns, jm=False, tm_of=tm, attempt=0)
    add_job(rec, J, 'payments-scorer', verts(sink_after, 995, 400, 900, 200 * 2 // (4 // sink_after)), after,
            extra=ns, jm=False, tm_of=tm, attempt=1, anchor=start)

write('recording.om.gz', 2)
write('recording-gap20.om.gz', 2, gap=20)
write('recording-gap10.om.gz', 2, gap=10)
write('recording-restart.om.gz', 4)
edges = [(S, P, 'HASH'), (P, K, 'REBALANCE')]
json.dump(plan(J, 'payments-scorer', verts(2, 995, 400, 900, 200), edges), open('plan.json', 'w'), indent=1)
# The plan Flink REST gave before the rescale (sink parallelism 4): fetched for an alert that
# fired before it, or cached.
json.dump(plan(J, 'payments-scorer', verts(4, 450, 300, 0, 300), edges), open('plan-before.json', 'w'), indent=1)
