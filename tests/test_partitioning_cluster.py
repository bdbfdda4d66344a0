"""Every record the real confluent-kafka producer sends lands where labkit.partitioning predicts."""

from __future__ import annotations

import time

import pytest

from labkit import partitioning as pt

pytestmark = pytest.mark.integration

PARTITIONS = 7
KEYS = [f"user-{i}".encode() for i in range(300)] + [b"\x00\xff\x10", "ключ".encode(), b"x" * 37]
HASHING = ["consistent", "consistent_random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"]


def _produce(cluster, topic, keys, bursts=1, **config):
    """Produce one record per key; returns [(key, partition from the delivery report)] in delivery order.

    With ``bursts`` > 1 the keys are sent in that many flushed groups 30 ms apart, longer
    than ``sticky.partitioning.linger.ms`` (set to 1 ms here), so a sticky partitioner
    would pick a new random partition for each group.
    """
    if bursts > 1:
        config.setdefault("sticky.partitioning.linger.ms", 1)
    producer = cluster.producer(**config)
    reported = []

    def on_delivery(err, msg):
        assert err is None, err
        reported.append((msg.key(), msg.partition()))

    size = -(-len(keys) // bursts)
    for start in range(0, len(keys), size):
        for key in keys[start:start + size]:
            producer.produce(topic, key=key, value=b"v", on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(30) == 0
        if bursts > 1:
            time.sleep(0.03)
    assert len(reported) == len(keys)
    return reported


def _stored(cluster, topic):
    """[(key, partition)] as the broker stores them, read back with a consumer."""
    return [(r.key, r.partition) for r in cluster.read_all(topic)]


@pytest.mark.parametrize("partitioner", HASHING)
def test_keyed_records_land_where_the_model_predicts(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"placement-{partitioner}"), partitions=PARTITIONS)
    reported = dict(_produce(cluster, topic, KEYS, partitioner=partitioner))
    stored = dict(_stored(cluster, topic))
    assert len(stored) == len(KEYS)
    predicted = {k: pt.librdkafka_partition(k, PARTITIONS, partitioner) for k in KEYS}
    assert stored == predicted
    assert reported == stored
    assert len(set(stored.values())) == PARTITIONS  # 303 keys reach every partition


def test_default_python_producer_is_not_java_compatible_but_murmur2_random_is(cluster, unique):
    keys = KEYS[:200]
    default_topic = cluster.create_topic(unique("default"), partitions=PARTITIONS)
    java_like_topic = cluster.create_topic(unique("javalike"), partitions=PARTITIONS)
    _produce(cluster, default_topic, keys)  # no partitioner set: librdkafka's consistent_random
    _produce(cluster, java_like_topic, keys, partitioner="murmur2_random")
    default = dict(_stored(cluster, default_topic))
    java_like = dict(_stored(cluster, java_like_topic))
    java = {k: pt.java_partition(k, PARTITIONS) for k in keys}
    assert java_like == java
    assert default == {k: pt.librdkafka_partition(k, PARTITIONS) for k in keys}
    differ = sum(default[k] != java[k] for k in keys)
    assert differ > len(keys) // 2  # about 6 in 7 keys land elsewhere than a Java producer puts them


@pytest.mark.parametrize("partitioner", ["consistent", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"])
def test_empty_key_lands_where_the_model_predicts(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"empty-{partitioner}"), partitions=PARTITIONS)
    reported = _produce(cluster, topic, [b""] * 8, bursts=8, partitioner=partitioner)
    expected = pt.librdkafka_partition(b"", PARTITIONS, partitioner)
    assert expected is not None
    assert {p for _, p in _stored(cluster, topic)} == {p for _, p in reported} == {expected}


@pytest.mark.parametrize("partitioner", ["consistent", "murmur2", "fnv1a"])
def test_null_key_is_hashed_by_the_non_random_partitioners(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"null-{partitioner}"), partitions=PARTITIONS)
    reported = _produce(cluster, topic, [None] * 8, bursts=8, partitioner=partitioner)
    expected = pt.librdkafka_partition(None, PARTITIONS, partitioner)
    assert expected == pt.librdkafka_partition(b"", PARTITIONS, partitioner)
    assert {p for _, p in _stored(cluster, topic)} == {p for _, p in reported} == {expected}


@pytest.mark.parametrize("partitioner, key", [
    ("consistent_random", None), ("consistent_random", b""), ("murmur2_random", None),
    ("fnv1a_random", None), ("random", None), ("random", b""), ("random", b"same-key"),
])
def test_where_the_model_says_random_records_spread(cluster, unique, partitioner, key):
    # The same method as the two tests above: if these partitioners hashed the key, all 8 would
    # share one partition; a sticky/random choice, re-drawn for each burst, spreads them.
    assert pt.librdkafka_partition(key, PARTITIONS, partitioner) is None
    topic = cluster.create_topic(unique(f"spread-{partitioner}"), partitions=PARTITIONS)
    _produce(cluster, topic, [key] * 8, bursts=8, partitioner=partitioner)
    stored = {p for _, p in _stored(cluster, topic)}
    assert len(stored) > 1  # all 8 in one partition by chance: (1/7)**7
