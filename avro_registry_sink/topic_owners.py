"""Which table each topic and subject belongs to, kept in the checkpoint across batches and runs.

The router refuses a second table for a topic or subject only among the tables it has routed, and a
run's router starts empty: a table that appears in a later run (a new table in a storage tree, or one
that first shows up in a changelog) could take the topic of a table delivered by an earlier run. So the
job records, per topic, the table routed there and its subjects in ``<checkpoint>/topic-owners.json``,
written after a batch's output is written (a batch that fails records nothing), and claims them in the
router before its first batch (:meth:`~avro_registry_sink.routing.TopicRouter.claim`).

The file is one small JSON object, one entry per topic::

    {"version": 1, "topics": {"shop___": {"table": ["shop", "订单"], "subjects": ["shop___-key", "shop___-value"]}}}

A topic keeps its first owner: a table re-routed elsewhere by a changed rule leaves its old entry, since
that topic and its subjects still hold its records and schemas.

>>> # owners = TopicOwners(StoreFS(checkpoint_uri)); owners.claim_all(router)
>>> # ... the batch's output written ...; owners.save(plan.route for plan in plans.values())
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from avro_registry_sink.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.routing import Route, TopicRouter
    from avro_registry_sink.storage_fs import StoreFS

__all__ = ["OWNERS_FILE", "TopicOwners"]

#: The file under the checkpoint.
OWNERS_FILE = "topic-owners.json"
_VERSION = 1


class TopicOwners:
    """The topic owners of one checkpoint (``state`` is the checkpoint's :class:`StoreFS`)."""

    def __init__(self, state: StoreFS) -> None:
        self._state = state
        self._topics: dict[str, dict[str, Any]] | None = None  # topic -> {"table": [s, t], "subjects": [...]}

    def load(self) -> dict[str, dict[str, Any]]:
        """The recorded owners (read once)."""
        if self._topics is None:
            self._topics = {}
            if self._state.exists(OWNERS_FILE):
                text = self._state.read_text(OWNERS_FILE)
                try:
                    data = json.loads(text)
                    topics = data["topics"]
                    for topic, entry in topics.items():
                        schema, table = entry["table"]
                        self._topics[str(topic)] = {"table": [str(schema), str(table)],
                                                    "subjects": [str(s) for s in entry.get("subjects", ())]}
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    raise ConfigError(
                        f"The checkpoint's {OWNERS_FILE} is unreadable ({type(exc).__name__}: {exc}); it records "
                        "which table each topic belongs to. Restore it, or delete it to forget the tables of earlier "
                        "runs (their topics are then checked against the registry only).",
                        option="checkpoint", value=OWNERS_FILE,
                    ) from None
        return self._topics

    def claim_all(self, router: TopicRouter) -> None:
        """Claim every recorded topic and subject for its table in ``router``."""
        for topic, entry in self.load().items():
            schema, table = entry["table"]
            router.claim(schema, table, topic, entry["subjects"])

    def save(self, routes: Iterable[Route]) -> bool:
        """Record the topics of ``routes`` not recorded yet (call once the batch's output is written); writes
        the file only when something is new. Returns whether it wrote."""
        topics = self.load()
        known = {t.lower() for t in topics}
        new = False
        for route in routes:
            if route.topic.lower() in known:
                continue
            known.add(route.topic.lower())
            topics[route.topic] = {"table": [route.schema, route.table], "subjects": list(route.subjects)}
            new = True
        if new:
            self._state.write_text(OWNERS_FILE, json.dumps({"version": _VERSION, "topics": topics},
                                                           ensure_ascii=False, indent=1, sort_keys=True))
        return new
