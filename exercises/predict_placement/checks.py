"""Checks for predict_placement: the learner's model of the Python producer, against the real broker."""

from __future__ import annotations

import inspect
import random
import uuid

from labkit.grading import check
from labkit.partitioning import librdkafka_partition

SUPPORTED = ["consistent_random", "consistent", "murmur2_random", "murmur2", "fnv1a_random", "fnv1a"]


def _partitioner(config: dict) -> str:
    return config.get("partitioner", "consistent_random")


def _keys(seed=None, count=200) -> list[bytes]:
    rng = random.Random(seed)
    return [f"{rng.choice(['user', 'acct', 'sku'])}-{rng.randint(0, 10**8)}".encode() for _ in range(count)]


@check("predicts_default_producer", points=2,
       hint="With no 'partitioner' in the config, confluent-kafka uses consistent_random: CRC32 of the key.")
def predicts_default_producer(ns):
    """predict(key, n, {}) is the partition a default confluent-kafka producer picks."""
    for key in _keys(1, 100):
        got = ns.predict(key, 6, {})
        assert got == librdkafka_partition(key, 6), f"predict({key!r}, 6, {{}}) returned {got}"


@check("predicts_murmur2_random", points=2, hint="murmur2_random is the Java formula: toPositive(murmur2(key)) % n.")
def predicts_murmur2_random(ns):
    """predict(key, n, {"partitioner": "murmur2_random"}) matches the Java-compatible partitioner."""
    for key in _keys(2, 100):
        got = ns.predict(key, 7, {"partitioner": "murmur2_random"})
        assert got == librdkafka_partition(key, 7, "murmur2_random"), f"predict({key!r}, 7, murmur2_random) returned {got}"


@check("null_key_is_unpredictable", points=1,
       hint="For a null key the _random partitioners pick a partition at random: return None.")
def null_key_is_unpredictable(ns):
    """predict(None, n, config) is None for the *_random partitioners (no single answer)."""
    for name in ("consistent_random", "murmur2_random"):
        got = ns.predict(None, 5, {"partitioner": name})
        assert got is None, f"predict(None, 5, {name}) returned {got!r}"


@check("compare_reports_broker_placement", points=2,
       hint="Produce with a real Producer built from the config, flush, then read where each key was stored.")
def compare_reports_broker_placement(ns):
    """produce_and_compare really produces to the topic and reports matched == total for a right model."""
    cluster = ns.cluster
    topic = cluster.create_topic(f"grade-compare-{uuid.uuid4().hex[:6]}", partitions=5)
    keys = _keys(3, 50)
    result = ns.produce_and_compare(cluster, topic, keys, {"partitioner": "murmur2_random"})
    stored = cluster.read_all(topic)
    assert len(stored) == len(keys), f"the topic holds {len(stored)} records, expected {len(keys)}"
    assert result == {"matched": len(keys), "total": len(keys)}, f"produce_and_compare returned {result}"


@check("predictions_match_the_broker_on_unseen_topics", points=4, hidden=True)
def predictions_match_the_broker_on_unseen_topics(ns):
    """On new topics (random partition counts and partitioners), every prediction matches where the broker stored the record."""
    cluster = ns.cluster
    rng = random.Random()
    for partitioner in rng.sample(SUPPORTED, 3):
        n = rng.randint(2, 12)
        topic = cluster.create_topic(f"grade-{partitioner}-{uuid.uuid4().hex[:6]}", partitions=n)
        keys = _keys(None, 150)
        producer = cluster.producer(partitioner=partitioner)
        for key in keys:
            producer.produce(topic, key=key, value=b"x")
        assert producer.flush(30) == 0
        stored = {r.key: r.partition for r in cluster.read_all(topic)}
        wrong = [k for k in keys if ns.predict(k, n, {"partitioner": partitioner}) != stored[k]]
        assert not wrong, f"{len(wrong)} of {len(keys)} keys mispredicted for {partitioner} on {n} partitions"


@check("predict_is_the_learners_own_model", points=1, hidden=True)
def predict_is_the_learners_own_model(ns):
    """predict does its own hashing rather than calling labkit's model."""
    ns.predict(b"k", 3, {})
    source = inspect.getsource(ns.predict)
    assert "librdkafka_partition" not in source and "predict_partitions" not in source, \
        "write the rules yourself (murmur2 and zlib.crc32 are fine to use)"
