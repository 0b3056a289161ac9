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
DECIMAL precision/scale       the value, guarded by the new integer digits; a smaller scale rounds half away from
                              zero on the decimal digits (exact up to 15 significant digits), guarded too
text -> DECIMAL               the number rounded to the scale as MySQL does (``1.239`` is 1.24), else OUT
into an ENUM / SET            a member of the column, else OUT (MySQL's error 1265); a SET's members in the column's
                              order (``x,y`` is ``y,x`` in ``SET('y','x')``); a change of members alone is no
                              conversion (it stays a minor version: Avro resolution reads it)
dropped column                gone going up; going down the old column gets its default / null / implicit default
dropped and re-added          values never carry over: each side gets the other's default
key column added / dropped    impossible going up / down (a key holds only key columns: nothing to take it from)
bytes columns without         impossible where a value must be made (JSONata has no bytes)
a default, other types
============================  =====================================================================================

Each rule is a projection onto the whole target version: every field of it, in its order, and nothing else
(Confluent's clients do not resolve a rule's output against the reader schema). A source field missing from the
record (a record of an older minor version without rules of its own, which the client hands to the next rule as
it was written) counts as its Avro default (null for a nullable column) before it is converted.
:attr:`MigrationPlan.conversions` names the fields whose values the rules give otherwise than Avro schema resolution
would (renamed, converted, dropped and added again): the schema manager never makes such a change a minor version.

Temporal pairs, as MySQL 8 converts a column's values (``ALTER TABLE ... MODIFY``, strict mode: the ALTER fails on
a value it cannot convert, so a rule refuses it: OUT). TiCDC writes DATE ``YYYY-MM-DD``, DATETIME/TIMESTAMP
``YYYY-MM-DD hh:mm:ss[.f]``, TIME ``[-]hh:mm:ss[.f]`` as strings and YEAR as an int; BIGINT is any integer column
(its type's range checked), VARCHAR any text column. Fractional digits carry over as they are (the fractional
precision is not in TiCDC's schema):

=============  ==========================================================================================
from -> to     value
=============  ==========================================================================================
DATE ->        DATETIME/TIMESTAMP ``d 00:00:00`` (TIMESTAMP: OUT outside 1970-01-01 00:00:01 .. 2038-01-19
               03:14:07); TIME ``00:00:00``; BIGINT ``YYYYMMDD``; VARCHAR the text; YEAR OUT (MySQL's ALTER
               refuses it)
DATETIME,      DATE the date part, the time part rounded (``23:59:59.5`` and later is the next day); TIMESTAMP
TIMESTAMP ->   the text within TIMESTAMP's range, DATETIME the text; TIME the time part; BIGINT
               ``YYYYMMDDhhmmss`` (OUT with fractional seconds, which MySQL rounds); VARCHAR the text; YEAR OUT
TIME ->        DATE/DATETIME/TIMESTAMP OUT (MySQL takes the date of the day the ALTER ran); BIGINT
               ``[-]hhmmss`` (OUT with fractional seconds); VARCHAR the text; YEAR OUT
YEAR ->        BIGINT the number; VARCHAR four digits (``0000`` for 0); TIME the number read as ``hhmmss``
               (2024 is ``00:20:24``); DATE/DATETIME/TIMESTAMP OUT (MySQL's ALTER refuses them)
BIGINT ->      DATE/DATETIME/TIMESTAMP the number read as YYMMDD, YYYYMMDD, YYMMDDhhmmss or YYYYMMDDhhmmss
               (zeros padded on the left to the next of these; a two-digit year 70-99 is 19xx, else 20xx; 0 the
               zero date), OUT when it is no valid date; TIME ``[-]hhmmss`` (hours up to 838); YEAR 0 as 0,
               1-69 as 20xx, 70-99 as 19xx, 1901-2155 as it is, else OUT
VARCHAR ->     DATE/DATETIME/TIMESTAMP ``Y-M-D[ h:m:s]`` (one or two digits for all but the year) or digits (as
               BIGINT), else OUT (fractional seconds too); TIME ``[-]h:m[:s]`` or digits; YEAR a text of one or
               two digits as a two-digit year (``'0'`` is 2000), four digits as the number
=============  ==========================================================================================

Every conversion that is not the value as it is (both directions) makes the change a major version, even string
to string (DATETIME -> DATE): a consumer pinned to the major reads with Avro resolution, which would leave the
time part under a DATE schema. Integer columns convert within the range of their TiDB type (``INT UNSIGNED``
0..4294967295, ``BIGINT UNSIGNED``: TiCDC's ``long`` mode writes values from 2^63 as negative longs, which no
other type holds: OUT). A refused value fails the consumer's rule with the column, the value and the reason, or
never reads as null instead, even for a nullable target (MySQL's strict ALTER refuses such a value: null would be
a value MySQL never holds); :attr:`MigrationPlan.upgrade_refused`/``downgrade_refused`` say which, and
:meth:`MigrationPlan.describe` lists them per direction (the run's ``cannot_follow``).

confluent-kafka-python's JSONata executor (jsonata-python) refuses a record holding ``bytes`` or ``Decimal`` values
(BLOB/BINARY/BIT columns, DECIMAL in ``precise`` mode) as a whole, whatever the rule does with them:
:attr:`MigrationPlan.python_blocked` names such fields, so a summary can say that Python consumers cannot follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
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


def field_kind(field_json: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A flat record field's type as a dict (its one non-null branch; ``{"type": "other"}`` for anything else) and
    whether it is nullable (``["null", T]``)."""
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
    return kind, nullable


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
        kind, nullable = field_kind(field_json)
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

    ``upgrade``/``downgrade``: the JSONata expression turning an old record into the new shape and back (a
    projection onto every field of the target version), ``None`` when a direction cannot be written
    (``upgrade_impossible``/``downgrade_impossible`` say why: then consumers of the new major cannot read old
    records, or those of the old major new ones). ``changes``: one sentence per changed field. ``python_blocked``:
    fields whose values jsonata-python refuses (bytes, decimals). ``conversions``: the fields whose values a rule
    gives otherwise than Avro schema resolution would (renamed, converted, dropped and added again): a change with
    any is never a minor version without rules. ``upgrade_refused``/``downgrade_refused``: the values each
    direction's rule refuses (fails the record, naming the column and the value), one sentence per column.
    """

    changes: tuple[str, ...]
    upgrade: str | None
    downgrade: str | None
    upgrade_impossible: tuple[str, ...] = ()
    downgrade_impossible: tuple[str, ...] = ()
    python_blocked: tuple[str, ...] = ()
    conversions: tuple[str, ...] = ()
    upgrade_refused: tuple[str, ...] = ()
    downgrade_refused: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Both directions have a rule."""
        return self.upgrade is not None and self.downgrade is not None

    def describe(self, old_major: int | str = "n", new_major: int | str = "n+1") -> list[str]:
        """Sentences for ``check --ddl`` and the run's summary: the changes, the rules, who cannot follow (the
        lines starting with "consumers " or "confluent-kafka-python": the run's ``cannot_follow``)."""
        lines = [f"change: {c}" for c in self.changes]
        lines.append(f"UPGRADE rule (consumers of major {new_major} reading major {old_major} records): "
                     + (self.upgrade if self.upgrade is not None else
                        "none: " + "; ".join(self.upgrade_impossible)))
        lines.append(f"DOWNGRADE rule (consumers of major {old_major} reading major {new_major} records): "
                     + (self.downgrade if self.downgrade is not None else
                        "none: " + "; ".join(self.downgrade_impossible)))
        if self.upgrade is None:
            lines.append(f"consumers pinned to major {new_major} cannot read the records of major {old_major}")
        else:
            lines += [f"consumers pinned to major {new_major} reading records of major {old_major}: {why}"
                      for why in self.upgrade_refused]
        if self.downgrade is None:
            lines.append(f"consumers pinned to major {old_major} cannot read the records of major {new_major}")
        else:
            lines += [f"consumers pinned to major {old_major} reading records of major {new_major}: {why}"
                      for why in self.downgrade_refused]
        if self.python_blocked and (self.upgrade is not None or self.downgrade is not None):
            lines.append("confluent-kafka-python consumers cannot apply these rules: its JSONata executor "
                         "(jsonata-python) refuses records holding bytes or decimal values (fields "
                         + ", ".join(self.python_blocked) + "); Java consumers are not affected")
        return lines


def rule_set_for(plan: MigrationPlan, old_major: int, new_major: int) -> dict[str, Any]:
    """The ``ruleSet`` of a new version: its UPGRADE and DOWNGRADE JSONata rules (those that exist). A new major's
    are ``upgrade_<old>_to_<new>``/``downgrade_<new>_to_<old>``; a minor version's (``old_major == new_major``, a
    version after the first of a major >= 2) ``upgrade_within_<major>``/``downgrade_within_<major>``.

    >>> rule_set_for(MigrationPlan(changes=("x",), upgrade="$", downgrade=None), 1, 2)["migrationRules"][0]["name"]
    'upgrade_1_to_2'
    >>> rule_set_for(MigrationPlan(changes=("x",), upgrade="$", downgrade=None), 2, 2)["migrationRules"][0]["name"]
    'upgrade_within_2'
    """
    rules = []
    doc = "; ".join(plan.changes)[:1000]
    minor = old_major == new_major
    if plan.upgrade is not None:
        rules.append({"name": f"upgrade_within_{new_major}" if minor else f"upgrade_{old_major}_to_{new_major}",
                      "doc": doc, "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA", "expr": plan.upgrade})
    if plan.downgrade is not None:
        rules.append({"name": f"downgrade_within_{new_major}" if minor else f"downgrade_{new_major}_to_{old_major}",
                      "doc": doc, "kind": "TRANSFORM", "mode": "DOWNGRADE", "type": "JSONATA",
                      "expr": plan.downgrade})
    return {"migrationRules": rules}


# -- JSONata building blocks -------------------------------------------------------------------------------


def _lit(value: Any) -> str:
    return json.dumps(value)


def _name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


#: While a direction is built: what its rules refuse, one sentence per (column, reason).
_REFUSED: ContextVar[list[str] | None] = ContextVar("_REFUSED", default=None)


def _out(target: FieldShape, column: str, what: str) -> str:
    """A value that does not fit: a rule failure naming the column and the value, nullable target or not (MySQL's
    strict ALTER refuses the value; a null would be a value MySQL never holds)."""
    refused = _REFUSED.get()
    if refused is not None:
        sentence = f"column {column}: a value that {what} fails the record"
        if sentence not in refused:
            refused.append(sentence)
    failure = f'$error("column {column}: " & $string($v) & " {what}")'
    if target.nullable:  # a NULL is no value to refuse: it stays NULL
        return f"($not($exists($v)) or $v = null ? null : {failure})"
    return failure


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


def _unscaled_rounded(n: str, drop: int) -> str:
    """The integer ``n`` (exact, under 2^53) with its last ``drop`` digits rounded off half away from zero, in
    integer arithmetic (exact, where rounding the double ``n / 10^drop`` is not at a tie: 1.005 is 1.00499...)."""
    q = 10**drop
    return f"($a := $abs({n}); $r := $a % {q}; $m := ($a - $r) / {q} + ($r * 2 >= {q} ? 1 : 0); {n} < 0 ? -$m : $m)"


def _decimal_rescaled(ss: int, ds: int) -> str:
    """A DECIMAL of scale ``ss`` rounded to the smaller scale ``ds`` as MySQL does (half away from zero, on the
    decimal digits). ``$v * 10^ss`` is within a tiny fraction of the unscaled integer for a value of at most 15
    significant digits (its double, or one step off it), so ``$round`` gives that integer exactly; the rest is integer
    arithmetic. A longer value comes out differently for neighbouring doubles, which a reader checking them refuses
    (:mod:`avro_registry_sink.schema.follow`)."""
    return f"($n := $round($v * {10**ss}); {_unscaled_rounded('$n', ss - ds)} / {10**ds})"


#: A decimal text MySQL reads: sign, integer digits, fraction digits (an exponent form goes through a double).
_DECIMAL_TEXT = r"/^\s*([-+]?)([0-9]*)\.?([0-9]*)\s*$/"


def _text_to_decimal(dst: FieldShape, column: str) -> str:
    """Text into a DECIMAL(p,s) as MySQL's ALTER reads it: the number rounded to the scale half away from zero
    (``1.239`` is 1.24, a note, not an error), out of range or no number refused. The rounding is done on the
    text's digits (the integer part and the first s+1 fraction digits, exact as an integer up to 15 digits); a text
    with an exponent is read through a double."""
    precision, scale = dst.decimal or (10, 0)
    bound = 10 ** (precision - scale)
    out_range = _out(dst, column, "is out of range for " + dst.sql)
    digits = (f'$replace($g[1] & $substring($g[2] & "{"0" * (scale + 1)}", 0, {scale + 1}), /^0+/, "")')
    exact = (f'($d := {digits}; $n := $d = "" ? 0 : $number($d); $m := {_unscaled_rounded("$n", 1)}; '
             f'$x := ($g[0] = "-" ? -$m : $m) / {10**scale}; $length($d) > 15 ? '
             f'{_out(dst, column, "has more digits than JSONata holds exactly (15)")} : '
             f'$abs($x) < {bound} ? $x : {out_range})')
    scaled = f"$number($trim($v)) * {10**scale}"
    through_double = (f"($x := {_round_half_away(scaled)} / {10**scale}; $abs($x) < {bound} ? $x : {out_range})")
    return (f'($g := $match($v, {_DECIMAL_TEXT}).groups; $exists($g) and ($g[1] & $g[2]) != "" ? {exact} : '
            f'$contains($v, {_NUMBER_TEXT}) ? {through_double} : {_out(dst, column, "is not a " + dst.sql)})')


def _convert(src: FieldShape, dst: FieldShape, column: str) -> tuple[str | None, str]:
    """JSONata turning ``$v`` (a non-null value of ``src``) into ``dst``; (None, why) when it cannot."""
    s, d = src.base, dst.base
    temporal = _temporal(src, dst, column)
    if temporal is not None:
        return temporal
    if s in _INTEGERS and d in _INTEGERS:
        expr = _integer_range(src, dst, column)
        return expr, ("same type" if _domain(src) == _domain(dst) else "widening" if expr == "$v" else
                      f"narrowing to the range of {dst.sql}")
    if src.decimal is not None and dst.decimal is not None:
        (sp, ss), (dp, ds) = src.decimal, dst.decimal
        expr = "$v"
        if ds < ss:
            expr = _decimal_rescaled(ss, ds)
        # fewer integer digits, or as many and a smaller scale (99.999 rounds to 100.00): the range is checked
        if dp - ds < sp - ss or (ds < ss and dp - ds == sp - ss):
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
            return _text_to_decimal(dst, column), "from string (rounded to the scale)"
        if d == "string" and src.decimal is not None:
            # MySQL prints a DECIMAL with all its scale's digits (12.3400, not 12.34)
            scale = src.decimal[1]
            picture = "0." + "0" * scale if scale else "0"
            return f'$formatNumber($v, "{picture}")', "to string (with the column's scale)"
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
        low, high = _domain(dst)
        return _range_guard(_round_half_away("$v"), low, min(high, _LONG_RANGE[1]), dst, column), "narrowing (rounded)"
    if d == "string" and s in _INTEGERS:
        text = _long_text(dst, column)
        if (src.tidb_type or "").upper() == "BIGINT UNSIGNED":  # a negative long is a value from 2^63 up
            text = f"$v < 0 ? {_out(dst, column, _INEXACT)} : {text}"
        return text, "to string" + (" (exact up to 2^53)" if s == "long" else "")
    if d == "string" and s in _FLOATS:
        return "$string($v)", "to string"
    if s == "string" and d in _INTEGERS:
        low, high = _domain(dst)
        rng = (max(low, _EXACT[0]), min(high, _EXACT[1]))
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


def _members(src: FieldShape, dst: FieldShape, column: str, expr: str) -> str:
    """``expr`` (the text of a value going into an ENUM or SET column) checked against the column's members, as
    MySQL's ALTER does (error 1265 for a value that is no member), and a SET's members put in the column's order
    (MySQL stores a SET as a bitmask and prints its members in the order of the definition: ``x,y`` is ``y,x`` in
    ``SET('y','x')``). Unchanged when every value of the source is a member already, in the same order."""
    kind = (dst.tidb_type or "").upper()
    if kind not in ("ENUM", "SET") or not dst.allowed or dst.base != "string" or src.base != "string":
        return expr
    same_kind = (src.tidb_type or "").upper() == kind
    members = list(dst.allowed)
    kept = [m for m in members if m in src.allowed]
    if same_kind and set(src.allowed) <= set(members) and (kind == "ENUM" or kept == list(src.allowed)):
        return expr
    listed = "(" + ",".join("'" + m.replace("'", "''") + "'" for m in members) + ")"
    out = _out(dst, column, f"is not a member of {kind}{listed}")
    if kind == "ENUM":
        guard = f"$x in {_lit(members)} ? $x : {out}"
    else:
        guard = (f'$x = "" ? "" : ($p := $split($x, ","); $count($p[$not($ in {_lit(members)})]) > 0 ? {out} : '
                 f'$join({_lit(members)}[$ in $p], ","))')
    return f"($x := {expr}; {guard})"


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


# -- temporal conversions (MySQL 8's, see the module doc) ---------------------------------------------------

_TEMPORAL = ("DATE", "DATETIME", "TIMESTAMP", "TIME", "YEAR")
_ZERO_DATE = "0000-00-00"
#: TIMESTAMP's range, as the changefeed's (UTC) text; the zero value is allowed besides.
_TS_LOW, _TS_HIGH = "1970-01-01 00:00:01", "2038-01-19 03:14:07.999999"
_DATE_TEXT = r"/^\s*([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:[ T]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2}))?\s*$/"
_TIME_TEXT = r"/^\s*(-?)([0-9]{1,3}):([0-9]{1,2})(?::([0-9]{1,2}))?\s*$/"
_FRACTION = r"/\.[0-9]*[1-9]/"


def _kind(f: FieldShape) -> str | None:
    """The temporal/number/text family of a field, for the conversions between them."""
    t = (f.tidb_type or "").upper()
    if f.decimal is not None:
        return None
    if f.base == "string" and t in ("DATE", "DATETIME", "TIMESTAMP", "TIME"):
        return t
    if f.base in _INTEGERS:
        return "YEAR" if t == "YEAR" else "INTEGER"
    if f.base == "string":
        return "TEXT"
    return None


def _pad(expr: str, width: int) -> str:
    return f'$pad($string({expr}), -{width}, "0")'


def _date_from_parts(dst: FieldShape, column: str, kind: str) -> str:
    """JSONata (after ``$y $mo $da $h $mi $s`` are set) giving the DATE/DATETIME/TIMESTAMP text, or OUT."""
    dim = ('($mo = 2 ? (($y % 4 = 0 and $y % 100 != 0) or $y % 400 = 0 ? 29 : 28) : '
           '$mo in [4, 6, 9, 11] ? 30 : 31)')
    date = f'{_pad("$y", 4)} & "-" & {_pad("$mo", 2)} & "-" & {_pad("$da", 2)}'
    time = f'{_pad("$h", 2)} & ":" & {_pad("$mi", 2)} & ":" & {_pad("$s", 2)}'
    text = date if kind == "DATE" else f'{date} & " " & {time}'
    valid = f"$mo >= 1 and $mo <= 12 and $da >= 1 and $da <= {dim} and $h < 24 and $mi < 60 and $s < 60"
    zero = _lit(_ZERO_DATE if kind == "DATE" else _ZERO_DATE + " 00:00:00")
    out = _out(dst, column, "is not a valid " + kind)
    made = f"($y = 0 and $mo = 0 and $da = 0 and $h = 0 and $mi = 0 and $s = 0) ? {zero} : {valid} ? {text} : {out}"
    if kind == "TIMESTAMP":
        made = f"($t := ({made}); {_ts_guard('$t', dst, column)})"
    return made


def _ts_guard(expr: str, dst: FieldShape, column: str) -> str:
    return (f'({expr} = "{_ZERO_DATE} 00:00:00" or ({expr} >= "{_TS_LOW}" and {expr} <= "{_TS_HIGH}")) ? {expr} : '
            f'{_out(dst, column, "is out of the range of TIMESTAMP (" + _TS_LOW + " to 2038-01-19 03:14:07 UTC)")}')


def _number_to_datetime(dst: FieldShape, column: str, kind: str, number: str = "$v") -> str:
    """MySQL's reading of a number as a date: YYMMDD, YYYYMMDD, YYMMDDhhmmss or YYYYMMDDhhmmss (padded with
    zeros on the left to the next of these lengths; a two-digit year 70-99 is 19xx, 00-69 20xx)."""
    return (f'($n := {number}; $n < 0 or $n > 99999999999999 ? {_out(dst, column, "is not a valid " + kind)} : '
            f'($d := $string($n); $l := $length($d); '
            '$d := $pad($d, -($l <= 6 ? 6 : $l <= 8 ? 8 : $l <= 12 ? 12 : 14), "0"); '
            '$w := ($length($d) = 8 or $length($d) = 14) ? 4 : 2; $y := $number($substring($d, 0, $w)); '
            '$y := $w = 2 ? ($y < 70 ? 2000 + $y : 1900 + $y) : $y; '
            '$y := $n = 0 ? 0 : $y; '
            '$mo := $number($substring($d, $w, 2)); $da := $number($substring($d, $w + 2, 2)); '
            '$h := $length($d) > 8 ? $number($substring($d, $w + 4, 2)) : 0; '
            '$mi := $length($d) > 8 ? $number($substring($d, $w + 6, 2)) : 0; '
            '$s := $length($d) > 8 ? $number($substring($d, $w + 8, 2)) : 0; '
            f'{_date_from_parts(dst, column, kind)}))')


def _text_to_datetime(dst: FieldShape, column: str, kind: str) -> str:
    """Text as MySQL reads it into a DATE/DATETIME/TIMESTAMP: ``Y-M-D[ h:m:s]`` (one or two digits for all but
    the year) or digits only (as a number); anything else, and fractional seconds, refused."""
    return (f'$contains($v, /^\\s*[0-9]{{1,14}}\\s*$/) ? {_number_to_datetime(dst, column, kind, "$number($trim($v))")} : '
            f'($g := $match($v, {_DATE_TEXT}).groups; $exists($g) ? '
            '($y := $number($g[0]); $mo := $number($g[1]); $da := $number($g[2]); '
            '$h := $g[3] ? $number($g[3]) : 0; $mi := $g[4] ? $number($g[4]) : 0; $s := $g[5] ? $number($g[5]) : 0; '
            f'{_date_from_parts(dst, column, kind)}) : {_out(dst, column, "is not a " + kind + " MySQL reads")})')


def _number_to_time(dst: FieldShape, column: str, number: str = "$v") -> str:
    """MySQL's reading of a number as a TIME: [-]HHMMSS (hours up to 838)."""
    return (f'($n := {number}; $a := $abs($n); $s := $a % 100; $mi := $floor($a / 100) % 100; '
            '$h := $floor($a / 10000); $mi < 60 and $s < 60 and $h <= 838 ? '
            f'($n < 0 ? "-" : "") & {_pad("$h", 2)} & ":" & {_pad("$mi", 2)} & ":" & {_pad("$s", 2)} : '
            f'{_out(dst, column, "is not a valid TIME")})')


def _text_to_time(dst: FieldShape, column: str) -> str:
    return (f'$contains($v, /^\\s*-?[0-9]{{1,7}}\\s*$/) ? {_number_to_time(dst, column, "$number($trim($v))")} : '
            f'($g := $match($v, {_TIME_TEXT}).groups; $exists($g) and $number($g[2]) < 60 and '
            '($g[3] ? $number($g[3]) : 0) < 60 and $number($g[1]) <= 838 ? '
            f'($g[0] = "-" ? "-" : "") & {_pad("$number($g[1])", 2)} & ":" & {_pad("$number($g[2])", 2)} & ":" & '
            f'{_pad("($g[3] ? $number($g[3]) : 0)", 2)} : {_out(dst, column, "is not a TIME MySQL reads")})')


def _to_year(dst: FieldShape, column: str, number: str = "$v") -> str:
    return (f'($n := {number}; $n = 0 ? 0 : $n >= 1 and $n <= 69 ? $n + 2000 : $n >= 70 and $n <= 99 ? $n + 1900 : '
            f'$n >= 1901 and $n <= 2155 ? $n : {_out(dst, column, "is out of range for YEAR")})')


def _text_to_year(dst: FieldShape, column: str) -> str:
    # a text of one or two digits is a two-digit year ('0' is 2000, the number 0 is 0000)
    return (f'$contains($v, /^\\s*[0-9]{{1,4}}\\s*$/) ? ($t := $trim($v); $length($t) <= 2 ? '
            f'{_to_year(dst, column, "($number($t) = 0 ? 2000 : $number($t))")} : '
            f'{_to_year(dst, column, "$number($t)")}) : {_out(dst, column, "is not a YEAR")}')


def _digits(dst: FieldShape, column: str, text: str, *, fraction: bool = True) -> str:
    """The number of a DATE/DATETIME/TIMESTAMP/TIME text's digits (sign kept); fractional seconds refused."""
    number = (f'($n := $number($replace($replace({text}, /\\.[0-9]*$/, ""), /[^0-9]/, "")); '
              '$substring($v, 0, 1) = "-" ? -$n : $n)')
    if not fraction:
        return number
    return f'$contains($v, {_FRACTION}) ? {_out(dst, column, "has fractional seconds (MySQL rounds them)")} : {number}'


def _temporal(src: FieldShape, dst: FieldShape, column: str) -> tuple[str | None, str] | None:
    """MySQL 8's conversion between a temporal type (DATE DATETIME TIMESTAMP TIME YEAR) and another temporal type,
    an integer or text; ``None`` when neither side is temporal or both are of one kind."""
    s, d = _kind(src), _kind(dst)
    if s is None or d is None or s == d or not ({s, d} & set(_TEMPORAL)):
        return None
    pair = f"{s} to {d}"
    if s == "YEAR" and d == "INTEGER":
        return _integer_range(src, dst, column), pair
    if d == "YEAR" and s in ("INTEGER", "TEXT"):
        return (_to_year(dst, column) if s == "INTEGER" else _text_to_year(dst, column)), pair
    if d == "TEXT":  # the text TiCDC prints is MySQL's text of the value (YEAR as four digits)
        return ('$v = 0 ? "0000" : $string($v)' if s == "YEAR" else "$v"), pair
    if s in ("TIME", "YEAR") and d in ("DATE", "DATETIME", "TIMESTAMP", "YEAR"):
        why = ("takes the date of the day the ALTER ran (CURRENT_DATE): no record holds it" if s == "TIME" and d != "YEAR"
               else "is refused by MySQL's ALTER (not a " + d + ")")
        return _out(dst, column, why), pair
    if d == "YEAR":  # DATE/DATETIME/TIMESTAMP to YEAR: MySQL's ALTER refuses them
        return _out(dst, column, "is refused by MySQL's ALTER (not a YEAR)"), pair
    if d == "INTEGER":
        number = _digits(dst, column, "$v", fraction=s != "DATE")
        low, high = {"DATE": (0, 99991231), "TIME": (-8385959, 8385959)}.get(s, (0, 99991231235959))
        d_low, d_high = _domain(dst)
        return (number if d_low <= low and high <= d_high else _integer_range(None, dst, column, number)), pair
    if d == "TIME":
        if s == "TEXT":
            return _text_to_time(dst, column), pair
        if s in ("INTEGER", "YEAR"):
            return _number_to_time(dst, column), pair
        if s == "DATE":
            return '"00:00:00"', pair
        return "$substring($v, 11)", pair  # DATETIME/TIMESTAMP: the time part
    # d is DATE, DATETIME or TIMESTAMP
    if s == "TEXT":
        return (f'$contains($v, {_FRACTION}) ? {_out(dst, column, "has fractional seconds")} : '
                f'{_text_to_datetime(dst, column, d)}'), pair
    if s == "INTEGER":
        return _number_to_datetime(dst, column, d), pair
    if d == "DATE":  # from DATETIME/TIMESTAMP: the time part rounded (23:59:59.5 and more is the next day)
        return ('$contains($v, /^[0-9]{4}-[0-9]{2}-[0-9]{2} 23:59:59\\.[5-9]/) and $substring($v, 0, 10) != '
                f'"{_ZERO_DATE}" ? $fromMillis($toMillis($substring($v, 0, 10), "[Y0001]-[M01]-[D01]") + 86400000, '
                '"[Y0001]-[M01]-[D01]") : $substring($v, 0, 10)'), pair
    if s == "DATE":
        text = '$v & " 00:00:00"'
        return (text if d == "DATETIME" else f"($t := {text}; {_ts_guard('$t', dst, column)})"), pair
    if d == "TIMESTAMP":  # from DATETIME: the same text, within TIMESTAMP's range
        return _ts_guard("$v", dst, column), pair
    return "$v", pair  # TIMESTAMP to DATETIME


# -- integers of every TiDB type ------------------------------------------------------------------------------


def _domain(f: FieldShape) -> tuple[int, int]:
    """The values a field's integer column holds (its TiDB type's range; BIGINT UNSIGNED's above 2^63 are negative
    longs in TiCDC's default ``long`` mode)."""
    t = (f.tidb_type or "").upper()
    known = {"INT UNSIGNED": (0, 2**32 - 1), "BIGINT UNSIGNED": (0, 2**64 - 1), "YEAR": (0, 2155),
             "BIGINT": _LONG_RANGE, "INT": _INT_RANGE}
    return known.get(t, _INT_RANGE if f.base == "int" else _LONG_RANGE)


def _integer_range(src: FieldShape | None, dst: FieldShape, column: str, expr: str = "$v") -> str:
    """``expr`` (an integer of ``src``'s column, or computed when ``src`` is None) guarded by ``dst``'s range."""
    low, high = _domain(dst)
    high = min(high, _LONG_RANGE[1])
    if src is not None:
        s_low, s_high = _domain(src)
        if (src.tidb_type or "").upper() == "BIGINT UNSIGNED":  # a negative long is a value from 2^63 up
            if (dst.tidb_type or "").upper() == "BIGINT UNSIGNED":
                return expr
            low = max(low, 0)
        elif low <= s_low and s_high <= high:
            return expr
    return _range_guard(expr, low, high, dst, column)


# -- the diff ----------------------------------------------------------------------------------------------


@dataclass
class _Side:
    """One direction being built: the value of every field of the target version, what cannot be written, and
    what its rules refuse."""

    values: dict[str, str] = field(default_factory=dict)
    impossible: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def expression(self, target: list[FieldShape]) -> str | None:
        # A projection: exactly the target's fields, in its order. Confluent's clients do not resolve a rule's
        # output against the reader schema, so a field left out would be missing and one more would stay.
        if self.impossible:
            return None
        return "{" + ", ".join(f"{_lit(f.name)}: {self.values[f.name]}" for f in target) + "}"


def _fields(schema: Mapping[str, Any] | str) -> list[FieldShape] | None:
    data = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(data, dict) or data.get("type") != "record" or not isinstance(data.get("fields"), list):
        return None
    return [FieldShape.parse(f) for f in data["fields"]]


def _absent(src: FieldShape) -> str | None:
    """What a source field missing from the record means: its Avro default (null for a nullable column). A record
    of an older version without migration rules of its own (a minor version before the first major) comes to a
    rule as it was written, without the fields added since."""
    if not src.has_default or (src.base == "bytes" and src.default is not None):
        return None
    return _lit(src.default)


def _same(src: FieldShape) -> str:
    """The source field's value, as it is."""
    absent = _absent(src)
    return f"$.{_name(src.name)}" if absent is None else f"($exists($.{_name(src.name)}) ? $.{_name(src.name)} : {absent})"


def _moved(src: FieldShape, dst: FieldShape, column: str) -> tuple[str | None, str, bool]:
    """The value of ``dst`` made from the source field (null handled): (expression, what, whether the value is
    converted, i.e. not what Avro schema resolution would give) or (None, why, True)."""
    plain, what = _convert(src, dst, column)
    if plain is None:
        return None, what, True
    expr = _members(src, dst, column, plain)
    null_case = "null"
    if src.nullable:
        filled, null_what = _fill(dst, column, False, "is NOT NULL now") if not dst.nullable else ("null", "")
        if filled is None:
            return None, null_what, True
        null_case = filled
        if not dst.nullable:
            what = f"{what}; null becomes {null_what}"

    def nulls(e: str) -> str:
        return f"$v = null ? {null_case} : {e}" if src.nullable and (e != "$v" or not dst.nullable) else e

    # The members' check (and a SET's order) alone does not make the change a conversion: Avro resolution reads
    # such a minor version's records as they are (the schema manager keeps ENUM/SET member changes minor).
    converted = nulls(plain) != "$v"
    expr = nulls(expr)
    if expr == "$v" and src.name == dst.name:
        return _same(src), what, False
    absent = _absent(src)
    fill = "" if absent is None else f" $v := $exists($v) ? $v : {absent};"
    return f"($v := $.{_name(src.name)};{fill} {expr})", what, converted


def plan_migration(old_schema: Mapping[str, Any] | str, new_schema: Mapping[str, Any] | str,
                   lineage: ColumnLineage | None = None, *, is_key: bool = False) -> MigrationPlan:
    """The migration from ``old_schema`` to ``new_schema`` (Avro JSON of flat records).

    ``lineage``: what the DDL between the two said (renames, re-added columns); without it fields are matched
    by name. ``is_key``: the schemas are keys (a key field cannot be made up). Each rule is a projection onto the
    whole target version (every field, defaults filled, nothing else).

    >>> old = {"type": "record", "name": "t", "fields": [{"name": "a", "type": "int"}]}
    >>> new = {"type": "record", "name": "t", "fields": [{"name": "b", "type": "int"}]}
    >>> plan = plan_migration(old, new, ColumnLineage(renamed=(("b", "a"),)))
    >>> plan.changes, plan.conversions
    (('a renamed to b',), ('b',))
    >>> import jsonata
    >>> jsonata.Jsonata(plan.upgrade).evaluate({"a": 7}), jsonata.Jsonata(plan.downgrade).evaluate({"b": 7})
    ({'b': 7}, {'a': 7})
    """
    lineage = lineage or ColumnLineage()
    old_fields, new_fields = _fields(old_schema), _fields(new_schema)
    if old_fields is None or new_fields is None:
        why = "the schemas are not flat records"
        return MigrationPlan((why,), None, None, (why,), (why,), conversions=(why,))
    old_by = {f.name: f for f in old_fields}
    renamed = {sanitize_name(new): sanitize_name(old) for new, old in lineage.renamed}
    fresh = {sanitize_name(c) for c in lineage.fresh}
    up, down = _Side(), _Side()
    changes: list[str] = []
    converted: list[str] = []
    used: set[str] = set()

    for dst in new_fields:
        origin = renamed.get(dst.name, None if dst.name in fresh else dst.name)
        src = old_by.get(origin) if origin is not None else None
        if src is None:  # added (or re-added): old records have no value for it
            value, what = _fill(dst, dst.name, is_key, "is new")
            readded = dst.name in old_by
            if readded:
                used.add(dst.name)
                converted.append(dst.name)
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
            if value is None:
                up.impossible.append(what)
            else:
                up.values[dst.name] = value
            continue
        used.add(src.name)
        label = src.name if src.name == dst.name else f"{src.name} renamed to {dst.name}"
        token = _REFUSED.set(up.refused)
        try:
            forward, what_up, conv_up = _moved(src, dst, dst.name)
        finally:
            _REFUSED.reset(token)
        token = _REFUSED.set(down.refused)
        try:
            backward, what_down, conv_down = _moved(dst, src, src.name)
        finally:
            _REFUSED.reset(token)
        type_change = ((src.base, src.decimal, src.nullable) != (dst.base, dst.decimal, dst.nullable)
                       or conv_up or conv_down)
        if src.name != dst.name or type_change:
            detail = ""
            if type_change:
                detail = (f"{src.sql}{' NULL' if src.nullable else ' NOT NULL'} -> "
                          f"{dst.sql}{' NULL' if dst.nullable else ' NOT NULL'} (up: {what_up}; down: {what_down})")
            changes.append(f"{label}{': ' + detail if detail else ''}")
        if src.name != dst.name or conv_up or conv_down:
            converted.append(dst.name)
        if forward is None:
            up.impossible.append(f"column {dst.name}: {what_up}")
        else:
            up.values[dst.name] = forward
        if backward is None:
            down.impossible.append(f"column {src.name}: {what_down}")
        else:
            down.values[src.name] = backward
    for src in old_fields:
        if src.name in used:
            continue
        value, what = _fill(src, src.name, is_key, "was dropped")
        changes.append(f"{src.name} dropped ({src.sql}): gone going up; going down it gets {what}")
        if value is None:
            down.impossible.append(what)
        else:
            down.values[src.name] = value
    blocked = tuple(sorted({f.name for f in [*old_fields, *new_fields] if f.base == "bytes"}))
    return MigrationPlan(tuple(changes) or ("no field changed (only names or attributes of the record)",),
                         up.expression(new_fields), down.expression(old_fields), tuple(up.impossible),
                         tuple(down.impossible), blocked, tuple(converted), tuple(up.refused), tuple(down.refused))
