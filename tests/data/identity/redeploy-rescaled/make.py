"""Report 01 of issue 22 (the Flink Kubernetes Operator redeploys `orders-enricher` from a
savepoint under a new job id) with the redeploy changing a parallelism: run A runs Source:
orders (2) -> enrich (2) -> Sink: orders-es (2) until minute 6; run B, from minute 6.7, runs
the sink at parallelism 1 (one writer busy 995 ms/s at 600 records/s). Writes
recording.om.gz, plan-old.json (run A's plan, the alert's: sink parallelism 2) and
plan-new.json (run B's). Run `python3 make.py` here."""
import os, sys, json
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'reports3', 'tools'))
from gen import *

A = '6f1e2d3c4b5a69788796a5b4c3d2e1f0'
B = 'a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8'
S, P, K = 'cbc357ccb763df2852fee8c4fc7d55f2', '9dd63673dd41ea021b896d5203f3ba7c', '4bf7c1955ffe56e2106d666433eaf137'

def verts(kpar):
    return [dict(id=S, name='Source: orders', par=2, busy=[40, 45], bp=[930, 925], rate=[300, 300]),
            dict(id=P, name='enrich', par=2, busy=[60, 55], bp=[920, 930], rate=[300, 300]),
            dict(id=K, name='Sink: orders-es', par=kpar, busy=[995] * kpar, bp=[0] * kpar, rate=[600 / kpar] * kpar)]

ts = times(minutes=10, step=5.0)
t_stop, t_start = ts[0] + 360, ts[0] + 400
ts_a = [t for t in ts if t <= t_stop]
ts_b = [t for t in ts if t >= t_start]
edges = [(S, P, 'HASH'), (P, K, 'FORWARD')]
ns = dict(namespace='streaming', job='streaming/flink-podmonitor')
os.chdir(HERE)
rec = Rec()
add_job(rec, A, 'orders-enricher', verts(2), ts_a, extra=ns, uptime0_ms=3600000, tm_of=lambda v, i: f'oe-tm-1-{i + 1}')
add_job(rec, B, 'orders-enricher', verts(1), ts_b, extra=ns, uptime0_ms=5000, anchor=ts_b[0],
        tm_of=lambda v, i: f'oe-tm-2-{i + 1}')
rec.write('recording.om.gz')
json.dump(plan(A, 'orders-enricher', verts(2), edges), open('plan-old.json', 'w'))
json.dump(plan(B, 'orders-enricher', verts(1), edges), open('plan-new.json', 'w'))
