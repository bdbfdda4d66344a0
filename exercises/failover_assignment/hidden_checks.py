"""Hidden checks of failover_assignment (the grader's only): the reference on random layouts, and a failover
and failback of member processes whose names and priorities are chosen now."""

from __future__ import annotations

import random
import time
import uuid

from labkit.grading import check, harness, sibling

checks = sibling(__file__)


def reference(members: dict[str, int], partitions: list) -> dict[str, list]:
    if not members:
        return {}
    active = sorted(members, key=lambda m: (-members[m], m))[0]
    return {m: sorted(partitions) if m == active else [] for m in members}


#: Task 3's statements about assign() (the notebook's STATEMENTS): true or false of the design. With assign() the
#: coordinator runs no rebalance for the work partitions (no on_revoke) and fences nobody: commits with generation -1 are accepted from any
#: consumer of the group id, so a replaced member that still runs can commit, and two members can consume at once
#: until the application's own liveness check (the lease group) notices. A Java ConsumerPartitionAssignor runs in
#: the group's rebalance, which brings membership, generations and revocation.
TRADE_OFFS = {"no_rebalance": True, "zombie_fenced": False, "own_detection": True, "overlap": True,
              "commits_refused": False, "assignor_protocol": True}


@check("assign_trade_offs", points=2, hidden=True)
def assign_trade_offs(ns):
    """Task 3: every statement about what assign() gives up judged right (all six, or no points)."""
    answers = ns.ANSWERS
    assert isinstance(answers, dict), f"ANSWERS should be a dict of statement -> True/False, not {type(answers).__name__}"
    missing = sorted(set(TRADE_OFFS) - set(answers))
    assert not missing, f"ANSWERS has no answer for {missing}"
    wrong_type = sorted(k for k in TRADE_OFFS if not isinstance(answers[k], bool))
    assert not wrong_type, f"answer True or False (not a string or a number) for {wrong_type}"
    right = sum(answers[k] == v for k, v in TRADE_OFFS.items())
    assert right == len(TRADE_OFFS), f"{right} of {len(TRADE_OFFS)} statements judged right"


@check("hidden_cases", points=2, hidden=True)
def hidden_cases(ns):
    """300 random member/priority/partition layouts (negative priorities and ties included) match the reference."""
    rng = random.Random()
    cases = []
    for _ in range(300):
        members = {f"m{rng.randint(0, 99):02d}": rng.randint(-3, 3) for _ in range(rng.randint(0, 6))}
        parts = list(dict.fromkeys((rng.choice("xyz"), rng.randint(0, 9)) for _ in range(rng.randint(0, 8))))
        cases.append((members, parts))
    answers = ns.failover_assign.many([(dict(m), list(p)) for m, p in cases])
    for (members, parts), got in zip(cases, answers):
        assert checks.normal(got) == reference(members, parts), f"members {members}, partitions {parts}: got {got}"


@check("failover_and_back_loses_nothing", points=4, hidden=True)
def failover_and_back_loses_nothing(ns):
    """Two member processes with names and priorities chosen now. Kill the active one mid-stream: the standby
    takes all partitions; bring it back: it takes them back; every record is processed at least once, and the
    standby processed nothing before the failover."""
    harness.attempted(ns, "failover_assign", "follow")
    cluster = ns.cluster
    rng = random.Random()
    tag = uuid.uuid4().hex[:6]
    active, standby = (f"node-{uuid.uuid4().hex[:4]}" for _ in range(2))
    high = rng.randint(-5, 50)
    low = high - rng.randint(1, 20)
    topic = cluster.create_topic(f"payments-{tag}", partitions=3)
    first = checks.produce(cluster, topic, 0, 400, tag)
    team = checks.Members(ns, topic)
    parts = [(topic, p) for p in range(3)]
    wrong = checks.Misassigned(team, lambda live: reference(live, parts))
    try:
        team.start(active, high)
        team.start(standby, low)
        team.wait(lambda: len(team.status(standby)["live"]) == 2, "the standby seeing the active member")
        crash_at = rng.randint(60, 200)
        team.wait(lambda: len(team.processed(active)) >= crash_at, "the active member processing", refute=wrong)
        assert not team.processed(standby), "the standby processed records while the active member was alive"
        team.kill(active)
        killed = time.time()
        second = checks.produce(cluster, topic, 400, 200, tag)
        team.wait(lambda: len(team.mine(standby)) == 3, "the standby taking over all 3 partitions",
                  timeout=checks.SESSION_TIMEOUT_MS / 1000 + 30, refute=wrong)
        assert team.assigned_after(standby, killed), "the standby never recorded taking partitions over"
        team.wait(lambda: set(first + second) <= set(team.processed(standby)) | set(team.processed(active)),
                  "every record processed after the failover", refute=wrong)
        team.start(active, high)
        third = checks.produce(cluster, topic, 600, 200, tag)
        team.wait(lambda: len(team.mine(active)) == 3 and team.mine(standby) == [],
                  "the active member taking its partitions back", refute=wrong)
        everything = set(first + second + third)
        team.wait(lambda: everything <= set(team.processed(active)) | set(team.processed(standby)),
                  "every record processed after the failback", refute=wrong)
    finally:
        team.stop()
