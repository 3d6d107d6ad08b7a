#!/usr/bin/env python3
"""Turn a lab capture into the layout of the repository's examples/captures/<name>/ (stdlib only).

Usage: export-capture.py LAB_CAPTURE_DIR OUT_DIR [--finding F --culprit VERTEX_NAME | --healthy]
                         [--why TEXT]

Copies what tests, `culprit demo` and readers use, and leaves out what only the lab needs
(flame graphs, Prometheus/Alertmanager API state, the raw receiver log):
  recording.om.gz      <- replay.om.gz (the run's scraped series, OpenMetrics with timestamps)
  plan.json            <- rest/plan.json
  metrics/{jm,tm1,..}.prom <- the raw reporter scrapes at capture time
  rest/                Flink REST answers, without the flame graphs
  promql/, promql-range/, summary.txt, scenario.txt, timing.txt
  alerts/webhook-*.json         Alertmanager's payloads for this job (the lab-recorder receiver)
  notifications/       what `culprit serve` posted for this job (Slack, PagerDuty, webhook)
With --finding/--culprit (or --healthy) it also writes EXPECTED.json and EXPECTED.md: the
expected verdict comes from what the scenario made slow (the caller says it), never from
culprit's own answer; the job id and vertex id are looked up in the capture.
"""
import argparse
import glob
import json
import os
import shutil
import sys

ap = argparse.ArgumentParser()
ap.add_argument("src")
ap.add_argument("out")
ap.add_argument("--finding")
ap.add_argument("--culprit", help="culprit vertex name as Flink shows it")
ap.add_argument("--healthy", action="store_true")
ap.add_argument("--why", default="")
ap.add_argument("--status", help="expected status (default culprit_found, or no_backpressure with --healthy)")
ap.add_argument("--pending", action="store_true",
                help="write EXPECTED.pending.json (tests/captures.rs skips it): for a finding whose "
                     "diagnosis is not merged yet")
ap.add_argument("--flamegraphs", action="store_true",
                help="also copy the on-CPU / off-CPU flame graphs (rest/*-flamegraph-on_cpu.json, -off_cpu.json)")
a = ap.parse_args()
src, out = a.src, a.out
if not os.path.exists(os.path.join(src, "replay.om.gz")):
    sys.exit("%s: no replay.om.gz (not a lab capture)" % src)
if os.path.exists(out):
    shutil.rmtree(out)
os.makedirs(out)


def cp(rel, dst=None):
    s = os.path.join(src, rel)
    if os.path.exists(s):
        d = os.path.join(out, dst or rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy(s, d)


cp("replay.om.gz", "recording.om.gz")
cp("rest/plan.json", "plan.json")
for f in sorted(glob.glob(os.path.join(src, "*-metrics.prom"))):
    cp(os.path.basename(f), "metrics/" + os.path.basename(f).replace("-metrics.prom", ".prom"))
for f in sorted(glob.glob(os.path.join(src, "rest", "*.json"))):
    if not f.endswith("-flamegraph.json") and (a.flamegraphs or "-flamegraph-" not in os.path.basename(f)):
        cp(os.path.relpath(f, src))
for d in ("promql", "promql-range"):
    for f in sorted(glob.glob(os.path.join(src, d, "*.json"))):
        cp(os.path.relpath(f, src))
for f in ("summary.txt", "scenario.txt", "timing.txt", "verdict-wait.txt"):
    cp(f)
for f in sorted(glob.glob(os.path.join(src, "alerts", "webhook-*.json"))):
    cp(os.path.relpath(f, src))
for f in sorted(glob.glob(os.path.join(src, "notifications", "*"))):
    cp(os.path.relpath(f, src))

job = json.load(open(os.path.join(src, "rest", "job.json")))
job_id = open(os.path.join(src, "job-id.txt")).read().strip()
if a.healthy or a.finding:
    vid = None
    if a.culprit:
        ids = [v["id"] for v in job["vertices"] if v["name"] == a.culprit]
        if len(ids) != 1:
            sys.exit("no single vertex named %r in %s" % (a.culprit, [v["name"] for v in job["vertices"]]))
        vid = ids[0]
    expected = {
        "job_name": job["name"],
        "status": a.status or ("no_backpressure" if a.healthy else "culprit_found"),
        "finding": "none" if a.healthy else a.finding,
        "culprit_vertex_id": vid,
        "culprit_vertex_name": a.culprit,
        "hazards": [],
        "job_id": job_id,
    }
    json.dump(expected, open(os.path.join(out, "EXPECTED.pending.json" if a.pending else "EXPECTED.json"), "w"), indent=2)
    scen = dict(l.split(" ", 1) for l in open(os.path.join(src, "scenario.txt")).read().splitlines() if " " in l)
    name = os.path.basename(os.path.normpath(out))
    md = ["# %s: expected verdict" % name, "",
          "- Flink: %s (run by `lab/`, see examples/captures/README.md)" % scen.get("flink", "?"),
          "- job: `%s` (job_id `%s`)" % (job["name"], job_id),
          "- status: `%s`" % expected["status"],
          "- finding: `%s`" % expected["finding"]]
    if a.culprit:
        md.append("- culprit vertex: `%s` (id `%s`)" % (a.culprit, vid))
    md += ["", "Why: " + a.why if a.why else "", "",
           "Files: `recording.om.gz` (Prometheus export with timestamps), `plan.json` (Flink REST plan), "
           "`metrics/` (raw reporter scrapes at the end of the run), `rest/` (Flink REST answers), "
           "`promql/` and `promql-range/` (Prometheus HTTP API answers), `summary.txt` (per-subtask table), "
           "`alerts/` (real Alertmanager webhooks for this job), `notifications/` (what `culprit serve` "
           "posted live during the run, when it ran), `scenario.txt` and `timing.txt` (what ran, when)."]
    if a.pending:
        md += ["", "The expectation is `EXPECTED.pending.json`: `tests/captures.rs` reads only `EXPECTED.json`, "
               "so this folder is not tested until the diagnosis of finding `%s` is merged (then rename it)." % expected["finding"]]
    open(os.path.join(out, "EXPECTED.md"), "w").write("\n".join(l for l in md) + "\n")
total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
print("exported %s -> %s (%d KB)" % (src, out, total // 1024))
