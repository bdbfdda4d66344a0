"""The docker backend: what it generates (no Docker needed), and a real cluster when an engine answers."""

from __future__ import annotations

import time

import pytest

import labkit
from labkit import docker as dk
from labkit.errors import BackendError, LabkitError


def _engine_answers() -> bool:
    try:
        dk._docker_client()
        return True
    except BackendError:
        return False


ENGINE = _engine_answers()


@pytest.mark.parametrize("prop, var", [
    ("log.retention.ms", "KAFKA_LOG_RETENTION_MS"),
    ("node.id", "KAFKA_NODE_ID"),
    ("log.cleaner.dedupe_buffer", "KAFKA_LOG_CLEANER_DEDUPE__BUFFER"),
    ("some-dashed.name", "KAFKA_SOME___DASHED_NAME"),
])
def test_env_name_follows_the_image_convention(prop, var):
    assert dk.env_name(prop) == var


def test_node_environment_advertises_loopback_and_network_alias():
    env = dk.node_environment(2, 3, 40123, {"min.insync.replicas": 2, "auto.create.topics.enable": True}, "abc")
    assert env["KAFKA_NODE_ID"] == "2"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kafka-2:19092,EXTERNAL://127.0.0.1:40123"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "true"
    assert env["CLUSTER_ID"] == "abc"
    assert all(isinstance(v, str) for v in env.values())


def test_managed_settings_win_over_profile_settings():
    env = dk.node_environment(1, 1, 5000, {"node.id": 99, "listeners": "bogus"}, "x")
    assert env["KAFKA_NODE_ID"] == "1"
    assert "bogus" not in env["KAFKA_LISTENERS"]


def test_profile_settings_reach_every_node():
    cluster = dk.DockerCluster("three-brokers", overrides={"log_retention_ms": 60000})
    settings = cluster.settings()
    assert settings["log.retention.ms"] == 60000
    assert settings["min.insync.replicas"] == 2
    env = dk.node_environment(3, 3, 1234, settings, "id")
    assert env["KAFKA_LOG_RETENTION_MS"] == "60000"


def test_unknown_profile_is_rejected_before_docker_is_asked():
    with pytest.raises(LabkitError, match="three-brokers"):
        dk.DockerCluster("seven-brokers")


@pytest.mark.skipif(ENGINE, reason="a Docker engine answers here; the no-engine error cannot be seen")
def test_no_engine_is_a_quick_one_line_error():
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        labkit.start_cluster(backend="docker", progress=False)
    assert time.monotonic() - start < 20
    message = str(info.value)
    assert "Docker engine" in message and "native backend" in message
    assert "\n" not in info.value.args[0]


@pytest.mark.integration
@pytest.mark.docker
@pytest.mark.skipif(not ENGINE, reason="no Docker engine answers on this machine (the native backend needs none)")
def test_docker_cluster_produces_and_fails_over(unique):
    with labkit.start_cluster("three-brokers", backend="docker", progress=False) as cluster:
        topic = cluster.create_topic(unique("docker"), partitions=3, replication_factor=3)
        producer = cluster.producer(acks="all")
        for i in range(30):
            producer.produce(topic, key=str(i), value=b"x")
        assert producer.flush(30) == 0
        assert len(cluster.read_all(topic)) == 30
        leader = cluster.describe_topic(topic)[0].leader
        cluster.kill_broker(leader)
        after = cluster.wait_for_new_leader(topic, 0, leader)
        assert after[0].leader != leader
