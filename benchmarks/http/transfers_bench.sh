#!/usr/bin/env bash
# HTTP benchmark of exactly once: idem-demo's POST /transfers (a row in the
# store's own database) with fresh keys, completing the record after the
# business commit (as /orders does) and with --exactly-once (inside the
# business transaction), on SQLite and, when PG_URL is set, PostgreSQL.
# Interleaved over several rounds; prints a Markdown table of requests/s
# and p50/p99 latency (medians) with exactly-once against the classic path
# of the same store. Both modes run the same business transaction (on
# SQLite, on the store's writer: SqliteTransaction(store); on PostgreSQL, on
# a connection its pool lends: PostgresTransaction(store)); they differ only
# in where the record is completed, inside it or by the adapter's Finish
# afterwards, which is what the comparison is about.
#
#   benchmarks/http/transfers_bench.sh [BUILD_DIR]   # default build/release
#   PG_URL=postgresql://idem@127.0.0.1:5432/idem benchmarks/http/transfers_bench.sh
#
# Environment: PG_URL (a PostgreSQL server; its database gets a `transfers`
# table and two idem tables), ROUNDS (3), DURATION (10s), THREADS (2),
# CONNECTIONS (32), SERVER_THREADS (2), RESULTS_JSON (a file to write the
# figures to as JSON, for benchmarks/report/make_report.py).
# shellcheck disable=SC2154  # port_<name> are set by start(), by printf -v.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benchmarks/http
# shellcheck source=benchmarks/http/lib.sh
source "$here/lib.sh"
bench_init transfers_bench.sh "${1:-build/release}"

# Loads: <store>_classic and <store>_once, each on a store of its own.
names=()
start sqlite_classic --store "sqlite:$tmp/classic.db"
start sqlite_once --store "sqlite:$tmp/once.db" --exactly-once
names+=(sqlite_classic sqlite_once)
if [[ -n ${PG_URL:-} ]]; then
  tables="bench_tx_$$"
  start postgres_classic --store "$PG_URL?table=${tables}_classic&connect_timeout_s=30"
  start postgres_once --store "$PG_URL?table=${tables}_once&connect_timeout_s=30" --exactly-once
  names+=(postgres_classic postgres_once)
fi

run() {  # name, round
  local port_var=port_$1
  IDEM_BENCH_PATH=/transfers wrk_row "$1" "${!port_var}" fresh_keys.lua "$2"
}

for round in $(seq "$rounds"); do
  for name in "${names[@]}"; do run "$name" "$round"; done
done

echo "| load | requests/s | p50 (ms) | p99 (ms) | vs classic (req/s) | p99 vs classic | non-2xx |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for name in "${names[@]}"; do
  classic=${name%_*}_classic
  errors=$(non2xx "$name")
  awk -v n="$name" -v r="$(median "$name" 2)" -v a="$(median "$name" 3)" -v b="$(median "$name" 4)" \
    -v cr="$(median "$classic" 2)" -v cp="$(median "$classic" 4)" -v e="$errors" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %.0f%% | %.2fx | %d |\n", n, r, a / 1000, b / 1000, 100 * r / cr, b / cp, e }'
done
echo
echo "POST /transfers, fresh keys: wrk -t$threads -c$connections -d$duration --latency, $rounds rounds (medians), idem-demo --threads $server_threads, $(nproc) cores"
echo "raw:"
sort "$tmp/results" | sed 's/^/  /'

if [[ -n ${RESULTS_JSON:-} ]]; then
  {
    printf '{\n  "config": {"wrk_threads": %d, "connections": %d, "duration": "%s", "rounds": %d, "server_threads": %d, "cores": %d},\n' \
      "$threads" "$connections" "$duration" "$rounds" "$server_threads" "$(nproc)"
    printf '  "loads": [\n'
    json_loads "${names[@]}"
    printf '\n  ]\n}\n'
  } >"$RESULTS_JSON"
fi
