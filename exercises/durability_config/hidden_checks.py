"""Hidden checks of durability_config (the grader's only): a longer failure script, its partition, victims and
moments chosen now."""

from __future__ import annotations

import random

from labkit.grading import check, sibling
from labkit.producing import produce_and_count

checks = sibling(__file__)


@check("survives_the_failure_script", points=5, hidden=True)
def survives_the_failure_script(ns):
    """The followers of one partition freeze for a moment while its leader takes writes, then that leader is
    killed (the followers take over) and restarted later; then another broker is killed and brought back.
    Nothing acknowledged is lost, nothing stored twice, and every record is acknowledged in the end."""
    config = checks.producer_settings(ns)
    cluster = ns.cluster
    rng = random.Random()
    topic = checks.create_topic(ns, "durable")
    p = rng.randrange(3)
    state = cluster.describe_topic(topic)[p]
    leader = state.leader
    followers = [r for r in state.replicas if r != leader]
    second = rng.choice([b.id for b in cluster.brokers if b.id != leader])
    freeze = rng.randint(80, 120)
    crash = freeze + rng.randint(30, 50)
    swap = rng.randint(280, 320)
    total = rng.randint(550, 650)

    def followers_freeze():
        for f in followers:
            cluster.pause_broker(f)

    def leader_crashes():  # after what the leader acknowledged alone reached the producer (settle_before)
        cluster.kill_broker(leader)
        for f in followers:
            cluster.resume_broker(f)

    def restart_leader_kill_second():
        cluster.start_broker(leader)
        cluster.wait_for_isr(topic, timeout=90)
        cluster.kill_broker(second)

    def recover():
        cluster.start_broker(second)
        cluster.wait_for_isr(topic, timeout=90)

    try:
        count = produce_and_count(cluster, topic, count=total, pace=0.004, **config, settle_before=[crash], actions={
            freeze: followers_freeze, crash: leader_crashes, swap: restart_leader_kill_second, total: recover})
    finally:
        checks.restore(cluster)
    checks.assert_nothing_lost(count)
