#!/usr/bin/env bash
# HTTP benchmark of idem-demo on one or more stores against the same server
# without idem (idem-demo --no-idem): wrk with fresh keys on every store,
# replays on the first, and the plain baseline, in one run, interleaved over
# several rounds. Prints a Markdown table of requests/s and p50/p99 latency
# (medians over the rounds), against the plain server and the first store.
#
#   benchmarks/http/bench.sh [BUILD_DIR]   # default build/release
#   STORES="memory: rocksdb:{tmp}/db sqlite:{tmp}/idem.db" benchmarks/http/bench.sh
#
# Environment: STORES (space-separated store URIs, default "memory:"; {tmp}
# stands for a fresh directory removed at exit; `memory:` holds 1,000,000
# records by default, which fresh keys fill within a few rounds, after which
# it answers 503 (the non-2xx column): scripts/bench.sh passes
# memory:?capacity=8388608&max_bytes=8589934592), ROUNDS (3), DURATION (10s),
# THREADS (2), CONNECTIONS (32), SERVER_THREADS (idem-demo --threads, 2),
# DEMO_FLAGS (more idem-demo flags for the stores' servers, e.g.
# "--store-calls inline"), RESULTS_JSON (a file to write the same figures
# to as JSON, for benchmarks/report/make_report.py: the configuration, the
# medians per load and every round's raw figures; the Markdown is printed
# as well), RESTINIO (1: also the same loads on idem-demo --http restinio,
# see below; default 1 when idem-demo has --http restinio, else 0),
# REPLAY_STORES (space-separated store URIs on which only the replay load
# runs, each on a server of its own, beside replay on the first store of
# STORES: the remote stores with and without their local cache; a URI with
# local_cache=N is labelled <scheme>+cache), BASE_DEMO (another idem-demo,
# say a build of the commit before a change: each store of STORES also on a
# server of that binary, its own directory for {tmp}, loads named
# fresh:<label>@base in the same rounds, right after fresh:<label>: an A/B
# comparison that the machine's drift between rounds touches alike).
# shellcheck disable=SC2154  # port_<name> are set by start(), by printf -v.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=benchmarks/http
# shellcheck source=benchmarks/http/lib.sh
source "$here/lib.sh"
bench_init bench.sh "${1:-build/release}"
read -r -a stores <<<"${STORES:-memory:?capacity=8388608&max_bytes=8589934592}"

# A row label per store: its scheme, numbered when a scheme repeats.
labels=()
for i in "${!stores[@]}"; do
  label=${stores[$i]%%:*}
  [[ " ${labels[*]} " == *" $label "* ]] && label=$label$i
  labels+=("$label")
  # shellcheck disable=SC2086  # DEMO_FLAGS is a list of flags.
  start "s$i" --store "${stores[$i]//\{tmp\}/$tmp}" ${DEMO_FLAGS:-}
done
start plain --no-idem

# The same stores on BASE_DEMO's servers.
base_demo=${BASE_DEMO:-}
if [[ -n $base_demo ]]; then
  [[ -x $base_demo ]] || { echo "bench.sh: BASE_DEMO=$base_demo is not an executable" >&2; exit 1; }
  mkdir "$tmp/base"
  for i in "${!stores[@]}"; do
    # shellcheck disable=SC2086  # DEMO_FLAGS is a list of flags.
    start_process "b$i" "$base_demo" --listen 127.0.0.1:0 --threads "$server_threads" \
      --store "${stores[$i]//\{tmp\}/$tmp/base}" ${DEMO_FLAGS:-}
  done
fi

# Replays only: a label per store (<scheme>, <scheme>+cache with the local
# cache on), a server each.
read -r -a replay_stores <<<"${REPLAY_STORES:-}"
replay_labels=()
for i in "${!replay_stores[@]}"; do
  label=${replay_stores[$i]%%:*}
  [[ ${replay_stores[$i]} =~ [?\&]local_cache=[1-9] ]] && label=$label+cache
  # Unique among the replay rows (replay:<first store> is one of them).
  [[ " ${labels[0]} ${replay_labels[*]} " == *" $label "* ]] && label=$label$i
  replay_labels+=("$label")
  # shellcheck disable=SC2086  # DEMO_FLAGS is a list of flags.
  start "p$i" --store "${replay_stores[$i]}" ${DEMO_FLAGS:-}
done

# --- RESTinio: the same handler on idem-demo --http restinio, against its
# own plain server (--http restinio --no-idem), on the memory and RocksDB
# stores of STORES; loads named restinio:<load>, a table of their own.
restinio=${RESTINIO:-auto}
if [[ $restinio == auto ]]; then
  restinio=0
  "$demo" --help 2>/dev/null | tr -s ' \n' ' ' | grep -q 'restinio (RESTinio)' && restinio=1
fi
restinio_stores=()
if ((restinio)); then
  for i in "${!stores[@]}"; do
    case ${stores[$i]} in memory:* | rocksdb:*) restinio_stores+=("$i") ;; esac
  done
  for i in "${restinio_stores[@]}"; do
    store=${stores[$i]//\{tmp\}/$tmp}
    # A directory store cannot be opened twice: RocksDB gets its own.
    [[ $store == rocksdb:* ]] && store=$store-restinio
    # shellcheck disable=SC2086  # DEMO_FLAGS is a list of flags.
    start "r$i" --http restinio --store "$store" ${DEMO_FLAGS:-}
  done
  start rplain --http restinio --no-idem
fi
# --- end RESTinio

key="bench-replay-$$"
curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port_s0/orders" \
  -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d '{"item":"book","qty":1}'
for i in "${!replay_stores[@]}"; do
  port_var=port_p$i
  curl -fsS -o /dev/null -X POST "http://127.0.0.1:${!port_var}/orders" \
    -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d '{"item":"book","qty":1}'
done
if ((restinio)) && ((${#restinio_stores[@]})); then
  port_var=port_r${restinio_stores[0]}
  curl -fsS -o /dev/null -X POST "http://127.0.0.1:${!port_var}/orders" \
    -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d '{"item":"book","qty":1}'
fi

run() {  # name, port, script, round
  IDEM_BENCH_KEY=$key wrk_row "$@"
}

for round in $(seq "$rounds"); do
  run plain "$port_plain" fresh_keys.lua "$round"
  for i in "${!stores[@]}"; do
    port_var=port_s$i
    run "fresh:${labels[$i]}" "${!port_var}" fresh_keys.lua "$round"
    if [[ -n $base_demo ]]; then
      port_var=port_b$i
      run "fresh:${labels[$i]}@base" "${!port_var}" fresh_keys.lua "$round"
    fi
  done
  run "replay:${labels[0]}" "$port_s0" replays.lua "$round"
  for i in "${!replay_stores[@]}"; do
    port_var=port_p$i
    run "replay:${replay_labels[$i]}" "${!port_var}" replays.lua "$round"
  done
  if ((restinio)); then
    run restinio:plain "$port_rplain" fresh_keys.lua "$round"
    for i in "${restinio_stores[@]}"; do
      port_var=port_r$i
      run "restinio:fresh:${labels[$i]}" "${!port_var}" fresh_keys.lua "$round"
    done
    if ((${#restinio_stores[@]})); then
      port_var=port_r${restinio_stores[0]}
      run "restinio:replay:${labels[${restinio_stores[0]}]}" "${!port_var}" replays.lua "$round"
    fi
  fi
done

plain_rps=$(median plain 2)
plain_p99=$(median plain 4)
first_rps=$(median "fresh:${labels[0]}" 2)
echo "| load | requests/s | p50 (ms) | p99 (ms) | vs plain (req/s) | p99 vs plain | vs fresh:${labels[0]} | non-2xx |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
names=(plain)
for label in "${labels[@]}"; do
  names+=("fresh:$label")
  [[ -n $base_demo ]] && names+=("fresh:$label@base")
done
names+=("replay:${labels[0]}")
for label in "${replay_labels[@]}"; do names+=("replay:$label"); done
for name in "${names[@]}"; do
  rps=$(median "$name" 2); p50=$(median "$name" 3); p99=$(median "$name" 4)
  errors=$(non2xx "$name")
  awk -v n="$name" -v r="$rps" -v a="$p50" -v b="$p99" -v pr="$plain_rps" -v pp="$plain_p99" -v fr="$first_rps" -v e="$errors" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %.0f%% | %.2fx | %.0f%% | %d |\n", n, r, a / 1000, b / 1000, 100 * r / pr, b / pp, 100 * r / fr, e }'
done
if ((restinio)); then
  rnames=(restinio:plain)
  for i in "${restinio_stores[@]}"; do rnames+=("restinio:fresh:${labels[$i]}"); done
  ((${#restinio_stores[@]})) && rnames+=("restinio:replay:${labels[${restinio_stores[0]}]}")
  rplain_rps=$(median restinio:plain 2)
  rplain_p99=$(median restinio:plain 4)
  echo
  echo "| load (idem-demo --http restinio) | requests/s | p50 (ms) | p99 (ms) | vs restinio:plain (req/s) | p99 vs restinio:plain | non-2xx |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for name in "${rnames[@]}"; do
    rps=$(median "$name" 2); p50=$(median "$name" 3); p99=$(median "$name" 4)
    errors=$(non2xx "$name")
    awk -v n="$name" -v r="$rps" -v a="$p50" -v b="$p99" -v pr="$rplain_rps" -v pp="$rplain_p99" -v e="$errors" \
      'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %.0f%% | %.2fx | %d |\n", n, r, a / 1000, b / 1000, 100 * r / pr, b / pp, e }'
  done
  names+=("${rnames[@]}")
fi
echo
echo "wrk -t$threads -c$connections -d$duration --latency, $rounds rounds (medians), idem-demo --threads $server_threads, $(nproc) cores"
for i in "${!stores[@]}"; do echo "${labels[$i]}: ${stores[$i]}"; done
[[ -n $base_demo ]] && echo "@base: $base_demo"
for i in "${!replay_stores[@]}"; do echo "${replay_labels[$i]}: ${replay_stores[$i]}"; done
echo "raw:"
sort "$tmp/results" | sed 's/^/  /'

if [[ -n ${RESULTS_JSON:-} ]]; then
  # Every value is a number or a plain word, but for the store URIs
  # (escaped: backslash and double quote).
  json_str() { local v=${1//\\/\\\\}; printf '"%s"' "${v//\"/\\\"}"; }
  {
    printf '{\n  "config": {"wrk_threads": %d, "connections": %d, "duration": %s, "rounds": %d, ' \
      "$threads" "$connections" "$(json_str "$duration")" "$rounds"
    printf '"server_threads": %d, "demo_flags": %s, "cores": %d},\n' \
      "$server_threads" "$(json_str "${DEMO_FLAGS:-}")" "$(nproc)"
    printf '  "stores": {'
    for i in "${!stores[@]}"; do
      ((i == 0)) || printf ', '
      printf '%s: %s' "$(json_str "${labels[$i]}")" "$(json_str "${stores[$i]}")"
    done
    for i in "${!replay_stores[@]}"; do
      printf ', %s: %s' "$(json_str "${replay_labels[$i]}")" "$(json_str "${replay_stores[$i]}")"
    done
    printf '},\n  "loads": [\n'
    json_loads "${names[@]}"
    printf '\n  ],\n  "raw": [\n'
    awk 'NR > 1 {printf ",\n"}
         {printf "    {\"name\": \"%s\", \"round\": %d, \"requests_per_s\": %s, \"p50_us\": %s, \"p99_us\": %s, \"non2xx\": %d}", $1, $6, $2, $3, $4, $5}' \
      "$tmp/results"
    printf '\n  ]\n}\n'
  } >"$RESULTS_JSON"
fi
