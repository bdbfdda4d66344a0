"""Broker failures a test can cause on purpose, and undo: the ``kafka_faults`` fixture's object.

    leader = kafka_faults.kill_leader(topic, partition=0)   # SIGKILL; returns once another broker leads it
    with kafka_faults.frozen(leader):                        # SIGSTOP: alive, silent (a long GC pause)
        ...
    kafka_faults.wait_for_isr(topic)                         # every replica back in sync

Each call returns once the cluster shows its effect (a new leader elected, every thread of a frozen
broker stopped: :meth:`~labkit.cluster.Cluster.pause_broker`). :meth:`Faults.heal` -- run by the fixture
when the test ends, pass or fail -- thaws what is frozen, starts what was killed and waits until every
replica of the topics the test touched is in sync again, so the next test gets a healthy cluster.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from ..errors import ClusterStateError
from ..runtime import agreement
from ..waiting import Wait


class Faults:
    """Fault injection on a cluster the lab owns (``cluster.owns_brokers``), remembering what to repair."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.killed: list[int] = []
        self.frozen_ids: list[int] = []
        self.topics: set[str] = set()

    # ---------------------------------------------------------------- reading
    def leader(self, topic: str, partition: int = 0) -> int:
        """The broker leading ``partition`` of ``topic`` now."""
        leader = self.cluster.describe_topic(topic)[partition].leader
        if leader is None:
            raise ClusterStateError(f"Partition {partition} of {topic!r} has no leader now.",
                                    "Wait for one (kafka_faults.wait_for_isr) before breaking it.")
        return leader

    # ---------------------------------------------------------------- breaking
    def kill(self, broker_id: int) -> int:
        """SIGKILL a broker (no controlled shutdown, like pulling the plug); returns its id."""
        self.cluster.kill_broker(broker_id)
        self.killed.append(broker_id)
        return broker_id

    def kill_leader(self, topic: str, partition: int = 0, wait: bool = True, timeout: float = 60.0) -> int:
        """SIGKILL the leader of ``partition``; with ``wait``, return once another replica leads it (a topic
        with one replica has no other: ``wait=False``). Returns the killed broker's id."""
        self.topics.add(topic)
        old = self.kill(self.leader(topic, partition))
        if wait:
            self.cluster.wait_for_new_leader(topic, partition, old, timeout=timeout)
        return old

    def freeze(self, broker_id: int) -> int:
        """SIGSTOP a broker: it keeps its sockets but answers nothing. Returns once every thread of it stopped."""
        self.cluster.pause_broker(broker_id)
        self.frozen_ids.append(broker_id)
        return broker_id

    def freeze_leader(self, topic: str, partition: int = 0) -> int:
        """Freeze the leader of ``partition``; returns its id."""
        self.topics.add(topic)
        return self.freeze(self.leader(topic, partition))

    def thaw(self, broker_id: int) -> None:
        """Let a frozen broker run again."""
        self.cluster.resume_broker(broker_id)
        if broker_id in self.frozen_ids:
            self.frozen_ids.remove(broker_id)

    @contextmanager
    def frozen(self, broker_id: int) -> Iterator[int]:
        """``with kafka_faults.frozen(b):`` the broker is frozen inside the block, running again after it."""
        self.freeze(broker_id)
        try:
            yield broker_id
        finally:
            self.thaw(broker_id)

    def restart(self, broker_id: int, timeout: float = 60.0) -> None:
        """Start a killed broker again (same id, ports and data); returns once it serves."""
        self.cluster.start_broker(broker_id, timeout=timeout)
        if broker_id in self.killed:
            self.killed.remove(broker_id)

    # ---------------------------------------------------------------- waiting
    def wait_for_isr(self, topic: str, partition: Optional[int] = None, size: Optional[int] = None,
                     timeout: float = 60.0) -> list[int]:
        """Wait until the ISR of ``partition`` (every partition when None) has ``size`` replicas (default: all
        of its replicas, i.e. fully in sync again); returns the last partition's ISR."""
        self.topics.add(topic)

        what = (f"the ISR of {topic!r}" + (f" partition {partition}" if partition is not None else "")
                + (f" to have {size} replicas" if size is not None else " to hold every replica"))
        name = self.cluster.topic_name(topic)
        # as every live broker sees it: a broker applies an ISR change a moment after the controller made it
        agreement.agree(self.cluster, what, agreement.isr_reached(self.cluster, name, partition, size), timeout=timeout,
                        together=True)

        def reached() -> Optional[list[int]]:  # and the ISR returned shows it too: an ISR may change again
            chosen = [p for p in self.cluster.describe_topic(topic).partitions if partition is None or p.partition == partition]
            ok = all(len(p.isr) == (size if size is not None else len(p.replicas)) for p in chosen)
            return list(chosen[-1].isr) if ok and chosen else None

        return Wait(what, timeout=timeout, interval=0.25, stretch=True).until(reached)

    # ---------------------------------------------------------------- repairing
    def heal(self, timeout: float = 90.0) -> None:
        """Thaw every frozen broker, start every killed one, then wait until the topics this test touched are
        fully in sync: the cluster as the test found it."""
        for broker_id in list(self.frozen_ids):
            self.thaw(broker_id)
        for broker_id in list(self.killed):
            self.restart(broker_id, timeout=timeout)
        for topic in sorted(self.topics):
            if topic in self.cluster.topics():
                self.wait_for_isr(topic, timeout=timeout)

    def __repr__(self) -> str:
        return f"<Faults killed={self.killed} frozen={self.frozen_ids}>"


__all__ = ["Faults"]
