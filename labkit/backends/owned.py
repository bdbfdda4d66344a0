"""What every backend that owns its brokers shares: nodes, start and stop, fault injection, clean-up.

A backend (native JVMs, Docker containers) subclasses :class:`OwnedCluster` and
supplies only what differs: how nodes are prepared and launched, how one is
killed, stopped, paused or resumed, whether it still runs, and its log tail as
evidence. The start skeleton (progress bar, wait until every broker is
registered, tear down everything when a start fails half-way), the rejoin wait
after a restart, and the stop at interpreter exit are written here once.
"""

from __future__ import annotations

import atexit
import base64
import os
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Generic, Mapping, Optional, TypeVar

from confluent_kafka import KafkaException

from ..cluster import Broker, Cluster
from ..errors import ClusterStateError
from ..runtime import agreement
from ..runtime.librdkafka import HANDSHAKE_MS
from ..runtime.profiles import DEFAULT_PROFILE, load_profile, normalize_overrides
from ..runtime.progress import Progress
from ..waiting import Wait

_ALL_CLUSTERS: "weakref.WeakSet[OwnedCluster[Any]]" = weakref.WeakSet()


def _stop_all_at_exit() -> None:
    for cluster in list(_ALL_CLUSTERS):
        try:
            cluster.stop()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


atexit.register(_stop_all_at_exit)


def data_root() -> Path:
    """Where cluster directories go: ``$LABKIT_DATA_DIR`` or the system temp dir."""
    return Path(os.environ.get("LABKIT_DATA_DIR") or tempfile.gettempdir())


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def kraft_properties(node_id: int, controller: bool, voters: str, listeners: Mapping[str, str],
                     advertised: Mapping[str, str], protocols: Mapping[str, str], inter_broker: str,
                     log_dirs: str) -> dict[str, Any]:
    """The settings labkit manages for one KRaft node (see ``profiles.MANAGED_SETTINGS``).

    ``listeners`` maps each listener name to the ``host:port`` it binds (the
    ``CONTROLLER`` one only on controller nodes), ``advertised`` the client-facing
    ones to what the node tells clients, ``protocols`` every name to its security
    protocol.
    """
    return {
        "process.roles": "broker,controller" if controller else "broker",
        "node.id": node_id,
        "controller.quorum.voters": voters,
        "listeners": ",".join(f"{name}://{where}" for name, where in listeners.items()),
        "advertised.listeners": ",".join(f"{name}://{where}" for name, where in advertised.items()),
        "listener.security.protocol.map": ",".join(f"{name}:{proto}" for name, proto in protocols.items()),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": inter_broker,
        "log.dirs": log_dirs,
    }


@dataclass
class Node:
    """One node of an owned cluster: the broker as labkit shows it and the settings it runs with."""

    broker: Broker
    settings: dict[str, Any] = field(default_factory=dict)


N = TypeVar("N", bound=Node)


class OwnedCluster(Cluster, Generic[N]):
    """A cluster whose brokers this Python process started, and stops."""

    backend = "owned"
    owns_brokers = True
    #: Seconds ``start()`` waits for every broker by default.
    default_start_timeout: ClassVar[float] = 120.0
    #: Seconds between looks while waiting for brokers to register.
    poll_interval: ClassVar[float] = 0.2
    #: What to try when the brokers do not come up.
    start_hint: ClassVar[str] = "The broker logs may say why; try `labkit doctor`."

    def __init__(self, profile: str = DEFAULT_PROFILE, overrides: Optional[Mapping[str, Any]] = None,
                 start_timeout: Optional[float] = None, progress: bool = True, name: Optional[str] = None) -> None:
        super().__init__()
        self.profile = profile
        self._profile = load_profile(profile)
        self._overrides = normalize_overrides(overrides or {})
        self.start_timeout = self.default_start_timeout if start_timeout is None else start_timeout
        self._progress = progress
        self.name = name or f"labkit-{uuid.uuid4().hex[:8]}"
        self.cluster_id = new_cluster_id()
        self._nodes: dict[int, N] = {}
        self._lock = threading.RLock()
        self._started = False
        self._stopped = False
        #: Seconds the last start() took until the cluster was ready.
        self.start_seconds: Optional[float] = None

    # ------------------------------------------------------------ what a backend supplies
    def check_settings(self) -> None:
        """Refuse a bad setting before anything starts (no progress bar, no process, no directory); ``start()``
        does it first, and ``labkit cluster up`` before it starts its background process."""

    def _start_nodes(self, bar: Progress) -> None:
        """Prepare and launch every node, then :meth:`_wait_ready`."""
        raise NotImplementedError

    def _teardown(self) -> None:
        """Remove every process or container and what they stored."""
        raise NotImplementedError

    def _launch(self, node: N) -> None:
        """Start one (stopped or killed) node again with the same id, ports and data."""
        raise NotImplementedError

    def _kill(self, node: N) -> None:
        raise NotImplementedError

    def _terminate(self, node: N, timeout: float) -> None:
        raise NotImplementedError

    def _pause(self, node: N) -> None:
        raise NotImplementedError

    def _resume(self, node: N) -> None:
        raise NotImplementedError

    def _is_running(self, node: N) -> bool:
        """The node's process or container exists (running or paused)."""
        raise NotImplementedError

    def _check_alive(self, nodes: list[N]) -> None:
        """Raise (with the node's log) when one of ``nodes`` exited while it should be starting."""
        raise NotImplementedError

    def _evidence(self, nodes: list[N]) -> str:
        """The last log lines of ``nodes``, for a timeout error."""
        raise NotImplementedError

    def _start_error(self, exc: BaseException) -> BaseException:
        """The error to raise when start() failed with ``exc`` (a backend may say it better)."""
        return exc

    # ------------------------------------------------------------ public API
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.broker.address for n in self._nodes.values())

    @property
    def brokers(self) -> list[Broker]:
        with self._lock:
            for node in self._nodes.values():
                if not self._stopped and node.broker.state in ("running", "paused") and not self._is_running(node):
                    node.broker.state = "killed"  # died on its own
                    node.broker.pid = None
            return [n.broker for n in self._nodes.values()]

    @property
    def broker_ids(self) -> list[int]:
        return list(self._nodes)

    @property
    def settings(self) -> dict[str, Any]:
        """The broker settings every node is started with (lab defaults, profile, overrides)."""
        return {**self._profile.settings, **self._overrides}

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self) -> "OwnedCluster[N]":
        """Launch every node and wait until the cluster answers. Returns ``self``.

        A start that fails half-way stops whatever it started before the error is raised.
        """
        if self._started:
            raise ClusterStateError("This cluster was already started.", "Create a new one with labkit.start_cluster().")
        self._started = True
        t0 = time.monotonic()
        _ALL_CLUSTERS.add(self)
        try:
            self.check_settings()
            bar = Progress(self._progress, "Starting Kafka", total=self._profile.brokers + 1,
                           bar_format="{desc}: {bar} {n_fmt}/{total_fmt} [{elapsed}] {postfix}")
            try:
                self._start_nodes(bar)
            finally:  # a failed start leaves no bar behind (issue 26: an empty "Starting Kafka 0/4" above the error)
                bar.close()
        except BaseException as exc:
            self.stop()
            better = self._start_error(exc)
            if better is exc:
                raise
            raise better from exc
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop everything this cluster started (services first, then the brokers). Safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._run_stop_hooks()
            self._close_admin()
            self._teardown()
            for node in self._nodes.values():
                node.broker.state = "stopped"
                node.broker.pid = None
            _ALL_CLUSTERS.discard(self)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL a broker: no controlled shutdown, like pulling the plug."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._kill(node)
            node.broker.state, node.broker.pid = "killed", None

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """Stop a broker gracefully (SIGTERM: controlled shutdown moves its leaderships first); returns once every
        live broker's metadata has dropped it (its leaderships and ISR places moved in the same controller write)."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._terminate(node, timeout)
            node.broker.state, node.broker.pid = "stopped", None
        agreement.agree(self, f"broker {broker_id} stopped", agreement.broker_listed(self, broker_id, listed=False),
                        timeout=timeout)

    def start_broker(self, broker_id: int, wait: bool = True, timeout: float = 60.0) -> None:
        """Start a stopped or killed broker again with the same id, ports and data; wait until it serves."""
        node = self._node(broker_id)
        if node.broker.state in ("running", "paused") and self._is_running(node):
            raise ClusterStateError(f"Broker {broker_id} is already running.",
                                    "Kill or stop it first, or resume it if it is paused.")
        with self._lock:
            self._launch(node)
            node.broker.state = "running"
        if wait:
            Wait(f"broker {broker_id} to rejoin the cluster", timeout=timeout, interval=0.25, stretch=True,
                 check=lambda: self._check_alive([node]),
                 evidence=lambda: self._evidence([node])).until(lambda: self._rejoined(node.broker))
            agreement.agree(self, f"broker {broker_id} registered again", agreement.broker_listed(self, broker_id),
                            timeout=timeout)

    def pause_broker(self, broker_id: int) -> None:
        """Freeze a broker: it keeps its sockets but stops answering, like a long GC pause."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._pause(node)
            node.broker.state = "paused"

    def resume_broker(self, broker_id: int) -> None:
        """Let a paused broker run again."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._resume(node)
            node.broker.state = "running"

    # ------------------------------------------------------------ shared internals
    def _node(self, broker_id: int, need_running: bool = False) -> N:
        if self._stopped:
            raise ClusterStateError("This cluster has been stopped.", "Start a new one with labkit.start_cluster().")
        node = self._nodes.get(broker_id)
        if node is None:
            known = ", ".join(map(str, self._nodes)) or "none (the cluster is not started)"
            raise ClusterStateError(f"There is no broker {broker_id} in this cluster.", f"Broker ids are {known}.")
        if need_running and not (node.broker.state in ("running", "paused") and self._is_running(node)):
            state = node.broker.state if node.broker.state not in ("running", "paused") else "killed"
            raise ClusterStateError(f"Broker {broker_id} is not running (it is {state}).",
                                    f"Start it first with cluster.start_broker({broker_id}).")
        return node

    def _wait_ready(self, bar: Progress) -> None:
        """Wait until every node's broker is in the cluster metadata and serves (:meth:`_serving`), a step of
        ``bar`` as each appears."""
        nodes = list(self._nodes.values())
        expected = {node.broker.id for node in nodes}
        seen: set[int] = set()
        live_ids = self._ready_probe()

        def registered() -> bool:
            ids = live_ids()
            for new in sorted((ids & expected) - seen):
                seen.add(new)
                bar.step(f"broker {new} registered")
            return ids >= expected and all(self._serving(node) for node in nodes)

        Wait(f"all {len(expected)} brokers to register", timeout=self.start_timeout, interval=self.poll_interval,
             stretch=True, hint=self.start_hint, check=lambda: self._check_alive(nodes),
             evidence=lambda: self._evidence(nodes)).until(registered)

    def _serving(self, node: N) -> bool:
        """The node's broker bound its listeners (a backend that can tell says; listed is not enough: a broker
        registers before it binds, and one that cannot bind dies after the metadata listed it)."""
        return True

    def _ready_probe(self) -> Callable[[], set[int]]:
        """What :meth:`_wait_ready` asks: the ids of the brokers in the metadata (a backend may ask faster)."""
        return self.live_broker_ids

    def _rejoined(self, broker: Broker) -> bool:
        """The broker is listed in the metadata *and* answers a metadata request on its own address.

        Right after a kill the dead broker stays listed until its session times out, so being
        listed alone would say a restarted broker is back seconds before its new process serves.
        """
        node = self._nodes.get(broker.id)
        return (node is None or self._serving(node)) and broker.id in self.live_broker_ids() and self._answers(broker)

    def _answers(self, broker: Broker) -> bool:
        """A metadata request sent to ``broker``'s own address gets an answer within a second."""
        # a plaintext connection is set up in milliseconds; TLS and SCRAM take seconds on a loaded machine
        setup = 1000 if str(self.client_config().get("security.protocol", "PLAINTEXT")).upper() == "PLAINTEXT" \
            else HANDSHAKE_MS
        client = self.admin_for(broker.address, warm=False, **{"socket.connection.setup.timeout.ms": setup})
        try:
            client.list_topics(timeout=setup / 1000 + 1)
        except KafkaException:
            return False
        return True
