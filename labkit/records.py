"""Reading back what a topic stores: every record, with the partition and offset the broker gave it.

Lessons and exercise checks ask "where did each record land?"; the answer must
come from the broker, not from the producer's own bookkeeping. :func:`read_all`
assigns every partition (no consumer group, nothing committed) and reads from
the log start offset up to the high watermark taken when it began.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from .admin import client_logging
from .errors import WaitTimeout
from .waiting import Deadline, Wait

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import ClusterLike


@dataclass(frozen=True)
class Record:
    """One stored record. ``key`` and ``value`` are bytes, or None for a null key/value."""

    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    timestamp: int

    @property
    def key_text(self) -> Optional[str]:
        return None if self.key is None else self.key.decode(errors="replace")

    @property
    def value_text(self) -> Optional[str]:
        return None if self.value is None else self.value.decode(errors="replace")


def read_all(cluster: "ClusterLike", topic: str, timeout: float = 30.0, isolation_level: str = "read_uncommitted",
             ) -> list[Record]:
    """Every record ``topic`` holds now, ordered by (partition, offset).

    ``isolation_level="read_committed"`` reads what a transactional reader sees
    (stops at the last stable offset). Raises :class:`WaitTimeout` if the records
    up to the high watermarks cannot be read within ``timeout`` seconds (a quiet machine's:
    :class:`~labkit.waiting.Deadline`).
    """
    topic = cluster.topic_name(topic)
    state = cluster.describe_topic(topic)
    consumer = Consumer({**cluster.client_config(**{
        "group.id": f"labkit-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": isolation_level, "auto.offset.reset": "earliest",
    }), **client_logging()})  # librdkafka's complaints about a stopped broker go to logging, not under the cell
    try:
        ends = {}
        for p in state.partitions:
            # a leader elected a moment ago answers OFFSET_NOT_AVAILABLE until its high watermark caught up
            low, high = Wait(f"the offsets of {topic}-{p.partition}", timeout=timeout, interval=0.2, stretch=True).until(
                lambda p=p: consumer.get_watermark_offsets(TopicPartition(topic, p.partition), timeout=10))
            if high > low:
                ends[p.partition] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: list[Record] = []
        pending = set(ends)
        deadline = Deadline(timeout)  # a quiet machine's seconds: a starved reader is slow, not stuck
        while pending:
            if deadline.expired():
                raise WaitTimeout(f"Could not read all records of {topic!r} within {deadline} "
                                  f"(partitions still pending: {sorted(pending)}).",
                                  "Check that every partition has a leader: cluster.describe_topic(topic).")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())  # at the end (or, read_committed, at the stable offset)
                    continue
                raise msg.error()  # type: ignore[misc]
            if msg.offset() < ends[msg.partition()]:
                ts = msg.timestamp()[1]
                records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), ts))
            if msg.offset() + 1 >= ends[msg.partition()]:
                pending.discard(msg.partition())
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def to_frame(records: list[Record]) -> "pd.DataFrame":
    """The records as a DataFrame (keys and values decoded as text)."""
    import pandas as pd

    return pd.DataFrame([{"partition": r.partition, "offset": r.offset, "key": r.key_text,
                          "value": r.value_text, "timestamp": r.timestamp} for r in records],
                        columns=["partition", "offset", "key", "value", "timestamp"])


def partition_of_keys(records: list[Record]) -> dict[Optional[bytes], set[int]]:
    """key -> the set of partitions that key was stored in (one, unless partitions were added)."""
    where: dict[Optional[bytes], set[int]] = {}
    for r in records:
        where.setdefault(r.key, set()).add(r.partition)
    return where
