#!/usr/bin/env bash
# A local MariaDB server (Debian's package) on loopback, for the downstream database tests.
#
#   scripts/mariadb.sh start    install the package if missing (as root), make a fresh data directory, start the
#                               server, create the user and database the tests use, print its URL
#   scripts/mariadb.sh stop     stop it (TERM, then KILL after MARIADB_STOP_TIMEOUT) and wait
#   scripts/mariadb.sh status   exit 0 (and print the URL) if it runs, else exit 1
#
# The server runs with --no-defaults (no /etc/mysql configuration), its data, socket and log in
# $MARIADB_CACHE/run (under /var/tmp when root runs this from a checkout the server's user cannot reach, see
# server_run_dir in scripts/lib/service.sh; wiped on every start), listening on 127.0.0.1 only, utf8mb4 by default.
# Started by root, it runs as $MARIADB_OS_USER (Debian's package creates `mysql`). A user `sink`
# (password `sink`, every privilege) and a database `downstream` (utf8mb4) are created.
# `start` is idempotent: with a server already running it only prints its URL. The last line of stdout is
# mariadb://sink:sink@127.0.0.1:<port>/downstream; progress goes to stderr.
#
# Environment (all optional):
#   MARIADB_PORT            13306
#   MARIADB_CACHE           <repo>/.cache/mariadb
#   MARIADB_OS_USER         mysql (used only when started by root)
#   MARIADB_START_TIMEOUT   60 (seconds)
#   MARIADB_STOP_TIMEOUT    30 (seconds)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
MARIADB_PORT="${MARIADB_PORT:-13306}"
MARIADB_CACHE="${MARIADB_CACHE:-$REPO/.cache/mariadb}"
MARIADB_OS_USER="${MARIADB_OS_USER:-mysql}"
MARIADB_START_TIMEOUT="${MARIADB_START_TIMEOUT:-60}"
MARIADB_STOP_TIMEOUT="${MARIADB_STOP_TIMEOUT:-30}"

SERVICE=mariadb.sh SERVICE_CACHE="$MARIADB_CACHE" PROCESS_PATTERN='mariadbd\|mysqld' STOP_TIMEOUT="$MARIADB_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"

RUN="$(server_run_dir "$MARIADB_CACHE/run" mariadb)"           # wiped on every start: data, socket, log, pid, url
DATA="$RUN/data"
SOCKET="$RUN/mariadb.sock"
PID_FILE="$RUN/mariadb.pid"
ADDR_FILE="$RUN/url"
LOG="$RUN/mariadb.log"

server_bin() { command -v mariadbd || ls /usr/sbin/mariadbd 2>/dev/null || command -v mysqld || true; }

install_package() {
  [ "$(id -u)" = 0 ] || die "MariaDB is not installed and only root can install it (apt-get install mariadb-server)"
  command -v apt-get >/dev/null || die "MariaDB is not installed and there is no apt-get to install it"
  log "installing Debian's mariadb-server package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2 || true
  apt-get install -y -q --no-install-recommends mariadb-server mariadb-client >&2 \
    || die "apt-get install mariadb-server failed"
}

client() { mariadb --no-defaults --protocol=socket --socket="$SOCKET" -u root "$@"; }

server_answers() { client -e 'SELECT 1' >/dev/null 2>&1 && port_open "$MARIADB_PORT"; }
wait_ready() { await_ready "$1" "$MARIADB_START_TIMEOUT" MariaDB server_answers; }

start() {
  local pid bin user=()
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    cat "$ADDR_FILE"
    return 0
  fi
  port_open "$MARIADB_PORT" && die "port $MARIADB_PORT is taken by another process; set MARIADB_PORT"
  bin="$(server_bin)"
  if [ -z "$bin" ]; then
    install_package
    bin="$(server_bin)"
    [ -n "$bin" ] || die "no mariadbd after installing mariadb-server"
  fi
  rm -rf "$RUN"
  mkdir -p "$RUN"
  if [ "$(id -u)" = 0 ]; then
    id -u "$MARIADB_OS_USER" >/dev/null 2>&1 || die "user $MARIADB_OS_USER does not exist; set MARIADB_OS_USER"
    chown "$MARIADB_OS_USER" "$RUN"
    user=(--user="$MARIADB_OS_USER")
  fi
  if ! mariadb-install-db --no-defaults "${user[@]}" --datadir="$DATA" --auth-root-authentication-method=normal \
      --skip-test-db >"$LOG" 2>&1; then
    log_tail
    die "mariadb-install-db failed"
  fi
  [ "$(id -u)" != 0 ] || chown "$MARIADB_OS_USER" "$LOG"  # the server appends to it
  log "starting MariaDB ($bin) on 127.0.0.1:$MARIADB_PORT, log $LOG"
  # fd 9 is the lock (see service_main): the server must not inherit it.
  nohup "$bin" --no-defaults "${user[@]}" --datadir="$DATA" --socket="$SOCKET" --pid-file="$RUN/server.pid" \
    --port="$MARIADB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --log-error="$LOG" \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=128M --skip-log-bin \
    </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  local t0=$SECONDS
  wait_ready "$pid"
  client -e "CREATE USER IF NOT EXISTS 'sink'@'%' IDENTIFIED BY 'sink';
             GRANT ALL PRIVILEGES ON *.* TO 'sink'@'%';
             CREATE DATABASE IF NOT EXISTS downstream CHARACTER SET utf8mb4;" >&2
  echo "mariadb://sink:sink@127.0.0.1:$MARIADB_PORT/downstream" >"$ADDR_FILE"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

service_main "$@"
