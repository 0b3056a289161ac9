"""A corpus of breaking DDL classes (each one table), written as a TiCDC storage tree or a canal-json changelog file.

Every class is a table ``evo.<name>`` created with version 1 rows, then changed by DDL(s) that break consumers
pinned to a major version (most of them refused by the registry's default level, BACKWARD, too; a few accepted by
it: ``registry_refuses=False``), then given version 2 rows (and rows between two DDLs, ``rows_mid``). The oracle
is written by hand, MySQL's values: what a consumer pinned to major 1, 2 (and 3) must see for every row (by id),
after the migration rules ran. The key of every class is ``id`` except ``pk_change``, whose key breaks (its value
does not).

Classes: the 15 first ones (one breaking change each); a DROP COLUMN BACKWARD accepts; a minor version then a major
(the major's rules fill the column the minor added) and a major then a minor (the minor's own rules); three majors;
temporal pairs (TiCDC writes DATE/DATETIME/TIMESTAMP/TIME as text, YEAR as an int); unsigned changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
class BreakingClass:
    name: str
    create: str  # the columns after ``id BIGINT`` (and keys), inside CREATE TABLE evo.<name> (...)
    ddl: tuple[str, ...]  # the breaking DDL(s), {t} standing for the table name
    rows_v1: tuple[dict[str, Any], ...]
    rows_v2: tuple[dict[str, Any], ...]
    major1: dict[int, dict[str, Any]]  # id -> the row a consumer pinned to major 1 sees
    major2: dict[int, dict[str, Any]]
    breaks_key: bool = False
    what: str = ""
    rows_mid: tuple[dict[str, Any], ...] = ()  # rows of the version between two DDLs (a class with two)
    major3: dict[int, dict[str, Any]] | None = None  # a class of three majors
    registry_refuses: bool = True  # False: BACKWARD accepts the change (only pinned consumers would break)

    @property
    def pinned(self) -> dict[int, dict[int, dict[str, Any]]]:
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
        major2=_by_id({"id": 1, "c": 12}, {"id": 2, "c": None}, {"id": 5, "c": None}, {"id": 3, "c": 3},
                      {"id": 4, "c": None}),
        what="type from string, nullable: text that is no integer reads as null"),
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
)


def write_storage_tree(root: Path, corpus: tuple[BreakingClass, ...] = CORPUS) -> list[str]:
    """The corpus as a TiCDC storage tree (canal-json data files); the data files' relative paths."""
    files: list[str] = []
    for case in corpus:
        versions = case.versions()
        for i, (table, statement) in enumerate(versions):
            write_table_schema_file(table, root, query=statement if i else "", ddl_type=3 if i == 0 else 5)
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
