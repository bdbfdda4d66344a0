"""Operating Kafka (lesson 11): broker metrics through the Prometheus JMX exporter, the metrics panel, the broker
log files, client statistics, perf-tool output and the capacity rule.

Unit tests check the pure parts on fixed inputs (exporter text, librdkafka statistics, tool output);
integration tests read a real cluster's exporters and logs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from labkit.runtime import brokerlogs, metrics
from labkit.view import panel as metrics_panel
from labkit import capacity, clientconfig, perf
from labkit.clientstats import ClientStats, total_lag
from labkit.errors import LabkitError
from labkit.view.render import metrics_html, snapshot_text
from labkit.view.snapshot import BrokerView, Snapshot
from labkit.waiting import Deadline, Wait

EXPORTER_TEXT = """\
# HELP kafka_server_replicamanager_underreplicatedpartitions Attribute exposed for management
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 2.0
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE kafka_controller_kafkacontroller_offlinepartitionscount gauge
kafka_controller_kafkacontroller_offlinepartitionscount 0.0
# TYPE kafka_server_brokertopicmetrics_bytesin counter
kafka_server_brokertopicmetrics_bytesin_total 1000.0
kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 1000.0
# TYPE kafka_server_brokertopicmetrics_bytesout counter
kafka_server_brokertopicmetrics_bytesout_total 500.0
# TYPE kafka_server_replicamanager_isrshrinks counter
kafka_server_replicamanager_isrshrinks_total 1.0
# TYPE kafka_server_replicamanager_isrexpands counter
kafka_server_replicamanager_isrexpands_total 3.0
# TYPE kafka_network_requestmetrics_totaltimems gauge
kafka_network_requestmetrics_totaltimems{quantile="0.99",request="Produce"} 12.0
kafka_network_requestmetrics_totaltimems{quantile="0.99",request="FetchConsumer"} 501.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{partition="0",topic="orders"} 4096.0
"""


# ---------------------------------------------------------------------------------------------- unit: metrics
def test_exporter_text_becomes_tidy_rows():
    samples = metrics.parse(EXPORTER_TEXT, broker=2)
    frame = metrics.frame(samples)
    assert list(frame.columns) == ["broker", "metric", "labels", "value"]
    assert set(frame.broker) == {2}
    row = frame[frame.metric == metrics.LOG_SIZE].iloc[0]
    assert row.labels == "partition=0,topic=orders" and row.value == 4096
    assert metrics.value(samples, metrics.REQUEST_TIME, request="Produce", quantile="0.99") == 12


def test_panel_figures_and_rates_from_two_scrapes():
    first = metrics.parse(EXPORTER_TEXT, broker=1)
    later = metrics.parse(EXPORTER_TEXT.replace("bytesin_total 1000.0", "bytesin_total 3000.0"), broker=1)
    before = metrics_panel.broker_metrics(1, first, taken_at=100.0)
    assert before.bytes_in_per_s is None, "no rate from a single scrape"
    after = metrics_panel.broker_metrics(1, later, taken_at=102.0,
                                   previous=(100.0, {metrics.BYTES_IN: 1000.0, metrics.BYTES_OUT: 500.0}))
    assert after.bytes_in_per_s == 1000.0, "only the broker-wide counter counts, not the per-topic copy"
    assert after.bytes_out_per_s == 0.0
    assert (after.under_replicated, after.active_controller, after.offline_partitions) == (2, True, 0)
    assert (after.produce_p99_ms, after.fetch_p99_ms, after.isr_shrinks, after.isr_expands) == (12, 501, 1, 3)
    panel = metrics_panel.PanelData((after, metrics_panel.BrokerMetrics(2, False, error="killed")), taken_at=102.0)
    assert (panel.under_replicated, panel.active_controller, panel.offline_partitions) == (2, 1, 0)
    assert panel.as_row()["brokers_up"] == 1


def test_the_panel_renders_as_html_and_text():
    panel = metrics_panel.PanelData((metrics_panel.broker_metrics(1, metrics.parse(EXPORTER_TEXT, 1), 1.0),
                               metrics_panel.BrokerMetrics(2, False, error="killed")), taken_at=1.0)
    html = metrics_html(panel)
    assert "labkit-metrics" in html and "under-replicated" in html and "not answering (killed)" in html
    assert "1 ★" in html, "the active controller is marked"
    assert metrics_html(None) == "<i>No metrics yet.</i>"
    snap = Snapshot((BrokerView(1, "running", True),), {}, (), metrics=panel)
    assert "metrics: under-replicated 2, offline 0, active controller 1" in snapshot_text(snap)
    assert snap.key() != Snapshot((BrokerView(1, "running", True),), {}, ()).key(), "metrics change what is drawn"


def test_a_cluster_without_exporters_says_how_to_get_them():
    class NoMetrics:
        brokers = []

        def metrics_endpoints(self):
            return {}

    with pytest.raises(metrics.MetricsUnavailable) as info:
        metrics.scrape_cluster(NoMetrics())
    assert info.value.hint


def test_a_running_brokers_slow_exporter_is_asked_again_and_a_dead_one_is_named():
    """cluster.metrics() on a busy machine: an exporter slower than the first timeout still counts."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from types import SimpleNamespace

    asked = []

    class SlowOnce(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(time.monotonic())
            if len(asked) == 1:
                time.sleep(1.5)  # longer than the first timeout below: that answer comes too late
            body = b"kafka_controller_kafkacontroller_activecontrollercount 1.0\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowOnce)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as s:  # a port nothing listens on: a broker whose exporter is gone
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    cluster = SimpleNamespace(
        brokers=[SimpleNamespace(id=1, state="running"), SimpleNamespace(id=2, state="running")],
        metrics_endpoints=lambda: {1: f"http://127.0.0.1:{server.server_address[1]}/metrics",
                                   2: f"http://127.0.0.1:{closed}/metrics"})
    try:
        frame = metrics.scrape_cluster(cluster, timeout=0.5, patience=3.0)
    finally:
        server.shutdown()
    assert len(asked) >= 2, "the slow exporter was asked again"
    assert set(frame.broker) == {1}
    assert set(frame.attrs["errors"]) == {2}, frame.attrs["errors"]


def test_agent_options_follow_the_switch(monkeypatch):
    monkeypatch.setenv(metrics.ENV_SWITCH, "0")
    assert metrics.agent_options(9999) == []
    monkeypatch.delenv(metrics.ENV_SWITCH)
    if metrics.exporter_jar() is not None:
        (option,) = metrics.agent_options(9999)
        assert option.startswith("-javaagent:") and option.endswith(f"=127.0.0.1:9999:{metrics.exporter_spec().config}")


def test_exporter_config_selects_what_the_panel_reads():
    text = metrics.exporter_spec().config.read_text()
    for mbean in ("kafka.server:type=ReplicaManager", "kafka.controller:type=KafkaController",
                  "kafka.server:type=BrokerTopicMetrics", "kafka.network:type=RequestMetrics,name=TotalTimeMs",
                  "kafka.log:type=Log"):
        assert mbean in text


# ---------------------------------------------------------------------------------------------- unit: logs
def test_log_names_and_grep(tmp_path: Path):
    assert brokerlogs.log_file("state-change") == "state-change.log"
    assert brokerlogs.log_file("kafka-request.log") == "kafka-request.log"
    with pytest.raises(LabkitError, match="Valid names"):
        brokerlogs.log_file("gc")
    log = tmp_path / "controller.log"
    log.write_text("".join(f"[t] INFO line {i} {'Fencing broker 2' if i % 3 == 0 else ''}\n" for i in range(10)))
    assert brokerlogs.read_log(log, lines=2).splitlines() == ["[t] INFO line 8 ", "[t] INFO line 9 Fencing broker 2"]
    assert brokerlogs.read_log(log, lines=2, grep="Fencing broker").splitlines()[0].startswith("[t] INFO line 6")
    assert brokerlogs.count(log, r"line \d ") == 10
    assert brokerlogs.read_log(tmp_path / "missing.log", grep="x") == ""


def test_log4j_config_writes_kafkas_files():
    from labkit.runtime.environment import kafka_spec

    text = kafka_spec().log4j_config.read_text()
    for name in brokerlogs.LOG_FILES.values():
        if name != "stdout.log":
            assert f"/{name}\"" in text
    assert "--" not in text.split("<Configuration")[0].replace("<!--", "").replace("-->", ""), \
        "XML comments may not hold a double dash (log4j then ignores the whole file)"


# ---------------------------------------------------------------------------------------------- unit: clients
def _stats(lag: int, fetches: int) -> str:
    return json.dumps({
        "ts": 1_000_000 * (1 + fetches), "txmsgs": 0, "rxmsgs": 10, "msg_cnt": 0, "tx": fetches,
        "brokers": {"127.0.0.1:9092/1": {"nodeid": 1, "state": "UP", "rtt": {"p50": 2000, "p99": 9000},
                                         "req": {"Fetch": fetches, "Produce": 0}, "tx": fetches},
                    "127.0.0.1:9092/bootstrap": {"nodeid": -1, "req": {"Fetch": 99}}},
        "topics": {"clicks": {"batchsize": {"avg": 300, "cnt": 2},
                              "partitions": {"0": {"consumer_lag": lag, "committed_offset": 5, "hi_offset": 5 + lag},
                                             "-1": {"consumer_lag": -1}}}}})


def test_client_statistics_become_frames():
    stats = ClientStats()
    assert stats.latest is None and stats.history().empty
    for lag, fetches in ((3, 1), (10, 4)):
        stats(_stats(lag, fetches))
    assert stats.history().consumer_lag.tolist() == [3, 10]
    assert stats.history().seconds.tolist() == [0.0, 3.0]
    assert stats.requests("Fetch") == 4 + 99
    assert stats.brokers().loc[1, "rtt p99 ms"] == 9.0
    assert stats.partitions().loc[("clicks", 0), "hi_offset"] == 15
    assert stats.batch_size("clicks") == 300
    assert total_lag({"topics": {}}) is None
    conf = stats.config(interval_ms=250)
    assert conf["stats_cb"] is stats and conf["statistics.interval.ms"] == 250


def test_effective_config_reads_as_librdkafka_does():
    config = clientconfig.effective_config({"acks": "all", "enable_idempotence": True, "request.required.acks": 1},
                                           "CONFIG")
    assert config == {"enable.idempotence": True, "acks": 1}
    assert not clientconfig.acks_all(config)
    with pytest.raises(AssertionError, match="only producer delivery settings"):
        clientconfig.effective_config({"bootstrap.servers": "elsewhere:9092"}, "CONFIG")


# ---------------------------------------------------------------------------------------------- unit: perf, capacity
def test_perf_tool_lines_are_parsed():
    produced = perf.parse_producer_perf(
        "noise\n100000 records sent, 38774.718883 records/sec (7.40 MB/sec), 1171.43 ms avg latency, 1460.00 ms max "
        "latency, 1227 ms 50th, 1419 ms 95th, 1443 ms 99th, 1457 ms 99.9th.\n", record_size=200)
    assert produced.records == 100_000 and round(produced.records_per_s) == 38775 and produced.p99_ms == 1443
    consumed = perf.parse_consumer_perf(
        "Warning\nstart.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n2026-11-23 16:04:13:655, "
        "2026-11-23 16:04:14:287, 19.0735, 30.1796, 100000, 158227.8481, 323, 309, 61.7265, 323624.5955\n")
    assert consumed.records == 100_000 and consumed.seconds == pytest.approx(0.309)
    assert perf.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and perf.percentile([], 0.99) is None
    docs = perf.order_documents(2000, count=5)
    assert len(docs) == 5 and all(len(d) == 2000 for d in docs) and len(set(docs)) == 5


def test_capacity_rule_and_what_is_on_disk(tmp_path: Path):
    rule = capacity.estimate(message_bytes=1000, replication=3, messages_per_day=1_000_000, retention_days=7)
    assert rule.raw == 21e9 and rule.total == pytest.approx(29.4e9)
    assert capacity.human(rule.total) == "29.4 GB"
    part = tmp_path / "orders-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"x" * 1000)
    with open(part / "00000000000000000000.index", "wb") as fh:
        fh.truncate(10 * 2**20)  # preallocated like an active segment's index: sparse
    (tmp_path / "orders-other-0").mkdir()
    found = capacity.stored([(1, tmp_path)], "orders").set_index("kind")
    assert found.loc["log", "bytes"] == 1000
    assert found.loc["index", "bytes"] == 10 * 2**20 and found.loc["index", "disk_bytes"] < 2**20



# ---------------------------------------------------------------------------------------------- integration
@pytest.mark.integration
def test_metrics_frame_from_every_broker(cluster):
    if not cluster.metrics_endpoints():
        pytest.skip("the exporter is not fetched (labkit setup)")
    frame = cluster.metrics()
    assert set(frame.broker) == {b.id for b in cluster.brokers}
    assert list(frame.columns) == ["broker", "metric", "labels", "value"]
    active = frame[frame.metric == metrics.ACTIVE_CONTROLLER]
    assert active.value.sum() == 1, "exactly one active controller"
    assert (frame.metric == metrics.URP).sum() == len(cluster.brokers)
    assert not cluster.metrics(match="replicamanager").empty
    assert set(cluster.metrics(brokers=[1]).broker) == {1}


@pytest.mark.integration
def test_panel_data_follows_traffic(cluster, unique):
    if not cluster.metrics_endpoints():
        pytest.skip("the exporter is not fetched (labkit setup)")
    reader = metrics_panel.PanelReader(cluster)
    first = reader.read()
    assert first.under_replicated == 0 and first.active_controller in {b.id for b in cluster.brokers}
    topic = cluster.create_topic(unique("panel"), partitions=3)
    producer = cluster.producer(acks="all")
    for _ in range(2000):
        producer.produce(topic, value=b"x" * 500)
        producer.poll(0)
    producer.flush(30)
    second = reader.read()
    assert sum(b.bytes_in_per_s or 0 for b in second.brokers) > 0
    assert any(b.produce_p99_ms is not None for b in second.brokers)
    history = reader.history()
    assert len(history) == 2 and history.under_replicated.tolist() == [0, 0]


@pytest.mark.integration
def test_the_live_view_carries_the_metrics_panel(cluster, unique):
    pytest.importorskip("ipywidgets")
    if not cluster.metrics_endpoints():
        pytest.skip("the exporter is not fetched (labkit setup)")
    view = cluster.view(topics=[], groups=False, metrics=True, refresh=0.5)
    try:
        snap = view.refresh_now()
        assert snap.metrics is not None and snap.metrics.active_controller is not None
        assert "labkit-metrics" in view.metrics_html.value
        Wait("a second refresh", timeout=10).until(lambda: len(view.metrics_history()) >= 2)
    finally:
        view.close()


@pytest.mark.integration
def test_logs_are_split_and_grepped(cluster, unique):
    files = {p.name for p in (cluster.broker_dir(1) / "logs").glob("*.log")}
    assert {"server.log", "controller.log", "state-change.log", "kafka-request.log"} <= files
    assert cluster.broker_log(1, file="controller", grep="Replayed", lines=1)
    assert not cluster.broker_log(1, file="server", grep="Replayed"), "controller lines stay out of server.log"
    topic = cluster.create_topic(unique("logs"), partitions=1, replication_factor=3)
    leader = cluster.describe_topic(topic)[0].leader
    line = Wait("the leader's state-change line", timeout=15).until(
        lambda: cluster.broker_log(leader, file="state-change", grep=rf"Leader {topic}-0 ", lines=1))
    assert "starts at leader epoch" in line
    assert len(cluster.broker_log(1, 5).splitlines()) == 5, "the old signature still reads server.log"


@pytest.mark.integration
def test_client_statistics_helper_sees_consumer_lag(cluster, unique):
    topic = cluster.create_topic(unique("stats"), partitions=1)
    producer = cluster.producer()
    for i in range(500):
        producer.produce(topic, value=str(i))
    producer.flush(30)
    stats = ClientStats()
    consumer = cluster.consumer(unique("stats-group"), enable_auto_commit=False, **stats.config(interval_ms=100))
    try:
        consumer.subscribe([topic])
        read = 0
        deadline = Deadline(30)
        while read < 100 and not deadline.expired():
            msg = consumer.poll(0.2)
            read += msg is not None and msg.error() is None
        consumer.commit(asynchronous=False)

        def committed_in_a_report() -> bool:
            consumer.poll(0.1)  # statistics arrive through poll
            parts = stats.partitions()
            return not parts.empty and parts.loc[(topic, 0), "committed_offset"] == 100

        Wait("a report with the committed offset", timeout=10).until(committed_in_a_report)
    finally:
        consumer.close()
    parts = stats.partitions()
    assert parts.loc[(topic, 0), "committed_offset"] == 100 and parts.loc[(topic, 0), "consumer_lag"] == 400
    assert stats.requests("Fetch") > 0 and not stats.brokers().empty


@pytest.mark.integration
def test_the_class_data_archive_still_maps_with_the_agent():
    from labkit.runtime import classdata
    from labkit.runtime.distribution import ensure_distribution
    from labkit.runtime.environment import kafka_spec
    from labkit.runtime.ports import free_ports

    dist = ensure_distribution(progress=False)
    _, cp, archive = classdata.broker_setup(dist)
    if not archive.exists() or metrics.exporter_jar() is None:
        pytest.skip("no class-data archive or no exporter (labkit setup)")
    spec = kafka_spec()
    options = [f"-Xmx{spec.heap}", *spec.jvm_options, *metrics.agent_options(free_ports(1)[0])]
    assert classdata.usable(archive, cp, options, classdata.LAUNCHER_MAIN, "--check")


@pytest.mark.integration
def test_perf_tools_and_python_clients_on_one_topic(cluster, unique):
    topic = cluster.create_topic(unique("perf"), partitions=3)
    java = perf.java_producer(cluster, topic, 5000, 100, acks="all")
    python = perf.python_producer(cluster, topic, 5000, 100, acks="all")
    assert java.records == python.records == 5000 and not python.failed
    assert python.p99_ms is not None and python.bytes == 500_000
    read = perf.python_consumer(cluster, topic, 10_000)
    assert read.records == 10_000 and read.failed == 0
    assert perf.java_consumer(cluster, topic, 10_000).records == 10_000
