"""Damaged checkpoint files, found before a run or recognised in Spark's error: one :class:`CheckpointError` each,
naming the file, what was found and what to do.

::

    <checkpoint>/spark/metadata             the query's id                  {"id": ...}
    <checkpoint>/spark/offsets/<batch>      what each batch reads           v1, batch metadata, a line per source
    <checkpoint>/spark/commits/<batch>      the batches that completed      v1, {"nextBatchWatermarkMs": ...}
    <checkpoint>/spark/sources/<i>/<n>      files a file source has taken   v1, a JSON line per file (n.compact)
    <checkpoint>/job.json, state/<name>/<batch>.json                             the job's own, JSON objects
    (held-files.json, storage-files.json, tables.json, topic-owners.json: the side state of earlier releases)
    <checkpoint>/dead-letter/*.jsonl, dead-letter/replayed/*.json                bad rows, what replays delivered

Spark writes each log file under a temporary name and renames it into place (``.<name>.crc`` beside it on local
and HDFS checkpoints), and so does the job (:meth:`~avro_registry_sink.storage_fs.StoreFS.write_bytes`): a torn
file comes from a crash on a store without atomic renames, a full disk, or a copy cut short.
:func:`check_checkpoint_files` reads what a restart reads - the metadata, the newest two offsets files, the newest
commit, each source log from its newest compaction on, the side files - and writes nothing;
:func:`checkpoint_failure` words the error of a query Spark stopped over its checkpoint the same way. A log of a
version this Spark cannot read is not torn: Spark reports it, and the advice is the Spark version that wrote it,
never deleting files.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from avro_registry_sink.errors import CheckpointError, ConfigError
from avro_registry_sink.ops.checkpoint_logs import last_committed_batch
from avro_registry_sink.ops.checkpoint_logs import log_ids as _ids
from avro_registry_sink.side_state import LEGACY_FILES
from avro_registry_sink.storage_fs import StorageURI, StoreFS

__all__ = ["SIDE_FILES", "STATE_FILES", "check_checkpoint_files", "checkpoint_failure", "last_committed_batch",
           "read_json_file", "read_json_lines"]

#: The job's own files under the checkpoint (JSON objects) and what to do when one is damaged.
SIDE_FILES: dict[str, str] = {
    "job.json": "delete it: the next run records the --source it is given there again (give the same one as before)",
}
#: The job's side state (:mod:`~avro_registry_sink.side_state`; the newest ``state/<name>/<batch>.json``, or
#: the file of an earlier release) and what to do when the one a restart reads is damaged.
STATE_FILES: dict[str, str] = {
    "tables": "restore it from a backup, or delete it: the state of the batch before it is used, and table versions "
              "learned from DDL messages since are lost (define them with --tables)",
    "held": "restore it from a backup; if you delete it, the state of the batch before it is used: data files that "
            "batch newly held are forgotten (feed them again through a new checkpoint once their schema files are "
            "there) and files it read from the held list are read again (duplicates with the same commit ts)",
    "numbers": "delete it: it only serves the warning about data files that arrive out of order",
    "owners": "delete it: the tables that earlier batches sent to each topic are then checked against the registry "
              "only",
}

_CUT = "a crash, a full disk or a copy cut short while it was written"
_VERSION_LINE = re.compile(r"v\d+")
_CRC = re.compile(r"\.(\d+(?:\.compact)?|metadata)\.crc")


def _where(checkpoint: StorageURI, relative: str) -> str:
    return str(checkpoint.child(relative))


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# --------------------------------------------------------------------------------------------------
# What is wrong with a file's bytes


def _json_problem(data: bytes, *, kind: str = "object") -> tuple[str, str] | None:
    """(problem, description) of a JSON document's bytes, or ``None`` when they hold a JSON ``kind``."""
    if not data.strip():
        return "empty", "empty (0 bytes)" if not data else f"empty ({len(data)} bytes of blanks)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "damaged", f"damaged (not UTF-8 text at byte {exc.start} of {len(data)})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            return "incomplete", f"incomplete ({len(data)} bytes, it ends inside a JSON value: {_CUT})"
        return "damaged", f"damaged (not JSON: {exc.msg} at line {exc.lineno} column {exc.colno})"
    if kind == "object" and not isinstance(value, dict):
        return "damaged", f"damaged (JSON, but a {type(value).__name__} where an object belongs)"
    return None


def _log_problem(data: bytes, kind: str) -> tuple[str, str] | None:
    """(problem, description) of a Spark log file (``offsets``, ``commits`` or ``sources``), or ``None``: the
    version line, then one JSON document per line (``-`` for a source without offset in an offsets file)."""
    if not data.strip():
        return "empty", "empty (0 bytes)" if not data else f"empty ({len(data)} bytes of blanks)"
    lines = data.decode("utf-8", errors="replace").split("\n")
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()  # Spark writes no newline at the end; a cut at a line's end leaves one
    if not _VERSION_LINE.fullmatch(lines[0].strip()):
        if len(lines) == 1 and "v".startswith(lines[0].strip()[:1]) and len(lines[0].strip()) <= 2:
            return "incomplete", f"incomplete ({len(data)} bytes, it ends inside its version line: {_CUT})"
        return "damaged", f"damaged (not a Spark log file: it starts {lines[0][:20]!r} where a version like 'v1' belongs)"
    if len(lines) == 1 and kind != "sources":
        return "incomplete", f"incomplete ({len(data)} bytes, it ends after its version line: {_CUT})"
    for number, line in enumerate(lines[1:], start=2):
        if kind == "offsets" and line.strip() == "-":
            continue
        try:
            json.loads(line)
        except ValueError:
            if number == len(lines):
                return "incomplete", f"incomplete ({len(data)} bytes, it ends inside line {number}: {_CUT})"
            return "damaged", f"damaged (line {number} is not JSON)"
    return None


# --------------------------------------------------------------------------------------------------
# Reading


def _read(state: StoreFS, relative: str) -> bytes | None:
    """The file's bytes, ``None`` when there is none; :class:`CheckpointError` when it cannot be read."""
    where = _where(state.uri, relative)
    try:
        if state.is_dir(relative):
            raise CheckpointError(f"Checkpoint file {where!r} is a directory, not a file: remove or rename the "
                                  "directory.", path=where, problem="directory")
        return state.read_bytes(relative)
    except FileNotFoundError:
        return None
    except (OSError, ConfigError) as exc:
        raise CheckpointError(f"Checkpoint file {where!r} cannot be read ({' '.join(str(exc).split())}): check that "
                              "this user may read and write the checkpoint directory and its files.",
                              path=where, problem="unreadable") from None


def read_json_file(path: Path, advice: str) -> Any:
    """A local JSON object file of the checkpoint (e.g. a replay's marker); :class:`CheckpointError` naming it,
    with ``advice``, when it is damaged or unreadable."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"Checkpoint file {str(path)!r} cannot be read ({exc.strerror or exc}): check that "
                              "this user may read it.", path=str(path), problem="unreadable") from None
    problem = _json_problem(data)
    if problem is not None:
        raise CheckpointError(f"Checkpoint file {str(path)!r} is {problem[1]}: {advice}.", path=str(path),
                              problem=problem[0])
    return json.loads(data)


def read_json_lines(path: Path, advice: str) -> list[dict[str, Any]]:
    """The JSON objects of a local JSON-lines file of the checkpoint (a dead-letter file); :class:`CheckpointError`
    naming the file and the line, with ``advice``, for a line that is not one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"Checkpoint file {str(path)!r} cannot be read ({exc.strerror or exc}): check that "
                              "this user may read it.", path=str(path), problem="unreadable") from None
    lines = data.split(b"\n")
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        problem = _json_problem(line)
        if problem is not None:
            last = not any(rest.strip() for rest in lines[number:])
            word, what = ("incomplete", f"line {number} is incomplete ({_CUT})") if last and problem[0] == "incomplete" \
                else (problem[0], f"line {number} is {problem[1]}")
            raise CheckpointError(f"Checkpoint file {str(path)!r} is damaged: {what}: {advice}.", path=str(path),
                                  problem=word, line=number)
        out.append(json.loads(line))
    return out


# --------------------------------------------------------------------------------------------------
# Spark's logs


def _with_crc(files: set[str], paths: Iterable[str]) -> list[str]:
    """``paths`` and their Hadoop checksum files (``.<name>.crc``) that exist, for a list of files to delete."""
    out = []
    for path in paths:
        head, _, name = path.rpartition("/")
        out.append(path)
        crc = f"{head}/.{name}.crc"
        if crc in files:
            out.append(crc)
    return out


def _redo(files: set[str], batch: int, newest: int, logs: tuple[str, ...] = ("spark/offsets", "spark/commits")) -> str:
    """Advice: delete the files of ``logs`` from ``batch`` on, so the next run redoes those batches."""
    doomed: list[str] = []
    for log in logs:
        doomed += [path for number, path in sorted(_ids(files, log).items()) if number >= batch]
    names = _with_crc(files, dict.fromkeys(doomed))
    redo = f"batch {batch}" if newest <= batch else f"batches {batch} to {newest}"
    return (f"delete {_and(names)} in the checkpoint; the next run then redoes {redo} (its records are written "
            "again)")


def _spark_logs(state: StoreFS, checkpoint: StorageURI) -> None:
    files = set(state.list_files("spark"))
    offsets, commits = _ids(files, "spark/offsets"), _ids(files, "spark/commits")
    newest = max([*offsets, *commits], default=-1)

    def fail(relative: str, problem: tuple[str, str], advice: str) -> CheckpointError:
        where = _where(checkpoint, relative)
        return CheckpointError(f"Checkpoint file {where!r} is {problem[1]}: {advice}.", path=where, problem=problem[0])

    metadata = _read(state, "spark/metadata")
    crc = " and delete spark/.metadata.crc" if "spark/.metadata.crc" in files else ""
    rewrite = (f"write a new query id into it, e.g. {{\"id\":\"{uuid.uuid4()}\"}}{crc}; the next run then resumes "
               "from the offsets")
    if metadata is None and (offsets or commits):
        where = _where(checkpoint, "spark/metadata")
        raise CheckpointError(f"Checkpoint file {where!r} is missing while Spark's offsets and commits are there "
                              f"(Spark refuses such a checkpoint): {rewrite}.", path=where, problem="missing")
    if metadata is not None:
        problem = _json_problem(metadata)
        if problem is None and "id" not in json.loads(metadata):
            problem = ("damaged", "damaged (a JSON object without the query's 'id')")
        if problem is not None:
            raise fail("spark/metadata", problem, rewrite)
    for batch in sorted(offsets)[-2:]:  # a restart reads the newest offsets and the one before
        problem = _log_problem(_read(state, offsets[batch]) or b"", "offsets")
        if problem is not None:
            raise fail(offsets[batch], problem, _redo(files, batch, newest))
    newest_offsets = max(offsets, default=-1)
    orphans = [number for number in commits if number > newest_offsets]
    if orphans:
        first = min(orphans)
        where = _where(checkpoint, f"spark/offsets/{first}")
        raise CheckpointError(
            f"Checkpoint file {where!r} is missing while spark/commits/{first} is there: "
            f"{_redo(files, first, newest, ('spark/commits',))}.", path=where, problem="missing")
    if commits:
        batch = max(commits)
        problem = _log_problem(_read(state, commits[batch]) or b"", "commits")
        if problem is not None:
            raise fail(commits[batch], problem, _redo(files, batch, newest, ("spark/commits",)))
    sources = sorted({p.split("/")[2] for p in files if p.startswith("spark/sources/") and p.count("/") == 3})
    for index in sources:
        directory = f"spark/sources/{index}"
        log = _ids(files, directory)
        compacted = [n for n, p in log.items() if p.endswith(".compact")]
        for number in sorted(n for n in log if n >= max(compacted, default=0)):
            data = _read(state, log[number]) or b""
            if data.startswith(b"\x00"):  # Kafka's initial offsets: a zero byte before 'v1' (SPARK-19517)
                data = data[1:]
            problem = _log_problem(data, "sources")
            if problem is None:
                continue
            if log[number].endswith(".compact") or number <= _source_offset(state, offsets, index):
                advice = ("restore the checkpoint from a backup, or start over with a new --checkpoint (the source "
                          "is then read from its start); Spark cannot rebuild the list of files it had taken")
            else:  # files listed after the newest offsets file: not read by any batch yet
                later = [p for n, p in sorted(log.items()) if n >= number]
                advice = (f"delete {_and(_with_crc(files, later))} in the checkpoint; the next run then lists the "
                          "source's new files again")
            raise fail(log[number], problem, advice)
    leftovers = []
    for path in sorted(files):
        head, _, name = path.rpartition("/")
        match = _CRC.fullmatch(name)
        if match and f"{head}/{match.group(1)}" not in files:
            leftovers.append(path)
    if leftovers:
        where = _where(checkpoint, leftovers[0])
        raise CheckpointError(
            f"Checkpoint file {where!r} is the checksum file of {leftovers[0].replace('/.', '/')[:-4]}, which is "
            f"missing (deleted without it): delete {_and(leftovers)} in the checkpoint; Spark would take them for "
            "another query writing the checkpoint.", path=where, problem="leftover")


def _source_offset(state: StoreFS, offsets: dict[int, str], index: str) -> int:
    """The newest ``logOffset`` of file source ``index`` that an offsets file names (-1: none)."""
    for batch in sorted(offsets, reverse=True):
        data = _read(state, offsets[batch]) or b""
        lines = data.decode("utf-8", errors="replace").split("\n")
        line = 2 + int(index)  # version, batch metadata, then one line per source
        if line < len(lines) and lines[line].strip() not in ("", "-"):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                return int(json.loads(lines[line]).get("logOffset", -1))
    return -1


# --------------------------------------------------------------------------------------------------
# Entry points


def _state_file(state: StoreFS, name: str) -> str:
    """The side state file of ``name`` a restart reads: the newest per-batch file, else an earlier release's."""
    batches = sorted(p for p in state.list_files(f"state/{name}") if re.fullmatch(r"\d{10}\.json", p.rpartition("/")[2]))
    return batches[-1] if batches else LEGACY_FILES[name]


def check_checkpoint_files(checkpoint: StorageURI, *, spark: bool = True,
                           side_files: Iterable[str] = (*SIDE_FILES, *STATE_FILES)) -> None:
    """Raise :class:`CheckpointError` for the first damaged, missing or unreadable file a run (``spark``: Spark's
    logs; ``side_files``: those of :data:`SIDE_FILES` and :data:`STATE_FILES`) would read (a replay's dead-letter
    files are checked by reading them: :func:`~avro_registry_sink.spark.audit.replay.pending_records`); writes nothing. A checkpoint that does not exist yet is
    fine (and a file in its place is :func:`~avro_registry_sink.spark.driver.job.check_checkpoint`'s to report)."""
    if checkpoint.is_local and Path(checkpoint.path).exists() and not Path(checkpoint.path).is_dir():
        return
    state = StoreFS(checkpoint, option="checkpoint")
    for name in side_files:
        advice = SIDE_FILES.get(name) or STATE_FILES[name]
        if name in STATE_FILES:
            name = _state_file(state, name)
        data = _read(state, name)
        problem = _json_problem(data) if data is not None else None
        if problem is not None:
            where = _where(checkpoint, name)
            raise CheckpointError(f"Checkpoint file {where!r} is {problem[1]}: {advice}.", path=where,
                                  problem=problem[0])
    if spark:
        _spark_logs(state, checkpoint)


#: Spark's classes that read each part of the checkpoint, as they appear in a JVM stack trace.
_LOG_CLASSES = (("OffsetSeqLog", "spark/offsets"), ("CommitLog", "spark/commits"),
                ("FileStreamSourceLog", "spark/sources"), ("CompactibleFileStreamLog", "spark/sources"),
                ("StreamMetadata", "spark/metadata"), ("OperatorStateMetadata", "spark/state"),
                ("StateSchema", "spark/state"), ("StateStore", "spark/state"))
_NEWER = ("INVALID_LOG_VERSION", "UnsupportedLogVersion", "produced by a newer version of Spark")
_INCOMPATIBLE = ("incompatible", "INCOMPATIBLE", "does not match", "doesn't match", "not compatible")
_TORN = ("JsonEOFException", "JsonParseException", "MismatchedInputException", "Unexpected end-of-input",
         "Incomplete log file", "Log file was malformed", "malformed", "EOFException", "ChecksumException",
         "STREAMING_CHECKPOINT_MISSING", "inconsistent state")
_IN_USE = ("Multiple streaming queries are concurrently using", "ConcurrentModificationException")


def _error_text(error: BaseException) -> tuple[str, str]:
    """(Spark's message, everything: messages and JVM stack traces of the error and its causes)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: Any = error
    message = ""
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        desc = getattr(current, "_desc", None)
        if desc is not None:  # PySpark's captured JVM exception: its message and the JVM's stack trace
            parts += [str(desc), str(getattr(current, "_stackTrace", "") or "")]
        else:
            with contextlib.suppress(Exception):  # a Py4JJavaError's text asks the JVM, which may be gone
                parts.append(str(current))
        if not message and parts:
            message = " ".join(parts[0].split())
        current = getattr(current, "_cause", None) or current.__cause__ or current.__context__
    return message, "\n".join(parts)


def _spark_says(message: str) -> str:
    """The part of Spark's message worth quoting: the query's exception, without the query dump."""
    text = message.split("terminated with exception: ", 1)[-1]
    for end in (" === Streaming Query ===", " SQLSTATE"):
        text = text.split(end, 1)[0]
    return text.strip()[:400]


def checkpoint_failure(error: BaseException, checkpoint: StorageURI) -> CheckpointError | None:
    """A :class:`CheckpointError` when a query failed over a file of its checkpoint (Spark's error names the file,
    or the class that read it is in the JVM's stack trace), else ``None``. Torn files are found and named by
    :func:`check_checkpoint_files`; a log this Spark cannot read (written by a newer or incompatible Spark) and a
    checkpoint another query writes at the same time have advice of their own."""
    message, text = _error_text(error)
    root = re.escape(checkpoint.path.strip("/") + "/spark/")
    paths = [m.rstrip(".") for m in re.findall(r"(?:[a-z][a-z0-9+.-]*:(?://[^/\s]*)?)?/?" + root
                                               + r"((?:offsets|commits|sources|state|metadata)[^\s,;:)\]'\"]*)", text)]
    logs = [log for name, log in _LOG_CLASSES if re.search(rf"\b{name}\b", text)]
    if not paths and not logs:
        return None
    where = _where(checkpoint, f"spark/{paths[0]}" if paths else logs[0])
    says = _spark_says(message) or "no message"
    if any(p in text for p in _NEWER):
        found = re.search(r"maximum supported log version is (v\d+), but encountered (v\d+)", text)
        versions = f"log version {found.group(2)}, this Spark reads up to {found.group(1)}" if found else says
        return CheckpointError(
            f"Checkpoint file {where!r} was written by a newer Spark than this one ({versions}): it is not damaged; "
            "run the job with the Spark version that wrote the checkpoint (or a newer one), or start over with a new "
            "--checkpoint (the source is then read from its start).", path=where, problem="newer-version")
    in_use, torn = any(p in text for p in _IN_USE), any(p in text for p in _TORN)
    if in_use or torn:  # the file itself says more than Spark's message (a leftover checksum looks like a rival)
        try:
            _spark_logs(StoreFS(checkpoint, option="checkpoint"), checkpoint)
        except CheckpointError as found:
            return found
        except (ConfigError, OSError):  # the store cannot be read now: word Spark's error alone
            pass
    if in_use:
        return CheckpointError(
            f"Another query is writing checkpoint {str(checkpoint)!r} at the same time (Spark: {says}): stop the "
            "other run (one run per checkpoint) and run again.", path=where, problem="in-use")
    if torn:
        return CheckpointError(
            f"Spark cannot read the checkpoint's {where!r} (Spark: {says}): a file there is incomplete or damaged "
            f"({_CUT}). Restore the checkpoint from a backup, or start over with a new --checkpoint (the source is "
            "then read from its start).", path=where, problem="damaged")
    if any(p in text for p in _INCOMPATIBLE):
        return CheckpointError(
            f"Spark cannot use checkpoint {str(checkpoint)!r} as it is ({where}; Spark: {says}): it was written by "
            "another Spark version or for another query. Run the job with the Spark version and options that wrote "
            "it, or start over with a new --checkpoint (the source is then read from its start).",
            path=where, problem="incompatible")
    return None
