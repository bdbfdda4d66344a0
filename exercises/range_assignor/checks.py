"""Checks for range_assignor: the learner's range assignor vs the reference and vs real consumers."""

from __future__ import annotations

import random
import time
import uuid

from labkit.assignors import range_assign
from labkit.grading import check


def _as_tuples(result) -> dict[str, list[tuple[str, int]]]:
    assert isinstance(result, dict), f"return a dict of member -> list of (topic, partition), not {type(result).__name__}"
    return {m: sorted((t, p) for t, p in tps) for m, tps in result.items()}


def _reference(members, subscriptions, partitions):
    return {m: [(tp.topic, tp.partition) for tp in tps] for m, tps in range_assign(members, subscriptions, partitions).items()}


@check("docs_example", points=2, hint="Per topic: sort the subscribed members; n // m each, the first n % m get one more.")
def docs_example(ns):
    """Two members, two topics of three partitions: the example from the Java client's documentation."""
    got = _as_tuples(ns.range_assign(["C0", "C1"], {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3}))
    assert got == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}, f"got {got}"


@check("idle_members_get_nothing", points=1, hint="Every member must appear in the result, even with no partitions.")
def idle_members_get_nothing(ns):
    """With more members than partitions, the extra members are in the result with an empty list."""
    got = _as_tuples(ns.range_assign(["a", "b", "c"], {m: ["t"] for m in "abc"}, {"t": 2}))
    assert got == {"a": [("t", 0)], "b": [("t", 1)], "c": []}, f"got {got}"


@check("hidden_layouts", points=4, hidden=True)
def hidden_layouts(ns):
    """200 random layouts (members, uneven subscriptions, partition counts) match the reference range assignor."""
    rng = random.Random()
    for _ in range(200):
        members = [f"member-{rng.randint(0, 999):03d}-{i}" for i in range(rng.randint(1, 6))]
        topics = {f"topic-{chr(97 + i)}": rng.randint(1, 12) for i in range(rng.randint(1, 4))}
        subs = {m: sorted(rng.sample(sorted(topics), rng.randint(1, len(topics)))) for m in members}
        want = _as_tuples(_reference(members, subs, topics))
        got = _as_tuples(ns.range_assign(members, subs, topics))
        assert got == want, f"members {members}, subscriptions {subs}, partitions {topics}: got {got}"


@check("matches_real_consumers", points=3, hidden=True)
def matches_real_consumers(ns):
    """Three real consumers with partition.assignment.strategy=range on two topics got what range_assign predicts."""
    cluster = ns.cluster
    tag = uuid.uuid4().hex[:6]
    topics = {cluster.create_topic(f"ra-{tag}-a", partitions=5): 5, cluster.create_topic(f"ra-{tag}-b", partitions=2): 2}
    consumers = [cluster.consumer(f"ra-{tag}", partition_assignment_strategy="range", session_timeout_ms=6000)
                 for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe(list(topics))
        deadline, last, since = time.monotonic() + 60, None, None
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
            now = {c.memberid(): sorted((tp.topic, tp.partition) for tp in c.assignment()) for c in consumers}
            if now == last and all(now) and sum(len(v) for v in now.values()) == 7:
                since = since or time.monotonic()
                if time.monotonic() - since > 4:
                    break
            else:
                last, since = now, None
        members = sorted(now)
        got = _as_tuples(ns.range_assign(members, {m: sorted(topics) for m in members}, topics))
        assert got == now, f"real consumers received {now}, range_assign predicted {got}"
    finally:
        for c in consumers:
            c.close()
