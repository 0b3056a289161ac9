"""Data contracts of the embedded registry: schema ``metadata`` and ``ruleSet``, as Confluent's REST API has them.

Wire shapes and rules follow Confluent Schema Registry (``shared/reference/data-contracts.md`` §1-§5):

* ``metadata``: ``{"tags": {path: [tag]}, "properties": {name: value}, "sensitive": [name]}``, every part
  optional; tags and sensitive names are sets, kept sorted; empty parts are left out of answers.
* ``ruleSet``: ``{"migrationRules": [...], "domainRules": [...], "encodingRules": [...], "enableAt": ...}``; a rule
  is ``name, doc, kind, mode, type, tags, params, expr, onSuccess, onFailure, disabled``. ``kind`` defaults to
  TRANSFORM and ``mode`` to WRITEREAD, as Confluent fills them in (confluent-kafka-python ignores a rule
  without them). Validation is Confluent's ``Rule.validate``/``RuleSet.validate``: 422 / 42210.
* Merging (register and config defaults/overrides): metadata ``properties`` and ``tags`` merged per key (the
  later wins), ``sensitive`` united; rule sets per list, a later rule replacing an earlier one of the same name.
* Identity: an absent part (``None``) and an empty one (``{}``) differ, as in Confluent's MD5.

Everything here is pure: plain JSON-able dicts in and out, no store state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from avro_registry_sink.errors import InvalidRuleSet, InvalidSchema

__all__ = [
    "CONFIG_CONTRACT_FIELDS",
    "RULE_KINDS",
    "RULE_MODES",
    "contract_material",
    "lookup_view",
    "merge_metadata",
    "merge_rule_set",
    "normalize_metadata",
    "normalize_rule_set",
    "properties_of",
    "with_version_property",
]

RULE_KINDS = ("CONDITION", "TRANSFORM")
RULE_MODES = ("UPGRADE", "DOWNGRADE", "UPDOWN", "WRITE", "READ", "WRITEREAD")
_MIGRATION_MODES = ("UPGRADE", "DOWNGRADE", "UPDOWN")
_DOMAIN_MODES = ("WRITE", "READ", "WRITEREAD")
_RULE_LISTS = ("migrationRules", "domainRules", "encodingRules")
_ENABLE_AT = ("ALL", "CLIENT", "GATEWAY", "SERVER", "NONE")
_RULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_RULE_KEYS = ("name", "doc", "kind", "mode", "type", "tags", "params", "expr", "onSuccess", "onFailure", "disabled")
VERSION_PROPERTY = "confluent:version"
#: The contract fields of a subject's (or the global) config, besides the level and ``normalize``.
CONFIG_CONTRACT_FIELDS = ("compatibilityGroup", "defaultMetadata", "overrideMetadata", "defaultRuleSet",
                          "overrideRuleSet")


def _invalid_metadata(detail: str) -> InvalidSchema:
    return InvalidSchema(f"Invalid metadata: {detail}", status_code=422, error_code=42201)


def _invalid_rule(detail: str) -> InvalidRuleSet:
    return InvalidRuleSet(f"Invalid rule set: {detail}", status_code=422, error_code=42210)


def _strings(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid_metadata(f"{what} must be a list of strings, not {json.dumps(value)[:100]}")
    return sorted(set(value))


def normalize_metadata(value: object) -> dict[str, Any] | None:
    """A request's ``metadata`` as stored: ``None`` stays ``None`` (absent: inherit); parts sorted, empties dropped.

    >>> normalize_metadata({"properties": {"b": "2", "a": "1"}, "tags": {}})
    {'properties': {'a': '1', 'b': '2'}}
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid_metadata(f"expected an object, not {json.dumps(value)[:100]}")
    out: dict[str, Any] = {}
    tags = value.get("tags")
    if tags is not None:
        if not isinstance(tags, dict):
            raise _invalid_metadata("tags must map a path to a list of tags")
        cleaned = {str(path): _strings(names, f"tags of {path!r}") for path, names in sorted(tags.items())}
        if cleaned:
            out["tags"] = cleaned
    properties = value.get("properties")
    if properties is not None:
        if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
            raise _invalid_metadata("properties must map names to string values")
        if properties:
            out["properties"] = dict(sorted(properties.items()))
    sensitive = _strings(value.get("sensitive"), "sensitive")
    if sensitive:
        out["sensitive"] = sensitive
    return out


def _rule(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid_rule(f"{where} must be an object")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid_rule(f"{where}: name is required")
    if len(name) > 256 or not _RULE_NAME.fullmatch(name):
        raise _invalid_rule(f"rule name {name!r} must start with a letter or '_' and hold only letters, digits, '_' "
                            "and '-' (at most 256 characters)")
    kind = value.get("kind") or "TRANSFORM"
    mode = value.get("mode") or "WRITEREAD"
    if not isinstance(kind, str) or kind.upper() not in RULE_KINDS:
        raise _invalid_rule(f"rule {name!r}: kind must be one of {', '.join(RULE_KINDS)}")
    if not isinstance(mode, str) or mode.upper() not in RULE_MODES:
        raise _invalid_rule(f"rule {name!r}: mode must be one of {', '.join(RULE_MODES)}")
    rule_type = value.get("type")
    if not isinstance(rule_type, str) or not rule_type:
        raise _invalid_rule(f"rule {name!r}: type is required")
    out: dict[str, Any] = {"name": name, "kind": kind.upper(), "mode": mode.upper(), "type": rule_type}
    if value.get("doc") is not None:
        out["doc"] = str(value["doc"])
    tags = value.get("tags")
    if tags:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise _invalid_rule(f"rule {name!r}: tags must be a list of strings")
        out["tags"] = sorted(set(tags))
    params = value.get("params")
    if params:
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise _invalid_rule(f"rule {name!r}: params must map names to string values")
        out["params"] = dict(sorted(params.items()))
    for key in ("expr", "onSuccess", "onFailure"):
        if value.get(key) is not None:
            if not isinstance(value[key], str):
                raise _invalid_rule(f"rule {name!r}: {key} must be a string")
            out[key] = value[key]
    for key in ("onSuccess", "onFailure"):
        if "," in out.get(key, "") and out["mode"] not in ("WRITEREAD", "UPDOWN"):
            raise _invalid_rule(f"rule {name!r}: a pair of {key} actions needs mode WRITEREAD or UPDOWN")
    out["disabled"] = bool(value.get("disabled", False))
    return {k: out[k] for k in _RULE_KEYS if k in out}


def normalize_rule_set(value: object) -> dict[str, Any] | None:
    """A request's ``ruleSet`` as stored (``None``: absent), each rule checked and completed with Confluent's
    defaults; raises :class:`~avro_registry_sink.errors.InvalidRuleSet` (422/42210) like Confluent.

    >>> normalize_rule_set({"migrationRules": [{"name": "up", "type": "JSONATA", "mode": "UPGRADE", "expr": "$"}]})
    {'migrationRules': [{'name': 'up', 'kind': 'TRANSFORM', 'mode': 'UPGRADE', 'type': 'JSONATA', 'expr': '$', 'disabled': False}]}
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid_rule("expected an object")
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for key in _RULE_LISTS:
        rules = value.get(key)
        if rules is None:
            continue
        if not isinstance(rules, list):
            raise _invalid_rule(f"{key} must be a list")
        cleaned = [_rule(r, f"{key}[{i}]") for i, r in enumerate(rules)]
        allowed = _MIGRATION_MODES if key == "migrationRules" else _DOMAIN_MODES
        for rule in cleaned:
            if rule["mode"] not in allowed:
                raise _invalid_rule(f"rule {rule['name']!r} in {key} must have mode {' or '.join(allowed)}")
            if rule["name"] in seen:
                raise _invalid_rule(f"rule name {rule['name']!r} is used twice")
            seen.add(rule["name"])
        if cleaned:
            out[key] = cleaned
    enable_at = value.get("enableAt")
    if enable_at is not None:
        if not isinstance(enable_at, str) or enable_at.upper() not in _ENABLE_AT:
            raise _invalid_rule(f"enableAt must be one of {', '.join(_ENABLE_AT)}")
        out["enableAt"] = enable_at.upper()
    return out


def merge_metadata(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Confluent's ``Metadata.mergeMetadata``: properties and tags per key (``new`` wins), sensitive united.

    >>> merge_metadata({"properties": {"a": "1", "b": "1"}}, {"properties": {"b": "2"}})
    {'properties': {'a': '1', 'b': '2'}}
    """
    if old is None:
        return None if new is None else dict(new)
    if new is None:
        return dict(old)
    out: dict[str, Any] = {}
    tags = {**old.get("tags", {}), **new.get("tags", {})}
    if tags:
        out["tags"] = dict(sorted(tags.items()))
    properties = {**old.get("properties", {}), **new.get("properties", {})}
    if properties:
        out["properties"] = dict(sorted(properties.items()))
    sensitive = sorted(set(old.get("sensitive", [])) | set(new.get("sensitive", [])))
    if sensitive:
        out["sensitive"] = sensitive
    return out


def merge_rule_set(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Confluent's ``RuleSet.mergeRuleSets``: per list, ``old`` rules named again in ``new`` dropped, ``new`` appended."""
    if old is None:
        return None if new is None else dict(new)
    if new is None:
        return dict(old)
    out: dict[str, Any] = {}
    for key in _RULE_LISTS:
        newer = list(new.get(key, []))
        names = {r["name"] for r in newer}
        merged = [r for r in old.get(key, []) if r["name"] not in names] + newer
        if merged:
            out[key] = merged
    enable_at = new.get("enableAt", old.get("enableAt"))
    if enable_at is not None:
        out["enableAt"] = enable_at
    return out


def properties_of(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``properties`` of a metadata object ({} for none)."""
    return dict((metadata or {}).get("properties", {}))


def with_version_property(metadata: dict[str, Any] | None, version: int) -> dict[str, Any] | None:
    """``metadata`` with ``confluent:version`` set to ``version`` (Confluent writes it on explicit versions)."""
    properties = {**properties_of(metadata), VERSION_PROPERTY: str(version)}
    return {**(metadata or {}), "properties": dict(sorted(properties.items()))}


def contract_material(metadata: Mapping[str, Any] | None, rule_set: Mapping[str, Any] | None) -> str:
    """What the metadata and rule set add to a schema's identity ("" when both are absent, so the digests of
    schemas without data contracts are those of earlier releases)."""
    if metadata is None and rule_set is None:
        return ""
    parts = []
    if metadata is not None:
        parts.append("\nmetadata:" + json.dumps(metadata, sort_keys=True, separators=(",", ":")))
    if rule_set is not None:
        parts.append("\nruleSet:" + json.dumps(rule_set, sort_keys=True, separators=(",", ":")))
    return "".join(parts)


def lookup_view(metadata: Mapping[str, Any] | None, rule_set: Mapping[str, Any] | None) -> object:
    """What a lookup compares: metadata (without ``confluent:version``, which Confluent ignores when only one side
    has it) and rule set, as a hashable value."""
    if metadata is not None and VERSION_PROPERTY in metadata.get("properties", {}):
        properties = {k: v for k, v in metadata["properties"].items() if k != VERSION_PROPERTY}
        metadata = {k: v for k, v in metadata.items() if k != "properties"} | ({"properties": properties}
                                                                              if properties else {})
    return (json.dumps(metadata, sort_keys=True), json.dumps(rule_set, sort_keys=True))
