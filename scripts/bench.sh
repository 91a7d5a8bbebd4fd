#!/usr/bin/env bash
# One command for the benchmark report (issue #6): installs what is missing,
# builds Release, starts a throwaway PostgreSQL and Redis (a server and a
# 3-master cluster), runs idem-bench over the memory, RocksDB, SQLite,
# PostgreSQL, Redis and Redis Cluster stores, idem-scale at reduced
# sizes, the HTTP comparison (wrk against idem-demo on each store and the
# plain Beast server), the gRPC load (idem-grpc-load against
# idem-grpc-demo and its --no-idem baseline), then regenerates
# docs/BENCHMARKS.md, the measured
# table of docs/WHICH_STORE.md and the plots
# under docs/bench/ (benchmarks/report/make_report.py). About 21 minutes on
# 2 cores from a warm ccache (7 of them the second pass over the Redis
# target rows); QUICK=1 for a smoke run of about a minute. SECTIONS picks
# the parts to run (one alone, say the gRPC load, takes a minute or two).
# idem-bench is the one benchmark program and make_report.py the one report
# generator (its `runs` mode tables a measurement by hand).
#
#   scripts/bench.sh              # full run; rewrites docs/BENCHMARKS.md, docs/bench/
#   QUICK=1 OUT=/tmp/b DOCS=/tmp/b scripts/bench.sh
#   SECTIONS=grpc scripts/bench.sh   # the gRPC section alone; page in OUT
#
# Environment:
#   QUICK=1        short runs (fewer thread counts, 3 s wrk rounds, small
#                  scale); the report says so
#   OUT=DIR        raw results: machine.json, idem-bench.json, http.json,
#                  http.md, scale-*.txt, logs (default build/bench/results)
#   DOCS=DIR       where BENCHMARKS.md and bench/*.png go (default docs)
#   BUILD_DIR=DIR  the Release tree (default build/bench)
#   JOBS=N         build jobs (default 2)
#   MIN_TIME=S     idem-bench --benchmark_min_time (default 0.4; QUICK 0.05)
#   REPETITIONS=N  idem-bench --benchmark_repetitions (default 1)
#   ROUNDS=N, DURATION=Ns   the HTTP rounds (default 3 x 10s; QUICK 1 x 3s)
#   SCALE=0        skip idem-scale
#   SECTIONS="..." the sections to run, of: bench (idem-bench), scale
#                  (idem-scale), http (wrk on idem-demo), idemctl,
#                  transfers (POST /transfers), grpc (idem-grpc-load on
#                  idem-grpc-demo, benchmarks/grpc/bench.sh; needs a build
#                  with gRPC). Default: all. With fewer, the page and plots
#                  go to OUT unless DOCS is set, so docs/ keeps the full
#                  report.
#   IDEM_PG_FSYNC=on   PostgreSQL with fsync (default off, as in the tests)
# Every process it starts (PostgreSQL, Redis, idem-bench, idem-demo, wrk) is
# stopped at exit, on failure and on Ctrl-C too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$SECONDS
command_line="scripts/bench.sh"
for v in QUICK OUT DOCS BUILD_DIR MIN_TIME REPETITIONS ROUNDS DURATION SCALE SECTIONS IDEM_PG_FSYNC; do
  [[ -n ${!v:-} ]] && command_line="$v=${!v} $command_line"
done

quick=${QUICK:-0}
build=${BUILD_DIR:-build/bench}
out=${OUT:-$build/results}
all_sections="bench scale http idemctl transfers grpc"
sections=${SECTIONS:-$all_sections}
for s in $sections; do
  [[ " $all_sections " == *" $s "* ]] || { echo "bench.sh: unknown section '$s' (SECTIONS: $all_sections)" >&2; exit 2; }
done
want() { [[ " $sections " == *" $1 "* ]]; }
if [[ $sections == "$all_sections" ]]; then
  docs=${DOCS:-docs}
else
  docs=${DOCS:-$out}
fi
jobs=${JOBS:-2}
if [[ $quick == 1 ]]; then
  min_time=${MIN_TIME:-0.05}
  filter='/threads:(1|8)$'
  rounds=${ROUNDS:-1}
  duration=${DURATION:-3s}
  scale_memory=(--records=100000)
  scale_latency=(--records=100000 --small=10000 --probes=5000)
  scale_disk=(--records=20000 --small=2000 --probes=200)
else
  min_time=${MIN_TIME:-0.4}
  filter='.'
  rounds=${ROUNDS:-3}
  duration=${DURATION:-10s}
  scale_memory=(--records=1000000)
  scale_latency=(--records=1000000 --small=10000 --probes=20000)
  scale_disk=(--records=100000 --small=10000 --probes=1000)
fi
repetitions=${REPETITIONS:-1}

log() { printf '[bench.sh %3ds] %s\n' $((SECONDS - started)) "$*"; }

# ---- Dependencies ------------------------------------------------------------
scripts/deps.sh
# A plot tool: Debian's python3-matplotlib (apt-get only when missing),
# for Debian's python3 (another python3 first in PATH may lack it).
py=python3
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  py=/usr/bin/python3
  if ! $py -c 'import matplotlib' 2>/dev/null; then
    log "installing python3-matplotlib"
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3 python3-matplotlib
  fi
fi

# ---- Cleanup -------------------------------------------------------------------
mkdir -p "$out" "$build"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-bench.XXXXXX")
pg_state=$root/$build/postgres/state
redis_state=$root/$build/redis/state
child=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  IDEM_PG_STATE=$pg_state scripts/postgres.sh stop || true
  IDEM_REDIS_STATE=$redis_state scripts/redis.sh stop || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# Runs a step in the background and waits for it, so that a signal reaches
# the trap at once (and the trap stops the step).
step() {
  local rc=0
  "$@" &
  child=$!
  wait "$child" || rc=$?
  child=
  return "$rc"
}

# ---- Build ---------------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}  # hits from another checkout too
log "configure + build $build (Release, -j$jobs)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DIDEM_BUILD_TESTS=OFF \
  -DIDEM_BUILD_BENCHMARKS=ON -DIDEM_WITH_POSTGRES=ON -DIDEM_WITH_REDIS=ON -DIDEM_WITH_BEAST=ON -DIDEM_WITH_GRPC=ON \
  -DIDEM_BUILD_FUZZERS=OFF >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
targets=()
want bench && targets+=(idem-bench)
want scale && targets+=(idem-scale)
{ want http || want transfers; } && targets+=(idem-demo)
want idemctl && targets+=(idemctl idem-demo)
want grpc && targets+=(idem-grpc-demo idem-grpc-load)
step cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
built_s=$((SECONDS - started))

# The machine and the commit, before the runs (load average included).
"$py" benchmarks/report/make_report.py machine --command "$command_line" \
  --quick "$quick" >"$out/machine.json"

# ---- PostgreSQL ----------------------------------------------------------------
# IDEM_PG_OWNER_PID: should this script die by SIGKILL, the server's
# watchdog still stops it. Only for the sections that use the servers.
servers=0
for s in bench http idemctl transfers; do want $s && servers=1; done
pg_url=
if ((!servers)); then
  :
elif pg_url=$(IDEM_PG_STATE=$pg_state IDEM_PG_OWNER_PID=$$ scripts/postgres.sh start); then
  log "PostgreSQL at $pg_url (fsync ${IDEM_PG_FSYNC:-off})"
else
  pg_url=
  log "PostgreSQL did not start: its rows are left out"
fi

# ---- Redis ---------------------------------------------------------------------
# A server and a 3-master cluster (scripts/redis.sh; persistence off, as in
# the tests), with the same watchdog as PostgreSQL's.
redis_url= redis_cluster_url=
if ((!servers)); then
  :
elif redis_url=$(IDEM_REDIS_STATE=$redis_state IDEM_REDIS_OWNER_PID=$$ scripts/redis.sh start); then
  log "Redis at $redis_url"
else
  redis_url=
  log "Redis did not start: its rows are left out"
fi
if ((!servers)); then
  :
elif redis_cluster_url=$(IDEM_REDIS_STATE=$redis_state IDEM_REDIS_OWNER_PID=$$ scripts/redis.sh cluster); then
  log "Redis Cluster at $redis_cluster_url"
else
  redis_cluster_url=
  log "Redis Cluster did not start: its rows are left out"
fi

# ---- idem-bench ----------------------------------------------------------------
if want bench; then
  uris="memory:,rocksdb:$tmp/rocksdb,sqlite:$tmp/sqlite.db"
  [[ -n $pg_url ]] && uris+=",$pg_url"
  [[ -n $redis_url ]] && uris+=",$redis_url"
  [[ -n $redis_cluster_url ]] && uris+=",$redis_cluster_url"
  log "idem-bench (min_time $min_time s, repetitions $repetitions)"
  bench_flags=(--benchmark_min_time="$min_time" --benchmark_filter="$filter")
  if ((repetitions > 1)); then
    bench_flags+=(--benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true
      --benchmark_report_aggregates_only=true)
  fi
  step env TMPDIR="$tmp" "$build/benchmarks/idem-bench" --idem_store_uris="$uris" "${bench_flags[@]}" \
    --benchmark_out="$out/idem-bench.json" --benchmark_out_format=json >"$out/idem-bench.txt" 2>&1 ||
    { tail -20 "$out/idem-bench.txt"; exit 1; }

  # The rows the Redis targets are judged on again: 3 repetitions of 1 s,
  # interleaved, medians. One 0.4 s sample of a loopback round trip on a small
  # VM moves by more than the targets' margins from run to run (1-thread
  # Claim+Complete read 2.52x and 2.77x in two quiet reports, 2.07-2.28x in
  # longer runs); the report takes these rows in place of the first pass's and
  # says so.
  if [[ $quick != 1 ]] && [[ -n $redis_url || -n $redis_cluster_url ]]; then
    turis=$redis_url
    [[ -n $redis_cluster_url ]] && turis+="${turis:+,}$redis_cluster_url"
    log "idem-bench, the Redis target rows (3 x 1 s, medians)"
    step env TMPDIR="$tmp" "$build/benchmarks/idem-bench" --idem_store_uris="$turis" \
      --benchmark_filter='^(Claim|ClaimComplete|RawWrite)/redis(-cluster)?/real_time/threads:(1|8|32)$' \
      --benchmark_min_time=1 --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true \
      --benchmark_out="$out/idem-bench-targets.json" --benchmark_out_format=json \
      >"$out/idem-bench-targets.txt" 2>&1 ||
      { tail -20 "$out/idem-bench-targets.txt"; exit 1; }
  else
    rm -f "$out/idem-bench-targets.json"
  fi
else
  rm -f "$out/idem-bench.json" "$out/idem-bench-targets.json"
fi

# ---- idem-scale ----------------------------------------------------------------
log "idem-bench-stored: compression and sealing of stored responses"
step cmake --build "$build" -j "$jobs" --target idem-bench-stored >>"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
step "$build/benchmarks/idem-bench-stored" \
  --idem_stored_uris="memory:?max_bytes=4294967296,rocksdb:$tmp/stored-rocksdb" \
  --benchmark_min_time="$min_time" --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/stored.json" --benchmark_out_format=json \
  >"$out/stored.txt" 2>&1 || { tail -20 "$out/stored.txt"; exit 1; }

rm -f "$out"/scale-*.txt
if want scale && [[ ${SCALE:-1} != 0 ]]; then
  log "idem-scale memory ${scale_memory[*]}"
  step "$build/benchmarks/idem-scale" memory "${scale_memory[@]}" >"$out/scale-memory.txt"
  log "idem-scale latency ${scale_latency[*]}"
  step "$build/benchmarks/idem-scale" latency "${scale_latency[@]}" >"$out/scale-latency.txt"
  log "idem-scale disk ${scale_disk[*]}"
  step "$build/benchmarks/idem-scale" disk "${scale_disk[@]}" --dir="$tmp/scale" >"$out/scale-disk.txt"
fi

# ---- HTTP ----------------------------------------------------------------------
# The memory store at a byte budget and a capacity that hold every run (the
# default 256 MiB and 1,000,000 records would answer store_full partway
# through the fresh-key rounds: at 50,000 requests/s three 10 s rounds are
# 1.5 million records, and the memory rows would count 503s as requests).
if want http; then
  stores="memory:?capacity=8388608&max_bytes=8589934592 rocksdb:{tmp}/db sqlite:{tmp}/idem.db"
  # A longer connect timeout than the default 5 s for the demo's pool.
  [[ -n $pg_url ]] && stores+=" $pg_url?connect_timeout_s=30"
  [[ -n $redis_url ]] && stores+=" $redis_url"
  # Replays on the remote stores without and with their local cache
  # (docs/STORES.md, "Local cache"), beside replay:memory.
  replay_stores=
  [[ -n $pg_url ]] && replay_stores+=" $pg_url?connect_timeout_s=30 $pg_url?connect_timeout_s=30&local_cache=10000"
  [[ -n $redis_url ]] && replay_stores+=" $redis_url $redis_url?local_cache=10000"
  log "HTTP: wrk, $rounds x $duration per load"
  # A server that does not start (say, PostgreSQL paused past the connect
  # timeout by another job on the machine) fails the step: once more, then
  # give up.
  for attempt in 1 2; do
    step env STORES="$stores" REPLAY_STORES="$replay_stores" ROUNDS="$rounds" DURATION="$duration" RESULTS_JSON="$out/http.json" \
      benchmarks/http/bench.sh "$build" >"$out/http.md" 2>&1 && break
    if ((attempt == 2)); then cat "$out/http.md"; exit 1; fi
    log "HTTP run failed: $(tail -1 "$out/http.md"); once more"
  done
else
  rm -f "$out/http.json"
fi

# ---- idemctl -------------------------------------------------------------------
# `idemctl inspect` of a present key per store, process start to exit (the
# median of N runs), against starting /bin/true and `idemctl --help` in the
# same run: benchmarks/idemctl/bench.sh writes $out/idemctl.json.
if want idemctl; then
  idemctl_runs=50
  [[ $quick == 1 ]] && idemctl_runs=20
  idemctl_stores="rocksdb:{tmp}/rocksdb sqlite:{tmp}/idem.db"
  [[ -n $pg_url ]] && idemctl_stores+=" $pg_url?table=idemctl_bench&connect_timeout_s=30"
  [[ -n $redis_url ]] && idemctl_stores+=" $redis_url?prefix=idemctl-bench:"
  [[ -n $redis_cluster_url ]] && idemctl_stores+=" $redis_cluster_url?prefix=idemctl-bench:"
  log "idemctl inspect: $idemctl_runs runs per store"
  step cmake --build "$build" -j "$jobs" --target idemctl idem-demo >>"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; exit 1; }
  step env STORES="$idemctl_stores" RUNS="$idemctl_runs" RESULTS_JSON="$out/idemctl.json" TMPDIR="$tmp" \
    benchmarks/idemctl/bench.sh "$build" >"$out/idemctl.md" 2>&1 || { cat "$out/idemctl.md"; exit 1; }
else
  rm -f "$out/idemctl.json"
fi

# ---- Exactly once: POST /transfers ---------------------------------------------
# The classic completion against --exactly-once, per SQL store
# (benchmarks/http/transfers_bench.sh); PostgreSQL when the server started.
if want transfers; then
  log "exactly once: wrk on POST /transfers, $rounds x $duration per load"
  step env PG_URL="$pg_url" ROUNDS="$rounds" DURATION="$duration" RESULTS_JSON="$out/transfers.json" \
    benchmarks/http/transfers_bench.sh "$build" >"$out/transfers.md" 2>&1 ||
    { cat "$out/transfers.md"; exit 1; }
else
  rm -f "$out/transfers.json"
fi

# ---- gRPC ----------------------------------------------------------------------
# idem-grpc-demo on the memory store against --no-idem, fresh keys and
# replays, interleaved (benchmarks/grpc/bench.sh).
if want grpc; then
  log "gRPC: idem-grpc-load, $rounds x ${duration%s} s per load"
  step env ROUNDS="$rounds" SECONDS_PER_ROUND="${duration%s}" RESULTS_JSON="$out/grpc.json" \
    benchmarks/grpc/bench.sh "$build" >"$out/grpc.md" 2>&1 || { cat "$out/grpc.md"; exit 1; }
else
  rm -f "$out/grpc.json"
fi

# ---- Report --------------------------------------------------------------------
log "report: $docs/BENCHMARKS.md, $docs/WHICH_STORE.md, $docs/bench/"
"$py" benchmarks/report/make_report.py report --results "$out" \
  --markdown "$docs/BENCHMARKS.md" --plots "$docs/bench" \
  --elapsed "$((SECONDS - started))" --build-seconds "$built_s"
log "done in $((SECONDS - started)) s ($(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s); raw results in $out"
