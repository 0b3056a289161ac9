"""Which table each topic and subject belongs to, kept in the checkpoint across batches and runs.

The router refuses a second table for a topic or subject only among the tables it has routed, and a
run's router starts empty: a table that appears in a later run (a new table in a storage tree, or one
that first shows up in a changelog) could take the topic of a table delivered by an earlier run. So the
job records, per topic, the table routed there and its subjects in the checkpoint's per-batch side state
(``state/owners/<batch id>.json``, :mod:`~avro_registry_sink.side_state`), written after a batch's
output is written (a batch that fails records nothing), and claims them in the router before its first
batch (:meth:`~avro_registry_sink.routing.rules.TopicRouter.claim`).

The state is one small JSON object, one entry per topic::

    {"version": 1, "topics": {"shop___": {"table": ["shop", "订单"], "subjects": ["shop___-key", "shop___-value"]}}}

A topic keeps its first owner: a table re-routed elsewhere by a changed rule leaves its old entry, since
that topic and its subjects still hold its records and schemas.

>>> # owners = TopicOwners(SideState(StoreFS(checkpoint_uri))); owners.claim_all(router, batch_id)
>>> # ... the batch's output written ...; owners.save((plan.route for plan in plans.values()), batch_id)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.routing.rules import Route, TopicRouter
    from avro_registry_sink.side_state import SideState

__all__ = ["STATE_NAME", "TopicOwners"]

#: The name of the owners in the checkpoint's side state (``state/owners/<batch id>.json``).
STATE_NAME = "owners"
_VERSION = 1


class TopicOwners:
    """The topic owners of one checkpoint, kept in its per-batch side state (``owners``, see
    :mod:`~avro_registry_sink.side_state`)."""

    def __init__(self, side: SideState) -> None:
        self._side = side
        self._topics: dict[str, dict[str, Any]] | None = None  # topic -> {"table": [s, t], "subjects": [...]}

    def load(self, batch_id: int) -> dict[str, dict[str, Any]]:
        """The owners recorded by the batches before ``batch_id`` (read once)."""
        if self._topics is None:
            self._topics = {}
            try:
                data = self._side.load(STATE_NAME, batch_id)
                for topic, entry in ((data or {}).get("topics") or {}).items():
                    schema, table = entry["table"]
                    self._topics[str(topic)] = {"table": [str(schema), str(table)],
                                                "subjects": [str(s) for s in entry.get("subjects", ())]}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(
                    f"The checkpoint's topic owners (state/{STATE_NAME}/) are unreadable ({type(exc).__name__}: "
                    f"{exc}); they record which table each topic belongs to. Restore the newest file, or delete it "
                    "to forget the tables of earlier runs (their topics are then checked against the registry only).",
                    option="checkpoint", value=f"state/{STATE_NAME}",
                ) from None
        return self._topics

    def claim_all(self, router: TopicRouter, batch_id: int) -> None:
        """Claim every topic and subject recorded before ``batch_id`` for its table in ``router``."""
        for topic, entry in self.load(batch_id).items():
            schema, table = entry["table"]
            router.claim(schema, table, topic, entry["subjects"])

    def save(self, routes: Iterable[Route], batch_id: int) -> bool:
        """Record the topics of ``routes`` not recorded yet as batch ``batch_id``'s (call once the batch's
        output is written); writes only when something is new. Returns whether it wrote."""
        topics = self.load(batch_id)
        known = {t.lower() for t in topics}
        new = False
        for route in routes:
            if route.topic.lower() in known:
                continue
            known.add(route.topic.lower())
            topics[route.topic] = {"table": [route.schema, route.table], "subjects": list(route.subjects)}
            new = True
        if new:
            self._side.save(STATE_NAME, batch_id, {"version": _VERSION, "topics": topics})
        return new
