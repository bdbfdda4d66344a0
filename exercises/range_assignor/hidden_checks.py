"""Hidden checks of range_assignor (the grader's only): random layouts, and a real consumer group."""

from __future__ import annotations

import random

from labkit.grading import GraderFault, check, sibling
from labkit.grading.harness import unique
from labkit.waiting import Deadline

checks = sibling(__file__)


def _layout(rng: random.Random):
    members = [f"member-{rng.randint(0, 999):03d}-{i}" for i in range(rng.randint(1, 6))]
    rng.shuffle(members)
    topics = {f"topic-{rng.choice('abcdefgh')}{i}": rng.randint(1, 12) for i in range(rng.randint(1, 4))}
    subs = {m: rng.sample(sorted(topics), rng.randint(1, len(topics))) for m in members}
    return members, subs, topics


@check("hidden_layouts", points=4, hidden=True)
def hidden_layouts(ns):
    """300 random layouts (members in any order, uneven subscriptions, partition counts) match the reference
    range assignor."""
    rng = random.Random()
    layouts = [_layout(rng) for _ in range(300)]
    for (members, subs, topics), got in zip(layouts, ns.range_assign.many(layouts)):
        want = checks.reference(members, subs, topics)
        assert checks.as_tuples(got) == want, \
            f"members {members}, subscriptions {subs}, partitions {topics}: got {got}, range gives {want}"


@check("matches_real_consumers", points=3, hidden=True)
def matches_real_consumers(ns):
    """Real consumers with partition.assignment.strategy=range (two to four of them, subscribed to different
    topics) got what range_assign predicts for their member ids."""
    ns.range_assign(["probe"], {"probe": ["t"]}, {"t": 1})  # not attempted yet: say so before starting a group
    cluster = ns.cluster
    rng = random.Random()
    tag = unique("ra")
    topics = {}
    # Built so that no shortcut passes by chance (the random layouts of hidden_layouts cover the rest): every topic
    # has at least as many partitions as there are members, everyone reads the first topic, the first member
    # reads every topic and the second member not all of them. Then giving everyone every topic hands the second
    # member a partition it never subscribed to, and members in any order but sorted change the first topic's ranges.
    for name in "abc"[: rng.randint(2, 3)]:
        n = rng.randint(4, 7)
        topics[cluster.create_topic(f"{tag}-{name}", partitions=n)] = n
    names = sorted(topics)
    subscriptions = [[names[0]] + rng.sample(names[1:], rng.randint(0, len(names) - 1))
                     for _ in range(rng.randint(2, 4))]
    subscriptions[0] = names
    subscriptions[1] = [names[0]] + rng.sample(names[1:], rng.randint(0, len(names) - 2))
    expected = sum(topics.values())
    consumers = [cluster.consumer(tag, partition_assignment_strategy="range", session_timeout_ms=6000)
                 for _ in subscriptions]
    try:
        for c, subscribed in zip(consumers, subscriptions):
            c.subscribe(subscribed)
        deadline, last, since, now = Deadline(90), None, None, {}
        while not deadline.expired():
            for c in consumers:
                c.poll(0.05)
            now = {c.memberid(): sorted((tp.topic, tp.partition) for tp in c.assignment()) for c in consumers}
            settled = all(now) and len(now) == len(consumers) and sum(len(v) for v in now.values()) == expected
            if settled and now == last:
                since = since or Deadline(3)  # stable for 3 of a quiet machine's seconds
                if since.expired():
                    break
            else:
                last, since = now, None
        else:
            # The consumers are the grader's own, started before the learner's function is called: not the learner's.
            raise GraderFault(f"the grader's consumer group did not settle within {deadline} (last assignment {now})")
        subs = {c.memberid(): subscribed for c, subscribed in zip(consumers, subscriptions)}
        members = sorted(subs)
        while members == sorted(members):  # never in the order range sorts them into: unsorted must not pass
            rng.shuffle(members)
        got = checks.as_tuples(ns.range_assign(members, subs, topics))
        assert got == now, f"real consumers subscribed to {subs} received {now}, range_assign predicted {got}"
    finally:
        for c in consumers:
            c.close()
