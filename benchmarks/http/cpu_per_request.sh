#!/usr/bin/env bash
# Server CPU and context switches per request of idem-demo under the
# fresh-key load, one server configuration at a time: the figures of
# benchmarks/http/NOTES.md ("Where a fresh-key request's time goes").
# perf stat counts the server's task-clock and context switches (every
# thread: the I/O threads, the store-call pool, the store's own) while wrk
# runs fresh_keys.lua as bench.sh does; both are divided by the requests
# wrk completed. Less sensitive than requests/s to other jobs on the
# machine, since it counts the server's own CPU, not the time it waited
# for a core.
#
#   benchmarks/http/cpu_per_request.sh [BUILD_DIR] -- IDEM_DEMO_FLAGS...
#   benchmarks/http/cpu_per_request.sh build/main -- --no-idem
#   benchmarks/http/cpu_per_request.sh build/main -- --store 'sqlite:{tmp}/idem.db' --store-calls inline
#
# Environment: DURATION (wrk's -d in seconds, default 10s), THREADS (2), CONNECTIONS
# (32), SERVER_THREADS (idem-demo --threads, 2), PER_THREAD=1 (also each
# thread's share, perf stat --per-thread). {tmp} in a flag stands for a
# fresh directory removed at exit. Needs perf (linux-perf) and wrk.
# shellcheck disable=SC2154  # bench_init and start() set the settings, pids, port_server.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benchmarks/http
# shellcheck source=benchmarks/http/lib.sh
source "$here/lib.sh"
build=build/release
if [[ ${1:-} != -- && -n ${1:-} ]]; then build=$1; shift; fi
[[ ${1:-} == -- ]] && shift
bench_init cpu_per_request.sh "$build"
command -v perf >/dev/null || { echo "cpu_per_request.sh: perf is not installed" >&2; exit 1; }
flags=()
for f in "$@"; do flags+=("${f//\{tmp\}/$tmp}"); done
start server "${flags[@]}"
server_pid=${pids[-1]}
seconds=${duration%s}
# A short load first: threads a store starts at its first call (the SQLite
# writer's, the Redis event loop's, the RocksDB store's) must exist before
# perf attaches, or their CPU is not counted.
IDEM_BENCH_KEY=warm-$$ wrk -t1 -c1 -d1s -s "$here/fresh_keys.lua" \
  "http://127.0.0.1:$port_server" >/dev/null
perf stat ${PER_THREAD:+--per-thread} -e task-clock,context-switches \
  -p "$server_pid" -o "$tmp/stat" -- sleep "$seconds" &
perf_pid=$!
IDEM_BENCH_KEY=cpu-$$ wrk -t"$threads" -c"$connections" -d"$duration" --latency \
  -s "$here/fresh_keys.lua" "http://127.0.0.1:$port_server" >"$tmp/wrk"
wait "$perf_pid"
requests=$(awk '/requests in/ {print $1}' "$tmp/wrk")
rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk")
p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk")
# A line is "COUNT EVENT" or, per thread, "THREAD COUNT EVENT"; threads
# that ran nothing say "<not counted>".
if [[ -n ${PER_THREAD:-} ]]; then
  awk -v r="$requests" '/task-clock|context-switches/ && $2 ~ /^[0-9]/ {
      gsub(",", "", $2); if ($2 > 0)
        printf "  %-22s %s %.2f per request\n", $1,
               ($3 == "msec" ? "CPU us" : "context switches"),
               ($3 == "msec" ? 1000 : 1) * $2 / r }' "$tmp/stat"
fi
awk -v r="$requests" -v rps="$rps" -v p99="$p99" -v flags="$*" '
  /task-clock|context-switches/ {
    v = ($1 ~ /^[0-9]/) ? $1 : $2
    if (v !~ /^[0-9]/) next
    gsub(",", "", v)
    if (/task-clock/) cpu += v; else cs += v
  }
  END { printf "%s: %.0f req/s, p99 %s, server CPU %.1f us/request, %.2f context switches/request\n",
               flags, rps, p99, 1000 * cpu / r, cs / r }' "$tmp/stat"
