"""What the job keeps beside Spark's offsets, written per batch so that it becomes current with the batch.

Spark commits a micro-batch after the ``foreachBatch`` function returns; a process killed between a side
write and that commit reruns the batch from the same offsets. State written in place (held files, the
newest file number per directory, the changelog's table catalog) would then show the rerun what the
first attempt left behind, not what that batch saw: a held file no longer held is never read again.

So each batch writes its state as a new file named after its id, ``state/<name>/<batch id>.json``, and a
batch reads the newest file of a batch *before* it. Batches run one after the other and batch ``N`` starts
only once ``N - 1`` is committed, so that file is the committed state, whatever happened to an earlier
attempt of ``N``. Older files are removed a few batches later. A checkpoint written before this layout
(``held-files.json``, ``storage-files.json``, ``tables.json`` at the top) is read as the state before its
next batch.
"""

from __future__ import annotations

import json
import re
from typing import Any

from avro_registry_sink.storage_fs import StoreFS

__all__ = ["LEGACY_FILES", "SideState"]

#: State files of checkpoints written before per-batch state, by state name.
LEGACY_FILES = {"held": "held-files.json", "numbers": "storage-files.json", "tables": "tables.json",
                "owners": "topic-owners.json"}
_NAME = re.compile(r"(\d{10})\.json")
_KEEP = 4  # files kept per name: the committed state and a few before it


class SideState:
    """Per-batch JSON state under ``state/`` of a checkpoint (see the module docs).

    >>> # state = SideState(StoreFS(parse_storage_uri("/tmp/ck")))
    >>> # state.save("held", 7, {"held": {}})   # state/held/0000000007.json
    >>> # state.load("held", 8)                 # {'held': {}}: the newest before batch 8
    """

    def __init__(self, store: StoreFS) -> None:
        self.store = store
        self._cache: dict[str, tuple[int, Any]] = {}  # name -> (batch id, data) last written or read
        self._ids: dict[str, list[int]] = {}  # name -> batch ids on the store, as last listed or written

    def _listed(self, name: str) -> list[int]:
        if name not in self._ids:
            ids = []
            for relpath in self.store.list_files(f"state/{name}"):
                m = _NAME.fullmatch(relpath.rpartition("/")[2])
                if m:
                    ids.append(int(m.group(1)))
            self._ids[name] = sorted(ids)
        return self._ids[name]

    def load(self, name: str, batch_id: int) -> Any:
        """The state ``name`` as the batches before ``batch_id`` left it (``None`` when there is none)."""
        cached = self._cache.get(name)
        ids = [i for i in self._listed(name) if i < batch_id]
        if cached is not None and ids and cached[0] == ids[-1]:
            return cached[1]
        if ids:
            data = json.loads(self.store.read_text(f"state/{name}/{ids[-1]:010d}.json"))
            self._cache[name] = (ids[-1], data)
            return data
        legacy = LEGACY_FILES.get(name)
        if legacy and self.store.exists(legacy):
            return json.loads(self.store.read_text(legacy))
        return None

    def latest(self, name: str) -> Any:
        """The newest state ``name`` of any batch (for tools that run beside no batch, such as replay)."""
        return self.load(name, 1 << 62)

    def save(self, name: str, batch_id: int, data: Any) -> None:
        """Write batch ``batch_id``'s state ``name`` (replacing an earlier attempt's), and drop old files."""
        self.store.write_text(f"state/{name}/{batch_id:010d}.json",
                              json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True))
        self._cache[name] = (batch_id, data)
        ids = sorted({*self._listed(name), batch_id})
        old = [i for i in ids if i < batch_id][:-_KEEP] if len(ids) > _KEEP else []
        for i in old:
            self.store.delete(f"state/{name}/{i:010d}.json")
        self._ids[name] = [i for i in ids if i not in old]
