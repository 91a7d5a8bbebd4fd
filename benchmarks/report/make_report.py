#!/usr/bin/env python3
"""The generated benchmark page (docs/BENCHMARKS.md) and its plots, and the
tables of a measurement by hand: the one report generator of idem-bench.

scripts/bench.sh runs it twice:

  make_report.py machine --command CMD [--quick 0|1] > OUT/machine.json
      The machine and the commit the figures come from (CPU model, cores,
      RAM, kernel, OS, compiler, engine versions, date, git commit, load
      average), taken before the runs.
  make_report.py report --results OUT --markdown docs/BENCHMARKS.md \
                        [--plots docs/bench] [--elapsed S] [--build-seconds S]
      Reads OUT/machine.json, OUT/idem-bench.json (Google Benchmark JSON of
      idem-bench), OUT/http.json (benchmarks/http/bench.sh RESULTS_JSON) and
      OUT/scale-{memory,latency,disk}.txt (idem-scale's key=value lines),
      OUT/idemctl.json (benchmarks/idemctl/bench.sh RESULTS_JSON),
      OUT/grpc.json (benchmarks/grpc/bench.sh RESULTS_JSON; its section
      is grpc_section.py),

      OUT/stored.json (idem-bench-stored; section_stored.py);
      every input but machine.json may be missing, its section then says
      so. Writes the page: ratios to the baselines first (each store against
      its engine's raw write, memory against the sharded-mutex map, HTTP
      against the plain Beast server), then the absolute figures, the
      in-memory stores' allocations per operation and the issues' targets
      with a verdict each. With
      --plots, also throughput.png (ops/s against threads, one panel per
      workload) and http.png (requests/s and p99 per store), which need
      matplotlib (Debian's python3-matplotlib); without it, no plots.
      Then the measured table of WHICH_STORE.md in the same directory as
      the page: the lines between BLOCK_BEGIN and BLOCK_END (below) are
      replaced, the rest of the file is left as it is. No WHICH_STORE.md
      there (say DOCS=/tmp/x): a one-line note; no markers in it: a
      warning, and the file is left unchanged.

  make_report.py runs FILE.json [FILE.json ...]
      For a measurement by hand, not run by scripts/bench.sh: idem-bench's
      JSON of one or more runs, say with --benchmark_repetitions=5
      --benchmark_report_aggregates_only=true
      --benchmark_enable_random_interleaving=true, or parts of one made
      with --benchmark_filter. Prints a Markdown table of every row (the
      median ns/op and throughput; a row found in several files takes the
      run whose time is the median and shows the spread), then the
      issues' targets with a verdict each.

Python 3 standard library only, but for the plots.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys

from grpc_section import section_grpc
import section_stored  # benchmarks/report/section_stored.py

STORES = ["memory", "rocksdb", "sqlite", "postgresql", "redis",
          "redis-cluster"]
WORKLOADS = ["Claim", "ClaimComplete", "Replay", "HotKeyInProgress",
             "HotKeyCompleted", "Zipf"]
WORKLOAD_TEXT = {
    "Claim": "Claim of a new key",
    "ClaimComplete": "Claim of a new key, then Complete",
    "Replay": "Claim of a completed key",
    "HotKeyInProgress": "all threads claim one key held in progress",
    "HotKeyCompleted": "all threads claim one completed key",
    "Zipf": "Zipf(0.99) over 10,000 keys: claim, complete if acquired",
    "HotKeyExpiring": "all threads claim one key that keeps expiring "
                      "(1 µs clock steps, 100 µs ttl), in-memory stores only",
    "RawWrite": "the engine's own write",
    # Lock renewal (Store::ExtendLock): one write per call on every store.
    "ExtendLock": "every thread renews its own claim (ExtendLock), one "
                  "write each",
}
# The issue targets (#3 to #6, #11), as a time per operation over the raw
# write's at the same thread counts: (workload, raw scheme, at most,
# thread counts).
REDIS_THREADS = (1, 8, 32)
RAW_TARGETS = [("ClaimComplete", "rocksdb", 3.0, (1,)),
               ("ClaimComplete", "sqlite", 2.5, (1,)),
               ("Claim", "postgresql", 1.2, (1,)),
               ("ClaimComplete", "postgresql", 2.5, (1,)),
               ("Claim", "redis", 1.5, REDIS_THREADS),
               ("ClaimComplete", "redis", 2.5, REDIS_THREADS),
               ("Claim", "redis-cluster", 1.5, REDIS_THREADS),
               ("ClaimComplete", "redis-cluster", 2.5, REDIS_THREADS)]
RAW_TEXT = {
    "rocksdb": "RocksDB Put",
    "sqlite": "autocommit SQLite INSERT",
    "postgresql": "INSERT .. ON CONFLICT DO NOTHING",
    "redis": "SET NX PX round trip",
    "redis-cluster": "SET NX PX round trip",
}
NAME = re.compile(r"^(?P<workload>[^/]+)/(?P<label>[^/]+)"
                  r"(/iterations:\d+)?(/real_time)?/threads:(?P<threads>\d+)$")


# ---- machine ----------------------------------------------------------------

def _run(args, cwd=None):
    try:
        return subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.rstrip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _proc_field(path, field):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine(args):
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    mem_kb = _proc_field("/proc/meminfo", "MemTotal").split()
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"],
                 cwd=root)
    packages = {}
    for p in ("librocksdb-dev", "libsqlite3-dev", "libpq-dev", "postgresql",
              "libboost1.74-dev", "libbenchmark-dev", "wrk"):
        v = _run(["dpkg-query", "-W", "-f=${Version}", p])
        if v:
            packages[p] = v
    info = {
        "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
        "cores": os.cpu_count(),
        "ram_gib": round(int(mem_kb[0]) / 1024 / 1024, 1) if mem_kb else None,
        "kernel": platform.release(),
        "os": os_name,
        "compiler": _run(["c++", "--version"]).split("\n")[0],
        "packages": packages,
        "date": datetime.datetime.now(datetime.timezone.utc)
                .strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _run(["git", "rev-parse", "HEAD"], cwd=root),
        "commit_subject": _run(["git", "log", "-1", "--format=%s"], cwd=root),
        "dirty_files": [l[3:] for l in dirty.splitlines()],
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "command": args.command,
        "quick": args.quick == "1",
        "postgres_fsync": os.environ.get("IDEM_PG_FSYNC", "off"),
    }
    json.dump(info, sys.stdout, indent=1)
    sys.stdout.write("\n")


# ---- inputs -----------------------------------------------------------------

def load_bench(paths):
    """{(workload, label, threads): row}, the errors apart, the first
    file's context and {key: (lowest, highest, n)} over the runs.

    A file's row is its median aggregate when it ran repetitions (with its
    cv aggregate as "cv"), else its plain runs; over all files' runs of one
    name the row is the one with the median time.
    """
    runs, errors, context = {}, {}, {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        plain, medians, cvs = {}, {}, {}
        for b in data.get("benchmarks", []):
            m = NAME.match(b.get("run_name", b["name"]))
            if not m:
                continue
            key = (m["workload"], m["label"], int(m["threads"]))
            if b.get("error_occurred"):
                errors[key] = b.get("error_message", "error")
                continue
            agg = b.get("aggregate_name")
            if agg == "cv":
                cvs[key] = b["real_time"]
                continue
            if b.get("time_unit", "ns") != "ns":
                sys.exit(f"{b['name']}: time unit {b['time_unit']}, "
                         "expected ns")
            if agg == "median":
                medians[key] = b
            elif not agg:
                plain.setdefault(key, []).append(b)
        for key, b in medians.items():
            runs.setdefault(key, []).append(
                dict(b, cv=cvs[key]) if key in cvs else b)
        for key, bs in plain.items():
            if key not in medians:
                runs.setdefault(key, []).extend(bs)
    rows, spread = {}, {}
    for key, rs in runs.items():
        rs.sort(key=lambda r: r["real_time"])
        rows[key] = rs[(len(rs) - 1) // 2]
        spread[key] = (rs[0]["real_time"], rs[-1]["real_time"], len(rs))
    return rows, errors, context, spread


def load_kv(path):
    """idem-scale's output: one dict per line, the first word as 'kind'."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            row = {"kind": words[0]}
            for w in words[1:]:
                if "=" in w:
                    k, v = w.split("=", 1)
                    try:
                        row[k] = float(v)
                    except ValueError:
                        row[k] = v
            if "=" in words[0]:  # a bare key=value line (vmhwm=...)
                k, v = words[0].split("=", 1)
                row = {"kind": k, k: float(v)}
            out.append(row)
    return out


# ---- formatting -------------------------------------------------------------

def rate(x):
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def duration_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.3g} ns"


def ratio(x):
    return f"{x:.2f}×"


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ---- sections ---------------------------------------------------------------

def _cpu(m):
    return f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores"


def _ram(m):
    return f"{m.get('ram_gib', '?')} GiB"


def _commit(m):
    return m.get("commit", "")[:12] or "unknown"


def _quick_note(m):
    return (" (QUICK: a smoke run, not figures to quote)"
            if m.get("quick") else "")


def section_machine(m, elapsed, build_s, results):
    lines = ["## Machine and run", ""]
    dirty = m.get("dirty_files") or []
    commit_text = f"`{_commit(m)}` ({m.get('commit_subject', '')})"
    if dirty:
        commit_text += (f", plus uncommitted changes to {len(dirty)} "
                        f"file(s): {', '.join(dirty[:5])}")
    rows = [
        ["CPU", _cpu(m)],
        ["RAM", _ram(m)],
        ["OS, kernel", f"{m.get('os', '?')}, Linux {m.get('kernel', '?')}"],
        ["compiler", m.get("compiler", "?") + ", CMake Release (-O3)"],
        ["engines", ", ".join(f"{k} {v}" for k, v in
                              sorted(m.get("packages", {}).items()))],
        ["date", m.get("date", "?")],
        ["commit", commit_text],
        ["load average at start",
         " / ".join(str(x) for x in m.get("load_average", []))
         + " (1 / 5 / 15 min)"],
        ["command", f"`{m.get('command', '?')}`" + _quick_note(m)],
    ]
    if elapsed:
        rows.append(["elapsed", f"{int(elapsed) // 60} min {int(elapsed) % 60} s"
                     + (f" (build {build_s} s)" if build_s is not None else "")
                     + ", until this page was written"])
    lines.append(table(["", ""], rows, ["---", "---"]))
    lines.append("")
    return lines


def _threads(rows):
    return sorted({k[2] for k in rows if k[0] in WORKLOADS})


def _stores(rows):
    present = {k[1] for k in rows}
    labels = [s for s in STORES if s in present]
    extra = sorted({k[1] for k in rows if k[0] in WORKLOADS
                    and k[1] not in STORES and k[1] != "sharded_mutex"})
    return labels + extra


def retimed_note(retimed):
    """The sentence that says which rows come from the second pass of
    repetitions, or nothing."""
    if not retimed:
        return []
    reps = max((r.get("repetitions", 1) for r in retimed.values()),
               default=1)
    labels = ", ".join(f"`{l}`" for l in sorted({k[1] for k in retimed}))
    works = ", ".join(sorted({k[0] for k in retimed}))
    counts = ", ".join(str(t) for t in sorted({k[2] for k in retimed}))
    return [f"The rows of {labels} ({works} at {counts} threads) are from a "
            f"second idem-bench pass of {reps} interleaved repetitions of "
            "1 s, their medians (idem-bench-targets.json): one short sample "
            "of a network round trip varies by more than the targets' "
            "margins from run to run.", ""]


def section_ratios(rows, threads, retimed=None):
    lines = ["## Stores against their baselines", "",
             "Time per operation of the store divided by the baseline's, "
             "in the same run (1.00× = as fast as the baseline; 2.00× = "
             "half its throughput). The baselines: for `memory:`, the "
             "sharded-mutex map (`ShardedMutexStore`, benchmarks/baseline), the "
             "bar the lock-free store has to beat; for the others, "
             "the engine's own write through the same connection setup ("
             + "; ".join(f"{k}: {v}" for k, v in RAW_TEXT.items()
                         if k != "redis-cluster")
             + "). Claim is one write, Claim+Complete two, so about 1× and "
             "2× the raw write are the floors.", ""]
    out = []
    for label in _stores(rows):
        pairs = []
        if label == "memory":
            pairs = [("ClaimComplete", "ClaimComplete", "sharded_mutex",
                      "sharded-mutex map, Claim+Complete")]
        elif ("RawWrite", label, threads[0]) in rows or any(
                k[0] == "RawWrite" and k[1] == label for k in rows):
            raw = RAW_TEXT.get(label.split("_")[0], "raw write")
            pairs = [("Claim", "RawWrite", label, raw),
                     ("ClaimComplete", "RawWrite", label, raw)]
        for workload, base_w, base_l, base_text in pairs:
            cells = []
            for t in threads:
                a, b = rows.get((workload, label, t)), rows.get((base_w, base_l, t))
                cells.append(ratio(a["real_time"] / b["real_time"])
                             if a and b else "–")
            out.append([f"`{label}`", workload, base_text] + cells)
    if not out:
        return lines + ["No baseline rows in this run.", ""]
    lines.append(table(["store", "workload", "baseline"]
                       + [f"{t} thr" for t in threads], out,
                       ["---", "---", "---"] + ["---:"] * len(threads)))
    lines.append("")
    return lines + retimed_note(retimed)


def section_relative(rows, threads):
    """Every store's throughput as a share of memory:'s, per workload."""
    if not any(k[1] == "memory" for k in rows):
        return []
    pick = [t for t in (1, 8) if t in threads] or threads[:1]
    lines = ["### Against the memory store", "",
             "Throughput as a share of `memory:`'s in the same run, at "
             + " and ".join(f"{t}" for t in pick) + " thread(s).", ""]
    stores = [s for s in _stores(rows) if s != "memory"]
    out = []
    for w in WORKLOADS:
        cells = []
        for s in stores:
            parts = []
            for t in pick:
                a, m = rows.get((w, s, t)), rows.get((w, "memory", t))
                parts.append(f"{100 * m['real_time'] / a['real_time']:.2g}%"
                             if a and m else "–")
            cells.append(" / ".join(parts))
        out.append([w] + cells)
    lines.append(table(["workload"] + [f"`{s}`" for s in stores], out))
    lines.append("")
    return lines


def section_throughput(rows, errors, threads, plots):
    lines = ["## Throughput per workload", "",
             "Operations per second over all threads (`items_per_second`, "
             "wall clock), and the time per operation it implies. A store "
             "gets a fresh database for every run.", ""]
    if plots:
        lines += ["![ops/s against threads, one panel per workload]"
                  "(bench/throughput.png)", ""]
    labels = _stores(rows) + ["sharded_mutex"]
    for w in WORKLOADS + ["HotKeyExpiring", "ExtendLock", "RawWrite"]:
        cols = [l for l in labels if any(k[0] == w and k[1] == l for k in rows)
                or any(k[0] == w and k[1] == l for k in errors)]
        if not cols:
            continue
        lines += [f"### {w}: {WORKLOAD_TEXT[w]}", ""]
        out = []
        for t in threads:
            cells = []
            for l in cols:
                r = rows.get((w, l, t))
                if r:
                    cell = (f"{rate(r['items_per_second'])}/s "
                            f"({duration_ns(r['real_time'])})")
                    if w in ("Zipf", "HotKeyExpiring") and "conflicts" in r:
                        cell += f", {100 * r['conflicts']:.2g}% conflicts"
                    cells.append(cell)
                else:
                    cells.append("skipped" if (w, l, t) in errors else "–")
            out.append([str(t)] + cells)
        lines.append(table(["threads"] + [f"`{l}`" for l in cols], out))
        lines.append("")
    if errors:
        lines += ["Rows skipped with an error:", ""]
        for (w, l, t), e in sorted(errors.items()):
            lines.append(f"- `{w}/{l}` at {t} threads: {e}")
        lines.append("")
    return lines


def targets(rows):
    """[target, measured, verdict] of the issues' targets this run has
    rows for: the memory store against the sharded-mutex map, hashing
    against a bare SHA-256, the other stores against their raw write."""
    out = []

    def get(w, label, t, field):
        r = rows.get((w, label, t))
        return r.get(field) if r else None

    def over(a, b):
        return a / b if a is not None and b else None

    def verdict(text, value, fmt, limit=None, at_least=False):
        if value is None:
            return
        ok = "(no target)" if limit is None else (
            "met" if (value >= limit if at_least else value <= limit)
            else "NOT met")
        out.append([text, fmt.format(value), ok])

    verdict("Claim+Complete of new keys, `memory`, 1 thread ≤ 500 ns",
            get("ClaimComplete", "memory", 1, "real_time"), "{:.0f} ns", 500)
    for t, want in ((2, 1.5), (32, 2.0)):
        verdict(f"Claim+Complete, {t} threads: `memory` ≥ {want}× the "
                "sharded-mutex map's throughput",
                over(get("ClaimComplete", "memory", t, "items_per_second"),
                     get("ClaimComplete", "sharded_mutex", t,
                         "items_per_second")), "{:.2f}×", want, True)
    for t in sorted({k[2] for k in rows if k[0] == "HotKeyExpiring"}):
        verdict(f"hot key that keeps expiring, {t} thread(s): `memory` / "
                "sharded-mutex map throughput",
                over(get("HotKeyExpiring", "memory", t, "items_per_second"),
                     get("HotKeyExpiring", "sharded_mutex", t,
                         "items_per_second")), "{:.2f}×")
    verdict("fingerprint of 1 KiB ≤ 1.2× a bare SHA-256 (1 thread)",
            over(get("Fingerprint", "1KiB", 1, "real_time"),
                 get("Sha256", "1KiB", 1, "real_time")), "{:.2f}×", 1.2)
    labels = sorted({k[1] for k in rows if k[0] == "RawWrite"})
    for w, scheme, limit, counts in RAW_TARGETS:
        for label in labels:
            if label.split("_")[0] != scheme:
                continue
            for t in counts:
                verdict(f"{w}, `{label}`, {t} thread{'' if t == 1 else 's'} "
                        f"≤ {limit}× its {RAW_TEXT[scheme]}",
                        over(get(w, label, t, "real_time"),
                             get("RawWrite", label, t, "real_time")),
                        "{:.2f}×", limit)
    return out


def section_targets(rows, retimed=None):
    out = targets(rows)
    if not out:
        return []
    return ["## Targets", "",
            "The issues' targets against this run's rows (a ratio is of "
            "times per operation, or of throughputs where it says so).", "",
            table(["target", "measured", "verdict"], out,
                  ["---", "---:", "---"]), ""] + retimed_note(retimed)


def allocs(r):
    return (f"{r['allocs_per_op']:.2f} ({r['alloc_bytes_per_op']:.0f} B)"
            if r and "allocs_per_op" in r else "–")


def section_allocations(rows, threads):
    """operator new calls (and bytes) per operation of the in-memory
    stores: on them allocation is most of the cost."""
    labels = [l for l in ("memory", "sharded_mutex")
              if any(k[1] == l and "allocs_per_op" in r
                     for k, r in rows.items())]
    all_threads = sorted({k[2] for k in rows if k[1] in labels})
    pick = [t for t in (1, _t_hi(threads)) if t in all_threads]
    out = []
    for w in WORKLOADS + ["HotKeyExpiring"]:
        for l in labels:
            cells = [allocs(rows.get((w, l, t))) for t in pick]
            if any(c != "–" for c in cells):
                out.append([w, f"`{l}`"] + cells)
    if not out:
        return []
    return ["## Allocations per operation", "",
            "`operator new` calls (and bytes) per operation on the "
            "benchmark's threads, for the in-memory stores, where "
            "allocation is most of the cost.", "",
            table(["workload", "store"] + [f"{t} thr" for t in pick], out,
                  ["---", "---"] + ["---:"] * len(pick)), ""]


def section_async_calls(rows):
    """The stores' asynchronous calls (Store::ClaimAsync, CompleteAsync)
    from one thread, against their synchronous Claim+Complete on one
    thread: what an adapter's I/O thread gets from them."""
    out = []
    for s in STORES:
        a = rows.get(("ClaimCompleteAsync", s, 1))
        if not a or "items_per_second" not in a:
            continue
        sync = rows.get(("ClaimComplete", s, 1))
        ratio = (f"{a['items_per_second'] / sync['items_per_second']:.2f}×"
                 if sync and sync.get("items_per_second") else "–")
        out.append([f"`{s}`", rate(a["items_per_second"]) + "/s",
                    duration_ns(a["cpu_time"]),
                    rate(sync["items_per_second"]) + "/s" if sync else "–",
                    ratio])
    if not out:
        return []
    return ["## Asynchronous store calls", "",
            "`ClaimCompleteAsync`: one benchmark thread keeps 32 claims of "
            "new keys in flight through `Store::ClaimAsync`, each completed "
            "in its callback with `CompleteAsync`, as an adapter's I/O "
            "thread makes them; against `ClaimComplete`, the synchronous "
            "calls on one thread. CPU is the benchmark thread's per "
            "Claim+Complete (the store's own threads not counted). Stores "
            "without asynchronous calls are not run.", "",
            table(["store", "async, 1 thread", "CPU per op (caller)",
                   "sync, 1 thread", "async / sync"], out), ""]


def section_hashing(rows):
    out = []
    for size in ("64B", "1KiB", "64KiB"):
        cells = []
        for h in ("Fingerprint", "RecordId", "Sha256"):
            r = rows.get((h, size, 1))
            cells.append(duration_ns(r["real_time"]) if r else "–")
        if any(c != "–" for c in cells):
            out.append([size] + cells)
    if not out:
        return []
    return ["## Hashing per request", "",
            "One thread: the request fingerprint, the record id of a key, "
            "and a bare SHA-256 of the same bytes (the floor).", "",
            table(["bytes", "fingerprint", "record id", "SHA-256"], out), ""]


def section_http(http, plots):
    lines = ["## HTTP: idem-demo on each store against the plain server", ""]
    if not http:
        return lines + ["Not run (no http.json).", ""]
    c = http["config"]
    lines += [
        f"`wrk -t{c['wrk_threads']} -c{c['connections']} -d{c['duration']} "
        f"--latency`, {c['rounds']} round(s) interleaved (medians), "
        f"`idem-demo --threads {c['server_threads']}`"
        + (f" {c['demo_flags']}" if c.get("demo_flags") else "")
        + f", wrk and server on the same {c['cores']} cores. `plain` is "
        "`idem-demo --no-idem` (the same Beast server and handler, no "
        "idem); `fresh:` loads send a new key with every request (a claim, "
        "the handler, a completion), `replay:` the same completed key.", ""]
    loads = {l["name"]: l for l in http["loads"]}
    plain = loads.get("plain")
    out = []
    for l in http["loads"]:
        if l["name"].startswith(RESTINIO_PREFIX):
            continue  # section_http_restinio, against its own plain server.
        rps, p99 = l["requests_per_s"], l["p99_us"]
        paired = round_share(http, l["name"])
        out.append([
            f"`{l['name']}`",
            f"{100 * rps / plain['requests_per_s']:.0f}%" if plain else "–",
            f"{100 * paired:.0f}%" if paired is not None else "–",
            ratio(p99 / plain["p99_us"]) if plain else "–",
            f"{rps:,.0f}", f"{l['p50_us'] / 1000:.2f}",
            f"{p99 / 1000:.2f}", str(l["non2xx"])])
    lines.append(table(["load", "req/s vs plain", "same round", "p99 vs plain",
                        "requests/s", "p50 (ms)", "p99 (ms)", "non-2xx"], out))
    lines += ["", "`req/s vs plain` divides the load's median by plain's; "
              "`same round` is the median over the rounds of the load's "
              "requests/s over plain's in the same round (plain runs first "
              "in each round, the fresh-key loads right after it), which "
              "a machine whose speed drifts between rounds moves less."]
    lines += durable_target_lines(http, loads)
    lines += ["", "Stores: " + ", ".join(
        f"`{k}` = `{v}`" for k, v in http["stores"].items())
        + " (`{tmp}`: a fresh directory).", ""]
    lines += local_cache_lines(loads)
    if plots:
        lines += ["![HTTP requests/s and p99 per store](bench/http.png)", ""]
    return lines + http_notes()


def round_share(http, name, base="plain"):
    """The median over the rounds of name's requests/s over base's in the
    same round (bench.sh's raw figures); None without both in any round."""
    by_round = {}
    for r in http.get("raw", []):
        by_round.setdefault(r["round"], {})[r["name"]] = r["requests_per_s"]
    shares = [v[name] / v[base] for v in by_round.values()
              if name in v and v.get(base)]
    return statistics.median(shares) if shares else None


# Issue #32: fresh keys on the durable stores as a share of the plain
# server's requests/s.
DURABLE_HTTP_TARGETS = [("rocksdb", 0.60), ("sqlite", 0.40),
                        ("postgresql", 0.30), ("redis", 0.45)]


def durable_target_lines(http, loads):
    plain = loads.get("plain")
    if not plain:
        return [""]
    parts = []
    for store, target in DURABLE_HTTP_TARGETS:
        load = loads.get(f"fresh:{store}")
        if not load:
            continue
        medians = load["requests_per_s"] / plain["requests_per_s"]
        paired = round_share(http, f"fresh:{store}")
        both = [medians] + ([paired] if paired is not None else [])
        verdict = ("met" if min(both) >= target else
                   "missed" if max(both) < target else "met by one measure")
        parts.append(
            f"`{store}` {100 * load['requests_per_s'] / plain['requests_per_s']:.0f}%"
            + (f" ({100 * paired:.0f}% same round)"
               if paired is not None else "")
            + f" of plain, target >= {100 * target:.0f}%: {verdict}")
    if not parts:
        return [""]
    return ["", "Durable stores over HTTP (issue #32): " + "; ".join(parts)
            + ".", ""]


# Hand-written notes on the HTTP figures (where a request's time goes, per
# hop), kept in benchmarks/http/NOTES.md so that a regenerated page keeps
# them; none when the file is missing.
HTTP_NOTES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          os.pardir, "http", "NOTES.md")


def http_notes():
    if not os.path.exists(HTTP_NOTES):
        return []
    with open(HTTP_NOTES) as f:
        return f.read().rstrip("\n").split("\n") + [""]


# Replays on a remote store with its local cache (`replay:<scheme>+cache`)
# against replay:memory: the cache's target is >= 90%.
LOCAL_CACHE_TARGET = 0.90


def local_cache_lines(loads):
    memory = loads.get("replay:memory")
    cached = [n for n in loads if n.startswith("replay:") and
              n.endswith("+cache")]
    if not memory or not cached:
        return []
    parts = []
    for name in cached:
        share = loads[name]["requests_per_s"] / memory["requests_per_s"]
        without = loads.get(name[:-len("+cache")])
        gain = (f", {loads[name]['requests_per_s'] / without['requests_per_s']:.2f}x "
                f"`{without['name']}`" if without else "")
        verdict = "met" if share >= LOCAL_CACHE_TARGET else "missed"
        parts.append(f"`{name}` {100 * share:.0f}% of `replay:memory`{gain} "
                     f"({verdict})")
    return ["Local cache (`local_cache=N`, docs/STORES.md): " +
            "; ".join(parts) + f". Target: >= {100 * LOCAL_CACHE_TARGET:.0f}% "
            "of `replay:memory`. (A cache hit is answered on the I/O thread, "
            "as memory's replays are: Store::TryClaimWithoutBlocking; the "
            "`replay:<scheme>+cache` servers hold only the replayed keys, "
            "while `replay:memory`'s server also served the fresh-key load.)",
            ""]


# --- RESTinio: idem-demo --http restinio against its own plain server
# (benchmarks/http/bench.sh, loads named restinio:<load>), the Beast
# figures beside, with the targets of the RESTinio adapter.
RESTINIO_PREFIX = "restinio:"
RESTINIO_FRESH_TARGET = 0.90  # fresh keys on memory: >= 90% of plain.


def section_http_restinio(http):
    loads = {l["name"]: l for l in http["loads"]} if http else {}
    rplain = loads.get(RESTINIO_PREFIX + "plain")
    lines = ["## HTTP on RESTinio: idem-demo --http restinio against the "
             "plain RESTinio server", ""]
    if not rplain:
        return lines + ["Not run (no restinio: loads in http.json).", ""]
    lines += [
        "`restinio:plain` is `idem-demo --http restinio --no-idem` (the same "
        "handler behind RESTinio, no idem); the other rows run idem's "
        "RESTinio adapter, in the same run as the Beast rows above (beside "
        "them here). Targets: fresh keys on the memory store >= "
        f"{100 * RESTINIO_FRESH_TARGET:.0f}% of the plain RESTinio server's "
        "requests/s; replays >= 100%.", ""]
    out = []
    for name, l in loads.items():
        if not name.startswith(RESTINIO_PREFIX):
            continue
        load = name[len(RESTINIO_PREFIX):]
        share = l["requests_per_s"] / rplain["requests_per_s"]
        target = ""
        if load.startswith("fresh:memory"):
            target = "met" if share >= RESTINIO_FRESH_TARGET else "MISSED"
        elif load.startswith("replay:"):
            target = "met" if share >= 1.0 else "MISSED"
        beast = loads.get(load)
        out.append([
            f"`{name}`", f"{100 * share:.0f}%",
            ratio(l["p99_us"] / rplain["p99_us"]),
            f"{l['requests_per_s']:,.0f}", f"{l['p99_us'] / 1000:.2f}",
            f"{beast['requests_per_s']:,.0f}" if beast else "–",
            target or "–", str(l["non2xx"])])
    lines.append(table(["load", "req/s vs restinio:plain",
                        "p99 vs restinio:plain", "requests/s", "p99 (ms)",
                        "Beast requests/s", "target", "non-2xx"], out))
    return lines + [""]
# --- end RESTinio


def section_idemctl(ctl):
    """OUT/idemctl.json (benchmarks/idemctl/bench.sh): a plain table."""
    lines = ["## idemctl inspect: process start to exit", ""]
    if not ctl:
        return lines + ["Not run (no idemctl.json).", ""]
    base = ctl["baselines"]["true"]["median_ms"]
    lines += [
        f"`idemctl --store URI inspect --key K` of a key with a record, "
        f"{ctl['runs']} runs per store (median and p90), on "
        f"{ctl['cores']} cores, against starting `/bin/true` and "
        "`idemctl --help` (idemctl's own start, no store) in the same run. "
        "Each run opens the store, reads one record and exits.", ""]
    rows = [("/bin/true", ctl["baselines"]["true"]),
            ("idemctl --help", ctl["baselines"]["help"])]
    rows += [(s["name"], s) for s in ctl["stores"]]
    lines.append(table(
        ["run", "median (ms)", "p90 (ms)", "vs /bin/true"],
        [[f"`{name}`", f"{s['median_ms']:.1f}", f"{s['p90_ms']:.1f}",
          ratio(s["median_ms"] / base)] for name, s in rows]))
    lines += ["", "Stores: " + ", ".join(
        f"`{s['name']}` = `{s['uri']}`" for s in ctl["stores"])
        + " (`{tmp}`: a fresh directory).", ""]
    return lines


def footprints(mem, disk):
    """idem-scale's bytes per record, in its order: (store, row, bytes per
    record, ratio to the payload); memory: peak RSS, rocksdb: SST files
    after close, sqlite: the file after a checkpoint."""
    out = [("memory", r, r["peak_bytes_per_record"], r["ratio_to_payload"])
           for r in mem if r["kind"] == "memory"]
    for r in (x for x in disk if x["kind"] == "disk"):
        if r.get("store") == "rocksdb":
            out.append(("rocksdb", r, r["sst_bytes_per_record"],
                        r["sst_ratio_to_payload"]))
        elif r.get("store") == "sqlite":
            out.append(("sqlite", r, r["bytes_per_record"],
                        r["ratio_to_payload"]))
    return out


def section_scale(mem, lat, disk):
    if not (mem or lat or disk):
        return []
    lines = ["## Memory and scale (idem-scale, reduced sizes)", "",
             "Payload of a record: body + 96 bytes (id, fingerprint, token, "
             "two times).", ""]
    for store, r, per_record, to_payload in footprints(mem, disk):
        if store == "memory":
            lines += [f"- `memory:` peak RSS with {int(r['records']):,} "
                      f"completed records of {int(r['body'])}-byte bodies: "
                      f"**{per_record:.0f} B per record**, "
                      f"{to_payload:.2f}× the "
                      f"{int(r['payload_per_record'])}-byte payload "
                      "(issue #6's target: ≤ 2×)."]
        elif store == "rocksdb":
            lines.append(f"- `rocksdb:` on disk after close, "
                         f"{int(r['records']):,} records: "
                         f"{per_record:.0f} B per record in "
                         f"SST files ({to_payload:.2f}× the payload).")
        else:
            lines.append(f"- `sqlite:` on disk after a checkpoint, "
                         f"{int(r['records']):,} records: "
                         f"{per_record:.0f} B per record "
                         f"({to_payload:.2f}× the payload).")
    lines.append("")
    lat_rows = [x for x in lat + disk if x["kind"] == "latency"]
    if lat_rows:
        lines += ["Claim latency against the records held, one thread, each "
                  "probe timed alone: p50 / p99 in µs. `claim_new`: a new "
                  "key (insert); `claim_replay`: a random completed key; "
                  "`claim_replay_small_set`: replays over the same "
                  "subset of keys at every size (the smallest size's count: "
                  "the same working set).", ""]
        out = []
        ops = ["claim_new", "claim_replay", "claim_replay_small_set"]
        seen = []
        for r in lat_rows:
            k = (r["store"], r["config"], int(r["held"]))
            if k not in seen:
                seen.append(k)
        for store, config, held in seen:
            cells = []
            for op in ops:
                r = next((x for x in lat_rows if x["store"] == store and
                          x["config"] == config and int(x["held"]) == held
                          and x["op"] == op), None)
                cells.append(f"{r['p50_ns'] / 1000:.2f} / "
                             f"{r['p99_ns'] / 1000:.2f}" if r else "–")
            out.append([f"`{store}`", config, f"{held:,}"] + cells)
        lines.append(table(["store", "store sized", "records held"] + ops, out,
                           ["---", "---"] + ["---:"] * 4))
        lines.append("")
    return lines


def _t_hi(threads):
    """The thread count the summaries quote besides 1."""
    return 8 if 8 in threads else (threads[-1] if threads else None)


def section_transfers(transfers):
    """POST /transfers with the record completed after the business commit
    (classic) and inside it (--exactly-once), per SQL store."""
    lines = ["## Exactly once: POST /transfers, classic against "
             "--exactly-once", ""]
    if not transfers:
        return lines + ["Not run (no transfers.json).", ""]
    c = transfers["config"]
    loads = {l["name"]: l for l in transfers["loads"]}
    lines += ["| load | requests/s | p50 (ms) | p99 (ms) | vs classic "
              "(req/s) | p99 vs classic | non-2xx |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for l in transfers["loads"]:
        base = loads.get(l["name"].rsplit("_", 1)[0] + "_classic", l)
        lines.append(
            f"| {l['name']} | {l['requests_per_s']:.0f} | "
            f"{l['p50_us'] / 1000:.2f} | {l['p99_us'] / 1000:.2f} | "
            f"{100 * l['requests_per_s'] / base['requests_per_s']:.0f}% | "
            f"{l['p99_us'] / base['p99_us']:.2f}x | {l['non2xx']} |")
    lines += ["", f"Fresh keys, each request a row in the store's own "
              f"database: wrk -t{c['wrk_threads']} -c{c['connections']} "
              f"-d{c['duration']}, {c['rounds']} rounds (medians), idem-demo "
              f"--threads {c['server_threads']}, {c['cores']} cores; "
              "`_classic` completes the record after the commit, `_once` "
              "inside the business transaction; both run that transaction "
              "on a connection of the store's (SQLite: its writer; "
              "PostgreSQL: one its pool lends) "
              "(benchmarks/http/transfers_bench.sh).", ""]
    return lines


def _http_loads(http):
    return {l["name"]: l for l in http["loads"]} if http else {}


def store_figures(rows, t_hi, loads, s):
    """The figures a reader compares first, for store s (the Summary of
    BENCHMARKS.md and the measured table of WHICH_STORE.md); None where the
    run has none. cc_1, cc_hi, replay_hi: ops/s; vs_baseline: time per
    Claim+Complete over the baseline's at t_hi threads (memory: the
    sharded-mutex map; the others: their engine's raw write); http_*: fresh
    keys, share of the plain server's requests/s, p99 in ms."""
    def ops(w, t):
        r = rows.get((w, s, t))
        return r["items_per_second"] if r else None
    base = (rows.get(("ClaimComplete", "sharded_mutex", t_hi))
            if s == "memory" else rows.get(("RawWrite", s, t_hi)))
    cc = rows.get(("ClaimComplete", s, t_hi))
    h, plain = loads.get(f"fresh:{s}"), loads.get("plain")
    return {
        "cc_1": ops("ClaimComplete", 1),
        "cc_hi": ops("ClaimComplete", t_hi),
        "vs_baseline": cc["real_time"] / base["real_time"]
        if cc and base else None,
        "replay_hi": ops("Replay", t_hi),
        "http_rps": h["requests_per_s"] if h else None,
        "http_share": h["requests_per_s"] / plain["requests_per_s"]
        if h and plain else None,
        "http_p99_ms": h["p99_us"] / 1000 if h else None,
    }


def section_summary(rows, threads, http):
    """One line per store: the figures a reader compares first."""
    t_hi = _t_hi(threads)
    loads = _http_loads(http)
    out = []
    for s in _stores(rows):
        f = store_figures(rows, t_hi, loads, s)

        def ops(k):
            return f"{rate(f[k])}/s" if f[k] is not None else "–"
        out.append([f"`{s}`", ops("cc_1"), ops("cc_hi"),
                    ratio(f["vs_baseline"])
                    if f["vs_baseline"] is not None else "–",
                    ops("replay_hi"),
                    f"{f['http_rps']:,.0f} ({100 * f['http_share']:.0f}%)"
                    if f["http_share"] is not None else "–",
                    f"{f['http_p99_ms']:.2f}"
                    if f["http_p99_ms"] is not None else "–"])
    if not out:
        return []
    return ["## Summary", "",
            f"Claim+Complete on new keys at 1 and {t_hi} threads; its cost "
            f"against the baseline at {t_hi} threads (memory: the "
            "sharded-mutex map; the others: their engine's raw write); "
            f"replays at {t_hi} threads; HTTP requests/s on fresh keys (share "
            "of the plain server's) and p99.", "",
            table(["store", "Claim+Complete 1 thr", f"Claim+Complete {t_hi} thr",
                   "vs baseline", f"Replay {t_hi} thr", "HTTP req/s (vs plain)",
                   "HTTP p99 (ms)"], out), ""]


# ---- WHICH_STORE.md ---------------------------------------------------------

BLOCK_BEGIN = "<!-- generated by benchmarks/report/make_report.py: begin -->"
BLOCK_END = "<!-- generated by benchmarks/report/make_report.py: end -->"
NOT_MEASURED = "not measured"


def which_store_block(m, rows, threads, http, mem, disk):
    """WHICH_STORE.md's measured table and the lines before it, from the
    figures of the Summary and of the scale section, one column per store
    of STORES ("not measured" where the run has none)."""
    t_hi = _t_hi(threads) or 8
    loads = _http_loads(http)
    plain = loads.get("plain")
    figs = {s: store_figures(rows, t_hi, loads, s) for s in STORES}
    prints = {store: (r, per_record)
              for store, r, per_record, _ in footprints(mem, disk)}

    def cell(s, k, fmt):
        v = figs[s][k]
        return fmt(v) if v is not None else NOT_MEASURED

    def pair(s):
        a, b = figs[s]["cc_1"], figs[s]["cc_hi"]
        if a is None and b is None:
            return NOT_MEASURED
        return " / ".join(rate(x) if x is not None else NOT_MEASURED
                          for x in (a, b))

    def share(s):
        f = figs[s]
        if f["http_rps"] is None:
            return NOT_MEASURED
        return (f"{f['http_rps']:,.0f}"
                + (f" ({100 * f['http_share']:.0f}%)"
                   if f["http_share"] is not None else ""))

    # Payload: body + 96 bytes (see section_scale).
    bodies = {int(r["payload_per_record"]) - 96 for r, _ in prints.values()}

    def footprint(s):
        if s not in prints:
            return NOT_MEASURED
        r, per_record = prints[s]
        where = "of RAM" if s == "memory" else "on disk"
        return (f"{per_record:.0f} B {where} at {rate(r['records'])} records"
                + (f" ({int(r['payload_per_record']) - 96}-byte body)"
                   if len(bodies) > 1 else ""))

    dirty = " plus uncommitted changes" if m.get("dirty_files") else ""
    load = (m.get("load_average") or ["?"])[0]
    lines = [f"*Generated by `{m.get('command', 'scripts/bench.sh')}` from "
             f"its run of {m.get('date', '?')} on {_cpu(m)}, {_ram(m)} RAM "
             f"(commit `{_commit(m)}`{dirty}, load average {load} at the "
             "start)" + _quick_note(m) + "; do not edit between the "
             "markers, the next run rewrites it. Every figure of that run, "
             "and the machine: [BENCHMARKS.md](BENCHMARKS.md).*", ""]
    sentence = []
    if plain:
        sentence.append("The plain server (`idem-demo --no-idem`) served "
                        f"{plain['requests_per_s']:,.0f} requests/s with a "
                        f"p99 of {plain['p99_us'] / 1000:.2f} ms in that "
                        "run.")
    if figs["postgresql"]["cc_1"] is not None or "fresh:postgresql" in loads:
        sentence.append("PostgreSQL: a throwaway server on the same machine "
                        "(`scripts/postgres.sh`), fsync "
                        + ("on." if m.get("postgres_fsync") == "on"
                           else "off (a commit costs no disk flush)."))
    if sentence:
        lines += [" ".join(sentence), ""]
    p99_label = ("HTTP p99 (ms; plain "
                 + (f"{plain['p99_us'] / 1000:.2f}" if plain
                    else NOT_MEASURED) + ")")
    out = [
        [f"Claim+Complete, 1 / {t_hi} threads (ops/s)"]
        + [pair(s) for s in STORES],
        [f"vs baseline, {t_hi} threads"]
        + [cell(s, "vs_baseline", ratio) for s in STORES],
        [f"replays, {t_hi} threads (ops/s)"]
        + [cell(s, "replay_hi", rate) for s in STORES],
        ["HTTP requests/s on fresh keys (share of the plain server's)"]
        + [share(s) for s in STORES],
        [p99_label] + [cell(s, "http_p99_ms", lambda x: f"{x:.2f}")
                       for s in STORES],
        ["footprint per record (idem-scale"
         + (f", {next(iter(bodies))}-byte body)" if len(bodies) == 1
            else ")")]
        + [footprint(s) for s in STORES],
    ]
    lines.append(table(["measured"] + [f"`{s}:`" for s in STORES], out))
    return lines


def replace_block(text, block):
    """text with what lies between BLOCK_BEGIN and BLOCK_END replaced by
    block (lines); None unless each marker is there once, in that order."""
    if text.count(BLOCK_BEGIN) != 1 or text.count(BLOCK_END) != 1:
        return None
    i = text.index(BLOCK_BEGIN) + len(BLOCK_BEGIN)
    j = text.index(BLOCK_END)
    if j < i:
        return None
    return text[:i] + "\n\n" + "\n".join(block) + "\n\n" + text[j:]


def update_which_store(path, block):
    """Rewrites the generated block of the page at path, if any."""
    if not os.path.exists(path):
        print(f"make_report.py: no {path}: only BENCHMARKS.md written",
              file=sys.stderr)
        return
    with open(path) as f:
        text = f.read()
    new = replace_block(text, block)
    if new is None:
        print(f"make_report.py: warning: {path} lacks one '{BLOCK_BEGIN}' "
              f"and one '{BLOCK_END}' line (in that order): left unchanged",
              file=sys.stderr)
        return
    if new != text:
        with open(path, "w") as f:
            f.write(new)


# ---- plots ------------------------------------------------------------------

def plot(rows, http, directory):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("make_report.py: no matplotlib (apt-get install "
              "python3-matplotlib): no plots", file=sys.stderr)
        return False
    os.makedirs(directory, exist_ok=True)
    meta = {"Software": None}  # Same bytes for the same figures.
    threads = _threads(rows)
    stores = _stores(rows)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), constrained_layout=True)
    for ax, w in zip(axes.flat, WORKLOADS):
        for s in stores:
            pts = [(t, rows[(w, s, t)]["items_per_second"]) for t in threads
                   if (w, s, t) in rows]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=s)
        if w == "ClaimComplete":
            pts = [(t, rows[(w, "sharded_mutex", t)]["items_per_second"])
                   for t in threads if (w, "sharded_mutex", t) in rows]
            if pts:
                ax.plot(*zip(*pts), marker="x", linestyle=":", color="grey",
                        label="sharded-mutex map")
        if w in ("Claim", "ClaimComplete"):
            for i, s in enumerate(stores):
                pts = [(t, rows[("RawWrite", s, t)]["items_per_second"])
                       for t in threads if ("RawWrite", s, t) in rows]
                if pts:
                    ax.plot(*zip(*pts), linestyle="--", linewidth=0.8,
                            color=f"C{i}", label=f"{s} raw write")
        ax.set_title(w)
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.set_yscale("log")
        ax.set_xlabel("threads")
        ax.set_ylabel("ops/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("idem-bench: throughput against threads (higher is better)")
    fig.savefig(os.path.join(directory, "throughput.png"), dpi=80,
                metadata=meta)
    plt.close(fig)
    if http:
        names = [l["name"] for l in http["loads"]]
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4),
                                   constrained_layout=True)
        colors = ["grey" if n == "plain" else
                  ("C1" if n.startswith("replay") else "C0") for n in names]
        a.bar(names, [l["requests_per_s"] for l in http["loads"]],
              color=colors)
        a.set_ylabel("requests/s")
        a.set_title("requests/s (higher is better)")
        b.bar(names, [l["p99_us"] / 1000 for l in http["loads"]],
              color=colors)
        b.set_ylabel("ms")
        b.set_title("p99 latency (lower is better)")
        for ax in (a, b):
            ax.tick_params(axis="x", rotation=30, labelsize=8)
            ax.grid(True, axis="y", alpha=0.3)
        fig.suptitle("idem-demo with wrk, per store, against the plain server")
        fig.savefig(os.path.join(directory, "http.png"), dpi=80, metadata=meta)
        plt.close(fig)
    return True


# ---- report -----------------------------------------------------------------

def report(args):
    res = args.results
    with open(os.path.join(res, "machine.json")) as f:
        m = json.load(f)
    rows, errors, context = {}, {}, {}
    bench_path = os.path.join(res, "idem-bench.json")
    if os.path.exists(bench_path):
        rows, errors, context, _ = load_bench([bench_path])
    # Rows measured again with repetitions (scripts/bench.sh: the Redis
    # targets' rows) replace the first pass's.
    retimed = {}
    retimed_path = os.path.join(res, "idem-bench-targets.json")
    if os.path.exists(retimed_path):
        retimed, retimed_errors, _, _ = load_bench([retimed_path])
        rows.update(retimed)
        errors.update(retimed_errors)
    http = None
    http_path = os.path.join(res, "http.json")
    if os.path.exists(http_path):
        with open(http_path) as f:
            http = json.load(f)
    ctl = None
    ctl_path = os.path.join(res, "idemctl.json")
    if os.path.exists(ctl_path):
        with open(ctl_path) as f:
            ctl = json.load(f)
    grpc = None
    grpc_path = os.path.join(res, "grpc.json")
    if os.path.exists(grpc_path):
        with open(grpc_path) as f:
            grpc = json.load(f)
    transfers = None
    transfers_path = os.path.join(res, "transfers.json")
    if os.path.exists(transfers_path):
        with open(transfers_path) as f:
            transfers = json.load(f)
    mem = load_kv(os.path.join(res, "scale-memory.txt"))
    lat = load_kv(os.path.join(res, "scale-latency.txt"))
    disk = load_kv(os.path.join(res, "scale-disk.txt"))

    plots = bool(args.plots) and plot(rows, http, args.plots)
    threads = _threads(rows)
    doc = ["# Benchmarks", "",
           f"*Generated by `{m.get('command', 'scripts/bench.sh')}` "
           f"({m.get('date', '')}); do not edit: run `scripts/bench.sh` "
           "again to regenerate this page and the plots under "
           "[bench/](bench/). For choosing a store, "
           "[STORES.md](STORES.md) and its measured summary, "
           "[WHICH_STORE.md](WHICH_STORE.md).*", "",
           "One run on the machine below, which other jobs may have shared "
           "(see the load average): compare figures within this page, "
           "where every ratio comes from the same run, and re-run on your "
           "own hardware before relying on a single digit.", ""]
    doc += section_machine(m, args.elapsed, args.build_seconds, res)
    if rows:
        stores = {k.split(":", 1)[1]: v for k, v in context.items()
                  if k.startswith("idem_store:")}
        doc += section_summary(rows, threads, http)
        doc += section_ratios(rows, threads, retimed)
        doc += section_relative(rows, threads)
        doc += section_throughput(rows, errors, threads, plots)
        if stores:
            doc += ["Store URIs of idem-bench: " + ", ".join(
                f"`{k}` = `{v}`" for k, v in sorted(stores.items()))
                + " (each run in its own fresh directory, file, table or "
                "key prefix)."
                + (" PostgreSQL: a local throwaway server "
                   "(scripts/postgres.sh), fsync "
                   + ("on." if m.get("postgres_fsync") == "on"
                      else "off: a commit costs no disk flush.")
                   if "postgresql" in stores else "")
                + (" Redis: local throwaway servers (scripts/redis.sh, a "
                   "server and a 3-master cluster), persistence off."
                   if any(k.startswith("redis") for k in stores) else ""),
                ""]
        doc += section_hashing(rows)
        doc += section_allocations(rows, threads)
        doc += section_async_calls(rows)
        doc += section_targets(rows, retimed)
    else:
        doc += ["No idem-bench results (no idem-bench.json).", ""]
    doc += section_http(http, plots)
    doc += section_http_restinio(http)
    doc += section_grpc(grpc)
    doc += section_idemctl(ctl)
    stored_path = os.path.join(res, "stored.json")
    doc += (section_stored.section_from_file(stored_path, m.get(
        "command", "scripts/bench.sh")) if os.path.exists(stored_path)
        else section_stored.section({}, {}))
    doc += section_transfers(transfers)
    doc += section_scale(mem, lat, disk)
    docs = os.path.dirname(os.path.abspath(args.markdown))
    os.makedirs(docs, exist_ok=True)
    with open(args.markdown, "w") as f:
        f.write("\n".join(doc).rstrip("\n") + "\n")
    update_which_store(os.path.join(docs, "WHICH_STORE.md"),
                       which_store_block(m, rows, threads, http, mem, disk))


# ---- runs -------------------------------------------------------------------

def human(x):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def runs(args):
    """Every row of the files, with the spread over their runs, then the
    targets (Markdown, to stdout)."""
    rows, errors, context, spread = load_bench(args.files)
    loads = ", ".join(f"{x:.2f}" for x in context.get("load_avg", []))
    print(f"- {', '.join(args.files)}: {context.get('date')}, host "
          f"{context.get('host_name')}, {context.get('num_cpus')} CPUs at "
          f"{context.get('mhz_per_cpu')} MHz, load average at start {loads}")
    print()
    out = []
    for key in sorted(rows):
        r = rows[key]
        low, high, n = spread[key]
        if "items_per_second" in r:
            throughput = human(r["items_per_second"]) + " items"
        else:
            throughput = human(r.get("bytes_per_second", 0)) + "B"
        notes = ""
        if "replayed" in r:
            notes = (f"acquired {100 * r['acquired']:.2f}%, conflicts "
                     f"{100 * r['conflicts']:.2f}%, replayed "
                     f"{100 * r['replayed']:.2f}%")
            if "stale_complete" in r:
                notes += f", stale complete {100 * r['stale_complete']:.2f}%"
        out.append([key[0], key[1], key[2], f"{r['real_time']:.0f}",
                    throughput,
                    f"{100 * r['cv']:.1f}%" if "cv" in r else "–",
                    f"{low:.0f}-{high:.0f} ({n})" if n > 1 else "–",
                    allocs(r), notes])
    print(table(["benchmark", "store", "threads", "ns/op (median)",
                 "throughput/s", "cv", "runs' medians (n)", "allocs/op",
                 "notes"], out,
                ["---", "---"] + ["---:"] * 6 + ["---"]))
    if errors:
        print()
        for (w, l, t), e in sorted(errors.items()):
            print(f"- skipped: `{w}/{l}` at {t} threads: {e}")
    print()
    print(table(["target", "measured", "verdict"], targets(rows),
                ["---", "---:", "---"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    pm = sub.add_parser("machine")
    pm.add_argument("--command", default="scripts/bench.sh")
    pm.add_argument("--quick", default="0")
    pr = sub.add_parser("report")
    pr.add_argument("--results", required=True)
    pr.add_argument("--markdown", required=True)
    pr.add_argument("--plots", default="")
    pr.add_argument("--elapsed", type=int, default=0)
    pr.add_argument("--build-seconds", type=int, default=None)
    pn = sub.add_parser("runs")
    pn.add_argument("files", nargs="+")
    args = p.parse_args()
    {"machine": machine, "report": report, "runs": runs}[args.mode](args)


if __name__ == "__main__":
    main()
