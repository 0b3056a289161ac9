"""What both latency benchmarks share: a run's result, the consumer that times each output record, and the
topics' creation and deletion (:mod:`bench.latency` for changelog topics, :mod:`bench.latency_storage` for a
storage tree)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Result", "Watcher", "create_topics", "delete_topics"]


@dataclass
class Result:
    candidate: str
    rate: int
    sent: int = 0
    received: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    batches: list[float] = field(default_factory=list)  # micro-batch durations, seconds
    note: str = ""

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")


class Watcher(threading.Thread):
    """Consumes the output topics from their start; records each record's latency (consume time - commit time)."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-latency-{uuid.uuid4().hex}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 10, "topic.metadata.refresh.interval.ms": 500})
        self.consumer.subscribe(topics)
        self.seen: list[tuple[int, float]] = []  # (commit physical ms, consumed at ms)
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(10000, 0.05):
                    if msg.error() is not None:
                        continue
                    now = time.time() * 1000
                    ts = next((int(v) for k, v in (msg.headers() or []) if k == "commit_ts"), None)
                    if ts is not None:
                        self.seen.append((ts >> 18, now))
        finally:
            self.consumer.close()


def create_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        with contextlib.suppress(Exception):
            future.result()


def delete_topics(bootstrap: str, prefix: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    for future in (admin.delete_topics(topics).values() if topics else ()):
        with contextlib.suppress(Exception):
            future.result()
