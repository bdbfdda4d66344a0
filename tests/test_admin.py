"""labkit.admin and labkit.runtime.agreement: calls that change the cluster return only when every live broker agrees.

Unit tests drive the waiting logic with stand-ins that answer the way librdkafka does; the integration
tests ask each broker of a real cluster itself, right after each call returned.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource

from labkit import admin, operations
from labkit.errors import ClusterStateError, WaitTimeout
from labkit.runtime import agreement


# ------------------------------------------------------------------------------------------ unit
class _Metadata:
    def __init__(self, orig: int) -> None:
        self.orig_broker_id = orig
        self.orig_broker_name = f"127.0.0.1:900{orig}/{orig}" if orig != -1 else "127.0.0.1:9001/bootstrap"


class _Client:
    """Answers list_topics() with the next broker id (-1: the bootstrap connection), or raises for None."""

    def __init__(self, *origins):
        self.origins = list(origins)
        self.calls = 0

    def list_topics(self, topic=None, timeout=None):
        self.calls += 1
        orig = self.origins.pop(0) if len(self.origins) > 1 else self.origins[0]
        if orig is None:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return _Metadata(orig)


def test_warm_up_asks_until_a_broker_learned_from_the_metadata_answers():
    """The bootstrap connection is retired once the brokers are known (librdkafka 2.10+): a client is ready
    for any request once a learned broker answered."""
    client = _Client(-1, -1, 3)
    admin.warm_up(client)
    assert client.calls == 3


def test_warm_up_leaves_a_cluster_that_does_not_answer_to_the_callers_own_request():
    client = _Client(None)
    admin.warm_up(client, timeout=1)
    assert client.calls == 1


@dataclass
class _Broker:
    id: int
    state: str = "running"
    host: str = "127.0.0.1"
    port: int = 9000

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port + self.id}"


class _Cluster:
    def __init__(self, *brokers):
        self.brokers = list(brokers)


def test_origin_names_the_broker_behind_a_bootstrap_answer():
    brokers = [_Broker(1), _Broker(2)]
    assert agreement.origin(_Metadata(2), brokers) == 2
    assert agreement.origin(_Metadata(-1), brokers) == 1, "the bootstrap connection's address is broker 1's"


def test_agree_waits_for_every_live_broker_and_asks_each_only_until_it_agrees():
    cluster = _Cluster(_Broker(1), _Broker(2), _Broker(3, state="paused"), _Broker(4, state="killed"))
    asked = {1: 0, 2: 0}
    behind = {1: 0, 2: 3}

    def holds(broker):
        asked[broker.id] += 1
        return asked[broker.id] > behind[broker.id], f"asked {asked[broker.id]} times"

    agreement.agree(cluster, "a change", holds, timeout=5)
    assert asked == {1: 1, 2: 4}, "a paused or killed broker is not asked; one that agreed is not asked again"


def test_agree_names_the_brokers_that_disagree_what_they_showed_and_the_machines_load():
    cluster = _Cluster(_Broker(1), _Broker(2))
    with pytest.raises(WaitTimeout) as raised:
        agreement.agree(cluster, "topic 'x' created", lambda b: (b.id == 1, "does not know it"), timeout=0.3)
    text = str(raised.value)
    assert "every live broker to agree: topic 'x' created" in text
    assert "broker 2: does not know it" in text and "broker 1:" not in text.split("\n", 1)[1]
    assert "load average" in text


def test_a_broker_that_dies_while_waited_for_stops_being_asked():
    dying = _Broker(2)
    cluster = _Cluster(_Broker(1), dying)

    def holds(broker):
        if broker is dying:
            dying.state = "killed"
            return False, "no answer"
        return True, "ok"

    agreement.agree(cluster, "a change", holds, timeout=5)


# ------------------------------------------------------------------------------------------ on real brokers
def _every_broker_knows(cluster, topic):
    for broker in cluster.brokers:
        answer = agreement.routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)])
        assert isinstance(answer[topic], dict), f"broker {broker.id} answered {answer[topic]}"


@pytest.mark.integration
def test_routed_configs_reach_the_broker_asked_and_a_paused_broker_holds_nothing_up(fresh_cluster, unique):
    """DescribeConfigs with a BROKER resource goes to that broker with the topic beside it: a paused broker
    leaves exactly that request unanswered while the others answer. A change made while it is paused returns
    (it cannot answer) and the broker learns it when it resumes.

    The broker paused is the quorum's leader, the worst case: every broker forwards the create to the controller
    it knows, so the request waits out the lab's controller.socket.timeout.ms (10 s; Kafka's 30 s made this
    create take 45 s or fail at 60) and goes again to the leader elected meanwhile."""
    cluster = fresh_cluster
    topic = cluster.create_topic(unique("routed"), partitions=1)
    leader = operations.quorum(cluster, replication=False).leader
    victim = next(b for b in cluster.brokers if b.id == leader)
    cluster.pause_broker(victim.id)
    try:
        for broker in cluster.brokers:
            answer = agreement.routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)],
                                              timeout=2)[topic]
            if broker.id == victim.id:
                assert isinstance(answer, KafkaError) and answer.code() == KafkaError._TIMED_OUT
            else:
                assert isinstance(answer, dict) and "retention.ms" in answer
        later = cluster.create_topic(unique("while-paused"), partitions=1, replication_factor=2)
    finally:
        cluster.resume_broker(victim.id)
    agreement.agree(cluster, "the resumed broker caught up", agreement.topic_known(cluster, later), timeout=60)


@pytest.mark.integration
def test_a_created_topic_is_known_and_led_on_every_broker_when_create_returns(cluster, unique):
    names = [cluster.create_topic(unique("agreed"), partitions=3) for _ in range(3)]
    for topic in names:
        _every_broker_knows(cluster, topic)
        for broker in cluster.brokers:
            md = agreement.broker_metadata(cluster, broker, topic)
            assert md is not None and len(md.topics[topic].partitions) == 3
            assert all(p.leader >= 0 for p in md.topics[topic].partitions.values())


@pytest.mark.integration
def test_creating_a_topic_twice_returns_it_and_a_different_shape_is_an_error(cluster, unique):
    topic = cluster.create_topic(unique("twice"), partitions=2)
    assert cluster.create_topic(topic, partitions=2) == topic
    with pytest.raises(ClusterStateError, match="already exists with 2 partitions"):
        cluster.create_topic(topic, partitions=4)
    assert cluster.create_topic(topic, partitions=4, exist_ok=True) == topic


@pytest.mark.integration
def test_added_partitions_configs_and_deletion_are_on_every_broker_when_the_call_returns(cluster, unique):
    topic = cluster.create_topic(unique("grow"), partitions=2)
    cluster.add_partitions(topic, 5)
    for broker in cluster.brokers:
        assert len(agreement.broker_metadata(cluster, broker, topic).topics[topic].partitions) == 5
    cluster.alter_configs("topic", topic, {"retention.ms": 123456, "cleanup.policy": "compact"})
    for broker in cluster.brokers:
        answer = agreement.routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)])[topic]
        assert answer["retention.ms"] == "123456" and answer["cleanup.policy"] == "compact"
    assert cluster.describe_configs("topic", topic)["retention.ms"] == "123456"
    with pytest.raises(ClusterStateError, match="only gain partitions"):
        cluster.add_partitions(topic, 3)
    cluster.delete_topic(topic)
    for broker in cluster.brokers:
        answer = agreement.routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)])[topic]
        assert isinstance(answer, KafkaError) and answer.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    cluster.delete_topic(topic)  # deleting what is gone is fine: a cell can run twice
