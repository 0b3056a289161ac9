"""The product's cache directory, shared by every layer that keeps something built once per machine (Ivy's
packages, the compiled JVM writer, the Python launcher, the compiled debezium-json scanner)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """The product's cache directory: ``AVRO_SINK_CACHE_DIR``, else ``$XDG_CACHE_HOME/avro-registry-sink``
    (``~/.cache/avro-registry-sink``)."""
    if os.environ.get("AVRO_SINK_CACHE_DIR"):
        return Path(os.environ["AVRO_SINK_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "avro-registry-sink"
