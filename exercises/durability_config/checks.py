"""Checks for durability_config: the learner's settings against scripted broker failures.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``. The settings are
plain data: the grader reads ``PRODUCER_CONFIG`` as librdkafka would (aliases, underscores for
dots, the last setting wins), creates the topic and runs the producer in its own process, on its
own cluster, breaks brokers itself, and counts what the broker kept.
"""

from __future__ import annotations

from typing import Any

from labkit.clientconfig import effective_config  # a config as librdkafka applies it (also for hidden checks)
from labkit.grading import Rules, check
from labkit.grading.harness import unique
from labkit.producing import ProduceCount, produce_and_count

#: No module of the lab holds this answer; the generic rules (no dynamic imports, no grading machinery) apply.
RULES = Rules()
CLUSTER = "three-brokers"
#: The notebook kills brokers itself: it runs on a cluster of its own while graded.
SHARE_CLUSTER = False

#: librdkafka's defaults for what the checks read.
DEFAULTS = {"acks": "all", "enable.idempotence": False}
#: How long the grader's producer keeps trying a record, unless PRODUCER_CONFIG says (librdkafka's default: 300 s).
GRADER_MESSAGE_TIMEOUT_MS = 60000


def setting(config: dict[str, Any], name: str) -> Any:
    return config.get(name, DEFAULTS.get(name))


def is_true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "t", "1")


def topic_settings(ns) -> tuple[int, dict[str, str]]:
    """REPLICATION_FACTOR and TOPIC_CONFIG, checked to be what create_topic takes."""
    rf = ns.REPLICATION_FACTOR
    assert isinstance(rf, int) and not isinstance(rf, bool), f"REPLICATION_FACTOR should be an int, not {rf!r}"
    config = ns.TOPIC_CONFIG
    assert isinstance(config, dict), f"TOPIC_CONFIG must be a dict of topic settings, not {type(config).__name__}"
    out = {}
    for key, value in config.items():
        assert isinstance(key, str) and isinstance(value, (str, int, bool)), \
            f"TOPIC_CONFIG[{key!r}] = {value!r}: topic settings are names with string (or number) values"
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return rf, out


def producer_settings(ns) -> dict[str, Any]:
    """PRODUCER_CONFIG as the grader's producer applies it (with the grader's message timeout unless it says)."""
    config = effective_config(ns.PRODUCER_CONFIG, "PRODUCER_CONFIG")
    config.setdefault("message.timeout.ms", GRADER_MESSAGE_TIMEOUT_MS)
    return config


def create_topic(ns, name: str) -> str:
    rf, config = topic_settings(ns)
    return ns.cluster.create_topic(unique(name), partitions=3, replication_factor=rf, config=config)


def restore(cluster) -> None:
    """Every broker running again (after a failure script that stopped half-way)."""
    for broker in cluster.brokers:
        if broker.state == "paused":
            cluster.resume_broker(broker.id)
        elif broker.state in ("killed", "stopped"):
            cluster.start_broker(broker.id)


def assert_nothing_lost(count: ProduceCount) -> None:
    assert count.lost == 0, f"{count.lost} acknowledged records were lost"
    assert count.duplicates == 0, f"{count.duplicates} records were stored twice"
    assert count.acked == count.sent, \
        f"only {count.acked} of {count.sent} records were acknowledged ({dict(count.errors)})"


@check("acks_wait_for_the_isr", points=1,
       hint="Lesson 04, 'acks and min.insync.replicas': which setting acknowledged records that were on one disk "
            "only (the 'stored' column with two brokers down)?")
def acks_wait_for_the_isr(ns):
    """The producer waits for all in-sync replicas."""
    acks = str(setting(effective_config(ns.PRODUCER_CONFIG, "PRODUCER_CONFIG"), "acks")).strip().lower()
    assert acks in ("all", "-1"), f"acks is {acks!r}"


@check("two_copies_before_success", points=1,
       hint="Lesson 04, 'acks and min.insync.replicas': with how many brokers down did acks=all still succeed, and "
            "when was it refused? Lesson 03's unclean election shows what a single in-sync copy risks.")
def two_copies_before_success(ns):
    """The topic demands at least two in-sync copies, and has three replicas to lose one of."""
    rf, config = topic_settings(ns)
    assert rf >= 3, f"REPLICATION_FACTOR is {rf}"
    try:
        min_isr = int(config.get("min.insync.replicas", 1))
    except ValueError:
        raise AssertionError(f"min.insync.replicas is {config['min.insync.replicas']!r}, not a number") from None
    assert 2 <= min_isr < rf, f"min.insync.replicas is {min_isr}"


@check("retries_do_not_duplicate", points=1,
       hint="Lesson 04, 'Duplicates from retries': the duplicates column of its two runs, and the segment dump "
            "after it (what the broker keeps to drop a batch it already has).")
def retries_do_not_duplicate(ns):
    """The producer is idempotent, so its retries during failovers store nothing twice."""
    value = setting(effective_config(ns.PRODUCER_CONFIG, "PRODUCER_CONFIG"), "enable.idempotence")
    assert is_true(value), f"enable.idempotence is {value!r}"


@check("survives_a_leader_kill", points=2,
       hint="Lesson 03, 'Kill a leader while a producer is writing': look at its duplicates column; lesson 04 shows "
            "which settings change each column of that table (and how long a producer keeps trying a record).")
def survives_a_leader_kill(ns):
    """The failure you can try in the notebook: 300 records while the leader of partition 0 is killed (and
    restarted at the end). Nothing acknowledged is lost, nothing stored twice, every record acknowledged."""
    config = producer_settings(ns)
    cluster = ns.cluster
    topic = create_topic(ns, "durable-visible")
    victim = cluster.describe_topic(topic)[0].leader
    try:
        count = produce_and_count(cluster, topic, count=300, pace=0.004, **config, actions={
            150: lambda: cluster.kill_broker(victim), 300: lambda: cluster.start_broker(victim)})
    finally:
        restore(cluster)
    assert_nothing_lost(count)
