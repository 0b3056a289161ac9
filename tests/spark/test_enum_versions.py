"""ENUM/SET members per table version, end to end (issue 34 item 2): a storage tree whose ENUM and SET members are
removed, reordered and added by DDL, processed in ONE batch into the file sink. Every row is encoded with its own
version's schema (canal-json sends members by index: a reordered ENUM read with another version's members would
give another member, a removed one a dead letter), nothing is dead-lettered, and the registered versions' ``allowed``
lists are each version's DDL's, for a table created in the tree (its CREATE TABLE in the schema file) and for one
that existed before the changefeed (``--tables`` replayed through the DDLs), the members no input gives said in a
warning; and the same from a canal-json changelog whose DDL messages change the members."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from avro_registry_sink.encoding.plan import unframe
from avro_registry_sink.model import Op
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import read_file_sink
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.enum_versions import MEMBERS, allowed_lists, create, rows_of, versions, write_tree
from tests.support.job import canal_ddl, canal_dml

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

T0 = 449_640_294_064_586_752  # TiCDC timestamps: a version every 1000 ms
STEP = 1_000 << 18


def test_a_tree_of_enum_and_set_changes_in_one_batch(spark, tmp_path, registry):
    root = tmp_path / "tree"
    created = write_tree(root, "evo.created", first=T0, step=STEP)  # version 1's schema file holds its CREATE TABLE
    existed = write_tree(root, "evo.existed", first_query=False, first=T0, step=STEP)  # no DDL: --tables says it
    hint = parse_ddl(create("evo.existed"))[0]  # as the table was before the tree's DDLs
    unknown = parse_ddl("CREATE TABLE evo.unknown (id BIGINT PRIMARY KEY, e ENUM('a','b'))")[0].model_copy(
        update={"version": T0})  # existed before the changefeed, and --tables does not give it
    write_table_schema_file(unknown, root)
    (root / "evo" / "unknown" / str(T0)).mkdir(parents=True)
    (root / "evo" / "unknown" / str(T0) / "CDC000001.json").write_text(
        canal_dml(unknown, Op.INSERT, T0 + 1, None, {"id": 1, "e": None}) + "\r\n", encoding="utf-8")

    result = run_job(spark, JobOptions(source=parse_source(str(root)), checkpoint=tmp_path / "checkpoint",
                                       sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), tables=(hint,)),
                     registry=registry)

    assert result.totals.batches == 1
    assert result.totals.rows == 2 * len(MEMBERS) * 2 + 1 and result.totals.errors == 0, result.bad_input[:4]
    assert not result.bad_input and not result.dead_letters
    # what cannot be known is said: the table, the column, the version
    [said] = [w for w in result.totals.warnings if "members" in w]
    assert said.startswith(f"evo.unknown: the ENUM/SET members of column 'e' are not known at table version(s) {T0} ")
    assert "--tables" in said

    for name, truth in (("created", created), ("existed", existed)):
        subject = f"evo_{name}-value"
        registered = [json.loads(registry.get_version(subject, v).schema) for v in registry.get_versions(subject)]
        # one registered version per table version, in order, each with its own DDL's members
        assert [allowed_lists(s) for s in registered] == [{"e": ",".join(e), "s": ",".join(s)} for e, s in MEMBERS]
        assert [allowed_lists(s) for s in registered] == [
            {c.name: ",".join(c.elements) for c in t.columns if c.elements} for t in truth]
        expected = {row["id"]: (i, row["e"], row["s"]) for i in range(len(MEMBERS)) for row in rows_of(i)}
        # every row with its own version's schema and the member MySQL holds
        assert _read(tmp_path / "out", f"evo_{name}", registry) == expected, name


def _read(out, topic: str, registry) -> dict[int, tuple[int, str, str]]:
    """``{id: (index of the subject version whose schema wrote it, e, s)}`` of a topic's records."""
    subject = f"{topic}-value"
    registered = [registry.get_version(subject, v) for v in registry.get_versions(subject)]
    version_of = {r.id: i for i, r in enumerate(registered)}
    seen = {}
    for record in read_file_sink(out, topic):
        assert record.value is not None
        schema_id, body = unframe(record.value)
        writer = fastavro.parse_schema(json.loads(registered[version_of[schema_id]].schema))
        value = fastavro.schemaless_reader(io.BytesIO(body), writer, writer)
        seen[value["id"]] = (version_of[schema_id], value["e"], value["s"])
    return seen


def test_a_canal_json_changelog_of_enum_and_set_changes_in_one_batch(spark, tmp_path, registry):
    lines = []
    for i, (table, query) in enumerate(versions("evo.log", T0, STEP)):
        lines.append(canal_ddl("evo", "log", "CREATE" if i == 0 else "ALTER", query, table.version))
        lines += [canal_dml(table, Op.INSERT, table.version + j + 1, None, {c.name: None for c in table.columns} | row)
                  for j, row in enumerate(rows_of(i))]
    source = tmp_path / "canal"
    source.mkdir()
    (source / "part-0.json").write_text("\n".join(lines) + "\n", encoding="utf-8")

    result = run_job(spark, JobOptions(source=parse_source(f"canal-json+file://{source}"),
                                       checkpoint=tmp_path / "checkpoint", sink=SinkConfig(scheme="file",
                                                                                          path=str(tmp_path / "out"))),
                     registry=registry)

    assert result.totals.batches == 1 and result.totals.rows == 2 * len(MEMBERS)
    assert result.totals.errors == 0 and not result.bad_input, result.bad_input[:4]
    registered = [json.loads(registry.get_version("evo_log-value", v).schema)
                  for v in registry.get_versions("evo_log-value")]
    assert [allowed_lists(s) for s in registered] == [{"e": ",".join(e), "s": ",".join(s)} for e, s in MEMBERS]
    assert _read(tmp_path / "out", "evo_log", registry) == {
        row["id"]: (i, row["e"], row["s"]) for i in range(len(MEMBERS)) for row in rows_of(i)}
