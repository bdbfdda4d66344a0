"""The cluster a notebook holds: :class:`Cluster` and its :class:`Broker` entries.

``labkit.start_cluster()`` (see :mod:`labkit.backends`) returns a ``Cluster``
whatever runs it: Kafka JVMs on this machine, containers, or a cluster that
already exists. They share the read API written here; fault injection needs a
backend that owns the brokers (:mod:`labkit.backends.owned`).
"""

from __future__ import annotations

import html
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from . import admin as _admin
from .errors import ClusterStateError, SecurityError, UnsupportedOperation, WaitTimeout
from .records import Record, read_all
from .runtime import agreement
from .runtime.librdkafka import Producer
from .runtime.tools import ToolResult, run_tool
from .waiting import Wait

if TYPE_CHECKING:
    import pandas as pd

    from .services.connect import ConnectWorker
    from .services.registry import SchemaRegistry
    from .view.widgets import ClusterView

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
    #: Every listener of the node, name -> port (``port`` is the one clients bootstrap from).
    listeners: dict[str, int] = field(default_factory=dict)

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
    #: Whether labkit started these brokers and may break them (kill, pause, restart).
    owns_brokers: bool = False
    #: The name a notebook with several clusters gives this one ("primary", "dr"; see ``start_clusters``),
    #: shown in its repr and live view (and MirrorMaker 2's alias for it); its colour there.
    label: Optional[str] = None
    colour: Optional[str] = None

    def __init__(self) -> None:
        self._admin: Optional[AdminClient] = None
        self.topic_prefix = os.environ.get("LABKIT_TOPIC_PREFIX", "")
        self._stop_hooks: list[Callable[[], None]] = []
        self._registry: Optional["SchemaRegistry"] = None

    def on_stop(self, hook: Callable[[], None], first: bool = False) -> None:
        """Run ``hook()`` when :meth:`stop` begins, before any broker goes (a Spark session, a live view);
        ``first``: before the hooks added earlier (a Spark session stops before its files are removed)."""
        if hook in self._stop_hooks:
            return
        if first:
            self._stop_hooks.insert(0, hook)
        else:
            self._stop_hooks.append(hook)

    def _run_stop_hooks(self) -> None:
        hooks, self._stop_hooks = self._stop_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:
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
    def client_config(self, user: Optional[str] = None, mtls: bool = False, **config: Any) -> dict[str, Any]:
        """Settings for a confluent-kafka client: ``bootstrap.servers``, what the cluster's security needs
        (on a secured cluster: the admin, or ``user`` with their password, or with their certificate when
        ``mtls``), then your settings (dots may be underscores)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.listener_addresses(mtls)}
        conf.update(self.security_settings(user, mtls))
        conf.update({client_key(k): v for k, v in config.items()})
        return conf

    def security_settings(self, user: Optional[str] = None, mtls: bool = False) -> dict[str, Any]:
        """What a client needs to authenticate as ``user`` (nothing on a cluster without security)."""
        if user is not None or mtls:
            raise SecurityError("This cluster has no users or certificates: it is not secured.",
                                "Start one with labkit.start_cluster('secured').")
        return {}

    def listener_addresses(self, mtls: bool = False) -> str:
        """The addresses clients bootstrap from (on a secured cluster, the certificate listener's with ``mtls``)."""
        return self.bootstrap_servers

    def add_user(self, name: str, password: str) -> None:
        """Create (or change the password of) a SCRAM user on a secured cluster."""
        self.security_settings(name)

    def tool_config(self) -> Optional[Path]:
        """The client properties file Kafka's Java tools need here (``--command-config``), if any."""
        return None

    def admin(self) -> AdminClient:
        """A shared AdminClient for this cluster (as the admin on a secured cluster)."""
        if self._admin is None:
            self._admin = self.admin_for()
        return self._admin

    def admin_for(self, addresses: Optional[str] = None, warm: bool = True, **config: Any) -> AdminClient:
        """A new AdminClient with this cluster's settings, talking to ``addresses`` only when given; ``warm=False``
        skips asking the brokers for metadata first (for probes of brokers that may not answer)."""
        conf = self.client_config(**config)
        bootstrap = addresses or conf.pop("bootstrap.servers")
        conf.pop("bootstrap.servers", None)
        return _admin.make_admin(bootstrap, warm=warm, **conf)

    def producer(self, user: Optional[str] = None, mtls: bool = False, **config: Any) -> Producer:
        """A confluent-kafka Producer on this cluster (``acks=all`` etc. as keyword args; ``user`` on a secured one)."""
        return Producer({**self.client_config(user, mtls, **config), **_admin.client_logging()})

    def consumer(self, group_id: str, user: Optional[str] = None, mtls: bool = False, **config: Any) -> Consumer:
        """A confluent-kafka Consumer in ``group_id`` reading from the earliest offset by default."""
        conf = {"group.id": group_id, "auto.offset.reset": "earliest", **self.client_config(user, mtls, **config)}
        return Consumer({**conf, **_admin.client_logging()})

    # ---- reading state
    def topic_name(self, name: str) -> str:
        """``name`` with the learner's topic prefix (``LABKIT_TOPIC_PREFIX``) on a shared cluster."""
        if self.topic_prefix and not name.startswith(self.topic_prefix):
            return self.topic_prefix + name
        return name

    def create_topic(self, name: str, partitions: int = 3, replication_factor: int = -1,
                     config: Optional[Mapping[str, Any]] = None, exist_ok: bool = False) -> str:
        """Create a topic; returns its full name once every live broker knows it, each partition led.

        Running the same cell again is fine: a topic that exists with the partitions (and replication
        factor) asked for is returned as it is (``exist_ok=True``: whatever its shape).
        """
        full = self.topic_name(name)
        _admin.create_topic(self, full, partitions, replication_factor, config, exist_ok=exist_ok)
        return full

    def delete_topic(self, name: str) -> None:
        """Delete a topic; returns once no live broker knows it."""
        _admin.delete_topic(self, self.topic_name(name))

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions; returns once every live broker's metadata has them."""
        _admin.add_partitions(self, self.topic_name(name), total)

    def alter_configs(self, kind: str, name: str, settings: Mapping[str, Any]) -> None:
        """Set dynamic configs of a ``"topic"`` or a ``"broker"`` (by id); returns once the brokers report them."""
        _admin.alter_configs(self, kind, self.topic_name(name) if kind == "topic" else name, settings)

    def describe_configs(self, kind: str, name: str) -> dict[str, str]:
        """Every config of a ``"topic"`` or a ``"broker"`` (by id) as the cluster reports it, defaults included."""
        return _admin.describe_configs(self.admin(), kind, self.topic_name(name) if kind == "topic" else name)

    def create_acls(self, bindings: list[Any]) -> None:
        """Grant ACL bindings; returns once every live broker's authorizer has them."""
        _admin.create_acls(self, bindings)

    def delete_acls(self, filters: list[Any]) -> list[Any]:
        """Remove the ACL bindings matching ``filters``; returns them once no live broker has them."""
        return _admin.delete_acls(self, filters)

    def topics(self, internal: bool = False) -> list[str]:
        return _admin.list_topics(self.admin(), internal=internal)

    def describe_topic(self, name: str, timeout: float = 10.0) -> _admin.TopicState:
        """Per partition: leader, replicas, ISR, log start offset and high watermark.

        A paused broker keeps its connections open but never answers; when the
        shared client's request times out, ask again through the brokers that run.
        """
        def describe() -> _admin.TopicState:
            return _admin.describe_topic(self.admin(), self.topic_name(name), timeout=min(timeout, 4.0))

        try:
            try:
                return describe()
            except ClusterStateError:
                # A topic created a moment ago may not be in every broker's metadata yet: ask again for a second.
                try:
                    return Wait(f"topic {self.topic_name(name)!r} in the metadata", timeout=1.5,
                                interval=0.25).until(describe)
                except WaitTimeout:
                    return describe()  # still missing: its own error says so
        except KafkaException as exc:
            running = [b.address for b in self.brokers if b.state in ("running", "external")]
            if exc.args[0].code() != KafkaError._TIMED_OUT or not running:
                raise
            admin = self.admin_for(",".join(running))
            return _admin.describe_topic(admin, self.topic_name(name), timeout=timeout)

    def read_all(self, topic: str, timeout: float = 30.0, isolation_level: str = "read_uncommitted",
                 ) -> list[Record]:
        """Every record ``topic`` stores, with the partition and offset the broker gave it."""
        return read_all(self, topic, timeout=timeout, isolation_level=isolation_level)

    def wait_for_isr(self, topic: str, timeout: float = 60.0) -> _admin.TopicState:
        """Wait until every partition of ``topic`` has all its replicas in sync, as every live broker sees it
        (a broker applies an ISR change a moment after the controller made it); returns the state."""
        name = self.topic_name(topic)
        agreement.agree(self, f"every replica of {name!r} in sync", agreement.isr_reached(self, name), timeout=timeout,
                        together=True)

        def in_sync() -> Optional[_admin.TopicState]:  # the state returned shows it too: an ISR may change again
            state = self.describe_topic(topic)
            return state if all(set(p.isr) == set(p.replicas) for p in state.partitions) else None

        return Wait(f"every replica of {name!r} to be in sync", timeout=timeout, interval=0.25, stretch=True).until(
            in_sync)

    def wait_for_new_leader(self, topic: str, partition: int, old_leader: Optional[int],
                            timeout: float = 60.0) -> _admin.TopicState:
        """Wait until ``partition`` of ``topic`` is led by a broker other than ``old_leader``; returns the state.

        Polls metadata alone first (any live broker answers it): a full ``describe_topic`` also asks the
        leaders for offsets, and while the dead leader is still listed that request waits out its
        timeout, which would report the new leader seconds late.
        """
        name = self.topic_name(topic)

        def elected() -> bool:
            found = self.admin().list_topics(topic=name, timeout=4.0).topics.get(name)
            leader = found.partitions[partition].leader if found and partition in found.partitions else -1
            return leader not in (-1, old_leader)

        def moved() -> Optional[_admin.TopicState]:
            state = self.describe_topic(topic)
            settled = state[partition].leader not in (None, old_leader) and all(
                p.high_watermark is not None for p in state.partitions if p.leader is not None)
            return state if settled else None  # a leader just elected may not answer for its offsets yet

        what = f"partition {partition} of {topic!r} to get a new leader"
        Wait(what, timeout=timeout, interval=0.2, stretch=True).until(elected)
        return Wait(what, timeout=timeout, interval=0.2, stretch=True).until(moved)

    # ---- services beside the brokers
    def start_schema_registry(self) -> "SchemaRegistry":
        """Start a schema registry for this cluster (a real server: :mod:`labkit.services.registry`)."""
        from .services import registry

        if self._registry is None:
            self._registry = registry.start(self)
        return self._registry

    @property
    def schema_registry_url(self) -> str:
        """The registry's Confluent-compatible URL (``SchemaRegistryClient({"url": ...})``)."""
        if self._registry is None:
            raise ClusterStateError("This cluster has no schema registry.",
                                    "Start one with labkit.start_cluster(schema_registry=True) "
                                    "or cluster.start_schema_registry().")
        return self._registry.url

    def schema_registry(self) -> Any:
        """A confluent-kafka ``SchemaRegistryClient`` for this cluster's registry."""
        self.schema_registry_url  # noqa: B018 - raises the friendly error when there is none
        assert self._registry is not None
        return self._registry.client()

    def connect_worker(self, wait: bool = True, **settings: Any) -> "ConnectWorker":
        """This cluster's Kafka Connect worker, started on first use (:mod:`labkit.services.connect`):
        a client for its REST API. ``wait=False`` returns while the JVM starts (calls wait for it);
        ``settings`` are worker settings for a new worker."""
        from .services import connect

        worker = getattr(self, "_connect_worker", None)
        if worker is None or not worker.running:
            worker = self._connect_worker = connect.start(self, wait=wait, **settings)
        elif wait:
            worker.wait_ready()
        return worker

    def view(self, topics: Optional[list[str]] = None, **options: Any) -> "ClusterView":
        """A live dashboard of this cluster for notebooks (:class:`labkit.view.widgets.ClusterView`)."""
        from .view.widgets import ClusterView  # the dashboard pulls in ipywidgets: only when a view is asked for

        return ClusterView(self, topics=topics, **options)

    def live_broker_ids(self) -> set[int]:
        """Ids of the brokers the cluster's own metadata lists right now."""
        return _admin.broker_ids(self.admin())

    def tool(self, tool: str, *args: str, check: bool = True, timeout: float = 120.0,
             input: Optional[str] = None, version: Optional[str] = None) -> ToolResult:
        """Run one of Kafka's command-line tools against this cluster, e.g. ``tool("kafka-topics", "--list")``
        (``version``: that cached Kafka release's tool)."""
        return run_tool(tool, *args, cluster=self, check=check, timeout=timeout, input=input, version=version)

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

    def add_broker(self, rack: Optional[str] = None, controller: bool = False) -> Broker:
        """Start one more broker (native backend: :mod:`labkit.backends.topology`)."""
        raise self._unsupported("Adding a broker")

    def remove_broker(self, broker_id: int, force: bool = False) -> None:
        """Stop a broker for good and unregister it (native backend)."""
        raise self._unsupported("Removing a broker")

    def restart_broker(self, broker_id: int, version: Optional[str] = None) -> None:
        """Stop a broker gracefully and start it again, on another Kafka release when asked (native backend)."""
        raise self._unsupported("Restarting a broker")

    def broker_log(self, broker_id: int, lines: int = 50, file: str = "server",
                   grep: Optional[str] = None) -> str:
        raise self._unsupported("Reading a broker's log")

    def advertise(self, broker_id: int, listener: str, address: Optional[str] = None) -> None:
        """Make a broker advertise ``address`` for ``listener`` (``None``: its own); restarts it. Native only."""
        raise self._unsupported("Changing what a broker advertises")

    # ---- metrics (labkit.runtime.metrics: the Prometheus JMX exporter in every broker JVM)
    def metrics_endpoints(self) -> dict[int, str]:
        """Broker id -> the URL its metrics exporter serves (none on a cluster labkit did not start)."""
        return {}

    def metrics(self, match: Optional[str] = None, brokers: Optional[list[int]] = None) -> "pd.DataFrame":
        """Every metric the running brokers' exporters serve now, one row per sample: ``broker``, ``metric``,
        ``labels``, ``value`` (``match``: only metric names containing it)."""
        from .runtime.metrics import scrape_cluster

        return scrape_cluster(self, match=match, brokers=brokers)

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
        named = f"{self.label!r} " if self.label else ""
        return f"<{type(self).__name__} {named}{self._summary()} bootstrap={self.bootstrap_servers} brokers=[{brokers}]>"

    def _repr_html_(self) -> str:
        colors = {"running": "#27ae60", "paused": "#f39c12", "stopped": "#7f8c8d", "killed": "#c0392b",
                  "external": "#2980b9"}
        rows = "".join(
            f"<tr><td>{b.id}</td><td>{b.roles}</td><td><code>{b.address}</code></td><td>{b.pid or '–'}</td>"
            f"<td style='color:{colors.get(b.state, '#000')}'>&#9679; {b.state}</td></tr>" for b in self.brokers)
        named = (f" <b style='color:{self.colour or '#000'}'>&#9632; {html.escape(self.label)}</b>" if self.label
                 else "")
        return (f"<div><b>Kafka Lab cluster</b>{named} — {html.escape(self._summary())}<br>"
                f"bootstrap servers: <code>{html.escape(self.bootstrap_servers)}</code>"
                f"<table><tr><th>id</th><th>roles</th><th>address</th><th>pid</th><th>state</th></tr>{rows}</table></div>")
