"""Kafka Connect workers and MirrorMaker 2 beside lab clusters: lifecycle, the REST client, replication,
checkpoints and offset translation (checked against what MirrorMaker itself writes), and two named clusters.

Unit tests first (no broker); the integration tests share one single-broker cluster with a worker
(``worker``) and one pair of clusters with MirrorMaker 2 between them (``pair``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import run_patiently
import labkit
from labkit.backends.clusterset import COLOURS, ClusterSet
from labkit.errors import BackendError, LabkitError
from labkit.services import connect as lc
from labkit.services import mirror as mm
from labkit.waiting import Deadline, Wait

# ---------------------------------------------------------------- unit: formats, names, configs


def test_checkpoints_round_trip_through_the_binary_format():
    cp = mm.Checkpoint("zahlungen-é", "primary.orders", 7, 2**40 + 3, 12, "meta")
    key, value = mm.encode_checkpoint(cp)
    assert key[:2] == len("zahlungen-é".encode()).to_bytes(2, "big"), "a STRING's length counts bytes"
    assert mm.decode_checkpoint(key, value) == cp
    with pytest.raises(ValueError):
        mm.decode_checkpoint(key + b"\0", value)


def test_the_real_record_from_the_prototype_decodes():
    key = bytes.fromhex("000762696c6c696e67000e7072696d6172792e6f726465727300000000")
    value = bytes.fromhex("0000000000000000002800000000000000010000")
    assert mm.decode_checkpoint(key, value) == mm.Checkpoint("billing", "primary.orders", 0, 40, 1, "")


def test_translation_uses_the_last_sync_at_or_before_the_commit():
    syncs = [mm.OffsetSync("orders", 0, 42, 0), mm.OffsetSync("orders", 0, 142, 100), mm.OffsetSync("orders", 1, 0, 0)]
    assert mm.translate(syncs, "orders", 0, 142) == 100          # exactly a sync: exact
    assert mm.translate(syncs, "orders", 0, 120) == 1            # past a sync: one after it, never further
    assert mm.translate(syncs, "orders", 0, 10) == -1            # older than every sync
    assert mm.translate(syncs, "orders", 1, 5) == 1


def test_names_follow_the_default_replication_policy():
    assert mm.remote_topic("primary", "orders") == "primary.orders"
    assert mm.checkpoints_topic("primary") == "primary.checkpoints.internal"
    assert mm.offset_syncs_topic("dr") == "mm2-offset-syncs.dr.internal"


class _FakeCluster:
    def __init__(self, label, brokers=1):
        self.label, self.brokers, self.stopped = label, [object()] * brokers, False
        self.bootstrap_servers = f"127.0.0.1:{9000 + brokers}"

    def stop(self):
        self.stopped = True


def test_a_flows_connectors_copy_bytes_and_fit_their_clusters():
    configs = mm.connector_configs(_FakeCluster("primary", 3), _FakeCluster("dr", 1), "primary", "dr", "orders",
                                   offset_lag_max=10)
    assert sorted(configs) == ["mirror-primary-dr-checkpoint", "mirror-primary-dr-heartbeat", "mirror-primary-dr-source"]
    for config in configs.values():
        assert config["key.converter"] == config["value.converter"] == lc.BYTES_CONVERTER
        assert config["replication.factor"] == 1 and config["offset-syncs.topic.replication.factor"] == 3
        assert config["offset.lag.max"] == 10
    assert configs["mirror-primary-dr-checkpoint"]["sync.group.offsets.enabled"] is False


def test_a_cluster_set_is_indexed_by_name_and_stops_everything():
    a, b = _FakeCluster("primary"), _FakeCluster("dr")
    clusters = ClusterSet([a, b])
    first, second = clusters
    assert (first, second) == (a, b) and clusters["dr"] is b and clusters.primary is a
    assert clusters.names == ["primary", "dr"]
    with pytest.raises(KeyError, match="primary, dr"):
        clusters["nope"]
    with clusters:
        pass
    assert a.stopped and b.stopped
    assert len(set(COLOURS)) == len(COLOURS)


def test_cluster_names_must_be_distinct_and_clusters_their_own():
    with pytest.raises(BackendError, match="distinct"):
        labkit.start_clusters(["dr", "dr"])
    with pytest.raises(BackendError, match="one external cluster"):
        labkit.start_clusters(["a", "b"], backend="external")


def test_a_named_clusters_view_carries_its_name_and_colour():
    from labkit.view.render import cluster_heading_html

    assert cluster_heading_html(None, None) == ""
    assert "primary" in cluster_heading_html("primary", "#1f77b4") and "#1f77b4" in cluster_heading_html("primary",
                                                                                                          "#1f77b4")


def test_plugin_jars_are_only_what_kafkas_lib_dir_lacks():
    dist = labkit.ensure_distribution(progress=False)
    artifacts = lc.plugin_artifacts(dist)
    assert {a for _, a, _ in artifacts.coordinates} == set(lc.PLUGIN_MODULES)
    assert "connect-runtime" in artifacts.excludes and "kafka-clients" in artifacts.excludes


# ---------------------------------------------------------------- integration: one worker


@pytest.fixture(scope="module")
def worker():
    c = labkit.start_cluster("single-broker", progress=False)
    try:
        yield c.connect_worker()
    finally:
        c.stop()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.integration
def test_the_plugins_are_three_small_jars_in_the_cache():
    jars = lc.ensure_plugins(progress=False)
    assert sorted(re.sub(r"-[\d.]+\.jar$", "", j.name) for j in jars) == sorted(lc.PLUGIN_MODULES)
    assert sum(j.stat().st_size for j in jars) < 1_000_000


@pytest.mark.integration
def test_a_worker_is_ready_small_and_keeps_its_state_in_kafka(worker):
    assert worker.ready_seconds is not None and worker.running
    assert worker.cluster.connect_worker() is worker, "one worker per cluster"
    assert worker.info()["version"] == labkit.ensure_distribution(progress=False).version
    kinds = {p["class"].rsplit(".", 1)[-1] for p in worker.plugins()}
    assert {"FileStreamSourceConnector", "FileStreamSinkConnector", "MirrorSourceConnector",
            "MirrorCheckpointConnector", "MirrorHeartbeatConnector"} <= kinds
    topics = worker.cluster.topics(internal=True)
    assert {f"{worker.group}-configs", f"{worker.group}-offsets", f"{worker.group}-status"} <= set(topics)
    rss_kb = int(Path(f"/proc/{worker.process.pid}/status").read_text().split("VmRSS:")[1].split()[0])
    assert rss_kb < 400 * 1024, "service_load discovery: no reflective scan of every jar"


@pytest.mark.integration
def test_the_rest_client_drives_a_connector_through_its_life(worker, tmp_path, unique):
    c = worker.cluster
    topic = c.create_topic(unique("lines"), partitions=1)
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("one\ntwo\nthree\n")
    name_src, name_sink = unique("src"), unique("sink")
    assert worker.validate("FileStreamSinkConnector", {"connector.class": "FileStreamSink"})["error_count"] > 0
    worker.create(name_src, {"connector.class": "FileStreamSource", "file": str(source), "topic": topic})
    worker.create(name_sink, {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic})
    assert worker.wait_for(name_sink)["type"] == "sink"
    Wait("3 lines", timeout=30).until(lambda: _lines(sink) == ["one", "two", "three"])
    assert {name_src, name_sink} <= set(worker.connectors())
    # the task used the topic before it wrote the lines; the worker reads that back from its status topic
    Wait("the sink's active topic", timeout=30).until(lambda: worker.topics(name_sink) == [topic])
    assert worker.tasks(name_src)[0]["id"]["task"] == 0
    assert worker.overview().set_index("connector").loc[name_sink, "state"] == "RUNNING"

    def states(name):
        status = worker.status(name)
        return [status["connector"]["state"], *(t["state"] for t in status["tasks"])]

    worker.pause(name_sink)                       # pause, resume and stop return once the worker has acted
    assert states(name_sink) == ["PAUSED", "PAUSED"]
    worker.resume(name_sink)
    assert states(name_sink) == ["RUNNING", "RUNNING"]
    assert worker.restart(name_sink)["connector"]["state"] in ("RESTARTING", "RUNNING")
    worker.wait_for(name_sink)

    # KIP-875: offsets are read any time, changed only while STOPPED
    Wait("the sink's offset (committed every second)", timeout=30).until(
        lambda: [o["offset"] for o in worker.offsets(name_sink)] == [{"kafka_offset": 3}])
    Wait("the source's offset (flushed every second)", timeout=30).until(
        lambda: [o["offset"] for o in worker.offsets(name_src)] == [{"position": len(source.read_bytes())}])
    with pytest.raises(lc.ConnectError) as refused:
        worker.reset_offsets(name_sink)
    assert refused.value.status == 400
    worker.stop(name_sink)
    assert states(name_sink) == ["STOPPED"]
    worker.alter_offsets(name_sink, [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                                      "offset": {"kafka_offset": 1}}])
    worker.resume(name_sink)
    Wait("two lines again", timeout=30).until(lambda: _lines(sink) == ["one", "two", "three", "two", "three"])
    worker.stop(name_src)
    assert states(name_src) == ["STOPPED"]
    assert "reset" in worker.reset_offsets(name_src).lower()

    for name in (name_src, name_sink):
        worker.delete(name)
    with pytest.raises(lc.ConnectError) as missing:
        worker.status(name_src)
    assert missing.value.status == 404 and "connectors()" in str(missing.value)


@pytest.mark.integration
def test_a_poison_record_fails_the_task_and_a_dead_letter_queue_keeps_it(worker, tmp_path, unique):
    c = worker.cluster
    topic, dlq, name = c.create_topic(unique("payments"), partitions=1), unique("dlq"), unique("payments-sink")
    out = tmp_path / "payments.txt"
    producer = c.producer()
    for value in ['{"id": 1}', '{"id": 2}', "not json", '{"id": 3}']:
        producer.produce(topic, value=value)
    producer.flush(10)
    config = {"connector.class": "FileStreamSink", "file": str(out), "topics": topic,
              "value.converter": lc.JSON_CONVERTER, "value.converter.schemas.enable": False}
    worker.create(name, config)
    failed = worker.wait_task(name, "FAILED")
    assert "JsonParseException" in lc.first_line(failed["trace"]) and _lines(out) == []
    assert worker.status(name)["connector"]["state"] == "RUNNING"
    worker.create(name, {**config, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                         "errors.deadletterqueue.topic.replication.factor": 1,
                         "errors.deadletterqueue.context.headers.enable": True})
    Wait("3 good records", timeout=30).until(lambda: len(_lines(out)) == 3)
    dead = Wait("the dead letter", timeout=30).until(lambda: c.read_all(dlq) if dlq in c.topics() else None)
    assert [r.value for r in dead] == [b"not json"]
    worker.delete(name)


@pytest.mark.integration
def test_avro_through_the_registry_reaches_a_sink_as_structs(worker, tmp_path, unique):
    from labkit.services import registry

    if registry.built() is None or not lc.avro_converter_jars():
        pytest.skip("no schema registry or Avro converter in this lab (make setup builds them)")
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    c = worker.cluster
    c.start_schema_registry()
    topic, out, name = c.create_topic(unique("avro"), partitions=1), tmp_path / "avro.txt", unique("avro-sink")
    serialize = AvroSerializer(c.schema_registry(), '{"type":"record","name":"P","fields":[{"name":"id","type":"int"}]}')
    producer = c.producer()
    for i in (1, 2):
        producer.produce(topic, value=serialize({"id": i}, SerializationContext(topic, MessageField.VALUE)))
    producer.flush(10)
    worker.create(name, {"connector.class": "FileStreamSink", "file": str(out), "topics": topic,
                         **lc.avro_converter(c.schema_registry_url)})
    Wait("2 structs", timeout=60).until(lambda: _lines(out) == ["Struct{id=1}", "Struct{id=2}"])
    worker.delete(name)


@pytest.mark.integration
def test_a_worker_stops_with_its_cluster(jvm_pids):
    c = labkit.start_cluster("single-broker", progress=False)
    worker = c.connect_worker()
    marker = str(c.data_dir)
    assert any(lc.MAIN_CLASS in Path(f"/proc/{p}/cmdline").read_text() for p in jvm_pids(marker))
    c.stop()
    assert jvm_pids(marker) == [] and not worker.running


@pytest.mark.integration
def test_no_worker_outlives_a_killed_kernel(jvm_pids):
    from test_lifecycle import kill_owner, start_child

    proc, data_dir = start_child("single-broker", "c.connect_worker()")
    assert len(jvm_pids(str(data_dir))) == 2, "a broker and a Connect worker"
    kill_owner(proc, data_dir, "the broker and the worker")


# ---------------------------------------------------------------- integration: two clusters, MirrorMaker 2


@pytest.fixture(scope="module")
def pair():
    clusters = labkit.start_clusters(["primary", "dr"], profile="single-broker", progress=False)
    try:
        yield clusters
    finally:
        clusters.stop()


@pytest.mark.integration
def test_two_named_clusters_in_one_notebook(pair):
    primary, dr = pair
    assert (primary.label, dr.label) == ("primary", "dr") and primary.colour != dr.colour
    assert "'primary'" in repr(primary) and "'dr'" in repr(dr) and "dr" in repr(pair)
    assert primary.colour in primary._repr_html_()
    assert primary.bootstrap_servers != dr.bootstrap_servers and primary.data_dir != dr.data_dir
    views = [c.view(groups=False) for c in pair]
    try:
        for view, c in zip(views, pair):
            assert c.colour in view.widget.layout.border and c.label in view.widget.children[0].value
            assert c.label in view._repr_mimebundle_()["text/html"] and c.label in repr(view)
    finally:
        for view in views:
            view.close()


@pytest.mark.integration
def test_two_clusters_stop_together(jvm_pids):
    clusters = labkit.start_clusters(["east", "west"], profile="single-broker", progress=False)
    markers = [str(c.data_dir) for c in clusters]
    assert all(jvm_pids(m) for m in markers)
    clusters.stop()
    assert all(c.stopped for c in clusters) and all(jvm_pids(m) == [] for m in markers)


def _formatter_output(cluster, topic: str, formatter: str, count: int) -> list[str]:
    """What Kafka's own formatter for a MirrorMaker record prints for the first ``count`` records of ``topic``."""
    from labkit.runtime.environment import kafka_spec
    from labkit.runtime.jvm import find_java

    dist = labkit.ensure_distribution(progress=False)
    plugins = lc.ensure_plugins(progress=False, dist=dist)
    classpath = ":".join([str(dist.lib_dir / "*"), str(plugins[0].parent / "*")])
    cmd = [str(find_java().executable), "-Xmx256m", "-XX:+UseSerialGC", "-cp", classpath,
           f"-Dlog4j2.configurationFile={kafka_spec().tools_log4j_config}",
           "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", cluster.bootstrap_servers,
           "--topic", topic, "--from-beginning", "--max-messages", str(count), "--timeout-ms", "120000",
           "--formatter", formatter]  # the tool's own idle bound, in wall seconds: generous, it ends at `count`
    out = run_patiently(cmd, 180, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.integration
def test_mirrormaker_replicates_follows_and_translates(pair, unique):
    from confluent_kafka import TopicPartition

    primary, dr = pair
    orders = primary.create_topic(unique("orders"), partitions=2, config={"retention.ms": 86400000})
    producer = primary.producer(enable_idempotence=True)
    for i in range(300):
        producer.produce(orders, key=str(i % 7), value=f"order-{i}")
    producer.flush(10)
    for future in primary.admin().delete_records([TopicPartition(orders, p, 20) for p in (0, 1)]).values():
        future.result()
    flow = mm.mirror(primary, dr, topics=orders)
    remote = flow.wait_for_topic(orders)
    flow.wait_caught_up(orders)
    assert remote == f"primary.{orders}" and flow.worker is dr.connect_worker()
    for p in (0, 1):
        assert [r.value for r in primary.read_all(orders) if r.partition == p] == \
            [r.value for r in dr.read_all(remote) if r.partition == p]
    assert [p.log_start_offset for p in dr.describe_topic(remote).partitions] == [0, 0]

    consumer = primary.consumer("billing", enable_auto_commit=False)
    consumer.assign([TopicPartition(orders, 0, 20), TopicPartition(orders, 1, 20)])
    read = 0
    deadline = Deadline(30)  # a quiet machine's seconds
    while read < 150 and not deadline.expired():
        msg = consumer.poll(1.0)
        read += msg is not None and not msg.error()
    consumer.commit(asynchronous=False)
    consumer.close()
    committed = mm.committed(primary, "billing", orders)

    def checkpointed():
        found = flow.checkpoints("billing")
        return found if {c.partition: c.upstream_offset for c in found} == committed else None

    cps = Wait("billing's checkpoints of its commits", timeout=60, evidence=lambda: (
        f"commits {committed}, checkpoints {flow.checkpoints('billing')}, connectors {flow.status()}")).until(checkpointed)
    syncs = flow.offset_syncs()
    true_position = {}
    dr_offsets = {r.value: r.offset for r in dr.read_all(remote)}
    for r in primary.read_all(orders):
        if r.offset == committed.get(r.partition):
            true_position[r.partition] = dr_offsets[r.value]
    for cp in cps:
        assert cp.topic == remote and cp.group == "billing"
        full = mm.translate(syncs, orders, cp.partition, cp.upstream_offset)
        assert cp.downstream_offset <= full, "MirrorMaker keeps fewer syncs than all of them, never more"
        assert full <= true_position.get(cp.partition, full), "translation never points past the group's position"
    assert mm.translated_offsets(dr, "billing", "primary", orders) == {c.partition: c.downstream_offset for c in cps}

    # Kafka's own formatters print what the Python decoders read
    shown = _formatter_output(dr, flow.checkpoints_topic, "org.apache.kafka.connect.mirror.formatters.CheckpointFormatter",
                              len([r for r in dr.read_all(flow.checkpoints_topic)]))
    decoded = [mm.decode_checkpoint(r.key, r.value) for r in dr.read_all(flow.checkpoints_topic)]
    assert shown == [f"Checkpoint{{consumerGroupId={c.group}, topicPartition={c.topic}-{c.partition}, "
                     f"upstreamOffset={c.upstream_offset}, downstreamOffset={c.downstream_offset}, "
                     f"metadata={c.metadata}}}" for c in decoded]
    beats = flow.heartbeats()
    assert beats and {(h.source, h.target) for h in beats} == {("primary", "dr")}
    assert all(abs(h.timestamp_ms / 1000 - time.time()) < 600 for h in beats)
    assert len(mm.replication_latency(primary, dr, orders, remote, count=20)) == 20


@pytest.mark.integration
def test_loss_at_a_disaster_is_the_replication_lag_and_it_arrives_late(pair, unique):
    primary, dr = pair
    events = primary.create_topic(unique("events"), partitions=1)
    flow = mm.mirror(primary, dr, topics=events)
    remote = flow.wait_for_topic(events)
    source = flow.connector("source")
    flow.worker.pause(source)                                    # a replication lag of the whole pause
    producer = primary.producer(acks="all")
    for i in range(50):
        producer.produce(events, value=f"e{i}")
    assert producer.flush(10) == 0, "all 50 acknowledged by primary"
    primary.kill_broker(1)
    assert dr.read_all(remote) == [], "acknowledged on primary, nothing on dr: lost if primary never returns"
    primary.start_broker(1)
    flow.worker.resume(source)
    Wait("the late records on dr", timeout=60).until(lambda: len(dr.read_all(remote)) == 50)
    flow.stop()


@pytest.mark.integration
def test_active_active_does_not_loop(pair, unique):
    primary, dr = pair
    name = unique("ledger")
    for c in pair:
        c.create_topic(name, partitions=1)
        producer = c.producer()
        producer.produce(name, value=f"from {c.label}")
        producer.flush(10)
    pattern = f".*{name}(-later)?"   # MirrorMaker 2 matches the whole name: the later topic must be in it too
    there = mm.mirror(primary, dr, topics=pattern)
    back = mm.mirror(dr, primary, topics=pattern)
    assert back.worker is primary.connect_worker() and there.worker is dr.connect_worker()
    Wait("each side's copy", timeout=60).until(
        lambda: f"dr.{name}" in primary.topics() and f"primary.{name}" in dr.topics())
    # A loop would appear at a flow's next topic refresh. A topic created on both sides now is mirrored only by
    # such a refresh: once both copies of it exist, each flow has looked at every topic again, copies included.
    later = f"{name}-later"
    for c in pair:
        c.create_topic(later, partitions=1)
    Wait("a topic refresh of each flow", timeout=60).until(
        lambda: f"dr.{later}" in primary.topics() and f"primary.{later}" in dr.topics())
    assert f"dr.primary.{name}" not in primary.topics() and f"primary.dr.{name}" not in dr.topics()
    for flow in (there, back):
        assert all(state.startswith("RUNNING") for state in flow.status().values())
        flow.stop()


@pytest.mark.integration
def test_mirroring_needs_the_targets_worker_and_two_aliases(pair):
    primary, dr = pair
    with pytest.raises(LabkitError, match="target cluster"):
        mm.mirror(primary, dr, worker=primary.connect_worker())
    with pytest.raises(LabkitError, match="different aliases"):
        mm.mirror(primary, dr, source_alias="x", target_alias="x")
