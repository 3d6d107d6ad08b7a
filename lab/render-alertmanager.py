#!/usr/bin/env python3
"""Render the lab's Alertmanager config from the project's own route (PyYAML).

Usage: render-alertmanager.py SNIPPET OUT --capture URL [--culprit URL --token-file F] [--fast]

SNIPPET is deploy/alertmanager/culprit-receiver.yml: its routes, its `culprit` receiver and its
inhibit rule are taken unchanged, except where a URL or a file must point into the lab:
  * the culprit receiver posts to --culprit (the lab's `culprit serve`), with the bearer token
    from --token-file; without --culprit it posts to the capture server (path /culprit-receiver),
    so Alertmanager's payloads are recorded even when culprit does not run;
  * slack-oncall and pagerduty-oncall, which the snippet routes to and expects the user to have,
    are real slack_configs / pagerduty_configs pointed at the capture server (/slack-oncall,
    /pagerduty-oncall/v2/enqueue): the capture server stands in for Slack and PagerDuty.
Around it, as in deploy/alertmanager/alertmanager.example.yml, a catch-all child to slack-oncall
after the snippet's routes, and the root route with a first child `lab-recorder` (continue: true) that sends every
alert, grouped per alertname and job_id, to the capture server's /alertmanager: the lab's record
of what fired (capture.py/collect_webhooks.py read it), whatever the project's routes do.
The snippet's timings (group_wait, group_interval) are kept: the lab waits for them.
"""
import argparse
import copy
import sys

import yaml

ap = argparse.ArgumentParser()
ap.add_argument("snippet")
ap.add_argument("out")
ap.add_argument("--capture", required=True, help="capture server base URL")
ap.add_argument("--culprit", help="culprit serve base URL")
ap.add_argument("--token-file", help="bearer token file shared with culprit's server.auth")
a = ap.parse_args()

snippet = yaml.safe_load(open(a.snippet))
routes = copy.deepcopy(snippet["route"]["routes"])
receivers = copy.deepcopy(snippet["receivers"])
names = {r["name"] for r in receivers}
if "culprit" not in names:
    sys.exit("%s: no receiver named culprit" % a.snippet)
for r in receivers:
    if r["name"] != "culprit":
        continue
    for w in r.get("webhook_configs", []):
        if a.culprit:
            w["url"] = a.culprit.rstrip("/") + "/webhook/alertmanager"
            w.setdefault("http_config", {})["authorization"] = {"type": "Bearer", "credentials_file": a.token_file}
        else:
            w["url"] = a.capture.rstrip("/") + "/culprit-receiver"
            w.pop("http_config", None)
used = {"slack-oncall"}
def walk(rs):
    for r in rs:
        used.add(r.get("receiver"))
        walk(r.get("routes", []))
walk(routes)
cap = a.capture.rstrip("/")
if "slack-oncall" in used and "slack-oncall" not in names:
    receivers.append({"name": "slack-oncall", "slack_configs": [
        {"api_url": cap + "/slack-oncall", "channel": "#oncall", "send_resolved": True}]})
if "pagerduty-oncall" in used and "pagerduty-oncall" not in names:
    receivers.append({"name": "pagerduty-oncall", "pagerduty_configs": [
        {"url": cap + "/pagerduty-oncall/v2/enqueue", "routing_key": "lab-routing-key-0000000000000000", "send_resolved": True}]})
receivers.append({"name": "lab-recorder", "webhook_configs": [{"url": cap + "/alertmanager", "send_resolved": True, "max_alerts": 0}]})
missing = used - {r["name"] for r in receivers} - {None}
if missing:
    sys.exit("%s routes to receivers the lab does not know: %s" % (a.snippet, sorted(missing)))

config = {
    "global": {"resolve_timeout": "1m"},
    "route": {
        "receiver": "lab-recorder",
        "group_by": ["alertname", "job_id"],
        "group_wait": "5s",
        "group_interval": "15s",
        "repeat_interval": "2m",
        # the recorder first; the snippet's routes; then, as in alertmanager.example.yml, the
        # catch-all child that sends what continued past them to Slack
        "routes": [{"receiver": "lab-recorder", "continue": True}] + routes + [{"receiver": "slack-oncall"}],
    },
    "receivers": receivers,
    "inhibit_rules": copy.deepcopy(snippet.get("inhibit_rules", [])),
}
with open(a.out, "w") as f:
    f.write("# Rendered by render-alertmanager.py from %s; do not edit.\n" % a.snippet)
    yaml.safe_dump(config, f, sort_keys=False)
print("alertmanager config rendered from %s -> %s" % (a.snippet, a.out))
