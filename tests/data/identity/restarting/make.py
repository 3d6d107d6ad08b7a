"""The slow-sink capture (examples/captures/slow-sink) as a job that went into RESTARTING: for
its last 40 s the JobManager still reports, but Flink's UpTimeGauge reads 0 ("not running at
the moment") and no task reports (the tasks are cancelled). Writes recording.om.gz. Run
`python3 make.py` here."""
import gzip, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, '..', '..', '..', '..', 'examples', 'captures', 'slow-sink', 'recording.om.gz')
GAP_S = 40

lines = gzip.open(SRC, 'rt').read().splitlines()
stamp = lambda line: float(line.rsplit(' ', 1)[1])
last = max(stamp(x) for x in lines if x and not x.startswith('#'))
out = []
for x in lines:
    if x and not x.startswith('#') and stamp(x) > last - GAP_S:
        name = re.match(r'[A-Za-z_:][A-Za-z0-9_:]*', x).group(0)
        if name.startswith('flink_taskmanager_job_task_'):
            continue
        if name == 'flink_jobmanager_job_uptime':
            head, _, t = x.rsplit(' ', 2)
            x = f'{head} 0 {t}'
    out.append(x)
with gzip.open(os.path.join(HERE, 'recording.om.gz'), 'wt') as f:
    f.write('\n'.join(out) + '\n')
