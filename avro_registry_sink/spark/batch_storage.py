"""The job's batches of a TiCDC storage tree: its data files read, planned and encoded for the sink."""

from __future__ import annotations

from typing import Any

__all__ = ["csv_explicit", "is_update_half"]


def csv_explicit(options: Any) -> set[str]:
    """TiCDC's names of the CSV settings the user gave (the others may be detected from the data)."""
    if options is None:
        return set()
    fields = type(options).model_fields
    return {fields[name].alias or name for name in options.model_fields_set}


def is_update_half(record: Any, csv: Any, op: str) -> bool:
    """A CSV record that is one half of an UPDATE written with ``output-old-value`` (op ``D`` or ``I``)."""
    flag = 3 + int(csv.include_commit_ts)  # op, table, schema, [commit-ts], is-update
    fields = record.fields
    return len(fields) > flag and fields[0].text == op and fields[flag].text == "true"
