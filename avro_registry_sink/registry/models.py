"""Wire models of the Confluent Schema Registry REST API (pydantic v2).

Field names are snake_case in Python and camelCase on the wire (``schema_type`` ↔ ``schemaType``);
both spellings are accepted when building a model. Unknown response fields are ignored, because
newer registries add fields (``guid``, ``ts`` ...) that this tool does not need. A missing ``schemaType``
means AVRO (Confluent omits it for AVRO before CP 8.0). Data contracts (``metadata``, ``ruleSet``) are kept
as the plain JSON objects the registry answers (``None`` when it gives none).

>>> Schema.model_validate({"schema": '"string"'}).schema_type
'AVRO'
>>> RegisteredSchema.model_validate({"subject": "t-value", "version": 1, "id": 7, "schema": '"string"'}).id
7
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "CompatibilityLevel",
    "CompatibilityResult",
    "ErrorBody",
    "Mode",
    "ModeBody",
    "RegisterResponse",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "ServerConfig",
]


class _CaseInsensitiveEnum(str, Enum):
    """Registries accept level and mode names in any case and echo them upper-case."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            return cls.__members__.get(value.upper())
        return None


class CompatibilityLevel(_CaseInsensitiveEnum):
    """A subject's (or the registry's global) compatibility level."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


class Mode(_CaseInsensitiveEnum):
    """A registry's (or subject's) mode; ``READONLY_OVERRIDE`` is deprecated, ``FORWARD`` global only."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"
    FORWARD = "FORWARD"


class _Wire(BaseModel):
    # camelCase on the wire, snake_case in Python; frozen so instances can be cached and shared.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class SchemaReference(_Wire):
    """A reference from one schema to a named type registered under another subject."""

    name: str
    subject: str
    version: int


# pydantic warns that a field called ``schema`` shadows the deprecated ``BaseModel.schema()``; the
# field is the registry's own name, and an instance attribute wins over that classmethod.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class Schema(_Wire):
        """A schema as stored by the registry (``GET /schemas/ids/{id}``).

        >>> Schema(schema='"long"').model_dump(by_alias=True, exclude_defaults=True)
        {'schema': '"long"'}
        """

        schema: str  # type: ignore[assignment]  # pydantic\'s deprecated BaseModel.schema
        schema_type: str = "AVRO"
        references: list[SchemaReference] = Field(default_factory=list)
        metadata: dict[str, Any] | None = None
        rule_set: dict[str, Any] | None = None

    class RegisteredSchema(_Wire):
        """One version of a subject (``GET /subjects/{s}/versions/{v}``, ``POST /subjects/{s}``).

        >>> RegisteredSchema(subject="t-value", version=2, id=9, schema='"int"').schema_type
        'AVRO'
        """

        subject: str
        version: int
        id: int
        schema: str  # type: ignore[assignment]  # pydantic\'s deprecated BaseModel.schema
        schema_type: str = "AVRO"
        references: list[SchemaReference] = Field(default_factory=list)
        metadata: dict[str, Any] | None = None
        rule_set: dict[str, Any] | None = None

        @property
        def properties(self) -> dict[str, str]:
            """The ``metadata.properties`` of this version ({} without metadata)."""
            return dict((self.metadata or {}).get("properties") or {})

    class RegisterResponse(_Wire):
        """The answer to a registration: ``{"id": N}`` (CP ≤ 7.4.0, Karapace) or the stored version."""

        id: int
        version: int | None = None
        schema: str | None = None  # type: ignore[assignment]
        schema_type: str = "AVRO"
        metadata: dict[str, Any] | None = None
        rule_set: dict[str, Any] | None = None


class CompatibilityResult(BaseModel):
    """The answer of ``POST /compatibility/subjects/{s}/versions[/{v}]``; ``messages`` need ``verbose``.

    >>> CompatibilityResult.model_validate({"is_compatible": True}).messages
    []
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    is_compatible: bool
    messages: list[str] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """A registry error body: ``{"error_code": 40401, "message": "Subject 'x' not found."}``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    error_code: int | None = None
    message: str = ""


class ServerConfig(_Wire):
    """``/config`` bodies. GET answers ``compatibilityLevel``; PUT takes and echoes ``compatibility``.

    The data-contract fields: ``compatibilityGroup`` (the metadata property that splits a subject into groups
    checked apart, e.g. ``major_version``), ``defaultMetadata``/``overrideMetadata`` and
    ``defaultRuleSet``/``overrideRuleSet`` (merged into every registration).
    """

    compatibility_level: CompatibilityLevel | None = None
    compatibility: CompatibilityLevel | None = None
    normalize: bool | None = None
    compatibility_group: str | None = None
    default_metadata: dict[str, Any] | None = None
    override_metadata: dict[str, Any] | None = None
    default_rule_set: dict[str, Any] | None = None
    override_rule_set: dict[str, Any] | None = None

    @property
    def level(self) -> CompatibilityLevel | None:
        """Whichever of the two spellings the registry used."""
        return self.compatibility_level or self.compatibility


class ModeBody(_Wire):
    """``/mode`` bodies: ``{"mode": "READWRITE"}``."""

    mode: Mode
