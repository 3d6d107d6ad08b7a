#!/usr/bin/env python3
"""A cAdvisor stand-in for the cpu-quota scenario (stdlib only): serves the CFS counters of the
lab's own cgroup-v1 CPU cgroups in cAdvisor's names, so Prometheus stores what it would store
from a kubelet's /metrics/cadvisor for a TaskManager pod with a CPU limit.

Usage: cgroup_exporter.py PORT POD=CGROUP_DIR [POD=CGROUP_DIR ...]
  e.g. cgroup_exporter.py 19096 lab-tm-1=/sys/fs/cgroup/cpu/culprit-lab-tm1

Series (cAdvisor's names and label names: container, pod, namespace, id; the pod is the
TaskManager's resource id, which the lab sets to the same name, so Flink's tm_id joins it):
  container_cpu_cfs_periods_total            cpu.stat nr_periods
  container_cpu_cfs_throttled_periods_total  cpu.stat nr_throttled
  container_cpu_cfs_throttled_seconds_total  cpu.stat throttled_time (ns) / 1e9
  container_cpu_usage_seconds_total          cpuacct.usage (ns) / 1e9, when readable
  container_spec_cpu_quota, container_spec_cpu_period   cpu.cfs_quota_us, cpu.cfs_period_us
"""
import http.server
import os
import sys

PORT = int(sys.argv[1])
PODS = [a.split("=", 1) for a in sys.argv[2:]]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def body():
    out = []
    fams = {}
    for pod, d in PODS:
        labels = 'container="taskmanager",pod="%s",namespace="lab",id="/%s"' % (pod, os.path.basename(d))
        stat = read(os.path.join(d, "cpu.stat"))
        if stat is None:
            continue
        st = dict(l.split() for l in stat.splitlines() if len(l.split()) == 2)
        vals = {
            "container_cpu_cfs_periods_total": ("counter", int(st.get("nr_periods", 0))),
            "container_cpu_cfs_throttled_periods_total": ("counter", int(st.get("nr_throttled", 0))),
            "container_cpu_cfs_throttled_seconds_total": ("counter", int(st.get("throttled_time", 0)) / 1e9),
            "container_spec_cpu_quota": ("gauge", int((read(os.path.join(d, "cpu.cfs_quota_us")) or "-1").strip())),
            "container_spec_cpu_period": ("gauge", int((read(os.path.join(d, "cpu.cfs_period_us")) or "100000").strip())),
        }
        acct = read(os.path.join(os.path.dirname(os.path.dirname(d)), "cpuacct", os.path.basename(d), "cpuacct.usage"))
        if acct:
            vals["container_cpu_usage_seconds_total"] = ("counter", int(acct.strip()) / 1e9)
        for name, (kind, v) in vals.items():
            fams.setdefault(name, (kind, []))[1].append("%s{%s} %s" % (name, labels, v))
    for name, (kind, lines) in fams.items():
        out.append("# TYPE %s %s" % (name, kind))
        out.extend(lines)
    return ("\n".join(out) + "\n").encode()


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = body()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
