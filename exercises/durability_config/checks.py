"""Checks for durability_config: the learner's settings against scripted broker failures."""

from __future__ import annotations

import time
import uuid

from labkit.grading import check
from labkit.producing import produce_and_count


def _producer_config(ns) -> dict:
    config = dict(ns.PRODUCER_CONFIG)
    assert isinstance(config, dict), "PRODUCER_CONFIG must be a dict"
    return config


@check("acks_wait_for_the_isr", points=1, hint="Which acks value waits for every in-sync replica?")
def acks_wait_for_the_isr(ns):
    """The producer waits for all in-sync replicas."""
    acks = str(_producer_config(ns).get("acks", _producer_config(ns).get("request.required.acks", "")))
    assert acks in ("all", "-1"), f"acks is {acks!r}"


@check("two_copies_before_success", points=1,
       hint="min.insync.replicas is a topic (or broker) setting; with 3 replicas, 2 leaves room for one failure.")
def two_copies_before_success(ns):
    """The topic demands at least two in-sync copies, and has three replicas to lose one of."""
    assert int(ns.REPLICATION_FACTOR) >= 3, f"REPLICATION_FACTOR is {ns.REPLICATION_FACTOR}"
    min_isr = int(dict(ns.TOPIC_CONFIG).get("min.insync.replicas", 1))
    assert 2 <= min_isr < int(ns.REPLICATION_FACTOR), f"min.insync.replicas is {min_isr}"


@check("retries_do_not_duplicate", points=1, hint="Retries are safe when the producer is idempotent.")
def retries_do_not_duplicate(ns):
    """The producer is idempotent, so its retries during failovers store nothing twice."""
    value = str(_producer_config(ns).get("enable.idempotence", "false")).lower()
    assert value == "true", f"enable.idempotence is {value!r}"


@check("survives_the_failure_script", points=5, hidden=True)
def survives_the_failure_script(ns):
    """Kill the leader mid-stream, restart it, kill another broker, pause a third: nothing acknowledged is lost,
    nothing stored twice, and the producer keeps succeeding."""
    cluster = ns.cluster
    topic = cluster.create_topic(f"durable-{uuid.uuid4().hex[:6]}", partitions=3,
                                 replication_factor=int(ns.REPLICATION_FACTOR), config=dict(ns.TOPIC_CONFIG))
    first = cluster.describe_topic(topic)[0].leader
    others = [b.id for b in cluster.brokers if b.id != first]

    def restart_first_kill_second():
        cluster.start_broker(first)
        cluster.wait_for_isr(topic)
        cluster.kill_broker(others[0])

    def recover():
        cluster.start_broker(others[0])
        cluster.wait_for_isr(topic)

    config = {k.replace(".", "_"): v for k, v in _producer_config(ns).items()}
    config.setdefault("message_timeout_ms", 60000)
    count = produce_and_count(cluster, topic, count=600, pace=0.004, **config, actions={
        150: lambda: cluster.kill_broker(first), 300: restart_first_kill_second, 600: recover})
    time.sleep(1)
    assert count.lost == 0, f"{count.lost} acknowledged records were lost"
    assert count.duplicates == 0, f"{count.duplicates} records were stored twice"
    assert count.acked == count.sent, f"only {count.acked} of {count.sent} records were acknowledged"
