#!/usr/bin/env bash
# Installs what is missing, builds idem and runs every test:
#   1. a RelWithDebInfo build: unit, contract and backend tests (ctest), and a
#      short smoke run of every benchmark binary;
#   2. the .deb packages of that build (cpack), what they hold and depend on,
#      and a project built against them, unpacked, for each store
#      (scripts/packages.sh);
#   3. the tests again under AddressSanitizer + UndefinedBehaviorSanitizer;
#   4. the tests again under ThreadSanitizer;
#   5. the libFuzzer targets for a bounded time (clang).
# One build tree per configuration under build/ (reused between runs, with
# ccache), so a second run only rebuilds what changed.
#
# Where the time goes, and how the stages share it. Every stage's ctest runs
# in two passes: first the kill-and-restart tests (ctest label `crash`:
# tests/crash, idem-demo or a store's server killed and restarted, round
# after round), IDEM_TEST_CRASH_JOBS of them at once, then every other test
# at IDEM_TEST_JOBS. The crash tests spend their time waiting, not
# computing: each round waits out a lock timeout (2 s; 0.5 s for
# /transfers) and a process start, so one case of CrashTest at 5 rounds
# takes 9 s of wall time and 0.3 s of CPU (test binary and demo processes
# together, measured). Run two at a time they kept a core busy doing
# nothing; several at a time they overlap their waits.
#   Figures on 2 cores. Main stage (per-test ctest times, 1531 tests,
#   -j2): 357 s of wall time for 680 s of test time, of which the crash
#   tests are 494 s (CrashTest 8 x ~40 s + 2 x 8.5 s at 20 rounds,
#   TransfersCrashTest 12 cases, 86 s, one at a time by its RESOURCE_LOCK,
#   ServerCrashTest 71 s), everything else 186 s. At -j2 the crash tests
#   held the two slots for at least 494 / 2 = 247 s; their pass alone,
#   measured on the main build at a load average of 9-11 from other builds,
#   takes 110 s at -j10 (140 s at -j6; bound by the TransfersCrashTest
#   chain, which starts once a CrashTest slot frees): about 137 s less.
#   Sanitizer stages (ctest 330 s ASan, 316 s TSan before), crash tests at
#   IDEM_SANITIZER_CRASH_ROUNDS (3) rounds, measured: ASan 238 s of test
#   time, 42 s of wall at -j10 (at least 119 s at -j2): about 77 s less;
#   TSan 165 s of test time, 31 s at -j10 (at least 83 s at -j2): about
#   52 s less.
#   Estimate for the whole run: about 137 + 77 + 52 = 266 s less than the
#   1377 s measured before, about 1110 s. Every test still runs in every
#   stage: the concurrency tests under TSan, the memory-handling code under
#   ASan. (CI then measured 1366 s.)
#   Later the TransfersCrashTest cases stopped sharing a count (each counts
#   only its own transfers' rows) and lost their RESOURCE_LOCK: the main
#   stage's crash pass went from 146 s, the chain of twelve cases after
#   the CrashTest slots, to 72 s, the longest CrashTest case (-j10, 20
#   rounds, measured).
#   What each test costs in CPU, which is what bounds the sanitizer passes
#   (their second pass keeps both cores busy from start to end):
#   scripts/ctest_cpu.py build/<stage> -LE '^crash$'.
#   The ASan build is compiled at -O1 (assertions still on) and its programs
#   linked without PIE (CMakeLists.txt says why: a million relocations per
#   start). Its second pass, measured with ctest_cpu.py -j 4 (PostgreSQL and
#   Redis running, their CPU not counted): test processes' CPU 484 s at -O0
#   as PIE, 392 s -O0 without PIE, 301 s -O1 without PIE; wall 324, 303,
#   265 s. Its crash pass: 82 s -> 67 s.
# Processes, not cases: every other test binary runs its cases in groups of
# at most 20 of one suite per process (cmake/IdemTestGroups.cmake), the
# crash tests one case per process. Starting a sanitizer build's test binary
# costs about 0.15 s of CPU before its first case; 1,660 cases as 1,660
# processes spent more on that than on the cases (ASan, loaded machine:
# 263 s of CPU as cases, 145 s as 192 groups). Many groups mostly wait
# (servers, demo processes, renewal windows), so that pass runs at
# IDEM_CTEST_JOBS, twice the cores by default. Measured on a clean clone
# (2 cores, quiet; the builds recompiled most of the tree): ctest main
# 177 s (was 230), ASan 241 s (about 390), TSan 258 s (about 313).
#
# Environment: IDEM_TEST_JOBS (build jobs, default: nproc), IDEM_CTEST_JOBS
# (the other tests' groups run at once, default 2 x IDEM_TEST_JOBS),
# IDEM_TEST_CRASH_JOBS (the crash tests run at once, default 5 x
# IDEM_TEST_JOBS), IDEM_FUZZ_SECONDS (default 30),
# IDEM_SANITIZER_CRASH_ROUNDS (kill-and-restart rounds of each crash test in
# the sanitizer stages, default 3: the main stage runs each test's full
# count; the sanitizers look for memory and thread errors, which a few rounds
# of the same code path show as well as twenty),
# IDEM_TEST_STAGES (default "main package asan tsan fuzz"),
# IDEM_TEST_POSTGRES_URI (a server for the postgres tests; default: one
# started by scripts/postgres.sh),
# IDEM_TEST_REDIS_URI and IDEM_TEST_REDIS_CLUSTER_URI (default: started by
# scripts/redis.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

scripts/deps.sh

# What the run started and must stop at exit, however it ends: commands,
# run in the order they were added.
exit_commands=()
at_exit() { exit_commands+=("$(printf '%q ' "$@")"); }
trap 'for c in "${exit_commands[@]}"; do eval "$c" || true; done' EXIT

# PostgreSQL for the postgres store's tests: a throwaway server
# (scripts/postgres.sh), stopped and deleted at exit, unless
# IDEM_TEST_POSTGRES_URI already names one. Under CI a server that does not
# start fails the run (and so would the tests); elsewhere those tests skip.
# Every server of the run (this one and the tests' private ones) starts
# from one data directory made once (postgres.sh's IDEM_PG_TEMPLATE),
# whose data is deleted at exit.
export IDEM_PG_TEMPLATE=$root/build/postgres/template
IDEM_PG_STATE=$IDEM_PG_TEMPLATE/state scripts/postgres.sh stop || true
rm -rf "$IDEM_PG_TEMPLATE"
at_exit env IDEM_PG_STATE="$IDEM_PG_TEMPLATE/state" scripts/postgres.sh stop
if [[ -z ${IDEM_TEST_POSTGRES_URI:-} ]]; then
  pg_state=$root/build/postgres/state
  if pg_url=$(IDEM_PG_STATE=$pg_state scripts/postgres.sh start); then
    export IDEM_TEST_POSTGRES_URI=$pg_url
    at_exit env IDEM_PG_STATE="$pg_state" scripts/postgres.sh stop
  elif [[ -n ${CI:-} ]]; then
    echo "test.sh: PostgreSQL did not start (CI is set)" >&2
    exit 1
  else
    echo "test.sh: PostgreSQL did not start; the postgres tests will skip" >&2
  fi
fi

# Redis for the redis store's tests: a throwaway server and a 3-master
# cluster (scripts/redis.sh), stopped and deleted at exit, unless
# IDEM_TEST_REDIS_URI already names one. Same CI rule as PostgreSQL.
if [[ -z ${IDEM_TEST_REDIS_URI:-} ]]; then
  export IDEM_REDIS_STATE=$root/build/redis
  if redis_url=$(scripts/redis.sh start) && redis_cluster_url=$(scripts/redis.sh cluster); then
    export IDEM_TEST_REDIS_URI=$redis_url IDEM_TEST_REDIS_CLUSTER_URI=$redis_cluster_url
    at_exit env IDEM_REDIS_STATE="$IDEM_REDIS_STATE" scripts/redis.sh stop
  elif [[ -n ${CI:-} ]]; then
    echo "test.sh: Redis did not start (CI is set)" >&2
    exit 1
  else
    echo "test.sh: Redis did not start; the redis tests will skip" >&2
  fi
fi

jobs=${IDEM_TEST_JOBS:-$(nproc)}
ctest_jobs=${IDEM_CTEST_JOBS:-$((2 * jobs))}
crash_jobs=${IDEM_TEST_CRASH_JOBS:-$((5 * jobs))}
fuzz_seconds=${IDEM_FUZZ_SECONDS:-30}
sanitizer_crash_rounds=${IDEM_SANITIZER_CRASH_ROUNDS:-3}
stages=${IDEM_TEST_STAGES:-"main package asan tsan fuzz"}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Hash paths relative to the checkout, so that a fresh clone in another
# folder (CI) hits the cache an earlier build of the same sources filled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# Sanitizer reports must fail the run, with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

summary=()
# A command's output goes to `log`, printed only when it fails.
quiet() {  # log, command...
  local log=$1; shift
  "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
}
# The stage's configure preset (CMakePresets.json, build tree build/<stage>);
# prints idem's configure summary (what is built, and why).
configure() {  # preset
  quiet "build/$1.configure.log" cmake --preset "$1"
  sed -n '/^-- idem .* configuration:$/,/^-- Configuring done/p' "build/$1.configure.log" | sed '$d'
}
# Every test of the tree, in two passes (see the top): the crash tests
# (label crash) at crash_jobs, then the rest at ctest_jobs. Both passes run even
# when the first fails, so that one run shows every failure.
run_ctest() {  # dir, label
  local dir=$1 label=$2 start=$SECONDS failed=0 crash_s
  (cd "$dir" && ctest --output-on-failure -j "$crash_jobs" --timeout 600 -L '^crash$') || failed=1
  crash_s=$((SECONDS - start))
  (cd "$dir" && ctest --output-on-failure -j "$ctest_jobs" --timeout 600 -LE '^crash$') || failed=1
  [[ $failed == 0 ]] || { echo "test.sh: $label: ctest failed" >&2; exit 1; }
  summary+=("$label: ctest passed in $((SECONDS - start)) s (the crash tests $crash_s s at -j $crash_jobs)")
}

mkdir -p build
for stage in $stages; do
  start=$SECONDS
  case $stage in
    main)
      configure main
      cmake --build build/main -j "$jobs"
      run_ctest build/main main
      # The installed package must work for a project outside this tree.
      rm -rf build/main-install build/consumer
      cmake --install build/main --prefix build/main-install >/dev/null
      # With every adapter this build has, each a component of its own and
      # a small program (tests/install_consumer/adapter.cc, grpc.cc).
      adapters=()
      for adapter in beast restinio grpc; do
        [[ -z $(find build/main -name "libidem_$adapter.a" -print -quit) ]] || adapters+=("$adapter")
      done
      adapter_list=$(IFS=';'; echo "${adapters[*]}")
      quiet build/consumer.configure.log cmake -S tests/install_consumer -B build/consumer \
        -DCMAKE_PREFIX_PATH="$root/build/main-install" -DIDEM_CONSUMER_ADAPTERS="$adapter_list"
      cmake --build build/consumer -j "$jobs" >/dev/null
      build/consumer/consumer
      for adapter in "${adapters[@]}"; do build/consumer/consumer-"$adapter" >/dev/null; done
      summary+=("main: find_package(idem COMPONENTS stores memory ${adapters[*]}) from an install works")
      # Benchmarks are measured by scripts/bench.sh; here they only have to
      # run: every store URI (postgres too when IDEM_TEST_POSTGRES_URI is set,
      # its default) through every workload of the one benchmark program.
      build/main/benchmarks/idem-bench --benchmark_min_time=0.01 --benchmark_filter='/threads:(1|2)$' >/dev/null
      summary+=("main: idem-bench smoke run ok")
      ;;
    package)
      # On the main build tree (built here too when the main stage did not
      # run); consumers per store under build/package.
      configure main
      cmake --build build/main -j "$jobs"
      packages=$(scripts/packages.sh build/main build/package)
      summary+=("package: ${packages#packages.sh: }")
      ;;
    asan)
      configure asan
      cmake --build build/asan -j "$jobs"
      IDEM_CRASH_ROUNDS=$sanitizer_crash_rounds run_ctest build/asan asan+ubsan
      ;;
    tsan)
      configure tsan
      cmake --build build/tsan -j "$jobs"
      IDEM_CRASH_ROUNDS=$sanitizer_crash_rounds run_ctest build/tsan tsan
      ;;
    fuzz)
      configure fuzz  # clang++
      cmake --build build/fuzz -j "$jobs"
      # libFuzzer runs on one thread: the targets run $jobs at a time, each
      # for its full time on a core of its own.
      fuzzers=(build/fuzz/fuzz/*_fuzzer)
      for ((i = 0; i < ${#fuzzers[@]}; i += jobs)); do
        batch=("${fuzzers[@]:i:jobs}") pids=()
        for f in "${batch[@]}"; do
          name=$(basename "$f" _fuzzer)
          corpus=build/fuzz/corpus/$name
          mkdir -p "$corpus"
          "$f" -max_total_time="$fuzz_seconds" -print_final_stats=0 "$corpus" "$root/fuzz/corpus/$name" 2>"build/fuzz/$name.log" &
          pids+=($!)
        done
        for j in "${!batch[@]}"; do
          name=$(basename "${batch[j]}" _fuzzer)
          wait "${pids[j]}" || { tail -50 "build/fuzz/$name.log"; exit 1; }
          summary+=("fuzz: $name ran ${fuzz_seconds} s without a finding")
        done
      done
      ;;
    *) echo "test.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
  echo "test.sh: stage $stage done in $((SECONDS - start)) s"
done

printf '%s\n' "${summary[@]}"
