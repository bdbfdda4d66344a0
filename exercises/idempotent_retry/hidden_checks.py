"""Hidden checks of idempotent_retry (the grader's only): a follower stalls at a moment, and for a time, chosen
now; the grader's producer runs with FIXED_CONFIG and the grader counts what the broker stored."""

from __future__ import annotations

import random
import time

from labkit.grading import check, sibling
from labkit.grading.harness import unique
from labkit.producing import produce_and_count

checks = sibling(__file__)


@check("no_duplicates_after_lost_acks", points=4, hidden=True)
def no_duplicates_after_lost_acks(ns):
    """With a follower stalled mid-stream (acknowledgements time out after 1.5 s, the producer retries),
    FIXED_CONFIG stores every record exactly once, and every record is acknowledged."""
    config = checks.effective_config(ns.FIXED_CONFIG, "FIXED_CONFIG")
    timeout = checks.as_int(config, "request.timeout.ms")
    assert timeout <= 1500, f"request.timeout.ms is {timeout}: the team needs failures detected within 1.5 s"
    cluster = ns.cluster
    rng = random.Random()
    topic = cluster.create_topic(unique("retry"), partitions=rng.randint(1, 2), replication_factor=3)
    state = cluster.describe_topic(topic)[0]
    follower = rng.choice([r for r in state.replicas if r != state.leader])
    stall_at, resume_at, stall = rng.randint(100, 200), rng.randint(300, 400), rng.uniform(4.0, 6.0)
    actions = {stall_at: lambda: cluster.pause_broker(follower),
               resume_at: lambda: (time.sleep(stall), cluster.resume_broker(follower))}
    count = produce_and_count(cluster, topic, count=resume_at + rng.randint(50, 150), pace=0.01, keyed=False,
                              actions=actions, **config)
    assert count.duplicates == 0, f"{count.duplicates} records stored twice"
    assert count.acked == count.sent == count.stored, \
        f"acknowledged {count.acked}, stored {count.stored} of {count.sent} ({dict(count.errors)})"
