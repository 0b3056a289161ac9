"""A corpus of schema changes of one table: breaking ones (the registry's BACKWARD check refuses the new value or
key schema) and compatible ones, each as the DDL a user runs upstream.

Every case starts from :data:`BASE` and applies its ``ddl`` (``ALTER TABLE`` statements, or ``DROP TABLE`` and a
new ``CREATE TABLE``); :func:`versions` gives both table definitions and :func:`schemas` both schemas. ``kinds`` are
the change kinds the field diff must show (``avro_registry_sink.history.diff``).
"""

from __future__ import annotations

from dataclasses import dataclass

from avro_registry_sink.schema.builder import TableSchemas, derive_schemas
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl

BASE = """CREATE TABLE shop.items (
  id INT NOT NULL PRIMARY KEY,
  qty INT NOT NULL,
  big BIGINT NOT NULL,
  price DECIMAL(10,2) NOT NULL,
  name VARCHAR(32) NOT NULL,
  note VARCHAR(64),
  code VARCHAR(10),
  ratio DOUBLE,
  u INT UNSIGNED NOT NULL,
  kind ENUM('a','b') NOT NULL DEFAULT 'a',
  flag TINYINT NOT NULL DEFAULT 1
)"""

#: A row of the base table that every case's ALTERs must carry over downstream (as column -> SQL literal).
BASE_ROW = {"id": "1", "qty": "5", "big": "7", "price": "12.50", "name": "'pen'", "note": "NULL", "code": "'42'",
            "ratio": "0.5", "u": "3", "kind": "'a'", "flag": "1"}


@dataclass(frozen=True)
class SchemaChange:
    name: str
    ddl: str
    breaking: bool
    kinds: tuple[str, ...]
    #: whether the registry's BACKWARD check refuses it, where that is not ``breaking`` (Avro's checker compares no
    #: logical types: a rescaled decimal passes, and its bytes then mean other numbers)
    registry_refuses: bool | None = None

    @property
    def refused(self) -> bool:
        return self.breaking if self.registry_refuses is None else self.registry_refuses


BREAKING = (
    SchemaChange("int-to-varchar", "ALTER TABLE shop.items MODIFY qty VARCHAR(20) NOT NULL", True,
                 ("type", "connect.parameters")),
    SchemaChange("not-null-added-without-default", "ALTER TABLE shop.items ADD COLUMN stock INT NOT NULL", True,
                 ("added",)),
    SchemaChange("not-null-text-added-without-default",
                 "ALTER TABLE shop.items ADD COLUMN sku VARCHAR(16) NOT NULL AFTER name", True, ("added",)),
    SchemaChange("rename-not-null", "ALTER TABLE shop.items RENAME COLUMN name TO title", True, ("renamed",)),
    SchemaChange("bigint-narrowed", "ALTER TABLE shop.items MODIFY big INT NOT NULL", True,
                 ("type", "connect.parameters")),
    SchemaChange("decimal-rescaled", "ALTER TABLE shop.items MODIFY price DECIMAL(12,4) NOT NULL", True, ("type",),
                 registry_refuses=False),
    SchemaChange("null-to-not-null", "ALTER TABLE shop.items MODIFY note VARCHAR(64) NOT NULL", True,
                 ("nullability", "default")),
    SchemaChange("primary-key-changed", "ALTER TABLE shop.items DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)", True,
                 ("key",)),
    SchemaChange("drop-and-recreate", "DROP TABLE shop.items; CREATE TABLE shop.items (id VARCHAR(20) NOT NULL "
                 "PRIMARY KEY, qty BIGINT NOT NULL, label TEXT)", True, ("added", "removed", "type", "connect.parameters")),
    SchemaChange("varchar-to-int", "ALTER TABLE shop.items MODIFY code INT", True, ("type", "connect.parameters")),
    SchemaChange("double-to-float", "ALTER TABLE shop.items MODIFY ratio FLOAT", True, ("type", "connect.parameters")),
    SchemaChange("unsigned-to-signed", "ALTER TABLE shop.items MODIFY u INT NOT NULL", True,
                 ("type", "connect.parameters")),
    SchemaChange("rename-and-retype", "ALTER TABLE shop.items CHANGE qty quantity BIGINT NOT NULL", True,
                 ("renamed", "type", "connect.parameters")),
    SchemaChange("bigint-to-decimal", "ALTER TABLE shop.items MODIFY big DECIMAL(20,0) NOT NULL", True,
                 ("type", "connect.parameters")),
    SchemaChange("dropped-default-added-not-null",
                 "ALTER TABLE shop.items DROP COLUMN flag, ADD COLUMN flag2 TINYINT NOT NULL", True,
                 ("added", "removed")),
)

COMPATIBLE = (
    SchemaChange("nullable-added", "ALTER TABLE shop.items ADD COLUMN memo TEXT", False, ("added",)),
    SchemaChange("not-null-added-with-default",
                 "ALTER TABLE shop.items ADD COLUMN stock INT NOT NULL DEFAULT 10", False, ("added",)),
    SchemaChange("nullable-dropped", "ALTER TABLE shop.items DROP COLUMN note", False, ("removed",)),
    SchemaChange("int-widened", "ALTER TABLE shop.items MODIFY qty BIGINT NOT NULL", False,
                 ("type", "connect.parameters")),
    SchemaChange("default-added", "ALTER TABLE shop.items MODIFY ratio DOUBLE DEFAULT 1.5", False, ("default",)),
    SchemaChange("not-null-to-null", "ALTER TABLE shop.items MODIFY name VARCHAR(32) NULL", False,
                 ("nullability", "default")),
    SchemaChange("enum-member-added", "ALTER TABLE shop.items MODIFY kind ENUM('a','b','c') NOT NULL DEFAULT 'a'",
                 False, ("connect.parameters",)),
    SchemaChange("default-changed", "ALTER TABLE shop.items ALTER COLUMN flag SET DEFAULT 2", False, ("default",)),
    SchemaChange("varchar-lengthened", "ALTER TABLE shop.items MODIFY code VARCHAR(40)", False, ()),
)

CORPUS = BREAKING + COMPATIBLE


def base_table() -> TableDef:
    return parse_ddl(BASE)[0].model_copy(update={"version": 100})


def versions(change: SchemaChange) -> tuple[TableDef, TableDef]:
    """The table before and after the change (versions 100 and 200, as TiCDC's commit ts would number them)."""
    before = base_table()
    if change.ddl.startswith("DROP TABLE"):
        after = parse_ddl(change.ddl.split(";", 1)[1])[0]
    else:
        after = apply_ddl(before, change.ddl)
    assert after is not None
    return before, after.model_copy(update={"version": 200})


def schemas(change: SchemaChange) -> tuple[TableSchemas, TableSchemas]:
    before, after = versions(change)
    return derive_schemas(before), derive_schemas(after)


def corpus_diff(change: SchemaChange):
    """The field diff of a case (value and key schemas, renames from its DDL)."""
    from avro_registry_sink.history.diff import diff_schemas, renames_in_ddl

    before, after = schemas(change)
    return diff_schemas(before.value_json, after.value_json, renames=renames_in_ddl(change.ddl),
                        key_before=before.key_json, key_after=after.key_json)
