"""The job's Prometheus metrics (avro_registry_sink.ops.metrics): what a batch's report and tally become, the lags
computed at scrape time, the registry client's requests, the served endpoint and the metrics-port setting."""

from __future__ import annotations

import httpx
import pytest
import respx
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from avro_registry_sink.errors import ConfigError, RegistryUnavailable, SchemaNotFound
from avro_registry_sink.ops.metrics import JOB_STATES, JobMetrics, serve_metrics
from avro_registry_sink.ops.progress import BatchReport, SchemaVersion
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.settings.config import RegistryConfig, load_config

NOW = 1_800_000_000.0


def samples(metrics: JobMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, parsed back by prometheus_client's own parser."""
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def ts(seconds_ago: float) -> int:
    """A TiDB commit ts whose physical time is ``seconds_ago`` before NOW."""
    return int((NOW - seconds_ago) * 1000) << 18


def test_a_committed_batch_counts_rows_per_table_and_op_bytes_per_topic_and_dead_letters():
    metrics = JobMetrics(clock=lambda: NOW)
    metrics.start()
    metrics.batch_started(7)
    report = BatchReport(batch_id=7, inputs=3, rows=5, tombstones=1, max_commit_ts=ts(30),
                         new_schemas=[SchemaVersion("shop_orders-value", 3, 1, "shop.orders")],
                         new_majors=[{"table": "shop.orders", "new_major": 2}], missing_files=["a/b.csv"],
                         seconds=1.5)
    metrics.batch(report, topics={"shop_orders": [4, 1, ts(30), 400], "crm_events": [1, 0, ts(90), 50]},
                  tables={"shop_orders": "shop.orders", "crm_events": "crm.events"},
                  dead_letters=[{"schema": "shop", "table": "orders"}, {"schema": "shop", "table": "orders"},
                                {"source": "x.csv:3"}],
                  phases={"plan": 0.2, "write": 1.0, "commit": 0.1})
    got = samples(metrics)
    assert got["avro_sink_rows_delivered_total", (("op", "record"), ("table", "shop.orders"))] == 3
    assert got["avro_sink_rows_delivered_total", (("op", "tombstone"), ("table", "shop.orders"))] == 1
    assert got["avro_sink_rows_delivered_total", (("op", "record"), ("table", "crm.events"))] == 1
    assert got["avro_sink_bytes_out_total", (("topic", "shop_orders"),)] == 400
    assert got["avro_sink_records_out_total", (("topic", "crm_events"),)] == 1
    assert got["avro_sink_dead_letters_total", (("table", "shop.orders"),)] == 2
    assert got["avro_sink_dead_letters_total", (("table", ""),)] == 1
    assert got["avro_sink_batches_total", ()] == 1
    assert got["avro_sink_inputs_read_total", ()] == 3
    assert got["avro_sink_schemas_registered_total", (("table", "shop.orders"),)] == 1
    assert got["avro_sink_new_majors_total", (("table", "shop.orders"),)] == 1
    assert got["avro_sink_missing_files_total", ()] == 1
    assert got["avro_sink_batch_duration_seconds_sum", ()] == 1.5
    assert got["avro_sink_batch_phase_seconds_sum", (("phase", "write"),)] == 1.0
    assert got["avro_sink_batch_phase_seconds_count", (("phase", "registry"),)] == 1
    assert got["avro_sink_last_batch_id", ()] == 7
    assert got["avro_sink_last_batch_timestamp_seconds", ()] == NOW
    assert got["avro_sink_job_state", ()] == JOB_STATES["waiting"]
    # lags at scrape time: now minus the newest delivered commit ts, overall and per topic
    assert got["avro_sink_commit_ts_lag_seconds", ()] == pytest.approx(30, abs=0.01)
    assert got["avro_sink_topic_commit_ts_lag_seconds", (("topic", "crm_events"),)] == pytest.approx(90, abs=0.01)
    assert got["avro_sink_last_commit_ts_seconds", ()] == pytest.approx(NOW - 30, abs=0.01)


def test_lag_grows_with_the_clock_and_resolved_ts_lag_is_per_table():
    clock = [NOW]
    metrics = JobMetrics(clock=lambda: clock[0])
    metrics.batch(BatchReport(batch_id=0, rows=1, max_commit_ts=ts(10), resolved_ts={"shop.orders": ts(20)}),
                  topics={"t": [1, 0, ts(10), 9]})
    assert samples(metrics)["avro_sink_resolved_ts_lag_seconds", (("table", "shop.orders"),)] == pytest.approx(20, abs=0.01)
    clock[0] += 100  # no new batch: the lag keeps rising
    got = samples(metrics)
    assert got["avro_sink_commit_ts_lag_seconds", ()] == pytest.approx(110, abs=0.01)
    assert got["avro_sink_resolved_ts_lag_seconds", (("table", "shop.orders"),)] == pytest.approx(120, abs=0.01)


def test_state_follows_the_batches_and_a_failure_keeps_its_class():
    metrics = JobMetrics(clock=lambda: NOW)
    assert "avro_sink_lag" not in metrics.exposition().decode()
    metrics.start()
    metrics.batch_started(0)
    assert samples(metrics)["avro_sink_job_state", ()] == JOB_STATES["running"]
    metrics.batch_empty()
    assert samples(metrics)["avro_sink_job_state", ()] == JOB_STATES["waiting"]
    metrics.batch_started(1)
    metrics.batch_failed(RegistryUnavailable("down"))
    metrics.batch_failed(ValueError("bad"))
    got = samples(metrics)
    assert got["avro_sink_batch_failures_total", ()] == 2
    assert got["avro_sink_last_error", (("error_class", "ValueError"),)] == 1
    assert ("avro_sink_last_error", (("error_class", "RegistryUnavailable"),)) not in got  # the last one only
    assert got["avro_sink_job_state", ()] == JOB_STATES["failed"]
    metrics.finish(None)
    assert samples(metrics)["avro_sink_job_state", ()] == JOB_STATES["stopped"]


def test_kafka_backlog_is_the_end_offsets_at_scrape_time_minus_the_committed_batchs_per_partition():
    ends = {("src", 0): 10, ("src", 1): 4}
    metrics = JobMetrics(clock=lambda: NOW)
    metrics.end_offsets = lambda: dict(ends)
    backlog = "avro_sink_input_backlog_messages"
    got = samples(metrics)
    # before a committed batch: everything from the partition's start
    assert got[backlog, (("partition", "0"), ("topic", "src"))] == 10
    assert got[backlog, (("partition", "1"), ("topic", "src"))] == 4
    metrics.committed_offsets({"src": {"0": 7, "1": 4}})  # as spark/offsets/<batch> writes them
    ends[("src", 0)] = 12  # produced while the job waits: seen at the next scrape, before any batch
    got = samples(metrics)
    assert got[backlog, (("partition", "0"), ("topic", "src"))] == 5
    assert got[backlog, (("partition", "1"), ("topic", "src"))] == 0
    metrics.committed_offsets({"src": {"0": 12}})
    assert samples(metrics)[backlog, (("partition", "0"), ("topic", "src"))] == 0


def test_an_unreachable_broker_leaves_no_backlog_series_and_counts_the_scrape():
    metrics = JobMetrics(clock=lambda: NOW)

    def down() -> dict[tuple[str, int], int]:
        raise RuntimeError("broker down")

    metrics.end_offsets = down
    got = samples(metrics)
    assert not [k for k in got if k[0] == "avro_sink_input_backlog_messages"]
    assert samples(metrics)["avro_sink_input_backlog_errors_total", ()] == 1  # the scrape before's failure
    assert not [k for k in samples(JobMetrics()) if k[0] == "avro_sink_input_backlog_messages"]  # no Kafka source


def test_held_files_are_a_gauge_and_vanished_files_a_counter():
    metrics = JobMetrics(clock=lambda: NOW)
    metrics.held(3)
    metrics.batch(BatchReport(batch_id=1, missing_files=["a/b/CDC1.csv", "a/b/CDC2.csv"]))
    metrics.held(1)
    metrics.batch(BatchReport(batch_id=2, missing_files=["a/b/CDC3.csv"]))
    got = samples(metrics)
    assert got["avro_sink_held_files", ()] == 1
    assert got["avro_sink_missing_files_total", ()] == 3


def test_storage_backlog_is_the_trees_last_listing_less_the_committed_batchs_offset_per_table(tmp_path):
    import time

    from avro_registry_sink.ops.metrics import StorageBacklog
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.sources.storage import StorageLayout
    from avro_registry_sink.spark.sources.storage_source import end_offset, initial_offset, list_tree, pending_files

    manifest = generate_demo(tmp_path, rows_per_table=4)
    layout = StorageLayout(tmp_path)
    metrics = JobMetrics(clock=lambda: NOW)
    metrics.storage_backlog = listing = StorageBacklog(lambda: list_tree(layout), pending_files, refresh=0.05)
    files, size = "avro_sink_input_backlog_files", "avro_sink_input_backlog_bytes"

    def backlog(want_files: int | None = None) -> dict[str, tuple[float, float]]:
        """{table: (files, bytes)} of a scrape (the first with ``want_files`` in all, within 5 s)."""
        deadline = time.monotonic() + 5
        while True:
            got = samples(metrics)
            out = {dict(labels)["table"]: (value, got[size, labels]) for (name, labels), value in got.items()
                   if name == files}
            if want_files is None or sum(f for f, _ in out.values()) == want_files or time.monotonic() > deadline:
                return out
            time.sleep(0.05)

    sizes = {relpath: (tmp_path / relpath).stat().st_size for relpath in manifest.data_files}
    tables = sorted({".".join(relpath.split("/")[:2]) for relpath in manifest.data_files})
    # before a committed batch (a new checkpoint): every data file of the tree
    assert backlog(len(sizes)) == {t: (sum(1 for r in sizes if r.startswith(t.replace(".", "/") + "/")),
                                       sum(n for r, n in sizes.items() if r.startswith(t.replace(".", "/") + "/")))
                                   for t in tables}
    first = end_offset(initial_offset(), list_tree(layout), max_files=4)  # a batch of 4 files committed
    metrics.committed_storage_offset(first)
    assert sum(f for f, _ in backlog().values()) == len(sizes) - 4
    last = end_offset(first, list_tree(layout))
    metrics.committed_storage_offset(last)
    assert backlog() == {t: (0, 0) for t in tables}  # caught up: a series at 0 for each table
    new = tmp_path / "shop/customers/449640294073761793/2024-05-09/CDC00000000000000000004.csv"
    new.write_bytes(b"x" * 42)  # TiCDC's next file: seen by the next listing, before any batch
    assert backlog(1)["shop.customers"] == (1, 42)
    metrics.finish()  # the run ended: the listing thread too
    assert listing._thread is not None and not listing._thread.is_alive()


def test_an_unreadable_storage_tree_leaves_no_backlog_series_and_counts_the_scrape():
    import time

    from avro_registry_sink.ops.metrics import StorageBacklog

    def down() -> object:
        raise OSError("store down")

    metrics = JobMetrics(clock=lambda: NOW)
    metrics.storage_backlog = backlog = StorageBacklog(down, lambda offset, listing: {}, refresh=0.05)
    deadline = time.monotonic() + 5
    while backlog._error is None and time.monotonic() < deadline:
        samples(metrics)  # the first scrape starts the listing thread
        time.sleep(0.05)
    got = samples(metrics)
    assert not [k for k in got if k[0] in ("avro_sink_input_backlog_files", "avro_sink_input_backlog_bytes")]
    assert samples(metrics)["avro_sink_input_backlog_errors_total", ()] >= 1
    backlog.close()


def test_the_input_backlog_is_taken_only_when_scraped_and_at_most_once_a_refresh_interval():
    """No listing of the tree while nothing scrapes; many scrapes within the refresh interval: one listing; a scrape
    after the interval waits for a new listing and shows what it found."""
    import threading
    import time

    from avro_registry_sink.ops.metrics import StorageBacklog

    calls: list[float] = []
    files = {"shop.orders": (1, 10)}

    def list_tree() -> dict[str, tuple[int, int]]:
        calls.append(time.monotonic())
        return dict(files)

    metrics = JobMetrics(clock=lambda: NOW)
    metrics.storage_backlog = backlog = StorageBacklog(list_tree, lambda offset, listing: listing, refresh=0.5,
                                                       wait=5.0)
    time.sleep(0.3)
    assert calls == [] and backlog._thread is None  # nothing scraped: no thread, no listing
    for _ in range(20):
        assert samples(metrics)["avro_sink_input_backlog_files", (("table", "shop.orders"),)] == 1
    assert len(calls) == 1  # the first scrape waited for the listing; the next 19 read it
    time.sleep(1.0)
    assert len(calls) == 1  # idle between scrapes: the thread sleeps
    files["shop.orders"] = (3, 30)
    assert samples(metrics)["avro_sink_input_backlog_files", (("table", "shop.orders"),)] == 3
    assert len(calls) == 2
    scrapes = [threading.Thread(target=samples, args=(metrics,)) for _ in range(8)]
    time.sleep(0.5)
    for thread in scrapes:  # concurrent scrapes of a stale listing: one new listing, waited for by all
        thread.start()
    for thread in scrapes:
        thread.join()
    assert len(calls) == 3
    backlog.close()
    assert not backlog._thread.is_alive()


def test_a_scrape_waits_for_a_slow_listing_at_most_its_bound_and_reads_the_last_one():
    import threading
    import time

    from avro_registry_sink.ops.metrics import StorageBacklog

    release = threading.Event()
    calls: list[int] = []

    def list_tree() -> dict[str, tuple[int, int]]:
        calls.append(1)
        if len(calls) == 2:
            release.wait(10)  # a store that takes its time
        return {"shop.orders": (len(calls), 10)}

    metrics = JobMetrics(clock=lambda: NOW)
    metrics.storage_backlog = backlog = StorageBacklog(list_tree, lambda offset, listing: listing, refresh=0.01,
                                                       wait=0.2)
    key = "avro_sink_input_backlog_files", (("table", "shop.orders"),)
    assert samples(metrics)[key] == 1
    time.sleep(0.05)
    started = time.monotonic()
    assert samples(metrics)[key] == 1  # the second listing hangs: the scrape reads the first one
    assert time.monotonic() - started < 2.0
    release.set()
    deadline = time.monotonic() + 5
    while samples(metrics)[key] == 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert samples(metrics)[key] >= 2  # the slow listing's, or a later one
    backlog.close()


def test_metrics_live_in_their_own_registry():
    JobMetrics()
    JobMetrics()  # a second job in the process: no duplicate-timeseries error from a shared registry
    assert REGISTRY.get_sample_value("avro_sink_batches_total") is None


@respx.mock
def test_the_registry_client_reports_every_request_and_counts_only_outages_as_errors():
    base = "http://registry.test"
    respx.get(f"{base}/schemas/ids/1").mock(return_value=httpx.Response(404, json={"error_code": 40403,
                                                                                    "message": "Schema not found"}))
    respx.get(f"{base}/subjects").mock(return_value=httpx.Response(503, text="down"))
    metrics = JobMetrics()
    client = RegistryClient(RegistryConfig(urls=(base,), max_retries=0), sleep=lambda _: None)
    client.observer = metrics.registry_request
    with pytest.raises(SchemaNotFound):
        client.get_schema(1)
    with pytest.raises(RegistryUnavailable):
        client.get_subjects()
    got = samples(metrics)
    assert got["avro_sink_registry_requests_total", (("op", "get_schema"),)] == 1
    assert got["avro_sink_registry_requests_total", (("op", "get_subjects"),)] == 1
    assert got["avro_sink_registry_errors_total", (("op", "get_schema"),)] == 0  # an answer, not an outage
    # exported at 0 before any error: increase() in the alert rule sees the first outage of an operation
    assert got["avro_sink_registry_errors_total", (("op", "register"),)] == 0
    assert got["avro_sink_registry_errors_total", (("op", "get_subjects"),)] == 1
    assert got["avro_sink_registry_request_duration_seconds_count", (("op", "get_subjects"),)] == 1


def test_the_endpoint_serves_the_text_format():
    metrics = JobMetrics()
    metrics.batch(BatchReport(batch_id=3, rows=2), topics={"t": [2, 0, 0, 10]})
    server, port = serve_metrics(metrics, 0, addr="127.0.0.1")
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'avro_sink_records_out_total{topic="t"} 2.0' in response.text
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics")  # stopped: the port is closed
    server.server_close()  # as socketserver's servers take it: a second close does nothing


def test_stopping_the_endpoint_does_not_hold_the_end_of_the_run():
    """prometheus_client's start_http_server polls for its shutdown every 0.5 s: five stops took 1.25 s on average
    and held each run's end; the endpoint's own server stops at once."""
    import time

    metrics = JobMetrics()
    spent = 0.0
    for _ in range(5):
        server, port = serve_metrics(metrics, 0, addr="127.0.0.1")
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        time.sleep(0.1)
        started = time.monotonic()
        server.shutdown()
        spent += time.monotonic() - started
    assert spent < 0.5


def test_metrics_port_is_a_setting_of_the_toml_file_and_the_environment(tmp_path):
    assert load_config().metrics_port is None  # off by default
    toml = tmp_path / "sink.toml"
    toml.write_text("metrics-port = 9464\n")
    assert load_config(config_file=toml, environ={}).metrics_port == 9464
    assert load_config(config_file=toml, environ={"AVRO_SINK_METRICS_PORT": "0"}).metrics_port == 0
    with pytest.raises(ConfigError, match="metrics-port"):
        load_config(environ={"AVRO_SINK_METRICS_PORT": "70000"})
    with pytest.raises(ConfigError, match="metrics-port"):
        load_config(environ={"AVRO_SINK_METRICS_PORT": "nine"})


def test_exactly_once_slices_are_counted_by_outcome_and_the_trigger_interval_is_exported():
    metrics = JobMetrics(clock=lambda: NOW)
    metrics.start(trigger_seconds=10.0)
    metrics.slices({"committed": 3, "committed-before": 1})
    metrics.slices({"refused": 2})
    got = samples(metrics)
    assert got["avro_sink_transactions_total", (("op", "committed"),)] == 3
    assert got["avro_sink_transactions_total", (("op", "committed_before"),)] == 1
    assert got["avro_sink_transactions_total", (("op", "aborted"),)] == 2
    assert got["avro_sink_trigger_interval_seconds", ()] == 10.0
    assert got["avro_sink_start_timestamp_seconds", ()] == NOW


def test_run_serves_the_metrics_of_its_job_on_metrics_port(tmp_path, monkeypatch):
    """``run --metrics-port N`` (the CLI up to the job): the run's JobMetrics served on that port while it runs;
    ``AVRO_SINK_METRICS_PORT`` alone does the same, and without either there are no metrics."""
    import socket

    from typer.testing import CliRunner

    from avro_registry_sink.cli import app
    from avro_registry_sink.ops.progress import JobTotals
    from avro_registry_sink.spark.driver.job import JobResult

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    runner = CliRunner()
    assert runner.invoke(app, ["demo", "--dir", str(tmp_path / "demo"), "--rows", "5", "--no-run",
                               "--progress", "none"]).exit_code == 0
    seen = []

    def run_job(spark, options, *, progress=None, metrics=None, **_):
        if metrics is None:
            seen.append(None)
        else:
            metrics.batch(BatchReport(batch_id=0, rows=4), topics={"shop_orders": [4, 0, 0, 40]})
            seen.append(httpx.get(f"http://127.0.0.1:{options.sink.metrics_port}/metrics").text)
        return JobResult(totals=JobTotals(), checkpoint=tmp_path / "ck")

    monkeypatch.setattr("avro_registry_sink.cli._job_session", lambda options, stores: object())
    monkeypatch.setattr("avro_registry_sink.spark.driver.job.run_job", run_job)
    monkeypatch.setattr("avro_registry_sink.cli._probe_job", lambda *a, **k: None)
    args = ["run", "--source", str(tmp_path / "demo/input"), "--tables", str(tmp_path / "demo/tables.sql"),
            "--state-dir", str(tmp_path / "state"), "--available-now", "--progress", "none"]
    port = free_port()
    result = runner.invoke(app, [*args, "--metrics-port", str(port)])
    assert result.exit_code == 0, result.output
    assert 'avro_sink_records_out_total{topic="shop_orders"} 4.0' in seen[-1]
    assert f'"port": {port}' in result.stderr  # said on stderr (JSON: no terminal)
    monkeypatch.setenv("AVRO_SINK_METRICS_PORT", str(free_port()))
    assert runner.invoke(app, args).exit_code == 0
    assert seen[-1] is not None and "avro_sink_batches_total 1.0" in seen[-1]
    monkeypatch.delenv("AVRO_SINK_METRICS_PORT")
    assert runner.invoke(app, args).exit_code == 0
    assert seen[-1] is None  # off by default


def test_the_embedded_registry_serves_its_own_metrics():
    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    server = EmbeddedRegistry()
    url = server.start()
    try:
        with RegistryClient(RegistryConfig(urls=(url,))) as client:
            client.register("t-value", '"string"')
            with pytest.raises(SchemaNotFound):
                client.get_schema(999)
        response = httpx.get(f"{url}/metrics")
    finally:
        server.stop()
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(response.text) for s in f.samples}
    assert got["avro_sink_registry_server_requests_total", (("op", "register"),)] == 1
    assert got["avro_sink_registry_server_requests_total", (("op", "get_schema"),)] == 1
    assert ("avro_sink_registry_server_errors_total", (("op", "get_schema"),)) not in got  # a 404 is an answer
    assert got["avro_sink_registry_server_request_duration_seconds_count", (("op", "register"),)] == 1


@pytest.mark.parametrize("topics", [1, 3, 50])
def test_the_tally_per_topic_equals_a_count_of_each_topics_rows(topics):
    """tally_of counts all topics in one pass (bincount); the numbers are those of each topic's rows counted apart,
    bytes of key and value included (what avro_sink_bytes_out_total adds up)."""
    import numpy as np
    import pyarrow as pa

    from avro_registry_sink.spark.stages.tally import tally_of

    rng = np.random.default_rng(topics)
    n = 2_000
    topic = [f"t{int(i)}" if i >= 0 else None for i in rng.integers(-1 if topics > 1 else 0, topics, n)]
    key = [bytes(int(k)) for k in rng.integers(1, 20, n)]
    value = [None if rng.random() < 0.2 else bytes(int(v)) for v in rng.integers(0, 300, n)]
    ts = rng.integers(1, 10**12, n)
    batch = pa.RecordBatch.from_pydict({"topic": topic, "key": pa.array(key, pa.binary()),
                                        "value": pa.array(value, pa.binary()), "commit_ts": pa.array(ts, pa.int64())})
    want = {}
    for name in {t for t in topic if t is not None}:
        rows = [i for i in range(n) if topic[i] == name]
        want[name] = [len(rows), sum(value[i] is None for i in rows), int(max(ts[i] for i in rows)),
                      sum(len(key[i]) + len(value[i] or b"") for i in rows)]
    assert tally_of(batch)["topics"] == want


@pytest.mark.kafka
def test_kafka_end_offsets_are_refreshed_by_a_thread_and_a_scrape_reads_the_last_refresh():
    import time
    import uuid

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from avro_registry_sink.ops.metrics import KafkaEndOffsets
    from tests.support.servers import ensure_kafka

    bootstrap = ensure_kafka()
    topic = "m" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its futures resolve
    for future in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})

    def produce(partition: int, n: int) -> None:
        for _ in range(n):
            producer.produce(topic, value=b"x", partition=partition)
        producer.flush(30)

    def wait_for(ends: KafkaEndOffsets, want: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        deadline, got = time.monotonic() + 15, {}
        while got != want and time.monotonic() < deadline:
            got = ends()
            time.sleep(0.1)
        return got

    produce(0, 3)
    produce(1, 1)
    ends = KafkaEndOffsets([topic], {"bootstrap.servers": bootstrap}, refresh=0.2)
    try:
        assert wait_for(ends, {(topic, 0): 3, (topic, 1): 1}) == {(topic, 0): 3, (topic, 1): 1}
        produce(1, 2)  # seen by a later refresh, without a batch
        assert wait_for(ends, {(topic, 0): 3, (topic, 1): 3}) == {(topic, 0): 3, (topic, 1): 3}
    finally:
        ends.close()
    assert ends._thread is not None and not ends._thread.is_alive()
