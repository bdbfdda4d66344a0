"""Reference partition assignors, to compare with what real consumers received.

``assign(strategy, members, subscriptions, partitions, previous=None)`` returns
``{member: [TopicPartition, ...]}``. The strategies follow the documented
algorithms of the Java client, which librdkafka (the Python client) implements
the same way for ``range`` and ``roundrobin``:

* **range** — per topic: the topic's partitions in order, the members subscribed
  to it sorted by member id; each member gets ``n // m`` consecutive partitions and
  the first ``n % m`` members one more.
* **roundrobin** — all subscribed topic-partitions sorted by (topic, partition),
  dealt one by one to the members sorted by member id, skipping members not
  subscribed to the partition's topic.
* **sticky** — as balanced as possible (partition counts differ by at most one
  among members with the same subscriptions), moving as few partitions away from
  their ``previous`` owner as possible.
* **cooperative-sticky** — the same final assignment as sticky, reached in two
  rebalances: first the partitions that change owner are revoked, then assigned.
  :func:`cooperative_rebalance` returns both steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

from .errors import LabkitError


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __repr__(self) -> str:
        return f"{self.topic}-{self.partition}"


Assignment = dict[str, list[TopicPartition]]


class AssignorError(LabkitError):
    """Raised for an unknown strategy or inconsistent members and subscriptions."""


def _check(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]]) -> None:
    missing = [m for m in members if m not in subscriptions]
    if missing:
        raise AssignorError(f"No subscription for member(s) {missing}.", "Give every member its list of topics.")


def range_assign(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
                 partitions: Mapping[str, int], previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None,
                 ) -> Assignment:
    _check(members, subscriptions)
    result: Assignment = {m: [] for m in members}
    for topic in sorted(partitions):
        subscribed = sorted(m for m in members if topic in subscriptions[m])
        if not subscribed:
            continue
        n, k = partitions[topic], len(subscribed)
        per, extra = divmod(n, k)
        start = 0
        for i, member in enumerate(subscribed):
            count = per + (1 if i < extra else 0)
            result[member] += [TopicPartition(topic, p) for p in range(start, start + count)]
            start += count
    return result


def round_robin_assign(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
                       partitions: Mapping[str, int],
                       previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None) -> Assignment:
    _check(members, subscriptions)
    result: Assignment = {m: [] for m in members}
    ordered = sorted(members)
    if not ordered:
        return result
    tps = [TopicPartition(t, p) for t in sorted(partitions) for p in range(partitions[t])
           if any(t in subscriptions[m] for m in members)]
    i = 0
    for tp in tps:
        for _ in range(len(ordered)):
            member = ordered[i % len(ordered)]
            i += 1
            if tp.topic in subscriptions[member]:
                result[member].append(tp)
                break
    return result


def sticky_assign(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
                  partitions: Mapping[str, int],
                  previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None) -> Assignment:
    _check(members, subscriptions)
    previous = previous or {}
    all_tps = sorted(TopicPartition(t, p) for t in partitions for p in range(partitions[t])
                     if any(t in subscriptions[m] for m in members))
    result: Assignment = {m: [] for m in members}
    owner: dict[TopicPartition, str] = {}
    # 1. keep previous owners who still exist and still subscribe
    for m in sorted(previous):
        if m not in result:
            continue
        for tp in sorted(previous[m]):
            if tp in owner or tp.topic not in subscriptions[m] or tp.topic not in partitions \
                    or tp.partition >= partitions[tp.topic]:
                continue
            owner[tp] = m
            result[m].append(tp)
    # 2. trim members holding more than their fair share (so others can be balanced)
    total, k = len(all_tps), len(members)
    if k:
        cap = -(-total // k)
        for m in sorted(result, key=lambda x: -len(result[x])):
            while len(result[m]) > cap:
                tp = result[m].pop()
                del owner[tp]
    # 3. give unowned partitions to the least-loaded eligible member
    for tp in all_tps:
        if tp in owner:
            continue
        eligible = [m for m in members if tp.topic in subscriptions[m]]
        m = min(eligible, key=lambda x: (len(result[x]), x))
        owner[tp] = m
        result[m].append(tp)
    # 4. move partitions from the most to the least loaded eligible member until balanced
    moved = True
    while moved:
        moved = False
        for heavy in sorted(result, key=lambda x: (-len(result[x]), x)):
            for tp in sorted(result[heavy], reverse=True):
                light = [m for m in members if tp.topic in subscriptions[m] and len(result[m]) < len(result[heavy]) - 1]
                if light:
                    target = min(light, key=lambda x: (len(result[x]), x))
                    result[heavy].remove(tp)
                    result[target].append(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: sorted(tps) for m, tps in result.items()}


def cooperative_rebalance(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
                          partitions: Mapping[str, int],
                          previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None,
                          ) -> tuple[dict[str, list[TopicPartition]], Assignment]:
    """(revoked in the first rebalance per previous owner, final assignment after the second)."""
    final = sticky_assign(members, subscriptions, partitions, previous)
    revoked = {}
    for m, tps in (previous or {}).items():
        gone = sorted(tp for tp in tps if tp not in final.get(m, []))
        if gone:
            revoked[m] = gone
    return revoked, final


def cooperative_sticky_assign(members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
                              partitions: Mapping[str, int],
                              previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None) -> Assignment:
    return cooperative_rebalance(members, subscriptions, partitions, previous)[1]


#: Strategy names (including librdkafka's ``partition.assignment.strategy`` values) -> assignor.
ASSIGNORS: dict[str, Callable[..., Assignment]] = {
    "range": range_assign,
    "roundrobin": round_robin_assign,
    "round_robin": round_robin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
    "cooperative_sticky": cooperative_sticky_assign,
}


def assign(strategy: str, members: Sequence[str], subscriptions: Mapping[str, Sequence[str]],
           partitions: Mapping[str, int],
           previous: Optional[Mapping[str, Sequence[TopicPartition]]] = None) -> Assignment:
    """Assign ``partitions`` ({topic: count}) to ``members`` with ``strategy``."""
    if strategy not in ASSIGNORS:
        raise AssignorError(f"Unknown assignor {strategy!r}.", f"Valid assignors: {', '.join(ASSIGNORS)}.")
    return ASSIGNORS[strategy](members, subscriptions, partitions, previous)
