"""What a cluster looks like at one moment, as plain data: brokers, partition maps, consumer groups.

:class:`ClusterReader` reads a :class:`Snapshot` in two steps (the layout from one
Metadata request, then offsets and groups, which may wait on dead brokers);
:func:`take_snapshot` does both once. Failures become the snapshot's ``errors``,
never exceptions, so a view keeps drawing while brokers die. Nothing here draws:
:mod:`labkit.view.render` turns snapshots into HTML and text, :mod:`labkit.view.widgets` into
a live dashboard.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from . import groupreader
from ..admin import PartitionState, TopicState, list_offsets
from ..errors import ClusterStateError
from .groupread import GroupReader, GroupView, PartitionLag, parse_group, reader_settings, shared_reader
from .panel import PanelData, PanelReader
from ..viz import replica_roles

if TYPE_CHECKING:
    from ..runtime.protocols import ClusterLike

#: Which consumer groups to read: None or True for all (labkit's own left out), False for none, or a list of ids.
GroupsOption = Union[None, bool, Sequence[str]]


@dataclass(frozen=True)
class BrokerView:
    """One broker: the state labkit gave it, and whether the cluster's metadata lists it right now."""

    id: int
    #: labkit's state: "running", "paused", "stopped", "killed" or "external".
    state: str
    #: Listed in the cluster's metadata (a killed broker stays listed until its session times out).
    registered: bool

    @property
    def status(self) -> str:
        """"up", "starting", "paused" or "down" (see :func:`broker_status`)."""
        return broker_status(self.state, self.registered)


@dataclass(frozen=True)
class Snapshot:
    """Everything the view shows at one moment, read in one refresh."""

    brokers: tuple[BrokerView, ...]
    topics: Mapping[str, TopicState]
    groups: tuple[GroupView, ...]
    #: What could not be read this time (shown in the status line), e.g. "group billing: timed out".
    errors: tuple[str, ...] = ()
    #: Wall-clock time the refresh started, and how long it took.
    taken_at: float = 0.0
    took: float = 0.0
    #: The brokers' own metrics (the metrics panel), when the reader was asked for them.
    metrics: Optional[PanelData] = None

    @property
    def error(self) -> Optional[str]:
        return "; ".join(self.errors) or None

    def broker(self, broker_id: int) -> BrokerView:
        return next(b for b in self.brokers if b.id == broker_id)

    @property
    def broker_ids(self) -> list[int]:
        return [b.id for b in self.brokers]

    @property
    def dead_brokers(self) -> set[int]:
        """Brokers whose replicas cannot serve: down, or missing from the metadata."""
        return {b.id for b in self.brokers if b.status == "down" or not b.registered}

    def roles(self, topic: str) -> list[list[str]]:
        """Partition × broker replica roles of ``topic`` (:func:`labkit.viz.replica_roles`)."""
        return replica_roles(self.topics[topic], self.broker_ids, self.dead_brokers)

    def leaders(self, topic: str) -> dict[int, Optional[int]]:
        return self.topics[topic].leaders()

    def group(self, group_id: str) -> GroupView:
        return next(g for g in self.groups if g.id == group_id)

    @property
    def settling(self) -> bool:
        """Something is about to change: a dead or frozen broker still listed, a broker not listed yet,
        or a shown partition without leader or with replicas out of sync."""
        if any(b.registered != (b.status == "up") for b in self.brokers):
            return True
        return any(p.leader is None or p.out_of_sync for s in self.topics.values() for p in s.partitions)

    def topic_key(self, topic: str) -> tuple:
        """What the partition map of ``topic`` depends on."""
        state = self.topics.get(topic)
        parts = () if state is None else tuple((p.leader, p.replicas, p.isr) for p in state.partitions)
        return (tuple(self.broker_ids), tuple(sorted(self.dead_brokers)), parts)

    def key(self) -> tuple:
        """Everything that changes what is drawn: equal keys mean nothing to redraw."""
        topics = tuple((n, self.topic_key(n), tuple(p.high_watermark for p in s.partitions))
                       for n, s in sorted(self.topics.items()))
        return (self.brokers, topics, tuple(g.key() for g in self.groups), self.errors,
                self.metrics.key() if self.metrics is not None else None)


def broker_status(state: str, registered: bool) -> str:
    """What a broker is, from labkit's state and the metadata.

    ``up``: running and listed; ``starting``: its process runs but the cluster does
    not list it (yet); ``paused``: frozen by SIGSTOP / ``docker pause``;
    ``down``: killed or stopped (it may stay listed until its session times out).
    """
    if state in ("killed", "stopped"):
        return "down"
    if state == "paused":
        return "paused"
    return "up" if registered else ("down" if state == "external" else "starting")


def owns_brokers(cluster: Any) -> bool:
    """True when ``cluster``'s backend owns its brokers (so they can be killed, paused, restarted)."""
    return bool(getattr(cluster, "owns_brokers", False))


def short_error(exc: BaseException) -> str:
    """A one-line reason for the status line (Kafka error texts or names, labkit messages)."""
    text = " ".join(groupreader.reason(exc).split())
    return text if len(text) <= 160 else text[:159] + "…"


class _ClusterStopped(ClusterStateError):
    """Raised when the cluster stopped while the view was reading it."""

    def __init__(self) -> None:
        super().__init__("This cluster has been stopped, so there is nothing to view.",
                         "Start a new one with labkit.start_cluster().")


def topic_state_from_metadata(name: str, topic: Any) -> TopicState:
    """A :class:`TopicState` from one topic of a Metadata response (leaders, replicas, ISR; no offsets)."""
    parts = []
    for pid in sorted(topic.partitions):
        p = topic.partitions[pid]
        leader = p.leader if p.leader is not None and p.leader >= 0 else None
        parts.append(PartitionState(name, pid, leader, tuple(p.replicas), tuple(p.isrs), None, None))
    return TopicState(name, tuple(parts))


class ClusterReader:
    """Reads what the view shows, in two steps: :meth:`layout` (brokers, leaders, replicas, ISR:
    one Metadata request, fast even while brokers die) then :meth:`complete` (log-end offsets
    and consumer groups, which may wait on dead brokers).

    It owns what it opens: a client on the running brokers while one is paused, killed or stopped,
    and the group reader process. :meth:`close` releases them. (A frozen broker never answers, so
    requests sent to it only time out; and librdkafka retries a request on the broker it was sent
    to, so the cluster's client asked for metadata in the moment a broker died answered only after
    the timeout: seen as "metadata: ... Timed out" under the view right after its kill button.)
    """

    def __init__(self, cluster: "ClusterLike", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                 timeout: float = 3.0, max_topics: int = 12, group_reader: Optional[GroupReader] = None,
                 metrics: bool = False) -> None:
        """``metrics``: also scrape the brokers' metrics exporters (:mod:`labkit.runtime.metrics`) in :meth:`complete`."""
        self.cluster = cluster
        self.topics = None if topics is None else list(topics)
        self.groups = groups
        self.timeout = timeout
        self.max_topics = max_topics
        self.faults = owns_brokers(cluster)
        self._fallback: Optional[tuple[tuple[str, ...], AdminClient]] = None
        self._group_reader = group_reader or GroupReader(reader_settings(cluster))
        self._owns_reader = group_reader is None
        self._listed: Optional[list[str]] = None
        self._found: list[Any] = []
        self._found_errors: list[str] = []
        #: Reads the metrics panel (and keeps its history) when asked for metrics.
        self.panel: Optional[PanelReader] = PanelReader(cluster, timeout=min(timeout, 1.5)) if metrics else None

    # -- step 1
    def layout(self, stopped: Callable[[], bool] = lambda: False) -> Snapshot:
        """Brokers (labkit's state + the metadata) and every shown topic's leaders, replicas and ISR."""
        t0, wall = time.monotonic(), time.time()
        self._guard(stopped)
        errors: list[str] = []
        known: list[tuple[int, str]] = []
        if self.faults:
            try:
                known = [(b.id, b.state) for b in self.cluster.brokers]
            except Exception as exc:  # noqa: BLE001
                errors.append(f"brokers: {short_error(exc)}")
        md = None
        try:
            md = self._admin(known).list_topics(timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - every broker down: say so, keep going
            errors.append(f"metadata: {short_error(exc)}")
        registered = set(md.brokers) if md is not None else set()
        if not self.faults:
            known = [(bid, "external") for bid in sorted(registered)]
        states: dict[str, TopicState] = {}
        if md is not None:
            names = self.topics
            if names is None:
                names = sorted(t for t in md.topics if not t.startswith("__"))[:self.max_topics]
            for name in names:
                topic = md.topics.get(name)
                if topic is None or (topic.error is not None and not topic.partitions):
                    errors.append(f"{name}: no such topic")
                    continue
                states[name] = topic_state_from_metadata(name, topic)
        brokers = tuple(BrokerView(bid, state, bid in registered) for bid, state in known)
        return Snapshot(brokers, states, (), tuple(errors), taken_at=wall, took=time.monotonic() - t0)

    # -- step 2
    def complete(self, layout: Snapshot, stopped: Callable[[], bool] = lambda: False,
                 groups_wait: Optional[float] = None) -> Snapshot:
        """``layout`` plus high watermarks and consumer groups (members, committed offsets, lag).

        ``groups_wait``: seconds to wait for the group reader's answer; when it takes
        longer (a coordinator is down), the groups read last time are used and the
        answer is picked up by a later call. None waits for it (up to the timeout).
        """
        t0 = time.monotonic()
        errors = list(layout.errors)
        found: list[Any] = []  # parse_group's tuples
        if self.groups is not False:
            self._guard(stopped)
            try:
                found = self._read_groups(layout.brokers, errors, groups_wait)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"groups: {short_error(exc)}")
        self._guard(stopped)
        # Only ask leaders that can answer: a killed or frozen leader stays in the metadata for a few
        # seconds, and a request to it would only wait for the timeout.
        answering = {b.id for b in layout.brokers if b.status == "up" and b.registered}
        leaders = {(n, p.partition): p.leader for n, s in layout.topics.items() for p in s.partitions}
        wanted = {tp for tp, leader in leaders.items() if leader in answering}
        wanted |= {tp for _, _, _, committed, _, _ in found for tp in committed
                   if leaders.get(tp, -1) in answering | {-1}}
        try:
            admin = self._admin([(b.id, b.state) for b in layout.brokers])
            # log-end offsets (what a read_uncommitted consumer can reach); None where a partition has no leader
            ends = list_offsets(admin, [TopicPartition(t, p) for t, p in sorted(wanted)], OffsetSpec.latest(),
                                self.timeout)
        except Exception as exc:  # noqa: BLE001
            ends = {}
            errors.append(f"offsets: {short_error(exc)}")
        topics = {n: TopicState(n, tuple(replace(p, high_watermark=ends.get((n, p.partition)))
                                         for p in s.partitions), s.config) for n, s in layout.topics.items()}
        groups = tuple(GroupView(gid, state, members, {tp: PartitionLag(c, ends.get(tp))
                                                       for tp, c in sorted(committed.items())}, coordinator, incomplete)
                       for gid, state, members, committed, coordinator, incomplete in found)
        panel = None
        if self.panel is not None:
            try:
                panel = self.panel.read({b.id: b.state for b in layout.brokers})
            except Exception as exc:  # noqa: BLE001 - no exporter, or none answered: say so, keep drawing
                errors.append(f"metrics: {short_error(exc)}")
        return Snapshot(layout.brokers, topics, groups, tuple(errors), taken_at=layout.taken_at,
                        took=layout.took + time.monotonic() - t0, metrics=panel)

    @property
    def group_reader_pid(self) -> Optional[int]:
        """Pid of the group reader process while it runs (for tests)."""
        return self._group_reader.pid

    def close(self) -> None:
        """Stop the group reader process (unless it was lent to this reader) and forget the fallback client."""
        if self._owns_reader:
            self._group_reader.close()
        self._fallback = None

    # -- internals
    def _guard(self, stopped: Callable[[], bool]) -> None:
        if stopped() or getattr(self.cluster, "stopped", False):
            raise _ClusterStopped()

    def _admin(self, known: Sequence[tuple[int, str]]) -> AdminClient:
        """The cluster's client, or one on the running brokers only while some broker is not running."""
        if not any(state in ("paused", "killed", "stopped") for _, state in known):
            return self.cluster.admin()
        running = tuple(sorted(b.address for b in self.cluster.brokers if b.state == "running"))
        if not running:
            return self.cluster.admin()
        if self._fallback is None or self._fallback[0] != running:
            self._fallback = (running, self.cluster.admin_for(",".join(running)))
        return self._fallback[1]

    def _read_groups(self, brokers: Sequence[BrokerView], errors: list[str], wait: Optional[float]) -> list[Any]:
        if self.groups is None or self.groups is True:
            # Listing asks every broker in the metadata; a dead or frozen one that is still listed
            # would hold the answer until the timeout, so meanwhile keep the groups listed last time.
            silent = any(b.registered and b.status in ("down", "paused") for b in brokers)
            asked = self._listed if silent and self._listed is not None else None
        else:
            asked = sorted(self.groups)  # type: ignore[arg-type]
        reader = self._group_reader
        if asked == [] and not reader.pending:
            self._found, self._found_errors = [], []
            return []
        if not reader.pending:
            reader.send(asked, self.timeout, known=self._listed or ())
        answer = reader.receive(2 * self.timeout + 5 if wait is None else wait)
        if answer is None:  # still working (a coordinator is away): show what we had
            errors.extend(self._found_errors)
            return self._found
        if answer["listed"] is not None:
            self._listed = answer["listed"]
        found_errors: list[str] = [f"groups: {answer['error']}"] if answer["error"] else []
        if answer.get("failed"):
            self._found_errors = found_errors
            errors.extend(found_errors)
            return self._found
        self._found = [parse_group(g, found_errors) for g in answer["groups"]]
        self._found_errors = found_errors
        errors.extend(found_errors)
        return self._found


def take_snapshot(cluster: "ClusterLike", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                  timeout: float = 3.0, max_topics: int = 12, metrics: bool = False) -> Snapshot:
    """Read brokers, topics and groups once (and the brokers' metrics with ``metrics=True``). Failures
    become the snapshot's ``errors``, never exceptions.

    ``topics=None`` covers every non-internal topic (the first ``max_topics``).
    """
    group_reader, lock = shared_reader(cluster)
    with lock:
        reader = ClusterReader(cluster, topics, groups, timeout=timeout, max_topics=max_topics,
                               group_reader=group_reader, metrics=metrics)
        try:
            return reader.complete(reader.layout())
        finally:
            reader.close()
