"""The job's metrics and alert rules with a real Prometheus (Debian's package, installed and started by
``scripts/prometheus.sh``).

* ``promtool check rules`` / ``check config`` pass on compose/'s rules and config, and ``promtool test rules`` shows
  each alert firing on the series that should raise it (and not before its ``for:``).
* A continuous run of the job on a small canal-json topic of the real broker, its metrics served on a loopback port
  that Prometheus scrapes every second: through Prometheus's HTTP API, the rows delivered equal the records a
  consumer reads from the sink topics, the dead letters equal the rows of the dead-letter files; the input backlog
  rises while a batch is held by a failpoint with messages produced behind it, and falls to 0 once it commits;
  stopping the registry the job uses shows as registry errors (``AvroSinkRegistryErrors`` fires) while the batch
  waits, which commits once the registry is back (``status`` then reads the same numbers from the job's
  checkpoint); headless Chromium takes a screenshot of Prometheus's graph page of the rows delivered, which is
  checked to be a real picture of the graph (docs/img/prometheus-graph.png is made the same way); once the job is
  gone, compose/'s ``AvroSinkDown`` rule (its ``for:`` shortened to 2 s here) fires in Prometheus's own rule
  evaluation.
* A continuous run on a storage tree whose first batch is held by a failpoint: its backlog in files and bytes is
  the tree's data files, rises by the files written meanwhile, and falls to 0 once batches have taken them.

Only a machine without apt-get (and without the packages) skips these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.png import SIGNATURE, read_png

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "compose" / "prometheus" / "alerts.yml"
SCRIPT = ROOT / "scripts" / "prometheus.sh"
#: What the screenshot of Prometheus's graph page graphs (docs/operations.md shows it).
GRAPH_QUERY = "sum(avro_sink_rows_delivered_total)"


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool of Debian's prometheus package (installed by scripts/prometheus.sh when missing)."""
    done = subprocess.run([str(SCRIPT), "install"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if "no apt-get" in done.stderr or "only root can install" in done.stderr:
            pytest.skip(f"Prometheus is not installed and cannot be: {done.stderr.strip()}")
        raise AssertionError(f"scripts/prometheus.sh install failed: {done.stderr}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def no_chromium() -> str | None:
    """Why no screenshot can be taken, ``None`` when Debian's chromium is there (installed by scripts/prometheus.sh
    when missing)."""
    done = subprocess.run([str(SCRIPT), "chromium"], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        if "no apt-get" in done.stderr or "only root can install" in done.stderr:
            return f"Chromium is not installed and cannot be: {done.stderr.strip()}"
        raise AssertionError(f"scripts/prometheus.sh chromium failed: {done.stderr}")
    return None


def _check_graph_screenshot(data: bytes) -> None:
    """``data`` is a real screenshot of the graph page: a PNG of the window's size, no blank page (hundreds of
    colours: text, frame, grid), and the series drawn (coloured lines over hundreds of columns below the query
    form, where the plot is; an empty result or an error shows a one-line message there)."""
    assert data[:8] == SIGNATURE and len(data) > 20_000, (data[:8], len(data))
    png = read_png(data)
    assert (png.width, png.height) == (1280, 800)
    assert len(png.colours()) > 256
    assert png.coloured_columns(top=png.height * 2 // 5) > 300


def test_promtool_checks_the_rules_and_the_config_of_compose(promtool):
    rules = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 10 rules found" in rules.stdout
    config = subprocess.run([promtool, "check", "config", str(RULES.parent / "prometheus.yml")],
                            capture_output=True, text=True)
    assert config.returncode == 0, config.stdout + config.stderr


def test_each_alert_fires_on_its_series(promtool, tmp_path):
    shutil.copy(RULES, tmp_path / "alerts.yml")
    job = 'job="avro-registry-sink",instance="driver:9464"'
    tests = {"rule_files": ["alerts.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": f"up{{{job}}}", "values": "1 1 0 0 0"},
            {"series": f'avro_sink_dead_letters_total{{{job},table="shop.orders"}}', "values": "0 0 0 3 3"},
            # a table's first dead letters: its series is born at its first count
            {"series": f'avro_sink_dead_letters_total{{{job},table="shop.customers"}}', "values": "_ _ _ 2 2"},
            {"series": f'avro_sink_registry_errors_total{{{job},op="register"}}', "values": "0 0 1 1 1"},
            {"series": f'avro_sink_transactions_total{{{job},op="aborted"}}', "values": "0 0 0 0 2"},
            {"series": f"avro_sink_commit_ts_lag_seconds{{{job}}}", "values": "10 700x10"},
            {"series": f"avro_sink_job_state{{{job}}}", "values": "0 1 2"},
            {"series": f'avro_sink_input_backlog_messages{{{job},topic="busy",partition="0"}}', "values": "0+100x20"},
            {"series": f'avro_sink_input_backlog_messages{{{job},topic="busy",partition="1"}}', "values": "5x20"},
            {"series": f'avro_sink_input_backlog_messages{{{job},topic="calm",partition="0"}}', "values": "50x20"},
            {"series": f'avro_sink_input_backlog_files{{{job},table="shop.orders"}}', "values": "0+2x20"},
            {"series": f'avro_sink_input_backlog_files{{{job},table="shop.customers"}}', "values": "3x20"},
        ],
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": "AvroSinkDown", "exp_alerts": []},  # not for a minute yet
            {"eval_time": "3m", "alertname": "AvroSinkDown",
             "exp_alerts": [{"exp_labels": {"severity": "critical", "job": "avro-registry-sink",
                                            "instance": "driver:9464"},
                             "exp_annotations": _annotations("AvroSinkDown", instance="driver:9464")}]},
            {"eval_time": "2m", "alertname": "AvroSinkFailed",
             "exp_alerts": [{"exp_labels": {"severity": "critical", "job": "avro-registry-sink",
                                            "instance": "driver:9464"},
                             "exp_annotations": _annotations("AvroSinkFailed", instance="driver:9464")}]},
            {"eval_time": "2m", "alertname": "AvroSinkDeadLettersGrowing", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "AvroSinkDeadLettersGrowing",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "job": "avro-registry-sink",
                                            "instance": "driver:9464", "table": "shop.orders"},
                             "exp_annotations": _annotations("AvroSinkDeadLettersGrowing", table="shop.orders")},
                            {"exp_labels": {"severity": "warning", "job": "avro-registry-sink",
                                            "instance": "driver:9464", "table": "shop.customers"},
                             "exp_annotations": _annotations("AvroSinkDeadLettersGrowing", table="shop.customers")}]},
            {"eval_time": "3m", "alertname": "AvroSinkTransactionsAborted", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "AvroSinkCommitLagHigh", "exp_alerts": []},  # for: 5m
            {"eval_time": "5m", "alertname": "AvroSinkBacklogGrowing", "exp_alerts": []},  # for: 10m
            # a backlog that grows fires; one that stays put (a steady lag behind the source) does not
            {"eval_time": "15m", "alertname": "AvroSinkBacklogGrowing",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "job": "avro-registry-sink",
                                            "instance": "driver:9464", "topic": "busy"},
                             "exp_annotations": _annotations("AvroSinkBacklogGrowing", topic="busy")}]},
            {"eval_time": "5m", "alertname": "AvroSinkStorageBacklogGrowing", "exp_alerts": []},  # for: 10m
            # a table whose files pile up fires; one with a steady backlog does not
            {"eval_time": "15m", "alertname": "AvroSinkStorageBacklogGrowing",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "job": "avro-registry-sink",
                                            "instance": "driver:9464", "table": "shop.orders"},
                             "exp_annotations": _annotations("AvroSinkStorageBacklogGrowing", table="shop.orders")}]},
        ],
    }]}
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # and the registry errors, aborts and lag alerts fire on their series (no annotations compared)
    for name, at in (("AvroSinkRegistryErrors", "3m"), ("AvroSinkTransactionsAborted", "5m"),
                     ("AvroSinkCommitLagHigh", "8m")):
        tests["tests"][0]["alert_rule_test"] = [{"eval_time": at, "alertname": name, "exp_alerts": []}]
        (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
        done = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=tmp_path, capture_output=True,
                              text=True)
        assert done.returncode != 0 and name in done.stdout + done.stderr, (name, done.stdout)


def _annotations(name: str, **labels: str) -> dict[str, str]:
    """An alert's annotations as compose/'s rules give them, its templates filled with ``labels``."""
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if r.get("alert") == name)
    out = {}
    for key, text in rule["annotations"].items():
        for label, value in labels.items():
            text = text.replace(f"{{{{ $labels.{label} }}}}", value)
        out[key] = text
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Prometheus:
    """Prometheus started by scripts/prometheus.sh with a config of the test's; its HTTP API."""

    def __init__(self, config: Path, cache: Path) -> None:
        self.env = {**os.environ, "PROMETHEUS_CONFIG": str(config), "PROMETHEUS_PORT": str(_free_port()),
                    "PROMETHEUS_CACHE": str(cache)}
        done = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=self.env, timeout=120)
        assert done.returncode == 0, done.stderr
        self.url = done.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, env=self.env, timeout=60)

    def value(self, query: str) -> float | None:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=10).json()
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, query: str, want: float, timeout: float = 20.0) -> float | None:
        deadline, got = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            got = self.value(query)
            if got == want:
                return got
            time.sleep(0.5)
        return got

    def firing(self, name: str) -> bool:
        answer = httpx.get(f"{self.url}/api/v1/alerts", timeout=10).json()
        return any(a["labels"].get("alertname") == name and a["state"] == "firing" for a in answer["data"]["alerts"])


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_prometheus_scrapes_the_running_job_and_alerts_when_it_stops(promtool, no_chromium, spark, tmp_path,
                                                                     monkeypatch):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from avro_registry_sink.ops.metrics import JobMetrics, serve_metrics
    from avro_registry_sink.ops.status import read_status
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.settings.config import parse_sink_uri
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source
    from tests.support.job import canal_messages
    from tests.support.servers import ensure_kafka

    bootstrap = ensure_kafka()
    prefix = "p" + uuid.uuid4().hex[:8]
    manifest = generate_demo(tmp_path / "demo", rows_per_table=4)
    source_topic = f"{prefix}_canal"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source_topic, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, _, message in canal_messages(manifest, partitions=2):
        producer.produce(source_topic, value=message.encode(), partition=partition)
    producer.produce(source_topic, value=b'{"database": "shop", "table": "orders", "type": "INSERT", broken',
                     partition=0)  # dead-lettered
    producer.flush(30)

    metrics = JobMetrics()
    server, port = serve_metrics(metrics, 0, addr="127.0.0.1")
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if rule.get("alert") == "AvroSinkDown":
                rule["for"] = "2s"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["alerts.yml"],
        "scrape_configs": [{"job_name": "avro-registry-sink", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }))
    prometheus = _Prometheus(tmp_path / "prometheus.yml", tmp_path / "prometheus")
    registry = EmbeddedRegistry(str(tmp_path / "registry.db"))  # its data kept across the outage's restart
    url = registry.start()
    stop, outcome = threading.Event(), {}
    checkpoint = tmp_path / "checkpoint"
    options = JobOptions(source=parse_source(f"canal-json+kafka://{bootstrap}/{source_topic}"), checkpoint=checkpoint,
                         sink=parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=2&schema-registry={url}"),
                         topic_rule=prefix + "_{schema}_{table}", available_now=False, trigger_interval="1 second")

    def run() -> None:
        try:
            outcome["result"] = run_job(spark, options, metrics=metrics, until=lambda totals: stop.is_set())
        except BaseException as exc:  # noqa: BLE001 - asserted on the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="job", daemon=True)
    total = len(manifest.all_events)
    started = time.monotonic()
    try:
        thread.start()
        delivered = prometheus.wait_value("sum(avro_sink_rows_delivered_total)", total, timeout=90)
        assert delivered == total, outcome
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix + "_") and t != source_topic]
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(topics)
        read, idle = 0, time.monotonic()
        while time.monotonic() - idle < 3 and read <= total:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read, idle = read + 1, time.monotonic()
        consumer.close()
        assert read == delivered  # what Prometheus says the job delivered is what a consumer reads
        dead = sum(len(p.read_text().splitlines()) for p in (checkpoint / "dead-letter").glob("batch-*.jsonl"))
        assert dead == 1
        assert prometheus.wait_value("sum(avro_sink_dead_letters_total)", dead) == dead
        deadline = time.monotonic() + 10  # the table's first dead letter: its series born at 1
        while not prometheus.firing("AvroSinkDeadLettersGrowing") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert prometheus.firing("AvroSinkDeadLettersGrowing")
        assert prometheus.value("avro_sink_commit_ts_lag_seconds") > 0
        assert prometheus.value("sum(avro_sink_bytes_out_total)") > 0
        assert prometheus.value('up{job="avro-registry-sink"}') == 1
        assert not prometheus.firing("AvroSinkDown")
        backlog = "sum(avro_sink_input_backlog_messages)"
        assert prometheus.wait_value(backlog, 0) == 0  # every source message is in a committed batch

        # The backlog: messages produced while the next batch is held (a failpoint pausing it after its inputs are
        # known) count until that batch commits, then the backlog falls back to 0.
        from avro_registry_sink import failpoints

        counts = tmp_path / "failpoints"
        counts.mkdir()
        monkeypatch.setenv(failpoints.COUNTS_ENV, str(counts))
        monkeypatch.setenv(failpoints.PAUSE_ENV, "3")
        monkeypatch.setenv(failpoints.ENV, "job.after-side-read=pause@1")  # longer than a refresh and a scrape
        again = [(p, m) for p, _, m in canal_messages(manifest, partitions=2) if '"isDdl": false' in m][:6]
        produced = time.monotonic()
        for partition, message in again:
            producer.produce(source_topic, value=message.encode(), partition=partition)
        producer.flush(30)
        deadline = time.monotonic() + 30
        while not (counts / "job.after-side-read.paused").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (counts / "job.after-side-read.paused").exists(), outcome  # the batch of the new messages is held
        # the highest backlog Prometheus scraped since the messages were produced: all of them, while held
        deadline, highest = time.monotonic() + 10, None
        while highest != len(again) and time.monotonic() < deadline:
            highest = prometheus.value(f"max_over_time({backlog}[{int(time.monotonic() - produced) + 2}s:500ms])")
            time.sleep(0.3)
        assert highest == len(again)
        assert prometheus.wait_value(backlog, 0) == 0  # the held batch committed
        monkeypatch.delenv(failpoints.ENV)
        delivered = prometheus.wait_value("sum(avro_sink_rows_delivered_total)", total + len(again))
        assert delivered == total + len(again)
        assert prometheus.value("avro_sink_held_files") == 0  # a Kafka source holds no files

        # A registry outage: the registry the job uses stops; a new table's first message needs the registry, whose
        # requests fail (counted after the client's retries) while the job retries the batch; the registry comes
        # back on its port with its data and the batch commits.
        assert prometheus.value("sum(avro_sink_registry_errors_total)") == 0
        port_of_registry = int(url.rsplit(":", 1)[1])
        registry.stop()
        create, insert = (next(m for _, _, m in canal_messages(manifest, partitions=1)
                               if '"table": "orders"' in m and f'"isDdl": {ddl}' in m) for ddl in ("true", "false"))
        for message in (create.replace("`orders`", "`outage`"), insert):
            producer.produce(source_topic, value=message.replace('"table": "orders"', '"table": "outage"').encode(),
                             partition=0)
        producer.flush(30)
        deadline = time.monotonic() + 30  # the outage lasts until the job's first registry error
        while not sum(s.value for m in metrics.registry_errors.collect() for s in m.samples
                      if s.name.endswith("_total")) and time.monotonic() < deadline:
            time.sleep(0.1)
        registry.port = port_of_registry
        registry.start()
        assert prometheus.wait_value("sum(avro_sink_registry_errors_total) > bool 0", 1) == 1, outcome
        deadline = time.monotonic() + 10  # increase() over 5 minutes: it fires after the registry is back too
        while not prometheus.firing("AvroSinkRegistryErrors") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert prometheus.firing("AvroSinkRegistryErrors"), outcome
        delivered = prometheus.wait_value("sum(avro_sink_rows_delivered_total)", delivered + 1)
        assert delivered == total + len(again) + 1, outcome
        assert prometheus.value('sum(avro_sink_rows_delivered_total{table="shop.outage"})') == 1

        # Prometheus's graph page of the rows delivered since the job started, as a person sees it
        if no_chromium is None:
            png = tmp_path / "prometheus-graph.png"
            shot = subprocess.run([str(SCRIPT), "screenshot", str(png), GRAPH_QUERY,
                                   f"{int(time.monotonic() - started) + 5}s"], capture_output=True, text=True,
                                  env=prometheus.env, timeout=300)
            assert shot.returncode == 0, shot.stderr
            _check_graph_screenshot(png.read_bytes())
            if os.environ.get("PROMETHEUS_GRAPH_PNG"):  # docs/operations.md: how docs/img's copy is made
                shutil.copyfile(png, os.environ["PROMETHEUS_GRAPH_PNG"])

        status = read_status(checkpoint)  # the running job's checkpoint says the same, without Spark
        assert (status.verdict, status.rows, status.dead_lettered) == ("healthy", delivered, dead)
        assert sum(t["rows"] for t in status.tables.values()) == delivered
        stop.set()
        thread.join(60)
        assert "error" not in outcome, outcome["error"]
        server.shutdown()  # the job's process would be gone: nothing answers on its port any more
        server.server_close()
        deadline = time.monotonic() + 20
        while not prometheus.firing("AvroSinkDown") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert prometheus.firing("AvroSinkDown")
    finally:
        stop.set()
        thread.join(60)
        server.shutdown()
        prometheus.stop()
        registry.stop()
        json.dumps(outcome, default=str)  # nothing left running
    if no_chromium is not None:  # every other check passed
        pytest.skip(f"No screenshot of Prometheus's graph page: {no_chromium}")


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_prometheus_sees_a_storage_trees_backlog_rise_while_the_job_is_held_and_fall_back(promtool, spark, tmp_path,
                                                                                         monkeypatch):
    from avro_registry_sink import failpoints
    from avro_registry_sink.ops.metrics import JobMetrics, serve_metrics
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.settings.config import parse_sink_uri
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    tree = tmp_path / "tree"
    manifest = generate_demo(tree, rows_per_table=4)
    metrics = JobMetrics()
    server, port = serve_metrics(metrics, 0, addr="127.0.0.1")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "avro-registry-sink", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }))
    prometheus = _Prometheus(tmp_path / "prometheus.yml", tmp_path / "prometheus")
    registry = EmbeddedRegistry()
    url = registry.start()
    stop, outcome = threading.Event(), {}
    options = JobOptions(source=parse_source(str(tree)), checkpoint=tmp_path / "checkpoint",
                         sink=parse_sink_uri(f"file://{tmp_path / 'out'}?protocol=avro&schema-registry={url}"),
                         csv_options=manifest.csv_options, tables=tuple(manifest.tables.values()),
                         available_now=False, trigger_interval="1 second")

    def run() -> None:
        try:
            outcome["result"] = run_job(spark, options, metrics=metrics, until=lambda totals: stop.is_set())
        except BaseException as exc:  # noqa: BLE001 - asserted on the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="storage-job", daemon=True)
    files, size = "sum(avro_sink_input_backlog_files)", "sum(avro_sink_input_backlog_bytes)"
    sizes = {relpath: (tree / relpath).stat().st_size for relpath in manifest.data_files}
    tables = {".".join(relpath.split("/")[:2]) for relpath in sizes}
    # The first batch is held by a failpoint (pausing it after its inputs are known); data files written meanwhile
    # add to the backlog, which falls back to 0 once a batch has taken them and committed.
    counts = tmp_path / "failpoints"
    counts.mkdir()
    monkeypatch.setenv(failpoints.COUNTS_ENV, str(counts))
    monkeypatch.setenv(failpoints.PAUSE_ENV, "120")  # held until this test releases it (below)
    monkeypatch.setenv(failpoints.ENV, "job.after-side-read=pause@1")
    try:
        thread.start()
        deadline = time.monotonic() + 90
        while not (counts / "job.after-side-read.paused").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (counts / "job.after-side-read.paused").exists(), outcome  # the first batch is held
        assert prometheus.wait_value(files, len(sizes)) == len(sizes)  # the tree's files, none committed
        assert prometheus.value(size) == sum(sizes.values())
        assert prometheus.value("count(avro_sink_input_backlog_files)") == len(tables)  # a series a table

        newest: dict[str, Path] = {}  # each CSV table's newest data file in its newest version
        for relpath in manifest.data_files:
            if relpath.endswith(".csv"):
                newest[relpath.split("/")[1]] = tree / relpath
        added = []
        produced = time.monotonic()
        for path in newest.values():  # the same rows again, in the next file TiCDC would write
            number = int(path.stem[3:])
            added.append(path.with_name(f"CDC{number + 1:0{len(path.stem) - 3}d}{path.suffix}"))
            added[-1].write_bytes(path.read_bytes())
        # the highest backlog Prometheus scraped since the files were written: the tree's and the new files, while
        # the batch is held
        want = {files: len(sizes) + len(added), size: sum(sizes.values()) + sum(p.stat().st_size for p in added)}
        time.sleep(max(0.0, produced + 1 - time.monotonic()))  # a window that starts after they were written
        deadline, highest = time.monotonic() + 10, {}
        while highest != want and time.monotonic() < deadline:
            window = f"[{int(time.monotonic() - produced)}s:500ms]"
            highest = {q: prometheus.value(f"max_over_time({q}{window})") for q in want}
            time.sleep(0.3)
        assert highest == want, outcome
        (counts / "job.after-side-read.release").write_text("")  # the held batch goes on
        assert prometheus.wait_value(files, 0, timeout=30) == 0  # the held batch and the new files' committed
        assert prometheus.value(size) == 0
        assert prometheus.value("count(avro_sink_input_backlog_files)") == len(tables)  # each table's at 0
        monkeypatch.delenv(failpoints.ENV)
        stop.set()
        thread.join(60)
        assert "error" not in outcome, outcome["error"]
        rows = outcome["result"].totals.rows  # the new files' rows too, as Prometheus scraped them
        assert rows > len(manifest.all_events)
        assert prometheus.wait_value("sum(avro_sink_rows_delivered_total)", rows) == rows
    finally:
        (counts / "job.after-side-read.release").write_text("")  # never left held by a failed assertion
        stop.set()
        thread.join(60)
        server.shutdown()
        prometheus.stop()
        registry.stop()
