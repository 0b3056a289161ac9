#!/usr/bin/env bash
# A real Kafka Connect worker (standalone mode) with an Avro converter that reads Confluent-framed records and
# Debezium's JDBC sink connector, for the downstream database tests. Connectors are added by the caller
# through the worker's REST API (POST /connectors); none is configured at start.
#
#   scripts/connect.sh start    fetch the jars if needed, start a fresh worker, print its REST URL
#   scripts/connect.sh stop     stop it (TERM, then KILL after CONNECT_STOP_TIMEOUT) and wait
#   scripts/connect.sh status   exit 0 (and print the URL) if it runs, else exit 1
#
# Everything comes from Maven Central (scripts/connect/settings.xml keeps Maven to it) into $CONNECT_CACHE:
#   libs/                           the worker: connect-runtime, connect-json, connect-transforms + log4j2
#                                   (scripts/connect/worker-pom.xml, `mvn dependency:copy-dependencies`)
#   plugins/apicurio-avro-converter io.apicurio:apicurio-registry-utils-converter (scripts/connect/converter-pom.xml)
#   plugins/debezium-connector-jdbc io.debezium:debezium-connector-jdbc:<version>:tar.gz:plugin, unpacked:
#                                   the plugin archive (with its JDBC drivers), not its pom's dependency tree,
#                                   which brings a second Jackson that breaks the task
# The worker runs as `java -cp 'libs/*' org.apache.kafka.connect.cli.ConnectStandalone worker.properties`.
# `start` is idempotent: with a worker already running it only prints its URL. The last line of stdout is
# http://127.0.0.1:<port>; progress goes to stderr.
#
# Environment:
#   KAFKA_BOOTSTRAP            required: the broker(s) the worker reads from (e.g. 127.0.0.1:19092)
#   CONNECT_PORT               18083                    REST API on 127.0.0.1
#   CONNECT_KAFKA_VERSION      4.1.1                    org.apache.kafka:connect-runtime version
#   CONNECT_CONVERTER_VERSION  2.6.13.Final             io.apicurio:apicurio-registry-utils-converter version
#   CONNECT_JDBC_VERSION       3.5.0.Final              io.debezium:debezium-connector-jdbc version
#   CONNECT_CACHE              <repo>/.cache/connect    jars; the worker runs in $CONNECT_CACHE/run
#   CONNECT_JAVA               $JAVA_HOME/bin/java|java Java 17+
#   CONNECT_HEAP_OPTS          -Xmx512m -Xms128m
#   CONNECT_START_TIMEOUT      180 (seconds; plugin scanning takes 20-35 s on 2 cores)
#   CONNECT_STOP_TIMEOUT       30 (seconds)
#   CONNECT_MVN_ARGS           extra Maven arguments, e.g. -Dmaven.repo.local=/some/dir
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
CONNECT_PORT="${CONNECT_PORT:-18083}"
CONNECT_KAFKA_VERSION="${CONNECT_KAFKA_VERSION:-4.1.1}"
CONNECT_CONVERTER_VERSION="${CONNECT_CONVERTER_VERSION:-2.6.13.Final}"
CONNECT_JDBC_VERSION="${CONNECT_JDBC_VERSION:-3.5.0.Final}"
CONNECT_CACHE="${CONNECT_CACHE:-$REPO/.cache/connect}"
CONNECT_HEAP_OPTS="${CONNECT_HEAP_OPTS:--Xmx512m -Xms128m}"
CONNECT_START_TIMEOUT="${CONNECT_START_TIMEOUT:-180}"
CONNECT_STOP_TIMEOUT="${CONNECT_STOP_TIMEOUT:-30}"
DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

DIST="$CONNECT_CACHE/$CONNECT_KAFKA_VERSION-$CONNECT_CONVERTER_VERSION-$CONNECT_JDBC_VERSION"
RUN="$CONNECT_CACHE/run"          # wiped on every start: config, offsets, log, pid, url
PID_FILE="$RUN/connect.pid"
ADDR_FILE="$RUN/url"
LOG="$RUN/connect.log"

SERVICE=connect.sh SERVICE_CACHE="$CONNECT_CACHE" PROCESS_PATTERN='ConnectStandalone' STOP_TIMEOUT="$CONNECT_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"
JAVA="$(service_java "${CONNECT_JAVA:-}")"
MVN_CENTRAL=("${MVN_FETCH[@]}" -s "$REPO/scripts/connect/settings.xml")

fetch_dist() {
  begin_fetch "$DIST" "Kafka Connect" || return 0
  local tmp="$FETCH_TMP"
  mkdir -p "$tmp/libs" "$tmp/plugins" "$tmp/download"
  log "fetching Kafka Connect $CONNECT_KAFKA_VERSION, Apicurio's converter $CONNECT_CONVERTER_VERSION and" \
      "Debezium's JDBC sink $CONNECT_JDBC_VERSION from Maven Central into $DIST"
  # shellcheck disable=SC2086  # CONNECT_MVN_ARGS is a list of words on purpose
  if ! retry "${MVN_CENTRAL[@]}" -f "$REPO/scripts/connect/worker-pom.xml" ${CONNECT_MVN_ARGS:-} \
        dependency:copy-dependencies -Dkafka.version="$CONNECT_KAFKA_VERSION" -DoutputDirectory="$tmp/libs" >&2 \
     || ! retry "${MVN_CENTRAL[@]}" -f "$REPO/scripts/connect/converter-pom.xml" ${CONNECT_MVN_ARGS:-} \
        dependency:copy-dependencies -Dconverter.version="$CONNECT_CONVERTER_VERSION" \
        -DoutputDirectory="$tmp/plugins/apicurio-avro-converter" >&2 \
     || ! retry "${MVN_CENTRAL[@]}" ${CONNECT_MVN_ARGS:-} "$DEPENDENCY_PLUGIN:copy" \
        -Dartifact="io.debezium:debezium-connector-jdbc:$CONNECT_JDBC_VERSION:tar.gz:plugin" \
        -DoutputDirectory="$tmp/download" -Dmdep.overWriteReleases=true >&2; then
    fetch_failed "could not fetch Kafka Connect and its plugins with Maven"
  fi
  tar -xzf "$tmp/download/debezium-connector-jdbc-$CONNECT_JDBC_VERSION-plugin.tar.gz" -C "$tmp/plugins"
  rm -rf "$tmp/download"
  [ -f "$tmp/libs/connect-runtime-$CONNECT_KAFKA_VERSION.jar" ] || fetch_failed "connect-runtime jar missing after the fetch"
  [ -d "$tmp/plugins/debezium-connector-jdbc" ] || fetch_failed "the JDBC sink plugin archive did not unpack to debezium-connector-jdbc/"
  install_fetched "$DIST"
}

write_config() {
  mkdir -p "$RUN"
  cat >"$RUN/worker.properties" <<CONF
# Written by scripts/connect.sh: a standalone worker on loopback; connectors come through the REST API.
bootstrap.servers=$KAFKA_BOOTSTRAP
listeners=http://127.0.0.1:$CONNECT_PORT
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$CONNECT_PORT
plugin.path=$DIST/plugins
# Sink connectors commit their positions as consumer group offsets; this file holds source offsets only.
offset.storage.file.filename=$RUN/offsets
offset.flush.interval.ms=1000
# Connectors may set their own consumer settings (consumer.override.*, e.g. max.poll.records for bulk loads).
connector.client.config.override.policy=All
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
CONF
  write_log4j2 "$RUN/log4j2.properties" <<'CONF'
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.connect.name = org.apache.kafka.connect
logger.connect.level = INFO
logger.hibernate.name = org.hibernate
logger.hibernate.level = WARN
CONF
}

answers() { curl -sf -o /dev/null --max-time 5 "http://127.0.0.1:$1/connectors"; }

wait_ready() { await_ready "$1" "$CONNECT_START_TIMEOUT" "the Connect worker" answers "$2"; }

start() {
  local pid
  command -v curl >/dev/null || die "curl is needed to check that the Connect worker answers"
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    wait_ready "$pid" "$(sed 's#^http://127.0.0.1:\([0-9]*\).*#\1#' "$ADDR_FILE")"
    cat "$ADDR_FILE"
    return 0
  fi
  [ -n "${KAFKA_BOOTSTRAP:-}" ] || die "KAFKA_BOOTSTRAP is not set: the worker needs a broker (scripts/kafka.sh start)"
  port_open "$CONNECT_PORT" && die "port $CONNECT_PORT is taken by another process; set CONNECT_PORT"
  "$JAVA" -version >/dev/null 2>&1 || die "no usable java ($JAVA); Kafka Connect 4 needs Java 17+"
  fetch_dist
  rm -rf "$RUN"
  write_config
  log "starting Kafka Connect $CONNECT_KAFKA_VERSION (standalone) on 127.0.0.1:$CONNECT_PORT, broker $KAFKA_BOOTSTRAP, log $LOG"
  read -r -a heap <<<"$CONNECT_HEAP_OPTS"
  # fd 9 is the lock (see service_main): the worker must not inherit it.
  nohup "$JAVA" "${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="file:$RUN/log4j2.properties" -cp "$DIST/libs/*" \
    org.apache.kafka.connect.cli.ConnectStandalone "$RUN/worker.properties" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  echo "http://127.0.0.1:$CONNECT_PORT" >"$ADDR_FILE"
  local t0=$SECONDS
  wait_ready "$pid" "$CONNECT_PORT"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

service_main "$@"
