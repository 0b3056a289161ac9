"""Golden ``.avsc`` files for the example tables in ``schemas/``.

Each file holds the exact schema text this project registers (TiCDC's Go-compact JSON), one per table,
subject kind and option set, under ``schemas/golden/<options>/<schema>.<table>-<key|value>.avsc``.
A change in derivation shows up as a diff of these files; regenerate them deliberately with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_golden_avsc.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import encoding_options
from avro_registry_sink.tabledef import parse_ddl

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
GOLDEN = SCHEMAS / "golden"
OPTION_SETS = {
    "default": {},
    "string-extension": {
        "enable-tidb-extension": "true",
        "avro-decimal-handling-mode": "string",
        "avro-bigint-unsigned-handling-mode": "string",
    },
}


def derived() -> dict[str, str]:
    """Relative golden path -> schema text, for every example table and option set."""
    files: dict[str, str] = {}
    for sql in sorted(SCHEMAS.glob("*.sql")):
        for table in parse_ddl(sql.read_text()):
            for name, values in OPTION_SETS.items():
                schemas = derive_schemas(table, encoding_options(values))
                stem = f"{name}/{table.schema_name}.{table.table}"
                files[f"{stem}-key.avsc"] = schemas.key_json
                files[f"{stem}-value.avsc"] = schemas.value_json
    return files


def test_golden_files_match_the_derived_schemas() -> None:
    expected = derived()
    if os.environ.get("UPDATE_GOLDEN"):
        for old in GOLDEN.glob("*/*.avsc"):
            old.unlink()
        for rel, text in expected.items():
            (GOLDEN / rel).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / rel).write_text(text + "\n")
    on_disk = {str(p.relative_to(GOLDEN)): p.read_text() for p in GOLDEN.glob("*/*.avsc")}
    assert sorted(on_disk) == sorted(expected), "golden files and example tables differ; see module docstring"
    for rel, text in expected.items():
        assert on_disk[rel] == text + "\n", f"{rel} differs from the derived schema"


@pytest.mark.parametrize("rel", sorted(derived()))
def test_golden_files_are_valid_avro(rel: str) -> None:
    import fastavro

    schema = json.loads((GOLDEN / rel).read_text())
    fastavro.parse_schema(schema)
    assert schema["type"] == "record" and schema["namespace"].startswith("default.")


def test_decimal_defaults_are_tidbs_literal_not_padded_to_the_scale() -> None:
    """TiDB stores ``DEFAULT 1.5`` on DECIMAL(10,2) as "1.5" (and ``DEFAULT 0`` as "0"); TiCDC copies that
    text into the schema, where it shows in string mode (precise DECIMAL columns carry no default)."""
    golden = GOLDEN / "string-extension" / "defaults.literals-value.avsc"
    fields = {f["name"]: f for f in json.loads(golden.read_text())["fields"]}
    expected = {"price": "1.5", "zero": "0", "padded": "1.50", "quoted": "2.25", "fraction": "0.5",
                "negative": "-0.5", "exponent": "1000", "flag": "1"}
    assert {name: fields[name]["default"] for name in expected} == expected
    assert fields["code"]["default"] == "YWIAAA=="  # BINARY(4) 'ab': padded with zero bytes, base64
    precise = {f["name"]: f for f in json.loads((GOLDEN / "default" / "defaults.literals-value.avsc").read_text())["fields"]}
    assert "default" not in precise["price"] and precise["fraction"]["default"] is None
