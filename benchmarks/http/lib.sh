# Shell functions shared by the HTTP benchmarks (bench.sh,
# transfers_bench.sh); sourced after they set demo, tmp, pids, here,
# server_threads, threads, connections and duration.
# shellcheck shell=bash

start() {  # name, flags... -> sets port_<name>
  local name=$1; shift
  "$demo" --listen 127.0.0.1:0 --threads "$server_threads" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 500); do
    grep -q '^listening on' "$tmp/$name.out" 2>/dev/null && break
    sleep 0.01
  done
  local port
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/$name.out")
  [[ -n $port ]] || { cat "$tmp/$name.err"; exit 1; }
  printf -v "port_$name" '%s' "$port"
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
