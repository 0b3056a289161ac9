"""The embedded registry's state machine: Confluent Schema Registry semantics over a pluggable store.

``RegistryStore`` implements what a Confluent registry does for Avro (see
``shared/reference/schema-registry.md``): global schema ids from 1, per-subject versions, idempotent
re-registration, soft then permanent deletes, compatibility levels checked with Apache Avro's own
reader/writer checker, config and mode. Every public method either returns plain JSON-able data or
raises a :class:`~avro_registry_sink.errors.RegistryError` whose ``status_code``/``error_code``/message
are the ones Confluent answers with, so the HTTP layer (``app.py``) only translates.

Schema identity follows Confluent: the *canonical text* is what Java's ``Schema.toString()`` prints
(compact JSON, standard keys in Avro's fixed order, custom properties and logical-type attributes kept in
their original order, ``{"type":"string"}`` printed as ``"string"``, name+namespace printed like a full
name), hashed with MD5. A hash miss gets a second chance inside the subject: an *equivalent* live version
(same schema with custom properties in another order) is returned too.

State lives in memory in both backends; the SQLite backend writes every mutation through in one
transaction before it is applied, and reloads when another connection changed the file::

    >>> store = RegistryStore.open(None)            # in memory; RegistryStore.open("reg.db") for SQLite
    >>> store.register("t-value", '{"type":"string"}')["id"]
    1
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import types
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import avro.compatibility as _avro_compat
import avro.errors
import avro.name
import avro.schema

from avro_registry_sink.errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchema,
    InvalidSubject,
    InvalidVersion,
    OperationNotPermitted,
    RegistryError,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectModeNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)

__all__ = [
    "COMPATIBILITY_LEVELS",
    "DEFAULT_COMPATIBILITY",
    "MODES",
    "RegistryStore",
    "canonical_schema",
]

T = TypeVar("T")

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
# READONLY_OVERRIDE is deprecated in Confluent and behaves as READONLY here; FORWARD (global only) means
# "forward writes to the leader", and this registry is its own leader, so it behaves as READWRITE.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD")
_READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")
DEFAULT_MODE = "READWRITE"
CONTEXT = "."
MAX_VERSION = 2**31 - 1
_MAX_OLD_SCHEMA_CHARS = 10 * 1024  # Confluent truncates {oldSchema: ...} beyond this

_MSG_INVALID_LEVEL = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
    "forward_transitive, and full_transitive"
)
_MSG_INVALID_MODE = "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
_MSG_INVALID_VERSION = (
    "The specified version '{}' is not a valid version id. Allowed values are between [1, 2^31-1] "
    'and the string "latest"'
)
_RESERVED_SUBJECTS = ("__GLOBAL", "__EMPTY")


# ---------------------------------------------------------------------------------------------------
# Errors: one constructor per Confluent error, so messages and codes live in one place.


def _subject_not_found(subject: str) -> RegistryError:
    return SubjectNotFound(f"Subject '{subject}' not found.", status_code=404, error_code=40401, subject=subject)


def _version_not_found(subject: str, version: object) -> RegistryError:
    return VersionNotFound(f"Version {version} not found.", status_code=404, error_code=40402, subject=subject)


def _schema_not_found(schema_id: int | None = None) -> RegistryError:
    message = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return SchemaNotFound(message, status_code=404, error_code=40403, schema_id=schema_id)


def _invalid_schema(detail: str, *, subject: str | None = None) -> RegistryError:
    return InvalidSchema(detail, status_code=422, error_code=42201, subject=subject)


def _read_only(subject: str) -> RegistryError:
    return OperationNotPermitted(
        f"Subject {subject} in context {CONTEXT} is in read-only mode",
        status_code=422,
        error_code=42205,
        subject=subject,
    )


def _not_permitted(message: str, subject: str | None = None) -> RegistryError:
    return OperationNotPermitted(message, status_code=422, error_code=42205, subject=subject)


# ---------------------------------------------------------------------------------------------------
# Avro parsing and canonical text, as Java's Schema.Parser and Schema.toString() do it.

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
# Names that Java always writes fully qualified, because they would otherwise read as a type keyword.
_TYPE_KEYWORDS = frozenset({"record", "enum", "array", "map", "union", "fixed", *_PRIMITIVES})
_SCHEMA_RESERVED = frozenset(
    {"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"}
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})
_FIELD_ORDERS = ("ascending", "descending", "ignore")
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_MISSING: Any = object()


class SchemaParseError(ValueError):
    """An Avro schema text that Java's ``Schema.Parser`` would refuse; the message is the parser's."""


@dataclass(frozen=True)
class _Name:
    name: str
    space: str | None

    @property
    def full(self) -> str:
        return self.name if self.space is None else f"{self.space}.{self.name}"

    def qualified(self, default_space: str | None) -> str:
        # Java Name.getQualified: short only inside the same namespace and when not a keyword.
        if self.space is not None and self.space == default_space and self.name not in _TYPE_KEYWORDS:
            return self.name
        return self.full


@dataclass(eq=False)
class _Field:
    name: str
    type: _Type
    doc: str | None = None
    default: Any = _MISSING
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _Type:
    """One parsed Avro type; which attributes matter depends on ``kind``."""

    kind: str
    props: dict[str, Any] = field(default_factory=dict)
    name: _Name | None = None
    doc: str | None = None
    aliases: list[_Name] = field(default_factory=list)
    fields: list[_Field] = field(default_factory=list)
    is_error: bool = False
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    items: _Type | None = None
    values: _Type | None = None
    branches: list[_Type] = field(default_factory=list)

    @property
    def is_named(self) -> bool:
        return self.kind in ("record", "enum", "fixed")


def _show(node: object) -> str:
    """Compact JSON, as Jackson's ``JsonNode.toString()`` prints a node in parser messages."""
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _is_valid_name(name: str) -> bool:
    # Java's validateName: a letter or '_' first, then letters, digits or '_'.
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return False
    return all(c.isalnum() or c == "_" for c in name[1:])


def _check_name(name: str, what: str = "name") -> None:
    if not name:
        raise SchemaParseError(f"Empty {what}")
    if not (name[0].isalpha() or name[0] == "_"):
        raise SchemaParseError(f"Illegal initial character: {name}")
    for i, c in enumerate(name[1:], start=1):
        if not (c.isalnum() or c == "_"):
            raise SchemaParseError(f"Illegal character in: {name} ('{c}' at position {i})")


def _make_name(name: str, space: str | None) -> _Name:
    """Java ``new Name(name, space)``: a dotted name carries its own namespace; "" means none."""
    dot = name.rfind(".")
    if dot >= 0:
        space, name = name[:dot], name[dot + 1 :]
    if space == "":
        space = None
    _check_name(name)
    if space is not None:
        for part in space.split("."):
            if not _is_valid_name(part):
                raise SchemaParseError(f"Invalid namespace: {space}")
    return _Name(name, space)


class _Parser:
    """Java's ``Schema.Parser`` rules, building ``_Type`` trees that keep every attribute in order."""

    def __init__(self, *, validate_defaults: bool) -> None:
        self.validate_defaults = validate_defaults
        self.names: dict[str, _Type] = {}
        self.space: str | None = None

    def lookup(self, ref: str) -> _Type | None:
        if ref in _PRIMITIVES:
            return _Type(ref)
        # Java Names.get: the reference in the current namespace first, then in the null namespace.
        dot = ref.rfind(".")
        if dot >= 0:
            return self.names.get(ref)
        if self.space is not None:
            found = self.names.get(f"{self.space}.{ref}")
            if found is not None:
                return found
        return self.names.get(ref)

    def _define(self, t: _Type) -> None:
        assert t.name is not None
        full = t.name.full
        if full in _PRIMITIVES:
            raise SchemaParseError(f"Schemas may not be named after primitives: {full}")
        if full in self.names:
            raise SchemaParseError(f"Can't redefine: {full}")
        self.names[full] = t

    def parse(self, node: object) -> _Type:
        if isinstance(node, str):
            found = self.lookup(node)
            if found is None:
                raise SchemaParseError(f"Undefined name: {_show(node)}")
            return found
        if isinstance(node, list):
            return self._parse_union(node)
        if isinstance(node, dict):
            return self._parse_object(node)
        raise SchemaParseError(f"Schema not yet supported: {_show(node)}")

    def _parse_union(self, node: list[Any]) -> _Type:
        branches: list[_Type] = []
        seen: set[str] = set()
        for item in node:
            branch = self.parse(item)
            if branch.kind == "union":
                raise SchemaParseError(f"Nested union: {_show(node)}")
            key = branch.name.full if branch.is_named and branch.name else branch.kind
            if key in seen:
                raise SchemaParseError(f"Duplicate in union:{key}")
            seen.add(key)
            branches.append(branch)
        return _Type("union", branches=branches)

    def _parse_object(self, node: dict[str, Any]) -> _Type:
        kind = node.get("type")
        if not isinstance(kind, str):
            raise SchemaParseError(f"No type: {_show(node)}")
        saved_space = self.space
        name: _Name | None = None
        doc: str | None = None
        if kind in ("record", "error", "enum", "fixed"):
            space = node.get("namespace")
            space = space if isinstance(space, str) else None
            doc_value = node.get("doc")
            doc = doc_value if isinstance(doc_value, str) else None
            if space is None:
                space = self.space
            raw_name = node.get("name")
            if not isinstance(raw_name, str):
                raise SchemaParseError(f"No name in schema: {_show(node)}")
            name = _make_name(raw_name, space)
            self.space = name.space
        try:
            reserved = _SCHEMA_RESERVED
            if kind in _PRIMITIVES:
                result = _Type(kind)
            elif kind in ("record", "error"):
                result = _Type("record", name=name, doc=doc, is_error=kind == "error")
                self._define(result)
                self._parse_fields(node, result)
            elif kind == "enum":
                result = self._parse_enum(node, name, doc)
                reserved = _ENUM_RESERVED
            elif kind == "array":
                if "items" not in node:
                    raise SchemaParseError(f"Array has no items type: {_show(node)}")
                result = _Type("array", items=self.parse(node["items"]))
            elif kind == "map":
                if "values" not in node:
                    raise SchemaParseError(f"Map has no values type: {_show(node)}")
                result = _Type("map", values=self.parse(node["values"]))
            elif kind == "fixed":
                size = node.get("size")
                if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _INT_RANGE[1]:
                    raise SchemaParseError(f"Invalid or no size: {_show(node)}")
                result = _Type("fixed", name=name, doc=doc, size=size)
                self._define(result)
            else:
                # {"type": "com.acme.Defined"}: a reference; Java drops the object's other attributes.
                found = self.lookup(kind)
                if found is None:
                    raise SchemaParseError(f"Type not supported: {kind}")
                return found
            for key, value in node.items():
                if key not in reserved:
                    result.props[key] = value
            if result.is_named:
                assert result.name is not None
                result.aliases = [_make_name(a, result.name.space) for a in _parse_aliases(node)]
            return result
        finally:
            self.space = saved_space

    def _parse_fields(self, node: dict[str, Any], record: _Type) -> None:
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise SchemaParseError(f"Record has no fields: {_show(node)}")
        seen: set[str] = set()
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                raise SchemaParseError(f"No field name: {_show(f)}")
            fname: str = f["name"]
            _check_name(fname)
            if "type" not in f:
                raise SchemaParseError(f"No field type: {_show(f)}")
            ftype = f["type"]
            if isinstance(ftype, str) and self.lookup(ftype) is None:
                raise SchemaParseError(
                    f'{_show(ftype)} is not a defined name. The type of the "{fname}" field must be a '
                    'defined name or a {"type": ...} expression.'
                )
            fnode = self.parse(ftype)
            order = "ascending"
            if "order" in f:
                raw_order = f["order"]
                if not isinstance(raw_order, str) or raw_order.lower() not in _FIELD_ORDERS:
                    upper = raw_order.upper() if isinstance(raw_order, str) else raw_order
                    raise SchemaParseError(f"No enum constant org.apache.avro.Schema.Field.Order.{upper}")
                order = raw_order.lower()
            default = f.get("default", _MISSING)
            if default is not _MISSING and fnode.kind in ("float", "double") and isinstance(default, str):
                # Java turns a textual float default ("NaN", "1.5") into a number before validating.
                try:
                    default = float(default)
                except ValueError:
                    pass
            if self.validate_defaults and default is not _MISSING and not _is_valid_default(fnode, default):
                raise SchemaParseError(
                    f"Invalid default for field {fname}: {_show(default)} not a {_write_canonical(fnode)}"
                )
            doc = f.get("doc")
            props = {k: v for k, v in f.items() if k not in _FIELD_RESERVED}
            if fname in seen:
                raise SchemaParseError(f"Duplicate field {fname} in record {record.name.full if record.name else ''}")
            seen.add(fname)
            record.fields.append(
                _Field(
                    name=fname,
                    type=fnode,
                    doc=doc if isinstance(doc, str) else None,
                    default=default,
                    order=order,
                    aliases=_parse_aliases(f),
                    props=props,
                )
            )

    def _parse_enum(self, node: dict[str, Any], name: _Name | None, doc: str | None) -> _Type:
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            raise SchemaParseError(f"Enum has no symbols: {_show(node)}")
        seen: set[str] = set()
        for symbol in symbols:
            if not isinstance(symbol, str):
                raise SchemaParseError(f"Enum symbol is not a string: {_show(symbol)}")
            _check_name(symbol)
            if symbol in seen:
                raise SchemaParseError(f"Duplicate enum symbol: {symbol}")
            seen.add(symbol)
        default = node.get("default")
        default = default if isinstance(default, str) else None
        if default is not None and default not in seen:
            raise SchemaParseError(
                f"The Enum Default: {default} is not in the enum symbol set: [{', '.join(symbols)}]"
            )
        result = _Type("enum", name=name, doc=doc, symbols=list(symbols), enum_default=default)
        self._define(result)
        return result


def _parse_aliases(node: Mapping[str, Any]) -> list[str]:
    if "aliases" not in node:
        return []
    aliases = node["aliases"]
    if not isinstance(aliases, list):
        raise SchemaParseError(f"aliases not an array: {_show(node)}")
    out: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str):
            raise SchemaParseError(f"alias not a string: {_show(alias)}")
        if alias not in out:  # Java keeps aliases in a LinkedHashSet
            out.append(alias)
    return out


def _is_integral(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_valid_default(t: _Type, value: object) -> bool:
    """Java ``Schema.isValidDefault``: a union default must match the union's first branch."""
    kind = t.kind
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind == "int":
        return _is_integral(value) and _INT_RANGE[0] <= value <= _INT_RANGE[1]  # type: ignore[operator]
    if kind == "long":
        return _is_integral(value) and _LONG_RANGE[0] <= value <= _LONG_RANGE[1]  # type: ignore[operator]
    if kind in ("float", "double"):
        return (isinstance(value, (int, float))) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        assert t.items is not None
        return isinstance(value, list) and all(_is_valid_default(t.items, v) for v in value)
    if kind == "map":
        assert t.values is not None
        return isinstance(value, dict) and all(_is_valid_default(t.values, v) for v in value.values())
    if kind == "union":
        return bool(t.branches) and _is_valid_default(t.branches[0], value)
    if kind == "record":
        if not isinstance(value, dict):
            return False
        for f in t.fields:
            member = value[f.name] if f.name in value else f.default
            if member is _MISSING or not _is_valid_default(f.type, member):
                return False
        return True
    return False


def _to_json(t: _Type, known: set[str], space: str | None, *, checker: bool = False) -> object:
    """Java ``Schema.toJson``: fixed key order, custom props in original order, named types once.

    With ``checker=True`` the output is for Apache Avro's Python parser: only what compatibility depends
    on (names, aliases, fields, defaults, symbols, sizes), full names, no docs, custom props or logical
    types (logical types are invisible to the checker, and leaving them out avoids the Python parser's
    logical-type warnings).
    """
    kind = t.kind
    if kind in _PRIMITIVES:
        if not t.props or checker:
            return kind
        return {"type": kind, **t.props}
    if kind == "union":
        return [_to_json(b, known, space, checker=checker) for b in t.branches]
    if kind == "array":
        assert t.items is not None
        out: dict[str, Any] = {"type": "array", "items": _to_json(t.items, known, space, checker=checker)}
        if not checker:
            out.update(t.props)
        return out
    if kind == "map":
        assert t.values is not None
        out = {"type": "map", "values": _to_json(t.values, known, space, checker=checker)}
        if not checker:
            out.update(t.props)
        return out
    assert t.name is not None
    full = t.name.full
    if full in known:
        return full if checker else t.name.qualified(space)
    known.add(full)
    out = {"type": "error" if t.is_error and not checker else kind}
    if checker:
        out["name"] = full
        if t.name.space is None and space is not None:
            out["namespace"] = ""
    else:
        out["name"] = t.name.name
        if t.name.space is not None:
            if t.name.space != space:
                out["namespace"] = t.name.space
        elif space is not None:
            out["namespace"] = ""
        if t.doc is not None:
            out["doc"] = t.doc
    if kind == "record":
        out["fields"] = [_field_json(f, known, t.name.space, checker=checker) for f in t.fields]
    elif kind == "enum":
        out["symbols"] = [_checker_symbol(x) for x in t.symbols] if checker else list(t.symbols)
        if t.enum_default is not None:
            out["default"] = _checker_symbol(t.enum_default) if checker else t.enum_default
    else:
        out["size"] = t.size
    if not checker:
        out.update(t.props)
    if t.aliases:
        out["aliases"] = [a.full if checker else a.qualified(t.name.space) for a in t.aliases]
    return out


_SYMBOL_ESCAPE = "u__"


def _checker_symbol(symbol: str) -> str:
    """An ASCII stand-in for an enum symbol Java accepts but Python's parser refuses (é, ü, ...).

    Injective (escaped symbols start with ``u__``, kept ones never do), so the checker's symbol-set
    comparisons are unchanged; ``_plain_symbol`` turns it back for messages.
    """
    if symbol.isascii() and _is_valid_name(symbol) and not symbol.startswith(_SYMBOL_ESCAPE):
        return symbol
    return _SYMBOL_ESCAPE + symbol.encode("utf-8").hex()


def _plain_symbol(symbol: str) -> str:
    if symbol.startswith(_SYMBOL_ESCAPE):
        return bytes.fromhex(symbol[len(_SYMBOL_ESCAPE) :]).decode("utf-8")
    return symbol


def _field_json(f: _Field, known: set[str], space: str | None, *, checker: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _to_json(f.type, known, space, checker=checker)}
    if f.doc is not None and not checker:
        out["doc"] = f.doc
    if f.default is not _MISSING:
        out["default"] = f.default
    if f.order != "ascending" and not checker:
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    if not checker:
        out.update(f.props)
    return out


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _write_canonical(t: _Type, known: Iterable[str] = ()) -> str:
    return _dumps(_to_json(t, set(known), None))


def _sorted_json(value: object) -> object:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def _normalize(root: _Type) -> None:
    """Confluent's ``normalize=true`` rewrites, in place: sorted custom props and aliases, decimal
    ``scale: 0`` dropped, empty named-type docs dropped. Field order, unions, defaults and docs stay."""
    seen: set[int] = set()

    def props(p: dict[str, Any]) -> dict[str, Any]:
        out = {k: _sorted_json(p[k]) for k in sorted(p)}
        if out.get("logicalType") == "decimal" and out.get("scale") == 0 and not isinstance(out["scale"], bool):
            del out["scale"]
        return out

    def walk(t: _Type) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        t.props = props(t.props)
        if t.is_named:
            t.aliases = sorted(t.aliases, key=lambda n: n.full)
            if t.doc == "":
                t.doc = None
        for f in t.fields:
            f.props = props(f.props)
            f.aliases = sorted(f.aliases)
            walk(f.type)
        for child in (t.items, t.values, *t.branches):
            if child is not None:
                walk(child)

    walk(root)


def _freeze(value: object) -> object:
    """A hashable, order-insensitive-for-objects view of JSON, as Jackson's node equality sees it."""
    if isinstance(value, dict):
        return frozenset((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return (type(value).__name__, value)


def canonical_schema(schema: str, *, normalize: bool = False) -> str:
    """The canonical text a Confluent registry stores for ``schema`` (an Avro schema without references).

    >>> canonical_schema('{"name": "R", "type": "record", "fields": [{"type": "string", "name": "f"}]}')
    '{"type":"record","name":"R","fields":[{"name":"f","type":"string"}]}'
    >>> canonical_schema('{"type": "string"}')
    '"string"'
    """
    try:
        data = json.loads(schema)
    except ValueError as exc:
        raise SchemaParseError(str(exc)) from exc
    t = _Parser(validate_defaults=False).parse(data)
    if normalize:
        _normalize(t)
    return _write_canonical(t)


# ---------------------------------------------------------------------------------------------------
# Compatibility: Apache Avro's ReaderWriterCompatibilityChecker, plus Confluent's message format.
#
# The Python checker merges incompatibilities into sets of messages and locations, so which message
# belongs to which location is lost once there are two. Confluent reports them pairwise. We run the
# checker's own functions, rebound to a namespace whose ``incompatible`` also records each
# (type, message, location) triple; the verdict is still entirely the checker's.

_RECORDED: ContextVar[list[tuple[Any, str, str]] | None] = ContextVar("_RECORDED", default=None)


def _recording_incompatible(incompat_type: Any, message: str, location: list[str]) -> Any:
    result = _avro_compat.incompatible(incompat_type, message, location)
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.append((incompat_type, message, next(iter(result.locations))))
    return result


def _rebind(fn: Any, namespace: dict[str, Any]) -> Any:
    return types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)


_CHECKER_NS: dict[str, Any] = dict(vars(_avro_compat))
_CHECKER_NS["incompatible"] = _recording_incompatible
for _fn_name in ("type_mismatch", "check_schema_names", "check_fixed_size", "check_reader_enum_contains_writer_enum"):
    _CHECKER_NS[_fn_name] = _rebind(getattr(_avro_compat, _fn_name), _CHECKER_NS)


class _RecordingChecker(_avro_compat.ReaderWriterCompatibilityChecker):
    calculate_compatibility = _rebind(
        _avro_compat.ReaderWriterCompatibilityChecker.calculate_compatibility, _CHECKER_NS
    )
    check_reader_writer_record_fields = _rebind(
        _avro_compat.ReaderWriterCompatibilityChecker.check_reader_writer_record_fields, _CHECKER_NS
    )


# Confluent's Difference descriptions; the two %s are (reader, writer) = ("new","old") or ("old","new").
_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": (
        "The size of FIXED type field at path '{path}' in the {0} schema does not match with the {1} schema"
    ),
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the {0} schema does not match with the {1} schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The {0} schema is missing enum symbols '{message}' at path '{path}' in the {1} schema",
    "MISSING_UNION_BRANCH": "The {0} schema is missing a type inside a union field at path '{path}' in the {1} schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": (
        "The field '{message}' at path '{path}' in the {0} schema has no default value and is missing in the "
        "{1} schema"
    ),
}


def _java_message(error_type: str, message: str) -> str:
    """Print the Python checker's message the way Java's SchemaCompatibility does."""
    if error_type == "TYPE_MISMATCH" and message.startswith("reader type: "):
        reader, _, writer = message[len("reader type: ") :].partition(" not compatible with writer type: ")
        return f"reader type: {reader.upper()} not compatible with writer type: {writer.upper()}"
    if error_type == "MISSING_UNION_BRANCH" and message.startswith("reader union lacking writer type"):
        writer_type = message[len("reader union lacking writer type") :].lstrip(": ")
        return f"reader union lacking writer type: {writer_type.upper()}"
    if error_type == "MISSING_ENUM_SYMBOLS" and message.startswith("{"):
        symbols = sorted(_plain_symbol(s.strip().strip("'\"")) for s in message.strip("{}").split(","))
        return f"[{', '.join(symbols)}]"
    return message


def _differences(reader: avro.schema.Schema, writer: avro.schema.Schema, names: tuple[str, str]) -> list[str]:
    """Confluent ``Difference`` strings for reading ``writer`` data with ``reader``; [] if compatible."""
    recorded: list[tuple[Any, str, str]] = []
    token = _RECORDED.set(recorded)
    try:
        result = _RecordingChecker().get_compatibility(reader, writer)
    finally:
        _RECORDED.reset(token)
    if result.compatibility is not _avro_compat.SchemaCompatibilityType.incompatible:
        return []
    triples: list[tuple[Any, str, str]] = []
    for triple in recorded:  # keep only what survived into the verdict (union branches retry)
        kind, message, location = triple
        if (
            kind in result.incompatibilities
            and message in result.messages
            and location in result.locations
            and triple not in triples
        ):
            triples.append(triple)
    if not triples:  # pragma: no cover - defensive, if the checker's internals ever change shape
        triples = list(zip(result.incompatibilities, sorted(result.messages), sorted(result.locations)))
    out = []
    for kind, message, location in triples:
        error_type = kind.name.upper()
        java_message = _java_message(error_type, message)
        description = _DESCRIPTIONS.get(error_type, "").format(*names, path=location, message=java_message)
        out.append(f"{{errorType:'{error_type}', description:'{description}', additionalInfo:'{java_message}'}}")
    return out


# ---------------------------------------------------------------------------------------------------
# Registry state and its mutations ("ops"), shared by both backends.


@dataclass(frozen=True)
class _Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class _StoredSchema:
    id: int
    schema_type: str
    text: str
    references: tuple[_Reference, ...]
    digest: str


@dataclass(frozen=True)
class _Version:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass(frozen=True)
class _PutSchema:
    schema: _StoredSchema


@dataclass(frozen=True)
class _PutVersion:
    version: _Version


@dataclass(frozen=True)
class _DropVersion:
    subject: str
    version: int


@dataclass(frozen=True)
class _PutConfig:
    scope: str | None  # None: global
    config: dict[str, Any] | None  # None: delete


@dataclass(frozen=True)
class _PutMode:
    scope: str | None
    mode: str | None


_Op = _PutSchema | _PutVersion | _DropVersion | _PutConfig | _PutMode


@dataclass
class _State:
    schemas: dict[int, _StoredSchema] = field(default_factory=dict)
    by_digest: dict[str, int] = field(default_factory=dict)
    subjects: dict[str, dict[int, _Version]] = field(default_factory=dict)
    config: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    mode: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    def apply(self, op: _Op) -> None:
        if isinstance(op, _PutSchema):
            s = op.schema
            self.schemas[s.id] = s
            self.by_digest.setdefault(s.digest, s.id)
            self.max_id = max(self.max_id, s.id)
        elif isinstance(op, _PutVersion):
            v = op.version
            self.subjects.setdefault(v.subject, {})[v.version] = v
        elif isinstance(op, _DropVersion):
            versions = self.subjects.get(op.subject, {})
            versions.pop(op.version, None)
            if not versions:
                self.subjects.pop(op.subject, None)
        elif isinstance(op, _PutConfig):
            if op.config is None:
                self.config.pop(op.scope, None)
            else:
                self.config[op.scope] = dict(op.config)
        elif isinstance(op, _PutMode):
            if op.mode is None:
                self.mode.pop(op.scope, None)
            else:
                self.mode[op.scope] = op.mode

    # -- queries -----------------------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool) -> list[_Version]:
        """The subject's versions ascending; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def is_resolvable(self, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for vs in self.subjects.values() for v in vs.values())


class _MemoryBackend:
    """Keeps nothing beyond the process; the state itself is the store."""

    def load(self) -> _State:
        return _State()

    def is_stale(self) -> bool:
        return False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def persist(self, ops: Sequence[_Op]) -> None:
        pass

    def close(self) -> None:
        pass


_GLOBAL_SCOPE = ""  # SQLite key of the global config/mode ("" is never a valid subject)

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS registry_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schemas (
    id INTEGER PRIMARY KEY,
    schema_type TEXT NOT NULL,
    schema TEXT NOT NULL,
    refs TEXT NOT NULL,
    digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL REFERENCES schemas(id),
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
);
CREATE TABLE IF NOT EXISTS config (scope TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mode (scope TEXT PRIMARY KEY, mode TEXT NOT NULL);
"""


class _SqliteBackend:
    """One SQLite file in WAL mode; each mutation is one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, path: str) -> None:
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        with self.transaction():
            for statement in _SQLITE_SCHEMA.split(";"):  # executescript would COMMIT first
                if statement.strip():
                    self._conn.execute(statement)
            self._conn.execute(
                "INSERT OR IGNORE INTO registry_meta (key, value) VALUES ('format', '1')"
            )
        self._data_version = -1

    def _current_version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def load(self) -> _State:
        state = _State()
        conn = self._conn
        for sid, stype, text, refs, digest in conn.execute(
            "SELECT id, schema_type, schema, refs, digest FROM schemas ORDER BY id"
        ):
            references = tuple(_Reference(r["name"], r["subject"], int(r["version"])) for r in json.loads(refs))
            state.apply(_PutSchema(_StoredSchema(sid, stype, text, references, digest)))
        for subject, version, sid, deleted in conn.execute(
            "SELECT subject, version, schema_id, deleted FROM versions ORDER BY subject, version"
        ):
            state.apply(_PutVersion(_Version(subject, version, sid, bool(deleted))))
        for scope, value in conn.execute("SELECT scope, value FROM config"):
            state.apply(_PutConfig(None if scope == _GLOBAL_SCOPE else scope, json.loads(value)))
        for scope, mode in conn.execute("SELECT scope, mode FROM mode"):
            state.apply(_PutMode(None if scope == _GLOBAL_SCOPE else scope, mode))
        self._data_version = self._current_version()
        return state

    def is_stale(self) -> bool:
        # data_version changes only when *another* connection commits, so our own writes never count.
        return self._current_version() != self._data_version

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def persist(self, ops: Sequence[_Op]) -> None:
        conn = self._conn
        for op in ops:
            if isinstance(op, _PutSchema):
                s = op.schema
                refs = json.dumps([r.to_json() for r in s.references])
                conn.execute(
                    "INSERT OR REPLACE INTO schemas (id, schema_type, schema, refs, digest) VALUES (?, ?, ?, ?, ?)",
                    (s.id, s.schema_type, s.text, refs, s.digest),
                )
            elif isinstance(op, _PutVersion):
                v = op.version
                conn.execute(
                    "INSERT OR REPLACE INTO versions (subject, version, schema_id, deleted) VALUES (?, ?, ?, ?)",
                    (v.subject, v.version, v.schema_id, int(v.deleted)),
                )
            elif isinstance(op, _DropVersion):
                conn.execute("DELETE FROM versions WHERE subject = ? AND version = ?", (op.subject, op.version))
            elif isinstance(op, _PutConfig):
                scope = _GLOBAL_SCOPE if op.scope is None else op.scope
                if op.config is None:
                    conn.execute("DELETE FROM config WHERE scope = ?", (scope,))
                else:
                    conn.execute(
                        "INSERT OR REPLACE INTO config (scope, value) VALUES (?, ?)", (scope, json.dumps(op.config))
                    )
            elif isinstance(op, _PutMode):
                scope = _GLOBAL_SCOPE if op.scope is None else op.scope
                if op.mode is None:
                    conn.execute("DELETE FROM mode WHERE scope = ?", (scope,))
                else:
                    conn.execute("INSERT OR REPLACE INTO mode (scope, mode) VALUES (?, ?)", (scope, op.mode))

    def close(self) -> None:
        self._conn.close()


# ---------------------------------------------------------------------------------------------------
# Parsed requests


@dataclass(frozen=True)
class _Parsed:
    """A schema from a request, resolved against the registry: canonical text, identity, checker view."""

    text: str
    references: tuple[_Reference, ...]
    digest: str
    equivalence: object
    checker: avro.schema.Schema


class _JavaNames(avro.name.Names):
    """Python's name table, resolving a short reference like Java: current namespace, then none.

    Without the fallback, a type in the null namespace nested in a namespaced record (which Java writes
    as ``"namespace":""``) could not be referenced by the Python parser.
    """

    def get_name(self, name_attr: str, space_attr: str | None = None) -> Any:
        found = super().get_name(name_attr, space_attr)
        if found is None and isinstance(name_attr, str) and "." not in name_attr:
            found = self.names.get(name_attr)
        return found

    def has_name(self, name_attr: str, space_attr: str | None = None) -> bool:
        return self.get_name(name_attr, space_attr) is not None


def _make_checker_schema(data: object, names: _JavaNames) -> avro.schema.Schema:
    return avro.schema.make_avsc_object(data, names, validate_enum_symbols=False, validate_names=False)


def _digest(text: str, references: Sequence[_Reference]) -> str:
    material = text if not references else text + "\n" + _dumps([r.to_json() for r in references])
    return hashlib.md5(material.encode("utf-8"), usedforsecurity=False).hexdigest()


def _parse_version_id(version: object) -> int | None:
    """A version path segment → number, or None for ``latest``/-1; anything else → 42202."""
    if isinstance(version, int) and not isinstance(version, bool):
        text = str(version)
    elif isinstance(version, str):
        text = version
    else:
        text = str(version)
    if text.lower() == "latest" or text == "-1":
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not (text.isdigit() and 1 <= number <= MAX_VERSION):
        raise InvalidVersion(_MSG_INVALID_VERSION.format(text), status_code=422, error_code=42202)
    return number


def _check_subject(subject: object) -> str:
    if (
        not isinstance(subject, str)
        or not subject
        or subject in _RESERVED_SUBJECTS
        or any(unicodedata.category(c) == "Cc" for c in subject)
    ):
        raise InvalidSubject(
            f"The specified subject '{subject}' is not a valid.",
            status_code=422,
            error_code=42208,
            subject=str(subject),
        )
    return subject


def _level(value: object) -> str:
    if isinstance(value, str) and value.upper() in COMPATIBILITY_LEVELS:
        return value.upper()
    raise InvalidCompatibilityLevel(_MSG_INVALID_LEVEL, status_code=422, error_code=42203)


def _paginate(items: list[T], offset: int, limit: int) -> list[T]:
    offset = max(offset, 0)
    return items[offset:] if limit is None or limit < 0 else items[offset : offset + limit]


# ---------------------------------------------------------------------------------------------------
# The store


class RegistryStore:
    """Confluent Schema Registry state machine (Avro only, default context ``.``).

    ``incompatible_error_code`` is the ``error_code`` of an incompatible registration: 409 like CP ≤ 8.0.3
    and Karapace (the default), or 40901 like CP 8.0.4+/8.1.2+/8.2+. The HTTP status is 409 either way.
    """

    def __init__(
        self,
        backend: _MemoryBackend | _SqliteBackend | None = None,
        *,
        default_compatibility: str = DEFAULT_COMPATIBILITY,
        incompatible_error_code: int = 409,
    ) -> None:
        if incompatible_error_code not in (409, 40901):
            raise ValueError(f"incompatible_error_code must be 409 or 40901, not {incompatible_error_code!r}")
        self._backend = backend or _MemoryBackend()
        self._default_compatibility = _level(default_compatibility)
        self._incompatible_error_code = incompatible_error_code
        self._lock = threading.RLock()
        self._state = self._backend.load()
        self._checker_cache: dict[int, avro.schema.Schema] = {}
        self._equivalence_cache: dict[int, object] = {}

    @classmethod
    def open(cls, data: str | None = None, **options: Any) -> RegistryStore:
        """In memory when ``data`` is None or ``":memory:"``, else the SQLite file at ``data``."""
        if data is None or data == ":memory:":
            return cls(_MemoryBackend(), **options)
        return cls(_SqliteBackend(data), **options)

    @property
    def path(self) -> str | None:
        """The SQLite file, or None in memory."""
        return getattr(self._backend, "path", None)

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    def __enter__(self) -> RegistryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._backend.is_stale():
            self._state = self._backend.load()
            self._checker_cache.clear()
            self._equivalence_cache.clear()

    def _read(self, fn: Callable[[_State], T]) -> T:
        with self._lock:
            self._refresh()
            return fn(self._state)

    def _write(self, fn: Callable[[_State], tuple[list[_Op], T]]) -> T:
        """Compute ops from the current state, persist them in one transaction, then apply them."""
        with self._lock:
            with self._backend.transaction():
                self._refresh()
                ops, result = fn(self._state)
                self._backend.persist(ops)
            for op in ops:
                self._state.apply(op)
            return result

    def _mode(self, st: _State, subject: str | None) -> str:
        if subject is not None and subject in st.mode:
            return st.mode[subject]
        return st.mode.get(None, DEFAULT_MODE)

    def _effective_config(self, st: _State, subject: str | None) -> dict[str, Any]:
        merged: dict[str, Any] = {"compatibilityLevel": self._default_compatibility}
        merged.update(st.config.get(None, {}))
        if subject is not None:
            merged.update(st.config.get(subject, {}))
        return merged

    def _ensure_writable(self, st: _State, subject: str | None) -> None:
        if self._mode(st, subject) in _READ_ONLY_MODES:
            raise _read_only(subject if subject is not None else "__GLOBAL")

    # -- schema parsing ----------------------------------------------------------------------------
    def _resolve_references(self, st: _State, references: object, subject: str | None) -> tuple[_Reference, ...]:
        if references is None:
            return ()
        if not isinstance(references, list):
            raise _invalid_schema(f"Invalid references {_show(references)}: expected a list", subject=subject)
        out: list[_Reference] = []
        for ref in references:
            if not (isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("subject"), str)):
                raise _invalid_schema(f"Invalid reference {_show(ref)}: name and subject are required", subject=subject)
            version = ref.get("version", -1)
            try:
                number = _parse_version_id(version)
            except RegistryError:
                raise _invalid_schema(f"Invalid reference {_show(ref)}: bad version", subject=subject) from None
            candidates = st.versions(ref["subject"], deleted=number is not None)
            match = [v for v in candidates if number is None or v.version == number]
            if not match:
                raise _invalid_schema(
                    f"Invalid schema: reference {ref['name']} to subject '{ref['subject']}' version {version} "
                    "does not exist",
                    subject=subject,
                )
            out.append(_Reference(ref["name"], ref["subject"], match[-1].version))
        return tuple(out)

    def _dependencies(self, st: _State, references: Sequence[_Reference]) -> list[_StoredSchema]:
        """Referenced schemas, transitively, dependencies first (each once)."""
        ordered: list[_StoredSchema] = []
        seen: set[int] = set()

        def visit(refs: Sequence[_Reference], depth: int) -> None:
            if depth > 64:
                raise _invalid_schema("Invalid schema: references are nested too deeply (a cycle?)")
            for ref in refs:
                version = st.subjects.get(ref.subject, {}).get(ref.version)
                if version is None:
                    raise _invalid_schema(
                        f"Invalid schema: reference to subject '{ref.subject}' version {ref.version} does not exist"
                    )
                schema = st.schemas[version.schema_id]
                if schema.id in seen:
                    continue
                visit(schema.references, depth + 1)
                seen.add(schema.id)
                ordered.append(schema)

        visit(references, 0)
        return ordered

    def _parse(
        self,
        st: _State,
        text: object,
        *,
        schema_type: object = None,
        references: object = None,
        normalize: bool = False,
        validate: bool = True,
        subject: str | None = None,
        resolved: tuple[_Reference, ...] | None = None,
    ) -> _Parsed:
        kind = "AVRO" if schema_type is None else schema_type
        if not isinstance(kind, str) or kind.upper() != "AVRO":
            raise _invalid_schema(f"Invalid schema type {kind}", subject=subject)
        if not isinstance(text, str) or not text.strip():
            raise _invalid_schema("Empty schema", subject=subject)
        refs = resolved if resolved is not None else self._resolve_references(st, references, subject)
        if normalize:
            refs = tuple(sorted(set(refs), key=lambda r: (r.name, r.subject, r.version)))
        deps = self._dependencies(st, refs)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _invalid_schema(self._invalid_detail(text, refs, f"Invalid JSON: {exc}"), subject=subject) from None
        parser = _Parser(validate_defaults=False)
        top_level: list[str] = []
        # Names and symbols were validated the Java way (Unicode letters allowed); Python's ASCII-only
        # validation must not refuse what Java accepts.
        checker_names = _JavaNames(validate_names=False)
        try:
            for dep in deps:
                defined_before = set(parser.names)
                dep_type = parser.parse(json.loads(dep.text))
                if dep_type.is_named and dep_type.name is not None:
                    top_level.append(dep_type.name.full)
                dep_checker_json = _to_json(dep_type, defined_before, None, checker=True)
                _make_checker_schema(dep_checker_json, checker_names)
            # The canonical text (Confluent's toString(refs)) knows only the referenced top-level types;
            # the Python parser already holds every type the references define.
            defined_by_deps = set(parser.names)
            parser.validate_defaults = validate
            parsed = parser.parse(data)
            if normalize:
                _normalize(parsed)
            canonical = _write_canonical(parsed, top_level)
            checker_json = _to_json(parsed, defined_by_deps, None, checker=True)
            checker = _make_checker_schema(checker_json, checker_names)
        except (SchemaParseError, avro.errors.AvroException) as exc:
            raise _invalid_schema(self._invalid_detail(text, refs, str(exc)), subject=subject) from None
        except RecursionError:
            detail = self._invalid_detail(text, refs, "schema nested too deeply")
            raise _invalid_schema(detail, subject=subject) from None
        return _Parsed(
            text=canonical,
            references=refs,
            digest=_digest(canonical, refs),
            equivalence=(_freeze(json.loads(canonical)), refs),
            checker=checker,
        )

    @staticmethod
    def _invalid_detail(text: str, refs: Sequence[_Reference], detail: str) -> str:
        return f"Invalid schema {text} with refs {[r.to_json() for r in refs]} of type AVRO, details: {detail}"

    def _stored_checker(self, st: _State, schema_id: int) -> avro.schema.Schema:
        cached = self._checker_cache.get(schema_id)
        if cached is None:
            stored = st.schemas[schema_id]
            cached = self._parse(st, stored.text, validate=False, resolved=stored.references).checker
            self._checker_cache[schema_id] = cached
        return cached

    def _stored_equivalence(self, schema_id: int, stored: _StoredSchema) -> object:
        cached = self._equivalence_cache.get(schema_id)
        if cached is None:
            cached = (_freeze(json.loads(stored.text)), stored.references)
            self._equivalence_cache[schema_id] = cached
        return cached

    def _match(self, st: _State, candidates: Sequence[_Version], parsed: _Parsed) -> _Version | None:
        """Confluent's lookup: same canonical hash, else an equivalent version (newest first)."""
        for v in reversed(candidates):
            if st.schemas[v.schema_id].digest == parsed.digest:
                return v
        for v in reversed(candidates):
            if self._stored_equivalence(v.schema_id, st.schemas[v.schema_id]) == parsed.equivalence:
                return v
        return None

    def _normalize_wanted(self, st: _State, subject: str, normalize: bool) -> bool:
        return normalize or bool(self._effective_config(st, subject).get("normalize", False))

    # -- compatibility -----------------------------------------------------------------------------
    def _incompatibilities(
        self, st: _State, subject: str, parsed: _Parsed, level: str, against: Sequence[_Version]
    ) -> list[str]:
        """Confluent's validator: latest or all (newest → oldest, first failure wins); [] if compatible."""
        if level == "NONE" or not against:
            return []
        targets = list(reversed(against)) if level.endswith("_TRANSITIVE") else [against[-1]]
        for old in targets:
            old_checker = self._stored_checker(st, old.schema_id)
            messages: list[str] = []
            if level.startswith(("FORWARD", "FULL")):
                messages += _differences(old_checker, parsed.checker, ("old", "new"))
            if level.startswith(("BACKWARD", "FULL")):
                messages += _differences(parsed.checker, old_checker, ("new", "old"))
            if messages:
                old_text = st.schemas[old.schema_id].text
                messages.append(f"{{oldSchemaVersion: {old.version}}}")
                if len(old_text) <= _MAX_OLD_SCHEMA_CHARS:
                    messages.append(f"{{oldSchema: '{old_text}'}}")
                else:
                    messages.append(
                        f"{{oldSchema: <truncated to {_MAX_OLD_SCHEMA_CHARS} characters> "
                        f"'{old_text[:_MAX_OLD_SCHEMA_CHARS]}'}}"
                    )
                messages.append(f"{{validateFields: 'false', compatibility: '{level}'}}")
                return messages
        return []

    # -- registration and lookup -------------------------------------------------------------------
    def register(
        self,
        subject: str,
        schema: str,
        *,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        schema_id: int | None = None,
        version: int | None = None,
        normalize: bool = False,
    ) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: ``{"id", "version", "schema"}`` of the registered version.

        ``schema_id``/``version`` are only honoured in IMPORT mode (``version`` outside it must be the next
        version number).
        """
        _check_subject(subject)
        schema_id = schema_id if schema_id is not None and schema_id >= 0 else None
        version = version if version is not None and version > 0 else None

        def mutate(st: _State) -> tuple[list[_Op], dict[str, Any]]:
            parsed = self._parse(
                st,
                schema,
                schema_type=schema_type,
                references=references,
                normalize=self._normalize_wanted(st, subject, normalize),
                subject=subject,
            )
            all_versions = st.versions(subject, deleted=True)
            live = [v for v in all_versions if not v.deleted]
            existing = self._match(st, live, parsed)
            if existing is not None:  # idempotent: no mode check, no compatibility check, no new version
                return [], self._registered(st, existing)
            mode = self._mode(st, subject)
            if mode in _READ_ONLY_MODES:
                raise _read_only(subject)
            if mode == "IMPORT":
                return self._import(st, subject, parsed, schema_id, version)
            if schema_id is not None:
                raise _not_permitted(f"Subject {subject} in context {CONTEXT} is not in import mode", subject)
            next_version = max((v.version for v in all_versions), default=0) + 1
            if version is not None and version != next_version:
                raise _invalid_schema("Version is not one more than previous version", subject=subject)
            level = self._effective_config(st, subject)["compatibilityLevel"]
            reasons = self._incompatibilities(st, subject, parsed, level, live)
            if reasons:
                raise IncompatibleSchema(
                    f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                    f"details: [{', '.join(reasons)}]",
                    status_code=409,
                    error_code=self._incompatible_error_code,
                    subject=subject,
                    reasons=reasons,
                )
            ops: list[_Op] = []
            new_id = st.by_digest.get(parsed.digest)
            if new_id is None:
                new_id = st.max_id + 1
                ops.append(_PutSchema(_StoredSchema(new_id, "AVRO", parsed.text, parsed.references, parsed.digest)))
            # A soft-deleted version of this subject with the same id is tombstoned (Confluent does too).
            ops += [_DropVersion(subject, v.version) for v in all_versions if v.deleted and v.schema_id == new_id]
            new_version = _Version(subject, next_version, new_id)
            ops.append(_PutVersion(new_version))
            return ops, {"id": new_id, "version": next_version, "schema": parsed.text}

        return self._write(mutate)

    def _import(
        self, st: _State, subject: str, parsed: _Parsed, schema_id: int | None, version: int | None
    ) -> tuple[list[_Op], dict[str, Any]]:
        if schema_id is None or version is None:
            raise _not_permitted(
                f"Subject {subject} in context {CONTEXT} is in import mode: a registration must carry both "
                '"id" and "version"',
                subject,
            )
        ops: list[_Op] = []
        existing = st.schemas.get(schema_id)
        if existing is not None and existing.digest != parsed.digest:
            raise _not_permitted(f"Overwrite new schema with id {schema_id} is not permitted.", subject)
        other_id = st.by_digest.get(parsed.digest)
        if other_id is not None and other_id != schema_id:
            raise RegistryError(
                "The ID of an imported schema does not match the existing ID",
                status_code=422,
                error_code=42207,
                subject=subject,
                schema_id=schema_id,
            )
        taken = st.subjects.get(subject, {}).get(version)
        if taken is not None:
            raise _not_permitted(f"Overwrite new schema with version {version} is not permitted.", subject)
        if existing is None:
            ops.append(_PutSchema(_StoredSchema(schema_id, "AVRO", parsed.text, parsed.references, parsed.digest)))
        ops.append(_PutVersion(_Version(subject, version, schema_id)))
        return ops, {"id": schema_id, "version": version, "schema": parsed.text}

    def _registered(self, st: _State, v: _Version) -> dict[str, Any]:
        return {"id": v.schema_id, "version": v.version, "schema": st.schemas[v.schema_id].text}

    def _version_json(self, st: _State, v: _Version) -> dict[str, Any]:
        stored = st.schemas[v.schema_id]
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id, "schema": stored.text}
        if stored.references:
            out["references"] = [r.to_json() for r in stored.references]
        return out

    def lookup(
        self,
        subject: str,
        schema: str,
        *,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        normalize: bool = False,
        deleted: bool = False,
    ) -> dict[str, Any]:
        """``POST /subjects/{subject}``: the version of ``subject`` holding ``schema``."""
        _check_subject(subject)

        def read(st: _State) -> dict[str, Any]:
            candidates = st.versions(subject, deleted=deleted)
            if not candidates:
                raise _subject_not_found(subject)
            parsed = self._parse(
                st,
                schema,
                schema_type=schema_type,
                references=references,
                normalize=self._normalize_wanted(st, subject, normalize),
                validate=False,
                subject=subject,
            )
            found = self._match(st, candidates, parsed)
            if found is None:
                raise _schema_not_found()
            return self._version_json(st, found)

        return self._read(read)

    # -- schemas by id -----------------------------------------------------------------------------
    def _schema_by_id(self, st: _State, schema_id: int) -> _StoredSchema:
        stored = st.schemas.get(schema_id)
        if stored is None or not st.is_resolvable(schema_id):
            raise _schema_not_found(schema_id)
        return stored

    def get_schema(self, schema_id: int, *, fetch_max_id: bool = False) -> dict[str, Any]:
        """``GET /schemas/ids/{id}``: ``{"schema"}`` (+ ``references``, ``maxId``); works after soft delete."""

        def read(st: _State) -> dict[str, Any]:
            stored = self._schema_by_id(st, schema_id)
            out: dict[str, Any] = {"schema": stored.text}
            if stored.references:
                out["references"] = [r.to_json() for r in stored.references]
            if fetch_max_id:
                out["maxId"] = st.max_id
            return out

        return self._read(read)

    def subjects_for_id(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        """``GET /schemas/ids/{id}/subjects``."""
        return sorted({v["subject"] for v in self.versions_for_id(schema_id, deleted=deleted)})

    def versions_for_id(self, schema_id: int, *, deleted: bool = False) -> list[dict[str, Any]]:
        """``GET /schemas/ids/{id}/versions``: ``[{"subject", "version"}]``."""

        def read(st: _State) -> list[dict[str, Any]]:
            self._schema_by_id(st, schema_id)
            return [
                {"subject": v.subject, "version": v.version}
                for subject in sorted(st.subjects)
                for v in st.versions(subject, deleted=deleted)
                if v.schema_id == schema_id
            ]

        return self._read(read)

    # -- subjects and versions ---------------------------------------------------------------------
    def list_subjects(
        self,
        *,
        prefix: str | None = None,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        """``GET /subjects``: subjects with a live version; ``deleted`` adds fully soft-deleted ones."""

        def read(st: _State) -> list[str]:
            out = []
            for subject in sorted(st.subjects):
                if prefix and not subject.startswith(prefix):
                    continue
                has_live = any(not v.deleted for v in st.subjects[subject].values())
                if (deleted_only and not has_live) or (not deleted_only and (has_live or deleted)):
                    out.append(subject)
            return _paginate(out, offset, limit)

        return self._read(read)

    def list_versions(
        self,
        subject: str,
        *,
        deleted: bool = False,
        deleted_only: bool = False,
        deleted_as_negative: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[int]:
        """``GET /subjects/{subject}/versions``: ascending version numbers."""

        def read(st: _State) -> list[int]:
            every = st.versions(subject, deleted=True)
            if deleted_only:
                chosen = [v for v in every if v.deleted]
            else:
                chosen = [v for v in every if deleted or deleted_as_negative or not v.deleted]
            if not chosen and (not deleted_only or not every):
                raise _subject_not_found(subject)
            numbers = [-v.version if deleted_as_negative and v.deleted else v.version for v in chosen]
            return _paginate(numbers, offset, limit)

        return self._read(read)

    def _find_version(self, st: _State, subject: str, version: object, *, deleted: bool) -> _Version:
        number = _parse_version_id(version)
        candidates = st.versions(subject, deleted=deleted)
        if not candidates:
            raise _subject_not_found(subject)
        if number is None:
            return candidates[-1]
        for v in candidates:
            if v.version == number:
                return v
        raise _version_not_found(subject, number)

    def get_version(self, subject: str, version: object, *, deleted: bool = False) -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}`` (``latest``/-1 = highest live version)."""
        return self._read(lambda st: self._version_json(st, self._find_version(st, subject, version, deleted=deleted)))

    def referenced_by(self, subject: str, version: object) -> list[int]:
        """``GET /subjects/{subject}/versions/{version}/referencedby``: ids of schemas referencing it."""

        def read(st: _State) -> list[int]:
            target = self._find_version(st, subject, version, deleted=True)
            return self._referrers(st, target)

        return self._read(read)

    @staticmethod
    def _referrers(st: _State, target: _Version) -> list[int]:
        ids = {
            v.schema_id
            for vs in st.subjects.values()
            for v in vs.values()
            if not v.deleted
            and any((r.subject, r.version) == (target.subject, target.version) for r in st.schemas[v.schema_id].references)
        }
        return sorted(ids)

    # -- deletes -----------------------------------------------------------------------------------
    def delete_version(self, subject: str, version: object, *, permanent: bool = False) -> int:
        """``DELETE /subjects/{subject}/versions/{version}``: soft first, then ``permanent``."""
        _check_subject(subject)
        number = _parse_version_id(version)

        def mutate(st: _State) -> tuple[list[_Op], int]:
            every = st.versions(subject, deleted=True)
            if not every:
                raise _subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if number is None:
                pool = every if permanent else live
                if not pool:
                    raise _version_not_found(subject, "latest")
                target = pool[-1]
            else:
                matches = [v for v in every if v.version == number]
                if not matches:
                    raise _version_not_found(subject, number)
                target = matches[0]
            self._ensure_writable(st, subject)
            if not permanent and target.deleted:
                raise VersionSoftDeleted(
                    f"Subject '{subject}' Version {target.version} was soft deleted."
                    "Set permanent=true to delete permanently",
                    status_code=404,
                    error_code=40406,
                    subject=subject,
                )
            if permanent and not target.deleted:
                raise VersionNotSoftDeleted(
                    f"Subject '{subject}' Version {target.version} was not deleted first before being "
                    "permanently deleted",
                    status_code=404,
                    error_code=40407,
                    subject=subject,
                )
            referrers = self._referrers(st, target)
            if referrers:
                raise RegistryError(
                    f"One or more references exist to the schema {{subject={subject},version={target.version}}}"
                    f" from schema ids {referrers}.",
                    status_code=422,
                    error_code=42206,
                    subject=subject,
                )
            if not permanent:
                return [_PutVersion(dataclasses.replace(target, deleted=True))], target.version
            ops: list[_Op] = [_DropVersion(subject, target.version)]
            if len(every) == 1:  # the subject's last version: its config and mode go too
                ops += self._drop_subject_settings(st, subject)
            return ops, target.version

        return self._write(mutate)

    @staticmethod
    def _drop_subject_settings(st: _State, subject: str) -> list[_Op]:
        ops: list[_Op] = []
        if subject in st.config:
            ops.append(_PutConfig(subject, None))
        if subject in st.mode:
            ops.append(_PutMode(subject, None))
        return ops

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """``DELETE /subjects/{subject}``: soft-delete every live version, or purge a soft-deleted subject."""
        _check_subject(subject)

        def mutate(st: _State) -> tuple[list[_Op], list[int]]:
            every = st.versions(subject, deleted=True)
            if not every:
                raise _subject_not_found(subject)
            self._ensure_writable(st, subject)
            live = [v for v in every if not v.deleted]
            if not permanent and not live:
                raise SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                    status_code=404,
                    error_code=40404,
                    subject=subject,
                )
            if permanent and live:
                raise SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                    status_code=404,
                    error_code=40405,
                    subject=subject,
                )
            for v in every:
                referrers = self._referrers(st, v)
                if referrers:
                    raise RegistryError(
                        f"One or more references exist to the schema {{subject={subject},version={v.version}}}"
                        f" from schema ids {referrers}.",
                        status_code=422,
                        error_code=42206,
                        subject=subject,
                    )
            if not permanent:
                return [_PutVersion(dataclasses.replace(v, deleted=True)) for v in live], [v.version for v in live]
            ops: list[_Op] = [_DropVersion(subject, v.version) for v in every]
            ops += self._drop_subject_settings(st, subject)
            return ops, [v.version for v in every]

        return self._write(mutate)

    # -- compatibility endpoint --------------------------------------------------------------------
    def check_compatibility(
        self,
        subject: str,
        schema: str,
        *,
        version: object = None,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        normalize: bool = False,
        verbose: bool = False,
    ) -> dict[str, Any]:
        """``POST /compatibility/subjects/{subject}/versions[/{version}]``: ``{"is_compatible"[, "messages"]}``.

        With ``version`` only that version is compared (the level's direction, transitivity irrelevant);
        without it, exactly what a registration would compare.
        """
        _check_subject(subject)
        number = None if version is None else _parse_version_id(version)

        def read(st: _State) -> dict[str, Any]:
            live = st.versions(subject, deleted=False)
            if version is not None and number is not None and not any(v.version == number for v in live):
                raise _version_not_found(subject, number)
            try:
                parsed = self._parse(
                    st,
                    schema,
                    schema_type=schema_type,
                    references=references,
                    normalize=self._normalize_wanted(st, subject, normalize),
                    subject=subject,
                )
            except RegistryError as exc:
                if verbose and exc.error_code == 42201:
                    return {"is_compatible": False, "messages": [exc.message]}
                raise
            level = self._effective_config(st, subject)["compatibilityLevel"]
            if version is None:
                against = live
            else:
                against = [v for v in live if v.version == number] if number is not None else live[-1:]
                level = level.removesuffix("_TRANSITIVE")
            messages = self._incompatibilities(st, subject, parsed, level, against)
            out: dict[str, Any] = {"is_compatible": not messages}
            if verbose:
                out["messages"] = messages
            return out

        return self._read(read)

    # -- config ------------------------------------------------------------------------------------
    @staticmethod
    def _config_json(config: Mapping[str, Any]) -> dict[str, Any]:
        return {k: config[k] for k in ("compatibilityLevel", "normalize") if k in config}

    def get_config(self, subject: str | None = None, *, default_to_global: bool = False) -> dict[str, Any]:
        """``GET /config[/{subject}]``: ``{"compatibilityLevel": ...}`` (note: not ``compatibility``)."""

        def read(st: _State) -> dict[str, Any]:
            if subject is None:
                return self._config_json(self._effective_config(st, None))
            if subject in st.config and not default_to_global:
                return self._config_json(st.config[subject])
            if default_to_global:
                return self._config_json(self._effective_config(st, subject))
            raise SubjectConfigNotFound(
                f"Subject '{subject}' does not have subject-level compatibility configured",
                status_code=404,
                error_code=40408,
                subject=subject,
            )

        return self._read(read)

    def set_config(
        self, subject: str | None, compatibility: object = None, *, normalize: object = None
    ) -> dict[str, Any]:
        """``PUT /config[/{subject}]``: echoes ``{"compatibility": LEVEL}`` (+ ``normalize`` when given)."""
        if subject is not None:
            _check_subject(subject)
        if compatibility is None and normalize is None:
            raise InvalidCompatibilityLevel(_MSG_INVALID_LEVEL, status_code=422, error_code=42203, subject=subject)
        level = None if compatibility is None else _level(compatibility)

        def mutate(st: _State) -> tuple[list[_Op], dict[str, Any]]:
            self._ensure_writable(st, subject)
            config = dict(st.config.get(subject, {}))
            echo: dict[str, Any] = {}
            if level is not None:
                config["compatibilityLevel"] = level
                echo["compatibility"] = level
            if normalize is not None:
                config["normalize"] = bool(normalize)
                echo["normalize"] = bool(normalize)
            return [_PutConfig(subject, config)], echo

        return self._write(mutate)

    def delete_config(self, subject: str | None = None) -> dict[str, Any]:
        """``DELETE /config[/{subject}]``: the removed config; global falls back to the server default."""

        def mutate(st: _State) -> tuple[list[_Op], dict[str, Any]]:
            self._ensure_writable(st, subject)
            if subject is None:
                old = self._config_json(self._effective_config(st, None))
                return [_PutConfig(None, None)], old
            if subject not in st.config:
                raise _subject_not_found(subject)
            return [_PutConfig(subject, None)], self._config_json(st.config[subject])

        return self._write(mutate)

    # -- mode --------------------------------------------------------------------------------------
    def get_mode(self, subject: str | None = None, *, default_to_global: bool = False) -> dict[str, str]:
        """``GET /mode[/{subject}]``."""

        def read(st: _State) -> dict[str, str]:
            if subject is None or subject in st.mode or default_to_global:
                return {"mode": self._mode(st, subject)}
            raise SubjectModeNotFound(
                f"Subject '{subject}' does not have subject-level mode configured",
                status_code=404,
                error_code=40409,
                subject=subject,
            )

        return self._read(read)

    def set_mode(self, subject: str | None, mode: object, *, force: bool = False) -> dict[str, str]:
        """``PUT /mode[/{subject}]``: echoes ``{"mode": MODE}``."""
        if subject is not None:
            _check_subject(subject)
        value = mode.upper() if isinstance(mode, str) else None
        if value not in MODES or (value == "FORWARD" and subject is not None):
            raise InvalidMode(_MSG_INVALID_MODE, status_code=422, error_code=42204, subject=subject)

        def mutate(st: _State) -> tuple[list[_Op], dict[str, str]]:
            if value == "IMPORT" and not force:
                scope = [subject] if subject is not None else list(st.subjects)
                if any(st.versions(s, deleted=False) for s in scope):
                    raise _not_permitted("Cannot import since found existing subjects", subject)
            return [_PutMode(subject, value)], {"mode": value}

        return self._write(mutate)

    def delete_mode(self, subject: str) -> dict[str, str]:
        """``DELETE /mode/{subject}``: the removed mode."""

        def mutate(st: _State) -> tuple[list[_Op], dict[str, str]]:
            if subject not in st.mode:
                raise _subject_not_found(subject)
            return [_PutMode(subject, None)], {"mode": st.mode[subject]}

        return self._write(mutate)

