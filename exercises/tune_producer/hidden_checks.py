"""Hidden checks of tune_producer (the grader's only): record sizes and partition counts chosen now, and a
follower that freezes while the tuned producer sends."""

from __future__ import annotations

import random
import threading

from labkit import perf
from labkit.grading import check, sibling
from labkit.grading.harness import unique

checks = sibling(__file__)


@check("three_times_with_other_records", points=3, hidden=True)
def three_times_with_other_records(ns):
    """With record sizes, partition counts and a latency budget chosen at grade time (1–12 kB, 2–6 partitions,
    0–15 ms), the config fits the budget and is still at least 3× as fast as TEAM_CONFIG, nothing lost or
    stored twice."""
    rng = random.Random()
    tuned = checks.tuned_within(ns, checks.budget(rng))
    size, partitions = rng.randint(1000, 12000), rng.randint(2, 6)
    checks.assert_fast_and_complete(checks.race(ns.cluster, tuned, size, partitions), size)


@check("loses_nothing_when_a_follower_freezes", points=2, hidden=True)
def loses_nothing_when_a_follower_freezes(ns):
    """While a follower freezes for 2–4 s (acks=all writes wait for it until it leaves the ISR), every
    record sent with the config (for a budget chosen at grade time) is acknowledged and stored exactly once."""
    rng = random.Random()
    tuned = checks.tuned_within(ns, checks.budget(rng))
    cluster = ns.cluster
    topic = cluster.create_topic(unique("orders"), partitions=1, replication_factor=3)
    state = cluster.describe_topic(topic)[0]
    follower = rng.choice([r for r in state.replicas if r != state.leader])
    size = rng.randint(1000, 8000)
    count = int(20e6 / size)
    values = perf.order_documents(size, seed=rng.randrange(10**6))
    # Frozen before the first record, not a moment after the producer starts: on a busy machine a fast config
    # sent everything before a timer fired, and a config that drops records after a second went unnoticed.
    cluster.pause_broker(follower)
    resume = threading.Timer(rng.uniform(2.0, 4.0), cluster.resume_broker, args=(follower,))
    resume.start()
    try:
        result = perf.python_producer(cluster, topic, count, size, config=tuned, values=values)
    finally:
        resume.join()
        if any(b.id == follower and b.state == "paused" for b in cluster.brokers):
            cluster.resume_broker(follower)
    assert result.failed == 0, f"{result.failed} of {count} records were not acknowledged"
    held = checks.stored(cluster, topic)
    assert held == count, f"the topic holds {held} records, {count} were sent (lost or stored twice)"
