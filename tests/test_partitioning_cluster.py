"""Every record the real confluent-kafka producer sends lands where labkit.partitioning predicts."""

from __future__ import annotations

import pytest

from labkit import partitioning as pt

pytestmark = pytest.mark.integration

PARTITIONS = 7
KEYS = [f"user-{i}".encode() for i in range(300)] + [b"\x00\xff\x10", "ключ".encode(), b"x" * 37]


def _produce(cluster, topic, keys, **config):
    producer = cluster.producer(**config)
    reported = []
    for key in keys:
        producer.produce(topic, key=key, value=b"v",
                         on_delivery=lambda err, msg: reported.append((err, msg.key(), msg.partition())))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert all(err is None for err, _, _ in reported)
    return {key: partition for _, key, partition in reported}


@pytest.mark.parametrize("partitioner", ["consistent", "consistent_random", "murmur2", "murmur2_random",
                                         "fnv1a", "fnv1a_random"])
def test_keyed_records_land_where_the_model_predicts(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"placement-{partitioner}"), partitions=PARTITIONS)
    reported = _produce(cluster, topic, KEYS, partitioner=partitioner)
    stored = {r.key: r.partition for r in cluster.read_all(topic)}
    assert len(stored) == len(KEYS)
    predicted = {k: pt.librdkafka_partition(k, PARTITIONS, partitioner) for k in KEYS}
    assert stored == predicted
    assert reported == stored


def test_default_python_producer_is_not_java_compatible_but_murmur2_random_is(cluster, unique):
    keys = KEYS[:200]
    default_topic = cluster.create_topic(unique("default"), partitions=PARTITIONS)
    java_like_topic = cluster.create_topic(unique("javalike"), partitions=PARTITIONS)
    _produce(cluster, default_topic, keys)
    _produce(cluster, java_like_topic, keys, partitioner="murmur2_random")
    default = {r.key: r.partition for r in cluster.read_all(default_topic)}
    java_like = {r.key: r.partition for r in cluster.read_all(java_like_topic)}
    assert java_like == {k: pt.java_partition(k, PARTITIONS) for k in keys}
    differ = sum(default[k] != java_like[k] for k in keys)
    assert differ > len(keys) // 2


@pytest.mark.parametrize("partitioner", ["consistent", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"])
def test_empty_key_lands_where_the_model_predicts(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"empty-{partitioner}"), partitions=PARTITIONS)
    _produce(cluster, topic, [b""] * 5, partitioner=partitioner)
    stored = {r.partition for r in cluster.read_all(topic)}
    assert stored == {pt.librdkafka_partition(b"", PARTITIONS, partitioner)}


@pytest.mark.parametrize("partitioner", ["consistent", "murmur2", "fnv1a"])
def test_null_key_is_hashed_by_the_non_random_partitioners(cluster, unique, partitioner):
    topic = cluster.create_topic(unique(f"null-{partitioner}"), partitions=PARTITIONS)
    _produce(cluster, topic, [None] * 5, partitioner=partitioner)
    stored = {r.partition for r in cluster.read_all(topic)}
    assert stored == {pt.librdkafka_partition(None, PARTITIONS, partitioner)}
