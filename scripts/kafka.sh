#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft, broker+controller in one JVM) for the tests.
#
#   scripts/kafka.sh start    fetch the jars if needed, start a fresh broker, print 127.0.0.1:<port>
#   scripts/kafka.sh stop     stop it (TERM, then KILL after KAFKA_STOP_TIMEOUT) and wait
#   scripts/kafka.sh status   exit 0 (and print the address) if it runs, else exit 1
#   scripts/kafka.sh restart  stop it and start it again on the same data (a broker restart, for fault tests)
#
# Besides the plaintext listener the broker has a TLS listener (KAFKA_PORT+2; client certificates
# required) and a SASL_PLAINTEXT listener (KAFKA_PORT+3; PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512). Each
# start makes a fresh CA, server and client certificates (PEM, openssl) under $KAFKA_CACHE/run/tls and a
# random SASL password for the user `alice` (SCRAM credentials added at format time with --add-scram);
# $KAFKA_CACHE/run/listeners.json tells the tests the addresses, PEM paths, user and password.
#
# No tarball: the broker's jars come from Maven Central through scripts/kafka/pom.xml
# (`mvn dependency:copy-dependencies`) into $KAFKA_CACHE/<version>/libs, reused when present,
# and run as `java -cp 'libs/*' kafka.Kafka server.properties`.
# `start` is idempotent: with a broker already running it only prints its address. The last
# line of stdout is the bootstrap address; progress goes to stderr.
#
# Environment (all optional):
#   KAFKA_VERSION          4.1.1                      org.apache.kafka:kafka_2.13 version
#   KAFKA_PORT             19092                      plaintext listener on 127.0.0.1
#   KAFKA_CONTROLLER_PORT  KAFKA_PORT+1               KRaft controller listener on 127.0.0.1
#   KAFKA_TLS_PORT         KAFKA_PORT+2               SSL listener on 127.0.0.1
#   KAFKA_SASL_PORT        KAFKA_PORT+3               SASL_PLAINTEXT listener on 127.0.0.1
#   KAFKA_CACHE            <repo>/.cache/kafka        libs cache; the broker runs in $KAFKA_CACHE/run
#   KAFKA_LIBS             $KAFKA_CACHE/<version>/libs  the jars (a second broker can share the first's)
#   KAFKA_JAVA             $JAVA_HOME/bin/java|java   Java 17+
#   KAFKA_HEAP_OPTS        -Xmx512m -Xms256m
#   KAFKA_START_TIMEOUT    120 (seconds)
#   KAFKA_STOP_TIMEOUT     30 (seconds)
#   KAFKA_MVN_ARGS         extra Maven arguments, e.g. -Dmaven.repo.local=/some/dir
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}"
KAFKA_TLS_PORT="${KAFKA_TLS_PORT:-$((KAFKA_PORT + 2))}"
KAFKA_SASL_PORT="${KAFKA_SASL_PORT:-$((KAFKA_PORT + 3))}"
KAFKA_CACHE="${KAFKA_CACHE:-$REPO/.cache/kafka}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"

LIBS="${KAFKA_LIBS:-$KAFKA_CACHE/$KAFKA_VERSION/libs}"
RUN="$KAFKA_CACHE/run"            # wiped on every start: data, config, log, pid
PID_FILE="$RUN/kafka.pid"
ADDR_FILE="$RUN/bootstrap"
LOG="$RUN/kafka.log"
READY_LINE="Kafka Server started"  # logged by KafkaRaftServer once broker and controller are up

SERVICE=kafka.sh SERVICE_CACHE="$KAFKA_CACHE" PROCESS_PATTERN='kafka\.Kafka' STOP_TIMEOUT="$KAFKA_STOP_TIMEOUT"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"
JAVA="$(service_java "${KAFKA_JAVA:-}")"

fetch_libs() {
  begin_fetch "$LIBS" Kafka || return 0
  log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and its runtime deps from Maven Central into $LIBS"
  # shellcheck disable=SC2086  # KAFKA_MVN_ARGS is a list of words on purpose
  if ! retry "${MVN_FETCH[@]}" -f "$REPO/scripts/kafka/pom.xml" ${KAFKA_MVN_ARGS:-} \
      dependency:copy-dependencies -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$FETCH_TMP" >&2; then
    fetch_failed "could not fetch Kafka $KAFKA_VERSION with Maven"
  fi
  [ -f "$FETCH_TMP/kafka_2.13-$KAFKA_VERSION.jar" ] || fetch_failed "kafka_2.13-$KAFKA_VERSION.jar missing after the fetch"
  install_fetched "$LIBS"
}

# A fresh CA, a server certificate for 127.0.0.1/localhost and a client certificate, PEM (keys PKCS#8,
# unencrypted: the broker reads them as they are); the client key is also written encrypted with
# $SASL_PASSWORD (client-key-encrypted.pem) for the tests of the key-password setting.
make_certs() {
  local dir="$RUN/tls"
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=avro-registry-sink test CA" \
      -keyout ca-key.pem -out ca.pem
    for who in server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$who" -keyout "$who-key.pem" -out "$who.csr"
      printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$who.ext"
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -sha256 \
        -extfile "$who.ext" -out "$who.pem"
    done
    cat server-key.pem server.pem >server-keystore.pem
    openssl pkcs8 -topk8 -v2 aes-256-cbc -in client-key.pem -passout "pass:$SASL_PASSWORD" -out client-key-encrypted.pem
    rm -f ./*.csr ./*.ext ./*.srl
    chmod 600 ./*key*.pem
  ) >>"$LOG" 2>&1 || { log_tail; die "making the test certificates with openssl failed"; }
}

write_listeners() {
  cat >"$RUN/listeners.json" <<EOF
{"plaintext": "127.0.0.1:$KAFKA_PORT", "tls": "127.0.0.1:$KAFKA_TLS_PORT", "sasl": "127.0.0.1:$KAFKA_SASL_PORT",
 "ca": "$RUN/tls/ca.pem", "cert": "$RUN/tls/client.pem", "key": "$RUN/tls/client-key.pem",
 "key_encrypted": "$RUN/tls/client-key-encrypted.pem", "key_password": "$SASL_PASSWORD",
 "sasl_user": "$SASL_USER", "sasl_password": "$SASL_PASSWORD"}
EOF
  chmod 600 "$RUN/listeners.json"
}

write_config() {
  mkdir -p "$RUN/data"
  cat >"$RUN/server.properties" <<EOF
# Written by scripts/kafka.sh: one node that is both broker and KRaft controller, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,SSL://127.0.0.1:$KAFKA_TLS_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SSL://127.0.0.1:$KAFKA_TLS_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
listener.name.ssl.ssl.keystore.type=PEM
listener.name.ssl.ssl.keystore.location=$RUN/tls/server-keystore.pem
listener.name.ssl.ssl.truststore.type=PEM
listener.name.ssl.ssl.truststore.location=$RUN/tls/ca.pem
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=$RUN/data
num.partitions=3
default.replication.factor=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  write_log4j2 "$RUN/log4j2.properties" <<'EOF'
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
}

# The broker logged that it started and its listener accepts connections.
broker_ready() { grep -q "$READY_LINE" "$LOG" 2>/dev/null && port_open "$KAFKA_PORT"; }
wait_ready() { await_ready "$1" "$KAFKA_START_TIMEOUT" "the broker" broker_ready; }

# openssl makes the test certificates; on a fresh Debian/Ubuntu machine (as root) it is installed.
ensure_openssl() {
  command -v openssl >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing openssl (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl; } >&2 \
      || die "apt-get install openssl failed"
  else
    die "openssl is needed to make the test certificates (apt-get install openssl)"
  fi
}

read -r -a HEAP_OPTS <<<"$KAFKA_HEAP_OPTS"
JVM=("$JAVA" "${HEAP_OPTS[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
     -Dlog4j2.configurationFile="file:$RUN/log4j2.properties" -cp "$LIBS/*")
java_cmd() { "${JVM[@]}" "$@"; }

start() {
  local pid
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    KAFKA_PORT="$(sed 's/.*://' "$ADDR_FILE")"
    wait_ready "$pid"
    cat "$ADDR_FILE"
    return 0
  fi
  if port_open "$KAFKA_PORT"; then
    die "port $KAFKA_PORT is taken by another process (not our broker); set KAFKA_PORT"
  fi
  if port_open "$KAFKA_CONTROLLER_PORT"; then
    die "controller port $KAFKA_CONTROLLER_PORT is taken; set KAFKA_CONTROLLER_PORT"
  fi
  local port
  for port in "$KAFKA_TLS_PORT" "$KAFKA_SASL_PORT"; do
    if port_open "$port"; then die "port $port is taken; set KAFKA_TLS_PORT / KAFKA_SASL_PORT"; fi
  done
  "$JAVA" -version >/dev/null 2>&1 || die "no usable java ($JAVA); Kafka 4 needs Java 17+"
  ensure_openssl
  fetch_libs
  rm -rf "$RUN"
  mkdir -p "$RUN"
  SASL_USER=alice
  SASL_PASSWORD="kafka-test-$(openssl rand -hex 12)"
  make_certs
  write_config
  write_listeners
  local cluster_id
  cluster_id="$(java_cmd kafka.tools.StorageTool random-uuid 2>>"$LOG" | tail -n 1)"
  if ! java_cmd kafka.tools.StorageTool format -t "$cluster_id" -c "$RUN/server.properties" \
      --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]" \
      --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]" >>"$LOG" 2>&1; then
    log_tail
    die "formatting the KRaft storage failed"
  fi
  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT, TLS :$KAFKA_TLS_PORT, SASL :$KAFKA_SASL_PORT), log $LOG"
  # fd 9 is the lock (see main): the broker must not inherit it.
  nohup "${JVM[@]}" kafka.Kafka "$RUN/server.properties" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  echo "127.0.0.1:$KAFKA_PORT" >"$ADDR_FILE"
  local t0=$SECONDS
  wait_ready "$pid"
  log "ready after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

# A broker restart: the same configuration, certificates and data (start makes a fresh broker).
restart() {
  local pid
  [ -f "$RUN/server.properties" ] && [ -f "$ADDR_FILE" ] || die "no broker to restart in $RUN (start one first)"
  KAFKA_PORT="$(sed 's/.*://' "$ADDR_FILE")"
  stop
  [ -f "$LOG" ] && mv "$LOG" "$LOG.before-restart"
  nohup "${JVM[@]}" kafka.Kafka "$RUN/server.properties" </dev/null >>"$LOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  local t0=$SECONDS
  wait_ready "$pid"
  log "restarted after $((SECONDS - t0))s (pid $pid)"
  cat "$ADDR_FILE"
}

service_main "$@"
