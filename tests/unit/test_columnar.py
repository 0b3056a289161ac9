"""The columnar encoder writes the reference encoder's bytes, for random tables and rows, and fails the same way."""

from __future__ import annotations

import io
import json
import string
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from unittest.mock import patch

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.encoding import columnar
from avro_registry_sink.encoding.columnar import ColumnarEncoder, parse_ops
from avro_registry_sink.encoding.plan import EncodingPlan, unframe
from avro_registry_sink.errors import EncodingError
from avro_registry_sink.model import Op
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from tests.support.depth import examples
from tests.support.reference_encoder import RowEncoder

# --------------------------------------------------------------------------------------------------
# Strategies: a column kind = (column definition, value strategy, Arrow types the value can arrive as)

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
EDGE_TEXT = st.sampled_from(["", " ", "é", "日本語", "a,b", "x" * 12, "y" * 13, "🙂" * 4, "\x00"])


def _texts() -> st.SearchStrategy[str]:
    return st.one_of(TEXT, EDGE_TEXT)


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    edges = sorted({low, low + 1, -1 if low < 0 else low, 0 if low <= 0 else low, high - 1, high, 127, 128, 255, 256})
    return st.one_of(st.integers(low, high), st.sampled_from([e for e in edges if low <= e <= high]))


@st.composite
def _decimal_text(draw: Any, precision: int, scale: int) -> str:
    whole = draw(st.integers(0, precision - scale))
    digits = draw(st.text(alphabet=string.digits, min_size=whole, max_size=whole))
    frac_len = draw(st.integers(0, scale)) if draw(st.booleans()) else scale
    frac = draw(st.text(alphabet=string.digits, min_size=frac_len, max_size=frac_len))
    sign = "-" if draw(st.booleans()) else ""
    text = sign + (digits or "0") + ("." + frac if frac else "")
    if draw(st.integers(0, 9)) == 0:  # the widest value of the column
        text = sign + "9" * (precision - scale) + ("." + "9" * scale if scale else "")
    return text


ColumnKind = tuple[ColumnDef, st.SearchStrategy[Any], list[pa.DataType], Callable[[Any, pa.DataType], Any]]


def _same(value: Any, arrow_type: pa.DataType) -> Any:
    return value


def _to_arrow_int(value: Any, arrow_type: pa.DataType) -> Any:
    if pa.types.is_string(arrow_type):
        return str(value)
    if pa.types.is_decimal(arrow_type):
        return Decimal(value)
    return value


def _to_arrow_float(value: float, arrow_type: pa.DataType) -> float:
    if pa.types.is_float32(arrow_type):
        with np.errstate(over="ignore"):
            return float(np.float32(value))
    return value


INT_TYPES = {
    T.TINYINT: 8, T.SMALLINT: 16, T.MEDIUMINT: 24, T.INT: 32, T.BIGINT: 64,
}


@st.composite
def column_kinds(draw: Any, name: str) -> ColumnKind:
    kind = draw(st.sampled_from([
        "int", "int", "bigint_unsigned", "float", "double", "decimal", "decimal", "bit", "text", "blob",
        "enum", "set", "json", "temporal", "year", "vector",
    ]))
    if kind == "int":
        mysql = draw(st.sampled_from(list(INT_TYPES)))
        bits = INT_TYPES[mysql]
        unsigned = draw(st.booleans())
        low, high = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if mysql is T.BIGINT and unsigned:
            unsigned, low, high = False, -(1 << 63), (1 << 63) - 1
        types = [pa.int64(), pa.string(), pa.decimal128(20, 0)]
        for t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()):
            info = np.iinfo(t.to_pandas_dtype())
            if info.min <= low and high <= info.max:
                types.append(t)
        col = ColumnDef(name=name, type=mysql, unsigned=unsigned)
        return col, _ints(low, high), types, _to_arrow_int
    if kind == "bigint_unsigned":
        col = ColumnDef(name=name, type=T.BIGINT, unsigned=True)
        values = st.one_of(_ints(0, (1 << 64) - 1), st.sampled_from([(1 << 63) - 1, 1 << 63, (1 << 64) - 1]))
        return col, values, [pa.uint64(), pa.decimal128(20, 0), pa.string()], _to_arrow_int
    if kind in ("float", "double"):
        col = ColumnDef(name=name, type=T.FLOAT if kind == "float" else T.DOUBLE)
        values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32 if kind == "float" else 64),
                           st.sampled_from([0.0, -0.0, 1e300, -3.5e38, 3.4028235e38]))
        types = [pa.float64()] + ([pa.float32()] if kind == "float" else [])
        return col, values, types, _to_arrow_float
    if kind == "decimal":
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(precision, 30)))
        col = ColumnDef(name=name, type=T.DECIMAL, precision=precision, scale=scale)
        arrow_dec = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        return col, _decimal_text(precision, scale), [pa.string(), arrow_dec], \
            lambda v, t: v if pa.types.is_string(t) else Decimal(v)
    if kind == "bit":
        width = draw(st.integers(1, 64))
        col = ColumnDef(name=name, type=T.BIT, length=width)
        types = [pa.uint64()] + ([pa.int64()] if width < 64 else [])
        return col, _ints(0, (1 << width) - 1), types, _same
    if kind == "text":
        mysql = draw(st.sampled_from([T.CHAR, T.VARCHAR, T.TEXT, T.LONGTEXT]))
        col = ColumnDef(name=name, type=mysql)
        return col, _texts(), [pa.string(), pa.large_string()], _same
    if kind == "blob":
        mysql = draw(st.sampled_from([T.BINARY, T.VARBINARY, T.BLOB]))
        col = ColumnDef(name=name, type=mysql, binary=True)
        values = st.one_of(st.binary(max_size=40), st.sampled_from([b"", b"\x00", b"\xff" * 13]))
        return col, values, [pa.binary(), pa.large_binary()], _same
    if kind == "enum":
        elements = tuple(draw(st.lists(st.one_of(TEXT.filter(bool), st.sampled_from(["a,b", "é", "x"])),
                                       min_size=1, max_size=5, unique=True)))
        col = ColumnDef(name=name, type=T.ENUM, elements=elements)
        as_index = draw(st.booleans())
        if as_index:
            return col, st.integers(1, len(elements)), [pa.int64(), pa.int8()], _same
        return col, st.sampled_from(elements), [pa.string()], _same
    if kind == "set":
        elements = tuple(draw(st.lists(st.text(alphabet="abcé日 ", min_size=1, max_size=4), min_size=1, max_size=6,
                                       unique=True)))
        col = ColumnDef(name=name, type=T.SET, elements=elements)
        if draw(st.booleans()):
            return col, st.integers(0, (1 << len(elements)) - 1), [pa.int64()], _same
        subsets = st.lists(st.sampled_from(elements), unique=True).map(",".join)
        return col, subsets, [pa.string()], _same
    if kind == "json":
        return ColumnDef(name=name, type=T.JSON), st.sampled_from(['{"a": 1}', "[]", "null", '"é"']), [pa.string()], _same
    if kind == "temporal":
        mysql = draw(st.sampled_from([T.DATE, T.DATETIME, T.TIMESTAMP, T.TIME]))
        values = st.sampled_from(["2020-01-01", "2020-01-01 10:00:00", "2020-01-01 10:00:00.123456", "-838:59:59", ""])
        return ColumnDef(name=name, type=mysql, fsp=6), values, [pa.string()], _same
    if kind == "year":
        return ColumnDef(name=name, type=T.YEAR), st.sampled_from([0, 1901, 2000, 2155]), [pa.int16(), pa.int64()], _same
    return ColumnDef(name=name, type=T.VECTOR), st.sampled_from(["[1,2.5]", "[]"]), [pa.string()], _same


DEFAULTS: dict[str, str | bytes] = {
    "INT": "7", "FLOAT": "1.5", "DOUBLE": "2.5", "BIT": b"\x01", "CHAR": "d", "VARCHAR": "déf", "TEXT": "t",
    "LONGTEXT": "t", "BINARY": b"\x00", "VARBINARY": b"b", "BLOB": b"", "DATE": "2020-01-01",
    "DATETIME": "2020-01-01 00:00:00", "TIMESTAMP": "2020-01-01 00:00:00", "TIME": "10:00:00", "YEAR": "2000",
    "JSON": "{}", "VECTOR": "[1]", "DECIMAL": "1.5",
}


def _default_for(col: ColumnDef) -> str | bytes | None:
    if col.type in (T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT):
        return "7"
    if col.type is T.ENUM:
        return col.elements[0]
    if col.type is T.SET:
        return col.elements[0]
    return DEFAULTS.get(col.type.value)


@st.composite
def scenarios(draw: Any) -> tuple[EncodingPlan, pa.RecordBatch, list[str], list[int]]:
    width = draw(st.integers(1, 7))
    columns: list[ColumnDef] = []
    value_strategies = []
    arrow_types = []
    adapters = []
    key_count = draw(st.integers(1, min(2, width)))
    for i in range(width):
        col, values, types, adapt = draw(column_kinds(f"c{i}"))
        is_key = i < key_count
        nullable = False if is_key else draw(st.booleans())
        default = None
        if (nullable and draw(st.booleans())) or (not nullable and not is_key and draw(st.integers(0, 3)) == 0):
            default = _default_for(col)
        col = col.model_copy(update={"nullable": nullable, "default": default})
        columns.append(col)
        value_strategies.append(values if not nullable else st.one_of(st.none(), values))
        arrow_types.append(draw(st.sampled_from(types)))
        adapters.append(adapt)
    names = [c.name for c in columns]
    if draw(st.booleans()):  # column names are case-insensitive
        names = [n.upper() if draw(st.booleans()) else n for n in names]
    table = TableDef(schema_name="db", table="t", columns=tuple(columns), primary_key=tuple(c.name for c in columns[:key_count]))
    options = EncodingOptions(
        enable_tidb_extension=draw(st.booleans()),
        decimal_mode=draw(st.sampled_from(list(DecimalMode))),
        bigint_unsigned_mode=draw(st.sampled_from(list(BigintUnsignedMode))),
    )
    if options.decimal_mode is DecimalMode.STRING:
        # The reference quantizes Decimal objects under Python's 28-digit default context and raises
        # InvalidOperation above that (test_wide_decimals_in_string_mode); keep Arrow decimals within it.
        for i, col in enumerate(columns):
            if col.type is T.DECIMAL and pa.types.is_decimal(arrow_types[i]) and (col.precision or 10) > 28:
                arrow_types[i] = pa.string()
    plan = EncodingPlan.from_schemas(derive_schemas(table, options), draw(st.integers(0, 2**31 - 1)), draw(st.integers(0, 2**31 - 1)))
    rows = draw(st.integers(0, 25))
    arrays = []
    for values, arrow_type, adapt in zip(value_strategies, arrow_types, adapters, strict=False):
        raw = draw(st.lists(values, min_size=rows, max_size=rows))
        arrays.append(pa.array([None if v is None else adapt(v, arrow_type) for v in raw], arrow_type))
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    ops = draw(st.lists(st.sampled_from(["insert", "update", "delete", "c", "u", "d", "I", "U", "D", "INSERT"]),
                        min_size=rows, max_size=rows))
    ts = draw(st.lists(st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 417318403368288260, 2**63 - 1])),
                       min_size=rows, max_size=rows))
    return plan, batch, ops, ts


def reference(plan: EncodingPlan, batch: pa.RecordBatch, ops: list[str], ts: list[int]) -> tuple[list, list]:
    encoder = RowEncoder(plan)
    keys, values = [], []
    for row, op, commit_ts in zip(batch.to_pylist(), ops, ts, strict=True):
        k, v = encoder.encode(op, row, commit_ts)
        keys.append(k)
        values.append(v)
    return keys, values


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), chunk=st.sampled_from([3, 7, columnar.CHUNK_ROWS]))
def test_columnar_bytes_equal_the_reference(scenario, chunk):
    plan, batch, ops, ts = scenario
    expected_keys, expected_values = reference(plan, batch, ops, ts)
    with patch.object(columnar, "CHUNK_ROWS", chunk):
        keys, values = ColumnarEncoder(plan).encode(batch, ops=pa.array(ops), commit_ts=pa.array(ts, pa.int64()))
    assert isinstance(keys, pa.BinaryArray) and isinstance(values, pa.BinaryArray)
    keys.validate(full=True)
    values.validate(full=True)
    assert keys.to_pylist() == expected_keys
    assert values.to_pylist() == expected_values


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios())
def test_sliced_and_chunked_inputs_encode_the_same(scenario):
    plan, batch, ops, ts = scenario
    if batch.num_rows < 2:
        return
    table = pa.Table.from_batches([batch.slice(0, 1), batch.slice(1)])  # chunked columns, non-zero offsets
    expected = reference(plan, batch, ops, ts)
    keys, values = ColumnarEncoder(plan).encode(table, ops=pa.chunked_array([ops[:1], ops[1:]]),
                                                commit_ts=pa.array(ts, pa.int64()))
    assert (keys.to_pylist(), values.to_pylist()) == expected


# --------------------------------------------------------------------------------------------------
# Fixed cases


def _table(*columns: ColumnDef, key: tuple[str, ...] = ("id",)) -> TableDef:
    return TableDef(schema_name="shop", table="orders", columns=columns, primary_key=key)


ID = ColumnDef(name="id", type=T.BIGINT, nullable=False)


def _plan(table: TableDef, options: EncodingOptions = EncodingOptions()) -> EncodingPlan:
    return EncodingPlan.from_schemas(derive_schemas(table, options), 41, 42)


def test_extremes_of_every_integer_and_decimal_width():
    table = _table(
        ID,
        ColumnDef(name="u", type=T.BIGINT, unsigned=True, nullable=False),
        ColumnDef(name="d", type=T.DECIMAL, precision=65, scale=30, nullable=False),
        ColumnDef(name="n", type=T.DECIMAL, precision=38, scale=0),
        ColumnDef(name="b", type=T.BIT, length=64),
    )
    plan = _plan(table)
    big = "-" + "9" * 35 + "." + "9" * 30
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array([-(1 << 63), (1 << 63) - 1, 0, -1]),
        "u": pa.array([(1 << 64) - 1, 1 << 63, 0, (1 << 63) - 1], pa.uint64()),
        "d": pa.array([big, "0", "-0.000000000000000000000000000001", "12345678901234567890.5"]),
        "n": pa.array(["-" + "9" * 38, "9" * 38, None, "-128"]),
        "b": pa.array([(1 << 64) - 1, 0, 1 << 63, 255], pa.uint64()),
    })
    keys, values = ColumnarEncoder(plan).encode(batch)
    assert (keys.to_pylist(), values.to_pylist()) == reference(plan, batch, ["insert"] * 4, [0] * 4)


def test_decimal_text_with_more_digits_than_the_scale_is_floored_like_the_reference():
    table = _table(ID, ColumnDef(name="d", type=T.DECIMAL, precision=10, scale=2, nullable=False))
    plan = _plan(table)
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 3], "d": ["1.239", "-1.231", " 7.5 "]})
    _keys, values = ColumnarEncoder(plan).encode(batch)
    assert values.to_pylist() == reference(plan, batch, ["c"] * 3, [0] * 3)[1]


def test_wide_decimals_in_string_mode_print_like_quantize():
    table = _table(ID, ColumnDef(name="d", type=T.DECIMAL, precision=40, scale=5, nullable=False))
    plan = _plan(table, EncodingOptions(decimal_mode=DecimalMode.STRING))
    values = [Decimal("-" + "9" * 35 + ".12345"), Decimal("0.00001"), Decimal("0"), Decimal("-0.5")]
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 3, 4], "d": pa.array(values, pa.decimal256(40, 5))})
    _, encoded = ColumnarEncoder(plan).encode(batch)
    schema = fastavro.parse_schema(json.loads(plan.value_schema_json))
    decoded = [fastavro.schemaless_reader(io.BytesIO(unframe(v)[1]), schema)["d"] for v in encoded.to_pylist()]
    assert decoded == ["-" + "9" * 35 + ".12345", "0.00001", "0.00000", "-0.50000"]


def test_tombstones_and_extension_fields_decode():
    table = _table(ID, ColumnDef(name="v", type=T.VARCHAR))
    plan = _plan(table, EncodingOptions(enable_tidb_extension=True))
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 3], "v": ["a", None, "c"]})
    keys, values = ColumnarEncoder(plan).encode(batch, ops=pa.array(["c", "u", "d"]),
                                                commit_ts=pa.array([417318403368288260, 5, 6]))
    assert values.null_count == 1 and values[2].as_py() is None
    schema = fastavro.parse_schema(json.loads(plan.value_schema_json))
    schema_id, body = unframe(values[0].as_py())
    assert schema_id == 42
    assert fastavro.schemaless_reader(io.BytesIO(body), schema) == {
        "id": 1, "v": "a", "_tidb_op": "c", "_tidb_commit_ts": 417318403368288260,
        "_tidb_commit_physical_time": 1591943372224,
    }
    assert unframe(keys[2].as_py()) == (41, b"\x06")


def test_delete_rows_only_need_valid_key_columns():
    table = _table(ID, ColumnDef(name="q", type=T.TINYINT, nullable=False))
    plan = _plan(table)
    batch = pa.RecordBatch.from_pydict({"id": [1, 2], "q": [1000, None]})  # invalid, but only in deletes
    keys, values = ColumnarEncoder(plan).encode(batch, ops=pa.array(["d", "D"]))
    assert values.to_pylist() == [None, None]
    assert keys.to_pylist() == reference(plan, batch, ["d", "d"], [0, 0])[0]


def test_empty_batch():
    plan = _plan(_table(ID))
    keys, values = ColumnarEncoder(plan).encode(pa.RecordBatch.from_pydict({"id": pa.array([], pa.int64())}))
    assert len(keys) == len(values) == 0


def test_parse_ops():
    assert parse_ops(pa.array(["insert", "c", "I", "Update", "U", "delete", "D", None])).tolist() == [0, 0, 0, 1, 1, 2, 2, 0]


# --------------------------------------------------------------------------------------------------
# Errors: the reference's message, plus the schema id and the first bad row of the batch


def _error(plan: EncodingPlan, batch: pa.RecordBatch, **kwargs: Any) -> EncodingError:
    with pytest.raises(EncodingError) as info:
        ColumnarEncoder(plan).encode(batch, **kwargs)
    return info.value


def _reference_error(plan: EncodingPlan, batch: pa.RecordBatch, ops: list[str] | None = None) -> EncodingError:
    encoder = RowEncoder(plan)
    with pytest.raises(EncodingError) as info:
        for row, op in zip(batch.to_pylist(), ops or ["insert"] * batch.num_rows, strict=False):
            encoder.encode(op, row)
    return info.value


def test_out_of_range_integer_names_table_column_schema_id_row_and_value():
    plan = _plan(_table(ID, ColumnDef(name="qty", type=T.TINYINT, unsigned=True, nullable=False)))
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 3], "qty": [1, 256, -1]})
    err = _error(plan, batch)
    assert str(err) == (
        "Cannot encode value 256 for column 'qty' of table shop.orders (tinyint unsigned): out of range 0..255. "
        "(schema id 42, batch row 1)"
    )
    assert (err.table, err.column, err.schema_id, err.row) == ("shop.orders", "qty", 42, 1)
    assert _reference_error(plan, batch).message in str(err).replace(", batch row 1", "")


def test_not_null_violation():
    plan = _plan(_table(ID, ColumnDef(name="name", type=T.VARCHAR, nullable=False)))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2], "name": ["a", None]}))
    assert str(err) == "Column 'name' of table shop.orders is NOT NULL but the row has NULL (schema id 42, batch row 1)."


def test_unknown_enum_member_lists_the_members():
    plan = _plan(_table(ID, ColumnDef(name="e", type=T.ENUM, elements=("red", "green"))))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2], "e": ["red", "blue"]}))
    assert "not a member; allowed: 'red', 'green'" in str(err) and "batch row 1" in str(err)


def test_unknown_set_member_and_bitmask():
    plan = _plan(_table(ID, ColumnDef(name="s", type=T.SET, elements=("a", "b"))))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2], "s": ["a,b", "a,c"]}))
    assert "unknown members 'c'" in str(err) and "batch row 1" in str(err)
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1], "s": [4]}))
    assert "bits beyond its 2 members" in str(err)


def test_decimal_with_too_many_digits():
    plan = _plan(_table(ID, ColumnDef(name="d", type=T.DECIMAL, precision=5, scale=2)))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2], "d": ["999.99", "-1000.00"]}))
    assert "more than 5 digits at scale 2" in str(err) and "batch row 1" in str(err)
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1], "d": ["abc"]}))
    assert "expected a decimal number such as '123.45'" in str(err)


def test_the_first_error_is_the_one_the_reference_raises_first():
    table = _table(ColumnDef(name="id", type=T.TINYINT, nullable=False), ColumnDef(name="a", type=T.TINYINT),
                   ColumnDef(name="b", type=T.TINYINT))
    plan = _plan(table)
    batch = pa.RecordBatch.from_pydict({"id": [1, 2, 300], "a": [1, 2, 3], "b": [1, 999, 3]})
    assert "batch row 1" in str(_error(plan, batch))  # b of row 1 comes before the key of row 2
    assert "'b'" in str(_error(plan, batch)) and _reference_error(plan, batch).column == "b"
    batch = pa.RecordBatch.from_pydict({"id": [1, 300], "a": [999, 2], "b": [1, 999]})
    assert _error(plan, batch).column == "a" == _reference_error(plan, batch).column


def test_unknown_and_missing_columns():
    plan = _plan(_table(ID, ColumnDef(name="v", type=T.INT)))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1], "v": [1], "extra": [1]}))
    assert "has columns 'extra' that its definition (version 0) lacks" in str(err)
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1]}))
    assert "has no column 'v' (schema id 42)" in str(err)
    _keys, values = ColumnarEncoder(plan).encode(pa.RecordBatch.from_pydict({"ID": [1]}), ops=pa.array(["d"]))
    assert values.to_pylist() == [None]  # a delete needs only the key


def test_unknown_operation():
    plan = _plan(_table(ID))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2]}), ops=pa.array(["c", "upsert"]))
    assert "Unknown operation 'upsert'" in str(err) and "batch row 1" in str(err)


def test_bad_values_in_fallback_paths_report_the_row():
    plan = _plan(_table(ID, ColumnDef(name="n", type=T.INT)))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1, 2, 3], "n": [" 5", "6", "x"]}))
    assert "Cannot encode value 'x' for column 'n'" in str(err) and "batch row 2" in str(err)


def test_errors_pickle():
    import pickle

    plan = _plan(_table(ID, ColumnDef(name="qty", type=T.TINYINT)))
    err = _error(plan, pa.RecordBatch.from_pydict({"id": [1], "qty": [1000]}))
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.row == 0


@pytest.mark.parametrize("ops", [None, ["c", "d", "u"]])
def test_output_is_plain_binary_with_validity(ops):
    plan = _plan(_table(ID))
    keys, values = ColumnarEncoder(plan).encode(pa.RecordBatch.from_pydict({"id": [1, 2, 3]}),
                                                ops=pa.array(ops) if ops else None)
    assert keys.type == values.type == pa.binary()
    assert values.null_count == (1 if ops else 0)
    assert Op.parse("d") is Op.DELETE
