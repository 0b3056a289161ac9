# Shared by the service scripts (kafka, connect, apicurio, s3proxy, postgres, mariadb, spark-cluster): a
# server run in the background from a cache dir.
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

# The pid of our service, if it runs (guards against a stale pid file whose pid was reused). Only the pid
# file's first line is read: PostgreSQL's postmaster.pid holds more after it.
running_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid="$(head -n 1 "$PID_FILE" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$PROCESS_PATTERN" || return 1
  echo "$pid"
}

# server_run_dir WANTED NAME: where a server that drops root (PostgreSQL, MariaDB) keeps its run directory:
# WANTED, or, when root runs this and a directory above WANTED is closed to other users (a checkout inside a
# `mktemp -d` directory is 0700), /var/tmp/avro-registry-sink-NAME-<checksum of WANTED>. The choice depends
# only on the directories' modes, so start, stop and status agree.
server_run_dir() {
  local wanted="$1" name="$2" dir mode
  if [ "$(id -u)" != 0 ]; then echo "$wanted"; return 0; fi
  dir="$(dirname "$wanted")"
  while [ ! -d "$dir" ]; do dir="$(dirname "$dir")"; done  # made later with the default mode: traversable
  while [ "$dir" != "/" ]; do
    mode="$(stat -c %a "$dir")"
    if (( (8#$mode & 1) == 0 )); then
      echo "/var/tmp/avro-registry-sink-$name-$(printf %s "$wanted" | cksum | cut -d' ' -f1)"
      return 0
    fi
    dir="$(dirname "$dir")"
  done
  echo "$wanted"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

log_tail() {
  if [ -f "$LOG" ]; then
    log "last lines of $LOG:"
    tail -n 60 "$LOG" >&2
  fi
}

# Write a log4j2 configuration to $1: INFO and up to the console (the service's log), then the logger
# settings read from stdin.
write_log4j2() {
  {
    cat <<'CONF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
CONF
    cat
  } >"$1"
}

# The java to run: $1 (the script's own *_JAVA setting) when set, else $JAVA_HOME/bin/java, else java.
service_java() {
  if [ -n "${1:-}" ]; then
    echo "$1"
  elif [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  else
    echo java
  fi
}

# Wait until the command "$@" (after the first three words) succeeds: the service answers. Gives up when
# the process $1 exits or after $2 seconds; $3 names the service in the error, which ends the log.
await_ready() {
  local pid="$1" timeout="$2" what="$3"
  local deadline=$((SECONDS + timeout))
  shift 3
  until "$@"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log_tail
      die "$what (pid $pid) exited during startup"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log_tail
      die "$what did not answer within ${timeout}s"
    fi
    sleep 0.3
  done
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

# Start fetching $2 (what, for messages) from Maven Central into the cache directory $1: false when it is
# already complete; else FETCH_TMP is a fresh temporary directory beside it, for the download.
begin_fetch() {
  [ -f "$1/.complete" ] && return 1
  command -v mvn >/dev/null || die "mvn (Maven) is needed to fetch $2 from Maven Central (apt-get install maven)"
  FETCH_TMP="$1.tmp.$$"
  rm -rf "$FETCH_TMP"
  mkdir -p "$FETCH_TMP"
}

# Give up a fetch: drop its temporary directory and exit with the message.
fetch_failed() {
  rm -rf "$FETCH_TMP"
  die "$1"
}

# Move the finished download (FETCH_TMP) to its cache place ($1), marked complete.
install_fetched() {
  touch "$FETCH_TMP/.complete"
  rm -rf "$1"
  mv "$FETCH_TMP" "$1"
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
    restart) if declare -F restart >/dev/null; then restart; else echo "usage: $0 start|stop|status" >&2; exit 2; fi ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
  esac
}
