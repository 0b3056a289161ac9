"""The documentation's code blocks, as a reader runs them.

A ```bash fence right after ``<!-- runnable -->`` is run as written: a page's runnable blocks in order in one
shell, as a reader pastes them into one terminal (a variable one block exports, or a registry it starts in the
background, is there for the next), in a fresh directory with the package's commands on the PATH. The pages name
what a reader may change through variables with defaults, and the suite sets only those: ``KAFKA_BOOTSTRAP`` (the
suite's broker), ``REGISTRY_PORT`` (a free port) and ``TOPIC_PREFIX`` (topics of this run alone). Every other
shell or Python block of docs/ and the README is listed in :data:`NOT_RUN` with why it cannot run here.

The tour's Kafka step (docs/index.md, step 5) is then read back with confluent-kafka's ``DeserializingConsumer``
and ``AvroDeserializer`` against the registry the page starts (started again as the page says, on its file), and
its records replay to the demo's rows.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.docs_pages import PageRun, blocks, name_of, page_runner, pages

#: Every fenced block of code a reader could paste (diagrams, JSON and properties files are not code).
CODE = re.compile(r"^(<!-- runnable -->\s*\n)?```(bash|sh|shell|console|python)\n(.*?)^```", re.S | re.M)
TOUR_ROWS = 40  # the tour's `demo --dir tour --rows 40`

#: The code blocks the suite does not run, by page and the start of their first line, with why (a page's block that
#: is in neither this list nor marked runnable fails test_every_code_block_is_run_or_says_why_not).
NOT_RUN: dict[tuple[str, str], str] = {
    ("index.md", "# 1. install, then run the main job on the embedded defaults (demo TiCDC data -> Avro files)"):
        "needs a checkout of the repository, and its second command runs the whole suite, this test among it",
    ("README.md", "# 1. install, then run the main job on the embedded defaults (demo TiCDC data -> Avro files)"):
        "needs a checkout of the repository, and its second command runs the whole suite, this test among it",
    ("README.md", "source .venv/bin/activate"):
        "needs the repository's .venv; its commands (demo, run, schemas, diff) run as docs/index.md's tour steps 1-4",
    ("benchmarks.md", "KAFKA_PORT=19092 scripts/kafka.sh start                # for the Kafka rows (optional)"):
        "the benchmarks: hours on 10^6-10^7 rows; tests/unit/test_bench.py runs the harness on small inputs",
    ("benchmarks.md", "# the harness alone, every input, file and Kafka output (5 rounds after a warm-up, load "
                      "average per round)"):
        "the benchmarks: hours on 10^6-10^7 rows; tests/unit/test_bench.py runs the harness on small inputs",
    ("delivery.md", "avro-registry-sink verify --source /data/ticdc --tables schemas/shop.sql \\"):
        "a reference example naming the reader's tree (/data/ticdc), broker and registry; verify on a real "
        "broker runs in tests/integration/test_verify_kafka.py",
    ("deployment.md", "avro-registry-sink run \\"):
        "names an object store (s3://cdc-bucket at minio:9000) and a broker of the reader's; the job on an S3 API "
        "server runs in tests/deploy/test_object_store.py",
    ("deployment.md", "avro-registry-sink package --out dist --stores s3 --kafka"):
        "needs a Spark standalone cluster (spark://master:7077); package and spark-submit on a local cluster run "
        "in tests/deploy/test_cluster.py",
    ("deployment.md", "# TLS with a client certificate (TiCDC: ca, cert and key together; they switch TLS on by "
                      "themselves)"):
        "option fragments, not commands; these URIs on the broker's TLS and SASL listeners run in "
        "tests/integration/test_kafka_security.py",
    ("development.md", "scripts/install.sh                       # .venv with the project and test extras"):
        "runs the whole suite, this test among it",
    ("operations.md", "PROMETHEUS_GRAPH_PNG=$PWD/docs/img/prometheus-graph.png \\"):
        "runs tests/integration/test_prometheus.py, a test of the suite",
    ("operations.md", "avro-registry-sink status --checkpoint CK"):
        "a synopsis (CK is the reader's checkpoint); status on a job's checkpoint runs in tests/unit/test_status.py",
    ("running.md", "# A TiCDC storage-sink directory (CSV or canal-json data files) into a real Kafka + registry, "
                   "continuously"):
        "reference examples naming the reader's tree (/data/ticdc), broker and registry; the tour and the "
        "tutorials run the same commands on the demo's data",
    ("tutorials/storage-tree.md", "avro-registry-sink registry serve --port 8081 --data trial/registry.db &"):
        "the tour's step 5 (index.md) runs the same commands on the same demo tree, under tour/ and with the suite's "
        "broker and port (test_the_tutorials_kafka_step_is_the_tours_step_5 keeps the two alike)",
    ("python-api.md", "from avro_registry_sink.spark.functions import from_flat_avro, notebook_session, to_flat_avro"):
        "a fragment (df is the reader's DataFrame); to_flat_avro and from_flat_avro on a real broker run in "
        "tests/integration/test_notebook_api.py",
    ("python-api.md", 'back.select(from_flat_avro("value", registry="http://127.0.0.1:8081", '
                      'subject="shop_orders-value", major=2)'):
        "continues the fragment above (its back DataFrame)",
}


def test_there_are_runnableblocks():
    assert len(blocks()) >= 3


def test_every_code_block_is_run_or_says_why_not():
    used = set()
    unlisted = []
    for page in pages():
        for match in CODE.finditer(page.read_text(encoding="utf-8")):
            if match.group(1):
                continue
            name, first = name_of(page), match.group(3).split("\n", 1)[0]
            keys = [key for key in NOT_RUN if key[0] == name and first.startswith(key[1])]
            used.update(keys)
            if not keys:
                unlisted.append((name, first))
    assert not unlisted, ("code blocks neither marked <!-- runnable --> nor listed in NOT_RUN with a reason (page, "
                          f"first line): {unlisted}")
    stale = sorted(set(NOT_RUN) - used)
    assert not stale, f"NOT_RUN lists blocks that are no longer in docs/ (or are now runnable): {stale}"


def _flags(script: str, command: str) -> dict[str, str]:
    """The ``--flag value`` pairs of the first ``avro-registry-sink <command>`` of a shell script (lines joined)."""
    line = next(part for part in script.replace("\\\n", " ").splitlines()
                if part.strip().startswith(f"avro-registry-sink {command}"))
    words = line.split()
    return {word: words[i + 1] for i, word in enumerate(words) if word.startswith("--") and i + 1 < len(words)
            and not words[i + 1].startswith("--")}


def test_the_tutorials_kafka_step_is_the_tours_step_5():
    """The storage tree tutorial's step 6 shows the command that the tour's step 5 runs: the same flags, with the
    tutorial's directory (trial/) and the defaults the tour reads from variables written out."""
    tour = next(text for name, _, text in blocks() if name == "index.md" and "registry serve" in text)
    page = (Path(__file__).parents[2] / "docs" / "tutorials" / "storage-tree.md").read_text(encoding="utf-8")
    shown = next(m.group(3) for m in CODE.finditer(page) if "registry serve" in m.group(3))
    defaults = {'"${REGISTRY_PORT:-8081}"': "8081", '"$REGISTRY"': "http://127.0.0.1:8081",
                '"${TOPIC_PREFIX:-tour}_{schema}_{table}"': '"trial_{schema}_{table}"',
                "$KAFKA_BOOTSTRAP": "127.0.0.1:19092"}
    for command in ("registry serve", "run"):
        expected = _flags(tour, command)
        expected = {flag: next((v for k, v in defaults.items() if value == k),
                               value.replace("$KAFKA_BOOTSTRAP", "127.0.0.1:19092").replace("tour/", "trial/"))
                    for flag, value in expected.items()}
        got = _flags(shown, command)
        if command == "run":  # a new sink is a new output: the tutorial's own checkpoint beside step 3's
            assert got.pop("--checkpoint") == "trial/checkpoint-kafka"
        assert got == expected, command


@pytest.fixture(scope="module")
def run_page(tmp_path_factory) -> Callable[[str], PageRun]:
    """Runs a page's blocks once per module (the tour's Kafka step is checked by a second test)."""
    return page_runner(tmp_path_factory)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("page", sorted({name for name, _, _ in blocks() if not name.startswith("tutorials/")}))
def test_the_runnable_blocks_of_a_page_pass(page, run_page):
    ran = run_page(page)
    assert ran.returncode == 0, ran.failure()
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# The tour's Kafka step, read back


@contextmanager
def _registry_as_the_page_says(directory: Path, env: dict[str, str]) -> Iterator[str]:
    """``avro-registry-sink registry serve --data tour/registry.db`` again (the page: "serves the same ids")."""
    from tests.support.servers import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(["avro-registry-sink", "registry", "serve", "--port", str(port), "--data",
                               "tour/registry.db"], cwd=directory, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/subjects", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"registry serve --data tour/registry.db did not answer on {url}: "
                                         f"{server.communicate(timeout=10)[1][-2000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _read_topics(bootstrap: str, registry: str, topics: list[str]) -> dict[str, list[tuple[int, dict, dict | None]]]:
    """Every record of the topics, as ``(partition, key, value or None)`` in partition and offset order, read with
    confluent-kafka's DeserializingConsumer and AvroDeserializer for key and value."""
    from confluent_kafka import DeserializingConsumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    client = SchemaRegistryClient({"url": registry})
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap, "group.id": f"docs-tour-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "key.deserializer": AvroDeserializer(client),
        "value.deserializer": AvroDeserializer(client)})
    try:
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            metadata = consumer.list_topics(topic, timeout=10).topics[topic]
            assert metadata.error is None, f"{topic}: {metadata.error}"
            for partition in metadata.partitions:
                ends[(topic, partition)] = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                          timeout=10)[1]
        consumer.assign([TopicPartition(t, p, 0) for (t, p), end in ends.items() if end > 0])
        got: dict[tuple[str, int], list[tuple[int, dict, dict | None]]] = {tp: [] for tp in ends}
        left = {tp for tp, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while left and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            tp = (message.topic(), message.partition())
            got[tp].append((message.partition(), message.key(), message.value()))
            if message.offset() + 1 >= ends[tp]:
                left.discard(tp)
        assert not left, f"partitions not read to their end within 60 s: {sorted(left)}"
    finally:
        consumer.close()
    out: dict[str, list[tuple[int, dict, dict | None]]] = {topic: [] for topic in topics}
    for (topic, _partition), records in sorted(got.items()):
        out[topic].extend(records)
    return out


@pytest.mark.spark
@pytest.mark.kafka
def test_the_tours_kafka_step_is_read_back_with_confluent_kafkas_deserializer(run_page, tmp_path):
    from avro_registry_sink.sources.demo import generate_demo
    from tests.support.job import expected_state, replay

    ran = run_page("index.md")
    assert ran.returncode == 0, ran.failure()
    manifest = generate_demo(tmp_path / "demo", rows_per_table=TOUR_ROWS)  # the demo's seed: the tour's changes
    expected = expected_state(manifest)
    topics = {name: f"{ran.env['TOPIC_PREFIX']}_{name.replace('.', '_')}" for name in manifest.tables}
    with _registry_as_the_page_says(ran.directory, ran.env) as registry:
        records = _read_topics(ran.env["KAFKA_BOOTSTRAP"], registry, sorted(topics.values()))
        with urllib.request.urlopen(f"{registry}/subjects", timeout=10) as answer:
            subjects = set(json.load(answer))
    # the run registered in the registry it was given, under the topics' names (TOPIC_PREFIX_<schema>_<table>)
    assert {f"{topic}-{part}" for topic in topics.values() for part in ("key", "value")} <= subjects, subjects
    for name, topic in topics.items():
        counts = manifest.counts[name]
        got = records[topic]
        assert len(got) == counts.inserts + counts.updates + counts.deletes, (name, len(got), counts)
        assert sum(value is None for _, _, value in got) == counts.deletes, name  # deletes are tombstones
        assert replay((key, value) for _, key, value in got) == expected[name], name
    # the page's own reader printed a shop.orders record of that topic, decoded with the page's registry
    printed = [line for line in ran.stdout.splitlines() if line.startswith("{'")]
    orders = {repr(value) for _, _, value in records[topics["shop.orders"]] if value is not None}
    assert printed and printed[-1] in orders, (printed, sorted(orders)[:2])
    # shop.orders' records are of both value schemas: before the ALTER TABLE without `channel`, after it with
    values = [value for _, _, value in records[topics["shop.orders"]] if value is not None]
    assert {"channel" in value for value in values} == {False, True}
