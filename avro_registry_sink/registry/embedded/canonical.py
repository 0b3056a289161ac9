"""Avro schema text as Java's ``Schema.Parser`` reads it and ``Schema.toString()`` prints it.

The embedded registry's schema identity: :func:`canonical_schema` gives the compact text Java prints
(standard keys in Avro's fixed order, custom properties and logical-type attributes kept in their original
order, ``{"type":"string"}`` printed as ``"string"``, names printed like full names), optionally with
Confluent's ``normalize=true`` rewrites. A text Java would refuse raises :class:`SchemaParseError` with the
parser's message.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SchemaParseError", "SchemaParser", "canonical_schema", "dumps_compact", "freeze_value", "json_depth",
           "load_schema_json", "normalize_schema", "plain_symbol", "show_value", "type_to_json", "write_canonical"]

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


def json_depth(value: object) -> int:
    """Nesting levels of JSON containers in ``value`` (``"string"`` is 0, ``{"type": "string"}`` 1); no recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list)))
    return deepest


def _refuse_constant(name: str) -> float:
    raise SchemaParseError(f"Non-finite number {name} is not valid JSON (NaN and Infinity cannot be a default)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise SchemaParseError(f"Number {text} is out of the range of a double")
    return value


def load_schema_json(text: str, *, max_depth: int | None = None, finite: bool = False) -> object:
    """``json.loads`` for schema text, refusing what recursive code must not see.

    Deeper than ``max_depth`` container levels raises :class:`SchemaParseError` (so does nesting too deep for
    the JSON decoder itself); with ``finite``, ``NaN``/``Infinity`` and numbers beyond a double's range do too.
    """
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float) if finite else json.loads(text)
    except RecursionError:
        raise SchemaParseError(f"JSON nested too deeply (the limit is {max_depth} levels)") from None
    except SchemaParseError:
        raise
    except ValueError as exc:
        raise SchemaParseError(f"Invalid JSON: {exc}") from None
    if max_depth is not None and isinstance(data, (dict, list)) and text.count("{") + text.count("[") > max_depth:
        depth = json_depth(data)
        if depth > max_depth:
            raise SchemaParseError(f"The schema is nested {depth} JSON levels deep; the limit is {max_depth}")
    return data


def show_value(node: object) -> str:
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


class SchemaParser:
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
                raise SchemaParseError(f"Undefined name: {show_value(node)}")
            return found
        if isinstance(node, list):
            return self._parse_union(node)
        if isinstance(node, dict):
            return self._parse_object(node)
        raise SchemaParseError(f"Schema not yet supported: {show_value(node)}")

    def _parse_union(self, node: list[Any]) -> _Type:
        branches: list[_Type] = []
        seen: set[str] = set()
        for item in node:
            branch = self.parse(item)
            if branch.kind == "union":
                raise SchemaParseError(f"Nested union: {show_value(node)}")
            key = branch.name.full if branch.is_named and branch.name else branch.kind
            if key in seen:
                raise SchemaParseError(f"Duplicate in union:{key}")
            seen.add(key)
            branches.append(branch)
        return _Type("union", branches=branches)

    def _parse_object(self, node: dict[str, Any]) -> _Type:
        kind = node.get("type")
        if not isinstance(kind, str):
            raise SchemaParseError(f"No type: {show_value(node)}")
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
                raise SchemaParseError(f"No name in schema: {show_value(node)}")
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
                    raise SchemaParseError(f"Array has no items type: {show_value(node)}")
                result = _Type("array", items=self.parse(node["items"]))
            elif kind == "map":
                if "values" not in node:
                    raise SchemaParseError(f"Map has no values type: {show_value(node)}")
                result = _Type("map", values=self.parse(node["values"]))
            elif kind == "fixed":
                size = node.get("size")
                if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= _INT_RANGE[1]:
                    raise SchemaParseError(f"Invalid or no size: {show_value(node)}")
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
            raise SchemaParseError(f"Record has no fields: {show_value(node)}")
        seen: set[str] = set()
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                raise SchemaParseError(f"No field name: {show_value(f)}")
            fname: str = f["name"]
            _check_name(fname)
            if "type" not in f:
                raise SchemaParseError(f"No field type: {show_value(f)}")
            ftype = f["type"]
            if isinstance(ftype, str) and self.lookup(ftype) is None:
                raise SchemaParseError(
                    f'{show_value(ftype)} is not a defined name. The type of the "{fname}" field must be a '
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
                with contextlib.suppress(ValueError):
                    default = float(default)
            if self.validate_defaults and _is_non_finite(default):
                raise SchemaParseError(
                    f"Invalid default for field {fname}: {default} is not a finite number "
                    "(NaN and Infinity have no JSON form)"
                )
            if self.validate_defaults and default is not _MISSING and not _is_valid_default(fnode, default):
                raise SchemaParseError(
                    f"Invalid default for field {fname}: {show_value(default)} not a {write_canonical(fnode)}"
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
            raise SchemaParseError(f"Enum has no symbols: {show_value(node)}")
        seen: set[str] = set()
        for symbol in symbols:
            if not isinstance(symbol, str):
                raise SchemaParseError(f"Enum symbol is not a string: {show_value(symbol)}")
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
        raise SchemaParseError(f"aliases not an array: {show_value(node)}")
    out: list[str] = []
    for alias in aliases:
        if not isinstance(alias, str):
            raise SchemaParseError(f"alias not a string: {show_value(alias)}")
        if alias not in out:  # Java keeps aliases in a LinkedHashSet
            out.append(alias)
    return out


def _is_non_finite(value: object) -> bool:
    """True if ``value`` holds a NaN or an infinity anywhere (a default may be an array, map or record)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


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
            member = value.get(f.name, f.default)
            if member is _MISSING or not _is_valid_default(f.type, member):
                return False
        return True
    return False


def type_to_json(t: _Type, known: set[str], space: str | None, *, checker: bool = False) -> object:
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
        return [type_to_json(b, known, space, checker=checker) for b in t.branches]
    if kind == "array":
        assert t.items is not None
        out: dict[str, Any] = {"type": "array", "items": type_to_json(t.items, known, space, checker=checker)}
        if not checker:
            out.update(t.props)
        return out
    if kind == "map":
        assert t.values is not None
        out = {"type": "map", "values": type_to_json(t.values, known, space, checker=checker)}
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
    comparisons are unchanged; ``plain_symbol`` turns it back for messages.
    """
    if symbol.isascii() and _is_valid_name(symbol) and not symbol.startswith(_SYMBOL_ESCAPE):
        return symbol
    return _SYMBOL_ESCAPE + symbol.encode("utf-8").hex()


def plain_symbol(symbol: str) -> str:
    if symbol.startswith(_SYMBOL_ESCAPE):
        return bytes.fromhex(symbol[len(_SYMBOL_ESCAPE) :]).decode("utf-8")
    return symbol


def _field_json(f: _Field, known: set[str], space: str | None, *, checker: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": type_to_json(f.type, known, space, checker=checker)}
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


def dumps_compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def write_canonical(t: _Type, known: Iterable[str] = ()) -> str:
    return dumps_compact(type_to_json(t, set(known), None))


def _sorted_json(value: object) -> object:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def normalize_schema(root: _Type) -> None:
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


def freeze_value(value: object) -> object:
    """A hashable, order-insensitive-for-objects view of JSON, as Jackson's node equality sees it."""
    if isinstance(value, dict):
        return frozenset((k, freeze_value(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(freeze_value(v) for v in value)
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
    t = SchemaParser(validate_defaults=False).parse(data)
    if normalize:
        normalize_schema(t)
    return write_canonical(t)


