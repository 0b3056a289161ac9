"""Schema compatibility with Apache Avro's own ``ReaderWriterCompatibilityChecker``, in Confluent's words.

:func:`differences` returns Confluent's messages (one per incompatibility, with its location); the
verdict is entirely the checker's.
"""

from __future__ import annotations

import types
from contextvars import ContextVar
from typing import Any

import avro.compatibility as _avro_compat
import avro.errors
import avro.name
import avro.schema

from avro_registry_sink.registry.embedded.canonical import plain_symbol

__all__ = ["differences"]

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


def _indexed_lookup_writer_field(writer_schema: Any, reader_field: Any) -> Any:
    # The checker's own lookup rebuilds ``fields_dict`` (a property) for every reader field, which makes a
    # record of n fields cost n^2; the index is built once per writer record and kept on it.
    index = writer_schema.__dict__.get("_fields_by_name")
    if index is None:
        index = {f.name: f for f in writer_schema.fields}
        writer_schema.__dict__["_fields_by_name"] = index
    found = index.get(reader_field.name)
    if found is not None:
        return found
    aliases = reader_field.props.get("aliases")
    if not isinstance(aliases, list):
        return None
    for alias in aliases:
        found = index.get(alias)
        if found is not None:
            return found
    return None


def _make_field_objects(field_data: Any, names: Any, validate_names: bool = True) -> list[Any]:
    """Apache Avro's ``RecordSchema.make_field_objects`` with a set for the duplicate-name check.

    Avro's own keeps the names seen in a list, so building a record of n fields costs n^2 (minutes for a
    wide record, under the registry's lock). Same fields, same errors, in the same order.
    """
    field_objects = []
    seen: set[Any] = set()
    for field in field_data:
        if not callable(getattr(field, "get", None)):
            raise avro.errors.SchemaParseException(f"Not a valid field: {field}")
        new_field = avro.schema.Field(
            field.get("type"),
            field.get("name"),
            "default" in field,
            field.get("default"),
            field.get("order"),
            names,
            field.get("doc"),
            avro.schema.get_other_props(field, avro.schema.FIELD_RESERVED_PROPS),
            validate_names=validate_names,
        )
        if new_field.name in seen:
            raise avro.errors.SchemaParseException(f"Field name {new_field.name} already in use.")
        seen.add(new_field.name)
        field_objects.append(new_field)
    return field_objects


avro.schema.RecordSchema.make_field_objects = staticmethod(_make_field_objects)  # type: ignore[method-assign]

_CHECKER_NS: dict[str, Any] = dict(vars(_avro_compat))
_CHECKER_NS["incompatible"] = _recording_incompatible
_CHECKER_NS["lookup_writer_field"] = _indexed_lookup_writer_field
for _fn_name in ("type_mismatch", "check_schema_names", "check_fixed_size", "check_reader_enum_contains_writer_enum"):
    _CHECKER_NS[_fn_name] = _rebind(getattr(_avro_compat, _fn_name), _CHECKER_NS)


class _RecordingChecker(_avro_compat.ReaderWriterCompatibilityChecker):
    def get_compatibility(
        self, reader: Any, writer: Any, reference_token: str = "/", location: list[str] | None = None
    ) -> Any:
        # Same memoisation as the checker's, keyed by the (reader, writer) identities as a tuple: its
        # ``id(reader) ^ id(writer)`` hash collides for neighbouring objects, which made wide records slow.
        key = (id(reader), id(writer))
        memo = self.memoize_map
        if key in memo:
            result = memo[key]
            if result.compatibility is _avro_compat.SchemaCompatibilityType.recursion_in_progress:
                result = _avro_compat.CompatibleResult
            return result
        memo[key] = _avro_compat.SchemaCompatibilityResult()
        result = self.calculate_compatibility(reader, writer, (location or []) + [reference_token])
        memo[key] = result
        return result

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
        symbols = sorted(plain_symbol(s.strip().strip("'\"")) for s in message.strip("{}").split(","))
        return f"[{', '.join(symbols)}]"
    return message


def differences(reader: avro.schema.Schema, writer: avro.schema.Schema, names: tuple[str, str]) -> list[str]:
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
        triples = list(zip(result.incompatibilities, sorted(result.messages), sorted(result.locations), strict=False))
    out = []
    for kind, message, location in triples:
        error_type = kind.name.upper()
        java_message = _java_message(error_type, message)
        description = _DESCRIPTIONS.get(error_type, "").format(*names, path=location, message=java_message)
        out.append(f"{{errorType:'{error_type}', description:'{description}', additionalInfo:'{java_message}'}}")
    return out


