"""Checks for predict_placement: the learner's model of the Python producer, against the real broker.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``. The learner's
``produce_and_compare`` runs in their kernel (a task) on a cluster handle the task builds from
the bootstrap servers; what the topic holds afterwards is read by the check itself.
"""

from __future__ import annotations

import random

from labkit.grading import Rules, check
from labkit.grading.harness import unique
from labkit.partitioning import librdkafka_partition

#: The lab's partitioning module holds the model (librdkafka_partition); murmur2 and to_positive are given.
RULES = Rules(forbid=["labkit.partitioning"], allow=["murmur2", "to_positive"])
CLUSTER = "single-broker"
SHARE_CLUSTER = True

SUPPORTED = ["consistent_random", "consistent", "murmur2_random", "murmur2", "fnv1a_random", "fnv1a"]


def keys_for(rng: random.Random, count: int) -> list[bytes]:
    return [f"{rng.choice(['user', 'acct', 'sku'])}-{rng.randint(0, 10**8)}".encode() for _ in range(count)]


def compare_task(user, bootstrap, topic, keys, config):
    """In the learner's kernel: their produce_and_compare on a cluster handle for ``bootstrap``."""
    import labkit

    cluster = labkit.connect(bootstrap)
    try:
        return user["produce_and_compare"](cluster, topic, keys, config)
    finally:
        cluster.stop()


def check_compare(ns, keys: list, partitions: int, partitioner: str) -> None:
    """produce_and_compare on a new topic: the topic then holds one record per key, placed by a producer with
    the config (the grader reads it), and the result counts the stored records ``predict`` placed right."""
    ns.produce_and_compare  # noqa: B018 - not defined yet: say so
    cluster = ns.cluster
    config = {"partitioner": partitioner}
    topic = cluster.create_topic(unique(f"grade-compare-{partitioner}"), partitions=partitions)
    result = ns.run(compare_task, cluster.bootstrap_servers, topic, keys, config)
    stored = cluster.read_all(topic)
    stored_keys = [r.key for r in stored]
    assert sorted(stored_keys, key=repr) == sorted(keys, key=repr), \
        f"the topic holds {len(stored)} records ({len(set(stored_keys) & set(keys))} of the keys), " \
        f"expected one per key ({len(keys)})"
    for r in stored:
        want = librdkafka_partition(r.key, partitions, partitioner)
        assert want is None or r.partition == want, \
            f"key {r.key!r} is in partition {r.partition}, not where a producer with {config} puts it: build the " \
            "producer from the config"
    predicted = ns.predict.many([(r.key, partitions, config) for r in stored])
    matched = sum(p == r.partition for p, r in zip(predicted, stored))
    want = {"matched": matched, "total": len(stored)}
    assert result == want, f"produce_and_compare returned {result}; by your predict, the broker's placement gives {want}"


@check("predicts_default_producer", points=2,
       hint="With no 'partitioner' in the config, confluent-kafka uses consistent_random: CRC32 of the key.")
def predicts_default_producer(ns):
    """predict(key, n, {}) is the partition a default confluent-kafka producer picks."""
    keys = keys_for(random.Random(1), 100)
    for key, got in zip(keys, ns.predict.many([(k, 6, {}) for k in keys])):
        assert got == librdkafka_partition(key, 6), f"predict({key!r}, 6, {{}}) returned {got!r}"


@check("predicts_murmur2_random", points=2, hint="murmur2_random is the Java formula: toPositive(murmur2(key)) % n.")
def predicts_murmur2_random(ns):
    """predict(key, n, {"partitioner": "murmur2_random"}) matches the Java-compatible partitioner."""
    keys = keys_for(random.Random(2), 100)
    config = {"partitioner": "murmur2_random"}
    for key, got in zip(keys, ns.predict.many([(k, 7, config) for k in keys])):
        assert got == librdkafka_partition(key, 7, "murmur2_random"), \
            f"predict({key!r}, 7, murmur2_random) returned {got!r}"


@check("null_key_is_unpredictable", points=1,
       hint="For a null key the _random partitioners pick a partition at random: return None.")
def null_key_is_unpredictable(ns):
    """predict(None, n, config) is None for the *_random partitioners (no single answer)."""
    names = ("consistent_random", "murmur2_random")
    for name, got in zip(names, ns.predict.many([(None, 5, {"partitioner": name}) for name in names])):
        assert got is None, f"predict(None, 5, {name}) returned {got!r}"


@check("compare_reports_broker_placement", points=2,
       hint="Produce with a real Producer built from the config, flush, then read where each key was stored.")
def compare_reports_broker_placement(ns):
    """produce_and_compare really produces to the topic with the config, and reports how many stored records
    are where predict says."""
    check_compare(ns, keys_for(random.Random(3), 50), partitions=5, partitioner="murmur2_random")
