"""Cluster operations (issue 28): labkit.operations and the native backend's topology calls, on real clusters.

Unit tests read Kafka's own tool output and the lab's environment; the integration tests grow, drain and
shrink a running cluster (every call returning once every live broker agrees), change its quorum, and offload
segments to Kafka's LocalTieredStorage. Lesson 13 and the drain_broker exercise do all of it again with traffic
flowing; the rolling upgrade from the previous release and the features finalized after it are checked there
alone (lesson 13's checked outputs: every broker on the lab's release, nothing acknowledged lost, the producer saw
leaders move, metadata.version moved and the way back refused) -- a copy here cost 43 CPU-s of make test.
"""

from __future__ import annotations

import pytest

from labkit import operations as ops
from labkit.errors import ClusterStateError, SettingError

STATUS = """ClusterId:              SKFne6IpSy2S3WKyUYI8GA
LeaderId:               2
LeaderEpoch:            1
HighWatermark:          66
MaxFollowerLag:         1
MaxFollowerLagTimeMs:   491
CurrentVoters:          [{"id": 1, "directoryId": "aZIV7wOSRuyWn_ved-CCZw", "endpoints": ["CONTROLLER://127.0.0.1:52903"]}, {"id": 2, "directoryId": "w7lTBzb0QTeXfGqGWInOaw", "endpoints": ["CONTROLLER://127.0.0.1:48609"]}]
CurrentObservers:       [{"id": 4, "directoryId": "v1etY07SDKHS0RExrHUgXw"}]
"""
REPLICATION = """NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t
1     \taZIV7wOSRuyWn_ved-CCZw\t43          \t0  \t1795611869301     \t1795611869301        \tLeader  \t
2     \tw7lTBzb0QTeXfGqGWInOaw\t43          \t0  \t1795611869227     \t1795611869227        \tFollower\t
"""
FEATURES = """Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: UNKNOWN 33\tFinalizedVersionLevel: 4.3-IV0\tEpoch: 175
Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 1\tEpoch: 175
"""


def test_the_quorum_as_kafka_metadata_quorum_describes_it():
    q = ops.parse_quorum(STATUS, REPLICATION)
    assert (q.leader, q.epoch, q.high_watermark) == (2, 1, 66)
    assert q.voters == {1: "aZIV7wOSRuyWn_ved-CCZw", 2: "w7lTBzb0QTeXfGqGWInOaw"} and q.dynamic
    assert q.observers == (4,)
    assert list(q.replication.Status) == ["Leader", "Follower"]


def test_features_as_kafka_features_describes_them():
    f = ops.parse_features(FEATURES)
    assert f.loc["metadata.version", "finalized"] == "4.3-IV0"
    assert f.loc["metadata.version", "supported max"] == "UNKNOWN 33", "an older tool's view of a newer broker"
    assert f.loc["share.version", "supported max"] == "2"


def test_a_plan_round_trips_kafkas_json():
    plan = ops.Plan({("orders", 1): (4, 1, 2), ("orders", 0): (2, 3, 4)})
    again = ops.Plan.from_json(plan.to_json())
    assert again.targets == plan.targets and len(again) == 2
    assert '"partitions": [{"topic": "orders", "partition": 0' in plan.to_json(), "sorted, Kafka's field names"


def test_the_lab_keeps_its_release_the_previous_one_and_a_tiered_storage_plugin():
    from labkit.runtime.environment import kafka_spec

    spec = kafka_spec()
    found = ops.releases()
    assert found["lab"] == spec.version and found["tiered storage"] == spec.tiered_version
    assert spec.tiered_plugin.endswith(f":{spec.tiered_version}:test")
    assert spec.tiered_class.endswith(".LocalTieredStorage")


def test_profiles_carry_racks_a_dynamic_quorum_and_tiered_storage():
    from labkit.runtime.profiles import load_profile

    operations = load_profile("operations")
    assert operations.quorum == "dynamic" and [operations.rack(n) for n in (1, 2, 3, 4)] == \
        ["rack-a", "rack-b", "rack-c", "rack-a"]
    assert load_profile("three-brokers").rack(1) is None and load_profile("three-brokers").quorum == "static"
    assert load_profile("tiered-storage").tiered_storage


def test_the_tiered_storage_managers_settings_pass_the_name_check_and_racks_are_labkits():
    from labkit.runtime.profiles import validate_settings

    validate_settings(["rsm.config.dir", "rlmm.config.remote.log.metadata.topic.replication.factor"], {"x"})
    with pytest.raises(SettingError, match="managed by labkit"):
        validate_settings(["broker.rack"], {"broker.rack"})


@pytest.mark.integration
def test_tool_arguments_land_where_each_tool_wants_them():
    from labkit.runtime.tools import tool_command

    cluster_cmd = tool_command("kafka-cluster", ["unregister", "--id", "4"], "h:1")
    assert cluster_cmd[-5:] == ["unregister", "--bootstrap-server", "h:1", "--id", "4"]
    generate = tool_command("kafka-reassign-partitions", ["--broker-list", "1,2", "--generate"], "h:1")
    assert "--bootstrap-server" in generate, "--broker-list lists broker ids there, it is no bootstrap"
    configs = tool_command("kafka-configs", ["--describe"], "h:1")
    assert configs[configs.index("--bootstrap-server") - 1].endswith("ConfigCommand")


@pytest.mark.integration
def test_grow_drain_and_shrink_a_running_cluster(unique):
    import labkit
    from labkit.runtime import agreement

    cluster = labkit.start_cluster("operations", progress=False)
    try:
        new = cluster.add_broker()
        assert new.id == 4 and all(agreement.broker_listed(cluster, 4)(b)[0] for b in agreement.live_brokers(cluster))
        assert ops.racks(cluster)[4] == "rack-a", "the profile's racks go round: node 4 shares rack-a with node 1"
        assert ops.replicas_on(cluster, 4) == [], "a new broker gets nothing by itself"

        topic = unique("orders")
        from confluent_kafka.admin import NewTopic

        for f in cluster.admin().create_topics([NewTopic(topic, 2, replica_assignment=[[4, 2, 3], [1, 2, 4]])]).values():
            f.result(timeout=30)
        cluster.wait_for_isr(topic)
        with pytest.raises(ClusterStateError, match="still holds 2 replicas"):
            cluster.remove_broker(4)

        with _traffic(cluster, topic) as traffic:
            from labkit.waiting import Wait

            Wait("records flowing both ways", timeout=60).until(lambda: traffic._t.acked and traffic._t.consumed)
            # every replica broker 4 holds: the topic's, and __consumer_offsets' (created by the traffic's group
            # after broker 4 joined, so partly on it)
            drain = {(p.topic, p.partition): tuple(next(b for b in (1, 2, 3) if b not in p.replicas) if r == 4 else r
                                                   for r in p.replicas)
                     for p in ops.partitions(cluster, internal=True) if 4 in p.replicas}
            assert drain[(topic, 0)] == (1, 2, 3) and drain[(topic, 1)] == (1, 2, 3)
            moving = ops.reassign(cluster, ops.Plan(drain), throttle=1_000_000)
            during = ops.throttles(cluster)
            moving.wait()
            moving.finish()
            ops.elect_preferred(cluster, [topic])
        counted = traffic.counted
        assert during["broker 4"] == {"leader.replication.throttled.rate": "1000000",
                                      "follower.replication.throttled.rate": "1000000"}
        assert not any(ops.throttles(cluster).values()), "finish() removed every throttle"
        assert ops.replicas_on(cluster, 4) == [] and counted.lost == 0 and counted.unread == 0
        assert all(p.leader == p.replicas[0] == 1 for p in ops.partitions(cluster, [topic]))

        cluster.remove_broker(4)
        assert 4 not in cluster.broker_ids and not any(agreement.broker_listed(cluster, 4)(b)[0]
                                                       for b in agreement.live_brokers(cluster))
        assert cluster.add_broker().id == 5, "a removed broker's id is not handed out again"
        with pytest.raises(ClusterStateError, match="voter"):
            cluster.remove_broker(1)
    finally:
        cluster.stop()


class _traffic:
    """``with`` a :class:`labkit.producing.Traffic`, keeping what ``stop()`` counted."""

    def __init__(self, cluster, topic):
        from labkit.producing import Traffic

        self._t = Traffic(cluster, topic)
        self.counted = None

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.counted = self._t.stop()


@pytest.mark.integration
def test_a_dynamic_quorum_takes_and_gives_back_a_controller():
    import labkit

    cluster = labkit.start_cluster("operations", progress=False)
    try:
        before = ops.quorum(cluster)
        assert before.dynamic and sorted(before.voters) == [1, 2, 3]
        node = cluster.add_broker(controller=True).id
        assert node in ops.quorum(cluster).observers
        cluster.add_controller(node)
        assert sorted(ops.quorum(cluster).voters) == [1, 2, 3, node]
        cluster.remove_controller(node)
        after = ops.quorum(cluster)
        assert sorted(after.voters) == [1, 2, 3] and node in after.observers
    finally:
        cluster.stop()
    static = labkit.start_cluster("single-broker", progress=False)
    try:
        with pytest.raises(ClusterStateError, match="dynamic quorum"):
            static.add_broker(controller=True)
    finally:
        static.stop()


@pytest.mark.integration
def test_tiered_storage_offloads_segments_and_reads_offset_0_back(unique):
    import labkit
    from confluent_kafka import TopicPartition

    from labkit import perf
    from labkit.waiting import Wait

    cluster = labkit.start_cluster("tiered-storage", progress=False)
    try:
        topic = cluster.create_topic(unique("history"), partitions=1, config={
            "remote.storage.enable": "true", "local.retention.ms": 1000, "retention.ms": -1,
            "segment.bytes": 1_048_576, "file.delete.delay.ms": 1000})
        perf.java_producer(cluster, topic, 3500, 1000, acks="1")
        local = cluster.log_dir(1) / f"{topic}-0"
        remote = cluster.data_dir / "remote-tier" / "kafka-tiered-storage"
        Wait("segments offloaded", timeout=120, interval=0.5).until(
            lambda: len(list(local.glob("*.log"))) == 1 and len(list(remote.glob("*/*.log"))) >= 3)
        reader = cluster.consumer(unique("reader"))
        reader.assign([TopicPartition(topic, 0, 0)])
        first = Wait("offset 0", timeout=30, interval=0).until(
            lambda: (lambda m: m if m is not None and not m.error() else None)(reader.poll(1.0)))
        reader.close()
        assert first.offset() == 0
        with pytest.raises(ClusterStateError, match="cleanup.policy=delete"):
            cluster.create_topic(unique("compacted"), partitions=1,
                                 config={"cleanup.policy": "compact", "remote.storage.enable": "true"})
    finally:
        cluster.stop()


def test_every_profile_used_here_exists():
    from labkit.runtime.profiles import list_profiles

    assert {"operations", "four-brokers-racks", "tiered-storage"} <= set(list_profiles())
