#!/usr/bin/env bash
# A local Prometheus server (Debian's package) on loopback, for the metrics tests (tests/integration/test_prometheus.py).
#
#   scripts/prometheus.sh install   install the package if promtool or prometheus is missing (as root, apt-get),
#                                   print the path of promtool
#   scripts/prometheus.sh start     install if needed, start Prometheus with $PROMETHEUS_CONFIG (its rule files
#                                   relative to it), a fresh TSDB, on 127.0.0.1:$PROMETHEUS_PORT; print its URL
#   scripts/prometheus.sh stop      stop it (TERM, then KILL after PROMETHEUS_STOP_TIMEOUT) and wait
#   scripts/prometheus.sh status    exit 0 (and print the URL) if it runs, else exit 1
#   scripts/prometheus.sh chromium  install Debian's chromium package if chromium is missing (as root, apt-get),
#                                   print its path
#   scripts/prometheus.sh screenshot PNG QUERY [RANGE]
#                                   install chromium if needed, then write to PNG a screenshot (1280x800, headless
#                                   Chromium) of the running server's graph page graphing QUERY over RANGE (1m);
#                                   print PNG's path. docs/img/prometheus-graph.png is made this way by
#                                   tests/integration/test_prometheus.py (docs/operations.md says how)
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

chromium_bin() { command -v chromium || command -v chromium-browser || true; }

install_chromium() {
  if [ -n "$(chromium_bin)" ]; then
    chromium_bin
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "Chromium is not installed and only root can install it (apt-get install chromium)"
  command -v apt-get >/dev/null || die "Chromium is not installed and there is no apt-get to install it"
  log "installing Debian's chromium package"
  export DEBIAN_FRONTEND=noninteractive
  # the package lists of a fresh machine may be missing or stale: fetched only when the first try fails
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 chromium >&2 \
    || { apt-get update -q >&2 || true; apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
         chromium >&2; } || die "apt-get install chromium failed"
  [ -n "$(chromium_bin)" ] || die "no chromium after installing the chromium package"
  chromium_bin
}

urlencode() {
  local text="$1" out="" c i
  for ((i = 0; i < ${#text}; i++)); do
    c="${text:i:1}"
    case "$c" in
      [a-zA-Z0-9.~_-]) out+="$c" ;;
      *) out+="$(printf '%%%02X' "'$c")" ;;
    esac
  done
  echo "$out"
}

screenshot() {
  local png="$1" query="$2" range="${3:-1m}" url bin
  [ -n "$png" ] && [ -n "$query" ] || die "usage: $0 screenshot PNG QUERY [RANGE]"
  running_pid >/dev/null || die "Prometheus is not running (scripts/prometheus.sh start first)"
  bin="$(install_chromium)"
  url="$(cat "$ADDR_FILE")/graph?g0.expr=$(urlencode "$query")&g0.tab=0&g0.range_input=$(urlencode "$range")"
  rm -f "$png"
  log "screenshot of $url to $png"
  # --no-sandbox: Chromium's sandbox refuses root and needs user namespaces that containers often lack (the page is
  # our own loopback server's); --virtual-time-budget lets the page's scripts query and draw before the shot.
  timeout 120 "$bin" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$RUN/chromium" \
    --virtual-time-budget=10000 --window-size=1280,800 --screenshot="$png" "$url" \
    </dev/null >>"$RUN/chromium.log" 2>&1 || { tail -n 20 "$RUN/chromium.log" >&2; die "chromium failed"; }
  [ -s "$png" ] || { tail -n 20 "$RUN/chromium.log" >&2; die "chromium wrote no $png"; }
  echo "$png"
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

case "${1:-}" in
  install) install_package; exit 0 ;;
  chromium) install_chromium; exit 0 ;;
  screenshot) shift; screenshot "$@"; exit 0 ;;
esac
service_main "$@"
