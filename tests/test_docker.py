"""The docker backend: what it generates (no Docker needed), its errors, and a real cluster when an engine answers."""

from __future__ import annotations

import re
import socket
import sys
import time

import pytest

import labkit
from labkit.backends import docker as dk
from labkit.runtime.distribution import cached_distribution
from labkit.errors import BackendError, ClusterStateError, LabkitError, SettingError

ENGINE = dk.engine_available()
NO_ENGINE_REASON = "no Docker engine answers on this machine (`docker info` fails); the native backend needs none"


def image_property_name(var: str) -> str:
    """What the apache/kafka image makes of a KAFKA_* variable (a port of ConvertKey in its utility.go)."""
    key = var[len("KAFKA_"):]
    key = re.sub(r"[^_]_[^_]", lambda m: m.group(0).replace("_", "."), key)
    return key.replace("___", "-").replace("__", "_").lower()


def env_to_properties(env: dict[str, str]) -> dict[str, str]:
    excluded = {"KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS"}
    return {image_property_name(k): v for k, v in env.items() if k.startswith("KAFKA_") and k not in excluded}


# ---------------------------------------------------------------- env names
@pytest.mark.parametrize("prop, var", [
    ("log.retention.ms", "KAFKA_LOG_RETENTION_MS"),
    ("node.id", "KAFKA_NODE_ID"),
    ("process.roles", "KAFKA_PROCESS_ROLES"),
    ("log.cleaner.dedupe_buffer", "KAFKA_LOG_CLEANER_DEDUPE__BUFFER"),
    ("some-dashed.name", "KAFKA_SOME___DASHED_NAME"),
    ("mixed_under-dash.x", "KAFKA_MIXED__UNDER___DASH_X"),
])
def test_env_name_follows_the_image_convention(prop, var):
    assert dk.env_name(prop) == var
    assert image_property_name(var) == prop


def test_every_kafka_broker_setting_survives_the_image_round_trip():
    dist = cached_distribution()
    if dist is None:
        pytest.skip("the Kafka jars are not cached (run `make setup`)")
    names = sorted(dist.broker_config_names())
    assert len(names) > 200
    broken = [n for n in names if image_property_name(dk.env_name(n)) != n]
    # The image's parser cannot express a one-letter segment ("a.b.c"); Kafka has no such broker setting.
    assert broken == []


# ---------------------------------------------------------------- one node's environment
def test_node_environment_has_the_image_required_variables():
    env = dk.node_environment(2, 3, 40123, {}, "clusterid", heap="320m", jvm_options=("-XX:+UseSerialGC", "-Xss512k"))
    assert env["KAFKA_NODE_ID"] == "2"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_LISTENERS"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kafka-2:19092,EXTERNAL://127.0.0.1:40123"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert env["KAFKA_LOG_DIRS"] == dk.DATA_DIR
    assert env["CLUSTER_ID"] == "clusterid"
    assert env["KAFKA_HEAP_OPTS"] == "-Xms320m -Xmx320m"
    assert env["KAFKA_JVM_PERFORMANCE_OPTS"] == "-XX:+UseSerialGC -Xss512k"
    assert all(isinstance(v, str) for v in env.values())


def test_every_node_advertises_its_own_loopback_port_and_alias():
    envs = [dk.node_environment(i, 3, 50000 + i, {}, "c") for i in (1, 2, 3)]
    advertised = [env_to_properties(e)["advertised.listeners"] for e in envs]
    assert advertised == [f"INTERNAL://kafka-{i}:19092,EXTERNAL://127.0.0.1:{50000 + i}" for i in (1, 2, 3)]
    # One quorum and one cluster id for all.
    assert {e["KAFKA_CONTROLLER_QUORUM_VOTERS"] for e in envs} == {dk.quorum_voters(3)}
    assert {e["CLUSTER_ID"] for e in envs} == {"c"}


@pytest.mark.parametrize("controllers, voters", [
    (1, "1@kafka-1:9093"),
    (3, "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"),
])
def test_quorum_voters_use_the_network_aliases(controllers, voters):
    assert dk.quorum_voters(controllers) == voters


def test_nodes_beyond_the_controller_count_are_broker_only():
    env = dk.node_environment(5, 5, 41000, {}, "c", controllers=3)
    assert env["KAFKA_PROCESS_ROLES"] == "broker"
    assert "CONTROLLER://" not in env["KAFKA_LISTENERS"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == dk.quorum_voters(3)
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"  # brokers still need to find the quorum
    with pytest.raises(ValueError):
        dk.node_environment(4, 3, 41000, {}, "c")


def test_managed_settings_win_over_profile_settings():
    env = dk.node_environment(1, 1, 5000, {"node.id": 99, "listeners": "PLAINTEXT://:1", "log.dirs": "/x"}, "x")
    assert env["KAFKA_NODE_ID"] == "1"
    assert "PLAINTEXT://:1" not in env["KAFKA_LISTENERS"]
    assert env["KAFKA_LOG_DIRS"] == dk.DATA_DIR


def test_a_value_the_image_would_drop_is_refused():
    with pytest.raises(SettingError, match="'='"):
        dk.node_environment(1, 1, 5000, {"some.setting": "a=b"}, "x")


# ---------------------------------------------------------------- profile + overrides -> containers
def test_profile_settings_and_overrides_reach_every_node():
    cluster = dk.DockerCluster("three-brokers", overrides={"log_retention_ms": 60000, "num.partitions": 6})
    for node_id in (1, 2, 3):
        props = env_to_properties(cluster.environment(node_id, 42000 + node_id))
        assert props["log.retention.ms"] == "60000"            # override, keyword style
        assert props["num.partitions"] == "6"                  # override wins over the profile's 3
        assert props["min.insync.replicas"] == "2"             # profile
        assert props["group.initial.rebalance.delay.ms"] == "0"  # lab defaults
        assert props["auto.create.topics.enable"] == "true"
        assert props["node.id"] == str(node_id)
        assert props["advertised.listeners"].endswith(f"EXTERNAL://127.0.0.1:{42000 + node_id}")
    spec = labkit.runtime.environment.kafka_spec()
    assert cluster.environment(1, 1)["KAFKA_HEAP_OPTS"] == f"-Xms{spec.heap_start} -Xmx{spec.heap}"


def test_five_brokers_profile_has_three_controllers():
    cluster = dk.DockerCluster("five-brokers")
    roles = [cluster.environment(i, 40000 + i)["KAFKA_PROCESS_ROLES"] for i in range(1, 6)]
    assert roles == ["broker,controller"] * 3 + ["broker"] * 2


def test_image_is_the_pinned_kafka_version(monkeypatch):
    monkeypatch.delenv("LABKIT_DOCKER_IMAGE", raising=False)
    assert dk.DockerCluster("single-broker").image == f"apache/kafka:{labkit.runtime.environment.kafka_spec().version}"
    monkeypatch.setenv("LABKIT_DOCKER_IMAGE", "registry.local/kafka:test")
    assert dk.DockerCluster("single-broker").image == "registry.local/kafka:test"


# ---------------------------------------------------------------- errors before Docker is asked
def test_unknown_override_is_rejected_like_native_before_docker_is_asked():
    if cached_distribution() is None:
        pytest.skip("the Kafka jars are not cached, so setting names cannot be checked")
    start = time.monotonic()
    with pytest.raises(SettingError, match="log.retention.ms") as info:
        labkit.start_cluster("three-brokers", backend="docker", progress=False, log_retention_msx=5)
    assert "Unknown broker setting 'log.retention.msx'" in str(info.value)
    assert time.monotonic() - start < 10


def test_managed_override_is_rejected():
    with pytest.raises(SettingError, match="managed by labkit"):
        dk.DockerCluster("single-broker", overrides={"advertised.listeners": "PLAINTEXT://x:1"}).start()


def test_unknown_profile_is_rejected_before_docker_is_asked():
    with pytest.raises(LabkitError, match="three-brokers"):
        dk.DockerCluster("seven-brokers")


def test_missing_docker_extra_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "testcontainers.core.container", None)
    with pytest.raises(BackendError) as info:
        dk.DockerCluster("single-broker").start()
    assert "pip install 'kafka-lab[docker]'" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_cluster_that_never_started_has_no_brokers_and_stops_quietly():
    cluster = dk.DockerCluster("single-broker")
    assert cluster.brokers == [] and cluster.bootstrap_servers == ""
    with pytest.raises(ClusterStateError, match="no broker 1"):
        cluster.kill_broker(1)
    cluster.stop()
    cluster.stop()
    assert cluster.stopped
    with pytest.raises(ClusterStateError, match="stopped"):
        cluster.broker_log(1)


# ---------------------------------------------------------------- lifecycle against a fake engine
class _FakeBox:
    """Stands in for a docker-py Container: just the calls DockerCluster makes."""

    def __init__(self, exits: bool = False) -> None:
        self.status = "created"
        self.attrs = {"State": {"ExitCode": 0}}
        self.exits = exits
        self.calls: list[str] = []

    def reload(self):
        pass

    def logs(self, tail=50):
        return b"line 1\nFATAL the broker could not start\n"

    def _do(self, call, status):
        self.calls.append(call)
        self.status = status

    def start(self):
        self._do("start", "exited" if self.exits else "running")
        if self.exits:
            self.attrs["State"]["ExitCode"] = 1

    def kill(self):
        self._do("kill", "exited")

    def wait(self, timeout=None):
        return {"StatusCode": 137}

    def stop(self, timeout=10):
        self._do(f"stop({timeout})", "exited")

    def pause(self):
        self._do("pause", "paused")

    def unpause(self):
        self._do("unpause", "running")


class _FakeEngine:
    """Fake testcontainers classes; ``taken`` host ports fail to bind once, ``failing`` node ids exit at start."""

    def __init__(self, taken=(), failing=()):
        self.taken, self.failing = set(taken), set(failing)
        self.containers: list = []
        self.networks: list = []
        engine = self

        class Container:
            def __init__(self, image, env=None, name=None, **kw):
                self.image, self.env, self.name, self.ports = image, dict(env or {}), name, {}
                self.box = None
                self.removed = False
                engine.containers.append(self)

            def with_network(self, network):
                self.network = network
                return self

            def with_network_aliases(self, *aliases):
                self.aliases = aliases
                return self

            def with_kwargs(self, **kw):
                self.kwargs = kw
                return self

            def start(self):
                port = self.ports["9092/tcp"][1]
                self.box = _FakeBox(exits=int(self.env["KAFKA_NODE_ID"]) in engine.failing)
                if port in engine.taken:
                    engine.taken.discard(port)
                    raise RuntimeError(f"Bind for 127.0.0.1:{port} failed: port is already allocated")
                self.box.start()
                return self

            def get_wrapped_container(self):
                return self.box

            def stop(self):
                self.removed = True

        class Network:
            def __init__(self):
                self.name, self.removed = "uuid", False
                engine.networks.append(self)

            def create(self):
                return self

            def remove(self):
                self.removed = True

        self.Container, self.Network = Container, Network

    def install(self, monkeypatch, cluster):
        import testcontainers.core.container
        import testcontainers.core.network

        monkeypatch.setattr(testcontainers.core.container, "DockerContainer", self.Container)
        monkeypatch.setattr(testcontainers.core.network, "Network", self.Network)
        monkeypatch.setattr(dk, "docker_engine", lambda timeout=dk.ENGINE_TIMEOUT: None)
        monkeypatch.setattr(dk.DockerCluster, "_ensure_image", lambda self, engine: None)
        def running() -> set[int]:
            return {int(c.env["KAFKA_NODE_ID"]) for c in self.containers
                    if c.box is not None and c.box.status == "running" and not c.removed}

        monkeypatch.setattr(cluster, "live_broker_ids", running)
        monkeypatch.setattr(cluster, "_answers", lambda broker: broker.id in running())
        # The fake containers run no Kafka: there is no metadata for every broker to agree on.
        from labkit.runtime import agreement
        monkeypatch.setattr(agreement, "agree", lambda cluster, what, condition, timeout=60.0, **kw: None)


def test_start_fault_injection_and_stop_drive_the_containers(monkeypatch):
    cluster = dk.DockerCluster("three-brokers", progress=False, start_timeout=5)
    fake = _FakeEngine()
    fake.install(monkeypatch, cluster)
    assert cluster.start() is cluster
    assert [c.name for c in fake.containers] == [f"{cluster.name}-kafka-{i}" for i in (1, 2, 3)]
    ports = [b.port for b in cluster.brokers]
    assert len(set(ports)) == 3
    for c, port in zip(fake.containers, ports):
        assert c.ports == {"9092/tcp": ("127.0.0.1", port)}  # published on loopback only, at the advertised port
        assert c.env["KAFKA_ADVERTISED_LISTENERS"].endswith(f"EXTERNAL://127.0.0.1:{port}")
        assert c.aliases == (c.env["KAFKA_ADVERTISED_LISTENERS"].split("//")[1].split(":")[0],)
        assert c.network is fake.networks[0] and fake.networks[0].name == cluster.name
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in ports)

    box2 = fake.containers[1].box
    cluster.pause_broker(2)
    cluster.kill_broker(2)  # a paused container is unpaused first, as SIGCONT before SIGKILL natively
    assert box2.calls == ["start", "pause", "unpause", "kill"]
    assert [b.state for b in cluster.brokers] == ["running", "killed", "running"]
    with pytest.raises(ClusterStateError, match="not running"):
        cluster.kill_broker(2)
    cluster.start_broker(2)
    assert box2.status == "running" and cluster.brokers[1].state == "running"
    cluster.stop_broker(3, timeout=7)
    assert fake.containers[2].box.calls[-1] == "stop(7)" and cluster.brokers[2].state == "stopped"
    assert "FATAL" in cluster.broker_log(1)

    fake.containers[0].box.status = "exited"  # died on its own
    assert cluster.brokers[0].state == "killed"

    cluster.stop()
    cluster.stop()
    assert all(c.removed for c in fake.containers) and fake.networks[0].removed


def test_a_taken_host_port_is_retried_with_another(monkeypatch):
    cluster = dk.DockerCluster("single-broker", progress=False, start_timeout=5)
    fake = _FakeEngine()
    fake.install(monkeypatch, cluster)
    first = dk.free_ports(1)[0]
    picks = iter([[first], [first + 1]])  # up front, then after the bind failure
    monkeypatch.setattr(dk, "free_ports", lambda n: next(picks))
    fake.taken.add(first)
    cluster.start()
    assert len(fake.containers) == 2 and fake.containers[0].removed
    assert cluster.brokers[0].port == first + 1
    assert fake.containers[1].env["KAFKA_ADVERTISED_LISTENERS"].endswith(f"127.0.0.1:{first + 1}")
    cluster.stop()


def test_a_failed_start_removes_everything_and_shows_the_container_log(monkeypatch):
    cluster = dk.DockerCluster("three-brokers", progress=False, start_timeout=5)
    fake = _FakeEngine(failing={2})
    fake.install(monkeypatch, cluster)
    with pytest.raises(dk.ContainerStartError) as info:
        cluster.start()
    assert info.value.broker_id == 2
    assert "exit code 1" in str(info.value)
    assert f"docker logs {cluster.name}-kafka-2" in str(info.value) and "FATAL" in str(info.value)
    assert all(c.removed for c in fake.containers) and fake.networks[0].removed
    assert cluster.stopped


# ---------------------------------------------------------------- no engine
@pytest.mark.skipif(ENGINE, reason="a Docker engine answers here, so the no-engine error cannot be seen")
def test_no_engine_is_a_quick_one_line_error_with_the_fix():
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        labkit.start_cluster("three-brokers", backend="docker", progress=False)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith("backend='docker' needs a running Docker engine")
    assert "native backend (no Docker needed)" in message
    assert "\n" not in message


def test_an_engine_that_never_answers_fails_within_the_timeout(monkeypatch):
    """A Docker host that accepts connections but never replies must not hang a notebook."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{silent.getsockname()[1]}")
    try:
        start = time.monotonic()
        with pytest.raises(BackendError, match=r"none answered at tcp://127\.0\.0\.1:\d+ \(timed out\)"):
            dk.docker_engine(timeout=1.0)
        assert time.monotonic() - start < 5
    finally:
        silent.close()


# ---------------------------------------------------------------- a real docker cluster
@pytest.mark.integration
@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not ENGINE, reason=NO_ENGINE_REASON)
def test_docker_cluster_replicates_and_fails_over(unique):
    with labkit.start_cluster("three-brokers", backend="docker", progress=False) as cluster:
        assert isinstance(cluster, dk.DockerCluster)
        brokers = cluster.brokers
        assert [b.id for b in brokers] == [1, 2, 3] and all(b.state == "running" for b in brokers)
        # Clients on the host see the advertised loopback addresses.
        metadata = cluster.admin().list_topics(timeout=10)
        assert {(b.host, b.port) for b in metadata.brokers.values()} == {("127.0.0.1", b.port) for b in brokers}

        topic = cluster.create_topic(unique("docker"), partitions=3, replication_factor=3)
        delivered: list[str] = []

        def on_delivery(err, msg):
            if err is None:
                delivered.append(msg.key().decode())

        producer = cluster.producer(acks="all", on_delivery=on_delivery)
        for i in range(30):
            producer.produce(topic, key=str(i), value=b"before")
            producer.poll(0)
        assert producer.flush(30) == 0 and len(delivered) == 30
        assert len(cluster.read_all(topic)) == 30

        leader = cluster.describe_topic(topic)[0].leader
        cluster.kill_broker(leader)
        assert {b.id: b.state for b in cluster.brokers}[leader] == "killed"
        after = cluster.wait_for_new_leader(topic, 0, leader)
        assert after[0].leader not in (None, leader)
        assert "Kafka Server started" in cluster.broker_log(after[0].leader, lines=100000)

        # Two of three replicas meet min.insync.replicas=2: acks=all still succeeds.
        for i in range(30, 40):
            producer.produce(topic, key=str(i), value=b"after")
        assert producer.flush(30) == 0 and len(delivered) == 40
        assert len(cluster.read_all(topic)) == 40

        cluster.start_broker(leader)
        cluster.wait_for_isr(topic)
        assert leader in cluster.live_broker_ids()
    assert cluster.stopped
