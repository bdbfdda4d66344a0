"""Checks for drain_broker: the learner's drain plan, read as data, and their drain run on a live cluster.

The learner writes two functions (see the notebook):

* ``drain_plan(layout, racks, broker)`` -- pure: the cluster's partitions ``[topic, partition, replicas]``
  and each broker's rack -> the new replica lists (Kafka's reassignment format) that move every replica
  off ``broker``;
* ``drain(cluster, broker, throttle)`` -- the calls: the plan run as a reassignment within ``throttle``
  bytes/s, the throttle removed, a preferred leader election.

The plan checks call ``drain_plan`` on layouts the checks choose and judge the answer here. The drill
(:func:`drill`) runs where the check runs -- the grader's process while grading -- on ``ns.cluster``
(four brokers in three racks): it lays out topics with replicas on broker 4, fills them, starts an
``acks=all`` producer and a consumer of its own, watches every broker's throttle configs from a thread,
and runs the learner's ``drain`` in their kernel (the task :func:`run_drain`, given only the bootstrap
address). The verdict comes from what the brokers report afterwards and what the producer and consumer
counted.
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from labkit import operations as ops
from labkit import perf
from labkit.grading import Rules, check
from labkit.grading.harness import attempted, unique
from labkit.producing import Traffic
from labkit.waiting import Wait

CLUSTER = "four-brokers-racks"
#: The notebook drains the grader's own cluster while graded.
SHARE_CLUSTER = True
#: No module of the lab holds the plan; Kafka's own --generate is allowed but moves more than it may.
RULES = Rules()

BROKER = 4
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a"}
#: Layouts the visible checks hand to drain_plan: [topic, partition, replicas].
SAMPLE = [["orders", 0, [4, 2, 3]], ["orders", 1, [1, 4, 2]], ["orders", 2, [2, 3, 4]], ["orders", 3, [3, 1, 2]],
          ["orders", 4, [4, 3, 1]], ["orders", 5, [2, 4, 3]], ["payments", 0, [4, 1]], ["payments", 1, [2, 4]],
          ["payments", 2, [3, 2]], ["audit", 0, [4]], ["__consumer_offsets", 0, [1, 4, 3]]]


# ---------------------------------------------------------------- the plan, judged as data
def plan_of(ns: Any, layout: list, racks: dict, broker: int = BROKER) -> dict[tuple[str, int], list[int]]:
    """The learner's plan for ``layout`` as {(topic, partition): replicas} for every partition (unchanged ones too)."""
    answer = ns.drain_plan(layout, racks, broker)
    assert isinstance(answer, list), f"return a list of {{topic, partition, replicas}}, not {type(answer).__name__}"
    new = {(t, p): list(r) for t, p, r in layout}
    for row in answer:
        assert isinstance(row, dict) and {"topic", "partition", "replicas"} <= set(row), \
            f"each entry is {{'topic': ..., 'partition': ..., 'replicas': [...]}}, not {row!r}"
        key = (row["topic"], int(row["partition"]))
        assert key in new, f"{key[0]}-{key[1]} is not a partition of the layout"
        new[key] = [int(r) for r in row["replicas"]]
    return new


def minimal_problems(layout: list, new: dict, broker: int) -> list[str]:
    """What moves beyond broker ``broker``'s replicas (each partition may only swap that broker for one other)."""
    problems = []
    for t, p, replicas in layout:
        before, after = set(replicas), set(new[(t, p)])
        if broker in after:
            problems.append(f"{t}-{p} still has broker {broker}: {new[(t, p)]}")
        elif broker not in before and after != before:
            problems.append(f"{t}-{p} did not use broker {broker} but moves: {replicas} -> {new[(t, p)]}")
        elif broker in before and len(after - before) != 1:
            problems.append(f"{t}-{p} moves more than broker {broker}'s replica: {replicas} -> {new[(t, p)]}")
    return problems


def best_spread(replicas: list, racks: dict, broker: int) -> int:
    """The most racks ``replicas`` can span once ``broker`` in it is replaced by one broker not in it yet."""
    keep = [r for r in replicas if r != broker]
    if len(keep) == len(replicas):
        return len({racks[r] for r in replicas})
    spares = [b for b in racks if b != broker and b not in keep]
    return max((len({racks[r] for r in keep} | {racks[b]}) for b in spares), default=0)


def shape_problems(layout: list, new: dict, racks: dict, broker: int = BROKER) -> list[str]:
    """Replication factor, duplicates, unknown brokers, and the rack spread: never fewer racks than before,
    unless no broker left in the cluster could keep it (then as many as can be)."""
    problems = []
    for t, p, replicas in layout:
        after = new[(t, p)]
        wanted = min(len({racks[r] for r in replicas}), best_spread(replicas, racks, broker))
        if len(after) != len(replicas) or len(set(after)) != len(after):
            problems.append(f"{t}-{p}: {replicas} -> {after} (replication factor {len(replicas)}, each broker once)")
        elif any(r not in racks for r in after):
            problems.append(f"{t}-{p}: {after} names a broker the cluster does not have")
        elif len({racks[r] for r in after}) < wanted:
            problems.append(f"{t}-{p}: {replicas} -> {after} spans {len({racks[r] for r in after})} racks, "
                            f"{wanted} are possible")
    return problems


def leader_spread(new: dict, racks: dict, broker: int) -> int:
    """Most minus fewest partitions any remaining broker is the preferred leader of."""
    leads = Counter(r[0] for r in new.values() if r)
    counts = [leads.get(b, 0) for b in racks if b != broker]
    return max(counts) - min(counts)


@check("plan_moves_only_the_brokers_replicas", points=2,
       hint="Each partition on the broker swaps that one replica for another broker; every other replica stays.")
def plan_moves_only_the_brokers_replicas(ns):
    """drain_plan takes broker 4 out of every partition it is in, each replaced by exactly one other broker, and
    moves no other replica (reordering a partition's replicas moves no data and is allowed)."""
    problems = minimal_problems(SAMPLE, plan_of(ns, SAMPLE, RACKS), BROKER)
    assert not problems, "; ".join(problems[:4])


@check("plan_keeps_replication_factor_and_racks", points=2,
       hint="Same number of replicas, each broker once, and pick the new broker so no partition loses a rack.")
def plan_keeps_replication_factor_and_racks(ns):
    """Every partition keeps its replication factor (distinct brokers that exist) and spans at least as many
    racks as before."""
    problems = shape_problems(SAMPLE, plan_of(ns, SAMPLE, RACKS), RACKS)
    assert not problems, "; ".join(problems[:4])


@check("plan_spreads_preferred_leaders", points=1,
       hint="The first replica is the preferred leader: reorder replicas so brokers 1-3 lead about as many each.")
def plan_spreads_preferred_leaders(ns):
    """After the plan, brokers 1-3 are each the preferred leader (first replica) of about as many partitions:
    at most one apart."""
    spread = leader_spread(plan_of(ns, SAMPLE, RACKS), RACKS, BROKER)
    assert spread <= 1, f"preferred leaders are {spread} apart between the brokers that stay"


# ---------------------------------------------------------------- the drill, on a live cluster
def run_drain(user, bootstrap, broker, throttle):
    """A task: the learner's drain() in their kernel, on the cluster at ``bootstrap`` (the grader's)."""
    import labkit

    user["drain"](labkit.connect(bootstrap), broker, throttle)
    return True


@dataclass
class Drill:
    layout: list
    throttle: int
    moved_bytes: int
    seconds: float
    receivers: set[int]
    seen_rates: list[tuple[int, str, int]]
    after: list
    ids_before: dict[str, str]
    ids_after: dict[str, str]
    traffic: Any
    leftover_throttles: dict[str, dict[str, str]]
    error: str = ""
    racks: dict[int, str] = field(default_factory=dict)


_DRILLS: "weakref.WeakKeyDictionary[Any, Drill]" = weakref.WeakKeyDictionary()


def topic_ids(cluster: Any, topics: list[str]) -> dict[str, str]:
    from confluent_kafka import TopicCollection

    futures = cluster.admin().describe_topics(TopicCollection(topics), request_timeout=15)
    return {name: str(f.result(timeout=20).topic_id) for name, f in futures.items()}


def lay_out(cluster: Any, rng: random.Random, topics: list[tuple[str, int, int]]) -> list[str]:
    """Topics with replicas placed by ``rng`` (broker 4 in at least half the partitions), 0.6 MB per partition."""
    from confluent_kafka.admin import NewTopic

    names = []
    for base, partitions, rf in topics:
        name = unique(base)
        assignment = [rng.sample([1, 2, 3, 4], rf) for _ in range(partitions)]
        for replicas in assignment[: max(1, partitions // 2)]:
            if BROKER not in replicas:
                replicas[rng.randrange(rf)] = BROKER
        for f in cluster.admin().create_topics([NewTopic(name, partitions, replica_assignment=assignment,
                                                         config={"min.insync.replicas": "1"})]).values():
            f.result(timeout=30)
        cluster.wait_for_isr(name)
        perf.python_producer(cluster, name, 600 * partitions, 1000, acks="1")
        names.append(name)
    return names


def drill(ns: Any, rng: random.Random, topics: list[tuple[str, int, int]], throttle: int) -> Drill:
    """Lay out ``topics``, run the learner's drain of broker 4 with traffic flowing and the throttles watched."""
    if ns in _DRILLS:
        return _DRILLS[ns]
    attempted(ns, "drain_plan", "drain")
    cluster = ns.cluster
    names = lay_out(cluster, rng, topics)
    ids_before = topic_ids(cluster, names)
    # allow_auto_create_topics off: a topic the learner's code deletes stays deleted (the brokers auto-create
    # topics, and a producer asking for the deleted topic's metadata would bring it back within a second)
    traffic = Traffic(cluster, names[0], rate=100, allow_auto_create_topics=False).start()
    # Records flowing both ways before the drain starts: the group's __consumer_offsets exists (on broker 4 too).
    Wait("the drill's producer and consumer to be running", timeout=60, interval=0.2).until(
        lambda: traffic.acked > 0 and traffic.consumed > 0)
    layout = [[p.topic, p.partition, list(p.replicas)] for p in ops.partitions(cluster, internal=True)]
    sizes = ops.replica_bytes(cluster)
    on_broker = {(t, p): sizes.get((BROKER, t, p), 0) for t, p, r in layout if BROKER in r}
    seen: list[tuple[int, str, int]] = []
    stop = threading.Event()
    watcher_admin = cluster.admin_for()

    def watch() -> None:
        from labkit.admin import describe_configs

        while not stop.is_set():
            for b in (1, 2, 3, 4):
                try:
                    found = describe_configs(watcher_admin, "broker", str(b), timeout=3)
                except Exception:  # noqa: BLE001 - a broker busy or gone for a moment: look again
                    continue
                for name in ops.BROKER_THROTTLES:
                    value = found.get(name)
                    if value and value != "9223372036854775807":
                        seen.append((b, name, int(value)))
            stop.wait(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    t0 = time.monotonic()
    error = ""
    try:
        ns.run(run_drain, cluster.bootstrap_servers, BROKER, throttle, timeout=420)
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's code failed: judged below, with the reason
        error = f"drain() raised {type(exc).__name__}: {exc}"
    seconds = time.monotonic() - t0
    stop.set()
    thread.join(10)
    counted = traffic.stop()
    after = ops.partitions(cluster, internal=True)
    alive = {t for t, _, _ in layout} & {p.topic for p in after}
    new_place = {(p.topic, p.partition): set(p.replicas) for p in after}
    receivers = set()                     # brokers that got a replica of a partition broker 4 held
    for t, p, replicas in layout:
        if (t, p) in on_broker and (t, p) in new_place:
            receivers |= new_place[(t, p)] - set(replicas)
    result = Drill(layout, throttle, sum(on_broker.values()), seconds, receivers, seen, after, ids_before,
                   topic_ids(cluster, [n for n in names if n in alive]), counted, ops.throttles(cluster), error,
                   ops.racks(cluster))
    _DRILLS[ns] = result
    return result


def assert_drained(d: Drill) -> None:
    """Broker 4 empty, every partition fully replicated with its replication factor and racks, nothing lost."""
    assert not d.error, d.error
    assert d.ids_after == d.ids_before, \
        f"topics were deleted and created again (their ids changed: {sorted(set(d.ids_before) - set(d.ids_after) or d.ids_before)})"
    now = {(p.topic, p.partition): p for p in d.after}
    left = [f"{p.topic}-{p.partition}" for p in d.after if BROKER in p.replicas]
    assert not left, f"broker {BROKER} still holds {len(left)} replicas: {left[:5]}"
    short = [f"{p.topic}-{p.partition}" for p in d.after if set(p.isr) != set(p.replicas)]
    assert not short, f"under-replicated partitions: {short[:5]}"
    problems = shape_problems([x for x in d.layout if tuple(x[:2]) in now],
                              {(t, p): list(now[(t, p)].replicas) for t, p, _ in d.layout if (t, p) in now}, d.racks)
    assert not problems, "; ".join(problems[:4])
    assert d.traffic.lost == 0, f"{d.traffic.lost} acknowledged records were lost while draining"
    assert d.traffic.failed == 0, f"{d.traffic.failed} records could not be written while draining"


def assert_throttled(d: Drill) -> None:
    """The copy ran under a throttle no higher than asked, no faster than it allows, and none is left."""
    assert not d.error, d.error
    assert d.seen_rates, "no broker had a replication throttle while the replicas moved (--throttle / reassign(throttle=))"
    too_high = {(b, v) for b, _, v in d.seen_rates if v > d.throttle}
    assert not too_high, f"throttles above the {d.throttle:,} B/s asked for: {sorted(too_high)[:3]}"
    limit = 1.5 * d.throttle * max(len(d.receivers), 1) * d.seconds + 1_000_000
    assert d.moved_bytes <= limit, (f"{d.moved_bytes / 1e6:.1f} MB moved in {d.seconds:.1f} s: faster than "
                                    f"{d.throttle / 1e6:.1f} MB/s per receiving broker allows")
    left = {k: v for k, v in d.leftover_throttles.items() if v}
    assert not left, f"throttles still set after drain() returned: {dict(list(left.items())[:3])}"


def assert_leaders(d: Drill) -> None:
    """Every partition led by its preferred replica, broker 4 leading nothing, preferred leaders spread."""
    assert not d.error, d.error
    off = [f"{p.topic}-{p.partition}" for p in d.after if p.replicas and p.leader != p.replicas[0]]
    assert not off, f"not led by their preferred replica: {off[:5]} (a preferred leader election)"
    spread = leader_spread({(p.topic, p.partition): list(p.replicas) for p in d.after}, d.racks, BROKER)
    assert spread <= 2, f"preferred leaders are {spread} apart between the brokers that stay"


VISIBLE_TOPICS = [("orders", 6, 3), ("payments", 4, 2)]


def visible_drill(ns: Any) -> Drill:
    return drill(ns, random.Random(1313), VISIBLE_TOPICS, throttle=3_000_000)


@check("drains_the_live_cluster", points=4,
       hint="Every partition of every topic, internal ones too; reassign, then wait until it is complete.")
def drains_the_live_cluster(ns):
    """On a cluster with traffic flowing, drain(cluster, 4, throttle) leaves broker 4 without a replica, every
    partition fully in sync with its replication factor and rack spread, the same topics (ids unchanged), and no
    acknowledged record lost."""
    assert_drained(visible_drill(ns))


@check("copies_within_the_throttle_and_removes_it", points=2,
       hint="kafka-reassign-partitions --throttle (ops.reassign(..., throttle=)), then --verify (finish()).")
def copies_within_the_throttle_and_removes_it(ns):
    """While replicas move the brokers are throttled at no more than the rate given (and the copy goes no
    faster); once drain() returns no broker or topic has a replication throttle left."""
    assert_throttled(visible_drill(ns))


@check("leaders_rebalanced", points=1, hint="A preferred leader election once the replicas have moved.")
def leaders_rebalanced(ns):
    """After drain(), every partition is led by its first replica and the preferred leaders are spread over
    brokers 1-3."""
    assert_leaders(visible_drill(ns))
