"""The gRPC section of docs/BENCHMARKS.md (make_report.py): OUT/grpc.json,
written by benchmarks/grpc/bench.sh — idem-grpc-demo on the memory store
against idem-grpc-demo --no-idem, with fresh keys and with replays, in the
same run — with the targets of the gRPC adapter."""

# Calls/s against the plain server: fresh keys on the memory store at least
# 80%, replays at least 100% (a replay skips the handler).
TARGETS = {"fresh:memory": 0.80, "replay:memory": 1.00}
# Loads on the pair of servers started with a larger glibc tcache
# (benchmarks/grpc/bench.sh TCACHE), each against plain+tcache.
TCACHE_SUFFIX = "+tcache"


def section_grpc(grpc):
    lines = ["## gRPC: idem-grpc-demo against the plain gRPC server", ""]
    if not grpc:
        return lines + ["Not run (no grpc.json).", ""]
    c = grpc["config"]
    lines += [
        f"`idem-grpc-load --in-flight {c['in_flight']} --channels "
        f"{c['channels']} --seconds {c['seconds']:g}` (closed-loop unary "
        f"CreateOrder calls), {c['rounds']} round(s) interleaved (medians), "
        f"`idem-grpc-demo --threads {c['server_threads']}`, client and "
        f"servers on the same {c['cores']} cores. `plain` is "
        "`idem-grpc-demo --no-idem` (the same service, no idem); "
        "`fresh:memory` sends a new idempotency-key with every call (a "
        "claim, the handler, a completion), `replay:memory` cycles over "
        "keys already completed (every call a replay). Targets: fresh keys "
        ">= 80% of plain calls/s, replays >= 100%. The servers and the "
        "client switch Abseil's mutex deadlock detection off, which "
        "Debian's Abseil (built without NDEBUG) leaves on (docs/GRPC.md, "
        "\"Abseil's deadlock detection\"); reports before 2026-12-05 ran "
        "the client with it on, which limited the plain server and put "
        "every ratio about ten points too high.", ""]
    loads = {l["name"]: l for l in grpc["loads"]}
    out = []
    for l in grpc["loads"]:
        # A +tcache load against the plain server with the same setting.
        suffix = TCACHE_SUFFIX if l["name"].endswith(TCACHE_SUFFIX) else ""
        plain = loads.get("plain" + suffix)
        share = l["calls_per_s"] / plain["calls_per_s"] if plain else None
        target = TARGETS.get(l["name"][:len(l["name"]) - len(suffix)])
        verdict = "–"
        if target is not None and share is not None:
            verdict = (f">= {100 * target:.0f}%: "
                       + ("met" if share >= target else "MISSED"))
        out.append([
            f"`{l['name']}`",
            f"{100 * share:.0f}%" if share is not None else "–",
            f"{l['p99_us'] / plain['p99_us']:.2f}x" if plain else "–",
            verdict, f"{l['calls_per_s']:,.0f}",
            f"{l['p50_us'] / 1000:.2f}", f"{l['p99_us'] / 1000:.2f}",
            str(l["errors"]), str(l["replayed"])])
    header = ["load", "calls/s vs plain", "p99 vs plain", "target",
              "calls/s", "p50 (ms)", "p99 (ms)", "errors", "replayed"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    lines += ["| " + " | ".join(r) + " |" for r in out]
    lines += ["", f"Store: `{c['store']}`. errors: calls whose status was "
              "not OK; replayed: calls answered with `idempotent-replayed: "
              "true` (benchmarks/grpc/bench.sh)."]
    if c.get("tcache"):
        lines += [f"`+tcache`: both servers of a second pair started with "
                  f"`GLIBC_TUNABLES=glibc.malloc.tcache_count={c['tcache']}` "
                  "(glibc's default is 7), each load against `plain+tcache`: "
                  "gRPC frees a call's objects on another thread than the "
                  "one that allocated them, which drains the default cache "
                  "(docs/GRPC.md, \"Allocator\")."]
    lines += [""]
    return lines
