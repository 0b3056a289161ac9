#!/usr/bin/env bash
# A local Prometheus server (Debian's package) on loopback, for the metrics tests (tests/integration/test_prometheus.py).
#
#   scripts/prometheus.sh install   install the package if promtool or prometheus is missing (as root, apt-get),
#                                   print the path of promtool
#   scripts/prometheus.sh start     install if needed, start Prometheus with $PROMETHEUS_CONFIG (its rule files
#                                   relative to it), a fresh TSDB, on 127.0.0.1:$PROMETHEUS_PORT; print its URL
#   scripts/prometheus.sh stop      stop it (TERM, then KILL after PROMETHEUS_STOP_TIMEOUT) and wait
#   scripts/prometheus.sh status    exit 0 (and print the URL) if it runs, else exit 1
#
# The TSDB, log, pid and URL live in $PROMETHEUS_CACHE/run (wiped on every start). `start` is idempotent: with a
# server already running it only prints its URL (stop it first to load another config). The last line of stdout is
# http://127.0.0.1:<port>; progress goes to stderr.
#
# Environment (all optional but the config for start):
#   PROMETHEUS_CONFIG          compose/prometheus/prometheus.yml
#   PROMETHEUS_PORT            19090
#   PROMETHEUS_CACHE           <repo>/.cache/prometheus
#   PROMETHEUS_START_TIMEOUT   60 (seconds)
#   PROMETHEUS_STOP_TIMEOUT    30 (seconds)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PROMETHEUS_CONFIG="${PROMETHEUS_CONFIG:-$REPO/compose/prometheus/prometheus.yml}"
PROMETHEUS_PORT="${PROMETHEUS_PORT:-19090}"
PROMETHEUS_CACHE="${PROMETHEUS_CACHE:-$REPO/.cache/prometheus}"
PROMETHEUS_START_TIMEOUT="${PROMETHEUS_START_TIMEOUT:-60}"
PROMETHEUS_STOP_TIMEOUT="${PROMETHEUS_STOP_TIMEOUT:-30}"

SERVICE=prometheus.sh SERVICE_CACHE="$PROMETHEUS_CACHE" PROCESS_PATTERN='prometheus' STOP_TIMEOUT="$PROMETHEUS_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"

RUN="$PROMETHEUS_CACHE/run"              # wiped on every start: tsdb, log, pid, url
PID_FILE="$RUN/prometheus.pid"
ADDR_FILE="$RUN/url"
LOG="$RUN/prometheus.log"

server_bin() { command -v prometheus || ls /usr/bin/prometheus 2>/dev/null || true; }

install_package() {
  if command -v promtool >/dev/null && [ -n "$(server_bin)" ]; then
    command -v promtool
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "Prometheus is not installed and only root can install it (apt-get install prometheus)"
  command -v apt-get >/dev/null || die "Prometheus is not installed and there is no apt-get to install it"
  log "installing Debian's prometheus package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2 || true
  apt-get install -y -q --no-install-recommends prometheus >&2 || die "apt-get install prometheus failed"
  command -v promtool >/dev/null || die "no promtool after installing prometheus"
  command -v promtool
}

server_answers() { curl -sf "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" >/dev/null 2>&1; }
wait_ready() { await_ready "$1" "$PROMETHEUS_START_TIMEOUT" Prometheus server_answers; }

start() {
  local pid bin
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    cat "$ADDR_FILE"
    return 0
  fi
  [ -f "$PROMETHEUS_CONFIG" ] || die "no Prometheus config $PROMETHEUS_CONFIG; set PROMETHEUS_CONFIG"
  port_open "$PROMETHEUS_PORT" && die "port $PROMETHEUS_PORT is taken by another process; set PROMETHEUS_PORT"
  install_package >/dev/null
  bin="$(server_bin)"
  rm -rf "$RUN"
  mkdir -p "$RUN/tsdb"
  log "starting Prometheus ($bin) on 127.0.0.1:$PROMETHEUS_PORT with $PROMETHEUS_CONFIG, log $LOG"
  # fd 9 is the lock (see service_main): the server must not inherit it.
  nohup "$bin" --config.file="$PROMETHEUS_CONFIG" --storage.tsdb.path="$RUN/tsdb" \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --web.enable-lifecycle \
    </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  local t0=$SECONDS
  wait_ready "$pid"
  echo "http://127.0.0.1:$PROMETHEUS_PORT" >"$ADDR_FILE"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

if [ "${1:-}" = install ]; then
  install_package
  exit 0
fi
service_main "$@"
