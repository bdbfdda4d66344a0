"""labkit.assignors: documented examples, properties, and what real consumers received."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit import assignors as a
from labkit.assignors import TopicPartition as TP
from labkit.waiting import Deadline

SUBS2 = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
PARTS = {"t0": 3, "t1": 3}


def test_range_matches_the_java_docs_example():
    assert a.assign("range", ["C0", "C1"], SUBS2, PARTS) == {
        "C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)], "C1": [TP("t0", 2), TP("t1", 2)]}


def test_round_robin_matches_the_java_docs_example():
    assert a.assign("roundrobin", ["C0", "C1"], SUBS2, PARTS) == {
        "C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)], "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}


def test_more_members_than_partitions_leaves_some_idle():
    members = ["a", "b", "c", "d"]
    result = a.assign("range", members, {m: ["t"] for m in members}, {"t": 3})
    assert sorted(len(v) for v in result.values()) == [0, 1, 1, 1]


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(a.AssignorError, match="roundrobin"):
        a.assign("fastest", ["a"], {"a": ["t"]}, {"t": 1})


layouts = st.tuples(st.integers(1, 6), st.dictionaries(st.sampled_from(["t0", "t1", "t2"]), st.integers(1, 9),
                                                     min_size=1))


@given(layouts, st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]))
@settings(max_examples=60, deadline=None)
def test_every_partition_goes_to_exactly_one_subscribed_member(layout, strategy):
    n, parts = layout
    members = [f"m{i}" for i in range(n)]
    subs = {m: sorted(parts) for m in members}
    result = a.assign(strategy, members, subs, parts)
    owned = Counter(tp for tps in result.values() for tp in tps)
    assert set(owned) == {TP(t, p) for t in parts for p in range(parts[t])}
    assert max(owned.values()) == 1
    if strategy != "range":  # range balances per topic, not overall
        sizes = [len(v) for v in result.values()]
        assert max(sizes) - min(sizes) <= 1


@given(st.integers(2, 6), st.integers(1, 24))
@settings(max_examples=40, deadline=None)
def test_sticky_keeps_owners_when_a_member_leaves(n, count):
    members = [f"m{i}" for i in range(n)]
    parts = {"t": count}
    before = a.assign("sticky", members, {m: ["t"] for m in members}, parts)
    remaining = members[1:]
    after = a.assign("sticky", remaining, {m: ["t"] for m in remaining}, parts, previous=before)
    for m in remaining:
        assert set(before[m]) <= set(after[m]), "a surviving member lost a partition it had"


def test_cooperative_revokes_only_what_moves():
    members = ["m0", "m1"]
    before = a.assign("sticky", members, {m: ["t"] for m in members}, {"t": 6})
    revoked, final = a.cooperative_rebalance(members + ["m2"], {m: ["t"] for m in members + ["m2"]}, {"t": 6}, before)
    assert sum(len(v) for v in revoked.values()) == 2 and len(final["m2"]) == 2
    assert all(set(final[m]) <= set(before[m]) for m in members)


# ------------------------------------------------------------------ real consumers


def _real_assignment(cluster, topics, n, strategy, group):
    consumers = [cluster.consumer(group, partition_assignment_strategy=strategy, session_timeout_ms=6000,
                                  client_id=f"member-{i}") for i in range(n)]
    try:
        for c in consumers:
            c.subscribe(list(topics))
        deadline = Deadline(60)  # a quiet machine's seconds, as the stable spell below
        stable_since, last = None, None
        while not deadline.expired():
            for c in consumers:
                c.poll(0.05)
            now = {c.memberid(): sorted(TP(tp.topic, tp.partition) for tp in c.assignment()) for c in consumers}
            total = sum(len(v) for v in now.values())
            everyone = all(k for k in now) and len(now) == n and all(now.values())
            if now == last and total == sum(topics.values()) and everyone:
                stable_since = stable_since or Deadline(4)
                if stable_since.expired():
                    return now
            else:
                stable_since, last = None, now
        raise AssertionError(f"no stable assignment: {last}")
    finally:
        for c in consumers:
            c.close()


class _Topics(dict):
    """{topic: partitions} that subscribes by its keys."""

    def __iter__(self):
        return iter(self.keys())


@pytest.mark.integration
@pytest.mark.parametrize("strategy, n, layout", [
    ("range", 2, (3, 3)), ("range", 3, (5,)), ("roundrobin", 2, (3, 3)), ("roundrobin", 3, (5, 2)),
    ("cooperative-sticky", 3, (6,)),
])
def test_predictions_match_what_real_consumers_received(cluster, unique, strategy, n, layout):
    names = [cluster.create_topic(unique(f"assign{i}"), partitions=p) for i, p in enumerate(layout)]
    topics = _Topics({t: p for t, p in zip(names, layout)})
    got = _real_assignment(cluster, dict(topics), n, strategy, unique("group"))
    members = sorted(got)
    predicted = a.assign(strategy, members, {m: list(topics) for m in members}, dict(topics))
    if strategy == "cooperative-sticky":
        sizes = sorted(len(v) for v in got.values())
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == sum(layout)
        assert sorted(len(v) for v in predicted.values()) == sizes
    else:
        assert got == predicted
