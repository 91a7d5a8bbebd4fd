#!/usr/bin/env bash
# A throwaway PostgreSQL server for idem's tests and benchmarks.
#
#   scripts/postgres.sh start    # initdb + start; prints the URL
#   scripts/postgres.sh url      # prints the URL of the running server
#   scripts/postgres.sh pause    # stops the server, keeps its data and port
#   scripts/postgres.sh resume   # starts it again on the same data and port
#   scripts/postgres.sh kill     # stops it as a crash does (pg_ctl stop -m
#                                # immediate: no checkpoint), keeps its data
#                                # and port; `resume` then recovers from the
#                                # WAL
#   scripts/postgres.sh stop     # stops it and deletes its data
#   scripts/postgres.sh freeze   # SIGSTOPs the server's processes: it
#                                # accepts connections but never answers
#   scripts/postgres.sh thaw     # SIGCONTs them
#
# The URL is postgresql://idem@127.0.0.1:PORT/idem (user idem owns database
# idem; trust authentication, loopback only). The server lives in a fresh
# directory under ${TMPDIR:-/tmp} (data, log, Unix socket) and listens on a
# free port of 127.0.0.1, found by binding port 0. Its data directory and
# port are kept in the state file $IDEM_PG_STATE (default
# build/postgres/state), so that `url`, `pause`, `resume` and `stop` find it:
# give each server its own state file (a test that stops its server must
# not stop everybody else's).
#
# PostgreSQL refuses to run as root: as root the server runs as the
# `postgres` user (runuser); as any other user, as that user. `start` is a
# no-op that prints the URL when the state file's server is already up.
#
# With IDEM_PG_OWNER_PID set, `start` also leaves a watchdog that stops the
# server (and deletes its data) once that process is gone: a test that
# aborts or is killed before its own cleanup leaks no server.
#
# With IDEM_PG_TEMPLATE set (a directory), `start` copies a data directory
# made once, by the first `start` that needs it (initdb, the idem user and
# database, a clean stop), instead of running initdb and creating them: a
# test run starts a dozen private servers per stage, and initdb cost about
# 1 s of CPU each where the copy costs 0.35 s. The template's server is
# stopped once made; `IDEM_PG_STATE=$IDEM_PG_TEMPLATE/state
# scripts/postgres.sh stop` deletes it.
#
# fsync is off unless IDEM_PG_FSYNC=on: a test server need not survive a
# power loss (a server or process crash loses nothing either way); turn it
# on to measure.
#
# Environment: IDEM_PG_STATE, IDEM_PG_OWNER_PID, IDEM_PG_FSYNC,
# IDEM_PG_TEMPLATE, IDEM_PG_BINDIR (default: the newest
# /usr/lib/postgresql/*/bin), TMPDIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=${IDEM_PG_STATE:-$root/build/postgres/state}
fsync=${IDEM_PG_FSYNC:-off}
bindir=${IDEM_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
wait_s=60

die() { echo "postgres.sh: $*" >&2; exit 1; }
[[ -x $bindir/initdb ]] || die "no PostgreSQL server binaries in '$bindir' (apt-get install postgresql)"

# Runs a server binary as the user the server runs as, from its directory
# (runuser keeps the caller's working directory, which postgres may not be
# allowed to enter).
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then
    (cd "$dir" && runuser -u postgres -- "$@")
  else
    (cd "$dir" && "$@")
  fi
}

load_state() {
  [[ -f $state ]] || return 1
  dir=$(sed -n 's/^dir=//p' "$state")
  port=$(sed -n 's/^port=//p' "$state")
  [[ -n $dir && -n $port ]]
}

url() { echo "postgresql://idem@127.0.0.1:$port/idem"; }

ready() { "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2 >/dev/null 2>&1; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

server_start() {  # Starts the server of $dir on $port; waits until ready.
  as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$wait_s" \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
        -c fsync=$fsync -c max_connections=400 -c shared_buffers=64MB" start >/dev/null || return 1
  local deadline=$((SECONDS + wait_s))
  until ready; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

server_stop() {
  [[ -f $dir/data/postmaster.pid ]] || return 0
  as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t "$wait_s" stop >/dev/null
}

# The template's data directory (IDEM_PG_TEMPLATE), made first if it is
# not there yet; one `start` makes it while the others wait on its lock.
template_data() {
  local t=$IDEM_PG_TEMPLATE
  mkdir -p "$t"
  (
    flock 9
    # (set -e does not hold here: the caller tests this function's status.)
    if [[ ! -s $t/ready || ! -d $(cat "$t/ready") ]]; then
      rm -f "$t/ready"
      IDEM_PG_TEMPLATE='' IDEM_PG_OWNER_PID='' IDEM_PG_STATE=$t/state \
        "$root/scripts/postgres.sh" start >/dev/null || exit 1
      IDEM_PG_STATE=$t/state "$root/scripts/postgres.sh" pause || exit 1
      echo "$(sed -n 's/^dir=//p' "$t/state")/data" >"$t/ready" || exit 1
    fi
  ) 9>"$t/lock" || return 1
  cat "$t/ready"
}

cmd_start() {
  if load_state && ready; then url; return; fi
  if load_state; then  # A stale state file: its server is gone.
    server_stop 2>/dev/null || true
    rm -rf "$dir"
  fi
  mkdir -p "$(dirname "$state")"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/idem-pg.XXXXXX")
  chmod 755 "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
  local template=''
  if [[ -n ${IDEM_PG_TEMPLATE:-} ]]; then
    template=$(template_data) || { rm -rf "$dir"; die "cannot make the template in '$IDEM_PG_TEMPLATE'"; }
    cp -a "$template" "$dir/data" || { rm -rf "$dir"; die "cannot copy the template '$template'"; }
  else
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 \
      --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; die "initdb failed"; }
  fi
  # Another process may take the port between the probe and the bind:
  # try a few.
  local attempt
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if server_start; then break; fi
    server_stop 2>/dev/null || true
    if ((attempt == 5)); then
      tail -20 "$dir/server.log" >&2 || true
      rm -rf "$dir"
      die "the server did not start"
    fi
  done
  printf 'dir=%s\nport=%s\n' "$dir" "$port" >"$state"
  if [[ -z $template ]]; then
    as_pg "$bindir/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
      -c "CREATE ROLE idem LOGIN" -c "CREATE DATABASE idem OWNER idem" >/dev/null ||
      die "cannot create the idem user and database (log: $dir/server.log)"
  fi
  if [[ -n ${IDEM_PG_OWNER_PID:-} ]]; then
    # Detached from the caller's session and output, so that nobody waits
    # for it; `stop` is a no-op if the owner already stopped the server.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
                    IDEM_PG_STATE=$2 "$3" stop' \
      watchdog "$IDEM_PG_OWNER_PID" "$state" "$root/scripts/postgres.sh" \
      </dev/null >/dev/null 2>&1 &
  fi
  url
}

# The postmaster and its children (backends, background workers), by pid.
server_pids() {
  local pid
  pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null) || return 1
  [[ -n $pid ]] || return 1
  echo "$pid" $(pgrep -P "$pid" || true)
}

case ${1:-} in
  start) cmd_start ;;
  url)
    load_state || die "no server (state file $state)"
    url
    ;;
  pause)
    load_state || die "no server (state file $state)"
    server_stop
    ;;
  kill)
    load_state || die "no server (state file $state)"
    [[ -f $dir/data/postmaster.pid ]] || die "the server is not running"
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t "$wait_s" stop >/dev/null
    ;;
  resume)
    load_state || die "no server (state file $state)"
    ready || server_start || { tail -20 "$dir/server.log" >&2; die "the server did not start again on port $port"; }
    url
    ;;
  stop)
    if load_state; then
      if pids=$(server_pids); then kill -s CONT $pids 2>/dev/null || true; fi
      server_stop || true
      rm -rf "$dir"
      rm -f "$state"
    fi
    ;;
  freeze | thaw)
    load_state || die "no server (state file $state)"
    pids=$(server_pids) || die "the server is not running"
    signal=STOP
    [[ $1 == thaw ]] && signal=CONT
    kill -s "$signal" $pids
    ;;
  *)
    echo "usage: $0 start|url|pause|resume|kill|stop|freeze|thaw" >&2
    exit 2
    ;;
esac
