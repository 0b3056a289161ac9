"""Fixtures shared by every suite: one SparkSession for the whole test session (local[2], UI off, 2 shuffle
partitions, Arrow on), created only when a test asks for it."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import pytest
from hypothesis import settings

# CI runs the property tests on fixed examples (the same on every run: a failure there is reproducible, not luck);
# a developer's run explores new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The session SparkSession (built with ``local_session``); stopped at the end of the run."""
    from avro_registry_sink.spark.runtime.session import local_session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas 3
        session = local_session(master="local[2]", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


# --------------------------------------------------------------------------------------------------
# Time per suite, printed at the end of the run (setup, call and teardown of every test, by directory and file)

_SUITE_SECONDS: dict[str, float] = {}
_TEST_SECONDS: dict[str, float] = {}
_WORKER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _SUITE_SECONDS[path] = _SUITE_SECONDS.get(path, 0.0) + report.duration
    _TEST_SECONDS[report.nodeid] = _TEST_SECONDS.get(report.nodeid, 0.0) + report.duration
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")  # xdist's worker
    _WORKER_SECONDS[worker] = _WORKER_SECONDS.get(worker, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _SUITE_SECONDS:
        return
    by_dir: dict[str, float] = {}
    for path, seconds in _SUITE_SECONDS.items():
        directory = path.rsplit("/", 1)[0] if "/" in path else path
        by_dir[directory] = by_dir.get(directory, 0.0) + seconds
    write = terminalreporter.write_line
    terminalreporter.section("time per suite")
    for directory, seconds in sorted(by_dir.items(), key=lambda item: -item[1]):
        write(f"{seconds:8.1f}s  {directory}/")
    write("busy per worker: " + ", ".join(f"{w} {s:.0f}s" for w, s in sorted(_WORKER_SECONDS.items())))
    write("slowest files:")
    for path, seconds in sorted(_SUITE_SECONDS.items(), key=lambda item: -item[1])[:40]:
        write(f"{seconds:8.1f}s  {path}")
    write("slowest tests:")
    for nodeid, seconds in sorted(_TEST_SECONDS.items(), key=lambda item: -item[1])[:30]:
        write(f"{seconds:8.1f}s  {nodeid}")


# --------------------------------------------------------------------------------------------------
# Two workers (pytest-xdist, ``scripts/test.sh`` passes ``-n 2 --dist loadscope``), scheduled by this file's
# units of work (pytest_xdist_make_scheduler): each test file is one unit, so its module fixtures are set up once;
# the suites that share the session's registry servers (Apicurio), Kafka Connect and the databases are one unit
# together, so one worker starts and stops those servers and no two of their tests run at once (Debezium's JDBC
# sink binds its column types to the dialect of the connector that started last). Every other integration file,
# with a registry and topics of its own, is a unit by itself, so the two workers share them.
# The longest files go first, so neither worker is left with a long one at the end; the longest file's tests are
# units of their own (BY_TEST). (xdist's own ``loadgroup``
# cannot do this here: it renames node ids, which pytest 9 ignores.)

#: The slowest files on 2 cores (the summary's "slowest files"), longest first.
SLOW_FIRST = ("tests/spark/test_exactly_once.py", "tests/downstream/", "tests/deploy/test_cluster.py",
              "tests/deploy/test_object_store.py", "tests/spark/test_docs_tutorials.py", "tests/spark/test_stop_signals.py",
              "tests/spark/test_docs_runnable.py", "tests/spark/test_verify.py", "tests/unit/test_changelog_arrow.py",
              "tests/integration/test_kafka_security.py",
              "tests/integration/test_e2e_kafka.py", "tests/integration/test_verify_kafka.py",
              "tests/spark/test_nothing_lost.py", "tests/integration/test_evolution_e2e.py",
              "tests/integration/test_prometheus.py", "tests/integration/test_registry_contract.py",
              "tests/integration/test_cli_encode_check.py", "tests/integration/test_manager.py",
              "tests/integration/test_quiet_output.py", "tests/spark/test_jvm_stage.py",
              "tests/unit/test_wheel_install.py", "tests/spark/test_job_storage.py",
              "tests/spark/test_first_hour.py", "tests/unit/test_native_scan.py")
#: The suites that use the shared servers (the ``registry_target``/Apicurio fixtures of tests/integration/conftest.py,
#: Kafka Connect and the databases of tests/downstream).
SHARED_SERVERS = ("tests/downstream/", "tests/integration/test_registry_contract.py",
                  "tests/integration/test_cli_encode_check.py", "tests/integration/test_manager.py")
#: Files whose tests are units of their own (each several minutes' worth of kills, all of them in one file would
#: be the last unit of one worker); a parametrized test's cases stay together where they share a server
#: (``test_a_broker_restart_while_producing``: the second broker on one port).
BY_TEST = ("tests/spark/test_exactly_once.py",)
_TOGETHER = ("test_a_broker_restart_while_producing",)


def unit_of_work(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or ``registry-servers`` for the suites that share servers, or
    for :data:`BY_TEST` the test itself."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(BY_TEST):
        function = nodeid.split("[", 1)[0]
        return function if function.rsplit("::", 1)[-1] in _TOGETHER else nodeid
    return "registry-servers" if path.startswith(SHARED_SERVERS) else path


def _rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(SLOW_FIRST) if nodeid.startswith(prefix)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: each file keeps its own order


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scope scheduling, with :func:`unit_of_work` as the scope, units handed out in collection order (the
    slowest first: :func:`pytest_collection_modifyitems`). xdist's default order, the units with the most tests
    first, would leave the slow files of one or two tests (a cluster, an object store) for the end."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class UnitsOfWork(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    return UnitsOfWork(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the servers this process started (an xdist worker runs no exit handlers)."""
    from tests.support.servers import stop_started_servers

    stop_started_servers()


# --------------------------------------------------------------------------------------------------
# Spark drivers started with a class-data-sharing archive and C1 only (tests/support/jvm_archive.py)

def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.nodeid.startswith("tests/") and not item.nodeid.startswith("tests/unit/") for item in session.items):
        from tests.support.jvm_archive import driver_options

        options = driver_options()
        if options:
            os.environ["SPARK_SUBMIT_OPTS"] = options
