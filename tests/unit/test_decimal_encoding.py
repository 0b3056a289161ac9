"""``avro-decimal-handling-mode`` is decided in one place (``typemap.mysql.decimal_encoding``, issue 36): the schema,
the value converter, the columnar encoder and the JVM stage ask it instead of reading the mode themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import avro_registry_sink
from avro_registry_sink.settings.config import DecimalMode, EncodingOptions
from avro_registry_sink.table import ColumnDef, MySQLType
from avro_registry_sink.typemap.mysql import NO_DEFAULT, avro_default, avro_type, decimal_encoding, to_avro_value

PACKAGE = Path(avro_registry_sink.__file__).parent


def _readers_of_the_mode() -> set[tuple[str, str]]:
    """(file, innermost function or ``<module>``) of every ``x.decimal_mode`` and ``DecimalMode.X`` outside
    ``settings/``, where the mode is defined and parsed."""
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST, where: str, file: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        if isinstance(node, ast.Attribute) and (
                node.attr == "decimal_mode" or (isinstance(node.value, ast.Name) and node.value.id == "DecimalMode")):
            found.add((file, where))
        for child in ast.iter_child_nodes(node):
            visit(child, where, file)

    for path in PACKAGE.rglob("*.py"):
        if path.parent.name != "settings":
            visit(ast.parse(path.read_text(encoding="utf-8")), "<module>", path.relative_to(PACKAGE).as_posix())
    return found


def test_the_decimal_mode_is_read_in_one_function():
    assert _readers_of_the_mode() == {("typemap/mysql.py", "decimal_encoding")}


@pytest.mark.parametrize("mode", list(DecimalMode))
@pytest.mark.parametrize("declared", [(None, None), (12, 3)])
def test_schema_value_and_default_follow_decimal_encoding(mode: DecimalMode, declared: tuple[int | None, int | None]):
    precision, scale = declared
    col = ColumnDef(name="amount", type=MySQLType.DECIMAL, precision=precision, scale=scale, default="-1.5")
    options = EncodingOptions(decimal_mode=mode)
    decimal = decimal_encoding(col, options)
    assert decimal == (mode is DecimalMode.STRING, precision or 10, scale or 0)
    schema = avro_type(col, options)
    value = to_avro_value(col, "-1.5", options)
    if decimal.as_text:
        assert schema["type"] == "string" and "logicalType" not in schema
        assert value == "-1.5" and avro_default(col, options) == "-1.5"
    else:
        assert (schema["logicalType"], schema["precision"], schema["scale"]) == ("decimal", decimal.precision,
                                                                                  decimal.scale)
        unscaled = -15 * 10 ** decimal.scale // 10  # floor(-1.5 * 10**scale)
        assert value == unscaled.to_bytes(len(value), "big", signed=True)
        assert avro_default(col, options) is NO_DEFAULT
