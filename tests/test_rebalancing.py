"""Rebalances counted on a real cluster: eager vs cooperative, a slow member stalling an eager group, static
membership, group.protocol=consumer, and the group views read back from the broker."""

from __future__ import annotations

import time

import pytest

from labkit import groupviz
from labkit import operations as ops
from labkit.errors import LabkitError
from labkit.waiting import Wait
from labkit.workloads import Group

pytestmark = pytest.mark.integration

PARTITIONS = 6
QUIET = 3.0  # seconds an assignment must stay unchanged to count as settled


@pytest.fixture
def events_topic(cluster, unique):
    topic = cluster.create_topic(unique("rebalance"), partitions=PARTITIONS)
    producer = cluster.producer()
    for i in range(1200):
        producer.produce(topic, key=str(i), value=f"e{i:05d}")
    producer.flush(30)
    return topic


def test_a_group_is_read_while_its_coordinator_moves_back(fresh_cluster, unique):
    """Lesson 05 kills a group's coordinator and restarts it, and a restarted broker takes the leadership of its
    __consumer_offsets partitions back (within leader.imbalance.check.interval.seconds, 30 s here): then the
    broker the group reader's client knows as the group's coordinator answers NOT_COORDINATOR, and librdkafka keeps
    asking it. A fresh clone's lesson 05 stopped on that (read_group raised at once); asking again on the same
    client got NOT_COORDINATOR for 20 s. read_group now asks again on a new client: one call, right after."""
    cluster = fresh_cluster
    topic = cluster.create_topic(unique("moving"), partitions=3)
    group = Group(cluster, topic, unique("moving"))
    try:
        group.start_member("one", process_ms=5, session_timeout_ms=30000)  # stays a member while the group moves
        group.wait_settled(1, quiet=1.0)
        ops.elect_preferred(cluster, ["__consumer_offsets"])  # a no-op unless a broker fell behind at the start
        first = groupviz.read_group(cluster, group.group_id).coordinator  # the preferred replica: it takes it back
        cluster.kill_broker(first)
        interim = groupviz.read_group(cluster, group.group_id, timeout=60).coordinator  # the reader now knows it
        cluster.start_broker(first)
        cluster.wait_for_isr("__consumer_offsets", timeout=90)
        ops.elect_preferred(cluster, ["__consumer_offsets"])  # what the controller does within 30 s, now
        # Every broker's metadata shows the new leader now, but the old coordinator gives the group up a moment
        # later (its group coordinator resigns after the metadata update, seconds on a busy machine), answering as
        # its coordinator meanwhile: read until the preferred one answers. A read that keeps raising times out.
        def from_preferred():
            view = groupviz.read_group(cluster, group.group_id)
            return view if view.coordinator == first else None

        view = Wait(f"broker {first} to answer for the group", timeout=60, interval=0.5).until(from_preferred)
    finally:
        group.stop()
    assert interim not in (None, first), f"broker {interim} coordinated the group while broker {first} was dead"
    assert view.coordinator == first, f"read from broker {view.coordinator}; its preferred coordinator is {first}"
    assert [m.client_id for m in view.members] == ["one"], view.members


def test_cooperative_revokes_only_what_moves_eager_revokes_everything(cluster, events_topic, unique):
    groups = {s: Group(cluster, events_topic, unique(s)) for s in ("range", "cooperative-sticky")}
    try:
        for strategy, group in groups.items():
            for name in ("a", "b", "c"):
                group.start_member(name, process_ms=50, batch=10, partition_assignment_strategy=strategy)
        before = {s: g.wait_settled(3, quiet=QUIET) for s, g in groups.items()}
        joined = time.time()
        for strategy, group in groups.items():
            group.start_member("d", process_ms=50, batch=10, partition_assignment_strategy=strategy)
        after = {s: g.wait_settled(4, quiet=QUIET) for s, g in groups.items()}
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


def test_a_slow_member_stalls_an_eager_group_but_not_a_cooperative_one(cluster, events_topic, unique):
    """d joins while c is in the middle of a batch: eager a and b give up their partitions and own nothing until
    c is back in consume(); cooperative a and b keep theirs all along.

    c is frozen (SIGSTOP) from its first record until eager a and b have given up their partitions: on a busy
    machine starting d can take longer than c's whole batch, and a c that is back before the rebalance began
    stalls nothing. Frozen for seconds, it must stay in the group: its session timeout is 45 s (a member's is 6 s,
    and a c frozen longer than that is dropped, its partitions lost rather than given back)."""
    groups = {s: Group(cluster, events_topic, unique(s)) for s in ("range", "cooperative-sticky")}
    try:
        for strategy, group in groups.items():
            for name in ("a", "b"):
                group.start_member(name, batch=10, process_ms=20, partition_assignment_strategy=strategy)
        for group in groups.values():
            group.wait_settled(2, quiet=1.0)
        for strategy in ("cooperative-sticky", "range"):  # the cooperative join takes two rounds: first
            groups[strategy].start_member("c", batch=8, process_ms=1000, partition_assignment_strategy=strategy,
                                          session_timeout_ms=45_000)
            groups[strategy].wait_settled(3, quiet=0)  # c has its partitions: its 8 s batch has begun
            groups[strategy].pause_member("c")
        joined = time.time()
        for strategy, group in groups.items():
            group.start_member("d", batch=10, process_ms=20, partition_assignment_strategy=strategy)

        def eager_gave_up() -> bool:
            events = groups["range"].events()
            return all(any(e.member == m and e.kind == "revoke" and e.t >= joined for e in events) for m in "ab")

        Wait("eager a and b to give up their partitions for d", timeout=90, interval=0.25).until(eager_gave_up)
        for group in groups.values():
            group.resume_member("c")
        for group in groups.values():
            group.wait_settled(4, quiet=1.0)
        until = time.time()
    finally:
        for g in groups.values():
            g.stop()
    eager, coop = groups["range"].events(), groups["cooperative-sticky"].events()
    c_gave_back = [e.t for e in eager if e.member == "c" and e.kind == "revoke" and e.t >= joined]
    assert c_gave_back, f"eager c never gave its partitions back after d joined: {[e for e in eager if e.member == 'c']}"
    c_back = min(c_gave_back)
    stopped = {m: min(e.t for e in eager if e.member == m and e.kind == "revoke" and e.t >= joined) for m in "ab"}
    again = {m: min(e.t for e in eager if e.member == m and e.kind == "assign" and e.partitions and e.t >= joined)
             for m in "ab"}
    assert all(stopped[m] < c_back <= again[m] for m in "ab"), \
        f"eager a and b stopped at {stopped} and got partitions again at {again}; c came back at {c_back}"
    idle = {m: groupviz.idle_seconds(eager, m, stopped[m], again[m]) for m in "ab"}
    assert all(idle[m] == pytest.approx(again[m] - stopped[m]) for m in "ab"), \
        f"eager a and b owned partitions while waiting for c: idle {idle} s of {again} - {stopped}"
    assert all(groupviz.idle_seconds(coop, m, joined, until) == 0 for m in "ab"), "cooperative a and b stopped"


def test_static_member_restart_within_session_timeout_causes_no_rebalance(cluster, events_topic, unique):
    group = Group(cluster, events_topic, unique("static"))

    def start(name, restart=False):
        launch = group.restart_member if restart else group.start_member
        launch(name, process_ms=20, group_instance_id=f"{name}-{group.group_id}", session_timeout_ms=6000)

    try:
        for name in ("s1", "s2", "s3"):
            start(name)
        first = group.wait_settled(3, quiet=QUIET)
        quick = time.time()
        start("s3", restart=True)  # back as soon as it is dead, not once a new Python process has started
        again = group.wait_settled(3, quiet=QUIET)
        slow = time.time()
        group.crash_member("s3")
        # Gone for longer than session.timeout.ms: the coordinator removes s3 and the others rebalance. Wait for
        # that (their revocations), not for a guess at how long it takes on this machine.
        Wait("s1 and s2 to rebalance after s3 stayed away", timeout=60, interval=0.25).until(
            lambda: {"s1", "s2"} <= set(groupviz.revocations([e for e in group.events() if e.t >= slow])))
        start("s3")
        group.wait_settled(3, quiet=QUIET)
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
        group.wait_settled(3, quiet=QUIET)
        joined = time.time()
        group.start_member("k4", process_ms=20, group_protocol="consumer", group_remote_assignor="uniform")
        final = group.wait_settled(4, quiet=QUIET)
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
        group.wait_settled(2, quiet=QUIET)
        group.wait_processed(1200, timeout=60)
        # the last batch's commit follows its processing
        view = Wait("every processed record to be committed", timeout=30, interval=0.25).until(
            lambda: (lambda v: v if sum(groupviz.lag_bars(v).data[0].y) == 1200 else None)(
                groupviz.read_group(cluster, group.group_id)))
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
