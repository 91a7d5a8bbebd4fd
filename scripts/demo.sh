#!/usr/bin/env bash
# Quickstart: installs what is missing (scripts/deps.sh), builds idem-demo in
# Release (build/release, with ccache), prints three curl commands to try and
# runs idem-demo in the foreground on 127.0.0.1:8080 until Ctrl-C.
#
# The store is idem-demo's default, RocksDB in var/idem of the repository
# (its working directory here; created on first start, ignored by git), so
# keys survive a restart. One idem-demo per directory: a second one started
# while the first runs stops at once with an error naming var/idem.
#
#   scripts/demo.sh                        # rocksdb:./var/idem, port 8080
#   scripts/demo.sh --store memory:        # forget everything on exit
#   scripts/demo.sh --lock-wait 2000       # any idem-demo flag passes through
#   scripts/demo.sh --listen 127.0.0.1:9090
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
mkdir -p build
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release \
  -DIDEM_BUILD_TESTS=OFF -DIDEM_BUILD_BENCHMARKS=OFF >build/release.configure.log 2>&1 ||
  { cat build/release.configure.log; exit 1; }
cmake --build build/release -j "$(nproc)" --target idem-demo

# --listen may be given once only: add the default unless the caller did.
listen=127.0.0.1:8080
args=("$@")
have_listen=0
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --listen) have_listen=1; listen=${args[i + 1]:-$listen} ;;
    --listen=*) have_listen=1; listen=${args[i]#--listen=} ;;
  esac
done
[[ $have_listen -eq 1 ]] || args=(--listen "$listen" "${args[@]}")

# Which store: --store, else $IDEM_STORE, else idem-demo's default.
store=${IDEM_STORE:-rocksdb:./var/idem}
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --store) store=${args[i + 1]:-$store} ;;
    --store=*) store=${args[i]#--store=} ;;
  esac
done

# A key of its own per run, so that a durable store's earlier records do not
# turn the first request into a replay.
key="demo-$(date +%s)"
url="http://$listen/orders"
cat <<MSG

idem-demo is starting on $listen with the store $store
(relative paths are under $PWD; Ctrl-C stops it). In another terminal:

  # 1. A first request: the handler runs, 201 Created.
  curl -i -X POST $url -H 'Idempotency-Key: $key' -H 'Content-Type: application/json' -d '{"item":"book","qty":1}'

  # 2. The same request again: the stored response, with Idempotent-Replayed: true.
  curl -i -X POST $url -H 'Idempotency-Key: $key' -H 'Content-Type: application/json' -d '{"item":"book","qty":1}'

  # 3. The same key with another body: 422 idempotency_key_reused.
  curl -i -X POST $url -H 'Idempotency-Key: $key' -H 'Content-Type: application/json' -d '{"item":"pen","qty":2}'

  curl http://$listen/stats      # {"handler_runs":1,"protection":"on"}
  curl http://$listen/metrics    # idem_requests_total{outcome="..."}

MSG
exec build/release/examples/demo/idem-demo "${args[@]}"
