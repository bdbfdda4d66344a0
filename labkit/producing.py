"""Produce numbered records while things break, then count what the broker really kept.

Lessons about guarantees need the same bookkeeping every time: how many records were sent, acknowledged, failed;
how many the topic stores; which acknowledged records are missing (lost), which are stored twice (duplicates) and
which are stored after a record sent later (reordered). :func:`produce_and_count` does that with record values
``id-000001`` … so the counting is exact. :func:`produce_through_refusals` produces while the broker refuses writes
now and then: retries with several requests in flight, where order is at stake
(``max.in.flight.requests.per.connection``, idempotence).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence

from .errors import LabkitError
from .runtime import agreement
from .waiting import Deadline

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import ClusterLike, OwnedClusterLike


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
    #: Times the broker refused writes during the run (:func:`produce_through_refusals`).
    refusals: int = 0

    def as_row(self, label: str = "") -> dict[str, Any]:
        row = {"sent": self.sent, "acknowledged": self.acked, "failed": self.failed, "stored": self.stored,
               "duplicates": self.duplicates, "lost (acked, not stored)": self.lost, "missing": self.missing,
               "out of order": self.reordered}
        if self.refusals:
            row = {"refusals": self.refusals, **row}
        return {"run": label, **row} if label else row

    def _repr_html_(self) -> str:
        import pandas as pd

        return pd.DataFrame([self.as_row()]).to_html(index=False)


def produce_and_count(cluster: "OwnedClusterLike", topic: str, count: int = 200,
                      actions: Optional[Mapping[int, Callable[[], Any]]] = None, pace: float = 0.0,
                      flush_timeout: float = 90.0, isolation_level: str = "read_uncommitted",
                      keyed: bool = True, flush_before: Iterable[int] = (), settle_before: Iterable[int] = (),
                      **producer_config: Any) -> ProduceCount:
    """Send ``count`` numbered records with a producer built from ``producer_config``; count the outcome.

    ``actions`` maps a record number to a function run just before that record is sent (``{100: lambda:
    cluster.pause_broker(2)}``); ``pace`` sleeps between records so failures happen mid-stream. At a record number
    in ``flush_before``, all sent so far is delivered first (acked; with ``acks=0``, written to the leader's socket).
    At one in ``settle_before``, the brokers' answers so far reach the producer first: it waits for a report on every
    record sent, for at most a quiet machine's second (an ``acks=all`` write held by frozen followers gets none).
    """
    actions, flush_before, settle_before = dict(actions or {}), set(flush_before), set(settle_before)
    tag = uuid.uuid4().hex[:8]  # this run's records, told apart from earlier runs on the same topic
    producer, on_delivery = cluster.producer(**producer_config), _Deliveries()
    t0 = time.monotonic()
    for i in range(count):
        if i in flush_before:
            producer.flush(flush_timeout)
        if i in settle_before:
            settled = Deadline(1.0)
            while len(on_delivery.acked) + sum(on_delivery.errors.values()) < i and not settled.expired():
                producer.poll(settled.wait_time(0.05))
        if i in actions:
            actions[i]()
        _produce(producer, topic, record_id(i, tag), on_delivery, key=str(i).encode() if keyed else None)
        if pace:
            time.sleep(pace)
    for i in sorted(k for k in actions if k >= count):
        actions[i]()
    producer.flush(flush_timeout)
    return _outcome(cluster, topic, tag, count, on_delivery, time.monotonic() - t0, isolation_level)


@dataclass
class _Deliveries:
    """A delivery callback that keeps what the reports said: values acknowledged, errors by name."""

    acked: list[bytes] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)

    def __call__(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors[err.name()] += 1


def _produce(producer: Any, topic: str, value: bytes, on_delivery: Callable[..., None],
             key: Optional[bytes] = None) -> None:
    """``produce`` that waits for room in a full local queue."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


def _outcome(cluster: "ClusterLike", topic: str, tag: str, count: int, delivered: "_Deliveries", seconds: float,
             isolation_level: str = "read_uncommitted") -> ProduceCount:
    """Read ``topic`` back and count what became of records ``0 .. count-1`` of run ``tag``."""
    acked, errors = delivered.acked, delivered.errors
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
                             count: int = 3000, refusals: int = 8, most: int = 32, hold: float = 0.3,
                             pace: float = 0.0005) -> dict[str, ProduceCount]:
    """For each of ``runs`` (label -> producer settings), produce numbered records (``acks=all``) while the
    partition's leader refuses writes now and then; count what it stored, order included (``reordered``).

    The refusals are the broker's own NOT_ENOUGH_REPLICAS: one follower of partition 0 is stopped (the ISR shrinks
    to two), and at each refusal ``min.insync.replicas`` goes up to 3 for ``hold`` seconds and back to 2,
    ``count / (refusals + 1)`` records apart. Whether a refusal puts a retry behind later records depends on what
    is in flight as writes are accepted again (measured: about 4 refusals in 10 do; now and then 8 in a row do not).
    So the first run (whose order is at stake) is refused past ``refusals``, up to ``most``, until the partition
    stores one of its records after a later one; every other run then as many times, with as many records.
    Unless a run's settings say otherwise, the producer retries at once (``retry.backoff.ms=1``), in batches of 5
    records, with a 1.5 s request timeout. The follower is started again at the end. Needs a one-partition topic
    with replication factor 3.
    """
    state = cluster.describe_topic(topic)[0]
    if len(state.replicas) != 3:
        raise LabkitError(f"{topic!r} has {len(state.replicas)} replicas; the refusals need 3.",
                          "Create the topic with replication_factor=3 (a three-broker cluster).")
    follower = next(r for r in state.replicas if r != state.leader)
    step = max(count // (refusals + 1), 2)
    results: dict[str, ProduceCount] = {}
    cluster.stop_broker(follower)
    try:
        # The refusals need an ISR of two on the leader, which applies the controller's shrink a moment later
        # (seconds on a busy machine): until then min.insync.replicas=3 refuses nothing.
        agreement.agree(cluster, f"broker {follower} out of the ISR of {topic}-0",
                        lambda b: _isr_without(cluster, b, topic, follower), timeout=60)
        for label, settings in runs.items():
            config = {"acks": "all", "retry_backoff_ms": 1, "retry_backoff_max_ms": 1, "batch_num_messages": 5,
                      "linger_ms": 1, "request_timeout_ms": 1500, "message_timeout_ms": 60000}
            config.update({k.replace(".", "_"): v for k, v in settings.items()})
            first = next(iter(results.values()), None)
            results[label] = _through_refusals(cluster, topic, config, step, count - refusals * step, hold, pace,
                                               first.refusals if first else refusals, 0 if first else most)
    finally:
        _min_insync(cluster, topic, 2)
        cluster.start_broker(follower)
        cluster.wait_for_isr(topic)
    return results


def _min_insync(cluster: "ClusterLike", topic: str, n: int) -> None:
    from .admin import alter_configs

    alter_configs(cluster, "topic", topic, {"min.insync.replicas": n})


def _through_refusals(cluster: "OwnedClusterLike", topic: str, config: Mapping[str, Any], step: int, tail: int,
                      hold: float, pace: float, refusals: int, most: int) -> ProduceCount:
    """One run of :func:`produce_through_refusals`: ``refusals`` refusals (more, up to ``most``, until one of its
    records is stored after a later one), ``step`` records apart, then ``tail`` records."""
    tag, producer, on_delivery, sent = uuid.uuid4().hex[:8], cluster.producer(**config), _Deliveries(), 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            _produce(producer, topic, record_id(sent, tag), on_delivery)
            sent += 1
            if pace:
                time.sleep(pace)

    def reordered_yet() -> bool:  # the partition read back, as counted at the end
        producer.flush(90)
        return _outcome(cluster, topic, tag, sent, on_delivery, 0.0).reordered > 0

    t0 = time.monotonic()
    done = 0
    while True:
        send(step - step // 2)
        _min_insync(cluster, topic, 3)  # refused from here on ...
        send(step // 2)
        time.sleep(hold)
        _min_insync(cluster, topic, 2)  # ... accepted again: the retries go in, with what was in flight
        done += 1
        if done >= refusals and (done >= most or reordered_yet()):
            break
    send(tail)
    producer.flush(90)
    counted = _outcome(cluster, topic, tag, sent, on_delivery, time.monotonic() - t0)
    counted.refusals = done
    return counted


def _isr_without(cluster: "ClusterLike", broker: Any, topic: str, follower: int) -> tuple[bool, str]:
    md = agreement.broker_metadata(cluster, broker, topic)
    found = md.topics.get(topic) if md is not None else None
    if found is None or 0 not in found.partitions:
        return False, "does not show the partition"
    isr = list(found.partitions[0].isrs)
    return follower not in isr, f"ISR {isr}"


def counts_frame(counts: Mapping[str, ProduceCount]) -> "pd.DataFrame":
    """Several runs side by side, one row each."""
    import pandas as pd

    return pd.DataFrame([c.as_row(label) for label, c in counts.items()]).set_index("run")


@dataclass
class TrafficCount:
    """What a :class:`Traffic` run sent, what the broker kept, and what its consumer read."""

    sent: int
    acked: int
    failed: int
    stored: int
    #: Acknowledged but not stored: lost.
    lost: int
    #: Extra stored copies (a retried request the broker had already written).
    duplicates: int
    consumed: int
    #: Acknowledged records the consumer never read / read more than once.
    unread: int
    reread: int
    #: Records the producer sent more than once (librdkafka's ``txmsgs`` beyond those acknowledged: resent
    #: after a NOT_LEADER_OR_FOLLOWER or a lost connection) and partition-leader changes it saw.
    retries: int
    leader_changes: int
    errors: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def as_row(self, label: str = "") -> dict[str, Any]:
        row = {"sent": self.sent, "acknowledged": self.acked, "failed": self.failed, "lost (acked, not stored)": self.lost,
               "duplicates": self.duplicates, "consumed": self.consumed, "unread": self.unread, "read twice": self.reread,
               "sent again": self.retries, "leader changes seen": self.leader_changes}
        return {"run": label, **row} if label else row

    def _repr_html_(self) -> str:
        import pandas as pd

        return pd.DataFrame([self.as_row()]).to_html(index=False)


def _at_log_end(consumer: Any) -> bool:
    """True when ``consumer`` has an assignment and its position is at the end of every assigned partition."""
    from confluent_kafka import KafkaException

    try:
        assigned = consumer.assignment()
        if not assigned:
            return False
        for tp in consumer.position(assigned):
            low, high = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
            if (tp.offset < 0 and high > low) or 0 <= tp.offset < high:
                return False
        return True
    except KafkaException:
        return False


class Traffic:
    """An ``acks=all`` producer and a consumer group member running in the background (threads of this
    process) while you operate the cluster; :meth:`stop` counts what was lost or duplicated.

    ``rate`` records per second, keyed (so every partition gets some) and numbered like
    :func:`produce_and_count`'s; the producer retries for up to ``delivery.timeout.ms`` (2 minutes) by
    default, as a real one would. ``with Traffic(cluster, topic) as t: ...`` stops it at the end.
    """

    def __init__(self, cluster: "ClusterLike", topic: str, rate: float = 200.0, group: Optional[str] = None,
                 **producer_config: Any) -> None:
        from .clientstats import ClientStats

        self.cluster, self.topic, self.rate = cluster, topic, rate
        self.group = group or f"traffic-{uuid.uuid4().hex[:8]}"
        self.tag = uuid.uuid4().hex[:8]
        self.stats = ClientStats()
        # 50 ms: at 200 records/s the batches carry several records each. With 5 ms nearly every record was a
        # request of its own: three brokers spent 15.8-24.1 CPU-s per 30 s of traffic, against 7.2-7.7 with 50 ms
        # (2026-11-28, 2 cores). Each record waits at most 50 ms more for its acknowledgement.
        self._config = {"acks": "all", "linger_ms": 50, **producer_config}
        self.sent = 0
        self._delivered = _Deliveries()
        self._acked, self._errors = self._delivered.acked, self._delivered.errors
        self._consumed: list[bytes] = []
        self._stop = threading.Event()
        self._failure: Optional[BaseException] = None
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0
        self._deadline: Optional[Deadline] = None  # the consumer's, set by stop()

    def __enter__(self) -> "Traffic":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._threads:
            self.stop()

    @property
    def acked(self) -> int:
        """Records acknowledged so far."""
        return len(self._acked)

    @property
    def consumed(self) -> int:
        """Records the consumer has read so far."""
        return len(self._consumed)

    def start(self) -> "Traffic":
        self._t0 = time.monotonic()
        self._threads = [threading.Thread(target=self._guard, args=(fn,), daemon=True, name=f"traffic-{name}")
                         for name, fn in (("producer", self._produce), ("consumer", self._consume))]
        for thread in self._threads:
            thread.start()
        return self

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop()
            self._failure = exc

    def _produce(self) -> None:
        producer = self.cluster.producer(**self._config, **self.stats.config(interval_ms=250))
        on_delivery = self._delivered

        while not self._stop.is_set():
            due = int((time.monotonic() - self._t0) * self.rate) + 1
            while self.sent < due:
                try:
                    producer.produce(self.topic, key=str(self.sent % 64).encode(), value=record_id(self.sent, self.tag),
                                     on_delivery=on_delivery)
                    self.sent += 1
                except BufferError:
                    break
            producer.poll(0.02)
        producer.flush(150)
        producer.poll(0.3)  # the last statistics report

    def _consume(self) -> None:
        consumer = self.cluster.consumer(self.group, enable_auto_commit=True)  # type: ignore[attr-defined]
        consumer.subscribe([self.topic])
        looked = 0.0
        try:
            while not (self._stop.is_set() and not self._threads[0].is_alive()
                       and set(self._consumed) >= set(self._acked)):
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error() and msg.value() and msg.value().startswith(self.tag.encode()):
                    self._consumed.append(msg.value())
                if self._stop.is_set() and not self._threads[0].is_alive() and time.monotonic() - looked >= 1.0:
                    # Read to the end of the log: what is still unread was acknowledged and is gone (a topic
                    # deleted and made again, an unclean election) and will never come; waiting on to the
                    # deadline only hides that for minutes (seen: drain_broker's delete-and-recreate cheat).
                    looked = time.monotonic()
                    if _at_log_end(consumer):
                        break
                if self._stop.is_set() and self._deadline is not None and self._deadline.expired():
                    break
        finally:
            consumer.close()

    def stop(self, timeout: float = 180.0) -> TrafficCount:
        """Stop producing, wait for every acknowledgement and for the consumer to read them (or the log's end, when
        some are gone), then count; within ``timeout`` of a quiet machine's seconds (:class:`~labkit.waiting.Deadline`)."""
        self._deadline, joined = Deadline(timeout), Deadline(timeout + 30)  # one each: the consumer's, this thread's
        self._stop.set()
        for thread in self._threads:
            while thread.is_alive() and not joined.expired():
                thread.join(joined.wait_time(1.0))
        seconds = time.monotonic() - self._t0
        if self._failure is not None:
            raise self._failure
        prefix = self.tag.encode()
        stored = Counter(r.value for r in self.cluster.read_all(self.topic) if r.value and r.value.startswith(prefix))
        consumed = Counter(self._consumed)
        acked = set(self._acked)
        leaders: dict[tuple[str, int], list[Any]] = {}
        for report in self.stats.reports:
            for pid, p in report.get("topics", {}).get(self.topic, {}).get("partitions", {}).items():
                seen = leaders.setdefault((self.topic, int(pid)), [])
                if int(pid) >= 0 and p.get("leader", -1) >= 0 and (not seen or seen[-1] != p["leader"]):
                    seen.append(p["leader"])
        last = self.stats.latest or {}
        return TrafficCount(
            sent=self.sent, acked=len(self._acked), failed=sum(self._errors.values()), stored=sum(stored.values()),
            lost=sum(1 for v in acked if v not in stored), duplicates=sum(n - 1 for n in stored.values() if n > 1),
            consumed=len(self._consumed), unread=sum(1 for v in acked if v not in consumed),
            reread=sum(n - 1 for n in consumed.values() if n > 1),
            retries=max(last.get("txmsgs", 0) - len(self._acked), 0),
            leader_changes=sum(max(len(s) - 1, 0) for s in leaders.values()), errors=self._errors, seconds=seconds)
