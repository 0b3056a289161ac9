#!/usr/bin/env bash
# The test command: install, start the real Kafka broker (KRaft, fetched from Maven Central), lint (ruff) and
# type-check (mypy) the code (any finding fails the script), run pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not spark" -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
started_kafka=0
if [ -z "${KAFKA_BOOTSTRAP:-}" ]; then
  KAFKA_BOOTSTRAP="$(scripts/kafka.sh start | tail -n 1)"
  export KAFKA_BOOTSTRAP
  started_kafka=1
fi
cleanup() { if [ "$started_kafka" = 1 ]; then scripts/kafka.sh stop >/dev/null 2>&1 || true; fi; }
trap cleanup EXIT
# The suite's Spark drivers share a class-data-sharing archive (tests/support/jvm_archive.py): dump it while
# ruff and mypy run, on the other core.
.venv/bin/python -m tests.support.jvm_archive >/dev/null 2>&1 &
archive=$!
.venv/bin/ruff check avro_registry_sink tests bench conftest.py
.venv/bin/python -m mypy avro_registry_sink
wait "$archive" || true
# Two workers (pytest-xdist): each test file, and the registry/database suites as a whole, run in one worker
# (tests/conftest.py: pytest_xdist_make_scheduler). AVRO_SINK_TEST_WORKERS=0 runs the suite in this process,
# one test after another.
.venv/bin/python -m pytest -n "${AVRO_SINK_TEST_WORKERS:-2}" --dist loadscope "$@"
