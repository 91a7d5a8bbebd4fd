#!/usr/bin/env bash
# Side by side with a peer from another language: idem-demo on its stores
# against node-idempotency (@node-idempotency/core with its Redis storage
# adapter, in an Express app: benchmarks/http/peers/server.js), under the
# same fresh-key load (wrk with
# fresh_keys.lua, as benchmarks/http/bench.sh drives it), in interleaved
# rounds, each beside its own plain server (idem-demo --no-idem; the same
# Express app without the middleware). Prints a Markdown table: requests/s,
# p99 and each row against node-idempotency on Redis. The figures quoted
# in benchmarks/http/NOTES.md ("Side by side with node-idempotency").
#
#   benchmarks/http/peers.sh [BUILD_DIR]      # default build/release
#   PG_URL=postgresql://... benchmarks/http/peers.sh build/bench
#
# Needs Node.js and npm (the machine's; Debian's nodejs and npm packages
# otherwise) and the npm registry: the peer's packages are installed into
# a temporary directory at each run, at the versions below. Redis: a
# throwaway server of scripts/redis.sh (REDIS_URL to use another); the
# peer's records go to database 1, idem's to database 0.
# Environment: ROUNDS (3), DURATION (10s), THREADS (2), CONNECTIONS (32),
# SERVER_THREADS (idem-demo --threads, 2), STORES (idem-demo's, default
# memory, rocksdb:{tmp}/db and sqlite:{tmp}/idem.db; PG_URL and Redis are
# added),
# PG_URL (a PostgreSQL server for a postgresql row).
# shellcheck disable=SC2154  # port_<name> are set by start(), by printf -v.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benchmarks/http
# shellcheck source=benchmarks/http/lib.sh
source "$here/lib.sh"
bench_init peers.sh "${1:-build/release}"
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "peers.sh: $tool is not installed" >&2; exit 1; }
done

# The peer's packages, pinned: the versions measured in NOTES.md.
peer_packages=(express@4.22.3 @node-idempotency/core@1.0.11
  @node-idempotency/storage-adapter-redis@1.0.2)
mkdir -p "$tmp/peer"
cp "$here/peers/server.js" "$tmp/peer/"
npm install --prefix "$tmp/peer" --no-audit --no-fund --loglevel=error \
  "${peer_packages[@]}" >"$tmp/npm.log" 2>&1 || { cat "$tmp/npm.log"; exit 1; }

if [[ -z ${REDIS_URL:-} ]]; then
  export IDEM_REDIS_STATE=$tmp/redis
  scripts/redis.sh start >/dev/null
  redis_stop() { scripts/redis.sh stop >/dev/null 2>&1 || true; }
  trap 'redis_stop; bench_cleanup' EXIT
  REDIS_URL=$(scripts/redis.sh url)
fi
redis_base=${REDIS_URL%/*}


# The memory store at bench.sh's capacity: the default 1,000,000 records
# fill within a few rounds (then 503, counted as non-2xx).
default_stores='memory:?capacity=8388608&max_bytes=8589934592 rocksdb:{tmp}/db sqlite:{tmp}/idem.db'
read -r -a stores <<<"${STORES:-$default_stores}"
[[ -n ${PG_URL:-} ]] && stores+=("$PG_URL")
stores+=("$redis_base/0")
names=()
for i in "${!stores[@]}"; do
  names+=("idem:${stores[$i]%%:*}")
  start "s$i" --store "${stores[$i]//\{tmp\}/$tmp}"
done
start plain --no-idem
start_process peer env PEER_REDIS_URL="$redis_base/1" node "$tmp/peer/server.js"
start_process peerplain env PEER_PLAIN=1 node "$tmp/peer/server.js"

for round in $(seq "$rounds"); do
  wrk_row "plain:idem-demo" "$port_plain" fresh_keys.lua "$round"
  for i in "${!stores[@]}"; do
    port_var=port_s$i
    wrk_row "${names[$i]}" "${!port_var}" fresh_keys.lua "$round"
  done
  wrk_row "plain:express" "$port_peerplain" fresh_keys.lua "$round"
  wrk_row "node-idempotency:redis" "$port_peer" fresh_keys.lua "$round"
done

peer_rps=$(median node-idempotency:redis 2)
echo "| server (fresh keys) | requests/s | p99 (ms) | vs node-idempotency on Redis | non-2xx |"
echo "|---|---:|---:|---:|---:|"
for name in plain:idem-demo "${names[@]}" plain:express node-idempotency:redis; do
  awk -v n="$name" -v r="$(median "$name" 2)" -v p="$(median "$name" 4)" \
    -v pr="$peer_rps" -v e="$(non2xx "$name")" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.1fx | %d |\n", n, r, p / 1000, r / pr, e }'
done
echo
echo "wrk -t$threads -c$connections -d$duration --latency, $rounds rounds (medians), idem-demo --threads $server_threads, node $(node --version), $(nproc) cores"
echo "peer: ${peer_packages[*]}"
echo "raw:"
sort "$tmp/results" | sed 's/^/  /'
