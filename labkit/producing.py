"""Produce numbered records while things break, then count what the broker really kept.

Lessons about guarantees need the same bookkeeping every time: how many records
were sent, acknowledged, failed; how many the topic stores; which acknowledged
records are missing (lost), which are stored twice (duplicates) and which are
stored after a record sent later (reordered). :func:`produce_and_count` does that
with record values ``id-000001`` … so the counting is exact.
:func:`produce_through_refusals` produces while the broker refuses writes now and
then: retries with several requests in flight, where order is at stake
(``max.in.flight.requests.per.connection``, idempotence).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from .errors import LabkitError

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import OwnedClusterLike


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
    #: Stored (first copy) after a record that was sent later, in the same partition.
    reordered: int = 0

    def as_row(self, label: str = "") -> dict[str, Any]:
        row = {"sent": self.sent, "acknowledged": self.acked, "failed": self.failed, "stored": self.stored,
               "duplicates": self.duplicates, "lost (acked, not stored)": self.lost, "missing": self.missing,
               "out of order": self.reordered}
        return {"run": label, **row} if label else row

    def _repr_html_(self) -> str:
        import pandas as pd

        return pd.DataFrame([self.as_row()]).to_html(index=False)


def produce_and_count(cluster: "OwnedClusterLike", topic: str, count: int = 200,
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
    records = [r for r in cluster.read_all(topic, isolation_level=isolation_level)
               if r.value and r.value.startswith(prefix)]
    stored = [r.value for r in records]
    copies = Counter(stored)
    ids = {record_id(i, tag) for i in range(count)}
    return ProduceCount(
        sent=count, acked=len(acked), failed=sum(errors.values()), stored=len(stored),
        duplicates=sum(n - 1 for n in copies.values() if n > 1),
        lost=sum(1 for v in set(acked) if v not in copies),
        missing=len(ids - set(copies)), errors=errors, seconds=seconds,
        reordered=out_of_order([(r.partition, r.value) for r in records]))


def out_of_order(stored: Sequence[tuple[int, bytes]]) -> int:
    """How many records were stored (their first copy) after a record sent later, in the same partition.

    ``stored``: (partition, value) in the order the partition stores them; values come from
    :func:`record_id`, whose number is the order they were sent in. A copy stored again later (a duplicate) is not counted here.
    """
    seen: set[bytes] = set()
    highest: dict[int, int] = {}
    late = 0
    for partition, value in stored:
        if value in seen:
            continue
        seen.add(value)
        number = int(value.rsplit(b"-", 1)[1])
        if number < highest.get(partition, -1):
            late += 1
        highest[partition] = max(highest.get(partition, -1), number)
    return late


def produce_through_refusals(cluster: "OwnedClusterLike", topic: str, runs: Mapping[str, Mapping[str, Any]],
                             count: int = 3000, refusals: int = 8, hold: float = 0.3,
                             pace: float = 0.0005) -> dict[str, ProduceCount]:
    """For each of ``runs`` (label -> producer settings), produce ``count`` numbered records (``acks=all``)
    while the partition's leader refuses writes now and then; count what it stored, duplicates and order
    included (:attr:`ProduceCount.reordered`).

    The refusals are the broker's own NOT_ENOUGH_REPLICAS: one follower of partition 0 is stopped (the
    ISR shrinks to two), and ``refusals`` times per run the topic's ``min.insync.replicas`` goes up to 3
    for ``hold`` seconds (writes refused) and back to 2 (accepted). Unless a run's settings say otherwise,
    the producer retries at once (``retry.backoff.ms=1``), in batches of 5 records, with a 1.5 s request
    timeout; ``max.in.flight.requests.per.connection`` and ``enable.idempotence`` are the settings to
    compare. The follower is started again at the end. Needs a one-partition topic with replication factor 3.
    """
    from .admin import alter_configs

    state = cluster.describe_topic(topic)[0]
    if len(state.replicas) != 3:
        raise LabkitError(f"{topic!r} has {len(state.replicas)} replicas; the refusals need 3.",
                          "Create the topic with replication_factor=3 (a three-broker cluster).")
    follower = next(r for r in state.replicas if r != state.leader)

    def min_isr(n: int) -> Callable[[], None]:
        def apply() -> None:
            if n == 2:
                time.sleep(hold)
            alter_configs(cluster.admin(), "topic", topic, {"min.insync.replicas": n})
        return apply

    step = max(count // (refusals + 1), 2)
    actions: dict[int, Callable[[], Any]] = {}
    for i in range(refusals):
        actions[step * (i + 1) - step // 2] = min_isr(3)
        actions[step * (i + 1)] = min_isr(2)
    results = {}
    cluster.stop_broker(follower)
    try:
        for label, settings in runs.items():
            config = {"acks": "all", "retry_backoff_ms": 1, "retry_backoff_max_ms": 1, "batch_num_messages": 5,
                      "linger_ms": 1, "request_timeout_ms": 1500, "message_timeout_ms": 60000}
            config.update({k.replace(".", "_"): v for k, v in settings.items()})
            results[label] = produce_and_count(cluster, topic, count=count, pace=pace, keyed=False,
                                               actions=actions, **config)
    finally:
        alter_configs(cluster.admin(), "topic", topic, {"min.insync.replicas": 2})
        cluster.start_broker(follower)
        cluster.wait_for_isr(topic)
    return results


def counts_frame(counts: Mapping[str, ProduceCount]) -> "pd.DataFrame":
    """Several runs side by side, one row each."""
    import pandas as pd

    return pd.DataFrame([c.as_row(label) for label, c in counts.items()]).set_index("run")
