#!/usr/bin/env bash
# Latency of `idemctl inspect` per store: process start to exit, RUNS runs
# each, median and p90, against two baselines measured the same way in the
# same run: starting /bin/true (the cost of a process) and `idemctl --help`
# (idemctl's own start, no store). For each store, one record is first
# written by idem-demo (one POST with a key; the demo is then stopped, so
# an embedded store is free), and idemctl inspects that key: it finds it.
#
#   benchmarks/idemctl/bench.sh BUILD_DIR
#
# Environment: STORES (space-separated store URIs; {tmp} is a fresh
# directory; default "rocksdb:{tmp}/rocksdb sqlite:{tmp}/idem.db"), RUNS
# (default 50), RESULTS_JSON (also write the figures there as JSON).
# Prints a Markdown table.
set -euo pipefail
build=${1:?usage: benchmarks/idemctl/bench.sh BUILD_DIR}
ctl=$build/tools/idemctl/idemctl
demo=$build/examples/demo/idem-demo
runs=${RUNS:-50}
default_stores='rocksdb:{tmp}/rocksdb sqlite:{tmp}/idem.db'
read -r -a stores <<<"${STORES:-$default_stores}"
for b in "$ctl" "$demo"; do
  [[ -x $b ]] || { echo "idemctl bench: no $b; build idemctl and idem-demo first" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idemctl-bench.XXXXXX")
demo_pid=
cleanup() {
  if [[ -n $demo_pid ]]; then kill "$demo_pid" 2>/dev/null || true; wait "$demo_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One record in `uri`, key $key, through idem-demo.
key="idemctl-bench-$$"
seed() {  # uri
  "$demo" --listen 127.0.0.1:0 --store "$1" >"$tmp/demo.out" 2>"$tmp/demo.err" &
  demo_pid=$!
  local port=
  for _ in $(seq 1000); do
    port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/demo.out")
    [[ -n $port ]] && break
    sleep 0.02
  done
  [[ -n $port ]] || { cat "$tmp/demo.err" >&2; exit 1; }
  curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port/orders" \
    -H "Idempotency-Key: $key" -H 'Content-Type: application/json' -d '{"item":"book","quantity":1}'
  kill "$demo_pid"
  wait "$demo_pid" 2>/dev/null || true
  demo_pid=
}

# RUNS timings (ms) of a command, one per line, into FILE; the command's
# exit status must be `expect` every time.
measure() {  # file expect command...
  local file=$1 expect=$2 rc
  shift 2
  : >"$file"
  for _ in $(seq "$runs"); do
    local t0=$EPOCHREALTIME
    rc=0
    "$@" >/dev/null 2>"$tmp/err" || rc=$?
    local t1=$EPOCHREALTIME
    if ((rc != expect)); then
      echo "idemctl bench: '$*' exited $rc: $(cat "$tmp/err")" >&2
      exit 1
    fi
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >>"$file"
  done
}

measure "$tmp/t.true" 0 /bin/true
measure "$tmp/t.help" 0 "$ctl" --help
names=()
uris=()
for i in "${!stores[@]}"; do
  uri=${stores[$i]//\{tmp\}/$tmp/s$i}
  mkdir -p "$tmp/s$i"
  name=${stores[$i]%%:*}
  [[ " ${names[*]} " == *" $name "* ]] && name=$name$i
  seed "$uri"
  measure "$tmp/t.$i" 0 "$ctl" --store "$uri" inspect --key "$key"
  names+=("$name")
  uris+=("${stores[$i]}")
done

python3 - "$tmp" "$runs" "${RESULTS_JSON:-}" "$(nproc)" "${#stores[@]}" "${names[@]}" "${uris[@]}" <<'PY'
import json, statistics, sys
tmp, runs, out, cores, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
names, uris = sys.argv[6:6 + n], sys.argv[6 + n:6 + 2 * n]
def stats(path):
    with open(path) as f:
        xs = sorted(float(x) for x in f if x.strip())
    return {"median_ms": statistics.median(xs),
            "p90_ms": xs[min(len(xs) - 1, int(0.9 * len(xs)))],
            "min_ms": xs[0]}
result = {"runs": runs, "cores": cores,
          "baselines": {"true": stats(f"{tmp}/t.true"),
                        "help": stats(f"{tmp}/t.help")},
          "stores": [dict(name=names[i], uri=uris[i], **stats(f"{tmp}/t.{i}"))
                     for i in range(n)]}
if out:
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
t = result["baselines"]["true"]["median_ms"]
print(f"idemctl inspect of a present key, {runs} runs each, process start to exit, {cores} cores")
print()
print("| store | median (ms) | p90 (ms) | vs /bin/true |")
print("|---|---:|---:|---:|")
for label, s in [("/bin/true", result["baselines"]["true"]),
                 ("idemctl --help", result["baselines"]["help"])] + [
                     (s["name"], s) for s in result["stores"]]:
    print(f"| `{label}` | {s['median_ms']:.1f} | {s['p90_ms']:.1f} | {s['median_ms'] / t:.1f}x |")
PY
