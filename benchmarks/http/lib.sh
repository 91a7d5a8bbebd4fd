# Shell functions shared by the HTTP benchmarks (bench.sh,
# transfers_bench.sh, cpu_per_request.sh, peers.sh) and the gRPC one
# (benchmarks/grpc/bench.sh: bench_temp and start_process only), sourced
# from the checkout's root after they set here; bench_init sets the rest.
# shellcheck shell=bash
# here is the sourcing script's; it reads what bench_init sets.
# shellcheck disable=SC2154,SC2034

# The build's idem-demo, the settings both benchmarks take from the
# environment, the checks for idem-demo and wrk, and a temporary directory
# removed (with the servers start() left running) at exit.
bench_init() {  # script name (for the error messages), build directory
  build=$2
  demo=$build/examples/demo/idem-demo
  rounds=${ROUNDS:-3}
  duration=${DURATION:-10s}
  threads=${THREADS:-2}
  connections=${CONNECTIONS:-32}
  server_threads=${SERVER_THREADS:-2}
  [[ -x $demo ]] || { echo "$1: no $demo; build idem-demo first" >&2; exit 1; }
  command -v wrk >/dev/null || { echo "$1: wrk is not installed" >&2; exit 1; }
  bench_temp
}

# A temporary directory (tmp) and the servers started in it (pids), removed
# and stopped at exit, also on Ctrl-C or a kill.
bench_temp() {
  tmp=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}

# Starts `command` in the background, a server that prints "listening on
# 127.0.0.1:<port>" once it listens; stopped at exit. Waits up to 10 s.
start_process() {  # name, command... -> sets port_<name>
  local name=$1; shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 1000); do
    grep -q '^listening on' "$tmp/$name.out" 2>/dev/null && break
    sleep 0.01
  done
  local port
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/$name.out")
  [[ -n $port ]] || { cat "$tmp/$name.err" >&2; exit 1; }
  printf -v "port_$name" '%s' "$port"
}

start() {  # name, idem-demo flags... -> sets port_<name>
  local name=$1; shift
  start_process "$name" "$demo" --listen 127.0.0.1:0 --threads "$server_threads" "$@"
}

# wrk's latency distribution lines look like "     50%  412.00us".
to_us() {  # "412.00us" | "1.20ms" | "1.00s" -> microseconds
  awk -v v="$1" 'BEGIN {
    n = v + 0
    if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000;
    else if (v ~ /s$/) print n * 1000000; else print n }'
}

wrk_row() {  # name, port, script, round: one wrk run, a line in $tmp/results
  local out=$tmp/$1.$4.wrk
  wrk -t"$threads" -c"$connections" -d"$duration" --latency \
    -s "$here/$3" "http://127.0.0.1:$2" >"$out"
  local rps p50 p99 errors
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
  p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$out")")
  p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$out")")
  errors=$(awk '/Non-2xx or 3xx responses:/ {print $5}' "$out")
  echo "$1 $rps $p50 $p99 ${errors:-0} $4" >>"$tmp/results"
}

median() {  # name, column
  awk -v n="$1" -v c="$2" '$1 == n {print $c}' "$tmp/results" | sort -g |
    awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}

non2xx() {  # name: its non-2xx/3xx responses over every round
  awk -v n="$1" '$1 == n {s += $5} END {print s + 0}' "$tmp/results"
}

# The "loads" entries of RESULTS_JSON, one per name (medians over the
# rounds), separated by ",\n", without the last newline.
json_loads() {  # name...
  local name first=1
  for name in "$@"; do
    ((first)) || printf ',\n'
    first=0
    printf '    {"name": "%s", "requests_per_s": %s, "p50_us": %s, "p99_us": %s, "non2xx": %d}' \
      "$name" "$(median "$name" 2)" "$(median "$name" 3)" "$(median "$name" 4)" "$(non2xx "$name")"
  done
}
