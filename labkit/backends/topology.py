"""Changing a running native cluster's shape: brokers added and removed, restarted on another Kafka
release, controllers added to and removed from a dynamic quorum (issue 28, lesson 13).

:class:`NativeCluster` mixes :class:`Topology` in. What it adds, and the Kafka mechanism behind each:

* ``add_broker()``: a new node with the next id, formatted with the cluster's id, launched like the
  others; Kafka gives it no partition by itself (a reassignment does).
* ``remove_broker(id)``: a graceful stop, then ``kafka-cluster unregister`` (KRaft keeps a stopped broker
  registered, fenced, until it is unregistered). It refuses while the broker still holds replicas unless
  ``force=True``: Kafka allows it, and the partitions stay under-replicated until a reassignment drops it.
* ``restart_broker(id, version=)``: a graceful stop and a start on the same data directory, on another
  cached Kafka release when asked (a rolling upgrade is this, broker by broker).
* a dynamic quorum (profile ``quorum = "dynamic"``, KIP-853, kraft.version 1): controllers are formatted
  with ``--initial-controllers`` and found through ``controller.quorum.bootstrap.servers``; a node added
  with ``controller=True`` starts as an observer, ``add_controller`` makes it a voter
  (``kafka-metadata-quorum add-controller``), ``remove_controller`` makes it an observer again.
* racks (profile ``racks = [...]``): ``broker.rack`` per node; and tiered storage (profile
  ``tiered_storage = true``, KIP-405) with Kafka's own ``LocalTieredStorage``.

Each call returns when every live broker agrees: the new broker is in every live broker's metadata, a
removed one in none. Layer: backends.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

from ..cluster import Broker
from ..errors import ClusterStateError, UnsupportedOperation
from ..operations import parse_quorum
from ..runtime import agreement, classdata
from ..runtime.distribution import ensure_distribution, tiered_storage_plugin
from ..runtime.environment import kafka_spec
from ..runtime.ports import free_ports
from ..runtime.tools import run_tool
from ..waiting import Wait
from .owned import new_cluster_id

#: Broker settings a tiered-storage cluster runs with (beyond the plugin's class, path and directory):
#: the lab's metadata topic is small (Kafka's default is 50 partitions), the remote-log manager looks
#: for segments to copy every second (default 30 s), and its thread pools are laptop-sized.
TIERED_SETTINGS = {
    "remote.log.storage.system.enable": True,
    "remote.log.metadata.manager.listener.name": "PLAINTEXT",
    "rlmm.config.remote.log.metadata.topic.num.partitions": 3,
    "remote.log.manager.task.interval.ms": 1000,
    "remote.log.manager.copier.thread.pool.size": 1,
    "remote.log.manager.expiration.thread.pool.size": 1,
    "remote.log.reader.threads": 2,
}


class Topology:
    """Adding, removing, restarting and upgrading nodes of a :class:`~labkit.backends.native.NativeCluster`."""

    # what NativeCluster provides
    _nodes: dict[int, Any]
    _profile: Any
    _lock: threading.RLock
    data_dir: Optional[Path]
    security: Any
    tls: Any
    exporter: bool
    cluster_id: str
    kafka_version: Optional[str]

    # ------------------------------------------------------------ versions
    def _default_version(self) -> str:
        """The release new nodes run: the one asked for, a tiered cluster's plugin release, or the lab's."""
        spec = kafka_spec()
        return self.kafka_version or (spec.tiered_version if self._profile.tiered_storage else spec.version)

    def _runtime(self, version: str) -> tuple[Optional[Path], str, Path]:
        """(launcher jar, classpath, class-data archive) for a broker JVM of Kafka ``version`` (cached)."""
        runtimes = self.__dict__.setdefault("_runtimes", {})
        if version not in runtimes:
            runtimes[version] = classdata.broker_setup(ensure_distribution(progress=False, version=version))
        return runtimes[version]

    @property
    def versions(self) -> dict[int, str]:
        """Broker id -> the Kafka release it runs."""
        return {node_id: node.version for node_id, node in self._nodes.items()}

    # ------------------------------------------------------------ what a node's files say
    def _directory_ids(self) -> dict[int, str]:
        """The initial controllers' metadata directory ids (a dynamic quorum names each voter by id and directory)."""
        if "_initial_voters" not in self.__dict__:
            self.__dict__["_initial_voters"] = {n.broker.id: new_cluster_id() for n in self._nodes.values()
                                                if n.broker.controller_port}
        return self.__dict__["_initial_voters"]

    def _quorum_format_arguments(self, node: Any) -> list[str]:
        """What ``kafka-storage format`` needs for the quorum: nothing (static), or the initial voters (dynamic)."""
        if self._profile.quorum != "dynamic":
            return []
        voters = self._directory_ids()
        if node.broker.id not in voters:
            return ["--no-initial-controllers"]  # a node added later: an observer until add_controller
        return ["--initial-controllers", ",".join(f"{i}@127.0.0.1:{self._nodes[i].broker.controller_port}:{d}"
                                                  for i, d in sorted(voters.items()))]

    def _topology_settings(self, node: Any) -> dict[str, Any]:
        """Node settings beyond ``kraft_properties``: the dynamic quorum's bootstrap, the rack, tiered storage."""
        out: dict[str, Any] = {}
        if self._profile.quorum == "dynamic":
            out["controller.quorum.voters"] = None
            out["controller.quorum.bootstrap.servers"] = ",".join(
                f"127.0.0.1:{self._nodes[i].broker.controller_port}" for i in sorted(self._directory_ids()))
        if node.rack:
            out["broker.rack"] = node.rack
        if self._profile.tiered_storage:
            assert self.data_dir is not None
            spec = kafka_spec()
            out.update(TIERED_SETTINGS)
            out.update({"remote.log.storage.manager.class.name": spec.tiered_class,
                        "remote.log.storage.manager.class.path": str(tiered_storage_plugin(progress=False)),
                        "rsm.config.dir": str(self.data_dir / "remote-tier"),
                        "rlmm.config.remote.log.metadata.topic.replication.factor": min(3, len(self._nodes))})
        return out

    # ------------------------------------------------------------ brokers
    def add_broker(self, rack: Optional[str] = None, controller: bool = False, version: Optional[str] = None,
                   timeout: float = 90.0) -> Broker:
        """Start one more broker (id: the highest so far + 1) and wait until every live broker lists it.

        ``rack`` sets its ``broker.rack`` (default: the profile's rule for its id); ``controller=True`` makes
        it a combined broker+controller that joins a dynamic quorum as an observer (``add_controller``
        makes it a voter); ``version`` is the Kafka release it runs (default: the one most brokers run).
        Kafka moves no partition onto it: a reassignment does.
        """
        self._require_owned_plaintext("Adding a broker")
        if controller and self._profile.quorum != "dynamic":
            raise ClusterStateError("Only a dynamic quorum takes new controllers (this cluster's is static).",
                                    "Start a cluster whose profile has quorum = \"dynamic\", e.g. 'operations'.")
        with self._lock:
            assert self.data_dir is not None
            node_id = max(self._nodes) + 1
            while (self.data_dir / f"node-{node_id}").exists():  # a removed broker's id is not reused
                node_id += 1
            node = self._add_node(node_id, controller, rack if rack is not None else self._profile.rack(node_id),
                                  version or self._most_common_version())
            self._launch(node, format_storage=True)  # type: ignore[attr-defined]
            node.broker.state = "running"
        Wait(f"broker {node_id} to bind its listeners", timeout=timeout, interval=0.1, stretch=True,  # listed first
             check=lambda: self._check_alive([node]), evidence=lambda: self._evidence([node])  # type: ignore[attr-defined]
             ).until(lambda: self._serving(node))  # type: ignore[attr-defined]
        agreement.agree(self, f"broker {node_id} registered", agreement.broker_listed(self, node_id),  # type: ignore[arg-type]
                        timeout=timeout)
        return node.broker

    def remove_broker(self, broker_id: int, force: bool = False, timeout: float = 60.0) -> None:
        """Stop a broker for good and unregister it; returns when no live broker lists it any more.

        Refuses while it still holds replicas (drain it first with a reassignment), unless ``force``.
        """
        self._require_owned_plaintext("Removing a broker")
        node = self._node(broker_id)  # type: ignore[attr-defined]
        if node.broker.controller_port and (self._profile.quorum == "static" or broker_id in self.voters()):
            raise ClusterStateError(f"Broker {broker_id} is also a voter of the controller quorum.",
                                    "Remove a broker-only node, or on a dynamic quorum remove_controller() first.")
        metadata = self.admin().list_topics(timeout=10)  # type: ignore[attr-defined]
        held = [f"{t.topic}-{p.id}" for t in metadata.topics.values() for p in t.partitions.values()
                if broker_id in p.replicas]
        if held and not force:
            shown = ", ".join(held[:6]) + (f" and {len(held) - 6} more" if len(held) > 6 else "")
            raise ClusterStateError(f"Broker {broker_id} still holds {len(held)} replicas ({shown}).",
                                    "Move them off first (a reassignment), or pass force=True to see what happens.")
        if node.broker.state in ("running", "paused") and self._is_running(node):  # type: ignore[attr-defined]
            if node.broker.state == "paused":
                self.resume_broker(broker_id)  # type: ignore[attr-defined]
            self.stop_broker(broker_id)  # type: ignore[attr-defined]
        run_tool("kafka-cluster", "unregister", "--id", str(broker_id), cluster=self, check=False)  # type: ignore[arg-type]
        with self._lock:
            node.broker.state = "removed"
            del self._nodes[broker_id]
        agreement.agree(self, f"broker {broker_id} unregistered",  # type: ignore[arg-type]
                        agreement.broker_listed(self, broker_id, listed=False), timeout=timeout)  # type: ignore[arg-type]

    def restart_broker(self, broker_id: int, version: Optional[str] = None, timeout: float = 90.0) -> None:
        """Stop a broker gracefully and start it again on the same data directory, on Kafka ``version`` when
        given (a cached release: the lab's or the previous one); returns once it serves again."""
        node = self._node(broker_id)  # type: ignore[attr-defined]
        if version is not None:
            ensure_distribution(progress=False, version=version)  # a clear error for a release not in the cache
        if node.broker.state in ("running", "paused") and self._is_running(node):  # type: ignore[attr-defined]
            if node.broker.state == "paused":
                self.resume_broker(broker_id)  # type: ignore[attr-defined]
            self.stop_broker(broker_id)  # type: ignore[attr-defined]
        node.version = version or node.version
        self.start_broker(broker_id, timeout=timeout)  # type: ignore[attr-defined]

    # ------------------------------------------------------------ the controller quorum (dynamic)
    def add_controller(self, broker_id: int, timeout: float = 60.0) -> None:
        """Make node ``broker_id`` (added with ``controller=True``: an observer) a voter of the quorum."""
        node = self._node(broker_id, need_running=True)  # type: ignore[attr-defined]
        if not node.broker.controller_port:
            raise ClusterStateError(f"Node {broker_id} has no controller listener.",
                                    "Add it with cluster.add_broker(controller=True).")
        # add-controller reads the new controller's node id, metadata directory id and endpoints from its
        # own properties (KIP-853); the request goes to the controllers.
        run_tool("kafka-metadata-quorum", "--bootstrap-controller", self._controller_bootstrap(),
                 "--command-config", str(node.dir / "server.properties"), "add-controller", cluster=self)  # type: ignore[arg-type]
        Wait(f"node {broker_id} among the voters", timeout=timeout, interval=0.5, stretch=True).until(
            lambda: broker_id in self.voters())

    def remove_controller(self, broker_id: int, timeout: float = 60.0) -> None:
        """Take node ``broker_id`` out of the voters (it stays a broker, and follows the quorum as an observer)."""
        directory = self.voters().get(broker_id)
        if directory is None:
            raise ClusterStateError(f"Node {broker_id} is not a voter of the quorum.", f"Voters: {sorted(self.voters())}.")
        run_tool("kafka-metadata-quorum", "--bootstrap-controller", self._controller_bootstrap(), "remove-controller",
                 "--controller-id", str(broker_id), "--controller-directory-id", directory, cluster=self)  # type: ignore[arg-type]
        self._directory_ids().pop(broker_id, None)
        Wait(f"node {broker_id} out of the voters", timeout=timeout, interval=0.5, stretch=True).until(
            lambda: broker_id not in self.voters())

    def voters(self) -> dict[int, str]:
        """Voter id -> metadata directory id, as the quorum's leader describes it (``describe --status``).

        Asked through the brokers, which forward it to the active controller: a tool bootstrapped from the
        controllers asks the one their answer names active, and while the quorum changes leader that answer
        can name none (or the leader just removed) -- the tool then waits out its whole 60-s API timeout
        (seen: lesson 13 at load 34, removing the voter that led the quorum). A broker resends to the new
        leader within the lab's controller.socket.timeout.ms."""
        status = run_tool("kafka-metadata-quorum", "describe", "--status", cluster=self).stdout  # type: ignore[arg-type]
        return dict(parse_quorum(status, "").voters)

    def _controller_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.broker.controller_port}" for n in self._nodes.values()
                        if n.broker.controller_port and n.broker.state == "running")

    # ------------------------------------------------------------ internals
    def _require_owned_plaintext(self, what: str) -> None:
        if self.security is not None or self.tls is not None:
            raise UnsupportedOperation(f"{what} is not supported on a cluster with TLS listeners (its certificates "
                                       "are made for the nodes it started with).",
                                       "Use a plaintext profile such as 'three-brokers' or 'operations'.")

    def _most_common_version(self) -> str:
        versions = [n.version for n in self._nodes.values()]
        return max(set(versions), key=versions.count) if versions else self._default_version()

    def _add_node(self, node_id: int, controller: bool, rack: Optional[str], version: str) -> Any:
        """A new node's directory, ports and ``server.properties`` (not launched)."""
        assert self.data_dir is not None
        node_dir = self.data_dir / f"node-{node_id}"
        (node_dir / "logs").mkdir(parents=True)
        (node_dir / "data").mkdir()
        broker = Broker(id=node_id, host="127.0.0.1", port=0, state="stopped")
        node = type(next(iter(self._nodes.values())))(broker, dict(self.settings), dir=node_dir,  # type: ignore[attr-defined]
                                                      version=version, rack=rack)
        picked = free_ports(3)
        supervisor = getattr(self, "supervisor", None)
        if supervisor is not None:
            supervisor.hold(picked)  # released when the cluster stops
        ports = iter(picked)
        broker.listeners = {"PLAINTEXT": next(ports)}
        if controller:
            broker.listeners["CONTROLLER"] = next(ports)
        broker.port, broker.controller_port = broker.listeners["PLAINTEXT"], broker.listeners.get("CONTROLLER")
        node.metrics_port = next(ports) if self.exporter else None
        self._nodes[node_id] = node
        self._write_properties(node)  # type: ignore[attr-defined]
        return node
