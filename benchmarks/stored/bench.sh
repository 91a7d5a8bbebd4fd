#!/usr/bin/env bash
# The report's section on stored responses, alone: builds idem-bench-stored,
# runs it on the memory store and RocksDB (1 KiB, 64 KiB and 1 MiB JSON
# bodies; plain, zstd, zstd+sealed), writes OUT/stored.json and prints the
# section (benchmarks/report/section_stored.py). scripts/bench.sh runs the
# same binary into its results, where make_report.py picks the file up.
#
#   benchmarks/stored/bench.sh                 # Release tree build/bench
#   BUILD_DIR=build/main OUT=/tmp/s benchmarks/stored/bench.sh
#
# Environment: BUILD_DIR (default build/bench, configured Release when
# missing), OUT (default $BUILD_DIR/results), MIN_TIME (default 0.3 s),
# REPETITIONS (default 3: the section shows medians), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build/bench}
out=${OUT:-$build/results}
min_time=${MIN_TIME:-0.3}
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-bench-stored.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DIDEM_BUILD_TESTS=OFF \
    -DIDEM_BUILD_BENCHMARKS=ON >"$out/stored-configure.log" 2>&1 ||
    { cat "$out/stored-configure.log"; exit 1; }
fi
cmake --build "$build" -j "${JOBS:-2}" --target idem-bench-stored \
  >"$out/stored-build.log" 2>&1 || { tail -40 "$out/stored-build.log"; exit 1; }
"$build/benchmarks/idem-bench-stored" \
  --idem_stored_uris="memory:?max_bytes=4294967296,rocksdb:$tmp/rocksdb" \
  --benchmark_min_time="$min_time" --benchmark_repetitions="${REPETITIONS:-3}" \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/stored.json" --benchmark_out_format=json \
  >"$out/stored.txt" 2>&1 || { tail -20 "$out/stored.txt"; exit 1; }
python3 benchmarks/report/section_stored.py "$out/stored.json"
