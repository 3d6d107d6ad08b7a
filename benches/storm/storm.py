#!/usr/bin/env python3
"""The storm bench's driver (benches/storm.sh starts everything and calls it).

  storm.py fire  --manifest jobs.json --culprit URL... --pid PID... --prometheus URL
                 --standins DIR --store NAME --out RUN.json [--spread S] [--timeout S]
      Sends one Alertmanager (v4) webhook per job, one alert group per job as
      `group_by: [job_name]` gives, all within --spread seconds, round-robin over the
      culprit URLs; samples Prometheus' own `prometheus_engine_queries` (queries it is
      executing) every 50 ms and culprit's /metrics every 0.5 s, until every job has a
      verdict (GET /api/v1/verdicts, once the diagnoses are counted) and every culprit
      has drained (no diagnosis waiting or running, no notice waiting or being sent), or
      --timeout;
      then reads each culprit's CPU time and peak RSS (VmHWM) from /proc and the requests
      the stand-ins recorded, and writes the run's report.
  storm.py ready URL
      Exits 0 when URL answers 200 (storm.sh waits for /readyz with it).
  storm.py table RUN.json... [--json OUT]
      Prints the runs side by side (and writes them as one JSON list).

Times are seconds from the first webhook sent. The incident summary is the first
top-level Slack post whose message metadata `event_type` is `culprit_incident`.
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request

INCIDENT_EVENT_TYPE = "culprit_incident"
VERDICT_EVENT_TYPE = "culprit_verdict"
ALERTNAME = "FlinkJobBackpressured"
# Alertmanager retries a failed webhook; the bench does too, this often, this far apart.
WEBHOOK_ATTEMPTS, WEBHOOK_RETRY_S = 10, 1.0


def http(method, url, body=None, timeout=10.0):
    """(status, text) of one request; status 0 when it could not be made."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


def metric(text, series):
    """The value of `series` (name and labels exactly as written) in exposition text, or None."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            try:
                return float(line[len(series) + 1:].split()[0])
            except ValueError:
                return None
    return None


def diagnoses(text):
    """The sum of culprit_diagnoses_total over its label sets."""
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("culprit_diagnoses_total{"))


def group_key(job):
    return '{}:{job_name="%s"}' % job["job_name"]


def webhook(job, starts_at):
    """The webhook Alertmanager sends for `job`'s group (`group_by: [job_name]`)."""
    labels = {"alertname": ALERTNAME, "job_id": job["job_id"], "job_name": job["job_name"], "severity": "warning"}
    fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    alert = {"status": "firing", "labels": labels,
             "annotations": {"summary": "Flink job %s is backpressured" % job["job_name"]},
             "startsAt": starts_at, "endsAt": "0001-01-01T00:00:00Z",
             "generatorURL": "http://prometheus:9090/graph", "fingerprint": fingerprint}
    return {"receiver": "culprit", "status": "firing", "alerts": [alert],
            "groupLabels": {"job_name": job["job_name"]},
            "commonLabels": labels, "commonAnnotations": alert["annotations"],
            "externalURL": "http://alertmanager:9093", "version": "4",
            "groupKey": group_key(job), "truncatedAlerts": 0}


class Sampler(threading.Thread):
    """Calls `sample()` every `every_s` until stopped."""

    def __init__(self, every_s, sample):
        super().__init__(daemon=True)
        self.every_s, self.sample, self.stopped = every_s, sample, threading.Event()

    def run(self):
        while not self.stopped.is_set():
            try:
                self.sample()
            except Exception as e:  # a failed sample is a missing sample, not a failed bench
                print("storm: sample failed: %r" % e, file=sys.stderr)
            self.stopped.wait(self.every_s)


def proc_usage(pid):
    """CPU seconds (user + system) and peak RSS (MiB) of a live process, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024.0
    return cpu, hwm


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fire(a):
    jobs = json.load(open(a.manifest))
    urls = a.culprit
    by_key = {group_key(j): j for j in jobs}
    prom_peak = {"value": 0.0, "samples": 0}
    culprit_metrics = {u: "" for u in urls}

    def sample_prometheus():
        status, text = http("GET", a.prometheus + "/metrics", timeout=2.0)
        value = metric(text, "prometheus_engine_queries") if status == 200 else None
        if value is not None:
            prom_peak["value"] = max(prom_peak["value"], value)
            prom_peak["samples"] += 1

    def sample_culprit():
        for u in urls:
            status, text = http("GET", u + "/metrics", timeout=2.0)
            if status == 200:
                culprit_metrics[u] = text

    samplers = [Sampler(0.05, sample_prometheus), Sampler(0.5, sample_culprit)]
    for s in samplers:
        s.start()

    starts_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 120))
    t0 = time.time()
    statuses = collections.Counter()
    sent_at = []

    def send(i, job):
        time.sleep(max(0.0, t0 + a.spread * i / max(1, len(jobs)) - time.time()))
        url = urls[i % len(urls)] + "/webhook/alertmanager"
        body = webhook(job, starts_at)
        for _ in range(WEBHOOK_ATTEMPTS):
            status, _ = http("POST", url, body)
            statuses[status] += 1
            if status == 202 or 400 <= status < 500 and status not in (408, 429):
                break
            time.sleep(WEBHOOK_RETRY_S)
        sent_at.append(time.time())
        return status

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        final = list(pool.map(lambda p: send(*p), enumerate(jobs)))
    webhooks_done_s = max(sent_at) - t0

    # Done when every job has a verdict and every culprit has drained. Progress is read
    # from /metrics (cheap); the verdicts (their created_ms give the times) are listed only
    # once the diagnoses are all counted: listing 300 verdicts every second would be a
    # load of its own on the culprit asked.
    deadline = t0 + a.timeout
    verdicts, drained, timed_out = [], False, False
    while True:
        texts = list(culprit_metrics.values())
        depths = [(metric(t, 'culprit_queue_depth{queue="work"}'), metric(t, 'culprit_queue_depth{queue="outbox"}'))
                  for t in texts]
        drained = all(d == (0.0, 0.0) for d in depths)
        if drained and sum(diagnoses(t) for t in texts) >= len(jobs):
            status, text = http("GET", urls[0] + "/api/v1/verdicts?limit=1000", timeout=10.0)
            if status == 200:
                verdicts = json.loads(text)["verdicts"]
            names = {v["verdict"]["job"]["name"] for v in verdicts}
            if all(j["job_name"] in names for j in jobs):
                # One more round of /metrics after the verdicts, so drained is not stale.
                time.sleep(1.0)
                sample_culprit()
                if all((metric(t, 'culprit_queue_depth{queue="work"}'),
                        metric(t, 'culprit_queue_depth{queue="outbox"}')) == (0.0, 0.0)
                       for t in culprit_metrics.values()):
                    break
        if time.time() > deadline:
            timed_out = True
            status, text = http("GET", urls[0] + "/api/v1/verdicts?limit=1000", timeout=10.0)
            if status == 200:
                verdicts = json.loads(text)["verdicts"]
            break
        time.sleep(1.0)
    end_s = time.time() - t0
    for s in samplers:
        s.stopped.set()
    sample_culprit()
    usage = [proc_usage(p) for p in a.pid]

    slack = read_jsonl(os.path.join(a.standins, "slack.jsonl"))
    pagerduty = read_jsonl(os.path.join(a.standins, "pagerduty.jsonl"))
    report = summarize(a, jobs, by_key, t0, verdicts, slack, pagerduty, culprit_metrics, prom_peak, usage)
    report.update({"webhooks": {"sent": len(jobs), "accepted": sum(1 for s in final if s == 202),
                                "answers": {str(k): v for k, v in sorted(statuses.items())},
                                "all_sent_s": round(webhooks_done_s, 2)},
                   "timed_out": timed_out, "drained": drained, "ended_s": round(end_s, 1)})
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    print("storm: %s: summary %s s, last verdict %s s, last Slack post %s s, Slack 429s %d, PagerDuty 429s %d%s" % (
        a.store, fmt(report["summary_s"]), fmt(report["last_verdict_s"]), fmt(report["last_slack_post_s"]),
        report["slack"]["http_429"], report["pagerduty"]["http_429"], " (timed out)" if timed_out else ""))
    # Goals missed are numbers to report; a run that never drained is a broken bench.
    return 1 if timed_out else 0


def summarize(a, jobs, by_key, t0, verdicts, slack, pagerduty, culprit_metrics, prom_peak, usage):
    rel = lambda t: None if t is None else round(t - t0, 2)
    # Verdicts: each job exactly one, with the finding and culprit vertex its cause gives.
    per_job = collections.defaultdict(list)
    for v in verdicts:
        per_job[v["verdict"]["job"]["name"]].append(v)
    lost = [j["job_name"] for j in jobs if not per_job.get(j["job_name"])]
    doubled = [j["job_name"] for j in jobs if len(per_job.get(j["job_name"], [])) > 1]
    wrong = []
    for j in jobs:
        vs = sorted(per_job.get(j["job_name"], []), key=lambda v: v["id"])
        if vs:
            v = vs[0]["verdict"]
            culprit = (v.get("culprit") or {}).get("vertex_id")
            if v.get("finding") != j["finding"] or culprit != j["culprit_vertex_id"]:
                wrong.append({"job": j["job_name"], "expected": [j["finding"], j["culprit_vertex_name"]],
                              "got": [v.get("finding"), (v.get("culprit") or {}).get("vertex_name")]})
    firsts = [min(vs, key=lambda v: v["id"])["created_ms"] / 1000.0 for vs in per_job.values()]
    confidences = collections.Counter(min(vs, key=lambda v: v["id"])["verdict"].get("confidence")
                                      for vs in per_job.values())

    posts = [r for r in slack if r["method"] == "chat.postMessage"]
    delivered = [r for r in posts if r["status"] == 200 and r.get("ok")]
    top = [r for r in delivered if not r.get("thread_ts")]
    summaries = [r for r in top if r.get("event_type") == INCIDENT_EVENT_TYPE]
    verdict_posts = collections.Counter(
        (r.get("event_payload") or {}).get("group_key") for r in top if r.get("event_type") == VERDICT_EVENT_TYPE)
    slack_doubled = sorted(by_key[k]["job_name"] for k, n in verdict_posts.items() if n > 1 and k in by_key)
    triggers = collections.Counter(r.get("source") for r in pagerduty
                                   if r["status"] == 202 and r.get("event_action") == "trigger")
    names = [j["job_name"] for j in jobs]

    replicas = []
    for (url, text), (cpu, hwm) in zip(culprit_metrics.items(), usage):
        replicas.append({"url": url, "cpu_s": round(cpu, 2), "peak_rss_mib": None if hwm is None else round(hwm, 1),
                         "prometheus_queries_peak": metric(text, "culprit_prometheus_queries_peak"),
                         "prometheus_queries_max": metric(text, "culprit_prometheus_queries_max"),
                         "diagnoses": diagnoses(text)})
    return {
        "store": a.store, "jobs": len(jobs), "replicas": len(replicas),
        "summary_s": rel(summaries[0]["t"]) if summaries else None,
        "summaries": len(summaries),
        "last_verdict_s": rel(max(firsts)) if firsts else None,
        "last_slack_post_s": rel(max(r["t"] for r in delivered)) if delivered else None,
        "verdicts": {"stored": len(verdicts), "jobs_with_one": sum(1 for n in names if len(per_job.get(n, [])) == 1),
                     "lost": len(lost), "doubled": len(doubled), "wrong": len(wrong),
                     "confidence": dict(confidences),
                     "lost_jobs": lost[:20], "doubled_jobs": doubled[:20], "wrong_jobs": wrong[:20]},
        "slack": {"top_level_posts": len(top), "thread_replies": len(delivered) - len(top),
                  "updates": sum(1 for r in slack if r["method"] == "chat.update" and r["status"] == 200),
                  "history_reads": sum(1 for r in slack if r["method"].startswith("conversations.")),
                  "http_429": sum(1 for r in slack if r["status"] == 429),
                  "errors": dict(collections.Counter(r.get("error") for r in slack if r.get("error"))),
                  "jobs_posted_twice": len(slack_doubled), "jobs_posted_twice_names": slack_doubled[:20]},
        "pagerduty": {"triggers_accepted": sum(triggers.values()),
                      "http_429": sum(1 for r in pagerduty if r["status"] == 429),
                      "jobs_without_trigger": sum(1 for n in names if triggers.get(n, 0) == 0),
                      "jobs_triggered_twice": sum(1 for n in names if triggers.get(n, 0) > 1),
                      "last_accepted_s": rel(max((r["t"] for r in pagerduty if r["status"] == 202), default=None))},
        "prometheus": {"engine_queries_peak": prom_peak["value"], "engine_samples": prom_peak["samples"]},
        "culprit": replicas,
    }


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        v = ("%.1f" % v) if v != int(v) or unit == "s" else str(int(v))
    return "%s%s" % (v, unit)


ROWS = [
    ("jobs / culprit replicas", lambda r: "%d / %d" % (r["jobs"], r["replicas"])),
    ("webhooks sent within", lambda r: fmt(r["webhooks"]["all_sent_s"], " s")),
    ("summary posted (goal <= 30 s)", lambda r: fmt(r["summary_s"], " s")),
    ("last verdict stored (goal <= 90 s)", lambda r: fmt(r["last_verdict_s"], " s")),
    ("last Slack post or reply", lambda r: fmt(r["last_slack_post_s"], " s")),
    ("Slack top-level posts / replies / updates",
     lambda r: "%d / %d / %d" % (r["slack"]["top_level_posts"], r["slack"]["thread_replies"], r["slack"]["updates"])),
    ("Slack 429s (goal 0)", lambda r: str(r["slack"]["http_429"])),
    ("PagerDuty triggers accepted / 429s",
     lambda r: "%d / %d" % (r["pagerduty"]["triggers_accepted"], r["pagerduty"]["http_429"])),
    ("last PagerDuty event accepted", lambda r: fmt(r["pagerduty"]["last_accepted_s"], " s")),
    ("Prometheus queries in flight: culprit peak / bound",
     lambda r: " + ".join(fmt(c["prometheus_queries_peak"]) for c in r["culprit"]) + " / "
     + " + ".join(fmt(c["prometheus_queries_max"]) for c in r["culprit"])),
    ("prometheus_engine_queries peak (sampled)", lambda r: fmt(r["prometheus"]["engine_queries_peak"])),
    ("verdicts lost / doubled / wrong (goal 0)",
     lambda r: "%d / %d / %d" % (r["verdicts"]["lost"], r["verdicts"]["doubled"], r["verdicts"]["wrong"])),
    ("jobs posted twice to Slack / without or twice a PD trigger",
     lambda r: "%d / %d / %d" % (r["slack"]["jobs_posted_twice"], r["pagerduty"]["jobs_without_trigger"],
                                 r["pagerduty"]["jobs_triggered_twice"])),
    ("diagnoses per replica", lambda r: " + ".join(fmt(c["diagnoses"]) for c in r["culprit"])),
    ("culprit CPU time", lambda r: " + ".join(fmt(c["cpu_s"], " s") for c in r["culprit"])),
    ("culprit peak RSS (VmHWM)", lambda r: " + ".join(fmt(c["peak_rss_mib"], " MiB") for c in r["culprit"])),
    ("finished (drained) at / timed out", lambda r: "%s / %s" % (fmt(r["ended_s"], " s"), "yes" if r["timed_out"] else "no")),
]


def table(runs):
    head = ["", *["%s" % r["store"] for r in runs]]
    rows = [[name, *[f(r) for r in runs]] for name, f in ROWS]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    line = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fire")
    f.add_argument("--manifest", required=True)
    f.add_argument("--culprit", action="append", required=True, help="a culprit serve URL (repeat per replica)")
    f.add_argument("--pid", action="append", type=int, required=True, help="its process id (same order)")
    f.add_argument("--prometheus", required=True)
    f.add_argument("--standins", required=True, help="the stand-ins' record directory")
    f.add_argument("--store", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--spread", type=float, default=4.0, help="seconds the webhooks are spread over (< 5)")
    f.add_argument("--timeout", type=float, default=1200.0, help="seconds from the first webhook to give up")
    r = sub.add_parser("ready")
    r.add_argument("url")
    t = sub.add_parser("table")
    t.add_argument("runs", nargs="+")
    t.add_argument("--json")
    a = p.parse_args()
    if a.command == "fire":
        if len(a.pid) != len(a.culprit):
            p.error("one --pid per --culprit")
        return fire(a)
    if a.command == "ready":
        return 0 if http("GET", a.url, timeout=2.0)[0] == 200 else 1
    runs = [json.load(open(r)) for r in a.runs]
    print(table(runs))
    if a.json:
        with open(a.json, "w") as out:
            json.dump(runs, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
