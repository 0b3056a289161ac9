"""Reading records of every major version of a subject in the shape of one major, as Confluent's clients do,
exact to the value: the migration chain of each writer version (computed once, from the registered versions) and
a record reader that runs it (fastavro and jsonata-python; no registry, no Spark).

The chain is Confluent's (``AbstractKafkaSchemaSerDe.getMigrations``, confluent-kafka-python's
``_get_migrations``): between the writer's version and the reader's, every version that has migration rules of
the direction (``UPGRADE`` going up, ``DOWNGRADE`` going down; ``UPDOWN`` both) is a step: going up its rules run
in order, going down in reverse order and the steps from the newest down. A record whose chain is empty (the
reader's own version, or no rules between) is read by Avro schema resolution against the reader schema; a record
with a chain is decoded with its writer schema alone and the rules' output is the record: it is not resolved
against the reader schema (so the rules must produce the reader's whole shape; a reader field they leave out is
refused here, not filled).

Exactness. JSONata computes with doubles and has no bytes, and jsonata-python refuses ``Decimal`` and ``bytes``
values (confluent-kafka-python then fails the record). Here a record holding such values (DECIMAL in precise mode,
BLOB/BINARY, any logical type fastavro turns into an object) runs the chain three times: each decimal as its
nearest double, then one step below and one step above it (``math.nextafter``); each other value as a text
marker, different in each run. An output field that is, in all three runs, the stand-in of one input field is
that field's value, restored exactly (a DECIMAL(38,10) of 30 digits copied or renamed by a rule comes out with
all its digits); any other output field must be the same in the three runs (a value the rule computed, not at a
rounding boundary of doubles) and is then converted exactly to the reader's type, or the record is refused:
:class:`RecordRefused` names the subject, the writer schema id, the column, the value and the reason. Never a
rounded value in silence.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from avro_registry_sink.errors import SourceError
from avro_registry_sink.schema.migration import field_kind

__all__ = ["FollowPlan", "MigrationStep", "RecordFollower", "RecordRefused", "RegisteredVersion", "plan_follow"]

MAJOR_VERSION = "major_version"  # the manager's metadata property (avro_registry_sink.manager.MAJOR_VERSION)
_MARK = "\x00avro-registry-sink:"


class RecordRefused(SourceError):
    """A record that cannot be read in the pinned shape exactly: subject, schema id, column, value, reason."""


@dataclass(frozen=True)
class RegisteredVersion:
    """One version of a subject as the registry holds it (``deleted``: soft-deleted, still in chains)."""

    version: int
    schema_id: int
    schema: str
    properties: Mapping[str, str] = field(default_factory=dict)
    rule_set: Mapping[str, Any] | None = None
    deleted: bool = False


@dataclass(frozen=True)
class MigrationStep:
    """The migration rules of one version that run on the way: ``(name, kind, expr)`` in the order they run."""

    mode: str  # UPGRADE or DOWNGRADE
    version: int
    rules: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class FollowPlan:
    """What executors need to read a subject's records in the shape of ``reader_version``: plain data only.

    ``writers``: schema id -> (writer version, writer schema text); ``chains``: schema id -> the steps from that
    writer to the reader (empty: Avro schema resolution); ``unfollowable``: schema id -> why its records cannot
    be read (a rule of a type other than JSONATA on the way).
    """

    subject: str
    major: int | None
    reader_version: int
    reader_schema: str
    writers: Mapping[int, tuple[int, str]]
    chains: Mapping[int, tuple[MigrationStep, ...]]
    unfollowable: Mapping[int, str] = field(default_factory=dict)


def _rules(version: RegisteredVersion, mode: str) -> list[Mapping[str, Any]]:
    rules = list((version.rule_set or {}).get("migrationRules") or [])
    return [r for r in rules if str(r.get("mode", "")).upper() in (mode, "UPDOWN")]


def _chain(by_number: Mapping[int, RegisteredVersion], source: int, target: int,
           subject: str) -> tuple[tuple[MigrationStep, ...], str | None]:
    """Confluent's migrations from version ``source`` to ``target``: (steps, None) or ((), why not)."""
    if source == target:
        return (), None
    mode = "UPGRADE" if source < target else "DOWNGRADE"
    low, high = sorted((source, target))
    steps: list[MigrationStep] = []
    for number in range(low + 1, high + 1):
        version = by_number.get(number)
        if version is None:  # permanently deleted: Confluent's client fails fetching it
            return (), f"version {number} of subject {subject!r} between {source} and {target} is gone"
        found = _rules(version, mode)
        if not found:
            continue
        run = [r for r in found if not r.get("disabled")]
        if mode == "DOWNGRADE":
            run.reverse()
        for rule in run:
            if str(rule.get("type", "")).upper() != "JSONATA":
                return (), (f"rule {rule.get('name')!r} of version {number} is of type {rule.get('type')!r}; this "
                            f"reader runs JSONATA rules only")
            if str(rule.get("kind", "TRANSFORM")).upper() not in ("TRANSFORM", "CONDITION"):
                return (), f"rule {rule.get('name')!r} of version {number} is of kind {rule.get('kind')!r}"
        steps.append(MigrationStep(mode, number, tuple((str(r.get("name")), str(r.get("kind", "TRANSFORM")).upper(),
                                                        str(r.get("expr"))) for r in run)))
    if mode == "DOWNGRADE":
        steps.reverse()
    return tuple(steps), None


def plan_follow(subject: str, versions: Iterable[RegisteredVersion], *, major: int | None = None,
                version: int | None = None) -> FollowPlan:
    """The plan reading every version's records of ``subject`` as the reader version: the latest live version
    whose ``major_version`` is ``major``, or ``version``.

    >>> v = [RegisteredVersion(1, 10, '"int"', {"major_version": "1"}),
    ...      RegisteredVersion(2, 11, '"long"', {"major_version": "2"}, {"migrationRules": [
    ...          {"name": "up", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA", "expr": "$"}]})]
    >>> plan = plan_follow("t-value", v, major=2)
    >>> plan.reader_version, plan.chains[10][0].rules, plan.chains[11]
    (2, (('up', 'TRANSFORM', '$'),), ())
    """
    every = sorted(versions, key=lambda v: v.version)
    if (major is None) == (version is None):
        raise ValueError("plan_follow takes a major or a version")
    if major is not None:
        live = [v for v in every if not v.deleted and v.properties.get(MAJOR_VERSION) == str(major)]
        if not live:
            majors = sorted({v.properties.get(MAJOR_VERSION, "-") for v in every if not v.deleted})
            raise RecordRefused(
                f"Subject {subject!r} has no live version of major {major} (metadata {MAJOR_VERSION}); its majors: "
                f"{', '.join(majors) or 'none'} (versions registered without {MAJOR_VERSION} show as '-').",
                subject=subject)
        reader = live[-1]
    else:
        matching = [v for v in every if v.version == version]
        if not matching:
            raise RecordRefused(f"Subject {subject!r} has no version {version}; its versions: "
                                f"{', '.join(str(v.version) for v in every)}.", subject=subject)
        reader = matching[0]
    by_number = {v.version: v for v in every}
    writers: dict[int, tuple[int, str]] = {}
    chains: dict[int, tuple[MigrationStep, ...]] = {}
    unfollowable: dict[int, str] = {}
    for v in every:
        if v.schema_id in writers:  # one id at two versions: the first holds it (the registry's lookup)
            continue
        writers[v.schema_id] = (v.version, v.schema)
        steps, why = _chain(by_number, v.version, reader.version, subject)
        if why is None:
            chains[v.schema_id] = steps
        else:
            unfollowable[v.schema_id] = why
    return FollowPlan(subject, major, reader.version, reader.schema, writers, chains, unfollowable)


# -- executors ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    name: str
    base: str  # int long float double string bytes boolean decimal other
    nullable: bool
    precision: int = 0
    scale: int = 0

    @property
    def sql(self) -> str:
        return f"DECIMAL({self.precision},{self.scale})" if self.base == "decimal" else self.base

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> _Target:
        kind, nullable = field_kind(spec)
        if kind.get("logicalType") == "decimal":
            return cls(str(spec["name"]), "decimal", nullable, int(kind.get("precision", 10)),
                       int(kind.get("scale", 0)))
        if kind.get("logicalType"):
            return cls(str(spec["name"]), "other", nullable)
        base = str(kind.get("type"))
        known = ("int", "long", "float", "double", "string", "bytes", "boolean")
        return cls(str(spec["name"]), base if base in known else "other", nullable)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _short(value: Any) -> str:
    text = format(value, "f") if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class RecordFollower:
    """Reads Confluent-framed records of ``plan.subject`` in the reader's shape (one per Python worker)."""

    def __init__(self, plan: FollowPlan) -> None:
        import fastavro

        self.plan = plan
        reader_json = json.loads(plan.reader_schema)
        self._reader = fastavro.parse_schema(reader_json)
        fields = reader_json.get("fields") if isinstance(reader_json, dict) else None
        self._targets = [_Target.of(f) for f in fields] if isinstance(fields, list) else None
        self._writers: dict[int, Any] = {}
        self._compiled: dict[str, Any] = {}
        self._known = ", ".join(map(str, sorted(plan.writers)))

    def _refuse(self, schema_id: int, message: str, **context: Any) -> RecordRefused:
        version = self.plan.writers.get(schema_id, (None,))[0]
        pinned = f"major {self.plan.major}" if self.plan.major is not None else f"version {self.plan.reader_version}"
        return RecordRefused(f"Subject {self.plan.subject!r}, schema id {schema_id} (version {version}) read as "
                             f"{pinned} (version {self.plan.reader_version}): {message}",
                             subject=self.plan.subject, schema_id=schema_id, **context)

    def read(self, data: bytes) -> dict[str, Any] | None:
        """The record of ``data`` (magic byte, schema id, Avro body) in the reader's shape."""
        import fastavro
        from fastavro.read import SchemaResolutionError

        if len(data) < 5 or data[0] != 0:
            raise ValueError(f"Not Confluent's wire format (magic byte 0, a 4-byte schema id): {data[:8].hex()}.")
        schema_id = int.from_bytes(data[1:5], "big")
        if schema_id not in self.plan.writers:
            raise RecordRefused(f"Schema id {schema_id} is not a version of subject {self.plan.subject!r} (its ids: "
                                f"{self._known}).", subject=self.plan.subject, schema_id=schema_id)
        if schema_id in self.plan.unfollowable:
            raise self._refuse(schema_id, self.plan.unfollowable[schema_id])
        writer = self._writers.get(schema_id)
        if writer is None:
            writer = self._writers[schema_id] = fastavro.parse_schema(json.loads(self.plan.writers[schema_id][1]))
        steps = self.plan.chains[schema_id]
        body = io.BytesIO(data[5:])
        if not steps:
            try:
                return fastavro.schemaless_reader(body, writer, self._reader)  # type: ignore[return-value]
            except SchemaResolutionError as exc:  # no rules between, and Avro resolution cannot read it
                raise self._refuse(schema_id, f"no migration rules between, and Avro schema resolution fails: {exc} "
                                              "(Confluent's clients fail on it too)") from None
        record = fastavro.schemaless_reader(body, writer, None)
        if not isinstance(record, dict) or self._targets is None:
            raise self._refuse(schema_id, "migration rules are followed for record schemas only")
        return self._migrate(schema_id, steps, record)

    # -- the chain ----------------------------------------------------------------------------------------

    def _run(self, schema_id: int, steps: Sequence[MigrationStep], message: Any) -> Any:
        import jsonata

        for step in steps:
            for name, kind, expr in step.rules:
                compiled = self._compiled.get(expr)
                if compiled is None:
                    compiled = self._compiled[expr] = jsonata.Jsonata(expr)
                try:
                    result = compiled.evaluate(message)
                except Exception as exc:  # the rule's own $error, or a JSONata type error
                    raise _RuleFailed(f"{step.mode} rule {name!r} of version {step.version} failed: {exc}") from exc
                if kind == "CONDITION":
                    if not result:
                        raise _RuleFailed(f"{step.mode} condition {name!r} of version {step.version} is false")
                else:
                    message = result
        return message

    def _migrate(self, schema_id: int, steps: Sequence[MigrationStep], record: dict[str, Any]) -> dict[str, Any]:
        opaque = {k: v for k, v in record.items() if not _plain(v)}
        if not opaque:
            return self._assemble(schema_id, opaque, (0,), [self._variant(schema_id, steps, record, opaque, 0)])
        first = self._variant(schema_id, steps, record, opaque, 0)
        # The common case first: the rules only pass the decimals and bytes on. A second run with every such value
        # a text marker agrees with the first (each value where its marker is, everything else equal) only if the
        # rules did nothing with them that tells a number from a text; else the two perturbed runs decide.
        try:
            marked = self._run(schema_id, steps, _with(record, opaque, "m"))
            return self._assemble(schema_id, opaque, (0, "m"), [first, marked], fast=True)
        except (_RuleFailed, _Differs):
            pass
        outputs = [first, *(self._variant(schema_id, steps, record, opaque, run) for run in (1, 2))]
        return self._assemble(schema_id, opaque, (0, 1, 2), outputs)

    def _variant(self, schema_id: int, steps: Sequence[MigrationStep], record: dict[str, Any],
                 opaque: Mapping[str, Any], variant: int) -> Any:
        try:
            return self._run(schema_id, steps, _with(record, opaque, variant) if opaque else record)
        except _RuleFailed as exc:
            text = re.sub(re.escape(_MARK) + r"([^:]*):[-m]*", r"<the value of \1>", str(exc))
            raise self._refuse(schema_id, f"{text} (record {_short(record)})") from None

    def _assemble(self, schema_id: int, opaque: Mapping[str, Any], variants: Sequence[int | str],
                  outputs: Sequence[Any], *, fast: bool = False) -> dict[str, Any]:
        """The reader's row from the runs' outputs (``variants``: the stand-ins each run had); ``fast``: raise
        :class:`_Differs` where the full check (three runs) must decide."""
        first = outputs[0]
        if not isinstance(first, dict):
            raise self._refuse(schema_id, f"the migration rules give {_short(first)}, not a record")
        assert self._targets is not None
        row: dict[str, Any] = {}
        for target in self._targets:
            if target.name not in first:
                raise self._refuse(schema_id, f"column {target.name}: the migration rules give no value for it "
                                              f"(Confluent's clients do not fill it from the reader schema either)",
                                   column=target.name)
            values = [o.get(target.name) if isinstance(o, dict) else None for o in outputs]
            source = _copied(values, opaque, variants)
            if source is not None:
                row[target.name] = self._convert(schema_id, target, opaque[source], restored_from=source)
                continue
            marked = any(_marked(v) for v in values)
            differs = any(not _same(values[0], v) for v in values[1:])
            if fast and (marked or differs):
                raise _Differs
            if marked:
                names = ", ".join(k for k, v in opaque.items() if not isinstance(v, Decimal))
                raise self._refuse(schema_id, f"column {target.name}: the rules use the bytes of a column as text "
                                              f"({names}); JSONata has no bytes", column=target.name)
            if differs:
                long = [k for k, v in opaque.items() if isinstance(v, Decimal) and not _fits_double(v)]
                why = (f"{', '.join(long)} has more than the 15 significant digits JSONata's doubles hold" if long
                       else "the result depends on how they round to doubles (a rounding boundary)")
                used = ", ".join(f"{k}={_short(v)}" for k, v in opaque.items())
                raise self._refuse(
                    schema_id, f"column {target.name}: the rules compute its value from values JSONata cannot hold "
                               f"as they are ({used}), and {why}: the rules give {_short(values[0])}; refused "
                               f"rather than rounded", column=target.name, value=_short(values[0]))
            row[target.name] = self._convert(schema_id, target, values[0], restored_from=None)
        return row

    # -- into the reader's types --------------------------------------------------------------------------

    def _convert(self, schema_id: int, target: _Target, value: Any, *, restored_from: str | None) -> Any:
        def refuse(reason: str) -> RecordRefused:
            return self._refuse(schema_id, f"column {target.name} ({target.sql}): value {_short(value)} {reason}",
                                column=target.name, value=_short(value))

        if value is None:
            if not target.nullable:
                raise refuse("is null and the column is NOT NULL in the reader's schema")
            return None
        base = target.base
        if isinstance(value, bool) or base == "boolean":
            if base == "boolean" and isinstance(value, bool):
                return value
            raise refuse(f"does not fit a {base} field")
        if base == "decimal":
            return self._decimal(target, value, refuse, restored=restored_from is not None)
        if isinstance(value, Decimal):  # a decimal restored into a field of another type
            if base == "string":
                return format(value, "f")
            if base in ("float", "double"):
                return float(value)
            if base in ("int", "long") and value == value.to_integral_value():
                return self._integer(target, int(value), refuse)
            raise refuse(f"does not fit a {base} field")
        if isinstance(value, (bytes, bytearray)):
            if base == "bytes":
                return bytes(value)
            if base == "string":
                try:
                    return bytes(value).decode("utf-8")
                except UnicodeDecodeError:
                    raise refuse("is not UTF-8 text") from None
            raise refuse(f"does not fit a {base} field")
        if base in ("int", "long"):
            if isinstance(value, float):
                if not value.is_integer():
                    raise refuse("is not an integer")
                value = int(value)
            if not isinstance(value, int):
                raise refuse(f"does not fit a {base} field")
            return self._integer(target, value, refuse)
        if base in ("float", "double"):
            if isinstance(value, (int, float)):
                return float(value)
            raise refuse(f"does not fit a {base} field")
        if base == "string":
            if isinstance(value, str):
                return value
            raise refuse("is not a string")
        if base == "bytes":
            if isinstance(value, str):
                return value.encode("utf-8")
            raise refuse("is not bytes or text")
        if restored_from is None and not _plain(value):
            raise refuse(f"does not fit a {base} field")
        return value

    @staticmethod
    def _integer(target: _Target, value: int, refuse: Any) -> int:
        bits = 31 if target.base == "int" else 63
        if not -(2**bits) <= value < 2**bits:
            raise refuse(f"is out of range for {target.base}")
        return value

    @staticmethod
    def _decimal(target: _Target, value: Any, refuse: Any, *, restored: bool) -> Decimal:
        with localcontext(prec=200):
            return RecordFollower._decimal_in(target, value, refuse, restored=restored)

    @staticmethod
    def _decimal_in(target: _Target, value: Any, refuse: Any, *, restored: bool) -> Decimal:
        if isinstance(value, Decimal):
            exact = value
        elif isinstance(value, int):
            exact = Decimal(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise refuse("is not a finite number")
            exact = Decimal(repr(value))  # the shortest text of the double: what JSONata prints
        elif isinstance(value, str):
            try:
                exact = Decimal(value.strip())
            except InvalidOperation:
                raise refuse("is not a number") from None
        else:
            raise refuse("is not a number")
        quantum = Decimal(1).scaleb(-target.scale)
        scaled = exact.quantize(quantum) if exact.adjusted() < target.precision + 2 else None
        if scaled is None or scaled != exact:
            raise refuse(f"has more digits after the point than {target.sql} holds; refused rather than rounded"
                         + ("" if restored else " (a value computed by the rules with doubles)"))
        if scaled.adjusted() >= target.precision - target.scale:
            raise refuse(f"is out of range for {target.sql}")
        return scaled


class _RuleFailed(Exception):
    pass


class _Differs(Exception):
    """The marker run does not agree with the first: the perturbed runs decide."""


def _with(record: dict[str, Any], opaque: Mapping[str, Any], variant: int | str) -> dict[str, Any]:
    return {**record, **{k: _stand_in(k, v, variant) for k, v in opaque.items()}}


def _stand_in(name: str, value: Any, run: int | str) -> Any:
    """What JSONata gets for a value it cannot hold, in run 0, 1 (below) and 2 (above), and ``"m"`` (a marker text
    for every such value).

    A decimal of at most 15 significant digits is its double, exactly as a JSON number of the same text parses
    (and JSONata prints it back): unless the double is the decimal exactly (0, 12.25), runs 1 and 2 move it one step
    of the double (a zero moved would print as ``-0.00``), so a result at a rounding boundary
    of doubles differs between runs. A longer decimal moves by a relative 10^-9 (far above what the double lost,
    and visible in JSONata's 15 printed digits): only a copy of it, or a result that does not depend on it, is
    the same in all runs.
    """
    if run == "m":
        return f"{_MARK}{name}:m"
    if isinstance(value, Decimal) and value.is_finite():
        near = float(value)
        if run == 0 or Decimal(near) == value:  # the double is the value (0, 1.5): nothing was rounded to move
            return near
        if _fits_double(value) or near == 0:
            return math.nextafter(near, -math.inf if run == 1 else math.inf)
        return near - abs(near) * 1e-9 if run == 1 else near + abs(near) * 1e-9
    return f"{_MARK}{name}:{'-' * int(run)}"


def _fits_double(value: Decimal) -> bool:
    """At most 15 significant digits: the double of its text prints back as the same number."""
    return len(value.normalize().as_tuple().digits) <= 15 and math.isfinite(float(value))


def _copied(values: Sequence[Any], opaque: Mapping[str, Any], variants: Sequence[int | str]) -> str | None:
    """The input field whose stand-ins ``values`` are, run by run (a value the rules passed on unchanged)."""
    if len(values) < 2:
        return None
    for name, original in opaque.items():
        if all(_same(v, _stand_in(name, original, run)) for run, v in zip(variants, values, strict=True)):
            return name
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b and math.copysign(1, a) == math.copysign(1, b) if a == 0 else a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _marked(value: Any) -> bool:
    if isinstance(value, str):
        return _MARK in value
    if isinstance(value, dict):
        return any(_marked(v) for v in value.values())
    if isinstance(value, list):
        return any(_marked(v) for v in value)
    return False
