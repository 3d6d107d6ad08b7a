#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets from the captures (examples/captures, and
/work/shared/captures or $CULPRIT_CAPTURES when present) and the shipped configuration.

fuzz/corpus/<target>/ gets small, valid inputs: libFuzzer mutates from them, so a seed
that already parses (and, for recordings, already reaches the diagnosis) is worth more
than a large one. Seeds larger than the target's -max_len would be cut and stop parsing.
"""
import gzip
import hashlib
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_RECORDING = 30_000  # below scripts/fuzz.sh's -max_len for `recording`


def captures():
    dirs = [ROOT / "examples" / "captures"]
    for extra in [os.environ.get("CULPRIT_CAPTURES"), "/work/shared/captures"]:
        if extra and Path(extra).is_dir():
            dirs.append(Path(extra))
    for d in dirs:
        for c in sorted(d.iterdir()):
            if c.is_dir():
                yield c


def put(target, data):
    out = ROOT / "fuzz" / "corpus" / target
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def series_key(line):
    return line.rsplit(" ", 2)[0] if line.count(" ") >= 2 else line.rsplit(" ", 1)[0]


def thin(text, keep_samples, keep_metric):
    """The recording with `keep_samples` newest samples per series of the metrics kept."""
    out, samples = [], {}
    order = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            if line.startswith("# TYPE") or line.startswith("# HELP"):
                name = line.split(" ")[2]
                if keep_metric(name):
                    order.append(("c", line))
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        if not keep_metric(name):
            continue
        key = series_key(line)
        if key not in samples:
            samples[key] = []
            order.append(("s", key))
        samples[key].append(line)
    for kind, v in order:
        if kind == "c":
            out.append(v)
        else:
            out.extend(samples[v][-keep_samples:])
    return "\n".join(out) + "\n# EOF\n"


TASK = re.compile(r"flink_taskmanager_job_task_(busyTime|backPressuredTime|idleTime|numRecords(In|Out)PerSecond)")


def recording_seeds(c):
    for rec in sorted(c.glob("*.om.gz")) + sorted(c.glob("*.om")):
        raw = rec.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        # The job's task ratios and rates, newest samples: reaches collection and diagnosis.
        for keep in (3, 2, 1):
            t = thin(text, keep, lambda n: bool(TASK.match(n)) or n.startswith("flink_jobmanager_job_"))
            if len(t) <= MAX_RECORDING:
                put("recording", t)
                break
        # Small pieces of every kind of line, each a complete input.
        lines = [l for l in text.splitlines() if l != "# EOF"]
        for start in range(0, len(lines), max(1, len(lines) // 6)):
            piece = "\n".join(lines[start:start + 30]) + "\n# EOF\n"
            put("recording", piece)
        put("recording", gzip.compress(("\n".join(lines[:20]) + "\n# EOF\n").encode()))
    for dump in sorted((c / "metrics").glob("*.prom")) if (c / "metrics").is_dir() else []:
        lines = dump.read_text().splitlines()
        for start in range(0, len(lines), max(1, len(lines) // 4)):
            put("recording", "\n".join(lines[start:start + 40]) + "\n")


def main():
    for c in captures():
        for alert in sorted((c / "alerts").glob("*.json")) if (c / "alerts").is_dir() else []:
            put("webhook", alert.read_bytes())
        for plan in [c / "plan.json", c / "rest" / "plan.json"]:
            if plan.is_file():
                put("plan", plan.read_bytes())
        recording_seeds(c)
    # Grafana Alerting's webhook: the payload as Grafana documents it, and report 08's.
    for grafana in [ROOT / "tests" / "data" / "grafana" / "documented-webhook.json",
                    ROOT / "tests" / "data" / "reports3" / "08-grafana-alerting-webhook" / "webhook-grafana.json"]:
        put("webhook", grafana.read_bytes())
    example = (ROOT / "config" / "culprit.example.toml").read_text()
    put("config", example)
    # The example with every commented example uncommented (tests/config_example.rs).
    uncommented = re.sub(r"^# ((\[\[?[a-z_.]+\]\]?)|([a-z_\"-]+ = .*))$", r"\1", example, flags=re.M)
    put("config", uncommented)
    for toml in [ROOT / "lab" / "culprit" / "culprit.toml"]:
        if toml.is_file():
            put("config", toml.read_text())
    cm = (ROOT / "deploy" / "kubernetes" / "configmap.yaml").read_text()
    m = re.search(r"culprit.toml: \|\n((?:    .*\n|\n)+)", cm)
    if m:
        put("config", re.sub(r"^    ", "", m.group(1), flags=re.M))
    for t in ["webhook", "plan", "recording", "config"]:
        d = ROOT / "fuzz" / "corpus" / t
        n = len(list(d.iterdir())) if d.is_dir() else 0
        print(f"seeds: {t}: {n} inputs", file=sys.stderr)


main()
