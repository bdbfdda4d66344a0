"""What lessons 00–03 show, asserted on real clusters without the notebooks: advertised listeners,
immutable records, co-partitioning, and unclean leader election losing acknowledged records.

(The segment indexes of lesson 01 are tested with their module, in test_segments.py.)
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from labkit.waiting import Wait

pytestmark = pytest.mark.integration


def test_a_client_bootstraps_from_any_name_then_connects_to_the_advertised_addresses(cluster, unique):
    topic = cluster.create_topic(unique("advertised"), partitions=3, replication_factor=3)
    connections = {}

    def on_stats(stats_json):
        for b in json.loads(stats_json)["brokers"].values():
            if b["nodeid"] >= 0:
                connections[b["nodeid"]] = (b["nodename"], b["state"])

    probe = Consumer({"bootstrap.servers": f"localhost:{cluster.brokers[0].port}", "group.id": unique("probe"),
                      "enable.auto.commit": False, "statistics.interval.ms": 100, "stats_cb": on_stats})

    def connected_to_all():
        probe.poll(0.1)  # serves the statistics callback
        return len(connections) == 3 and all(state == "UP" for _, state in connections.values())

    try:
        probe.assign([TopicPartition(topic, p, 0) for p in range(3)])
        Wait("connections to every broker", timeout=20, interval=0.1).until(connected_to_all)
    finally:
        probe.close()
    advertised = {f"{b.host}:{b.port}" for b in cluster.admin().list_topics(timeout=10).brokers.values()}
    assert {name for name, _ in connections.values()} == advertised
    assert not any(name.startswith("localhost") for name, _ in connections.values())


def test_an_update_is_a_new_record_and_the_old_one_stays(cluster, unique):
    topic = cluster.create_topic(unique("accounts"), partitions=1)
    producer = cluster.producer(acks="all")
    for email in ("old@example", "new@example"):
        producer.produce(topic, key="ana", value=email)
        assert producer.flush(10) == 0
    assert [(r.offset, r.value_text) for r in cluster.read_all(topic)] == [(0, "old@example"), (1, "new@example")]


def test_same_partition_count_co_partitions_keys_a_different_count_does_not(cluster, unique):
    counts = {"orders": 6, "payments": 6, "refunds": 8}
    topics = {name: cluster.create_topic(unique(name), partitions=n) for name, n in counts.items()}
    customers = [f"customer-{i}" for i in range(100)]
    producer = cluster.producer(partitioner="murmur2_random")
    for topic in topics.values():
        for c in customers:
            producer.produce(topic, key=c, value="x")
    assert producer.flush(10) == 0
    where = {name: {r.key_text: r.partition for r in cluster.read_all(t)} for name, t in topics.items()}
    assert all(where["orders"][c] == where["payments"][c] for c in customers)
    aligned = sum(where["orders"][c] == where["refunds"][c] for c in customers)
    assert 5 < aligned < 50, "6 and 8 partitions agree only by chance (1 key in 4 on average)"


@pytest.mark.parametrize("fresh_cluster", ["three-brokers"], indirect=True)
def test_unclean_election_loses_acknowledged_records_a_clean_topic_waits(fresh_cluster, unique):
    """unclean.leader.election.enable is per topic: the unclean topic elects the out-of-sync follower and
    loses what only the dead leader had (for good, even after it returns); the clean one stays offline
    and loses nothing."""
    c = fresh_cluster
    leader, lagger = 1, 2
    clean, unclean = unique("clean"), unique("unclean")
    futures = c.admin().create_topics([
        NewTopic(clean, 1, replica_assignment=[[leader, lagger]], config={"min.insync.replicas": "1"}),
        NewTopic(unclean, 1, replica_assignment=[[leader, lagger]],
                 config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}),
    ])
    for f in futures.values():
        f.result(timeout=30)
    for t in (clean, unclean):
        c.wait_for_isr(t)

    acked = {clean: [], unclean: []}

    def on_delivery(err, msg):
        if err is None:
            acked[msg.topic()].append(msg.value().decode())

    producer = c.producer(acks="all")

    def write(prefix, n):
        for i in range(n):
            for t in (clean, unclean):
                producer.produce(t, value=f"{prefix}-{i}", on_delivery=on_delivery)
        assert producer.flush(10) == 0

    write("in-sync", 20)
    c.pause_broker(lagger)
    Wait("the follower to leave both ISRs", timeout=30).until(
        lambda: all(lagger not in c.describe_topic(t)[0].isr for t in (clean, unclean)))
    write("leader-only", 30)
    assert {t: len(v) for t, v in acked.items()} == {clean: 50, unclean: 50}

    c.kill_broker(leader)
    c.resume_broker(lagger)
    Wait("the unclean election", timeout=60).until(
        lambda: c.describe_topic(unclean)[0].leader == lagger and c.describe_topic(clean)[0].leader is None)
    kept = {r.value_text for r in c.read_all(unclean)}
    assert kept == {f"in-sync-{i}" for i in range(20)}, "every leader-only record is lost"

    c.start_broker(leader)
    for t in (clean, unclean):
        c.wait_for_isr(t)
    assert set(acked[clean]) == {r.value_text for r in c.read_all(clean)}, "the clean topic lost nothing"
    assert {r.value_text for r in c.read_all(unclean)} == kept, "the old leader truncated to the new one's log"
