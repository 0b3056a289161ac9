"""The typed seams of issue 36: each kind (a changelog format, a delivery mode, a sink kind) is read from text once,
by its parser, and is a key of one registry after that; the job asks a sink only what the ``Sink`` protocol
declares; and the files ``docs/architecture.md`` lists for adding a changelog format or a delivery mode are the
ones the registries live in (at most 3 code files each)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.formats import FORMATS, InputFormat
from avro_registry_sink.ops.status import _parse_source as status_source
from avro_registry_sink.settings.config import (
    DELIVERY_MODES,
    DeliveryMode,
    SinkConfig,
    SinkKind,
    parse_sink_uri,
    settings_from_mapping,
)
from avro_registry_sink.sources.demo_topic import CHANGELOG_FORMATS, DEMO_WRITERS
from avro_registry_sink.spark.sinks import sinks
from avro_registry_sink.spark.sinks.sinks import DELIVERY_WRITERS, SINK_KINDS, FileSink, KafkaSink, Sink, build_sink
from avro_registry_sink.spark.sources.sources import parse_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "avro_registry_sink"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Where a kind may be compared as text: the parsers that read it, each with why.
PARSERS = {
    "settings/config.py": "parse_sink_uri and parse_delivery read the sink URI's scheme and the delivery mode",
    "storage_fs.py": "storage URIs: a 'file' there is a store, parsed here",
    "spark/sources/sources.py": "parse_source reads a --source URI's transport (kafka, file)",
    "ops/status.py": "status reads the --source that job.json records without Spark (its transport; formats from FORMATS)",
    "settings/ticdc_keys.py": "the table of TiCDC's URI parameters names the schemes each applies to",
}
#: Single comparisons allowed elsewhere: (file, literal) -> why.
ALLOWED = {
    ("cli.py", "canal-json"): "the demo command tells whether --format was given (its default) before validating it",
}


def _changelog_formats() -> list[str]:
    return sorted(name for name, fmt in FORMATS.items() if fmt.is_changelog)


def _kind_literals() -> set[str]:
    return {*(kind.value for kind in SinkKind), *DELIVERY_MODES, *_changelog_formats()}


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _compared_literals(node: ast.Compare, literals: set[str]) -> list[str]:
    found = []
    for side in (node.left, *node.comparators):
        elements = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
        found += [e.value for e in elements if isinstance(e, ast.Constant) and e.value in literals]
    return found


def test_no_kind_is_compared_as_text_outside_its_parser() -> None:
    literals = _kind_literals()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _relative(path)
        if name in PARSERS or name.startswith("formats/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                offenders += [f"{name}:{node.lineno}: {ast.unparse(node)}"
                              for literal in _compared_literals(node, literals) if (name, literal) not in ALLOWED]
    assert not offenders, "kinds compared as text outside their parsers (compare with SinkKind/DeliveryMode, or ask " \
                          "the format object):\n" + "\n".join(offenders)


def test_the_scan_finds_a_comparison() -> None:
    source = 'if config.scheme == "kafka" or mode in ("exactly-once", "x") or kind != "debezium-json": pass'
    compares = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Compare)]
    assert sorted(lit for n in compares for lit in _compared_literals(n, _kind_literals())) == \
        ["debezium-json", "exactly-once", "kafka"]


# -- sinks -------------------------------------------------------------------------------------------


def _protocol_members(protocol: type) -> set[str]:
    return {name for name in {*protocol.__dict__, *protocol.__annotations__}
            if not name.startswith("_") and name not in {"__annotations__"}}


def test_every_sink_kind_the_uri_parser_gives_has_a_sink_class() -> None:
    assert set(SINK_KINDS) == set(SinkKind)
    given = {parse_sink_uri(uri).scheme for uri in ("kafka://127.0.0.1:9092/t?protocol=avro",
                                                     "file:///tmp/out?protocol=avro",
                                                     "s3://bucket/prefix?protocol=avro&endpoint=http://127.0.0.1:9000")}
    assert given == set(SinkKind)
    assert all(isinstance(kind, SinkKind) for kind in given)


def test_each_sink_class_has_what_the_protocol_declares(tmp_path: Path) -> None:
    members = _protocol_members(Sink)
    assert {"staged", "exactly_once", "transactions", "resolved", "query", "fused_spec", "write_fused"} <= members
    built = {SinkKind.FILE: build_sink(SinkConfig(scheme=SinkKind.FILE, path=str(tmp_path))),
             SinkKind.KAFKA: build_sink(SinkConfig(scheme=SinkKind.KAFKA, brokers=("127.0.0.1:9",)),
                                        producer="confluent")}
    for kind, sink in built.items():
        assert type(sink) is SINK_KINDS[kind]
        missing = {m for m in members if not hasattr(sink, m)}
        assert not missing, f"{type(sink).__name__} lacks {sorted(missing)}"
        assert sink.staged is SINK_KINDS[kind].staged  # known from the kind, before a sink is built
        assert sink.fused_spec(0, 1) is None  # neither writes slices in the encode stage unless exactly once
        assert sink.exactly_once is (sink.transactions is not None)
    assert built[SinkKind.FILE].staged and not built[SinkKind.KAFKA].staged
    assert built[SinkKind.FILE].resolved == {} and built[SinkKind.FILE].query is None


def test_the_job_asks_a_sink_only_what_the_protocol_declares() -> None:
    members = _protocol_members(Sink) | {"prepare", "write", "check", "close", "description"}
    users = [PACKAGE / "spark/driver/job.py", PACKAGE / "spark/audit/replay.py"]
    asked: dict[str, set[str]] = {}
    for path in users:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
                probed = ast.unparse(node.args[0]) if node.args else ""
                assert probed not in ("sink", "self.sink"), f"{_relative(path)}:{node.lineno} probes the sink: " \
                                                            f"{ast.unparse(node)}"
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in ("sink", "self.sink"):
                asked.setdefault(node.attr, set()).add(f"{_relative(path)}:{node.lineno}")
    assert {"staged", "exactly_once", "write_fused", "fused_spec", "resolved"} <= set(asked)
    unknown = {attr: where for attr, where in asked.items() if attr not in members}
    assert not unknown, f"the job asks a sink for what the Sink protocol does not declare: {unknown}"


# -- delivery modes ------------------------------------------------------------------------------------


def test_every_delivery_mode_has_a_writer_and_is_parsed_from_the_enum() -> None:
    assert set(DELIVERY_WRITERS) == set(DeliveryMode)
    assert tuple(mode.value for mode in DeliveryMode) == DELIVERY_MODES
    for mode in DeliveryMode:
        assert settings_from_mapping({"delivery": mode.value}).delivery is mode
        sink = KafkaSink(["127.0.0.1:9"], producer="confluent", delivery=mode)
        assert sink.exactly_once is (mode is DeliveryMode.EXACTLY_ONCE)
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping({"delivery": "at-most-once"})
    assert refused.value.context.get("choices") == list(DELIVERY_MODES)


# -- changelog formats --------------------------------------------------------------------------------


def test_every_format_lives_in_its_module_under_formats() -> None:
    package_init = (PACKAGE / "formats/__init__.py").read_text(encoding="utf-8")
    for name, fmt in FORMATS.items():
        module = type(fmt).__module__
        assert module.startswith("avro_registry_sink.formats."), (name, module)
        assert re.search(rf"\b{module.rsplit('.', 1)[1]}\b", package_init.split('"""', 2)[2]), \
            f"formats/__init__.py does not import {module}"
    for name in _changelog_formats():
        cls = type(FORMATS[name])
        for method in ("peek", "events", "arrow_rows"):
            assert getattr(cls, method) is not getattr(InputFormat, method), f"{name} lacks its own {method}"


def test_the_source_parser_takes_its_changelog_formats_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _changelog_formats():
        assert parse_source(f"{name}+kafka://127.0.0.1:9092/t").kind == name
    with pytest.raises(ConfigError):
        parse_source("csv+kafka://127.0.0.1:9092/t")  # registered, but no changelog

    class Registered(InputFormat):
        name = "seam-json"
        is_changelog = True

    with pytest.raises(ConfigError):
        parse_source("seam-json+kafka://127.0.0.1:9092/t")
    with pytest.raises(ConfigError):
        status_source("seam-json+kafka://127.0.0.1:9092/t")
    monkeypatch.setitem(FORMATS, "seam-json", Registered())
    assert parse_source("seam-json+kafka://127.0.0.1:9092/t").kind == "seam-json"
    assert status_source("seam-json+kafka://127.0.0.1:9092/t")[0] == "kafka"  # status's own parse, without Spark
    with pytest.raises(ConfigError):
        status_source("csv+kafka://127.0.0.1:9092/t")


def test_the_demo_writes_only_registered_changelog_formats() -> None:
    assert tuple(DEMO_WRITERS) == CHANGELOG_FORMATS
    assert set(CHANGELOG_FORMATS) <= set(_changelog_formats())


# -- the lists in docs/architecture.md ----------------------------------------------------------------------


def _documented(heading: str) -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index(f"**{heading}**")
    block = text[start:].split("\n\n", 2)[1]
    return re.findall(r"^\d+\. `(avro_registry_sink/[^`]+)`", block, flags=re.MULTILINE)


def _home(obj: Any) -> str:
    path = inspect.getsourcefile(obj)
    assert path is not None
    return "avro_registry_sink/" + _relative(Path(path))


def test_adding_a_changelog_format_touches_the_files_the_docs_list() -> None:
    files = _documented("Adding a changelog format")
    assert 0 < len(files) <= 3, files
    pattern = "avro_registry_sink/formats/<name>.py"
    assert pattern in files
    assert _home(FORMATS["canal-json"].__class__).startswith("avro_registry_sink/formats/")
    for name in _changelog_formats():  # each format's own module, the pattern's instance
        assert re.fullmatch(pattern.replace("<name>", r"\w+"), _home(type(FORMATS[name])))
    import avro_registry_sink.formats as formats_package
    from avro_registry_sink.formats import changelog_arrow

    assert {_home(formats_package), _home(changelog_arrow)} <= set(files)
    for path in set(files) - {pattern}:
        assert (ROOT / path).is_file(), path


def test_adding_a_delivery_mode_touches_the_files_the_docs_list() -> None:
    files = _documented("Adding a delivery mode")
    assert 0 < len(files) <= 3, files
    from avro_registry_sink.kafka import delivery

    writers = {_home(writer) for writer in DELIVERY_WRITERS.values()}
    assert {_home(DeliveryMode), _home(sinks), _home(delivery)} | writers == set(files)


def test_adding_a_sink_kind_touches_the_files_the_docs_list() -> None:
    files = _documented("Adding a sink kind")
    assert 0 < len(files) <= 3, files
    assert {_home(SinkKind), _home(sinks), *(_home(cls) for cls in SINK_KINDS.values())} == set(files)
    assert {FileSink, KafkaSink} == set(SINK_KINDS.values())
