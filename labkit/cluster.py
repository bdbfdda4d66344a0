"""Clusters: the object a notebook holds, and the registry of backends.

``start_cluster()`` returns a :class:`Cluster` whatever runs it: Kafka JVMs on
this machine (``native``, the default), containers (``docker``), or a cluster
that already exists (``external``, also what ``connect()`` and the
``LABKIT_BOOTSTRAP`` variable give). They share the read API; fault injection
needs a backend that owns the brokers.
"""

from __future__ import annotations

import html
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from . import admin as _admin
from .errors import BackendError, ClusterStateError, UnsupportedOperation
from .profiles import DEFAULT_PROFILE

if TYPE_CHECKING:
    from .records import Record
    from .tools import ToolResult

log = logging.getLogger(__name__)


#: confluent-kafka's Python-only config keys, which keep their underscores.
_PYTHON_KEYS = frozenset({"error_cb", "stats_cb", "throttle_cb", "oauth_cb", "on_delivery", "on_commit", "logger"})


def client_key(key: str) -> str:
    """``enable_idempotence`` -> ``enable.idempotence``; callbacks like ``on_delivery`` stay as they are."""
    return key if "." in key or key in _PYTHON_KEYS else key.replace("_", ".")


@dataclass
class Broker:
    """One Kafka node as labkit sees it."""

    id: int
    host: str
    port: int
    #: Controller listener port, for nodes that are KRaft controllers too.
    controller_port: Optional[int] = None
    pid: Optional[int] = None
    #: "running", "paused", "stopped" (gracefully), "killed", or "external".
    state: str = "running"

    @property
    def alive(self) -> bool:
        return self.state in ("running", "paused", "external")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def roles(self) -> str:
        return "broker,controller" if self.controller_port else "broker"


class Cluster:
    """A Kafka cluster a lesson talks to. Subclasses own (or not) the brokers."""

    backend = "abstract"
    profile: str = ""

    def __init__(self) -> None:
        self._admin: Optional[AdminClient] = None
        self.topic_prefix = os.environ.get("LABKIT_TOPIC_PREFIX", "")
        self._stop_hooks: list[Callable[[], None]] = []

    def on_stop(self, hook: Callable[[], None]) -> None:
        """Run ``hook()`` when :meth:`stop` begins, before any broker goes (a Spark session, a live view)."""
        if hook not in self._stop_hooks:
            self._stop_hooks.append(hook)

    def _wait_registered(self, nodes: list[Any], step: Callable[[str], None], timeout: float, interval: float,
                         hint: str) -> None:
        """Wait until every node's broker is in the cluster metadata, calling ``step`` as each one appears.

        Backends that start brokers supply ``_check_alive(nodes)`` (raise at once when a node died)
        and ``_evidence(nodes)`` (log tails for the timeout error).
        """
        from .waiting import Wait

        expected = {node.broker.id for node in nodes}
        seen: set[int] = set()

        def registered() -> bool:
            ids = self.live_broker_ids()
            for new in sorted((ids & expected) - seen):
                seen.add(new)
                step(f"broker {new} registered")
            return ids >= expected

        Wait(f"all {len(expected)} brokers to register", timeout=timeout, interval=interval, hint=hint,
             check=lambda: self._check_alive(nodes), evidence=lambda: self._evidence(nodes)).until(registered)

    def _check_alive(self, nodes: list[Any]) -> None:
        """Raise when one of ``nodes`` has died (backends that own brokers override it)."""

    def _evidence(self, nodes: list[Any]) -> str:
        return ""

    def _run_stop_hooks(self) -> None:
        hooks, self._stop_hooks = self._stop_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - stopping goes on whatever a hook does
                log.warning("a stop hook failed", exc_info=True)

    # ---- what every backend provides
    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    @property
    def brokers(self) -> list[Broker]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    # ---- clients
    def client_config(self, **config: Any) -> dict[str, Any]:
        """``{"bootstrap.servers": ...}`` plus your settings (dots may be underscores)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        conf.update({client_key(k): v for k, v in config.items()})
        return conf

    def admin(self) -> AdminClient:
        """A shared AdminClient for this cluster."""
        if self._admin is None:
            self._admin = _admin.make_admin(self.bootstrap_servers)
        return self._admin

    def producer(self, **config: Any) -> Producer:
        """A confluent-kafka Producer on this cluster (``acks=all`` etc. as keyword args)."""
        return Producer({**self.client_config(**config), **_admin.client_logging()})

    def consumer(self, group_id: str, **config: Any) -> Consumer:
        """A confluent-kafka Consumer in ``group_id`` reading from the earliest offset by default."""
        conf = {"group.id": group_id, "auto.offset.reset": "earliest", **self.client_config(**config)}
        return Consumer({**conf, **_admin.client_logging()})

    # ---- reading state
    def topic_name(self, name: str) -> str:
        """``name`` with the learner's topic prefix (``LABKIT_TOPIC_PREFIX``) on a shared cluster."""
        if self.topic_prefix and not name.startswith(self.topic_prefix):
            return self.topic_prefix + name
        return name

    def create_topic(self, name: str, partitions: int = 3, replication_factor: int = -1,
                     config: Optional[Mapping[str, Any]] = None, exist_ok: bool = False) -> str:
        """Create a topic (waits until it exists); returns its full name."""
        full = self.topic_name(name)
        _admin.create_topic(self.admin(), full, partitions, replication_factor, config, exist_ok=exist_ok)
        from .waiting import Wait

        Wait(f"topic {full!r} to have leaders", timeout=30).until(
            lambda: all(p.leader is not None for p in self.describe_topic(full).partitions))
        return full

    def delete_topic(self, name: str) -> None:
        _admin.delete_topic(self.admin(), self.topic_name(name))

    def topics(self, internal: bool = False) -> list[str]:
        return _admin.list_topics(self.admin(), internal=internal)

    def describe_topic(self, name: str, timeout: float = 10.0) -> _admin.TopicState:
        """Per partition: leader, replicas, ISR, log start offset and high watermark.

        A paused broker keeps its connections open but never answers; when the
        shared client's request times out, ask again through the brokers that run.
        """
        try:
            try:
                return _admin.describe_topic(self.admin(), self.topic_name(name), timeout=min(timeout, 4.0))
            except ClusterStateError:
                # A topic created a moment ago may not be in every broker's metadata yet.
                time.sleep(1.0)
                return _admin.describe_topic(self.admin(), self.topic_name(name), timeout=min(timeout, 4.0))
        except KafkaException as exc:
            running = [b.address for b in self.brokers if b.state in ("running", "external")]
            if exc.args[0].code() != KafkaError._TIMED_OUT or not running:
                raise
            admin = _admin.make_admin(",".join(running))
            return _admin.describe_topic(admin, self.topic_name(name), timeout=timeout)

    def read_all(self, topic: str, timeout: float = 30.0, isolation_level: str = "read_uncommitted",
                 ) -> "list[Record]":
        """Every record ``topic`` stores, with the partition and offset the broker gave it."""
        from .records import read_all

        return read_all(self, topic, timeout=timeout, isolation_level=isolation_level)

    def wait_for_isr(self, topic: str, timeout: float = 60.0) -> _admin.TopicState:
        """Wait until every partition of ``topic`` has all its replicas in sync; returns the state."""
        from .waiting import Wait

        def in_sync() -> Optional[_admin.TopicState]:
            state = self.describe_topic(topic)
            return state if all(set(p.isr) == set(p.replicas) for p in state.partitions) else None

        return Wait(f"every replica of {topic!r} to be in sync", timeout=timeout, interval=0.25).until(in_sync)

    def wait_for_new_leader(self, topic: str, partition: int, old_leader: Optional[int],
                            timeout: float = 60.0) -> _admin.TopicState:
        """Wait until ``partition`` of ``topic`` is led by a broker other than ``old_leader``; returns the state."""
        from .waiting import Wait

        def moved() -> Optional[_admin.TopicState]:
            state = self.describe_topic(topic)
            return state if state[partition].leader not in (None, old_leader) else None

        return Wait(f"partition {partition} of {topic!r} to get a new leader", timeout=timeout,
                    interval=0.2).until(moved)

    def view(self, topics: Optional[list[str]] = None, **options: Any) -> Any:
        """A live dashboard of this cluster for notebooks (:class:`labkit.widgets.ClusterView`)."""
        from .widgets import ClusterView

        return ClusterView(self, topics=topics, **options)

    def live_broker_ids(self) -> set[int]:
        """Ids of the brokers the cluster's own metadata lists right now."""
        return _admin.broker_ids(self.admin())

    def _rejoined(self, broker: Broker) -> bool:
        """The broker is listed in the metadata *and* answers a metadata request on its own address.

        Right after a kill the dead broker stays listed until its session times out, so being
        listed alone would say a restarted broker is back seconds before its new process serves.
        """
        return broker.id in self.live_broker_ids() and self._answers(broker)

    def _answers(self, broker: Broker) -> bool:
        """A metadata request sent to ``broker``'s own address gets an answer within a second."""
        client = _admin.make_admin(broker.address, **{"socket.connection.setup.timeout.ms": 1000})
        try:
            client.list_topics(timeout=1.0)
        except KafkaException:
            return False
        return True

    def tool(self, tool: str, *args: str, check: bool = True, timeout: float = 120.0,
             input: Optional[str] = None) -> "ToolResult":
        """Run one of Kafka's command-line tools against this cluster, e.g. ``tool("kafka-topics", "--list")``."""
        from .tools import run_tool

        return run_tool(tool, *args, cluster=self, check=check, timeout=timeout, input=input)

    # ---- fault injection (backends that own their brokers override these)
    def _unsupported(self, what: str) -> UnsupportedOperation:
        return UnsupportedOperation(f"{what} is not possible on a {self.backend} cluster: labkit does not own its brokers.",
                                    "Start a lab cluster with labkit.start_cluster() to break things on purpose.")

    def kill_broker(self, broker_id: int) -> None:
        raise self._unsupported("Killing a broker")

    def stop_broker(self, broker_id: int) -> None:
        raise self._unsupported("Stopping a broker")

    def start_broker(self, broker_id: int) -> None:
        raise self._unsupported("Starting a broker")

    def pause_broker(self, broker_id: int) -> None:
        raise self._unsupported("Pausing a broker")

    def resume_broker(self, broker_id: int) -> None:
        raise self._unsupported("Resuming a broker")

    def broker_log(self, broker_id: int, lines: int = 50) -> str:
        raise self._unsupported("Reading a broker's log")

    # ---- lifecycle sugar
    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _close_admin(self) -> None:
        self._admin = None  # librdkafka handles close when garbage-collected

    # ---- notebook display
    def _summary(self) -> str:
        return f"{self.backend} cluster"

    def __repr__(self) -> str:
        brokers = ", ".join(f"{b.id}@{b.port}:{b.state}" for b in self.brokers)
        return f"<{type(self).__name__} {self._summary()} bootstrap={self.bootstrap_servers} brokers=[{brokers}]>"

    def _repr_html_(self) -> str:
        colors = {"running": "#27ae60", "paused": "#f39c12", "stopped": "#7f8c8d", "killed": "#c0392b",
                  "external": "#2980b9"}
        rows = "".join(
            f"<tr><td>{b.id}</td><td>{b.roles}</td><td><code>{b.address}</code></td><td>{b.pid or '–'}</td>"
            f"<td style='color:{colors.get(b.state, '#000')}'>&#9679; {b.state}</td></tr>" for b in self.brokers)
        return (f"<div><b>Kafka Lab cluster</b> — {html.escape(self._summary())}<br>"
                f"bootstrap servers: <code>{html.escape(self.bootstrap_servers)}</code>"
                f"<table><tr><th>id</th><th>roles</th><th>address</th><th>pid</th><th>state</th></tr>{rows}</table></div>")


class ExternalCluster(Cluster):
    """An existing cluster labkit only talks to (a classroom cluster, ``labkit cluster up``)."""

    backend = "external"

    def __init__(self, bootstrap_servers: str, **client_config: Any) -> None:
        super().__init__()
        self._bootstrap = bootstrap_servers
        self._extra = client_config

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def client_config(self, **config: Any) -> dict[str, Any]:
        return super().client_config(**{**self._extra, **config})

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = _admin.make_admin(self.bootstrap_servers, **self.client_config())
        return self._admin

    @property
    def brokers(self) -> list[Broker]:
        md = self.admin().list_topics(timeout=10)
        return [Broker(b.id, b.host, b.port, state="external") for b in sorted(md.brokers.values(), key=lambda b: b.id)]

    def stop(self) -> None:
        """Forget the connection; the cluster itself keeps running (labkit does not own it)."""
        self._run_stop_hooks()
        self._close_admin()

    def _summary(self) -> str:
        return "external (not owned by this notebook)"


def connect(bootstrap_servers: str, **client_config: Any) -> ExternalCluster:
    """Wrap an existing cluster with labkit's read API (fault injection raises)."""
    cluster = ExternalCluster(bootstrap_servers, **client_config)
    from .waiting import Wait

    Wait(f"a metadata round-trip with {bootstrap_servers}", timeout=15,
         hint="Check the address and that the cluster is running.").until(cluster.live_broker_ids)
    return cluster


def _native(profile: str, **kw: Any) -> Cluster:
    from .native import NativeCluster

    return NativeCluster(profile, **kw).start()


def _docker(profile: str, **kw: Any) -> Cluster:
    from .docker import DockerCluster

    return DockerCluster(profile, **kw).start()


def _external(profile: str, **kw: Any) -> Cluster:
    bootstrap = kw.pop("bootstrap_servers", None) or os.environ.get("LABKIT_BOOTSTRAP")
    if not bootstrap:
        raise BackendError("backend='external' needs bootstrap_servers=... (or LABKIT_BOOTSTRAP).",
                           "Pass the address of the cluster to attach to.")
    return connect(bootstrap)


#: Backend name -> factory(profile, **options) -> started Cluster.
BACKENDS: dict[str, Callable[..., Cluster]] = {"native": _native, "docker": _docker, "external": _external}


def start_cluster(profile: str = DEFAULT_PROFILE, backend: Optional[str] = None,
                  overrides: Optional[Mapping[str, Any]] = None, *, progress: bool = True,
                  start_timeout: float = 120.0, **broker_settings: Any) -> Cluster:
    """Start a private Kafka cluster for this notebook and wait until it is ready.

    ``profile`` names a file in ``environments/profiles/`` (``single-broker``,
    ``three-brokers``, ``five-brokers``); broker settings go in as keyword
    arguments with underscores for dots (``log_retention_ms=60000``) or as an
    ``overrides`` dict. With ``LABKIT_BOOTSTRAP`` set (a shared classroom or
    ``labkit cluster up`` cluster) the notebook attaches to that cluster instead.
    ``progress`` shows a progress bar while starting; ``start_timeout`` bounds the wait.
    """
    if backend is None:
        backend = "external" if os.environ.get("LABKIT_BOOTSTRAP") else os.environ.get("LABKIT_BACKEND", "native")
    if backend not in BACKENDS:
        raise BackendError(f"Unknown backend {backend!r}.", f"Valid backends: {', '.join(BACKENDS)}.")
    settings = dict(overrides or {})
    settings.update(broker_settings)
    if backend == "external":
        return _external(profile)
    return BACKENDS[backend](profile, overrides=settings, progress=progress, start_timeout=start_timeout)
