"""Kafka Streams applications beside a lab cluster (labkit.services.streams): the topology compiled from a cell,
its errors, instances as managed JVMs (none outlives its kernel), what they tell about themselves.

Unit tests first (javac, no broker); the integration tests start single-broker clusters of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labkit.errors import LabkitError
from labkit.services import streams
from labkit.services.streamsbuild import StreamsCompileError, _native_name, compile_topology, java_literal, wrap
from labkit.services.streamstopology import Topology
from labkit.waiting import Wait

# ---------------------------------------------------------------- unit: the topology's Java


def test_a_compile_error_shows_the_learners_line_and_javacs_message_only():
    code = """
        builder.<String, String>stream(input)
               .filtr((k, v) -> v.contains("x"))
               .to(output);
        int n = "not a number";
    """
    with pytest.raises(StreamsCompileError) as caught:
        compile_topology(code, {"input": "a", "output": "b"})
    error = caught.value
    assert [line for line, _, _ in error.errors] == [2, 4]
    text = str(error)
    assert 'line 2: .filtr((k, v) -> v.contains("x"))' in text and "cannot find symbol" in text
    assert 'line 4: int n = "not a number";' in text and "String cannot be converted to int" in text
    # nothing of the generated wrapper: its class, its file, its imports
    for wrapper in ("Topology_", ".java", "public static void build", "import org.apache", "streams-topologies"):
        assert wrapper not in text, wrapper


def test_a_missing_brace_is_reported_at_the_end_of_the_code():
    with pytest.raises(StreamsCompileError) as caught:
        compile_topology("builder.stream(input).foreach((k, v) -> { System.out.println(v); );", {"input": "a"})
    assert caught.value.errors and all(line in (None, 1) for line, _, _ in caught.value.errors)


def test_a_topology_compiles_once_and_comes_from_the_cache_after():
    code = "builder.<String, String>stream(input).mapValues(v -> v + \"!\").to(output);"
    first = compile_topology(code, {"input": "in-x", "output": "out-x"})
    again = compile_topology(code, {"input": "in-x", "output": "out-x"})
    assert (first.directory / f"{first.class_name}.class").exists()
    assert again.class_name == first.class_name and again.seconds == 0.0
    assert compile_topology(code, {"input": "in-y", "output": "out-x"}).class_name != first.class_name


def test_params_become_final_java_variables():
    assert java_literal("input", 'he said "hi"') == 'final String input = "he said \\"hi\\"";'
    assert java_literal("n", 3) == "final int n = 3;" and java_literal("big", 2**40) == f"final long big = {2**40}L;"
    assert java_literal("flag", True) == "final boolean flag = true;"
    assert java_literal("topics", ["a", "b"]) == 'final List<String> topics = List.of("a", "b");'
    for bad in ("class", "builder", "two words", "1st"):
        with pytest.raises(LabkitError):
            java_literal(bad, "x")
    source, first = wrap("builder.stream(input);", {"input": "t"}, "Topology_x")
    assert source.splitlines()[first - 1] == "builder.stream(input);"


def test_rocksdb_native_library_name_for_this_machine():
    name = _native_name()
    assert name.startswith("librocksdbjni-") and name.endswith((".so", ".jnilib"))


def test_the_topology_description_as_data(tmp_path):
    (tmp_path / "topology.txt").write_text("Topologies: ...")
    (tmp_path / "topology.json").write_text(json.dumps({"subtopologies": [
        {"id": 0, "nodes": [
            {"name": "KSTREAM-SOURCE-0000000000", "type": "source", "topics": ["orders"], "predecessors": [],
             "successors": ["KSTREAM-KEY-SELECT-0000000001"]},
            {"name": "KSTREAM-KEY-SELECT-0000000001", "type": "processor", "stores": [],
             "predecessors": ["KSTREAM-SOURCE-0000000000"], "successors": ["s-repartition-sink"]},
            {"name": "s-repartition-sink", "type": "sink", "topics": ["s-repartition"],
             "predecessors": ["KSTREAM-KEY-SELECT-0000000001"], "successors": []}]},
        {"id": 1, "nodes": [
            {"name": "s-repartition-source", "type": "source", "topics": ["s-repartition"], "predecessors": [],
             "successors": ["KSTREAM-AGGREGATE-0000000002"]},
            {"name": "KSTREAM-AGGREGATE-0000000002", "type": "processor", "stores": ["counts"],
             "predecessors": ["s-repartition-source"], "successors": []}]}], "global_stores": []}))
    topology = Topology.read(tmp_path, "app-1")
    assert topology.source_topics() == ["orders", "s-repartition"] and topology.repartition_topics() == ["s-repartition"]
    assert topology.broker_name("s-repartition") == "app-1-s-repartition" and topology.broker_name("orders") == "orders"
    assert topology.stores() == ["counts"] and topology.nodes[1].label == "KEY-SELECT 1"
    figure = topology.figure(changelogs={"counts": "app-1-counts-changelog"})
    names = {trace.name for trace in figure.data}
    assert {"topic", "internal topic", "processor", "sink", "source", "store"} <= names


# ---------------------------------------------------------------- integration: instances on a real cluster


@pytest.mark.integration
@pytest.mark.parametrize("fresh_cluster", ["single-broker"], indirect=True)
def test_an_application_runs_says_what_it_does_and_restarts(fresh_cluster, unique):
    cluster = fresh_cluster
    source, counted = (cluster.create_topic(unique(name), partitions=3) for name in ("words", "counted"))
    producer = cluster.producer(partitioner="murmur2_random")
    for i in range(300):
        producer.produce(source, key=f"k{i}", value=["red", "green", "blue"][i % 3])
    producer.flush(10)
    app = streams.app(cluster, """
        builder.<String, String>stream(source)
               .selectKey((k, colour) -> colour)
               .groupByKey().count(Materialized.as("per-colour"))
               .toStream().mapValues(n -> Long.toString(n)).to(counted);
    """, name=unique("colours"), params={"source": source, "counted": counted})
    lag = app.wait_caught_up(120)
    assert int(lag["lag"].sum()) == 0 and int(lag[lag["topic"] == source]["committed"].sum()) == 300
    assert {row["key"]: row["value"] for row in app.store("per-colour")} == {"red": 100, "green": 100, "blue": 100}
    internal = app.internal_topics()
    assert any(t.endswith("-per-colour-changelog") for t in internal) and any(t.endswith("-repartition") for t in internal)
    assert app.topology.repartition_topics() and app.changelogs()["per-colour"] in internal
    metrics = app.metrics("process-total")
    assert metrics[metrics["group"] == "stream-thread-metrics"]["value"].sum() >= 300
    assert "LABKIT state REBALANCING -> RUNNING" in app.instances[0].log(grep="LABKIT")
    assert str(cluster.data_dir) in str(app.instances[0].directory), "its state and log live in the cluster's directory"
    # killed and started on an empty state directory: the store comes back from the changelog
    instance = app.instances[0]
    assert len(app.members()) == 1
    instance.kill()
    assert instance.state == "killed"
    Wait("the group to drop the killed instance", timeout=60).until(lambda: app.members() == [])
    instance.start(wipe_state=True, timeout=120)
    restored = instance.restores()
    assert int(restored[restored["store"] == "per-colour"]["records"].sum()) == 300
    assert {row["key"]: row["value"] for row in app.store("per-colour")} == {"red": 100, "green": 100, "blue": 100}
    app.stop()
    assert not app.running


@pytest.mark.integration
@pytest.mark.parametrize("fresh_cluster", ["single-broker"], indirect=True)
def test_an_instance_that_stops_with_an_error_says_why(fresh_cluster, unique):
    cluster = fresh_cluster
    out = cluster.create_topic(unique("out"), partitions=1)
    missing = unique("no-such-topic")
    with pytest.raises(streams.StreamsAppError) as caught:
        streams.app(cluster, "builder.<String, String>stream(missing).to(out);", name=unique("broken"),
                    params={"missing": missing, "out": out}, timeout=90)
    assert "MissingSourceTopicException" in caught.value.reason
    assert caught.value.log_path is not None and missing in caught.value.log_path.read_text()


CHILD = textwrap.dedent("""
    import sys, time, labkit
    from labkit.services import streams
    c = labkit.start_cluster("single-broker", progress=False)
    t = c.create_topic("in", partitions=1)
    app = streams.app(c, "builder.<String, String>stream(t).groupByKey().count(Materialized.as(\\"n\\"));",
                      name="survivor", params={"t": t}, instances=2)
    print(c.data_dir, flush=True)
    time.sleep(600)
""")


@pytest.mark.integration
def test_instances_die_with_their_kernel_even_on_sigkill(jvm_pids):
    """A kernel killed with SIGKILL while two instances run leaves no JVM behind (broker and instances alike)."""
    from conftest import java_pids_of

    temp = Path(os.environ.get("TMPDIR", "/tmp"))
    unpacked = set(temp.glob("librocksdbjni*"))
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line, "the child did not start its application"
    data_dir = Path(line)
    jvms = jvm_pids(str(data_dir))
    instances = [p for p in jvms if "LabStreams" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
    assert len(instances) == 2 and len(jvms) == 3, "two Kafka Streams instances and the broker"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    Wait("every JVM to die after its owner was SIGKILLed", timeout=30, interval=0.2).until(
        lambda: java_pids_of(str(data_dir)) == [])
    Wait("the cluster's directory to be removed", timeout=10).until(lambda: not data_dir.exists())
    assert set(temp.glob("librocksdbjni*")) <= unpacked, \
        "RocksDB's native library is loaded from the cache, never unpacked into the temp directory"
