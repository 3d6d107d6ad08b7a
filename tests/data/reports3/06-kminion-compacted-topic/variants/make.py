"""Variants of case 06 (from the tester's round v6): the same job and lag (shrinking 635
records/s per partition, position ~3.17 M), with other topic settings in KMinion's labels.
  bytes_12g_lwm: cleanup.policy=delete, retention.ms=-1, retention.bytes=1 GiB, topic 12 GiB
                 on disk, log start 0: the bytes estimate (lag past what 1 GiB holds) is
                 contradicted by the position inside the log.
  compact_below: cleanup.policy=compact, the log start 500 000 above the position.
Writes <variant>/recording.om.gz next to this file."""
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', 'tools'))
os.chdir(here)
from gen import *
JID, JOB = '0c1d2e3f405162738495a6b7c8d9e0f1', 'customer-dim-sync'
TOPIC, GROUP = 'customers-changelog', 'customer-dim-sync'
S, U, K = '6cdc5bb954874d922eaee11a8e7ca5be', '3f1c2f6a2b1d4e7f8a9b0c1d2e3f4a5b', '7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d'
V = [dict(id=S, name='Source: customers-changelog', par=3, busy=[50, 50, 55], bp=[920, 925, 915], rate=[650, 650, 650]),
     dict(id=U, name='ChangelogNormalize', par=3, busy=[120, 110, 115], bp=[860, 870, 865], rate=[650, 650, 650]),
     dict(id=K, name='ConstraintEnforcer -> Sink: jdbc customers_dim', par=3, busy=[990, 985, 992], bp=[0, 0, 0], rate=[650, 650, 650])]
ts = times(minutes=30, step=15.0)
def case(name, policy, retms, lwm, extra_info=None, lwm_metric=True, lag_metric=True):
    rec = Rec()
    add_job(rec, JID, JOB, V, ts, extra=dict(namespace='dim'), uptime0_ms=7200000)
    ex = dict(job='kminion', instance='kminion.kafka:8080')
    info = dict(ex, topic_name=TOPIC, partition_count='3', replication_factor='3')
    if policy is not None: info['cleanup_policy']=policy
    if retms is not None: info['retention_ms']=retms
    info.update(extra_info or {})
    rec.add('kminion_kafka_topic_info', 'gauge', info, [(t, 1) for t in ts])
    for p in range(3):
        produce, consume = 15.0, 650.0
        hw0, lag0 = 14_000_000, 12_000_000
        hw = lambda t: int(hw0 + produce * (t - ts[0]))
        lag = lambda t: int(lag0 - (consume - produce) * (t - ts[0]))
        pl = dict(ex, topic_name=TOPIC, partition_id=str(p))
        rec.add('kminion_kafka_topic_partition_high_water_mark', 'gauge', pl, [(t, hw(t)) for t in ts])
        if lwm_metric: rec.add('kminion_kafka_topic_partition_low_water_mark', 'gauge', pl, [(t, lwm(t, hw(t), lag(t))) for t in ts])
        if lag_metric: rec.add('kminion_kafka_consumer_group_topic_partition_lag', 'gauge', dict(pl, group_id=GROUP), [(t, lag(t)) for t in ts])
    os.makedirs(name, exist_ok=True)
    rec.write(name + '/recording.om.gz')
zero = lambda t,hw,lag: 0
below = lambda t,hw,lag: (hw-lag)+500000   # log start above consumer position -> loss
case('compact_below', 'compact', '604800000', below)
def case2(name, size, policy='delete', retms='-1', rb='1073741824', lwm_metric=False):
    rec = Rec()
    add_job(rec, JID, JOB, V, ts, extra=dict(namespace='dim'), uptime0_ms=7200000)
    ex = dict(job='kminion', instance='kminion.kafka:8080')
    info = dict(ex, topic_name=TOPIC, partition_count='3', replication_factor='3', cleanup_policy=policy, retention_ms=retms, retention_bytes=rb)
    rec.add('kminion_kafka_topic_info', 'gauge', info, [(t, 1) for t in ts])
    rec.add('kminion_kafka_topic_log_dir_size_total_bytes', 'gauge', dict(ex, topic_name=TOPIC), [(t, size) for t in ts])
    for p in range(3):
        produce, consume = 15.0, 650.0
        hw0, lag0 = 14_000_000, 12_000_000
        hw = lambda t: int(hw0 + produce * (t - ts[0]))
        lag = lambda t: int(lag0 - (consume - produce) * (t - ts[0]))
        pl = dict(ex, topic_name=TOPIC, partition_id=str(p))
        rec.add('kminion_kafka_topic_partition_high_water_mark', 'gauge', pl, [(t, hw(t)) for t in ts])
        if lwm_metric: rec.add('kminion_kafka_topic_partition_low_water_mark', 'gauge', pl, [(t, 0) for t in ts])
        rec.add('kminion_kafka_consumer_group_topic_partition_lag', 'gauge', dict(pl, group_id=GROUP), [(t, lag(t)) for t in ts])
    os.makedirs(name, exist_ok=True)
    rec.write(name + '/recording.om.gz')
case2('bytes_12g_lwm', 12*2**30, lwm_metric=True)
