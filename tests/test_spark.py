"""labkit.spark: the connector in the cache, session settings, and real Structured Streaming on a real cluster.

Unit tests need neither Kafka nor Spark. Integration tests share one Spark session on the
session's cluster; the checkpoint test counts what each sink holds after a restart and after
a replayed micro-batch.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import labkit.spark as ls
import labkit.spark.driver as lsd
from labkit import generators as g
from labkit.errors import DistributionError, LabkitError, OfflineError
from labkit.waiting import Deadline

from conftest import ClusterElsewhere, java_pids_of, run_patiently

# ---------------------------------------------------------------- unit: connector and settings


@pytest.mark.parametrize("name, artifact", [
    ("kafka-clients-3.9.2.jar", "kafka-clients"),
    ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
    ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
    ("commons-pool2-2.12.1.jar", "commons-pool2"),
    ("no-version.jar", "no-version"),
])
def test_jar_artifact(name, artifact):
    assert ls.jar_artifact(name) == artifact


def test_only_jars_pyspark_lacks_are_kept():
    resolved = [Path("kafka-clients-3.9.2.jar"), Path("slf4j-api-2.0.16.jar"), Path("lz4-java-1.8.0.jar")]
    assert ls.keep_missing_jars(resolved, {"slf4j-api", "lz4-java"}) == [Path("kafka-clients-3.9.2.jar")]


def test_pyspark_is_a_release_whose_connector_is_cached_by_setup():
    assert ls.pyspark_version() == "4.2.0"
    jars = ls.cached_connector()
    assert jars, "make setup fetches the connector"
    names = {ls.jar_artifact(j.name) for j in jars}
    assert {"spark-sql-kafka-0-10_2.13", "kafka-clients"} <= names
    assert not names & ls._pyspark_jar_names(), "nothing pyspark already ships is kept twice"


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def empty_repository():
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/maven2"
    server.shutdown()


def test_a_version_without_a_connector_is_a_one_line_error_and_leaves_nothing_in_the_cache(
        empty_repository, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path))
    with pytest.raises(DistributionError, match="not on .* \\(404\\)") as err:
        ls.ensure_connector("9.9.9", progress=False, repository=empty_repository)
    assert "pyspark" in err.value.hint
    assert not list(tmp_path.glob("spark-kafka-*")), "a failed fetch leaves no half-made cache entry"


def test_offline_without_a_cached_connector_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path))
    with pytest.raises(OfflineError, match="cannot be reached") as err:
        ls.ensure_connector("9.9.8", progress=False, repository="http://127.0.0.1:1/maven2")
    assert "make setup" in err.value.hint


def test_session_conf_defaults_suit_a_small_machine_and_everything_can_be_overridden(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    cluster = ClusterElsewhere("127.0.0.1:9")
    jars = [Path("/x/a.jar"), Path("/x/b.jar")]
    conf = ls.session_conf(cluster, jars, tmp_path)
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.jars"] == "/x/a.jar,/x/b.jar"
    assert conf["spark.sql.streaming.checkpointLocation"] == str(tmp_path / "checkpoints")
    assert conf["spark.local.dir"].startswith(str(tmp_path))
    monkeypatch.setenv("SPARK_MASTER", "spark://teacher:7077")
    assert ls.session_conf(cluster, jars, tmp_path)["spark.master"] == "spark://teacher:7077"
    custom = ls.session_conf(cluster, jars, tmp_path, master="local[1]", checkpoint_root="/shared/cp",
                             **{"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": True})
    assert (custom["spark.master"], custom["spark.sql.shuffle.partitions"], custom["spark.ui.enabled"]) == \
        ("local[1]", "4", "true")
    assert custom["spark.sql.streaming.checkpointLocation"] == "/shared/cp"


def test_a_session_beside_a_cluster_labkit_did_not_start_keeps_its_files_with_that_cluster():
    # a grading's notebook reaches the grader's cluster by address: its Spark files go with that cluster's
    # other files (a scratch directory its watchdog removes should the kernel die), never loose in /tmp
    cluster = ClusterElsewhere()
    base = ls.workdir(cluster)
    assert ls.workdir(cluster) == base and (base / "checkpoints").is_dir()
    assert base.is_relative_to(cluster._services_supervisor.root)
    cluster.stop()
    assert not base.exists()
    again = ls.workdir(cluster)  # used after the stop: a directory of a new supervisor, not the old one made again
    assert again != base and again.is_relative_to(cluster._services_supervisor.root) and again.is_dir()
    cluster.stop()
    assert not again.exists()


def test_kafka_options_carry_the_cluster_and_stringify_values():
    cluster = ClusterElsewhere("127.0.0.1:9,127.0.0.1:10")
    options = ls.kafka_options(cluster, subscribe="t", failOnDataLoss=False, maxOffsetsPerTrigger=10,
                               startingOffsets={"t": {"0": -2}})
    assert options["kafka.bootstrap.servers"] == "127.0.0.1:9,127.0.0.1:10"
    assert options["failOnDataLoss"] == "false" and options["maxOffsetsPerTrigger"] == "10"
    assert json.loads(options["startingOffsets"]) == {"t": {"0": -2}}


def test_forget_last_commit_removes_only_the_newest_commit(tmp_path):
    commits = tmp_path / "commits"
    commits.mkdir()
    for n in (0, 1, 2, 10):
        (commits / str(n)).write_text("v1\n{}")
        (commits / f".{n}.crc").write_text("")
    assert ls.committed_batches(str(tmp_path)) == [0, 1, 2, 10]
    assert ls.forget_last_commit(str(tmp_path)) == 10
    assert ls.committed_batches(str(tmp_path)) == [0, 1, 2]
    assert not (commits / ".10.crc").exists() and (commits / ".2.crc").exists()


def test_forget_last_commit_on_an_unused_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(LabkitError, match="no committed micro-batch"):
        ls.forget_last_commit(str(tmp_path))


def _progress(batch, rows, start, end, watermark="2025-01-01T12:00:00.000Z"):
    return {"batchId": batch, "numInputRows": rows, "inputRowsPerSecond": rows / 2, "processedRowsPerSecond": rows,
            "durationMs": {"triggerExecution": 100 + batch}, "eventTime": {"watermark": watermark},
            "sources": [{"startOffset": json.dumps({"t": start}) if start else None, "endOffset": {"t": end}}],
            "sink": {"numOutputRows": rows // 10}}


def test_progress_table_and_figure_read_offsets_per_batch():
    progress = [_progress(0, 100, None, {"0": 50, "1": 50}), _progress(1, 40, {"0": 50, "1": 50},
                                                                      {"1": 70, "0": 70})]
    table = ls.progress_table(progress)
    assert list(table.index) == [0, 1]
    assert table.loc[1, "start offsets"] == {0: 50, 1: 50} and table.loc[1, "end offsets"] == {0: 70, 1: 70}
    assert table["input rows"].sum() == 140 and table.loc[1, "duration ms"] == 101
    fig = ls.progress_figure(progress)
    assert [t.name for t in fig.data] == ["input rows/s", "processed rows/s", "batch duration ms"]
    assert list(fig.data[1].y) == [100, 40]
    assert ls.progress_table([]).empty


# ---------------------------------------------------------------- integration: real Spark, real Kafka

SCHEMA = "event_id STRING, page STRING, user STRING, event_time TIMESTAMP"


@pytest.fixture(scope="module")
def spark(cluster):
    session = ls.session(cluster, app_name="labkit-tests", progress=False)
    yield session
    ls.stop_session()


def _windowed_counts(spark, cluster, topic):
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("kafka")
           .options(**ls.kafka_options(cluster, subscribe=topic, startingOffsets="earliest")).load())
    return (raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("v")).select("v.*")
            .withWatermark("event_time", "30 seconds")
            .groupBy(F.window("event_time", "1 minute").alias("window"), "page").count()
            .select(F.col("window.start").alias("window_start"), "page", "count"))


ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"     # what to_json writes for a UTC timestamp: 2025-01-01T12:00:00.000Z


def _rows(df):
    """(window start as ISO text, page, count) rows: independent of the Python process's time zone."""
    return [(r.ws, r.page, r["count"]) for r in df.selectExpr(f"date_format(window_start, \"{ISO}\") AS ws",
                                                              "page", "count").collect()]


def _expected(events):
    return Counter((start.strftime("%Y-%m-%dT%H:%M:%S.000Z"), page, n)
                   for (start, page), n in events.expected_window_counts().items())


@pytest.mark.integration
@pytest.mark.slow
def test_the_session_is_shared_per_cluster_and_reads_kafka(spark, cluster, unique):
    assert ls.session(cluster, progress=False) is spark
    assert spark.conf.get("spark.master") == "local[2]"
    topic = cluster.create_topic(unique("batch-read"), partitions=3)
    events = g.generate_page_views(seed=1, rounds=2)
    g.send(cluster, topic, list(events))
    df = spark.read.format("kafka").options(**ls.kafka_options(cluster, subscribe=topic,
                                                                 startingOffsets="earliest")).load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.selectExpr("CAST(key AS STRING) AS key", "partition").collect()
    assert len(rows) == len(events)
    assert Counter((r.key, r.partition) for r in rows) == \
        Counter((r.key.decode(), r.partition) for r in cluster.read_all(topic)), "the rows are the stored records"


@pytest.mark.integration
@pytest.mark.slow
def test_windowed_count_with_watermark_equals_the_generators_answer(spark, cluster, unique):
    topic = cluster.create_topic(unique("views"), partitions=3)
    events = g.generate_page_views(seed=21)
    query = (_windowed_counts(spark, cluster, topic).writeStream.format("memory")
             .queryName(unique("counts").replace("-", "_")).outputMode("append")
             .option("checkpointLocation", ls.checkpoint_dir(cluster, unique("counts"))).start())
    try:
        for r in events.rounds():
            g.send(cluster, topic, r)
            query.processAllAvailable()
        progress = ls.wait_until_idle(query)
        got = Counter(_rows(spark.table(query.name)))
    finally:
        query.stop()
    assert got == _expected(events)
    kinds = events.by_kind()
    assert sum(n for _, _, n in got) == kinds[g.ON_TIME] + kinds[g.LATE], "late counted, too late dropped"
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    assert 0 < dropped <= kinds[g.TOO_LATE]


@pytest.mark.integration
@pytest.mark.slow
def test_checkpoint_restart_file_sink_exactly_once_kafka_sink_at_least_once(spark, cluster, unique):
    """Stop mid-stream, send while stopped, restart: both sinks exact. Replay the last batch (as after a
    crash before its commit): the file sink skips it, the Kafka sink writes its windows again."""
    from pyspark.sql import functions as F

    source = cluster.create_topic(unique("views"), partitions=3)
    results = cluster.create_topic(unique("results"), partitions=1)
    out_dir = str(ls.workdir(cluster) / "output" / unique("counts"))
    kafka_cp, files_cp = ls.checkpoint_dir(cluster, unique("to-kafka")), ls.checkpoint_dir(cluster, unique("files"))
    events = g.generate_page_views(seed=8)
    rounds = events.rounds()

    def start():
        counts = _windowed_counts(spark, cluster, source)
        to_kafka = (counts.select(F.col("page").alias("key"), F.to_json(F.struct("*")).alias("value"))
                    .writeStream.format("kafka").options(**ls.kafka_options(cluster, topic=results))
                    .option("checkpointLocation", kafka_cp).outputMode("append").start())
        to_files = (counts.writeStream.format("parquet").option("path", out_dir)
                    .option("checkpointLocation", files_cp).outputMode("append").start())
        return to_kafka, to_files

    def run(rounds_, queries):
        for r in rounds_:
            g.send(cluster, source, r)
            for q in queries:
                q.processAllAvailable()
        for q in queries:
            ls.wait_until_idle(q)

    def in_kafka():
        values = [json.loads(r.value) for r in cluster.read_all(results)]
        return Counter((v["window_start"], v["page"], v["count"]) for v in values)

    def in_files():
        return Counter(_rows(spark.read.parquet(out_dir)))

    expected = _expected(events)
    queries = start()
    try:
        run(rounds[:4], queries)
        for q in queries:
            q.stop()
        g.send(cluster, source, rounds[4])           # arrives while the queries are down
        queries = start()
        run([[]] + rounds[5:], queries)
        assert in_kafka() == expected, "Kafka sink after stop/restart"
        assert in_files() == expected, "file sink after stop/restart"

        for q in queries:
            q.stop()
        replayed = {ls.forget_last_commit(kafka_cp), ls.forget_last_commit(files_cp)}
        assert replayed and all(n > 0 for n in replayed)
        queries = start()
        run([], queries)
        assert in_files() == expected, "the file sink skips a batch it already wrote"
        kafka = in_kafka()
        assert set(kafka) == set(expected), "the Kafka sink loses nothing"
        assert sum(kafka.values()) > sum(expected.values()), "and writes the replayed batch's windows again"
        assert all(kafka[row] in (1, 2) for row in expected)
    finally:
        for q in queries:
            q.stop()


@pytest.mark.integration
def test_a_failing_query_is_reported_in_one_line(spark, cluster, unique):
    topic = cluster.create_topic(unique("bad"), partitions=1)
    g.send(cluster, topic, list(g.generate_page_views(seed=1, rounds=1, per_round=5)))
    raw = spark.readStream.format("kafka").options(**ls.kafka_options(cluster, subscribe=topic,
                                                                      startingOffsets="earliest")).load()
    bad = raw.selectExpr("assert_true(offset < 0, 'offsets are never negative') AS x")
    query = bad.writeStream.format("noop").option("checkpointLocation", ls.checkpoint_dir(cluster, unique("bad"))).start()
    try:
        with pytest.raises(LabkitError, match="The streaming query failed: .*offsets are never negative"):
            ls.wait_for_progress(query, lambda p: False, timeout=60)
    finally:
        query.stop()


@pytest.mark.integration
@pytest.mark.parametrize("fresh_cluster", ["single-broker"], indirect=True)
def test_stopping_the_cluster_stops_its_queries_and_spark_first(fresh_cluster, unique, jvm_pids):
    """Runs after the tests sharing the module's session: a session for another cluster replaces it."""
    spark = ls.session(fresh_cluster, progress=False)
    query = (spark.readStream.format("kafka").options(**ls.kafka_options(fresh_cluster, subscribe=unique("t")))
             .load().writeStream.format("noop").start())
    marker = str(fresh_cluster.data_dir)
    assert len(jvm_pids(marker)) == 2, "the broker and the Spark driver"
    assert query.isActive
    fresh_cluster.stop()
    assert lsd._CURRENT is None
    deadline = Deadline(30)
    while jvm_pids(marker) and not deadline.expired():
        time.sleep(0.5)
    assert jvm_pids(marker) == []


@pytest.mark.integration
@pytest.mark.slow
def test_no_spark_or_broker_jvm_outlives_a_killed_kernel(tmp_path):
    """A kernel killed with SIGKILL while its cluster and Spark session run leaves no JVM behind."""
    script = textwrap.dedent("""
        import labkit, labkit.spark
        cluster = labkit.start_cluster("single-broker", progress=False)
        labkit.spark.session(cluster, progress=False)
        print("ready", flush=True)
        import time
        time.sleep(600)
    """)
    env = dict(os.environ, LABKIT_DATA_DIR=str(tmp_path))
    env.pop("LABKIT_BOOTSTRAP", None)
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        jvms = java_pids_of(str(tmp_path))
        assert len(jvms) >= 2, "a broker and a Spark driver JVM, both marked with the cluster's data dir"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = Deadline(30)
        while java_pids_of(str(tmp_path)) and not deadline.expired():
            time.sleep(0.5)
        assert not java_pids_of(str(tmp_path)), "a JVM outlived its Python process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_jvm_that_will_not_start_is_a_java_error_with_its_own_words(tmp_path):
    """PySpark only says "Java gateway process exited"; labkit says so in one line with the JVM's last words."""
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    fake = java_home / "bin" / "java"
    fake.write_text('#!/bin/sh\ncase "$1" in -version) echo \'openjdk version "17.0.9" 2023-10-17\' >&2; exit 0;; esac\n'
                    'echo "Error occurred during initialization of VM: fake JVM refuses to start" >&2\nexit 1\n')
    fake.chmod(0o755)
    script = textwrap.dedent(f"""
        import labkit.spark as ls
        from labkit.errors import JavaError

        class Addresses:
            data_dir = {str(tmp_path / "cluster")!r}
            def client_config(self, **config):
                return {{"bootstrap.servers": "127.0.0.1:9"}}
            def on_stop(self, hook):
                pass

        try:
            ls.session(Addresses(), progress=False)
        except JavaError as exc:
            print("JavaError:", exc)
    """)
    env = dict(os.environ, JAVA_HOME=str(java_home))
    out = run_patiently([sys.executable, "-c", script], 120, env=env, capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("JavaError:")]
    assert line, out.stdout + out.stderr[-2000:]
    assert "fake JVM refuses to start" in line[0] and "JAVA_HOME" in line[0]
    assert "fake JVM refuses" in (tmp_path / "cluster" / "spark" / lsd.DRIVER_LOG).read_text()
