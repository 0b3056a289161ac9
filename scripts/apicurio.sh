#!/usr/bin/env bash
# A real Apicurio Registry 3.x (in-memory storage) whose Confluent-compatible API the tests can use.
#
#   scripts/apicurio.sh start    fetch it if needed, start a fresh registry, print its ccompat base URL
#   scripts/apicurio.sh stop     stop it (TERM, then KILL after APICURIO_STOP_TIMEOUT) and wait
#   scripts/apicurio.sh status   exit 0 (and print the URL) if it runs, else exit 1
#
# The distribution io.apicurio:apicurio-registry-app:<version>:tar.gz:all (a Quarkus fast-jar) comes from
# Maven Central with `mvn dependency:copy` and is unpacked into $APICURIO_CACHE/<version>, reused when
# present. `start` is idempotent: with a registry already running it only prints its URL. The last line of
# stdout is http://127.0.0.1:<port>/apis/ccompat/v7; progress goes to stderr.
# Storage is the default in-memory H2 database: every start is an empty registry.
#
# Environment (all optional):
#   APICURIO_VERSION          3.3.3
#   APICURIO_PORT             18081                  HTTP API on 127.0.0.1
#   APICURIO_MANAGEMENT_PORT  APICURIO_PORT+1        Quarkus management interface (health, metrics) on 127.0.0.1
#   APICURIO_CACHE            <repo>/.cache/apicurio
#   APICURIO_JAVA             a Java 21+ (Apicurio 3 needs it): temurin-25 if present, else the first 21+ found
#   APICURIO_HEAP_OPTS        -Xmx512m
#   APICURIO_OPTS             extra JVM/-D options, e.g. -Dapicurio.ccompat.legacy-id-mode.enabled=true
#   APICURIO_START_TIMEOUT    180 (seconds)
#   APICURIO_STOP_TIMEOUT     30 (seconds)
#   APICURIO_MVN_ARGS         extra Maven arguments, e.g. -Dmaven.repo.local=/some/dir
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
APICURIO_VERSION="${APICURIO_VERSION:-3.3.3}"
APICURIO_PORT="${APICURIO_PORT:-18081}"
APICURIO_MANAGEMENT_PORT="${APICURIO_MANAGEMENT_PORT:-$((APICURIO_PORT + 1))}"
APICURIO_CACHE="${APICURIO_CACHE:-$REPO/.cache/apicurio}"
APICURIO_HEAP_OPTS="${APICURIO_HEAP_OPTS:--Xmx512m}"
APICURIO_START_TIMEOUT="${APICURIO_START_TIMEOUT:-180}"
APICURIO_STOP_TIMEOUT="${APICURIO_STOP_TIMEOUT:-30}"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

DIST="$APICURIO_CACHE/$APICURIO_VERSION"
RUN="$APICURIO_CACHE/run"          # wiped on every start: log, pid, url
PID_FILE="$RUN/apicurio.pid"
URL_FILE="$RUN/url"
LOG="$RUN/apicurio.log"

SERVICE=apicurio.sh SERVICE_CACHE="$APICURIO_CACHE" PROCESS_PATTERN='quarkus-run\.jar' STOP_TIMEOUT="$APICURIO_STOP_TIMEOUT"
ADDR_FILE="$URL_FILE"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"

java_major() { "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'; }

find_java() {
  if [ -n "${APICURIO_JAVA:-}" ]; then echo "$APICURIO_JAVA"; return; fi
  local candidate major
  for candidate in /usr/lib/jvm/temurin-25-jdk-amd64/bin/java /usr/lib/jvm/*/bin/java "${JAVA_HOME:-/nonexistent}/bin/java" "$(command -v java || true)"; do
    [ -x "$candidate" ] || continue
    major="$(java_major "$candidate")"
    if [ -n "$major" ] && [ "$major" -ge 21 ]; then echo "$candidate"; return; fi
  done
  die "Apicurio Registry 3 needs Java 21+; none found (set APICURIO_JAVA)"
}

fetch_dist() {
  begin_fetch "$DIST" Apicurio || return 0
  local tmp="$FETCH_TMP"
  log "fetching io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all from Maven Central into $DIST"
  # shellcheck disable=SC2086  # APICURIO_MVN_ARGS is a list of words on purpose
  if ! retry "${MVN_FETCH[@]}" ${APICURIO_MVN_ARGS:-} \
      "$DEPENDENCY_PLUGIN:copy" -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
      -DoutputDirectory="$tmp/download" -Dmdep.overWriteReleases=true >&2; then
    fetch_failed "could not fetch Apicurio Registry $APICURIO_VERSION with Maven"
  fi
  tar -xzf "$tmp/download/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$tmp"
  rm -rf "$tmp/download"
  [ -f "$tmp/quarkus-run.jar" ] || fetch_failed "quarkus-run.jar missing from the Apicurio distribution"
  install_fetched "$DIST"
}

answers() { curl -sf -o /dev/null --max-time 5 "http://127.0.0.1:$1/apis/ccompat/v7/subjects"; }

wait_ready() { await_ready "$1" "$APICURIO_START_TIMEOUT" Apicurio answers "$2"; }

start() {
  local pid java
  command -v curl >/dev/null || die "curl is needed to check that Apicurio answers"
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    wait_ready "$pid" "$(sed 's#^http://127.0.0.1:\([0-9]*\)/.*#\1#' "$URL_FILE")"
    cat "$URL_FILE"
    return 0
  fi
  port_open "$APICURIO_PORT" && die "port $APICURIO_PORT is taken by another process; set APICURIO_PORT"
  port_open "$APICURIO_MANAGEMENT_PORT" && die "port $APICURIO_MANAGEMENT_PORT is taken; set APICURIO_MANAGEMENT_PORT"
  java="$(find_java)"
  fetch_dist
  rm -rf "$RUN"
  mkdir -p "$RUN/tmp"
  log "starting Apicurio Registry $APICURIO_VERSION on 127.0.0.1:$APICURIO_PORT with $java, log $LOG"
  # Confluent compatibility (ccompat) settings, explicit so a change of Apicurio's defaults shows here:
  # - legacy-id-mode off: the `id` of /subjects/.../versions and /schemas/ids/{id} is Apicurio's contentId,
  #   shared by every subject and version with the same schema, as Confluent's schema id is. Legacy mode
  #   (true) would hand out globalIds, one per registered version, so the same schema under two subjects
  #   would get two ids, unlike Confluent.
  #   Unlike Confluent, only byte-identical schema text shares an id across subjects ('{"type":"int"}' and
  #   '{ "type" : "int" }' under two subjects get two ids), and ids can skip numbers.
  # - use-canonical-hash off (the default): turning it on changed none of the above in 3.3.3; within one
  #   subject, re-registering a whitespace/key-order variant returns the existing version either way.
  # - max-subjects raised from 1000 so GET /subjects lists every subject of a long test session.
  # fd 9 is the lock (see main): the registry must not inherit it.
  # shellcheck disable=SC2086
  nohup "$java" $APICURIO_HEAP_OPTS -Djava.io.tmpdir="$RUN/tmp" \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$APICURIO_PORT" \
    -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$APICURIO_MANAGEMENT_PORT" \
    -Dapicurio.ccompat.legacy-id-mode.enabled=false \
    -Dapicurio.ccompat.use-canonical-hash=false \
    -Dapicurio.ccompat.max-subjects=100000 \
    ${APICURIO_OPTS:-} \
    -jar "$DIST/quarkus-run.jar" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  echo "http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7" >"$URL_FILE"
  local t0=$SECONDS
  wait_ready "$pid" "$APICURIO_PORT"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$URL_FILE"
}

service_main "$@"
