#!/usr/bin/env python3
"""Stand-ins for Slack's Web API and PagerDuty's Events API v2 that enforce their documented
rate limits and record every request (benches/storm.sh).

Slack (web_api mode, under /api/):
  chat.postMessage   posting messages: about one per second per channel, short bursts
                     above one allowed (https://api.slack.com/docs/rate-limits, "Posting
                     messages: 1 per second, short bursts >1 allowed"). A token bucket per
                     channel: SLACK_POSTS_PER_S refill, --slack-burst tokens (Slack names
                     no number; 3 by default). A thread reply is a message in the channel
                     and counts the same.
  chat.update        Tier 3: 50+ per minute per method and workspace, sporadic bursts
  conversations.history, conversations.replies
                     (https://api.slack.com/docs/rate-limits#tier_t3): a bucket of 50
                     refilled at 50 per minute, per method.
  Beyond a limit: HTTP 429 with Retry-After (seconds) and {"ok": false, "error":
  "ratelimited"}, as Slack answers (https://api.slack.com/docs/rate-limits, "Responding to
  rate limiting conditions"). Otherwise the answers Slack gives: {ok, channel, ts, message}
  for a post, {ok, channel, ts, text} for an update (message_not_found for an unknown ts),
  pages of messages newest first with metadata (include_all_metadata) for the history.

PagerDuty (POST /v2/enqueue): "approximately 120 calls/minute per integration key ...
calculated over a 60 second window looking back from the current time"; beyond it "429 -
Request Limit Exceeded" and the event is not ingested
(https://github.com/PagerDuty/developer-docs/blob/main/docs/events-API-v2/05-Rate-Limits.md).
Only accepted events fill the window (the lenient reading: a stricter one would count the
rejected calls too). Accepted events get 202 {"status": "success", "message": "Event
processed", "dedup_key": ...}; a body without routing_key or event_action gets 400.

Every request is one JSON line in DIR/slack.jsonl or DIR/pagerduty.jsonl: `t` (Unix seconds,
float), `method`, `status`, and what it carried (channel, thread_ts, ts, metadata
event_type and payload, the first 200 characters of the text; routing key's last 4
characters, event_action, dedup_key, the payload's source and summary). GET /_stats on either port answers the counts
so far. The ports (0: free ones) are written to --ready as JSON once both listen.
"""

import argparse
import collections
import json
import math
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

SLACK_POSTS_PER_S = 1.0
TIER3_PER_MINUTE = 50.0
PAGERDUTY_EVENTS_PER_WINDOW = 120
PAGERDUTY_WINDOW_S = 60.0


class Bucket:
    """A token bucket: `capacity` tokens, refilled at `per_s`."""

    def __init__(self, capacity, per_s):
        self.capacity, self.per_s = float(capacity), float(per_s)
        self.tokens, self.at = float(capacity), time.monotonic()

    def take(self):
        """(True, 0) when a token was taken, else (False, seconds until one is there)."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True, 0.0
        return False, (1.0 - self.tokens) / self.per_s


class Recorder:
    def __init__(self, path):
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()
        self.counts = collections.Counter()

    def write(self, record):
        with self.lock:
            self.counts[(record.get("method"), record.get("status"))] += 1
            self.file.write(json.dumps(record, separators=(",", ":")) + "\n")


class Slack:
    def __init__(self, recorder, burst):
        self.recorder = recorder
        self.lock = threading.Lock()
        self.burst = burst
        self.post_buckets = {}
        self.tier3 = {m: Bucket(TIER3_PER_MINUTE, TIER3_PER_MINUTE / 60.0)
                      for m in ("chat.update", "conversations.history", "conversations.replies")}
        # channel -> list of top-level messages, oldest first; ts -> message.
        self.channels = collections.defaultdict(list)
        self.by_ts = {}
        self.last_ts = 0.0

    def new_ts(self):
        # Unique and increasing, in Slack's form: seconds with six decimals.
        t = max(time.time(), self.last_ts + 0.000001)
        self.last_ts = t
        return "%.6f" % t

    def handle(self, method, body, query):
        """(status, headers, answer, record fields)."""
        with self.lock:
            if method == "chat.postMessage":
                return self.post(body)
            if method == "chat.update":
                return self.update(body)
            if method in ("conversations.history", "conversations.replies"):
                return self.read(method, query)
        return 404, {}, {"ok": False, "error": "unknown_method"}, {}

    def limited(self, retry_after_s, fields):
        return 429, {"Retry-After": str(max(1, math.ceil(retry_after_s)))}, {"ok": False, "error": "ratelimited"}, fields

    def post(self, body):
        channel = body.get("channel", "")
        metadata = body.get("metadata") or {}
        fields = {"channel": channel, "thread_ts": body.get("thread_ts"),
                  "event_type": metadata.get("event_type"),
                  "event_payload": metadata.get("event_payload"),
                  "text": (body.get("text") or "")[:200]}
        if not channel:
            return 200, {}, {"ok": False, "error": "channel_not_found"}, fields
        bucket = self.post_buckets.setdefault(channel, Bucket(self.burst, SLACK_POSTS_PER_S))
        ok, wait = bucket.take()
        if not ok:
            return self.limited(wait, fields)
        thread_ts = body.get("thread_ts")
        if thread_ts and thread_ts not in self.by_ts:
            return 200, {}, {"ok": False, "error": "thread_not_found"}, fields
        ts = self.new_ts()
        message = {"type": "message", "ts": ts, "text": body.get("text", ""), "metadata": metadata,
                   "replies": []}
        if thread_ts:
            message["thread_ts"] = thread_ts
            self.by_ts[thread_ts]["replies"].append(message)
        else:
            self.channels[channel].append(message)
        self.by_ts[ts] = message
        fields["ts"] = ts
        answer = {"ok": True, "channel": channel, "ts": ts,
                  "message": {k: v for k, v in message.items() if k != "replies"}}
        return 200, {}, answer, fields

    def update(self, body):
        channel, ts = body.get("channel", ""), body.get("ts", "")
        metadata = body.get("metadata") or {}
        fields = {"channel": channel, "ts": ts, "event_type": metadata.get("event_type"),
                  "event_payload": metadata.get("event_payload"), "text": (body.get("text") or "")[:200]}
        ok, wait = self.tier3["chat.update"].take()
        if not ok:
            return self.limited(wait, fields)
        message = self.by_ts.get(ts)
        if message is None:
            return 200, {}, {"ok": False, "error": "message_not_found"}, fields
        message["text"] = body.get("text", message["text"])
        if metadata:
            message["metadata"] = metadata
        return 200, {}, {"ok": True, "channel": channel, "ts": ts, "text": message["text"]}, fields

    def read(self, method, query):
        q = {k: v[-1] for k, v in query.items()}
        fields = {"channel": q.get("channel"), "ts": q.get("ts"), "cursor": q.get("cursor")}
        ok, wait = self.tier3[method].take()
        if not ok:
            return self.limited(wait, fields)
        channel = q.get("channel", "")
        oldest = float(q.get("oldest") or 0)
        limit = max(1, min(int(q.get("limit") or 100), 999))
        start = int(q.get("cursor") or 0)
        if method == "conversations.history":
            # Newest first, as Slack pages a channel.
            pool = [m for m in reversed(self.channels.get(channel, [])) if float(m["ts"]) >= oldest]
        else:
            parent = self.by_ts.get(q.get("ts", ""))
            if parent is None:
                return 200, {}, {"ok": False, "error": "thread_not_found"}, fields
            pool = [parent] + parent["replies"]
        page = pool[start:start + limit]
        meta = q.get("include_all_metadata") == "true"
        messages = [{k: v for k, v in m.items() if k != "replies" and (meta or k != "metadata")} for m in page]
        more = start + limit < len(pool)
        answer = {"ok": True, "messages": messages, "has_more": more,
                  "response_metadata": {"next_cursor": str(start + limit) if more else ""}}
        return 200, {}, answer, fields


class PagerDuty:
    def __init__(self):
        self.lock = threading.Lock()
        self.accepted = collections.defaultdict(collections.deque)

    def handle(self, body):
        key = body.get("routing_key") or ""
        action = body.get("event_action")
        payload = body.get("payload") or {}
        fields = {"routing_key_end": key[-4:], "event_action": action, "dedup_key": body.get("dedup_key"),
                  "source": payload.get("source"), "summary": (payload.get("summary") or "")[:200]}
        if not key or action not in ("trigger", "acknowledge", "resolve"):
            return 400, {}, {"status": "invalid event", "message": "Event object is invalid",
                             "errors": ["routing_key and event_action are required"]}, fields
        with self.lock:
            window = self.accepted[key]
            now = time.monotonic()
            while window and now - window[0] >= PAGERDUTY_WINDOW_S:
                window.popleft()
            if len(window) >= PAGERDUTY_EVENTS_PER_WINDOW:
                return 429, {}, {"status": "throttle event", "message": "Request Limit Exceeded"}, fields
            window.append(now)
        return 202, {}, {"status": "success", "message": "Event processed", "dedup_key": body.get("dedup_key")}, fields


def handler_for(kind, slack, pagerduty, recorder):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, headers, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def read_body(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not raw:
                return {}
            if "json" in (self.headers.get("Content-Type") or ""):
                try:
                    return json.loads(raw)
                except ValueError:
                    return {}
            return {k: v[-1] for k, v in parse_qs(raw.decode()).items()}

        def do_GET(self):
            self.route(urlparse(self.path), {})

        def do_POST(self):
            self.route(urlparse(self.path), self.read_body())

        def route(self, url, body):
            t = time.time()
            if url.path == "/_stats":
                with recorder.lock:
                    counts = [{"method": m, "status": s, "n": n} for (m, s), n in recorder.counts.items()]
                return self.answer(200, {}, {"counts": counts})
            if kind == "slack" and url.path.startswith("/api/"):
                method = url.path[len("/api/"):]
                status, headers, answer, fields = slack.handle(method, body, parse_qs(url.query))
                if status == 200 and not answer.get("ok"):
                    fields["error"] = answer.get("error")
            elif kind == "pagerduty" and url.path == "/v2/enqueue":
                method = "enqueue"
                status, headers, answer, fields = pagerduty.handle(body)
            else:
                method, status, headers, answer, fields = url.path, 404, {}, {"error": "not found"}, {}
            recorder.write({"t": t, "method": method, "status": status, "ok": answer.get("ok"), **fields})
            self.answer(status, headers, answer)

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="where slack.jsonl and pagerduty.jsonl go")
    p.add_argument("--ready", required=True, help="file the ports are written to, as JSON")
    p.add_argument("--slack-port", type=int, default=0)
    p.add_argument("--pagerduty-port", type=int, default=0)
    p.add_argument("--slack-burst", type=float, default=3.0,
                   help="posts one channel takes at once before the 1/s rate holds (Slack names no number)")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    slack_rec, pd_rec = Recorder(os.path.join(a.dir, "slack.jsonl")), Recorder(os.path.join(a.dir, "pagerduty.jsonl"))
    slack, pagerduty = Slack(slack_rec, a.slack_burst), PagerDuty()
    servers = [
        ThreadingHTTPServer(("127.0.0.1", a.slack_port), handler_for("slack", slack, pagerduty, slack_rec)),
        ThreadingHTTPServer(("127.0.0.1", a.pagerduty_port), handler_for("pagerduty", slack, pagerduty, pd_rec)),
    ]
    for s in servers:
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"slack": servers[0].server_address[1], "pagerduty": servers[1].server_address[1]}, f)
    os.replace(tmp, a.ready)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    for s in servers:
        s.shutdown()


if __name__ == "__main__":
    main()
