#!/usr/bin/env bash
# A real S3 API server on loopback (S3Proxy: Jetty + Apache jclouds) for the object-storage tests.
#
#   scripts/s3proxy.sh start    fetch it if needed, start a fresh, empty store, print its endpoint URL
#   scripts/s3proxy.sh stop     stop it (TERM, then KILL after S3PROXY_STOP_TIMEOUT) and wait
#   scripts/s3proxy.sh status   exit 0 (and print the endpoint) if it runs, else exit 1
#
# The jar org.gaul:s3proxy:<version>:jar:jar-with-dependencies comes from Maven Central with
# `mvn dependency:copy` into $S3PROXY_CACHE/<version>, reused when present, and runs as
# `java -jar s3proxy.jar --properties s3proxy.conf`: AWS signature v2 or v4 with one identity and
# credential, plain HTTP on 127.0.0.1. `start` is idempotent. The last line of stdout is the endpoint
# (http://127.0.0.1:<port>); progress goes to stderr. Buckets must be created by the client.
#
# Environment (all optional):
#   S3PROXY_VERSION        2.6.0
#   S3PROXY_PORT           18090                     HTTP on 127.0.0.1
#   S3PROXY_IDENTITY       avro-sink-test            the access key clients sign with (a test value)
#   S3PROXY_CREDENTIAL     avro-sink-test-secret     the secret key (a test value)
#   S3PROXY_BACKEND        transient                 transient (in memory) or filesystem (under
#                                                    $S3PROXY_CACHE/run/data, wiped on start; its directory
#                                                    markers confuse Hadoop's S3A: Spark checkpoints fail)
#   S3PROXY_CACHE          <repo>/.cache/s3proxy
#   S3PROXY_JAVA           $JAVA_HOME/bin/java|java   Java 17+
#   S3PROXY_HEAP_OPTS      -Xmx384m
#   S3PROXY_START_TIMEOUT  60 (seconds)
#   S3PROXY_STOP_TIMEOUT   20 (seconds)
#   S3PROXY_MVN_ARGS       extra Maven arguments, e.g. -Dmaven.repo.local=/some/dir
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
S3PROXY_VERSION="${S3PROXY_VERSION:-2.6.0}"
S3PROXY_PORT="${S3PROXY_PORT:-18090}"
S3PROXY_IDENTITY="${S3PROXY_IDENTITY:-avro-sink-test}"
S3PROXY_CREDENTIAL="${S3PROXY_CREDENTIAL:-avro-sink-test-secret}"
S3PROXY_BACKEND="${S3PROXY_BACKEND:-transient}"
S3PROXY_CACHE="${S3PROXY_CACHE:-$REPO/.cache/s3proxy}"
S3PROXY_HEAP_OPTS="${S3PROXY_HEAP_OPTS:--Xmx384m}"
S3PROXY_START_TIMEOUT="${S3PROXY_START_TIMEOUT:-60}"
S3PROXY_STOP_TIMEOUT="${S3PROXY_STOP_TIMEOUT:-20}"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

DIST="$S3PROXY_CACHE/$S3PROXY_VERSION"
JAR="$DIST/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"
RUN="$S3PROXY_CACHE/run"            # wiped on every start: data, config, log, pid, endpoint
PID_FILE="$RUN/s3proxy.pid"
ADDR_FILE="$RUN/endpoint"
LOG="$RUN/s3proxy.log"

SERVICE=s3proxy.sh SERVICE_CACHE="$S3PROXY_CACHE" PROCESS_PATTERN='s3proxy' STOP_TIMEOUT="$S3PROXY_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"
JAVA="$(service_java "${S3PROXY_JAVA:-}")"

fetch_jar() {
  begin_fetch "$DIST" S3Proxy || return 0
  log "fetching org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies from Maven Central into $DIST"
  # shellcheck disable=SC2086  # S3PROXY_MVN_ARGS is a list of words on purpose
  if ! retry "${MVN_FETCH[@]}" ${S3PROXY_MVN_ARGS:-} \
      "$DEPENDENCY_PLUGIN:copy" -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
      -DoutputDirectory="$FETCH_TMP" -Dmdep.overWriteReleases=true >&2; then
    fetch_failed "could not fetch S3Proxy $S3PROXY_VERSION with Maven"
  fi
  [ -f "$FETCH_TMP/$(basename "$JAR")" ] || fetch_failed "$(basename "$JAR") missing after the fetch"
  install_fetched "$DIST"
}

write_config() {
  mkdir -p "$RUN/data"
  {
    echo "# Written by scripts/s3proxy.sh: loopback only, one test identity."
    echo "s3proxy.endpoint=http://127.0.0.1:$S3PROXY_PORT"
    echo "s3proxy.authorization=aws-v2-or-v4"
    echo "s3proxy.identity=$S3PROXY_IDENTITY"
    echo "s3proxy.credential=$S3PROXY_CREDENTIAL"
    echo "jclouds.provider=$S3PROXY_BACKEND"
    echo "jclouds.filesystem.basedir=$RUN/data"
  } >"$RUN/s3proxy.conf"
}

# Any HTTP answer (403 without a signature) means the server is up.
answers() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$1/" || true)" != "000" ]; }

wait_ready() { await_ready "$1" "$S3PROXY_START_TIMEOUT" S3Proxy answers "$2"; }

start() {
  local pid
  command -v curl >/dev/null || die "curl is needed to check that S3Proxy answers"
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    wait_ready "$pid" "$(sed 's#.*:##' "$ADDR_FILE")"
    cat "$ADDR_FILE"
    return 0
  fi
  port_open "$S3PROXY_PORT" && die "port $S3PROXY_PORT is taken by another process; set S3PROXY_PORT"
  "$JAVA" -version >/dev/null 2>&1 || die "no usable java ($JAVA); S3Proxy needs Java 17+"
  fetch_jar
  rm -rf "$RUN"
  write_config
  log "starting S3Proxy $S3PROXY_VERSION ($S3PROXY_BACKEND) on 127.0.0.1:$S3PROXY_PORT, log $LOG"
  # fd 9 is the lock (see main): the server must not inherit it.
  # shellcheck disable=SC2086
  nohup "$JAVA" $S3PROXY_HEAP_OPTS -Djava.io.tmpdir="$RUN" -jar "$JAR" --properties "$RUN/s3proxy.conf" \
    </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  echo "http://127.0.0.1:$S3PROXY_PORT" >"$ADDR_FILE"
  local t0=$SECONDS
  wait_ready "$pid" "$S3PROXY_PORT"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

service_main "$@"
