# Shared by scripts/kafka.sh and scripts/apicurio.sh: a JVM service run in the background from a cache dir.
#
# The sourcing script sets, before `source`:
#   SERVICE          name used in messages (e.g. kafka.sh)
#   SERVICE_CACHE    cache directory (holds .lock)
#   PID_FILE LOG ADDR_FILE   the run's pid file, log and address file (the address is the last stdout line)
#   PROCESS_PATTERN  grep pattern of the process command line (guards against a reused pid)
#   STOP_TIMEOUT     seconds before TERM becomes KILL
# and defines start(); then calls service_main "$@".

log() { echo "$SERVICE: $*" >&2; }
die() { log "$*"; exit 1; }

# The pid of our service, if it runs (guards against a stale pid file whose pid was reused).
running_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$PROCESS_PATTERN" || return 1
  echo "$pid"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

log_tail() {
  if [ -f "$LOG" ]; then
    log "last lines of $LOG:"
    tail -n 60 "$LOG" >&2
  fi
}

# Run a Maven command up to 3 times, backing off 5 s then 15 s, for network hiccups while fetching.
# Maven caches a failed download in the local repository and will not try it again without -U: so
# attempts after the first add -U (MVN_RETRY_FLAGS).
MVN_RETRY_FLAGS=""
retry() {
  local attempt=1 delay=5
  # shellcheck disable=SC2086  # MVN_RETRY_FLAGS is empty or one word
  until "$@" $MVN_RETRY_FLAGS; do
    if [ "$attempt" -ge 3 ]; then return 1; fi
    log "attempt $attempt failed; retrying in ${delay}s"
    sleep "$delay"
    attempt=$((attempt + 1)); delay=$((delay * 3)); MVN_RETRY_FLAGS="-U"
  done
}

# Maven options common to every fetch: quiet, batch, patient with the network.
MVN_FETCH=(mvn -q -B -Dstyle.color=never -Dmaven.wagon.http.retryHandler.count=5
           -Dmaven.wagon.httpconnectionManager.ttlSeconds=25)

# Move a finished download ($1, a temporary directory) to its cache place ($2), marked complete.
install_fetched() {
  touch "$1/.complete"
  rm -rf "$2"
  mv "$1" "$2"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not running"
    rm -f "$PID_FILE"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "still running after ${STOP_TIMEOUT}s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.2
  done
  rm -f "$PID_FILE"
  log "stopped (pid $pid)"
}

status() {
  local pid
  if pid="$(running_pid)"; then
    log "running (pid $pid)"
    cat "$ADDR_FILE"
  else
    log "not running"
    return 1
  fi
}

service_main() {
  mkdir -p "$SERVICE_CACHE"
  # One start/stop at a time (e.g. two pytest processes starting the service together). The service
  # itself must not inherit fd 9: start() launches it with 9>&-.
  exec 9>"$SERVICE_CACHE/.lock"
  flock 9
  case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
  esac
}
