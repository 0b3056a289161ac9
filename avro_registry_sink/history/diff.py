"""Field-level difference of two flat-Avro record schemas (the value, and optionally the key, of one table).

A field is compared by name after the renames the DDL made (``RENAME COLUMN a TO b``, ``CHANGE a b ...``:
:func:`renames_in_ddl`), since nothing in two Avro schemas tells a rename from a drop and an add. Each field of
the older schema is then removed, renamed or kept, each of the newer one added or kept, and a kept (or renamed)
field may change its type (Avro type and logical type: ``int`` -> ``string``, ``decimal(10,2)`` ->
``decimal(12,4)``), its nullability (a ``["null",T]`` union or not), its default, or its ``connect.parameters``
(TiCDC's ``tidb_type``, ``allowed`` ENUM/SET members, BIT ``length``). With both key schemas, a change of the key's
columns is one more change.

>>> a = {"type": "record", "name": "t", "fields": [
...     {"name": "id", "type": {"type": "int", "connect.parameters": {"tidb_type": "INT"}}},
...     {"default": None, "name": "n", "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}]}]}
>>> b = {"type": "record", "name": "t", "fields": [
...     {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}},
...     {"default": None, "name": "note", "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}]}]}
>>> [(c.kind, c.field, c.old, c.new) for c in diff_schemas(a, b, renames={"n": "note"}).changes]
[('type', 'id', 'int', 'long'), ('connect.parameters', 'id', {'tidb_type': 'INT'}, {'tidb_type': 'BIGINT'}), ('renamed', 'note', 'n', 'note')]
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Imported inside functions, for start-up: this module imports in about 20 ms; the DDL parser it needs for
# renames and re-added columns costs over 300 ms, paid only by a diff that reads DDL.

#: The kinds of change, in the order they are listed for one field.
KINDS = ("added", "removed", "renamed", "type", "nullability", "default", "connect.parameters", "key")


@dataclass(frozen=True)
class AvroField:
    """One column of a flat-Avro record: what a downstream table's column is made from."""

    name: str
    position: int
    type: str  # the Avro primitive: int, long, float, double, string, bytes
    logical: tuple[str, int, int] | None  # ("decimal", precision, scale)
    nullable: bool
    has_default: bool
    default: Any
    parameters: Mapping[str, str]

    @classmethod
    def from_avro(cls, raw: Mapping[str, Any], position: int) -> AvroField:
        kind = raw.get("type")
        nullable = False
        if isinstance(kind, list):
            branches = [b for b in kind if b != "null"]
            nullable = len(branches) < len(kind)
            kind = branches[0] if branches else "null"
        params: Mapping[str, str] = {}
        logical = None
        if isinstance(kind, Mapping):
            params = dict(kind.get("connect.parameters") or {})
            if kind.get("logicalType") == "decimal":
                logical = ("decimal", int(kind.get("precision", 10)), int(kind.get("scale", 0)))
            kind = kind.get("type")
        return cls(name=str(raw["name"]), position=position, type=str(kind), logical=logical, nullable=nullable,
                   has_default="default" in raw, default=raw.get("default"), parameters=params)

    @property
    def type_text(self) -> str:
        """``int``, ``string``, ``decimal(10,2)``: the type as a diff shows it (nullability apart)."""
        if self.logical is not None:
            return f"{self.logical[0]}({self.logical[1]},{self.logical[2]})"
        return self.type

    @property
    def default_text(self) -> str:
        """The default as a diff shows it: ``none`` when the field has none, else its JSON."""
        return json.dumps(self.default, ensure_ascii=False) if self.has_default else "none"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type_text, "nullable": self.nullable}
        if self.has_default:
            out["default"] = self.default
        if self.parameters:
            out["connect.parameters"] = dict(self.parameters)
        return out


def record_fields(schema: Mapping[str, Any] | str | None) -> list[AvroField]:
    """The fields of a record schema (its JSON text or object), in order; ``[]`` for ``None``."""
    if schema is None:
        return []
    data = json.loads(schema) if isinstance(schema, str) else schema
    return [AvroField.from_avro(f, i) for i, f in enumerate(data.get("fields", []))]


@dataclass(frozen=True)
class Change:
    """One change of one field: ``field`` is its name in the newer schema (the older one for ``removed``)."""

    kind: str
    field: str
    old: Any = None
    new: Any = None

    def describe(self) -> str:
        """A line for a terminal: ``type: int -> string``."""
        if self.kind == "added":
            return f"added: {self.new}"
        if self.kind == "removed":
            return f"removed (was {self.old})"
        if self.kind == "renamed":
            return f"renamed from {self.old!r}"
        if self.kind == "nullability":
            return ("NULL -> NOT NULL" if self.new is False else "NOT NULL -> NULL")
        if self.kind == "connect.parameters":
            keys = sorted(set(self.old) | set(self.new))
            return "; ".join(f"{k}: {self.old.get(k, '-')} -> {self.new.get(k, '-')}" for k in keys
                             if self.old.get(k) != self.new.get(k))
        if self.kind == "key":
            return f"key ({', '.join(self.old)}) -> ({', '.join(self.new)})"
        return f"{self.old} -> {self.new}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "field": self.field, "old": self.old, "new": self.new}


@dataclass
class SchemaDiff:
    """The changes from ``before`` to ``after`` (fields in the newer schema's order, removed ones last)."""

    before: list[AvroField]
    after: list[AvroField]
    renames: dict[str, str] = field(default_factory=dict)  # old name -> new name
    changes: list[Change] = field(default_factory=list)
    key_before: tuple[str, ...] | None = None
    key_after: tuple[str, ...] | None = None
    readded: frozenset[str] = frozenset()  # in both schemas, but dropped and added again: no value carries over

    @property
    def unchanged(self) -> bool:
        return not self.changes

    def field_before(self, name: str) -> AvroField | None:
        return next((f for f in self.before if f.name == name), None)

    def field_after(self, name: str) -> AvroField | None:
        return next((f for f in self.after if f.name == name), None)

    def of_kind(self, *kinds: str) -> list[Change]:
        return [c for c in self.changes if c.kind in kinds]

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [c.to_json() for c in self.changes],
            "renames": dict(self.renames),
            "readded": sorted(self.readded),
            "key": {"before": list(self.key_before) if self.key_before is not None else None,
                    "after": list(self.key_after) if self.key_after is not None else None},
            "before": [f.to_json() for f in self.before],
            "after": [f.to_json() for f in self.after],
        }


def diff_schemas(before: Mapping[str, Any] | str | None, after: Mapping[str, Any] | str,
                 *, renames: Mapping[str, str] | Iterable[tuple[str, str]] = (),
                 key_before: Mapping[str, Any] | str | None = None,
                 key_after: Mapping[str, Any] | str | None = None,
                 readded: Iterable[str] = ()) -> SchemaDiff:
    """The field-level diff of two value schemas (``before`` ``None``: every field is added).

    ``renames`` (old -> new column names, :func:`renames_in_ddl`; pairs in statement order are chained) pair a field
    of ``before`` with one of ``after``; a rename whose old field is not in ``before`` or whose new field is not in
    ``after`` is ignored. ``readded`` names columns dropped and added again (``DROP COLUMN x, ADD COLUMN x ...``):
    in both schemas, yet no value carries over, so each is ``removed`` and ``added``. With both key schemas, a
    change of their field names (after the renames) is a ``key`` change.
    """
    old_fields = record_fields(before)
    new_fields = record_fields(after)
    old_by_name = {f.name: f for f in old_fields}
    new_by_name = {f.name: f for f in new_fields}
    pairs = dict(renames) if isinstance(renames, Mapping) else _chain_pairs(list(renames))
    renamed = {old: new for old, new in pairs.items() if old in old_by_name and new in new_by_name and old != new}
    source_of = {new: old for old, new in renamed.items()}
    fresh = frozenset(n for n in readded if n in old_by_name and n in new_by_name and n not in renamed
                      and n not in source_of)
    changes: list[Change] = []
    for new in new_fields:
        if new.name in source_of:
            old_name: str | None = source_of[new.name]
        elif new.name in fresh:
            old_name = None
        else:
            old_name = new.name if new.name not in renamed else None  # a renamed column's old name, new again
        old = old_by_name.get(old_name) if old_name is not None else None
        if old is None:
            changes.append(Change("added", new.name, None, _added_text(new)))
            continue
        if old.name != new.name:
            changes.append(Change("renamed", new.name, old.name, new.name))
        if old.type_text != new.type_text:
            changes.append(Change("type", new.name, old.type_text, new.type_text))
        if old.nullable != new.nullable:
            changes.append(Change("nullability", new.name, old.nullable, new.nullable))
        if (old.has_default, old.default) != (new.has_default, new.default):
            changes.append(Change("default", new.name, old.default_text, new.default_text))
        if dict(old.parameters) != dict(new.parameters):
            changes.append(Change("connect.parameters", new.name, dict(old.parameters), dict(new.parameters)))
    kept = set(source_of.values()) | {f.name for f in new_fields
                                      if f.name not in source_of and f.name not in renamed and f.name not in fresh}
    for old in old_fields:
        if old.name not in kept:
            changes.append(Change("removed", old.name, _added_text(old), None))
    diff = SchemaDiff(before=old_fields, after=new_fields, renames=renamed, changes=changes, readded=fresh)
    if key_before is not None and key_after is not None:
        diff.key_before = tuple(renamed.get(f.name, f.name) for f in record_fields(key_before))
        diff.key_after = tuple(f.name for f in record_fields(key_after))
        if diff.key_before != diff.key_after:
            changes.append(Change("key", ",".join(diff.key_after), list(diff.key_before), list(diff.key_after)))
    elif key_after is not None:
        diff.key_after = tuple(f.name for f in record_fields(key_after))
    return diff


def _added_text(f: AvroField) -> str:
    text = f.type_text + ("" if f.nullable else " NOT NULL")
    if f.has_default:
        text += f" default {f.default_text}"
    return text


def renames_in_ddl(text: str | None) -> dict[str, str]:
    """The column renames a DDL text makes (old -> new, chained over its statements), as Avro field names.

    ``ALTER TABLE t RENAME COLUMN a TO b`` and ``ALTER TABLE t CHANGE [COLUMN] a b <type>`` rename; text that cannot
    be read gives no renames (the caller diffs without them).

    >>> renames_in_ddl("ALTER TABLE t RENAME COLUMN a TO b; ALTER TABLE t CHANGE COLUMN `b` c INT, CHANGE d d TEXT")
    {'a': 'c'}
    """
    if not text:
        return {}
    from avro_registry_sink.errors import AvroSinkError
    from avro_registry_sink.schema.naming import sanitize_name
    from avro_registry_sink.tabledef.lexer import TokenStream, split_statements

    pairs: list[tuple[str, str]] = []
    try:
        statements = split_statements(text)
    except AvroSinkError:
        return {}
    for stmt in statements:
        s = TokenStream(stmt)
        if not s.at("ALTER", "TABLE"):
            continue
        depth = 0
        while not s.at_end():
            tok = s.peek()
            word = s.word()
            if tok is not None and tok.text == "(":
                depth += 1
            elif tok is not None and tok.text == ")":
                depth -= 1
            elif depth == 0 and word == "RENAME" and s.word(1) == "COLUMN":
                s.pos += 2
                try:
                    old = s.name("a column name")
                    s.expect("TO")
                    pairs.append((old, s.name("a column name")))
                except AvroSinkError:
                    pass
                continue
            elif depth == 0 and word == "CHANGE":
                s.pos += 1
                s.accept("COLUMN")
                s.accept("IF", "EXISTS")
                with contextlib.suppress(AvroSinkError):
                    pairs.append((s.name("a column name"), s.name("a column name")))
                continue
            s.pos += 1
    return _chain_pairs([(sanitize_name(o), sanitize_name(n)) for o, n in pairs])


def _chain_pairs(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``a -> b`` then ``b -> c`` (two statements of one DDL) is ``a -> c``."""
    out: dict[str, str] = {}
    for old, new in pairs:
        origin = next((o for o, n in out.items() if n == old), None)
        if origin is not None:
            out[origin] = new
        else:
            out[old] = new
    return {o: n for o, n in out.items() if o != n}


def readded_in_ddl(text: str | None) -> set[str]:
    """The columns a DDL text adds (``ADD [COLUMN]``), as Avro field names: where such a column was in the table
    before (``DROP COLUMN x, ADD COLUMN x ...``), it was dropped and added again and keeps no value. A ``CREATE
    TABLE`` statement (a DDL file's first, or a table dropped and created again) is not read here.

    >>> sorted(readded_in_ddl("ALTER TABLE t DROP COLUMN qty, ADD COLUMN qty VARCHAR(8) NOT NULL, ADD n INT"))
    ['n', 'qty']
    """
    if not text:
        return set()
    from avro_registry_sink.errors import AvroSinkError
    from avro_registry_sink.schema.naming import sanitize_name
    from avro_registry_sink.tabledef.ddl import column_lineage
    from avro_registry_sink.tabledef.lexer import split_statements

    try:
        statements = [s.source for s in split_statements(text) if s.source.lstrip().upper()[:6] != "CREATE"]
    except AvroSinkError:
        return set()
    return {sanitize_name(c) for c in column_lineage(statements).fresh}


#: The rule ``doc`` of a new major lists its changes (``schema.migration.plan_migration``), one per field.
_DOC_RENAMED = re.compile(r"(?:^|; )([A-Za-z_][A-Za-z0-9_]*) renamed to ([A-Za-z_][A-Za-z0-9_]*)")
_DOC_READDED = re.compile(r"(?:^|; )([A-Za-z_][A-Za-z0-9_]*) dropped and added again as ")
#: An UPGRADE expression moves a renamed column's value: ``"new": ($v := $.`old`; ...)``.
_EXPR_MOVED = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)": \(\$v := \$\.`([A-Za-z_][A-Za-z0-9_]*)`;')
_DOC_LIMIT = 1000  # rule_set_for cuts the doc there


def lineage_in_rules(rule_set: Mapping[str, Any] | None) -> tuple[dict[str, str], set[str]] | None:
    """The renames (old -> new) and re-added columns a version's migration rules say (those ``--on-incompatible
    new-major`` registers with a new major: their ``doc`` lists every field change, their UPGRADE expression moves
    each renamed value); ``None`` when the version carries no rule of the product, or its doc was cut short, so
    that nothing says whether a dropped and an added column are one renamed column.

    >>> lineage_in_rules({"migrationRules": [{"name": "upgrade_1_to_2", "mode": "UPGRADE", "doc": "a renamed to b; "
    ...     "c dropped and added again as TEXT NOT NULL: no value carries over (up: x; down: y)", "expr": "$"}]})
    ({'a': 'b'}, {'c'})
    """
    rules = [r for r in (rule_set or {}).get("migrationRules") or []
             if isinstance(r, Mapping) and re.fullmatch(r"(upgrade|downgrade)_\d+_to_\d+", str(r.get("name", "")))]
    if not rules:
        return None
    renames: dict[str, str] = {}
    readded: set[str] = set()
    complete = False
    for rule in rules:
        doc = str(rule.get("doc") or "")
        complete = complete or len(doc) < _DOC_LIMIT
        renames.update({old: new for old, new in _DOC_RENAMED.findall(doc)})
        readded.update(_DOC_READDED.findall(doc))
        if rule.get("mode") == "UPGRADE":
            renames.update({old: new for new, old in _EXPR_MOVED.findall(str(rule.get("expr") or "")) if old != new})
    return (renames, readded) if complete else None


def diff_keys(before: Mapping[str, Any] | str, after: Mapping[str, Any] | str,
              renames: Mapping[str, str] | None = None) -> SchemaDiff:
    """The diff of two versions of a key subject: only the primary key's columns change. Every key column is a
    column of the value as well (the value subject's diff adds, drops, renames and retypes them), so the fields of
    both keys are the downstream table's columns on both sides, and the one change is ``key``.

    >>> a = {"fields": [{"name": "id", "type": "long"}]}
    >>> b = {"fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}]}
    >>> [c.describe() for c in diff_keys(a, b).changes]
    ['key (id) -> (id, region)']
    """
    renames = dict(renames or {})
    old_fields, new_fields = record_fields(before), record_fields(after)
    key_before = tuple(renames.get(f.name, f.name) for f in old_fields)
    key_after = tuple(f.name for f in new_fields)
    columns = {f.name: f for f in new_fields}
    for f in old_fields:
        columns.setdefault(renames.get(f.name, f.name), f)
    fields = [AvroField(name=name, position=i, type=f.type, logical=f.logical, nullable=False,
                        has_default=False, default=None, parameters=f.parameters)
              for i, (name, f) in enumerate(columns.items())]
    changes = [] if key_before == key_after else [Change("key", ",".join(key_after), list(key_before),
                                                         list(key_after))]
    return SchemaDiff(before=fields, after=list(fields), changes=changes, key_before=key_before, key_after=key_after)
