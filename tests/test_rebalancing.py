"""Rebalances counted on a real cluster: eager vs cooperative, static membership, group.protocol=consumer,
and the group views read back from the broker."""

from __future__ import annotations

import time

import pytest

from labkit import groupviz
from labkit.errors import LabkitError
from labkit.workloads import Group

pytestmark = pytest.mark.integration

PARTITIONS = 6


def settled(group: Group, members: int, partitions: int = PARTITIONS, timeout: float = 60, quiet: float = 3.0):
    """The assignment once every member reports one covering every partition, unchanged for ``quiet`` s."""
    last, since, deadline = None, 0.0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = group.assignment()
        complete = (len(now) == members and all(m.status_file.exists() for m in group.members.values() if m.alive)
                    and sum(len(v) for v in now.values()) == partitions)
        if complete and now == last:
            if time.monotonic() - since >= quiet:
                return now
        else:
            last, since = now, time.monotonic()
        time.sleep(0.2)
    raise AssertionError(f"group {group.group_id} did not settle: {group.assignment()}")


@pytest.fixture
def events_topic(cluster, unique):
    topic = cluster.create_topic(unique("rebalance"), partitions=PARTITIONS)
    producer = cluster.producer()
    for i in range(1200):
        producer.produce(topic, key=str(i), value=f"e{i:05d}")
    producer.flush(30)
    return topic


def test_cooperative_revokes_only_what_moves_eager_revokes_everything(cluster, events_topic, unique):
    groups = {s: Group(cluster, events_topic, unique(s)) for s in ("range", "cooperative-sticky")}
    try:
        for strategy, group in groups.items():
            for name in ("a", "b", "c"):
                group.start_member(name, process_ms=50, batch=10, partition_assignment_strategy=strategy)
        before = {s: settled(g, 3) for s, g in groups.items()}
        joined = time.time()
        for strategy, group in groups.items():
            group.start_member("d", process_ms=50, batch=10, partition_assignment_strategy=strategy)
        after = {s: settled(g, 4) for s, g in groups.items()}
        until = time.time()
    finally:
        for g in groups.values():
            g.stop()
    eager = groupviz.revocations(groups["range"].events(), since=joined)
    coop = groupviz.revocations(groups["cooperative-sticky"].events(), since=joined)
    assert all(eager[m] == len(before["range"][m]) == 2 for m in "abc"), f"eager revoked {eager}"
    assert sum(coop.values()) < sum(eager.values()), f"cooperative {coop} vs eager {eager}"
    kept = [m for m in "abc" if set(before["cooperative-sticky"][m]) <= set(after["cooperative-sticky"][m])]
    assert kept and all(coop[m] == 0 for m in kept), f"kept {kept}, revoked {coop}"
    moved = sum(coop.values())
    assert moved == len(after["cooperative-sticky"]["d"]), "what d got is exactly what the others revoked"
    gaps = groupviz.unowned_seconds(groups["cooperative-sticky"].events(), joined, until)
    assert sum(1 for s in gaps.values() if s > 0) == moved, f"only moved partitions paused: {gaps}"


def test_static_member_restart_within_session_timeout_causes_no_rebalance(cluster, events_topic, unique):
    group = Group(cluster, events_topic, unique("static"))

    def start(name):
        group.start_member(name, process_ms=20, group_instance_id=f"{name}-{group.group_id}", session_timeout_ms=6000)

    try:
        for name in ("s1", "s2", "s3"):
            start(name)
        first = settled(group, 3)
        quick = time.time()
        group.crash_member("s3")
        start("s3")
        again = settled(group, 3)
        slow = time.time()
        group.crash_member("s3")
        time.sleep(9)  # longer than session.timeout.ms
        start("s3")
        settled(group, 3)
    finally:
        group.stop()
    events = group.events()
    in_quick = groupviz.revocations([e for e in events if quick <= e.t < slow])
    in_slow = groupviz.revocations([e for e in events if e.t >= slow])
    assert in_quick.get("s1", 0) == in_quick.get("s2", 0) == 0, f"a quick restart revoked {in_quick}"
    assert again["s3"] == first["s3"], "the restarted static member got its own partitions back"
    assert in_slow["s1"] > 0 and in_slow["s2"] > 0, f"a slow restart must rebalance the others: {in_slow}"


def test_broker_side_protocol_assigns_every_partition_once(cluster, events_topic, unique):
    group = Group(cluster, events_topic, unique("kip848"))
    with pytest.raises(LabkitError, match="broker owns session.timeout.ms"):
        group.start_member("x", group_protocol="consumer", session_timeout_ms=6000)
    try:
        for name in ("k1", "k2", "k3"):
            group.start_member(name, process_ms=20, group_protocol="consumer", group_remote_assignor="uniform")
        settled(group, 3)
        joined = time.time()
        group.start_member("k4", process_ms=20, group_protocol="consumer", group_remote_assignor="uniform")
        final = settled(group, 4)
        view = groupviz.read_group(cluster, group.group_id)
        state = cluster.tool("kafka-consumer-groups", "--describe", "--group", group.group_id, "--state").lines
    finally:
        group.stop()
    owned = sorted(tp for parts in final.values() for tp in parts)
    assert owned == [(events_topic, p) for p in range(PARTITIONS)], f"got {final}"
    revoked = groupviz.revocations(group.events(), since=joined)
    assert 0 < sum(revoked.values()) < PARTITIONS, f"incremental: only moved partitions revoked, got {revoked}"
    assert groupviz.assignment_of(view) == {m: sorted(p) for m, p in final.items()}, "the broker agrees"
    assert any(group.group_id in line and "uniform" in line for line in state), state


def test_group_views_read_a_real_group(cluster, events_topic, unique):
    group = Group(cluster, events_topic, unique("viewed"))
    try:
        group.start_member("one", process_ms=0.5)
        group.start_member("two", process_ms=0.5)
        settled(group, 2)
        group.wait_processed(1200, timeout=60)
        time.sleep(1.5)  # the last batch's commit
        view = groupviz.read_group(cluster, group.group_id)
    finally:
        group.stop()
    heat = groupviz.assignment_heatmap(view, partitions=[(events_topic, p) for p in range(PARTITIONS)])
    assert sum(row.count("●") for row in map(list, heat.data[0].text)) == PARTITIONS
    lag = groupviz.lag_bars(view)
    assert sum(lag.data[0].y) == 1200 and sum(lag.data[1].y) == 0, "all 1200 committed, no lag"
    timeline = groupviz.rebalance_timeline(group.events())
    assert {t.name for t in timeline.data} == {"one", "two"}
    with pytest.raises(LabkitError, match="could not be read"):
        groupviz.read_group(cluster, unique("never-used"))
