import os, sys, json; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tools'))
from gen import *
# Two runs of fraud-detection (as case 06 makes them): an older run O that stopped 750 s before
# the end of the recording, and the running run J (the one the webhook names by job_id). In
# both the sink is the slow one; the same vertices (the same topology).
J, O = '5e2b7c9a1d3f4e6a8b0c2d4e6f8a0b1c', '01d01d01d01d01d01d01d01d01d01d00'
S, E, K = 'cbc357ccb763df2852fee8c4fc7d55f2', '9dd63673dd41ea021b896d5203f3ba7c', '4bf7c1955ffe56e2106d666433eaf137'
vs = [dict(id=S, name='Source: payments', par=2, busy=[40, 45], bp=[930, 925], rate=[300, 300]),
      dict(id=E, name='fraud-score', par=2, busy=[60, 55], bp=[920, 930], rate=[300, 300]),
      dict(id=K, name='Sink: alerts', par=2, busy=[995, 990], bp=[0, 0], rate=[300, 300])]
edges = [(S, E, 'HASH'), (E, K, 'FORWARD')]
ts = times(minutes=15, step=10)  # scraped every 10 s
rec = Rec()
add_job(rec, O, 'fraud-detection', vs, [t for t in ts if t <= ts[-1] - 750], uptime0_ms=3600000)
add_job(rec, J, 'fraud-detection', vs, [t for t in ts if t >= ts[0] + 120], uptime0_ms=60000)
rec.write('recording.om.gz')
json.dump(plan(J, 'fraud-detection', vs, edges), open('plan.json', 'w'), indent=1)
json.dump(plan(O, 'fraud-detection', vs, edges), open('plan-older-run.json', 'w'), indent=1)
