"""A corpus of breaking DDL classes (each one table), written as a TiCDC storage tree or a canal-json changelog file.

Every class is a table ``evo.<name>`` created with version 1 rows, then changed by DDL(s) that break consumers
pinned to a major version (most of them refused by the registry's default level, BACKWARD, too; a few accepted by
it: ``registry_refuses=False``), then given version 2 rows (and rows between two DDLs, ``rows_mid``). The oracle
is written by hand, MySQL's values: what a consumer pinned to major 1, 2 (and 3) must see for every row (by id),
after the migration rules ran. The key of every class is ``id`` except ``pk_change``, whose key breaks (its value
does not).

Classes: the 15 first ones (one breaking change each); a DROP COLUMN BACKWARD accepts; a minor version then a major
(the major's rules fill the column the minor added) and a major then a minor (the minor's own rules); three majors;
every temporal pair among DATE/DATETIME/TIMESTAMP/TIME/YEAR/BIGINT/VARCHAR (TiCDC writes DATE/DATETIME/TIMESTAMP/TIME
as text, YEAR as an int; the eight pairs MySQL converts both ways in one class of eight columns); unsigned changes;
DECIMAL and BLOB tables.

Where MySQL's ALTER refuses a value (strict mode) or takes one no record holds (TIME to DATE takes CURRENT_DATE),
the oracle is :class:`Refused`: the reader must fail that record naming the column, the value and the reason.
Every value was checked against MariaDB 10.11's ALTER (``scripts/mariadb.sh``, strict mode) where it agrees with
the MySQL 8 manual (11.2.7 "Conversion Between Date and Time Types", 11.2.4 "The YEAR Type", 12.25 "Precision
Math": DECIMAL rounds half away from zero); MySQL 8 itself is not run here (no package of it is reachable).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from avro_registry_sink.manager import TABLE_VERSION
from avro_registry_sink.model import Op
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import canal_ddl, canal_dml

SCHEMA = "evo"
#: TiCDC timestamps: the tables are created at T0, changed from T1 on (each DDL of a class one step later).
T0 = 449_640_294_064_586_752
T1 = T0 + (1_000 << 18)


@dataclass(frozen=True)
class Refused:
    """A record a reader pinned to a major must refuse: the failure names ``column``, ``value`` and ``reason``."""

    column: str
    value: str
    reason: str

    def matches(self, message: str) -> bool:
        return f"column {self.column}" in message and self.value in message and self.reason in message


@dataclass(frozen=True)
class BreakingClass:
    name: str
    create: str  # the columns after ``id BIGINT`` (and keys), inside CREATE TABLE evo.<name> (...)
    ddl: tuple[str, ...]  # the breaking DDL(s), {t} standing for the table name
    rows_v1: tuple[dict[str, Any], ...]
    rows_v2: tuple[dict[str, Any], ...]
    major1: dict[int, Any]  # id -> the row a consumer pinned to major 1 sees (or Refused)
    major2: dict[int, Any]
    breaks_key: bool = False
    what: str = ""
    rows_mid: tuple[dict[str, Any], ...] = ()  # rows of the version between two DDLs (a class with two)
    major3: dict[int, Any] | None = None  # a class of three majors
    registry_refuses: bool = True  # False: BACKWARD accepts the change (only pinned consumers would break)

    @property
    def pinned(self) -> dict[int, dict[int, Any]]:
        """major -> (id -> the row a consumer pinned to that major sees)."""
        out = {1: self.major1, 2: self.major2}
        if self.major3 is not None:
            out[3] = self.major3
        return out

    @property
    def last_major(self) -> int:
        return max(self.pinned)

    @property
    def table(self) -> str:
        return f"{SCHEMA}.{self.name}"

    def create_statement(self) -> str:
        return f"CREATE TABLE {SCHEMA}.{self.name} ({self.create})"

    def statements(self) -> list[str]:
        return [d.format(t=f"{SCHEMA}.{self.name}") for d in self.ddl]

    def eras(self) -> list[tuple[TableDef, tuple[dict[str, Any], ...]]]:
        """(table version, its rows) of every version that has rows, oldest first."""
        versions = [t for t, _ in self.versions()]
        out = [(versions[0], self.rows_v1)]
        if self.rows_mid:
            out.append((versions[1], self.rows_mid))
        out.append((versions[-1], self.rows_v2))
        return out

    @property
    def row_count(self) -> int:
        return len(self.rows_v1) + len(self.rows_mid) + len(self.rows_v2)

    def versions(self) -> list[tuple[TableDef, str]]:
        """(table at each version, the DDL that made it): version T0, then one per DDL from T1 on."""
        table = parse_ddl(self.create_statement())[0].model_copy(update={"version": T0})
        out = [(table, self.create_statement())]
        for i, statement in enumerate(self.statements()):
            version = T1 + (i << 18)
            if statement.upper().startswith("CREATE"):
                changed = parse_ddl(statement)[0]
            else:
                changed = apply_ddl(table, statement)
                assert changed is not None, statement
            table = changed.model_copy(update={"version": version})
            out.append((table, statement))
        return out


def _rows(*rows: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return rows


def _by_id(*rows: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in rows}


CORPUS: tuple[BreakingClass, ...] = (
    BreakingClass(
        "int_to_string", "id BIGINT PRIMARY KEY, a INT NOT NULL", ("ALTER TABLE {t} MODIFY a VARCHAR(20) NOT NULL",),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": -7}), _rows({"id": 3, "a": "12"}, {"id": 4, "a": "8"}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": -7}, {"id": 3, "a": 12}, {"id": 4, "a": 8}),
        major2=_by_id({"id": 1, "a": "5"}, {"id": 2, "a": "-7"}, {"id": 3, "a": "12"}, {"id": 4, "a": "8"}),
        what="type to string"),
    BreakingClass(
        "string_to_int", "id BIGINT PRIMARY KEY, c VARCHAR(20) NOT NULL", ("ALTER TABLE {t} MODIFY c BIGINT NOT NULL",),
        _rows({"id": 1, "c": "42"}, {"id": 2, "c": "-17"}), _rows({"id": 3, "c": 99}, {"id": 4, "c": -3}),
        major1=_by_id({"id": 1, "c": "42"}, {"id": 2, "c": "-17"}, {"id": 3, "c": "99"}, {"id": 4, "c": "-3"}),
        major2=_by_id({"id": 1, "c": 42}, {"id": 2, "c": -17}, {"id": 3, "c": 99}, {"id": 4, "c": -3}),
        what="type from string"),
    BreakingClass(
        "nullable_string_to_int", "id BIGINT PRIMARY KEY, c VARCHAR(20)", ("ALTER TABLE {t} MODIFY c INT",),
        _rows({"id": 1, "c": "12"}, {"id": 2, "c": None}, {"id": 5, "c": "n/a"}),
        _rows({"id": 3, "c": 3}, {"id": 4, "c": None}),
        major1=_by_id({"id": 1, "c": "12"}, {"id": 2, "c": None}, {"id": 5, "c": "n/a"}, {"id": 3, "c": "3"},
                      {"id": 4, "c": None}),
        major2={1: {"id": 1, "c": 12}, 2: {"id": 2, "c": None}, 5: Refused("c", "n/a", "is not an integer"),
                3: {"id": 3, "c": 3}, 4: {"id": 4, "c": None}},
        what="type from string, nullable: text that is no integer is refused, as MySQL's strict ALTER refuses it "
             "(error 1366), not read as null"),
    BreakingClass(
        "add_not_null", "id BIGINT PRIMARY KEY, a INT NOT NULL", ("ALTER TABLE {t} ADD COLUMN z INT NOT NULL",),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": 6}), _rows({"id": 3, "a": 7, "z": 30}, {"id": 4, "a": 8, "z": 40}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": 7}, {"id": 4, "a": 8}),
        major2=_by_id({"id": 1, "a": 5, "z": 0}, {"id": 2, "a": 6, "z": 0}, {"id": 3, "a": 7, "z": 30},
                      {"id": 4, "a": 8, "z": 40}),
        what="NOT NULL column added without a default"),
    BreakingClass(
        "rename_column", "id BIGINT PRIMARY KEY, a INT NOT NULL", ("ALTER TABLE {t} RENAME COLUMN a TO a2",),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": 6}), _rows({"id": 3, "a2": 7}, {"id": 4, "a2": 8}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": 7}, {"id": 4, "a": 8}),
        major2=_by_id({"id": 1, "a2": 5}, {"id": 2, "a2": 6}, {"id": 3, "a2": 7}, {"id": 4, "a2": 8}),
        what="column renamed (RENAME COLUMN)"),
    BreakingClass(
        "change_column", "id BIGINT PRIMARY KEY, a INT NOT NULL", ("ALTER TABLE {t} CHANGE a amount BIGINT NOT NULL",),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": 6}), _rows({"id": 3, "amount": 100}, {"id": 4, "amount": 200}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": 100}, {"id": 4, "a": 200}),
        major2=_by_id({"id": 1, "amount": 5}, {"id": 2, "amount": 6}, {"id": 3, "amount": 100},
                      {"id": 4, "amount": 200}),
        what="column renamed and widened (CHANGE)"),
    BreakingClass(
        "narrow_bigint", "id BIGINT PRIMARY KEY, big BIGINT NOT NULL", ("ALTER TABLE {t} MODIFY big INT NOT NULL",),
        _rows({"id": 1, "big": 7}, {"id": 2, "big": -9}), _rows({"id": 3, "big": 70}, {"id": 4, "big": -90}),
        major1=_by_id({"id": 1, "big": 7}, {"id": 2, "big": -9}, {"id": 3, "big": 70}, {"id": 4, "big": -90}),
        major2=_by_id({"id": 1, "big": 7}, {"id": 2, "big": -9}, {"id": 3, "big": 70}, {"id": 4, "big": -90}),
        what="BIGINT narrowed to INT"),
    BreakingClass(
        "narrow_double", "id BIGINT PRIMARY KEY, d DOUBLE NOT NULL", ("ALTER TABLE {t} MODIFY d FLOAT NOT NULL",),
        _rows({"id": 1, "d": 1.5}, {"id": 2, "d": 2.25}), _rows({"id": 3, "d": 0.5}, {"id": 4, "d": 3.75}),
        major1=_by_id({"id": 1, "d": 1.5}, {"id": 2, "d": 2.25}, {"id": 3, "d": 0.5}, {"id": 4, "d": 3.75}),
        major2=_by_id({"id": 1, "d": 1.5}, {"id": 2, "d": 2.25}, {"id": 3, "d": 0.5}, {"id": 4, "d": 3.75}),
        what="DOUBLE narrowed to FLOAT"),
    BreakingClass(
        "double_to_int", "id BIGINT PRIMARY KEY, d DOUBLE NOT NULL", ("ALTER TABLE {t} MODIFY d INT NOT NULL",),
        _rows({"id": 1, "d": 2.5}, {"id": 2, "d": -1.25}), _rows({"id": 3, "d": 4}, {"id": 4, "d": 5}),
        major1=_by_id({"id": 1, "d": 2.5}, {"id": 2, "d": -1.25}, {"id": 3, "d": 4.0}, {"id": 4, "d": 5.0}),
        major2=_by_id({"id": 1, "d": 3}, {"id": 2, "d": -1}, {"id": 3, "d": 4}, {"id": 4, "d": 5}),
        what="DOUBLE to INT (rounded half away from zero, as MySQL)"),
    BreakingClass(
        "float_to_string", "id BIGINT PRIMARY KEY, d DOUBLE NOT NULL", ("ALTER TABLE {t} MODIFY d VARCHAR(30) NOT NULL",),
        _rows({"id": 1, "d": 1.5}, {"id": 2, "d": -0.25}), _rows({"id": 3, "d": "2.5"}, {"id": 4, "d": "7"}),
        major1=_by_id({"id": 1, "d": 1.5}, {"id": 2, "d": -0.25}, {"id": 3, "d": 2.5}, {"id": 4, "d": 7}),
        major2=_by_id({"id": 1, "d": "1.5"}, {"id": 2, "d": "-0.25"}, {"id": 3, "d": "2.5"}, {"id": 4, "d": "7"}),
        what="DOUBLE to string"),
    BreakingClass(
        "null_to_not_null", "id BIGINT PRIMARY KEY, b INT", ("ALTER TABLE {t} MODIFY b INT NOT NULL",),
        _rows({"id": 1, "b": None}, {"id": 2, "b": 4}), _rows({"id": 3, "b": 6}, {"id": 4, "b": 7}),
        major1=_by_id({"id": 1, "b": None}, {"id": 2, "b": 4}, {"id": 3, "b": 6}, {"id": 4, "b": 7}),
        major2=_by_id({"id": 1, "b": 0}, {"id": 2, "b": 4}, {"id": 3, "b": 6}, {"id": 4, "b": 7}),
        what="NULL column made NOT NULL"),
    BreakingClass(
        "drop_readd", "id BIGINT PRIMARY KEY, a INT NOT NULL",
        ("ALTER TABLE {t} DROP COLUMN a, ADD COLUMN a VARCHAR(10) NOT NULL",),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": 6}), _rows({"id": 3, "a": "q"}, {"id": 4, "a": "r"}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": 0}, {"id": 4, "a": 0}),
        major2=_by_id({"id": 1, "a": ""}, {"id": 2, "a": ""}, {"id": 3, "a": "q"}, {"id": 4, "a": "r"}),
        what="column dropped and added again with another type in one DDL: no value carries over"),
    BreakingClass(
        "drop_then_readd", "id BIGINT PRIMARY KEY, a INT NOT NULL",
        ("ALTER TABLE {t} DROP COLUMN a", "ALTER TABLE {t} ADD COLUMN a VARCHAR(10) NOT NULL"),
        _rows({"id": 1, "a": 5}, {"id": 2, "a": 6}), _rows({"id": 3, "a": "q"}, {"id": 4, "a": "r"}),
        rows_mid=_rows({"id": 5}),
        # three majors: the drop breaks consumers pinned to major 1 (no default for "a": they read it back as
        # MySQL's implicit default 0), and the NOT NULL column added again without a default breaks major 2's
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 5, "a": 0}, {"id": 3, "a": 0}, {"id": 4, "a": 0}),
        major2=_by_id({"id": 1}, {"id": 2}, {"id": 5}, {"id": 3}, {"id": 4}),
        major3=_by_id({"id": 1, "a": ""}, {"id": 2, "a": ""}, {"id": 5, "a": ""}, {"id": 3, "a": "q"},
                      {"id": 4, "a": "r"}),
        what="column dropped (major 2), rows, then added again with another type (major 3)"),
    BreakingClass(
        "recreate", "id BIGINT PRIMARY KEY, a INT NOT NULL, b VARCHAR(10)",
        ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, a BIGINT NOT NULL, note VARCHAR(10) NOT NULL)",),
        _rows({"id": 1, "a": 5, "b": "x"}, {"id": 2, "a": 6, "b": None}),
        _rows({"id": 3, "a": 7, "note": "n3"}, {"id": 4, "a": 8, "note": "n4"}),
        major1=_by_id({"id": 1, "a": 5, "b": "x"}, {"id": 2, "a": 6, "b": None}, {"id": 3, "a": 7, "b": None},
                      {"id": 4, "a": 8, "b": None}),
        major2=_by_id({"id": 1, "a": 5, "note": ""}, {"id": 2, "a": 6, "note": ""}, {"id": 3, "a": 7, "note": "n3"},
                      {"id": 4, "a": 8, "note": "n4"}),
        what="table dropped and created again with other columns"),
    BreakingClass(
        "pk_change", "id BIGINT NOT NULL, region VARCHAR(8) NOT NULL, v INT NOT NULL, PRIMARY KEY (id)",
        ("ALTER TABLE {t} DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)",),
        _rows({"id": 1, "region": "eu", "v": 1}, {"id": 2, "region": "us", "v": 2}),
        _rows({"id": 3, "region": "eu", "v": 3}, {"id": 4, "region": "us", "v": 4}),
        major1=_by_id({"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}),  # keys, as a key consumer of major 1 sees them
        major2=_by_id({"id": 3, "region": "eu"}, {"id": 4, "region": "us"}),  # old keys: no region to take
        breaks_key=True, what="primary key changed (the key breaks; UPGRADE impossible)"),
    # -- a change BACKWARD accepts that breaks consumers pinned to major 1 -------------------------------------
    BreakingClass(
        "drop_column", "id BIGINT PRIMARY KEY, a INT NOT NULL, b INT NOT NULL", ("ALTER TABLE {t} DROP COLUMN a",),
        _rows({"id": 1, "a": 5, "b": 1}, {"id": 2, "a": 6, "b": 2}), _rows({"id": 3, "b": 3}, {"id": 4, "b": 4}),
        major1=_by_id({"id": 1, "a": 5, "b": 1}, {"id": 2, "a": 6, "b": 2}, {"id": 3, "a": 0, "b": 3},
                      {"id": 4, "a": 0, "b": 4}),
        major2=_by_id({"id": 1, "b": 1}, {"id": 2, "b": 2}, {"id": 3, "b": 3}, {"id": 4, "b": 4}),
        registry_refuses=False, what="NOT NULL column dropped: BACKWARD accepts it, a reader of major 1 cannot"),
    # -- minor and major versions next to each other ----------------------------------------------------------
    BreakingClass(
        "minor_then_major", "id BIGINT PRIMARY KEY, a INT NOT NULL",
        ("ALTER TABLE {t} ADD COLUMN n INT NULL", "ALTER TABLE {t} MODIFY a VARCHAR(20) NOT NULL"),
        _rows({"id": 1, "a": 5}), _rows({"id": 3, "a": "8", "n": 9}), rows_mid=_rows({"id": 2, "a": 6, "n": 7}),
        major1=_by_id({"id": 1, "a": 5, "n": None}, {"id": 2, "a": 6, "n": 7}, {"id": 3, "a": 8, "n": 9}),
        major2=_by_id({"id": 1, "a": "5", "n": None}, {"id": 2, "a": "6", "n": 7}, {"id": 3, "a": "8", "n": 9}),
        what="nullable column added (a minor of major 1, no rules), then INT to VARCHAR (major 2)"),
    BreakingClass(
        "major_then_minor", "id BIGINT PRIMARY KEY, a INT NOT NULL",
        ("ALTER TABLE {t} MODIFY a VARCHAR(20) NOT NULL", "ALTER TABLE {t} ADD COLUMN w INT NULL"),
        _rows({"id": 1, "a": 5}), _rows({"id": 3, "a": "7", "w": 8}), rows_mid=_rows({"id": 2, "a": "6"}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": 7}),
        major2=_by_id({"id": 1, "a": "5", "w": None}, {"id": 2, "a": "6", "w": None}, {"id": 3, "a": "7", "w": 8}),
        what="INT to VARCHAR (major 2), then a nullable column added (a minor of major 2 with its own rules)"),
    BreakingClass(
        "three_majors", "id BIGINT PRIMARY KEY, a INT NOT NULL",
        ("ALTER TABLE {t} CHANGE a b INT NOT NULL", "ALTER TABLE {t} MODIFY b VARCHAR(20) NOT NULL"),
        _rows({"id": 1, "a": 5}), _rows({"id": 3, "b": "-7"}), rows_mid=_rows({"id": 2, "b": 6}),
        major1=_by_id({"id": 1, "a": 5}, {"id": 2, "a": 6}, {"id": 3, "a": -7}),
        major2=_by_id({"id": 1, "b": 5}, {"id": 2, "b": 6}, {"id": 3, "b": -7}),
        major3=_by_id({"id": 1, "b": "5"}, {"id": 2, "b": "6"}, {"id": 3, "b": "-7"}),
        what="renamed (major 2), then INT to VARCHAR (major 3)"),
    # -- temporal pairs: MySQL 8's conversions (schema/migration.py's table) -----------------------------------
    BreakingClass(
        "timestamp_to_bigint", "id BIGINT PRIMARY KEY, ts TIMESTAMP NOT NULL",
        ("ALTER TABLE {t} MODIFY ts BIGINT NOT NULL",),
        _rows({"id": 1, "ts": "2024-01-01 00:00:00"}, {"id": 2, "ts": "2023-06-30 12:34:56"}),
        _rows({"id": 3, "ts": 20240102030405}, {"id": 4, "ts": 20231231235959}),
        major1=_by_id({"id": 1, "ts": "2024-01-01 00:00:00"}, {"id": 2, "ts": "2023-06-30 12:34:56"},
                      {"id": 3, "ts": "2024-01-02 03:04:05"}, {"id": 4, "ts": "2023-12-31 23:59:59"}),
        major2=_by_id({"id": 1, "ts": 20240101000000}, {"id": 2, "ts": 20230630123456},
                      {"id": 3, "ts": 20240102030405}, {"id": 4, "ts": 20231231235959}),
        what="TIMESTAMP to BIGINT (YYYYMMDDhhmmss) and back"),
    BreakingClass(
        "datetime_to_date", "id BIGINT PRIMARY KEY, dt DATETIME NOT NULL", ("ALTER TABLE {t} MODIFY dt DATE NOT NULL",),
        _rows({"id": 1, "dt": "2024-01-02 10:11:12"}, {"id": 2, "dt": "2023-12-31 23:59:59"}),
        _rows({"id": 3, "dt": "2024-02-29"}),
        major1=_by_id({"id": 1, "dt": "2024-01-02 10:11:12"}, {"id": 2, "dt": "2023-12-31 23:59:59"},
                      {"id": 3, "dt": "2024-02-29 00:00:00"}),
        major2=_by_id({"id": 1, "dt": "2024-01-02"}, {"id": 2, "dt": "2023-12-31"}, {"id": 3, "dt": "2024-02-29"}),
        registry_refuses=False, what="DATETIME to DATE (the time part dropped; string to string for Avro)"),
    BreakingClass(
        "date_to_datetime", "id BIGINT PRIMARY KEY, d DATE", ("ALTER TABLE {t} MODIFY d DATETIME",),
        _rows({"id": 1, "d": "2024-01-02"}, {"id": 2, "d": None}), _rows({"id": 3, "d": "2024-01-03 04:05:06"}),
        major1=_by_id({"id": 1, "d": "2024-01-02"}, {"id": 2, "d": None}, {"id": 3, "d": "2024-01-03"}),
        major2=_by_id({"id": 1, "d": "2024-01-02 00:00:00"}, {"id": 2, "d": None}, {"id": 3, "d": "2024-01-03 04:05:06"}),
        registry_refuses=False, what="DATE to DATETIME (midnight) and back (the date part)"),
    BreakingClass(
        "time_to_bigint", "id BIGINT PRIMARY KEY, t TIME NOT NULL", ("ALTER TABLE {t} MODIFY t BIGINT NOT NULL",),
        _rows({"id": 1, "t": "12:34:56"}, {"id": 2, "t": "-01:00:00"}), _rows({"id": 3, "t": 235959}),
        major1=_by_id({"id": 1, "t": "12:34:56"}, {"id": 2, "t": "-01:00:00"}, {"id": 3, "t": "23:59:59"}),
        major2=_by_id({"id": 1, "t": 123456}, {"id": 2, "t": -10000}, {"id": 3, "t": 235959}),
        what="TIME to BIGINT ([-]hhmmss) and back"),
    BreakingClass(
        "year_to_string", "id BIGINT PRIMARY KEY, y YEAR NOT NULL", ("ALTER TABLE {t} MODIFY y VARCHAR(4) NOT NULL",),
        _rows({"id": 1, "y": 2024}, {"id": 2, "y": 0}), _rows({"id": 3, "y": "1999"}),
        major1=_by_id({"id": 1, "y": 2024}, {"id": 2, "y": 0}, {"id": 3, "y": 1999}),
        major2=_by_id({"id": 1, "y": "2024"}, {"id": 2, "y": "0000"}, {"id": 3, "y": "1999"}),
        what="YEAR to VARCHAR (four digits, 0000 for 0) and back"),
    BreakingClass(
        "string_to_date", "id BIGINT PRIMARY KEY, s VARCHAR(20) NOT NULL", ("ALTER TABLE {t} MODIFY s DATE NOT NULL",),
        _rows({"id": 1, "s": "2024-1-2"}, {"id": 2, "s": "20240305"}), _rows({"id": 3, "s": "2024-04-05"}),
        major1=_by_id({"id": 1, "s": "2024-1-2"}, {"id": 2, "s": "20240305"}, {"id": 3, "s": "2024-04-05"}),
        major2=_by_id({"id": 1, "s": "2024-01-02"}, {"id": 2, "s": "2024-03-05"}, {"id": 3, "s": "2024-04-05"}),
        registry_refuses=False, what="VARCHAR to DATE (MySQL reads Y-M-D and digits)"),
    # -- unsigned changes ---------------------------------------------------------------------------------------
    BreakingClass(
        "int_to_unsigned", "id BIGINT PRIMARY KEY, u INT NOT NULL", ("ALTER TABLE {t} MODIFY u INT UNSIGNED NOT NULL",),
        _rows({"id": 1, "u": 5}, {"id": 2, "u": 0}), _rows({"id": 3, "u": 2147483647}),
        major1=_by_id({"id": 1, "u": 5}, {"id": 2, "u": 0}, {"id": 3, "u": 2147483647}),
        major2=_by_id({"id": 1, "u": 5}, {"id": 2, "u": 0}, {"id": 3, "u": 2147483647}),
        registry_refuses=False, what="INT to INT UNSIGNED (int to long: BACKWARD accepts, a reader of INT cannot)"),
    BreakingClass(
        "unsigned_to_bigint", "id BIGINT PRIMARY KEY, u INT UNSIGNED NOT NULL",
        ("ALTER TABLE {t} MODIFY u BIGINT NOT NULL",),
        _rows({"id": 1, "u": 4294967295}), _rows({"id": 2, "u": 12}),
        major1=_by_id({"id": 1, "u": 4294967295}, {"id": 2, "u": 12}),
        major2=_by_id({"id": 1, "u": 4294967295}, {"id": 2, "u": 12}),
        registry_refuses=False, what="INT UNSIGNED to BIGINT (long to long; going down the range is checked)"),
    # -- the other temporal pairs ---------------------------------------------------------------------------------
    BreakingClass(
        "temporal_pairs",
        "id BIGINT PRIMARY KEY, a DATE NOT NULL, b DATE NOT NULL, c DATETIME NOT NULL, d DATETIME NOT NULL, "
        "e DATETIME NOT NULL, f TIMESTAMP NOT NULL, g TIME NOT NULL, h YEAR NOT NULL",
        ("ALTER TABLE {t} MODIFY a TIMESTAMP NOT NULL, MODIFY b BIGINT NOT NULL, MODIFY c TIMESTAMP NOT NULL, "
         "MODIFY d BIGINT NOT NULL, MODIFY e VARCHAR(30) NOT NULL, MODIFY f VARCHAR(30) NOT NULL, "
         "MODIFY g VARCHAR(20) NOT NULL, MODIFY h BIGINT NOT NULL",),
        _rows({"id": 1, "a": "2024-01-02", "b": "2024-01-02", "c": "2024-01-02 03:04:05", "d": "2024-01-02 03:04:05",
               "e": "2024-01-02 03:04:05", "f": "2024-01-02 03:04:05", "g": "-12:34:56", "h": 2024},
              {"id": 2, "a": "1999-12-31", "b": "1999-12-31", "c": "1999-12-31 23:59:59", "d": "1999-12-31 23:59:59",
               "e": "1999-12-31 23:59:59", "f": "1999-12-31 23:59:59", "g": "838:59:59", "h": 1999}),
        _rows({"id": 3, "a": "2024-03-04 05:06:07", "b": 20240304, "c": "2030-01-01 00:00:00", "d": 20301231235959,
               "e": "2024-5-6 7:08:09", "f": "20240506070809", "g": "1:2:3", "h": 69},
              {"id": 4, "a": "2024-03-04 23:59:59", "b": 991231, "c": "2038-01-19 03:14:07", "d": 240102,
               "e": "2024-05-06", "f": "2024-05-06 07:08:09", "g": "123456", "h": 0}),
        major1=_by_id(
            {"id": 1, "a": "2024-01-02", "b": "2024-01-02", "c": "2024-01-02 03:04:05", "d": "2024-01-02 03:04:05",
             "e": "2024-01-02 03:04:05", "f": "2024-01-02 03:04:05", "g": "-12:34:56", "h": 2024},
            {"id": 2, "a": "1999-12-31", "b": "1999-12-31", "c": "1999-12-31 23:59:59", "d": "1999-12-31 23:59:59",
             "e": "1999-12-31 23:59:59", "f": "1999-12-31 23:59:59", "g": "838:59:59", "h": 1999},
            {"id": 3, "a": "2024-03-04", "b": "2024-03-04", "c": "2030-01-01 00:00:00", "d": "2030-12-31 23:59:59",
             "e": "2024-05-06 07:08:09", "f": "2024-05-06 07:08:09", "g": "01:02:03", "h": 2069},
            {"id": 4, "a": "2024-03-04", "b": "1999-12-31", "c": "2038-01-19 03:14:07", "d": "2024-01-02 00:00:00",
             "e": "2024-05-06 00:00:00", "f": "2024-05-06 07:08:09", "g": "12:34:56", "h": 0}),
        major2=_by_id(
            {"id": 1, "a": "2024-01-02 00:00:00", "b": 20240102, "c": "2024-01-02 03:04:05", "d": 20240102030405,
             "e": "2024-01-02 03:04:05", "f": "2024-01-02 03:04:05", "g": "-12:34:56", "h": 2024},
            {"id": 2, "a": "1999-12-31 00:00:00", "b": 19991231, "c": "1999-12-31 23:59:59", "d": 19991231235959,
             "e": "1999-12-31 23:59:59", "f": "1999-12-31 23:59:59", "g": "838:59:59", "h": 1999},
            {"id": 3, "a": "2024-03-04 05:06:07", "b": 20240304, "c": "2030-01-01 00:00:00", "d": 20301231235959,
             "e": "2024-5-6 7:08:09", "f": "20240506070809", "g": "1:2:3", "h": 69},
            {"id": 4, "a": "2024-03-04 23:59:59", "b": 991231, "c": "2038-01-19 03:14:07", "d": 240102,
             "e": "2024-05-06", "f": "2024-05-06 07:08:09", "g": "123456", "h": 0}),
        what="in one ALTER, the eight pairs MySQL converts both ways: DATE to TIMESTAMP and BIGINT, DATETIME to "
             "TIMESTAMP, BIGINT and VARCHAR, TIMESTAMP to VARCHAR, TIME to VARCHAR, YEAR to BIGINT"),
    *(BreakingClass(
        f"{name}_to_time", f"id BIGINT PRIMARY KEY, v {kind} NOT NULL", ("ALTER TABLE {t} MODIFY v TIME NOT NULL",),
        _rows({"id": 1, "v": old}), _rows({"id": 2, "v": new}),
        major1={1: {"id": 1, "v": old},
                2: Refused("v", new, "takes the date of the day the ALTER ran (CURRENT_DATE): no record holds it")},
        major2=_by_id({"id": 1, "v": time}, {"id": 2, "v": new}), registry_refuses=False,
        what=f"{kind} to TIME (the time part); back, MySQL takes the ALTER's date (CURRENT_DATE): refused")
      for name, kind, old, time, new in (("date", "DATE", "2024-01-02", "00:00:00", "12:34:56"),
                                         ("datetime", "DATETIME", "2024-01-02 03:04:05", "03:04:05", "-01:02:03"),
                                         ("timestamp", "TIMESTAMP", "2024-01-02 03:04:05", "03:04:05", "23:59:59"))),
    *(BreakingClass(
        f"{name}_to_year", f"id BIGINT PRIMARY KEY, v {kind} NOT NULL", ("ALTER TABLE {t} MODIFY v YEAR NOT NULL",),
        _rows({"id": 1, "v": old}), _rows({"id": 2, "v": 2024}),
        major1={1: {"id": 1, "v": old}, 2: Refused("v", "2024", f"is refused by MySQL's ALTER (not a {kind})")},
        major2={1: Refused("v", old, "is refused by MySQL's ALTER (not a YEAR)"), 2: {"id": 2, "v": 2024}},
        what=f"{kind} to YEAR and back: MySQL's ALTER refuses both (error 1292 in MariaDB)")
      for name, kind, old in (("date", "DATE", "2024-01-02"), ("datetime", "DATETIME", "2024-01-02 03:04:05"),
                              ("timestamp", "TIMESTAMP", "2024-01-02 03:04:05"))),
    BreakingClass(
        "time_to_year", "id BIGINT PRIMARY KEY, t TIME NOT NULL", ("ALTER TABLE {t} MODIFY t YEAR NOT NULL",),
        _rows({"id": 1, "t": "12:34:56"}), _rows({"id": 2, "t": 2024}, {"id": 3, "t": 0}, {"id": 4, "t": 1999}),
        major1={1: {"id": 1, "t": "12:34:56"}, 2: {"id": 2, "t": "00:20:24"}, 3: {"id": 3, "t": "00:00:00"},
                4: Refused("t", "1999", "is not a valid TIME")},
        major2={1: Refused("t", "12:34:56", "is refused by MySQL's ALTER (not a YEAR)"), 2: {"id": 2, "t": 2024},
                3: {"id": 3, "t": 0}, 4: {"id": 4, "t": 1999}},
        what="TIME to YEAR (refused by MySQL's ALTER) and YEAR to TIME (the number as hhmmss: 2024 is 00:20:24)"),
    # -- ENUM and SET members -------------------------------------------------------------------------------------
    BreakingClass(
        "enum_set_members", "id BIGINT PRIMARY KEY, e ENUM('a','b','c') NOT NULL, s SET('x','y','z'), a INT NOT NULL",
        ("ALTER TABLE {t} MODIFY e ENUM('a','b') NOT NULL, MODIFY s SET('x','y')",
         "ALTER TABLE {t} MODIFY e ENUM('b','a','d') NOT NULL, MODIFY s SET('y','x','w'), MODIFY a VARCHAR(20) NOT NULL"),
        _rows({"id": 1, "e": "b", "s": "x,y", "a": 5}, {"id": 2, "e": "a", "s": None, "a": 6}),
        _rows({"id": 4, "e": "d", "s": "w", "a": "8"}, {"id": 5, "e": "a", "s": "y,x", "a": "9"}),
        rows_mid=_rows({"id": 3, "e": "b", "s": "y", "a": 7}),
        major1={1: {"id": 1, "e": "b", "s": "x,y", "a": 5}, 2: {"id": 2, "e": "a", "s": None, "a": 6},
                3: {"id": 3, "e": "b", "s": "y", "a": 7},
                4: Refused("e", "d", "is not a member of ENUM('a','b')"), 5: {"id": 5, "e": "a", "s": "x,y", "a": 9}},
        major2=_by_id({"id": 1, "e": "b", "s": "y,x", "a": "5"}, {"id": 2, "e": "a", "s": None, "a": "6"},
                      {"id": 3, "e": "b", "s": "y", "a": "7"}, {"id": 4, "e": "d", "s": "w", "a": "8"},
                      {"id": 5, "e": "a", "s": "y,x", "a": "9"}),
        what="ENUM and SET members removed (a minor of major 1), then reordered and added with INT to VARCHAR "
             "(major 2): every row sent by its version's member index (TiCDC), a SET printed in its column's order "
             "(x,y is y,x in SET('y','x','w')), a member the reader's column lacks refused (error 1265)"),
    # -- DECIMAL and BLOB tables ------------------------------------------------------------------------------------
    BreakingClass(
        "decimal_rescale", "id BIGINT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL",
        ("ALTER TABLE {t} MODIFY amount DECIMAL(12,4) NOT NULL",),
        _rows({"id": 1, "amount": Decimal("12.30")}, {"id": 2, "amount": Decimal("-0.05")},
              {"id": 3, "amount": Decimal("99999999.99")}),
        _rows({"id": 4, "amount": Decimal("1.2345")}, {"id": 5, "amount": Decimal("1.2350")},
              {"id": 6, "amount": Decimal("-7.0050")}, {"id": 7, "amount": Decimal("99999999.9999")}),
        major1={1: {"id": 1, "amount": Decimal("12.30")}, 2: {"id": 2, "amount": Decimal("-0.05")},
                3: {"id": 3, "amount": Decimal("99999999.99")}, 4: {"id": 4, "amount": Decimal("1.23")},
                5: {"id": 5, "amount": Decimal("1.24")}, 6: {"id": 6, "amount": Decimal("-7.01")},
                7: Refused("amount", "99999999.9999", "is out of range for DECIMAL(10,2)")},
        major2=_by_id({"id": 1, "amount": Decimal("12.3000")}, {"id": 2, "amount": Decimal("-0.0500")},
                      {"id": 3, "amount": Decimal("99999999.9900")}, {"id": 4, "amount": Decimal("1.2345")},
                      {"id": 5, "amount": Decimal("1.2350")}, {"id": 6, "amount": Decimal("-7.0050")},
                      {"id": 7, "amount": Decimal("99999999.9999")}),
        registry_refuses=False,
        what="DECIMAL(10,2) to DECIMAL(12,4): a new scale (readers decode with the writer's scale); back, rounded "
             "half away from zero, out of range refused (error 1264)"),
    BreakingClass(
        "decimal_to_string", "id BIGINT PRIMARY KEY, price DECIMAL(10,2) NOT NULL",
        ("ALTER TABLE {t} MODIFY price VARCHAR(20) NOT NULL",),
        _rows({"id": 1, "price": Decimal("12.30")}, {"id": 2, "price": Decimal("-0.05")},
              {"id": 3, "price": Decimal("0.00")}),
        _rows({"id": 4, "price": "7.5"}, {"id": 5, "price": " -3 "}, {"id": 6, "price": "abc"},
              {"id": 7, "price": "1.239"}),
        major1={1: {"id": 1, "price": Decimal("12.30")}, 2: {"id": 2, "price": Decimal("-0.05")},
                3: {"id": 3, "price": Decimal("0.00")}, 4: {"id": 4, "price": Decimal("7.50")},
                5: {"id": 5, "price": Decimal("-3.00")}, 6: Refused("price", "abc", "is not a DECIMAL(10,2)"),
                7: {"id": 7, "price": Decimal("1.24")}},
        major2=_by_id({"id": 1, "price": "12.30"}, {"id": 2, "price": "-0.05"}, {"id": 3, "price": "0.00"},
                      {"id": 4, "price": "7.5"}, {"id": 5, "price": " -3 "}, {"id": 6, "price": "abc"},
                      {"id": 7, "price": "1.239"}),
        registry_refuses=False,  # bytes to string: Avro resolution reads it (as UTF-8 text: wrong for a decimal)
        what="DECIMAL(10,2) to VARCHAR (printed with the column's scale, 12.30); back, the text read as a number and "
             "rounded to the scale (1.239 is 1.24, a note in MySQL), text that is no number refused (error 1292)"),
    BreakingClass(
        "blob_to_text", "id BIGINT PRIMARY KEY, doc BLOB, a INT NOT NULL",
        ("ALTER TABLE {t} MODIFY doc TEXT, MODIFY a VARCHAR(20) NOT NULL",),
        _rows({"id": 1, "doc": b"hello", "a": 5}, {"id": 2, "doc": "h\u00e9llo".encode(), "a": -7},
              {"id": 3, "doc": None, "a": 0}, {"id": 5, "doc": b"\xff\xfe", "a": 1}),
        _rows({"id": 4, "doc": "na\u00efve \u2603", "a": "8"}, {"id": 6, "doc": None, "a": "9"}),
        major1=_by_id({"id": 1, "doc": b"hello", "a": 5}, {"id": 2, "doc": "h\u00e9llo".encode(), "a": -7},
                      {"id": 3, "doc": None, "a": 0}, {"id": 5, "doc": b"\xff\xfe", "a": 1},
                      {"id": 4, "doc": "na\u00efve \u2603".encode(), "a": 8}, {"id": 6, "doc": None, "a": 9}),
        major2={1: {"id": 1, "doc": "hello", "a": "5"}, 2: {"id": 2, "doc": "h\u00e9llo", "a": "-7"},
                3: {"id": 3, "doc": None, "a": "0"}, 5: Refused("doc", "b'\\xff\\xfe'", "is not UTF-8 text"),
                4: {"id": 4, "doc": "na\u00efve \u2603", "a": "8"}, 6: {"id": 6, "doc": None, "a": "9"}},
        what="a BLOB table: BLOB to TEXT (the bytes read as utf8mb4; bytes that are no UTF-8 refused, error 1366) "
             "and INT to VARCHAR in one ALTER; back, the text's UTF-8 bytes"),
)


def write_storage_tree(root: Path, corpus: tuple[BreakingClass, ...] = CORPUS) -> list[str]:
    """The corpus as a TiCDC storage tree (canal-json data files); the data files' relative paths."""
    files: list[str] = []
    for case in corpus:
        versions = case.versions()
        for i, (table, statement) in enumerate(versions):
            # version 1's schema file holds its CREATE TABLE (TiCDC's, for a table created in the changefeed): the
            # ENUM/SET members, which schema files do not list, come from the DDL of each version
            write_table_schema_file(table, root, query=statement, ddl_type=3 if i == 0 else 5)
        for table, rows in case.eras():
            directory = root / SCHEMA / case.name / str(table.version)
            directory.mkdir(parents=True, exist_ok=True)
            lines = [canal_dml(table, Op.INSERT, table.version + ((j + 1) << 18) // 8, None, row)
                     for j, row in enumerate(rows)]
            (directory / "CDC000001.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
            files.append(f"{SCHEMA}/{case.name}/{table.version}/CDC000001.json")
    return files


def canal_changelog(corpus: tuple[BreakingClass, ...] = CORPUS) -> list[str]:
    """The corpus as canal-json messages in commit order: CREATE, version 1 rows, the DDL(s), version 2 rows."""
    lines: list[str] = []
    for case in corpus:
        rows = {table.version: era for table, era in case.eras()}
        for i, (table, statement) in enumerate(case.versions()):
            if i == 0:
                lines.append(canal_ddl(SCHEMA, case.name, "CREATE", statement, table.version))
            elif statement.upper().startswith("CREATE"):
                lines.append(canal_ddl(SCHEMA, case.name, "ERASE", f"DROP TABLE {SCHEMA}.{case.name}", table.version - 1))
                lines.append(canal_ddl(SCHEMA, case.name, "CREATE", statement, table.version))
            else:
                lines.append(canal_ddl(SCHEMA, case.name, "ALTER", statement, table.version))
            lines += [canal_dml(table, Op.INSERT, table.version + ((j + 1) << 18) // 8, None, row)
                      for j, row in enumerate(rows.get(table.version, ()))]
    return lines


# -- reading the records back: what the readers give, against the oracle -------------------------------------------


def writer_majors(client: Any, subject: str) -> dict[int, int]:
    """schema id -> the major of the version that registered it."""
    out: dict[int, int] = {}
    for number in client.get_versions(subject):
        got = client.get_version(subject, number)
        out.setdefault(got.id, int(got.properties["major_version"]))
    return out


def python_refuses(row: dict[str, Any]) -> bool:
    """confluent-kafka-python's JSONata executor refuses a record holding a Decimal or bytes value, whatever the
    rule does with it (documented: docs/python-api.md)."""
    return any(isinstance(v, (Decimal, bytes)) for v in row.values())


def python_view(got: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    """``got`` with the values a rule gave as JSON turned into the oracle's type where that is exact: a float or int
    for a DECIMAL (its shortest text is the value: 7.5 for 7.50), a str for bytes (its UTF-8). Anything else is
    left as it came, to compare."""
    out = dict(got)
    for name, value in got.items():
        expected = want.get(name)
        if isinstance(expected, Decimal) and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = Decimal(repr(value)) if Decimal(repr(value)) == expected else value
        elif isinstance(expected, bytes) and isinstance(value, str):
            out[name] = value.encode("utf-8") if value.encode("utf-8") == expected else value
    return out


def causes(exc: BaseException | None) -> str:
    """The messages of ``exc`` and of the exceptions it was raised from (the client wraps its executor's)."""
    out = []
    while exc is not None:
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(out)


def kinds(rows: dict[int, dict]) -> dict[int, dict[str, str]]:
    """The kind of every value: JSONata numbers are JSON numbers, so an integral float comes out of a rule as an
    int (4 for 4.0, equal to it): both are "number" here; strings, None, ... keep their type."""
    return {k: {f: "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else type(v).__name__
                for f, v in r.items()} for k, r in rows.items()}


def exact_kinds(rows: dict[int, dict]) -> dict[int, dict[str, str]]:
    """The type of every value (int and float both "number": the oracle writes 7 for a DOUBLE's 7.0): the follower
    converts a rule's output into the reader's types, so a DECIMAL is a Decimal and a BLOB bytes."""
    return {k: {f: "number" if type(v) in (int, float) else type(v).__name__ for f, v in r.items()}
            for k, r in rows.items()}


def row_majors(case: BreakingClass, client: Any, subject: str) -> dict[int, int]:
    """id -> the major each row of ``case`` was written as (its table version's, from the registry's metadata)."""
    by_version: dict[int, int] = {}
    for number in client.get_versions(subject):
        got = client.get_version(subject, number)
        by_version[int(got.properties[TABLE_VERSION])] = int(got.properties["major_version"])
    out: dict[int, int] = {}
    for table, rows in case.eras():
        # a table version whose schema an earlier version holds (nothing changed for this subject) has no version
        major = by_version.get(table.version) or by_version[max(v for v in by_version if v <= table.version)]
        out.update({row["id"]: major for row in rows})
    return out
