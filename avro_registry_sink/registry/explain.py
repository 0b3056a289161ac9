"""Why a schema is incompatible with a subject, worked out locally with Apache Avro's own checker.

For registries that answer an incompatible registration or check without reasons (Apicurio's Confluent
API gives ``{"is_compatible": false}`` and a generic 409). The verdict stays the registry's; this only
explains it, against the same versions the subject's compatibility level compares with.
"""

from __future__ import annotations

from typing import Any

import avro.errors
import avro.schema

from avro_registry_sink.errors import RegistryError
from avro_registry_sink.registry.embedded.compatibility import differences

__all__ = ["explain_incompatibility"]

_BACKWARD = {"BACKWARD", "BACKWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}
_FORWARD = {"FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}


def explain_incompatibility(client: Any, subject: str, schema_text: str) -> list[str]:
    """Apache Avro's reasons why ``schema_text`` breaks ``subject``'s compatibility level ([] if it finds none).

    Reads the level (``defaultToGlobal``) and the versions it compares with: the latest, or all of them for a
    ``_TRANSITIVE`` level. Any registry or parse error gives [] (an explanation is best effort).
    """
    try:
        level = str(getattr(client.get_config(subject, default_to_global=True), "value", "BACKWARD"))
        if level.endswith("_TRANSITIVE"):
            olds = [client.get_version(subject, v).schema for v in client.get_versions(subject)]
        else:
            olds = [client.get_latest(subject).schema]
        new = avro.schema.parse(schema_text)
        reasons: list[str] = []
        for old_text in olds:
            old = avro.schema.parse(old_text)
            if level in _BACKWARD:
                reasons += differences(new, old, ("new", "old"))
            if level in _FORWARD:
                reasons += differences(old, new, ("old", "new"))
    except (RegistryError, avro.errors.AvroException, ValueError, AttributeError):  # e.g. a registry without config
        return []
    return list(dict.fromkeys(reasons))
