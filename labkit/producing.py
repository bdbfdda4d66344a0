"""Produce numbered records while things break, then count what the broker really kept.

Lessons about guarantees need the same bookkeeping every time: how many records
were sent, acknowledged, failed; how many the topic stores; which acknowledged
records are missing (lost) and which are stored twice (duplicates).
:func:`produce_and_count` does that with record values ``id-000001`` … so the
counting is exact.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

if TYPE_CHECKING:
    import pandas as pd

    from .cluster import Cluster


def record_id(i: int, tag: str = "id") -> bytes:
    return f"{tag}-{i:06d}".encode()


@dataclass
class ProduceCount:
    """What happened to ``sent`` numbered records."""

    sent: int
    acked: int
    failed: int
    stored: int
    #: Stored more than once (extra copies).
    duplicates: int
    #: Acknowledged but not stored: the broker lost them.
    lost: int
    #: Sent but not stored at all (lost or failed).
    missing: int
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def as_row(self, label: str = "") -> dict[str, Any]:
        row = {"sent": self.sent, "acknowledged": self.acked, "failed": self.failed, "stored": self.stored,
               "duplicates": self.duplicates, "lost (acked, not stored)": self.lost, "missing": self.missing}
        return {"run": label, **row} if label else row

    def _repr_html_(self) -> str:
        import pandas as pd

        return pd.DataFrame([self.as_row()]).to_html(index=False)


def produce_and_count(cluster: "Cluster", topic: str, count: int = 200,
                      actions: Optional[Mapping[int, Callable[[], Any]]] = None, pace: float = 0.0,
                      flush_timeout: float = 90.0, isolation_level: str = "read_uncommitted",
                      keyed: bool = True, **producer_config: Any) -> ProduceCount:
    """Send ``count`` numbered records with a producer built from ``producer_config``; count the outcome.

    ``actions`` maps a record number to a function run just before that record is
    sent (``{100: lambda: cluster.pause_broker(2)}``); ``pace`` sleeps between
    records so failures happen mid-stream.
    """
    actions = dict(actions or {})
    tag = uuid.uuid4().hex[:8]  # this run's records, told apart from earlier runs on the same topic
    producer = cluster.producer(**producer_config)
    acked: list[bytes] = []
    errors: Counter = Counter()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())
        else:
            errors[err.name()] += 1

    t0 = time.monotonic()
    for i in range(count):
        if i in actions:
            actions[i]()
        while True:
            try:
                producer.produce(topic, key=str(i).encode() if keyed else None, value=record_id(i, tag),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if pace:
            time.sleep(pace)
    for i in sorted(k for k in actions if k >= count):
        actions[i]()
    producer.flush(flush_timeout)
    seconds = time.monotonic() - t0
    prefix = f"{tag}-".encode()
    stored = [r.value for r in cluster.read_all(topic, isolation_level=isolation_level)
              if r.value and r.value.startswith(prefix)]
    copies = Counter(stored)
    ids = {record_id(i, tag) for i in range(count)}
    return ProduceCount(
        sent=count, acked=len(acked), failed=sum(errors.values()), stored=len(stored),
        duplicates=sum(n - 1 for n in copies.values() if n > 1),
        lost=sum(1 for v in set(acked) if v not in copies),
        missing=len(ids - set(copies)), errors=errors, seconds=seconds)


def counts_frame(counts: Mapping[str, ProduceCount]) -> "pd.DataFrame":
    """Several runs side by side, one row each."""
    import pandas as pd

    return pd.DataFrame([c.as_row(label) for label, c in counts.items()]).set_index("run")
