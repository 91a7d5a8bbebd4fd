#!/usr/bin/env bash
# gRPC benchmark of idem-grpc-demo on the memory store against the same
# server without idem (idem-grpc-demo --no-idem): idem-grpc-load with fresh
# keys and with replays on the idem server, and the plain baseline, in one
# run, interleaved over several rounds. Prints a Markdown table of calls/s
# and p50/p99 latency (medians over the rounds) against the plain server,
# with the targets of the gRPC adapter: fresh keys >= 80% of plain calls/s,
# replays >= 100%.
#
#   benchmarks/grpc/bench.sh [BUILD_DIR]   # default build/release
#   ROUNDS=2 SECONDS_PER_ROUND=5 benchmarks/grpc/bench.sh build/main
#
# Environment: ROUNDS (3), SECONDS_PER_ROUND (10), WARMUP (1 s per load),
# IN_FLIGHT (calls outstanding, 32), CHANNELS (connections, 4),
# SERVER_THREADS (idem-grpc-demo --threads, 2), STORE (the idem server's
# store URI; default memory: sized so that no round fills it), RESULTS_JSON
# (a file to write the figures to as JSON, for
# benchmarks/report/make_report.py: the configuration, the medians per load
# and every round's raw line), TCACHE (glibc's per-thread cache size for a
# second pair of servers, both started with
# GLIBC_TUNABLES=glibc.malloc.tcache_count=TCACHE, loads named <load>+tcache
# against plain+tcache; 0 skips them; default 200: gRPC frees a call's
# objects on another thread than the one that allocated them, which
# drains glibc's default 7-entry cache, see docs/GRPC.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
demo=$build/examples/grpc_demo/idem-grpc-demo
load=$build/benchmarks/grpc/idem-grpc-load
rounds=${ROUNDS:-3}
seconds=${SECONDS_PER_ROUND:-10}
warmup=${WARMUP:-1}
in_flight=${IN_FLIGHT:-32}
channels=${CHANNELS:-4}
server_threads=${SERVER_THREADS:-2}
store=${STORE:-memory:?capacity=8388608&max_bytes=8589934592}
for f in "$demo" "$load"; do
  [[ -x $f ]] || { echo "grpc/bench.sh: no $f; build idem-grpc-demo and idem-grpc-load first" >&2; exit 1; }
done

# shellcheck source=benchmarks/http/lib.sh
source benchmarks/http/lib.sh
bench_temp

start() {  # name, flags... -> sets port_<name>; env START_ENV for the server
  local name=$1; shift
  # shellcheck disable=SC2086  # START_ENV is a list of assignments.
  start_process "$name" env ${START_ENV:-} "$demo" --listen 127.0.0.1:0 \
    --threads "$server_threads" "$@"
}

start idem --store "$store"
start plain --no-idem
tcache=${TCACHE:-200}

# Loads: name, server, keys.
loads=("plain plain fresh" "fresh:memory idem fresh" "replay:memory idem replay")
if [[ $tcache != 0 ]]; then
  START_ENV="GLIBC_TUNABLES=glibc.malloc.tcache_count=$tcache" start idem_t --store "$store"
  START_ENV="GLIBC_TUNABLES=glibc.malloc.tcache_count=$tcache" start plain_t --no-idem
  loads+=("plain+tcache plain_t fresh" "fresh:memory+tcache idem_t fresh"
    "replay:memory+tcache idem_t replay")
fi
: >"$tmp/results"
for _ in $(seq "$rounds"); do
  for l in "${loads[@]}"; do
    read -r name server keys <<<"$l"
    port_var=port_$server
    line=$("$load" --target "127.0.0.1:${!port_var}" --keys "$keys" --label "$name" \
      --seconds "$seconds" --warmup "$warmup" --in-flight "$in_flight" --channels "$channels")
    echo "$line" >>"$tmp/results"
  done
done

# The medians per load, and the table, from the JSON lines.
python3 - "$tmp/results" "${RESULTS_JSON:-}" "$rounds" "$seconds" "$in_flight" "$channels" \
  "$server_threads" "$(nproc)" "$store" "$tcache" <<'EOF'
import json, statistics, sys
path, out, rounds, seconds, in_flight, channels, threads, cores, store, tcache = sys.argv[1:]
raw = [json.loads(l) for l in open(path) if l.strip()]
names = list(dict.fromkeys(r["label"] for r in raw))
def med(name, key):
    return statistics.median_low([r[key] for r in raw if r["label"] == name])
loads = [{"name": n, "calls_per_s": med(n, "calls_per_s"), "p50_us": med(n, "p50_us"),
          "p99_us": med(n, "p99_us"),
          "errors": sum(r["errors"] for r in raw if r["label"] == n),
          "replayed": sum(r["replayed"] for r in raw if r["label"] == n),
          "calls": sum(r["calls"] for r in raw if r["label"] == n)} for n in names]
by_name = {l["name"]: l for l in loads}
targets = {"fresh:memory": 0.80, "replay:memory": 1.00}
print("| load | calls/s vs plain | target | calls/s | p50 (ms) | p99 (ms) | errors | replayed |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for l in loads:
    # A +tcache load against the plain server with the same setting.
    suffix = "+tcache" if l["name"].endswith("+tcache") else ""
    plain = by_name["plain" + suffix]
    share = l["calls_per_s"] / plain["calls_per_s"]
    t = targets.get(l["name"][:len(l["name"]) - len(suffix)])
    verdict = "–" if t is None else (f">= {100 * t:.0f}%: " + ("met" if share >= t else "MISSED"))
    print(f"| {l['name']} | {100 * share:.0f}% | {verdict} | {l['calls_per_s']:.0f} | "
          f"{l['p50_us'] / 1000:.2f} | {l['p99_us'] / 1000:.2f} | {l['errors']} | {l['replayed']} |")
print()
print(f"idem-grpc-load --in-flight {in_flight} --channels {channels} --seconds {seconds}, "
      f"{rounds} round(s) interleaved (medians), idem-grpc-demo --threads {threads} "
      f"--store '{store}', {cores} cores")
print("raw:")
for r in raw:
    print("  " + json.dumps(r))
if out:
    with open(out, "w") as f:
        json.dump({"config": {"in_flight": int(in_flight), "channels": int(channels),
                              "seconds": float(seconds), "rounds": int(rounds),
                              "server_threads": int(threads), "cores": int(cores),
                              "store": store, "tcache": int(tcache)},
                   "loads": loads, "raw": raw}, f, indent=2)
        f.write("\n")
EOF
