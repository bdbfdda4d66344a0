"""Every helper a lesson uses works on the secured profile too (TLS, SCRAM, ACLs): the admin's credentials
reach the live view's readers, consumer-group members, read_all, produce_and_count, Kafka's tools and Spark's options."""

from __future__ import annotations

import pytest

import labkit
from labkit.producing import produce_and_count
from labkit.view.snapshot import take_snapshot
from labkit.spark import kafka_options
from labkit.workloads import Group

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured():
    c = labkit.start_cluster("secured", progress=False)
    yield c
    c.stop()


def test_helpers_work_on_a_secured_cluster(secured, unique):
    topic = secured.create_topic(unique("orders"), partitions=3)
    counted = produce_and_count(secured, topic, count=60, acks="all")
    assert counted.acked == counted.stored == 60 and counted.lost == 0
    assert len(secured.read_all(topic)) == 60
    assert topic in secured.tool("kafka-topics", "--list").lines
    group = Group(secured, topic, unique("billing"))
    try:
        group.start_member("a")
        group.wait_processed(60, timeout=60)
        snap = take_snapshot(secured, topics=[topic], groups=[group.group_id])
    finally:
        group.stop()
    assert [b.status for b in snap.brokers] == ["up"] * 3 and not snap.errors
    assert snap.group(group.group_id).state in ("stable", "empty")
    options = kafka_options(secured, subscribe=topic)
    assert options["kafka.security.protocol"] == "SASL_SSL" and "ScramLoginModule" in options["kafka.sasl.jaas.config"]
    assert options["kafka.ssl.truststore.type"] == "PEM" and "kafka.sasl.password" not in options
