"""Wire bytes: TiCDC's published vectors, framing, tombstones, and property-based round trips."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.encoding.plan import EncodingPlan, frame, unframe
from avro_registry_sink.errors import EncodingError
from avro_registry_sink.model import Op
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from tests.support.depth import examples
from tests.support.reference_encoder import RowEncoder, physical_time


def plan_for(table: TableDef, options: EncodingOptions = EncodingOptions(), key_id: int = 1, value_id: int = 2) -> EncodingPlan:
    return EncodingPlan.from_schemas(derive_schemas(table, options), key_id, value_id)


def decode(schema_json: str, data: bytes) -> dict:
    _, body = unframe(data)
    return fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(json.loads(schema_json)))


def test_envelope_vector():
    # TiCDC TestAvroEnvelope: id 8, record {"id": 7} -> 00 00000008 0e
    t = TableDef(schema_name="s", table="t", columns=(ColumnDef(name="id", type=T.INT, nullable=False),), primary_key=("id",))
    key, value = RowEncoder(plan_for(t, key_id=8, value_id=8)).encode("insert", {"id": 7})
    assert key.hex() == "00000000080e" == value.hex()
    assert frame(8, b"\x0e").hex() == "00000000080e"
    assert unframe(bytes.fromhex("00000000080e")) == (8, b"\x0e")


def test_unframe_rejects_other_magic():
    with pytest.raises(EncodingError, match="magic byte 0"):
        unframe(b"\x01\x00\x00\x00\x01")


def test_commit_physical_time_vector():
    assert physical_time(417318403368288260) == 1591943372224


def test_extension_values_and_tombstone():
    t = TableDef(
        schema_name="s", table="t", primary_key=("id",),
        columns=(ColumnDef(name="id", type=T.INT, nullable=False), ColumnDef(name="v", type=T.VARCHAR)),
    )
    plan = plan_for(t, EncodingOptions(enable_tidb_extension=True))
    enc = RowEncoder(plan)
    _, insert = enc.encode("insert", {"id": 1, "v": "x"}, commit_ts=417318403368288260)
    _, update = enc.encode(Op.UPDATE, {"id": 1, "v": None}, commit_ts=417318403368288260)
    key, delete = enc.encode("d", {"id": 1, "v": "x"}, commit_ts=5)
    assert decode(plan.value_schema_json, insert) == {
        "id": 1, "v": "x", "_tidb_op": "c", "_tidb_commit_ts": 417318403368288260,
        "_tidb_commit_physical_time": 1591943372224,
    }
    assert decode(plan.value_schema_json, update)["_tidb_op"] == "u"
    assert delete is None
    assert decode(plan.key_schema_json, key) == {"id": 1}
    assert unframe(key)[0] == 1 and unframe(insert)[0] == 2


def test_decimal_bytes_are_ticdcs_not_fastavros():
    t = TableDef(
        schema_name="s", table="t", primary_key=("id",),
        columns=(ColumnDef(name="id", type=T.INT, nullable=False), ColumnDef(name="d", type=T.DECIMAL, precision=10, scale=0, nullable=False)),
    )
    plan = plan_for(t)
    _, value = RowEncoder(plan).encode("insert", {"id": 0, "d": "-128"})
    # body: zigzag(0)=00, bytes length 1 -> 02, 0x80
    assert value[5:].hex() == "000280"
    assert decode(plan.value_schema_json, value)["d"] == Decimal("-128")


def test_row_errors_name_table_column_and_schema_id():
    t = TableDef(schema_name="s", table="t", primary_key=("id",),
                 columns=(ColumnDef(name="id", type=T.INT, nullable=False), ColumnDef(name="n", type=T.TINYINT, nullable=False)))
    enc = RowEncoder(plan_for(t, value_id=42))
    with pytest.raises(EncodingError, match=r"'n' of table s\.t .*schema id 42"):
        enc.encode("insert", {"id": 1, "n": 1000})
    with pytest.raises(EncodingError, match="NOT NULL"):
        enc.encode("insert", {"id": 1, "n": None})
    with pytest.raises(EncodingError, match="no value for column 'n'"):
        enc.encode("insert", {"id": 1})
    with pytest.raises(EncodingError, match=r"lacks.*stale"):
        enc.encode("insert", {"id": 1, "n": 1, "extra": 2})
    with pytest.raises(EncodingError, match="Unknown operation 'upsert'"):
        enc.encode("upsert", {"id": 1, "n": 1})


def test_column_names_match_case_insensitively():
    t = TableDef(schema_name="s", table="t", primary_key=("ID",), columns=(ColumnDef(name="ID", type=T.INT, nullable=False),))
    plan = plan_for(t)
    key, _ = RowEncoder(plan).encode("insert", {"id": 3})
    assert decode(plan.key_schema_json, key) == {"ID": 3}


# ---- property-based: random tables and rows round-trip through fastavro ---------------------------

INT_RANGES = {T.TINYINT: 8, T.SMALLINT: 16, T.MEDIUMINT: 24, T.INT: 32, T.BIGINT: 64}


@st.composite
def columns(draw, name):
    kind = draw(st.sampled_from(sorted(T, key=lambda x: x.value)))
    nullable = draw(st.booleans())
    kw: dict = {}
    if kind in INT_RANGES:
        kw["unsigned"] = draw(st.booleans())
    if kind is T.DECIMAL:
        p = draw(st.integers(1, 65))
        kw.update(precision=p, scale=draw(st.integers(0, min(p, 30))))
    if kind is T.BIT:
        kw["length"] = draw(st.integers(1, 64))
    if kind in (T.ENUM, T.SET):
        alphabet = "abcxyz,é' " if kind is T.ENUM else "abcxyzé' "  # MySQL forbids commas in SET members
        kw["elements"] = tuple(draw(st.lists(st.text(alphabet=alphabet, min_size=1, max_size=5), min_size=1, max_size=5, unique=True)))
    if kind in (T.BINARY, T.VARBINARY, T.TINYBLOB, T.BLOB, T.MEDIUMBLOB, T.LONGBLOB):
        kw["binary"] = True
    if kind in (T.DATETIME, T.TIMESTAMP, T.TIME):
        kw["fsp"] = draw(st.integers(0, 6))
    return ColumnDef(name=name, type=kind, nullable=nullable, **kw)


@st.composite
def values_for(draw, col: ColumnDef):
    if col.nullable and draw(st.integers(0, 4)) == 0:
        return None
    t = col.type
    if t in INT_RANGES:
        bits = INT_RANGES[t]
        if col.unsigned:
            return draw(st.integers(0, (1 << bits) - 1))
        return draw(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
    if t is T.FLOAT:
        return draw(st.floats(width=32, allow_nan=False, allow_infinity=False))
    if t is T.DOUBLE:
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    if t is T.DECIMAL:
        digits = draw(st.integers(-(10**col.precision) + 1, 10**col.precision - 1))
        text = str(abs(digits)).rjust(col.scale + 1, "0")
        if col.scale:
            text = text[: -col.scale] + "." + text[-col.scale :]
        return ("-" if digits < 0 else "") + text  # TiDB's text: exactly `scale` fraction digits
    if t is T.BIT:
        return draw(st.integers(0, (1 << col.length) - 1))
    if t is T.ENUM:
        return draw(st.sampled_from(col.elements))
    if t is T.SET:
        picked = draw(st.lists(st.sampled_from(col.elements), unique=True))
        return ",".join(e for e in col.elements if e in picked)
    if col.binary:
        return draw(st.binary(max_size=20))
    if t is T.YEAR:
        return draw(st.sampled_from([0, 1901, 2024, 2155]))
    return draw(st.text(max_size=20))


def expected_datum(col: ColumnDef, value, options: EncodingOptions):
    if value is None:
        return None
    t = col.type
    if t is T.BIGINT and col.unsigned:
        if options.bigint_unsigned_mode is BigintUnsignedMode.STRING:
            return str(value)
        return value - (1 << 64) if value >= (1 << 63) else value
    if t is T.DECIMAL:
        return Decimal(value) if options.decimal_mode is DecimalMode.PRECISE else value
    if t is T.BIT:
        return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    return value


@st.composite
def tables_and_rows(draw):
    n = draw(st.integers(1, 8))
    cols = [draw(columns(f"c{i}")) for i in range(n)]
    cols[0] = ColumnDef(name="pk", type=T.BIGINT, nullable=False)
    table = TableDef(schema_name="db", table="t", columns=tuple(cols), primary_key=("pk",))
    rows = [{c.name: draw(values_for(c)) for c in cols} for _ in range(draw(st.integers(1, 3)))]
    options = EncodingOptions(
        enable_tidb_extension=draw(st.booleans()),
        decimal_mode=draw(st.sampled_from(list(DecimalMode))),
        bigint_unsigned_mode=draw(st.sampled_from(list(BigintUnsignedMode))),
    )
    return table, rows, options


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables_and_rows(), st.integers(0, (1 << 63) - 1))
def test_round_trip_random_tables(case, commit_ts):
    table, rows, options = case
    plan = plan_for(table, options)
    enc = RowEncoder(plan)
    for row in rows:
        key, value = enc.encode("update", row, commit_ts)
        decoded = decode(plan.value_schema_json, value)
        for col in table.columns:
            got, want = decoded[col.name], expected_datum(col, row[col.name], options)
            if col.type is T.FLOAT and want is not None:
                assert got == pytest.approx(want, rel=1e-6)
            else:
                assert got == want, col
        if options.enable_tidb_extension:
            assert decoded["_tidb_op"] == "u" and decoded["_tidb_commit_physical_time"] == commit_ts >> 18
        assert decode(plan.key_schema_json, key) == {"pk": row["pk"]}


def test_an_update_of_the_handle_key_splits_into_delete_and_insert():
    from avro_registry_sink.changes import ChangeEvent, split_key_change
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

    table = TableDef(schema_name="s", table="t", primary_key=("a", "b"), columns=(
        ColumnDef(name="a", type=MySQLType.INT, nullable=False), ColumnDef(name="b", type=MySQLType.VARCHAR, length=4,
                                                                          nullable=False),
        ColumnDef(name="v", type=MySQLType.INT)))
    moved = ChangeEvent("s", "t", Op.UPDATE, 7, after={"a": 1, "B": "y", "v": 2}, before={"A": 1, "b": "x", "v": 2})
    delete, insert = split_key_change(moved, table)
    assert (delete.op, delete.before, delete.after, delete.commit_ts) == (Op.DELETE, moved.before, None, 7)
    assert (insert.op, insert.before, insert.after) == (Op.INSERT, None, moved.after)
    same_key = ChangeEvent("s", "t", Op.UPDATE, 8, after={"a": 1, "b": "x", "v": 3}, before={"a": 1, "b": "x", "v": 2})
    assert split_key_change(same_key, table) == (same_key,)
    no_before = ChangeEvent("s", "t", Op.UPDATE, 9, after={"a": 2, "b": "x"})
    assert split_key_change(no_before, table) == (no_before,)
    assert split_key_change(moved, None) == (moved,)
