"""ENUM/SET members per table version, end to end (issue 34 item 2): a storage tree whose ENUM and SET members are
removed, reordered and added by DDL, processed in ONE batch into the file sink. Every row is encoded with its own
version's schema (canal-json sends members by index: a reordered ENUM read with another version's members would
give another member, a removed one a dead letter), nothing is dead-lettered, and the registered versions' ``allowed``
lists are each version's DDL's, for a table created in the tree (its CREATE TABLE in the schema file) and for one
that existed before the changefeed (``--tables`` replayed through the DDLs)."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from avro_registry_sink.config import SinkConfig
from avro_registry_sink.encoder import unframe
from avro_registry_sink.spark.job import run_job
from avro_registry_sink.spark.job_options import JobOptions
from avro_registry_sink.spark.sinks import read_file_sink
from avro_registry_sink.spark.sources import parse_source
from avro_registry_sink.tabledef.ddl import parse_ddl
from tests.support.enum_versions import MEMBERS, allowed_lists, create, rows_of, write_tree

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

T0 = 449_640_294_064_586_752  # TiCDC timestamps: a version every 1000 ms
STEP = 1_000 << 18


def test_a_tree_of_enum_and_set_changes_in_one_batch(spark, tmp_path, registry):
    root = tmp_path / "tree"
    created = write_tree(root, "evo.created", first=T0, step=STEP)  # version 1's schema file holds its CREATE TABLE
    existed = write_tree(root, "evo.existed", first_query=False, first=T0, step=STEP)  # no DDL: --tables says it
    hint = parse_ddl(create("evo.existed"))[0]  # as the table was before the tree's DDLs

    result = run_job(spark, JobOptions(source=parse_source(str(root)), checkpoint=tmp_path / "checkpoint",
                                       sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), tables=(hint,)),
                     registry=registry)

    assert result.totals.batches == 1
    assert result.totals.rows == 2 * len(MEMBERS) * 2 and result.totals.errors == 0, result.bad_input[:4]
    assert not result.bad_input and not result.dead_letters
    assert not [w for w in result.totals.warnings if "members" in w], result.totals.warnings

    for name, truth in (("created", created), ("existed", existed)):
        subject = f"evo_{name}-value"
        registered = [json.loads(registry.get_version(subject, v).schema) for v in registry.get_versions(subject)]
        # one registered version per table version, in order, each with its own DDL's members
        assert [allowed_lists(s) for s in registered] == [{"e": ",".join(e), "s": ",".join(s)} for e, s in MEMBERS]
        assert [allowed_lists(s) for s in registered] == [
            {c.name: ",".join(c.elements) for c in t.columns if c.elements} for t in truth]
        version_of = {registry.get_version(subject, v).id: i
                      for i, v in enumerate(registry.get_versions(subject))}
        seen = {}
        for record in read_file_sink(tmp_path / "out", f"evo_{name}"):
            assert record.value is not None
            schema_id, body = unframe(record.value)
            writer = fastavro.parse_schema(registered[version_of[schema_id]])
            value = fastavro.schemaless_reader(io.BytesIO(body), writer, writer)
            seen[value["id"]] = (version_of[schema_id], value["e"], value["s"])
        expected = {row["id"]: (i, row["e"], row["s"]) for i in range(len(MEMBERS)) for row in rows_of(i)}
        assert seen == expected, name  # every row with its own version's schema and the member MySQL holds
