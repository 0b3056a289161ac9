"""Replay: dead-lettered input, after the cause was fixed, through the job's own parsing and encoding again.

::

    <checkpoint>/dead-letter/batch-<id>.jsonl      set aside by the job (one record per bad row or message)
    <checkpoint>/dead-letter/replay-<n>.jsonl      set aside again by replay n (same ids, the new reasons)
    <checkpoint>/dead-letter/replayed/replay-<n>.json   what replay n delivered and what failed again
    <checkpoint>/replay/<n>/                       replay n's input, rebuilt from the records' raw bytes

A record is pending until a replay delivers it: each replay takes the pending records (by their stable
``id``), writes their raw bytes back into an input of the same shape as the source (a storage-sink tree
with the same relative paths and schema files, or JSON-lines files of messages), and runs the job's
batch processor on it once, with the same sink, registry and options. Commit ts come from the raw rows, so
they are the original ones. Rows that fail again are dead-lettered again with their original location and
the new reason. The replay's output batch is ``model.REPLAY_BATCH_BASE + n``: a rerun of an interrupted replay
writes the same batch (the file sink replaces it).

>>> # result = replay_dead_letters(spark, JobOptions(source=parse_source("/data/ticdc"), checkpoint=Path("ck")))
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from avro_registry_sink.errors import CheckpointError, ConfigError
from avro_registry_sink.model import REPLAY_BATCH_BASE
from avro_registry_sink.ops.progress import JobTotals, NullProgress, ProgressReporter
from avro_registry_sink.routing.rules import build_router
from avro_registry_sink.side_state import LEGACY_FILES, SideState
from avro_registry_sink.spark.driver.batch_storage import StorageBatches
from avro_registry_sink.spark.driver.checkpoint_files import read_json_file, read_json_lines
from avro_registry_sink.spark.driver.job import _batch_processor, _registry_for, _sink_for, check_checkpoint
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.spark.sources.storage_source import STREAM_DDL

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from avro_registry_sink.routing.rules import TopicRouter
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sinks.sinks import Sink

__all__ = ["ReplayResult", "pending_records", "replay_dead_letters"]



@dataclass
class ReplayResult:
    """What one replay did."""

    replay: int | None  # its number (None: nothing was pending)
    pending: int = 0  # records taken
    delivered: int = 0  # of those, delivered now (rows written, tombstones included, may be more than records)
    failed_again: int = 0
    not_replayable: int = 0  # records without raw bytes (a whole unreadable file): fix the file and rerun
    totals: JobTotals = field(default_factory=JobTotals)
    dead_letter: Path | None = None


def _dead_letter_files(directory: Path) -> list[Path]:
    batches = sorted(directory.glob("batch-*.jsonl"))
    replays = sorted(directory.glob("replay-*.jsonl"))
    return batches + replays


#: What to do about a damaged replay marker or dead-letter line (see ``checkpoint_files``).
_MARKER_ADVICE = ("restore it from a backup, or delete it: the records that replay delivered are then pending again "
                  "(a next replay delivers them twice)")
_LINE_ADVICE = ("remove that line (its row is then not replayed; the input location it had is in the lines around "
                "it) or restore the file from a backup, and replay again")


def _delivered_ids(directory: Path) -> set[str]:
    done: set[str] = set()
    for marker in sorted((directory / "replayed").glob("replay-*.json")):
        data = read_json_file(marker, _MARKER_ADVICE)
        if not isinstance(data.get("delivered"), list):
            raise CheckpointError(f"Checkpoint file {str(marker)!r} is damaged (no list of delivered records): "
                                  f"{_MARKER_ADVICE}.", path=str(marker), problem="damaged")
        done.update(data["delivered"])
    return done


def pending_records(checkpoint: Path) -> list[dict[str, Any]]:
    """The dead-letter records of ``checkpoint`` no replay has delivered yet (the newest record per id);
    :class:`~avro_registry_sink.errors.CheckpointError` names a damaged dead-letter file or replay marker."""
    directory = checkpoint / "dead-letter"
    if not directory.is_dir():
        return []
    delivered = _delivered_ids(directory)
    latest: dict[str, dict[str, Any]] = {}
    for path in _dead_letter_files(directory):
        for record in read_json_lines(path, _LINE_ADVICE):
            if record.get("id") and record["id"] not in delivered:
                latest[record["id"]] = record
    return list(latest.values())


def _next_replay(directory: Path) -> int:
    done = [int(p.stem.split("-")[1]) for p in (directory / "replayed").glob("replay-*.json")]
    return max(done, default=0) + 1


def _location(record: dict[str, Any]) -> tuple[str, int]:
    """(file or stream, position) that orders a source's records as they were read."""
    if record.get("file"):
        return str(record["file"]), int(record.get("line") or 0)
    if record.get("topic") is not None:
        return f"{record['topic']}-{int(record.get('partition') or 0):010d}", int(record.get("offset") or 0)
    source = str(record.get("source") or "")
    head, _, tail = source.rpartition(":")
    return (head, int(tail)) if head and tail.isdigit() else (source, 0)


def _copy_tree_metadata(root: Path, target: Path) -> None:
    """Everything of a storage-sink tree but its data files: schema files, ``metadata``, ``CDC.index``."""
    for directory, _, names in os.walk(root):
        for name in names:
            if name.startswith("CDC") and not name.endswith(".index"):
                continue
            source = Path(directory, name)
            destination = target / source.relative_to(root)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


def _write_inputs(records: list[dict[str, Any]], options: JobOptions, tree: Path) -> dict[str, dict[str, Any]]:
    """Write the records' raw bytes as the replay's input; returns ``"<file>:<line>"`` there -> the record."""
    spec = options.source
    terminator = b"\n"
    header: dict[str, bytes] = {}
    if spec.is_storage:
        _copy_tree_metadata(Path(spec.path or "."), tree)
        csv = options.csv_options
        if csv is not None:
            terminator = csv.terminator.encode()
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(_location(record)[0], []).append(record)
    where: dict[str, dict[str, Any]] = {}
    for number, (name, group) in enumerate(sorted(groups.items()), start=1):
        group.sort(key=lambda r: _location(r)[1])
        relpath = name if spec.is_storage else f"replay-{number:05d}.jsonl"
        line = 1
        chunks = []
        if spec.is_storage and options.csv_options is not None and options.csv_options.output_field_header \
                and relpath.endswith(".csv"):
            original = Path(spec.path or ".", relpath)
            header[relpath] = original.read_bytes().split(b"\n", 1)[0] + b"\n" if original.exists() else b""
            chunks.append(header[relpath])
            line += 1
        for record in group:
            raw = base64.b64decode(record["raw_base64"])
            where[f"{relpath}:{line}"] = record
            chunks.append(raw + terminator)
            line += raw.count(b"\n") + terminator.count(b"\n")
        path = tree / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(chunks))
    return where


def _replay_source(options: JobOptions, tree: Path) -> Any:
    spec = options.source
    if spec.is_storage:
        return replace(parse_source(str(tree)), options=dict(spec.options))
    return parse_source(f"{spec.kind}+file://{tree}")


def replay_dead_letters(
    spark: SparkSession,
    options: JobOptions,
    *,
    registry: Any = None,
    sink: Sink | None = None,
    router: TopicRouter | None = None,
    progress: ProgressReporter | None = None,
) -> ReplayResult:
    """Re-feed the pending dead-letter records of ``options.checkpoint`` through the job, once (module docs).

    ``options`` are the job's (same source, sink, tables, CSV settings, after the fix); ``registry``,
    ``sink`` and ``router`` default as in :func:`~avro_registry_sink.spark.driver.job.run_job`.
    """
    if not check_checkpoint(options):  # and it is this very source's
        raise ConfigError(f"No job ran with checkpoint {str(options.checkpoint)!r}: give the checkpoint (or the same "
                          "source, sink and state directory) of the run whose dead letters to replay.",
                          option="checkpoint", value=str(options.checkpoint))
    location = options.checkpoint_uri
    if not location.is_local:
        raise ConfigError(f"Replay reads and marks dead letters in a local checkpoint directory, not {str(location)!r}; "
                          "copy the checkpoint to a local directory and give it with --checkpoint.",
                          option="checkpoint", value=str(location))
    checkpoint = Path(location.path)
    letters = checkpoint / "dead-letter"
    records = pending_records(checkpoint)
    replayable = [r for r in records if r.get("raw_base64") is not None]
    if not replayable:
        return ReplayResult(replay=None, not_replayable=len(records))
    number = _next_replay(letters)
    work = checkpoint / "replay" / f"{number:04d}"
    shutil.rmtree(work, ignore_errors=True)
    tree = work / "input"
    where = _write_inputs(replayable, options, tree)
    side = SideState(location.filesystem())
    for name in ("tables", "owners"):  # changelog table versions and the topics' tables known to the job
        known = side.latest(name)
        if known is not None:  # read by the replay's processor as the state before its batch
            (work / "checkpoint").mkdir(parents=True, exist_ok=True)
            (work / "checkpoint" / LEGACY_FILES[name]).write_text(json.dumps(known), encoding="utf-8")
    replay_options = replace(options, source=_replay_source(options, tree), checkpoint=work / "checkpoint")
    router = router or build_router(options.sink, options.topic_rule)
    sink = sink or _sink_for(spark, options)
    progress = progress or NullProgress()
    paths = sorted(p.resolve().as_uri() for p in tree.rglob("*") if p.is_file() and
                   (p.name.startswith("CDC") and not p.name.endswith(".index") if options.source.is_storage
                    else p.name.startswith("replay-")))
    batch_id = REPLAY_BATCH_BASE + number
    try:
        with _registry_for(options, registry) as client:
            processor = _batch_processor(replay_options, client, router, sink, progress)
            progress.start({"source": f"replay {number} of {checkpoint / 'dead-letter'}",
                            "sink": sink.description, "checkpoint": str(checkpoint)})
            # a storage tree's files are given to the processor (relpath, path, missing); changelog files'
            # contents come as the stream's batch shape (``binaryFile``: path, content)
            if isinstance(processor.batches, StorageBatches):
                processor.batches.explicit_files = [
                    (Path(unquote(urlsplit(p).path)).relative_to(tree.resolve()).as_posix(), p, False) for p in paths]
                batch = spark.createDataFrame([], STREAM_DDL)
            else:
                batch = spark.read.format("binaryFile").load(paths).select("path", "content")
            processor(batch, batch_id)
    finally:
        sink.close()
    progress.finish(processor.totals)
    failed = _failed_again(processor.bad_input, where, number)
    result = ReplayResult(replay=number, pending=len(replayable), failed_again=len(failed),
                          not_replayable=len(records) - len(replayable), totals=processor.totals)
    if failed:
        result.dead_letter = letters / f"replay-{number:04d}.jsonl"
        _write_jsonl(result.dead_letter, failed.values())
    failed_ids = set(failed)
    delivered = [r["id"] for r in replayable if r["id"] not in failed_ids]
    result.delivered = len(delivered)
    marker = letters / "replayed" / f"replay-{number:04d}.json"
    marker.parent.mkdir(parents=True, exist_ok=True)
    temp = marker.with_name(marker.name + ".tmp")
    temp.write_text(json.dumps({"replay": number, "batch": batch_id, "delivered": delivered,
                                "failed": sorted(failed_ids)}), encoding="utf-8")
    os.replace(temp, marker)
    return result


def _failed_again(errors: Iterable[dict[str, Any]], where: dict[str, dict[str, Any]],
                  number: int) -> dict[str, dict[str, Any]]:
    """The replay's new dead-letter records, back on their original records (location, id, raw bytes)."""
    failed: dict[str, dict[str, Any]] = {}
    for error in errors:
        key = error.get("source") or ""
        if error.get("file") and error.get("line") is not None:
            key = f"{error['file']}:{error['line']}"
        original = where.get(key)
        if original is None:  # a whole input of the replay failed: every record in it failed again
            prefix = str(error.get("file") or key.rpartition(":")[0] or key)
            hits = [r for k, r in where.items() if k.rpartition(":")[0] == prefix]
        else:
            hits = [original]
        for record in hits:
            failed[record["id"]] = {**record, "reason": error.get("reason", record.get("reason")),
                                    "message": error.get("message", record.get("message")), "replay": number}
    return failed


def _write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(temp, path)
