"""Migration rules for a breaking change of a flat-Avro schema: JSONata UPGRADE and DOWNGRADE expressions.

A table version whose schema its subject's compatibility level refuses can be registered as the next major
version (``--on-incompatible new-major``) with Confluent data-contract migration rules, which consumers pinned to
a major version (``use.latest.with.metadata``) run to read records of the other major
(``shared/reference/data-contracts.md`` §6): UPGRADE turns a record of the old shape into the new one, DOWNGRADE
the other way. :func:`plan_migration` diffs the old and the new schema field by field (TiCDC's flat records: one
field per column, ``["null", T]`` for a nullable column), with what the DDL said (renames, re-added columns:
:class:`~avro_registry_sink.tabledef.ddl.ColumnLineage`), and writes one JSONata expression per direction, or says
why a direction cannot be written. Pure: no registry, no I/O.

Which change gets which rule (value ``$v`` of the source field; "OUT" is ``null`` for a nullable target, else a
``$error`` naming the column and value, which fails the consumer's rule as Confluent's ``onFailure`` says):

============================  =====================================================================================
change                        rule
============================  =====================================================================================
rename (``RENAME COLUMN``,    the value moves to the new name (and back)
``CHANGE a b``)
widening (int->long,          the value unchanged
int/long->float/double,
float->double)
narrowing (long->int,         the value when it fits the target's range, else OUT; float/double->integer rounds half
double->float, float->int)    away from zero as MySQL does
to string                     integers in full (longs beyond 10^15 too), floats as JSONata prints them
from string                   integers when the text is one (``-12``, spaces around) in range, floats when it is a
                              number, else OUT
NOT NULL added                the column's DEFAULT, else MySQL's implicit default (0, '', the first ENUM member,
                              '0000-00-00' ...) for old records; dropped again going down
NULL -> NOT NULL              null becomes the DEFAULT, else the implicit default
DECIMAL precision/scale       the value, guarded by the new integer digits; a smaller scale rounds
dropped column                gone going up; going down the old column gets its default / null / implicit default
dropped and re-added          values never carry over: each side gets the other's default
key column added / dropped    impossible going up / down (a key holds only key columns: nothing to take it from)
bytes columns without         impossible where a value must be made (JSONata has no bytes)
a default, other types
============================  =====================================================================================

confluent-kafka-python's JSONata executor (jsonata-python) refuses a record holding ``bytes`` or ``Decimal`` values
(BLOB/BINARY/BIT columns, DECIMAL in ``precise`` mode) as a whole, whatever the rule does with them:
:attr:`MigrationPlan.python_blocked` names such fields, so a summary can say that Python consumers cannot follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from avro_registry_sink.schema.naming import sanitize_name
from avro_registry_sink.tabledef.ddl import ColumnLineage

__all__ = ["FieldShape", "MigrationPlan", "plan_migration", "rule_set_for"]

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_FLOAT_MAX = 3.4028234663852886e38
#: JSONata computes with doubles: integers beyond 2^53 cannot be converted exactly.
_EXACT = (-(2**53 - 1), 2**53 - 1)
_INEXACT = "is beyond the integers JSONata holds exactly (2^53)"
_NUMBERS = ("int", "long", "float", "double")
_INTEGERS = ("int", "long")
_FLOATS = ("float", "double")
_INTEGER_TEXT = r"/^\s*[-+]?[0-9]+\s*$/"
_NUMBER_TEXT = r"/^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$/"
#: MySQL's implicit default of a NOT NULL column without DEFAULT, by TiCDC's ``tidb_type`` (strings).
_IMPLICIT_TEXT = {"DATE": "0000-00-00", "DATETIME": "0000-00-00 00:00:00", "TIMESTAMP": "0000-00-00 00:00:00",
                  "TIME": "00:00:00", "JSON": "null"}


@dataclass(frozen=True)
class FieldShape:
    """One field of a flat record: its base Avro type and what a rule needs to know about it."""

    name: str
    base: str  # int long float double string bytes boolean, or "other"
    nullable: bool
    decimal: tuple[int, int] | None = None  # (precision, scale) of a decimal logical type
    tidb_type: str | None = None
    allowed: tuple[str, ...] = ()  # ENUM/SET members
    has_default: bool = False
    default: Any = None

    @property
    def sql(self) -> str:
        """How the field's column type reads in messages: the TiDB type when known."""
        if self.decimal is not None:
            return f"DECIMAL({self.decimal[0]},{self.decimal[1]})"
        return (self.tidb_type or self.base).upper() if self.tidb_type else self.base

    @classmethod
    def parse(cls, field_json: Mapping[str, Any]) -> FieldShape:
        kind = field_json.get("type")
        nullable = False
        if isinstance(kind, list):
            branches = [b for b in kind if b != "null"]
            nullable = len(branches) < len(kind)
            kind = branches[0] if len(branches) == 1 else {"type": "other"}
        if isinstance(kind, str):
            kind = {"type": kind}
        if not isinstance(kind, dict):
            kind = {"type": "other"}
        base = str(kind.get("type")) if kind.get("type") in ("int", "long", "float", "double", "string", "bytes",
                                                        "boolean") else "other"
        params = kind.get("connect.parameters") or {}
        decimal = None
        if kind.get("logicalType") == "decimal" and base == "bytes":
            decimal = (int(kind.get("precision", 10)), int(kind.get("scale", 0)))
        allowed = tuple(str(params["allowed"]).split(",")) if params.get("allowed") else ()
        return cls(name=str(field_json.get("name")), base=base, nullable=nullable, decimal=decimal,
                   tidb_type=params.get("tidb_type"), allowed=allowed, has_default="default" in field_json,
                   default=field_json.get("default"))


@dataclass(frozen=True)
class MigrationPlan:
    """The migration between two versions of a subject's schema.

    ``upgrade``/``downgrade``: the JSONata expression turning an old record into the new shape and back, ``None``
    when a direction cannot be written (``upgrade_impossible``/``downgrade_impossible`` say why: then consumers of
    the new major cannot read old records, or those of the old major new ones). ``changes``: one sentence per
    changed field. ``python_blocked``: fields whose values jsonata-python refuses (bytes, decimals).
    """

    changes: tuple[str, ...]
    upgrade: str | None
    downgrade: str | None
    upgrade_impossible: tuple[str, ...] = ()
    downgrade_impossible: tuple[str, ...] = ()
    python_blocked: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Both directions have a rule."""
        return self.upgrade is not None and self.downgrade is not None

    def describe(self, old_major: int | str = "n", new_major: int | str = "n+1") -> list[str]:
        """Sentences for ``check --ddl`` and the run's summary: the changes, the rules, who cannot follow."""
        lines = [f"change: {c}" for c in self.changes]
        lines.append(f"UPGRADE rule (consumers of major {new_major} reading major {old_major} records): "
                     + (self.upgrade if self.upgrade is not None else
                        "none: " + "; ".join(self.upgrade_impossible)))
        lines.append(f"DOWNGRADE rule (consumers of major {old_major} reading major {new_major} records): "
                     + (self.downgrade if self.downgrade is not None else
                        "none: " + "; ".join(self.downgrade_impossible)))
        if self.upgrade is None:
            lines.append(f"consumers pinned to major {new_major} cannot read the records of major {old_major}")
        if self.downgrade is None:
            lines.append(f"consumers pinned to major {old_major} cannot read the records of major {new_major}")
        if self.python_blocked and (self.upgrade is not None or self.downgrade is not None):
            lines.append("confluent-kafka-python consumers cannot apply these rules: its JSONata executor "
                         "(jsonata-python) refuses records holding bytes or decimal values (fields "
                         + ", ".join(self.python_blocked) + "); Java consumers are not affected")
        return lines


def rule_set_for(plan: MigrationPlan, old_major: int, new_major: int) -> dict[str, Any]:
    """The ``ruleSet`` of the new major version: its UPGRADE and DOWNGRADE JSONata rules (those that exist).

    >>> rule_set_for(MigrationPlan(changes=("x",), upgrade="$", downgrade=None), 1, 2)["migrationRules"][0]["name"]
    'upgrade_1_to_2'
    """
    rules = []
    doc = "; ".join(plan.changes)[:1000]
    if plan.upgrade is not None:
        rules.append({"name": f"upgrade_{old_major}_to_{new_major}", "doc": doc, "kind": "TRANSFORM",
                      "mode": "UPGRADE", "type": "JSONATA", "expr": plan.upgrade})
    if plan.downgrade is not None:
        rules.append({"name": f"downgrade_{new_major}_to_{old_major}", "doc": doc, "kind": "TRANSFORM",
                      "mode": "DOWNGRADE", "type": "JSONATA", "expr": plan.downgrade})
    return {"migrationRules": rules}


# -- JSONata building blocks -------------------------------------------------------------------------------


def _lit(value: Any) -> str:
    return json.dumps(value)


def _name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _out(target: FieldShape, column: str, what: str) -> str:
    """A value that does not fit: null for a nullable target, else a rule failure naming it."""
    if target.nullable:
        return "null"
    return f'$error("column {column}: " & $string($v) & " {what}")'


def _long_text(target: FieldShape, column: str) -> str:
    # JSONata numbers are doubles: integers are exact up to 2^53, and $string prints 15 significant digits, so
    # from 10^15 on an integer is printed in two exact halves; beyond 2^53 its digits are already lost.
    return ('($abs($v) < 1000000000000000 ? $string($v) : $abs($v) <= 9007199254740991 ? ($a := $abs($v); '
            '$r := $a % 1000000000; ($v < 0 ? "-" : "") & $string($round(($a - $r) / 1000000000)) & '
            f'$substring($string(1000000000 + $r), 1)) : {_out(target, column, _INEXACT)})')


def _text_long() -> str:
    # $number goes through a double: more than 15 digits are read in two exact halves.
    return ('($t := $trim($v); $neg := $substring($t, 0, 1) = "-"; $d := $replace($t, /^[-+]/, ""); '
            '$n := $length($d) > 15 ? $number($substring($d, 0, $length($d) - 9)) * 1000000000 + '
            '$number($substring($d, -9)) : $number($d); $neg ? -$n : $n)')


def _range_guard(expr: str, low: float, high: float, target: FieldShape, column: str) -> str:
    return f"($x := {expr}; $x >= {low} and $x <= {high} ? $x : {_out(target, column, 'is out of range for ' + target.sql)})"


def _round_half_away(expr: str) -> str:
    return f"($y := {expr}; $y >= 0 ? $floor($y + 0.5) : -$floor(-$y + 0.5))"


def _convert(src: FieldShape, dst: FieldShape, column: str) -> tuple[str | None, str]:
    """JSONata turning ``$v`` (a non-null value of ``src``) into ``dst``; (None, why) when it cannot."""
    s, d = src.base, dst.base
    if src.decimal is not None and dst.decimal is not None:
        (sp, ss), (dp, ds) = src.decimal, dst.decimal
        expr = "$v"
        if ds < ss:
            expr = f"($m := $power(10, {ds}); {_round_half_away('$v * $m')} / $m)"
        if dp - ds < sp - ss:
            bound = 10 ** (dp - ds)
            expr = f"($x := {expr}; $abs($x) < {bound} ? $x : {_out(dst, column, 'is out of range for ' + dst.sql)})"
        return expr, "decimal precision/scale"
    if src.decimal is not None or dst.decimal is not None:
        if s in _NUMBERS or d in _NUMBERS:  # integer/float <-> decimal
            number = d if src.decimal is not None else s
            if dst.decimal is not None:
                bound = 10 ** (dst.decimal[0] - dst.decimal[1])
                return (f"$abs($v) < {bound} ? $v : {_out(dst, column, 'is out of range for ' + dst.sql)}",
                        "number to decimal")
            rng = _INT_RANGE if number == "int" else _LONG_RANGE
            expr = _round_half_away("$v") if number in _INTEGERS else "$v"
            if number in _INTEGERS:
                return _range_guard(expr, *rng, dst, column), "decimal to integer"
            return expr, "decimal to float"
        if s == "string" and dst.decimal is not None:
            bound = 10 ** (dst.decimal[0] - dst.decimal[1])
            return (f"$contains($v, {_NUMBER_TEXT}) and $abs($number($trim($v))) < {bound} ? $number($trim($v)) : "
                    f"{_out(dst, column, 'is not a ' + dst.sql)}", "from string")
        if d == "string" and src.decimal is not None:
            return "$string($v)", "to string"
        return None, f"{src.sql} cannot be turned into {dst.sql} by a rule"
    if s == d and s != "other":
        return "$v", "same type"
    if s in _NUMBERS and d in _NUMBERS:
        order = _NUMBERS.index
        if (s in _INTEGERS and d in _FLOATS) or order(s) <= order(d):
            return "$v", "widening"
        if s == "long" and d == "int":
            return _range_guard("$v", *_INT_RANGE, dst, column), "narrowing"
        if s == "double" and d == "float":
            return _range_guard("$v", -_FLOAT_MAX, _FLOAT_MAX, dst, column), "narrowing"
        rng = _INT_RANGE if d == "int" else _LONG_RANGE
        return _range_guard(_round_half_away("$v"), *rng, dst, column), "narrowing (rounded)"
    if d == "string" and s in _INTEGERS:
        return _long_text(dst, column), "to string" + (" (exact up to 2^53)" if s == "long" else "")
    if d == "string" and s in _FLOATS:
        return "$string($v)", "to string"
    if s == "string" and d in _INTEGERS:
        rng = _INT_RANGE if d == "int" else _EXACT
        return (f"$contains($v, {_INTEGER_TEXT}) ? {_range_guard(_text_long(), *rng, dst, column)} : "
                f"{_out(dst, column, 'is not an integer')}", "from string")
    if s == "string" and d in _FLOATS:
        expr = "$number($trim($v))"
        if d == "float":
            expr = _range_guard(expr, -_FLOAT_MAX, _FLOAT_MAX, dst, column)
        return f"$contains($v, {_NUMBER_TEXT}) ? {expr} : {_out(dst, column, 'is not a number')}", "from string"
    if {s, d} == {"string", "bytes"}:
        return "$v", "bytes and string"
    return None, f"{src.sql} cannot be turned into {dst.sql} by a rule"


def _fill(target: FieldShape, column: str, is_key: bool, why: str) -> tuple[str | None, str]:
    """The value a field gets when the record it is made from has none for it."""
    if is_key:
        return None, f"key column {column} {why}: a key holds only key columns, so there is nothing to take it from"
    if target.has_default and target.default is not None and target.base != "bytes":
        return _lit(target.default), f"its DEFAULT {_lit(target.default)}"
    if target.nullable:
        return "null", "null"
    value = _implicit_default(target)
    if value is None:
        return None, f"column {column} ({target.sql}) needs a value and JSONata cannot write bytes"
    return value, f"MySQL's implicit default {value}"


def _implicit_default(target: FieldShape) -> str | None:
    if target.base in _NUMBERS or target.decimal is not None:
        return "0"
    if target.base == "string":
        if target.tidb_type == "ENUM" and target.allowed:
            return _lit(target.allowed[0])
        return _lit(_IMPLICIT_TEXT.get((target.tidb_type or "").upper(), ""))
    if target.base == "boolean":
        return "false"
    return None


# -- the diff ----------------------------------------------------------------------------------------------


@dataclass
class _Side:
    """One direction being built: fields removed from the source, values of the target's changed fields."""

    remove: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    impossible: list[str] = field(default_factory=list)

    def expression(self) -> str | None:
        if self.impossible:
            return None
        if not self.remove and not self.values:
            return "$"
        base = "$"
        if self.remove:
            names = ", ".join(_lit(n) for n in self.remove)
            base = f"$sift($, function($v, $k) {{$not($k in [{names}])}})"
        if not self.values:
            return base
        obj = ", ".join(f"{_lit(k)}: {v}" for k, v in self.values.items())
        return f"$merge([{base}, {{{obj}}}])"


def _fields(schema: Mapping[str, Any] | str) -> list[FieldShape] | None:
    data = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(data, dict) or data.get("type") != "record" or not isinstance(data.get("fields"), list):
        return None
    return [FieldShape.parse(f) for f in data["fields"]]


def _moved(src: FieldShape, dst: FieldShape, column: str) -> tuple[str | None, str]:
    """The value of ``dst`` made from the source field (null handled): (expression, what) or (None, why)."""
    expr, what = _convert(src, dst, column)
    if expr is None:
        return None, what
    if src.nullable:
        null_case, null_what = _fill(dst, column, False, "is NOT NULL now") if not dst.nullable else ("null", "")
        if null_case is None:
            return None, null_what
        if not dst.nullable:
            what = f"{what}; null becomes {null_what}"
        expr = f"$v = null ? {null_case} : {expr}" if expr != "$v" or not dst.nullable else "$v"
    return f"($v := $.{_name(src.name)}; {expr})", what


def plan_migration(old_schema: Mapping[str, Any] | str, new_schema: Mapping[str, Any] | str,
                   lineage: ColumnLineage | None = None, *, is_key: bool = False) -> MigrationPlan:
    """The migration from ``old_schema`` to ``new_schema`` (Avro JSON of flat records).

    ``lineage``: what the DDL between the two said (renames, re-added columns); without it fields are matched
    by name. ``is_key``: the schemas are keys (a key field cannot be made up).

    >>> old = {"type": "record", "name": "t", "fields": [{"name": "a", "type": "int"}]}
    >>> new = {"type": "record", "name": "t", "fields": [{"name": "b", "type": "int"}]}
    >>> plan = plan_migration(old, new, ColumnLineage(renamed=(("b", "a"),)))
    >>> plan.changes
    ('a renamed to b',)
    >>> import jsonata
    >>> jsonata.Jsonata(plan.upgrade).evaluate({"a": 7}), jsonata.Jsonata(plan.downgrade).evaluate({"b": 7})
    ({'b': 7}, {'a': 7})
    """
    lineage = lineage or ColumnLineage()
    old_fields, new_fields = _fields(old_schema), _fields(new_schema)
    if old_fields is None or new_fields is None:
        why = "the schemas are not flat records"
        return MigrationPlan((why,), None, None, (why,), (why,))
    old_by = {f.name: f for f in old_fields}
    renamed = {sanitize_name(new): sanitize_name(old) for new, old in lineage.renamed}
    fresh = {sanitize_name(c) for c in lineage.fresh}
    up, down = _Side(), _Side()
    changes: list[str] = []
    used: set[str] = set()
    for dst in new_fields:
        origin = renamed.get(dst.name, None if dst.name in fresh else dst.name)
        src = old_by.get(origin) if origin is not None else None
        if src is None:  # added (or re-added): old records have no value for it
            value, what = _fill(dst, dst.name, is_key, "is new")
            readded = dst.name in old_by
            if readded:
                used.add(dst.name)
                back, back_what = _fill(old_by[dst.name], dst.name, is_key, "was dropped")
                changes.append(f"{dst.name} dropped and added again as {dst.sql}"
                               f"{'' if dst.nullable else ' NOT NULL'}: no value carries over (up: {what}; down: "
                               f"{back_what})")
                if back is None:
                    down.impossible.append(back_what)
                else:
                    down.values[dst.name] = back
            else:
                changes.append(f"{dst.name} added ({dst.sql}{'' if dst.nullable else ' NOT NULL'}): old records "
                               f"get {what}; dropped going down")
                down.remove.append(dst.name)
            if value is None:
                up.impossible.append(what)
            else:
                up.values[dst.name] = value
            continue
        used.add(src.name)
        label = src.name if src.name == dst.name else f"{src.name} renamed to {dst.name}"
        forward, what_up = _moved(src, dst, dst.name)
        backward, what_down = _moved(dst, src, src.name)
        type_change = (src.base, src.decimal) != (dst.base, dst.decimal) or src.nullable != dst.nullable
        if src.name != dst.name or type_change:
            detail = ""
            if type_change:
                detail = (f"{src.sql}{' NULL' if src.nullable else ' NOT NULL'} -> "
                          f"{dst.sql}{' NULL' if dst.nullable else ' NOT NULL'} (up: {what_up}; down: {what_down})")
            changes.append(f"{label}{': ' + detail if detail else ''}")
        if src.name != dst.name:
            up.remove.append(src.name)
            down.remove.append(dst.name)
        if forward is None:
            up.impossible.append(f"column {dst.name}: {what_up}")
        elif src.name != dst.name or forward != f"($v := $.{_name(src.name)}; $v)":
            up.values[dst.name] = forward
        if backward is None:
            down.impossible.append(f"column {src.name}: {what_down}")
        elif src.name != dst.name or backward != f"($v := $.{_name(dst.name)}; $v)":
            down.values[src.name] = backward
    for src in old_fields:
        if src.name in used:
            continue
        value, what = _fill(src, src.name, is_key, "was dropped")
        changes.append(f"{src.name} dropped ({src.sql}): gone going up; going down it gets {what}")
        up.remove.append(src.name)
        if value is None:
            down.impossible.append(what)
        else:
            down.values[src.name] = value
    blocked = tuple(sorted({f.name for f in [*old_fields, *new_fields] if f.base == "bytes"}))
    return MigrationPlan(tuple(changes) or ("no field changed (only names or attributes of the record)",),
                         up.expression(), down.expression(), tuple(up.impossible), tuple(down.impossible), blocked)
