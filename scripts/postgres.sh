#!/usr/bin/env bash
# A local PostgreSQL server (Debian's package) on loopback, for the downstream database tests.
#
#   scripts/postgres.sh start    install the package if missing (as root), make a fresh cluster, start it,
#                                print its URL
#   scripts/postgres.sh stop     stop it (fast shutdown, then KILL after POSTGRES_STOP_TIMEOUT) and wait
#   scripts/postgres.sh status   exit 0 (and print the URL) if it runs, else exit 1
#
# The cluster lives in $POSTGRES_CACHE/run (under /var/tmp when root runs this from a checkout the server's
# user cannot reach, see server_run_dir in scripts/lib/service.sh; wiped on every start): `initdb` with trust authentication for
# the superuser `postgres`, listening on 127.0.0.1 only (its Unix socket in the run directory, not /var/run).
# PostgreSQL refuses to run as root: when started by root, the server runs as the user $POSTGRES_OS_USER
# (Debian's package creates `postgres`), which then owns the run directory.
# `start` is idempotent: with a server already running it only prints its URL. The last line of stdout is
# postgresql://postgres@127.0.0.1:<port>/postgres; progress goes to stderr.
#
# Environment (all optional):
#   POSTGRES_PORT            15432
#   POSTGRES_CACHE           <repo>/.cache/postgres
#   POSTGRES_BIN             the newest /usr/lib/postgresql/<major>/bin (initdb, pg_ctl, postgres)
#   POSTGRES_OS_USER         postgres (used only when started by root)
#   POSTGRES_START_TIMEOUT   60 (seconds)
#   POSTGRES_STOP_TIMEOUT    30 (seconds)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
POSTGRES_PORT="${POSTGRES_PORT:-15432}"
POSTGRES_CACHE="${POSTGRES_CACHE:-$REPO/.cache/postgres}"
POSTGRES_OS_USER="${POSTGRES_OS_USER:-postgres}"
POSTGRES_START_TIMEOUT="${POSTGRES_START_TIMEOUT:-60}"
POSTGRES_STOP_TIMEOUT="${POSTGRES_STOP_TIMEOUT:-30}"

SERVICE=postgres.sh SERVICE_CACHE="$POSTGRES_CACHE" PROCESS_PATTERN='postgres' STOP_TIMEOUT="$POSTGRES_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"

RUN="$(server_run_dir "$POSTGRES_CACHE/run" postgres)"          # wiped on every start: data, socket, log, url
DATA="$RUN/data"
PID_FILE="$DATA/postmaster.pid"    # written by the server itself; its first line is the pid
ADDR_FILE="$RUN/url"
LOG="$RUN/postgres.log"

find_bin() {
  if [ -n "${POSTGRES_BIN:-}" ]; then echo "$POSTGRES_BIN"; return 0; fi
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

install_package() {
  [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed and only root can install it (apt-get install postgresql)"
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and there is no apt-get to install it"
  log "installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  # The package may also create Debian's own cluster (main, port 5432); this script never uses it.
  apt-get update -q >&2 || true
  apt-get install -y -q --no-install-recommends postgresql >&2 || die "apt-get install postgresql failed"
}

# Run a command as the server's user (this user, or POSTGRES_OS_USER when root).
as_server_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$POSTGRES_OS_USER" -- "$@"
  else
    "$@"
  fi
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not running"
    return 0
  fi
  as_server_user "$BIN/pg_ctl" -D "$DATA" -m fast -w -t "$POSTGRES_STOP_TIMEOUT" stop >&2 \
    || { log "still running after ${POSTGRES_STOP_TIMEOUT}s; sending KILL"; kill -KILL "$pid" 2>/dev/null || true; }
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  log "stopped (pid $pid)"
}

start() {
  local pid
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    cat "$ADDR_FILE"
    return 0
  fi
  port_open "$POSTGRES_PORT" && die "port $POSTGRES_PORT is taken by another process; set POSTGRES_PORT"
  if [ -z "$BIN" ]; then
    install_package
    BIN="$(find_bin)" || die "no initdb under /usr/lib/postgresql/*/bin after installing postgresql"
  fi
  rm -rf "$RUN"
  mkdir -p "$RUN"
  if [ "$(id -u)" = 0 ]; then
    id -u "$POSTGRES_OS_USER" >/dev/null 2>&1 || die "user $POSTGRES_OS_USER does not exist; set POSTGRES_OS_USER"
    chown "$POSTGRES_OS_USER" "$RUN"
  fi
  if ! as_server_user "$BIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
      >"$LOG" 2>&1; then
    log_tail
    die "initdb failed"
  fi
  [ "$(id -u)" != 0 ] || chown "$POSTGRES_OS_USER" "$LOG"  # the server appends to it
  log "starting PostgreSQL ($BIN) on 127.0.0.1:$POSTGRES_PORT, log $LOG"
  # pg_ctl -w waits until the server accepts connections. fd 9 is the lock: the server must not inherit it.
  if ! as_server_user "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$POSTGRES_START_TIMEOUT" \
      -o "-h 127.0.0.1 -p $POSTGRES_PORT -k $RUN -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >&2 9>&-; then
    log_tail
    die "PostgreSQL did not start"
  fi
  echo "postgresql://postgres@127.0.0.1:$POSTGRES_PORT/postgres" >"$ADDR_FILE"
  log "ready (pid $(running_pid))"
  cat "$ADDR_FILE"
}

BIN="$(find_bin || true)"
service_main "$@"
