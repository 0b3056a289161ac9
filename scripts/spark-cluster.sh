#!/usr/bin/env bash
# A standalone Spark cluster on loopback for the cluster tests: one master and two workers (1 core each),
# run from pyspark's own bin/spark-class (the Spark inside the project's .venv).
#
#   scripts/spark-cluster.sh start    start master and workers, print "spark://127.0.0.1:<port> http://127.0.0.1:<ui>"
#   scripts/spark-cluster.sh stop     stop them (TERM, then KILL after SPARK_CLUSTER_STOP_TIMEOUT) and wait
#   scripts/spark-cluster.sh status   exit 0 (and print the addresses) if the master runs, else exit 1
#
# The workers' executors run Python with PYSPARK_PYTHON=$SPARK_CLUSTER_PYTHON (default: the system's
# python3, which does not have this project installed): a job must bring its package along (spark-submit
# --archives with the environment `avro-registry-sink package` builds). `start` is idempotent. The last
# line of stdout is the master URL and the master web UI (its /json shows the applications); progress
# goes to stderr.
#
# Environment (all optional):
#   SPARK_CLUSTER_PORT         17077                master RPC port on 127.0.0.1
#   SPARK_CLUSTER_UI_PORT      SPARK_CLUSTER_PORT+1 master web UI (and /json)
#   SPARK_CLUSTER_WORKERS      2                    workers, 1 core each
#   SPARK_CLUSTER_WORKER_MEMORY 1g
#   SPARK_CLUSTER_PYTHON       /usr/bin/python3     the workers' default Python for executors
#   SPARK_CLUSTER_CACHE        <repo>/.cache/spark-cluster   run directory (logs, work dirs), wiped on start
#   SPARK_CLUSTER_PYSPARK      <repo>/.venv/bin/python       the Python whose pyspark provides Spark
#   SPARK_CLUSTER_START_TIMEOUT 240 (seconds)
#   SPARK_CLUSTER_STOP_TIMEOUT  20 (seconds)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PORT="${SPARK_CLUSTER_PORT:-17077}"
UI_PORT="${SPARK_CLUSTER_UI_PORT:-$((PORT + 1))}"
WORKERS="${SPARK_CLUSTER_WORKERS:-2}"
WORKER_MEMORY="${SPARK_CLUSTER_WORKER_MEMORY:-1g}"
WORKER_PYTHON="${SPARK_CLUSTER_PYTHON:-/usr/bin/python3}"
CACHE="${SPARK_CLUSTER_CACHE:-$REPO/.cache/spark-cluster}"
PYSPARK_PY="${SPARK_CLUSTER_PYSPARK:-$REPO/.venv/bin/python}"
START_TIMEOUT="${SPARK_CLUSTER_START_TIMEOUT:-240}"
RUN="$CACHE/run"
PID_FILE="$RUN/master.pid"
ADDR_FILE="$RUN/addresses"
LOG="$RUN/master.log"

SERVICE=spark-cluster.sh SERVICE_CACHE="$CACHE" PROCESS_PATTERN='deploy\.master\.Master' \
  STOP_TIMEOUT="${SPARK_CLUSTER_STOP_TIMEOUT:-20}"
# shellcheck source=scripts/lib/service.sh
source "$REPO/scripts/lib/service.sh"

spark_home() { "$PYSPARK_PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))'; }

# The master's JSON view, once it answers.
master_json() { curl -sf --max-time 3 "http://127.0.0.1:$UI_PORT/json/" 2>/dev/null; }

alive_workers() { master_json | "$PYSPARK_PY" -c 'import json,sys; print(sum(w["state"] == "ALIVE" for w in json.load(sys.stdin)["workers"]))' 2>/dev/null || echo 0; }

wait_ready() {
  local deadline=$((SECONDS + START_TIMEOUT))
  until [ "$(alive_workers)" -ge "$WORKERS" ]; do
    if ! running_pid >/dev/null; then
      log_tail
      die "the master exited during startup"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log_tail
      tail -n 30 "$RUN"/worker-*.log >&2 || true
      die "the cluster did not have $WORKERS live workers within ${START_TIMEOUT}s"
    fi
    sleep 0.5
  done
}

start() {
  local pid home i
  command -v curl >/dev/null || die "curl is needed to check the master"
  if pid="$(running_pid)"; then
    log "already running (pid $pid)"
    wait_ready
    cat "$ADDR_FILE"
    return 0
  fi
  port_open "$PORT" && die "port $PORT is taken by another process; set SPARK_CLUSTER_PORT"
  port_open "$UI_PORT" && die "port $UI_PORT is taken; set SPARK_CLUSTER_UI_PORT"
  [ -x "$PYSPARK_PY" ] || die "$PYSPARK_PY not found: run scripts/install.sh first"
  home="$(spark_home)"
  rm -rf "$RUN"
  mkdir -p "$RUN"
  export SPARK_HOME="$home" SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$RUN" SPARK_NO_DAEMONIZE=1
  log "starting a Spark master on 127.0.0.1:$PORT (UI $UI_PORT) and $WORKERS workers, logs in $RUN"
  # fd 9 is the lock (see main): the processes must not inherit it.
  nohup "$home/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$PORT" \
    --webui-port "$UI_PORT" </dev/null >>"$LOG" 2>&1 9>&- &
  echo $! >"$PID_FILE"
  for i in $(seq 1 "$WORKERS"); do
    mkdir -p "$RUN/work-$i"
    PYSPARK_PYTHON="$WORKER_PYTHON" PYTHONPATH="" nohup "$home/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      --host 127.0.0.1 --cores 1 --memory "$WORKER_MEMORY" --work-dir "$RUN/work-$i" --webui-port 0 \
      "spark://127.0.0.1:$PORT" </dev/null >>"$RUN/worker-$i.log" 2>&1 9>&- &
    echo $! >"$RUN/worker-$i.pid"
  done
  echo "spark://127.0.0.1:$PORT http://127.0.0.1:$UI_PORT" >"$ADDR_FILE"
  local t0=$SECONDS
  wait_ready
  log "ready after $((SECONDS - t0))s"
  cat "$ADDR_FILE"
}

# The workers first (their pid files), then the master (service.sh's stop).
stop_workers() {
  local f pid deadline
  for f in "$RUN"/worker-*.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'deploy\.worker\.Worker'; then
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$((SECONDS + STOP_TIMEOUT))
      while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -ge "$deadline" ] && kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
      done
    fi
    rm -f "$f"
  done
}

case "${1:-}" in
  stop)
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    stop_workers
    stop
    ;;
  *) service_main "$@" ;;
esac
