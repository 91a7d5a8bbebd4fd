#!/usr/bin/env bash
# Throwaway Redis servers for idem's tests and benchmarks.
#
#   scripts/redis.sh start     # one redis-server; prints redis://127.0.0.1:PORT/0
#   scripts/redis.sh cluster   # a 3-master Redis Cluster; prints
#                              # redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   scripts/redis.sh url       # prints the URI(s) of what is running
#   scripts/redis.sh stop      # stops both and deletes their data
#   scripts/redis.sh kill [N]  # SIGKILLs the server (N: cluster node N, 1-3),
#                              # keeping its port and data directory: a crash
#   scripts/redis.sh resume [N]  # starts it again on the same port, data and
#                                # options; prints the URI once it answers
#                                # (a node: once it says cluster_state:ok)
#
# Servers listen on free ports of 127.0.0.1 (found by binding port 0; a port
# taken between the probe and the bind is retried) and keep their data, logs
# and pid files in directories under the state directory $IDEM_REDIS_STATE
# (default build/redis): give each user its own (a test that stops its
# servers must not stop everybody else's). Persistence is off (no RDB
# snapshots, no AOF): a test server need not survive a restart. `start` and
# `cluster` print the running URI when their server is already up.
#
# With IDEM_REDIS_APPENDFSYNC=always|everysec|no, servers started by `start`
# and `cluster` keep an append-only file instead (appendonly yes, that
# appendfsync) in their data directory, so that `kill` and `resume` show
# what a crash of the server loses under that setting (tests/crash). `resume`
# reuses the options the server was started with, whatever the variable says
# then.
#
# With IDEM_REDIS_OWNER_PID set, `start` and `cluster` also leave a watchdog
# that runs `stop` once that process is gone, so a test that aborts leaks no
# server.
#
# Environment: IDEM_REDIS_STATE, IDEM_REDIS_OWNER_PID, IDEM_REDIS_APPENDFSYNC,
# TMPDIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=${IDEM_REDIS_STATE:-$root/build/redis}
wait_s=60

die() { echo "redis.sh: $*" >&2; exit 1; }
command -v redis-server >/dev/null || die "no redis-server (apt-get install redis-server)"
command -v redis-cli >/dev/null || die "no redis-cli (apt-get install redis-tools)"

# The persistence options of a new server, after --save '' --appendonly no.
persistence=()
case ${IDEM_REDIS_APPENDFSYNC:-} in
  "") ;;
  always | everysec | no) persistence=(--appendonly yes --appendfsync "$IDEM_REDIS_APPENDFSYNC") ;;
  *) die "IDEM_REDIS_APPENDFSYNC must be always, everysec or no, got '$IDEM_REDIS_APPENDFSYNC'" ;;
esac

# A free port of 127.0.0.1 (bound with port 0). With `bus`, one a cluster
# node can use: Redis Cluster listens on port + 10000 too, so the port must
# be at most 55535 and its bus port free as well.
free_port() {
  python3 - "${1:-}" <<'PY'
import socket, sys
bus = sys.argv[1] == "bus"
for _ in range(200):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    if bus:
        if port > 55535:
            continue
        b = socket.socket()
        try:
            b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        finally:
            b.close()
    print(port)
    sys.exit(0)
sys.exit(1)
PY
}

ping() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }

# Starts a server in directory $1 on a free port ($2: "bus" for a cluster
# node, else ""; extra arguments go to redis-server); prints the port. The
# extra arguments and the persistence options are kept in $1/args, one a
# line, for `resume`. With IDEM_REDIS_FIXED_PORT set, on that port only
# (once).
server_start() {
  local dir=$1 kind=$2 attempt port deadline pid attempts=5
  shift 2
  mkdir -p "$dir"
  [[ -n ${IDEM_REDIS_FIXED_PORT:-} ]] && attempts=1
  : >"$dir/args"
  (($# + ${#persistence[@]})) && printf '%s\n' "$@" "${persistence[@]}" >"$dir/args"
  for ((attempt = 1; attempt <= attempts; attempt++)); do
    if [[ -n ${IDEM_REDIS_FIXED_PORT:-} ]]; then
      port=$IDEM_REDIS_FIXED_PORT
    else
      port=$(free_port "$kind") || continue
    fi
    rm -f "$dir/redis.log"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
      --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save '' --appendonly no \
      "$@" "${persistence[@]}" >/dev/null || true
    deadline=$((SECONDS + wait_s))
    until ping "$port"; do
      # A server that lost the port race (or refused its port) says so in
      # its log and exits: try another port at once.
      grep -qs 'Address already in use\|Could not create server TCP\|port number too high' "$dir/redis.log" && break
      pid=$(cat "$dir/redis.pid" 2>/dev/null || true)
      [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && break
      ((SECONDS < deadline)) || break
      sleep 0.1
    done
    if ping "$port"; then
      echo "$port" >"$dir/port"
      echo "$port"
      return 0
    fi
    server_stop "$dir"
  done
  tail -20 "$dir/redis.log" >&2 || true
  return 1
}

server_stop() {  # dir
  local dir=$1 pid deadline
  [[ -f $dir/redis.pid ]] || return 0
  pid=$(cat "$dir/redis.pid")
  kill -s CONT "$pid" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  deadline=$((SECONDS + wait_s))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/redis.pid"
}

# The directory of the server `kill` and `resume` name: the standalone
# server, or cluster node $1.
server_dir() {
  case ${1:-} in
    "") echo "$state/standalone" ;;
    1 | 2 | 3) echo "$state/cluster/node$1" ;;
    *) die "no such server '$1' (none for the standalone server, or a cluster node 1-3)" ;;
  esac
}

cmd_kill() {  # [node]
  local dir pid
  dir=$(server_dir "${1:-}")
  [[ -f $dir/port ]] || die "no server in $dir"
  pid=$(cat "$dir/redis.pid" 2>/dev/null) || die "no pid file in $dir (killed already?)"
  # Only a redis-server: a server that died by itself leaves a pid file
  # whose pid another process may have by now.
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == redis-server* ]] && kill -s KILL "$pid" 2>/dev/null
  local deadline=$((SECONDS + wait_s))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || die "redis-server $pid did not die"
    sleep 0.05
  done
  # A SIGKILLed server leaves its pid file: remove it, so that `stop` does
  # not signal whichever process gets that pid next.
  rm -f "$dir/redis.pid"
}

cmd_resume() {  # [node]
  local dir port args
  dir=$(server_dir "${1:-}")
  [[ -f $dir/port && -f $dir/args ]] || die "no server in $dir"
  port=$(cat "$dir/port")
  if ! ping "$port"; then
    mapfile -t args <"$dir/args"
    persistence=()
    IDEM_REDIS_FIXED_PORT=$port server_start "$dir" "" "${args[@]}" >/dev/null ||
      die "redis-server did not start again on port $port (log: $dir/redis.log)"
  fi
  if [[ -z ${1:-} ]]; then standalone_url; return; fi
  # A node that comes back says cluster_state:fail until it has heard from
  # the others again.
  local deadline=$((SECONDS + wait_s))
  until redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; do
    ((SECONDS < deadline)) || die "node $1 did not reach cluster_state:ok"
    sleep 0.1
  done
  cluster_url
}

standalone_url() { echo "redis://127.0.0.1:$(cat "$state/standalone/port")/0"; }

cluster_url() {
  local out="" d
  for d in "$state"/cluster/node*; do
    out+="${out:+,}127.0.0.1:$(cat "$d/port")"
  done
  echo "redis-cluster://$out"
}

up() {  # dir...
  local d
  for d in "$@"; do
    [[ -f $d/port ]] && ping "$(cat "$d/port")" || return 1
  done
}

watchdog() {
  [[ -n ${IDEM_REDIS_OWNER_PID:-} ]] || return 0
  # Detached from the caller's session and output, so that nobody waits for
  # it; `stop` is a no-op if the owner already stopped the servers.
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
                  IDEM_REDIS_STATE=$2 "$3" stop' \
    watchdog "$IDEM_REDIS_OWNER_PID" "$state" "$root/scripts/redis.sh" \
    </dev/null >/dev/null 2>&1 &
}

cmd_start() {
  if up "$state/standalone"; then standalone_url; return; fi
  server_stop "$state/standalone" 2>/dev/null || true
  rm -rf "$state/standalone"
  server_start "$state/standalone" "" >/dev/null || die "redis-server did not start"
  watchdog
  standalone_url
}

cmd_cluster() {
  local nodes=("$state"/cluster/node1 "$state"/cluster/node2 "$state"/cluster/node3)
  if up "${nodes[@]}"; then cluster_url; return; fi
  local d
  for d in "${nodes[@]}"; do server_stop "$d" 2>/dev/null || true; done
  rm -rf "$state/cluster"
  local addrs=()
  for d in "${nodes[@]}"; do
    port=$(server_start "$d" bus --cluster-enabled yes --cluster-config-file "$d/nodes.conf" \
      --cluster-node-timeout 5000) || die "a cluster node did not start"
    addrs+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
    >"$state/cluster/create.log" 2>&1 ||
    { cat "$state/cluster/create.log" >&2; die "redis-cli --cluster create failed"; }
  local deadline=$((SECONDS + wait_s)) a
  for a in "${addrs[@]}"; do
    until redis-cli -h 127.0.0.1 -p "${a#*:}" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; do
      ((SECONDS < deadline)) || die "the cluster did not reach cluster_state:ok"
      sleep 0.1
    done
  done
  watchdog
  cluster_url
}

case ${1:-} in
  start) cmd_start ;;
  cluster) cmd_cluster ;;
  url)
    found=0
    if up "$state/standalone"; then standalone_url; found=1; fi
    if up "$state"/cluster/node1 "$state"/cluster/node2 "$state"/cluster/node3 2>/dev/null; then
      cluster_url
      found=1
    fi
    ((found)) || die "no server (state directory $state)"
    ;;
  stop)
    for d in "$state/standalone" "$state"/cluster/node*; do
      [[ -d $d ]] && server_stop "$d"
    done
    rm -rf "$state/standalone" "$state/cluster"
    ;;
  kill) cmd_kill "${2:-}" ;;
  resume) cmd_resume "${2:-}" ;;
  *)
    echo "usage: $0 start|cluster|url|stop|kill [N]|resume [N]" >&2
    exit 2
    ;;
esac
