#!/usr/bin/env python3
"""The report's section on stored responses: compression and sealing.

Reads OUT/stored.json, Google Benchmark JSON of idem-bench-stored
(benchmarks/stored_responses.cc), whose rows are named
StoredResponse/<store>/<size>KiB/<mode>/real_time/threads:1 with the
counters stored_bytes and body_bytes. For each store and body size: the
time of one claim and completion and the bytes the store is handed, each
mode against plain (compression off, not sealed) of the same store and
size in the same run.

make_report.py adds the section to docs/BENCHMARKS.md; alone,

  section_stored.py OUT/stored.json

prints it (benchmarks/stored/bench.sh runs the benchmark and then this).
Python 3 standard library only.
"""

import json
import re
import sys

NAME = re.compile(r"^StoredResponse/(?P<store>[^/]+)/(?P<kib>\d+)KiB/"
                  r"(?P<mode>[^/]+)/real_time/threads:\d+$")
MODES = ["plain", "zstd", "zstd+sealed"]


def load(path):
    """{(store, kib, mode): {"us": ..., "stored": ..., "body": ...}} and
    {(store, kib, mode): error}."""
    with open(path) as f:
        data = json.load(f)
    rows, errors = {}, {}
    for b in data.get("benchmarks", []):
        m = NAME.match(b.get("run_name", b["name"]))
        if not m or b.get("aggregate_name") not in (None, "median"):
            continue
        key = (m["store"], int(m["kib"]), m["mode"])
        if b.get("error_occurred"):
            errors[key] = b.get("error_message", "error")
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b.get("time_unit", "ns")]
        rows[key] = {"us": b["real_time"] * scale,
                     "stored": b.get("stored_bytes", 0),
                     "body": b.get("body_bytes", 0)}
    return rows, errors


def _size(n):
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n:.0f} B"


def section(rows, errors, command="benchmarks/stored/bench.sh"):
    lines = ["## Stored responses: compression and sealing", ""]
    if not rows and not errors:
        return lines + ["Not run (no stored.json).", ""]
    lines += [
        "One Guard claim and completion per operation (`BeginWithKey`, "
        "then `Finish`, which puts the response in its stored form) of a "
        "JSON list body, one thread; *stored* is what the store is handed "
        "(body and headers of the stored form). Modes: **plain** "
        "(compress_stored_above = 0), **zstd** (the default: above 1 KiB, "
        "level 3), **zstd+sealed** (and AES-256-GCM, response_keys). "
        "Ratios are to plain on the same store and size in the same run "
        "(medians when the run had repetitions). A 1 KiB body is at the "
        "default threshold, which compresses only larger ones: its zstd "
        "row shows what the option costs when it does nothing. "
        f"Measured by `{command}` (idem-bench-stored).", "",
        "| store | body | mode | µs/op | × plain time | stored | "
        "× plain size |",
        "|---|---:|---|---:|---:|---:|---:|"]
    for store in sorted({k[0] for k in list(rows) + list(errors)}):
        for kib in sorted({k[1] for k in list(rows) + list(errors)
                           if k[0] == store}):
            base = rows.get((store, kib, "plain"))
            for mode in MODES:
                key = (store, kib, mode)
                if key in errors:
                    lines.append(f"| {store} | {kib} KiB | {mode} | "
                                 f"error: {errors[key]} | | | |")
                    continue
                r = rows.get(key)
                if not r:
                    continue
                t = f"{r['us'] / base['us']:.2f}" if base else "–"
                s = (f"{r['stored'] / base['stored']:.3f}"
                     if base and base["stored"] else "–")
                lines.append(f"| {store} | {kib} KiB | {mode} | "
                             f"{r['us']:.1f} | {t} | {_size(r['stored'])} | "
                             f"{s} |")
    return lines + [""]


def section_from_file(path, command="benchmarks/stored/bench.sh"):
    rows, errors = load(path)
    return section(rows, errors, command)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: section_stored.py OUT/stored.json")
    print("\n".join(section_from_file(sys.argv[1])))
