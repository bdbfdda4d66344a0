"""The exercise notebook predict_placement: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Predict the placement", exercise="predict_placement")

nb.md("""
# Exercise · Predict the placement

Before a record is sent, its partition is already decided — by the **producer's configuration**.
Here you write a model that predicts, from a key, the partition count and a confluent-kafka
producer config, which partition the record will land in; then you test it against the broker.
The grader runs your model against new topics with partition counts and partitioners you
don't know in advance.

*About 25 minutes. Goes with lesson 02.*
""")
nb.md("""
## Setup

This exercise uses a small single-broker cluster of its own.
""")
nb.code("""
import zlib

import labkit
from labkit.grading import exercise
from labkit.partitioning import murmur2, to_positive   # allowed: Kafka's hash, bit-exact

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("predict_placement")
""")

nb.md("""
## Task 1 — the model

Write `predict(key, num_partitions, config)`. `config` is a producer config dict; only its
`"partitioner"` entry matters (missing means the client's default). Support librdkafka's
`consistent_random`, `consistent`, `murmur2_random`, `murmur2`, `fnv1a_random` and `fnv1a`.
Return `None` when the client would pick at random (a null key under a `*_random` partitioner,
and — for `consistent_random` — an empty key too).

Useful facts: `consistent` is CRC-32 of the key (`zlib.crc32`) modulo the partition count; the
`murmur2` ones use Java's formula; `fnv1a` is 32-bit FNV-1a (offset basis `0x811C9DC5`, prime
`0x01000193`) taken as a **signed** 32-bit int, then `abs(h) % n` (it copies Go's Sarama client).
""")
nb.code('''
def predict(key, num_partitions: int, config: dict):
    """The partition a confluent-kafka producer with ``config`` picks for ``key`` (None: random)."""
    ### BEGIN SOLUTION
    name = config.get("partitioner", "consistent_random")
    if isinstance(key, str):
        key = key.encode()
    if name.endswith("_random"):
        if key is None or (name == "consistent_random" and key == b""):
            return None
        name = name[: -len("_random")]
    data = key or b""
    if name == "consistent":
        return zlib.crc32(data) % num_partitions
    if name == "murmur2":
        return to_positive(murmur2(data)) % num_partitions
    if name == "fnv1a":
        h = 0x811C9DC5
        for byte in data:
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        if h & 0x80000000:
            h -= 1 << 32
        return abs(h) % num_partitions
    raise ValueError(f"unsupported partitioner {name!r}")
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")

nb.md("""
## Task 2 — test it on the broker

Write `produce_and_compare(cluster, topic, keys, config)`: produce one record per key with a real
producer built from `config` (`cluster.producer(**config)` gives you one), wait until all are
acknowledged, find out where the **broker** stored each record (`cluster.read_all(topic)` returns
every stored record with its partition), and return `{"matched": ..., "total": ...}` — how many
records landed where `predict` said.
""")
nb.code('''
def produce_and_compare(cluster, topic: str, keys: list, config: dict) -> dict:
    ### BEGIN SOLUTION
    producer = cluster.producer(**config)
    for key in keys:
        producer.produce(topic, key=key, value=b"payload")
        producer.poll(0)
    producer.flush(30)
    num_partitions = len(cluster.describe_topic(topic).partitions)
    stored = cluster.read_all(topic)
    matched = sum(predict(r.key, num_partitions, config) == r.partition for r in stored)
    return {"matched": matched, "total": len(stored)}
    ### END SOLUTION
''')
nb.code("""
topic = cluster.create_topic("payments", partitions=5)
keys = [f"account-{i}".encode() for i in range(100)]
produce_and_compare(cluster, topic, keys, {})
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded("""
The hidden checks create new topics with random partition counts and partitioners, produce with the
real client and compare every record with your `predict`.
""")
