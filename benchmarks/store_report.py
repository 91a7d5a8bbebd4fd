#!/usr/bin/env python3
"""Turns idem_store_bench JSON output into the tables of docs/PERFORMANCE_NOTES.md.

Usage:
  idem_store_bench --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true \
      --benchmark_enable_random_interleaving=true \
      --benchmark_out=bench.json --benchmark_out_format=json
  python3 benchmarks/store_report.py bench.json [more.json ...]

Prints a Markdown table of the median ns/op and items/s (or bytes/s) per
benchmark and thread count, then the issue's targets with a verdict each.
Given several files (separate runs, or parts of one run made with
--benchmark_filter), a benchmark found in more than one takes the run whose
median is the median of its runs, and the table shows the spread.
"""

import json
import re
import sys

NAME = re.compile(r"^(?P<bench>[^/<]+)(<(?P<arg>[^>]+)>)?"
                  r"(/iterations:\d+)?/real_time/threads:(?P<threads>\d+)$")


def load(path, rows):
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            sys.exit(f"{b['name']}: {b.get('error_message')}")
        agg = b.get("aggregate_name", "")
        if agg not in ("", "median", "cv"):
            continue
        m = NAME.match(b["run_name"])
        if not m:
            continue
        key = (m["bench"], m["arg"] or "", int(m["threads"]))
        row = runs.setdefault(key, {})
        if agg == "cv":
            row["cv"] = b["real_time"]
        else:
            assert b["time_unit"] == "ns", b["time_unit"]
            row.update(b)
    for key, row in runs.items():
        rows.setdefault(key, []).append(row)
    return data["context"]


def pick(runs):
    """The run with the median time; the spread of all runs' times."""
    ordered = sorted(runs, key=lambda r: r["real_time"])
    return ordered[(len(ordered) - 1) // 2], ordered[0]["real_time"], \
        ordered[-1]["real_time"], len(ordered)


def human(rate):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.2f}{unit}"
    return f"{rate:.0f}"


def main():
    all_runs = {}
    for path in sys.argv[1:]:
        context = load(path, all_runs)
        loads = ", ".join(f"{x:.2f}" for x in context.get("load_avg", []))
        print(f"- {path}: {context.get('date')}, host {context.get('host_name')}"
              f", {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')}"
              f" MHz, load average at start {loads}")
    rows = {}
    spread = {}
    for key, runs in all_runs.items():
        rows[key], low, high, n = pick(runs)
        spread[key] = f"{low:.0f}-{high:.0f} ({n})" if n > 1 else "-"
    print()
    print("| benchmark | store | threads | ns/op (median) | throughput/s | cv "
          "| runs' medians (n) | allocs/op | notes |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for (bench, arg, threads), r in sorted(rows.items()):
        store = arg or "-"
        if "items_per_second" in r:
            rate = human(r["items_per_second"]) + " items"
        else:
            rate = human(r["bytes_per_second"]) + "B"
        cv = f"{100 * r['cv']:.1f}%" if "cv" in r else "-"
        allocs = (f"{r['allocs_per_op']:.2f} ({r['alloc_bytes_per_op']:.0f} B)"
                  if "allocs_per_op" in r else "-")
        notes = ""
        if "replayed" in r:
            notes = (f"acquired {100 * r['acquired']:.2f}%, in_progress "
                     f"{100 * r['in_progress']:.2f}%, replayed "
                     f"{100 * r['replayed']:.2f}%")
        print(f"| {bench} | {store} | {threads} | {r['real_time']:.0f} | "
              f"{rate} | {cv} | {spread[(bench, arg, threads)]} | {allocs} | "
              f"{notes} |")

    def get(bench, arg, threads, field):
        r = rows.get((bench, arg, threads))
        return r[field] if r and field in r else None

    print()
    print("| target | measured | verdict |")
    print("|---|---:|---|")

    def verdict(label, value, ok, fmt):
        if value is None:
            print(f"| {label} | missing | - |")
        elif ok is None:
            print(f"| {label} | {fmt.format(value)} | (no target) |")
        else:
            print(f"| {label} | {fmt.format(value)} | "
                  f"{'met' if ok(value) else 'NOT met'} |")

    unique = "BM_ClaimCompleteUnique"
    verdict("Claim+Complete unique keys, memory, 1 thread <= 500 ns/op",
            get(unique, "Memory", 1, "real_time"),
            lambda v: v <= 500, "{:.0f} ns")
    for threads, want in ((2, 1.5), (32, 2.0)):
        mem = get(unique, "Memory", threads, "items_per_second")
        base = get(unique, "ShardedMutex", threads, "items_per_second")
        ratio = mem / base if mem and base else None
        verdict(f"unique keys, {threads} threads: memory >= {want}x baseline",
                ratio, lambda v, w=want: v >= w, "{:.2f}x")
    hot = "BM_ClaimCompleteHotKey"
    for threads in (1, 2, 8, 32):
        mem = get(hot, "Memory", threads, "items_per_second")
        base = get(hot, "ShardedMutex", threads, "items_per_second")
        ratio = mem / base if mem and base else None
        verdict(f"hot key, {threads} threads: memory / baseline throughput",
                ratio, None, "{:.2f}x")
    fp = get("BM_Fingerprint1KiB", "", 1, "real_time")
    sha = get("BM_Sha256_1KiB", "", 1, "real_time")
    verdict("fingerprint of 1 KiB <= 1.2x raw SHA-256 (1 thread)",
            fp / sha if fp and sha else None, lambda v: v <= 1.2, "{:.2f}x")


if __name__ == "__main__":
    main()
