"""The default backend: Kafka's own JVMs, started on this machine from the cached jars.

Every node is a combined KRaft broker+controller (or broker-only beyond the
profile's controller count) bound to free loopback ports, with its own
directory under one per-cluster directory. A ``secured`` profile adds TLS,
SCRAM and mutual-TLS listeners and ACLs (:mod:`labkit.security`). Each JVM is a
:class:`~labkit.runtime.processes.ManagedProcess` of the cluster's
:class:`~labkit.runtime.processes.Supervisor`, so none outlives the Python process that
started it, even when that process is killed with SIGKILL.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from .. import admin as _admin
from ..runtime import classdata
from ..runtime import metrics as _metrics
from ..runtime.brokerlogs import log_file, read_log
from ..runtime.distribution import Distribution, ensure_distribution
from ..runtime.jvm import find_java
from ..runtime.environment import kafka_spec
from ..errors import BrokerStartError, ClusterStateError, PortInUseError, ProcessStartError
from ..runtime import agreement
from ..runtime.ports import free_ports
from ..runtime.processes import Supervisor, tail
from ..runtime import limits
from ..runtime.profiles import load_profile, render_value, validate_settings, validate_values
from ..runtime.progress import Progress
from ..cluster import Broker
from .secured import ADMIN, SECURED_LISTENERS, CertificateAuthority, SecuredCluster, format_arguments
from .nativenode import NativeNode
from .owned import OwnedCluster, data_root, kraft_properties
from .topology import Topology

log = logging.getLogger(__name__)

_BIND_FAILURES = ("Address already in use", "BindException")
#: What the node launcher (java/LabKafka.java) prints when formatting the storage failed.
_FORMAT_FAILED = "labkit: formatting the storage failed"


class NativeCluster(Topology, OwnedCluster[NativeNode]):
    """A Kafka cluster of JVMs on this machine, owned by this Python process."""

    backend = "native"
    #: Asked every 50 ms while starting, through a client that retries refused connections within 200 ms.
    poll_interval = 0.05

    def __init__(self, *args: Any, kafka_version: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The Kafka release its nodes start on (None: the lab's; see ``Topology._default_version``).
        self.kafka_version = kafka_version
        self.data_dir: Optional[Path] = None
        self.distribution: Optional[Distribution] = None
        #: Write the broker class-data archive here when node 1 exits cleanly (``labkit setup``).
        self.archive_dump: Optional[Path] = None
        self._launcher: Optional[Path] = None
        self._classpath = ""
        self._archive: Optional[Path] = None
        self.supervisor: Optional[Supervisor] = None
        #: A secured cluster's CA, users and client settings (None without security).
        self.security: Optional[SecuredCluster] = None
        #: The CA of the ``plaintext+tls`` profiles' TLS client listener (None without one).
        self.tls: Optional[CertificateAuthority] = None
        #: Brokers carry the Prometheus JMX exporter agent (labkit.runtime.metrics): fetched and not switched off.
        self.exporter = _metrics.enabled() and _metrics.exporter_jar() is not None

    # ------------------------------------------------------------ security (the secured profile)
    @property
    def users(self) -> dict[str, str]:
        """SCRAM user -> password, on a secured cluster (the admin is a super user)."""
        return dict(self.security.users) if self.security else {}

    def security_settings(self, user: Optional[str] = None, mtls: bool = False) -> dict[str, Any]:
        if self.security is None:
            return super().security_settings(user, mtls)
        return self.security.client_settings(user or ADMIN, mtls)

    def listener_addresses(self, mtls: bool = False) -> str:
        if self.security is None or not mtls:
            return self.bootstrap_servers
        return ",".join(f"{n.broker.host}:{n.broker.listeners['MTLS']}" for n in self._nodes.values())

    def add_user(self, name: str, password: str) -> None:
        """Create ``name`` (or give it a new password) with SCRAM-SHA-512, as the admin: no restart."""
        if self.security is None:
            super().add_user(name, password)
            return
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        for future in self.admin().alter_user_scram_credentials(
                [UserScramCredentialUpsertion(name, info, password.encode())]).values():
            future.result()
        self.security.users[name] = password
        agreement.agree(self, f"SCRAM user {name!r} accepted", agreement.user_accepted(self, self.client_config(name)))

    def tool_config(self) -> Optional[Path]:
        return self.security.properties_file() if self.security else None

    def tls_settings(self) -> dict[str, Any]:
        """Client settings for the ``TLS`` listener of a ``plaintext+tls`` profile (the same brokers, encrypted):
        ``cluster.consumer(group, **cluster.tls_settings())``."""
        if self.tls is None:
            raise ClusterStateError(f"The {self.profile!r} profile has no TLS client listener.",
                                    "Start one with a plaintext+tls profile, e.g. "
                                    "labkit.start_cluster('three-brokers-tls').")
        return {"bootstrap.servers": ",".join(f"{n.broker.host}:{n.broker.listeners['TLS']}"
                                              for n in self._nodes.values()),
                "security.protocol": "SSL", "ssl.ca.location": str(self.tls.ca_file)}

    # ------------------------------------------------------------ public API (native only)
    def broker_log(self, broker_id: int, lines: int = 50, file: str = "server",
                   grep: Optional[str] = None) -> str:
        """The last ``lines`` lines of one of a broker's log files (``server``, ``controller``,
        ``state-change``, ``request``, ...: :data:`labkit.runtime.brokerlogs.LOG_FILES`); with ``grep`` (a regular
        expression) the last ``lines`` lines that match it."""
        return read_log(self._node(broker_id).dir / "logs" / log_file(file), lines, grep)

    def metrics_endpoints(self) -> dict[int, str]:
        """Broker id -> the URL its Prometheus JMX exporter serves (empty when brokers run without it)."""
        return {n.broker.id: f"http://127.0.0.1:{n.metrics_port}/metrics"
                for n in self._nodes.values() if n.metrics_port}

    def broker_dir(self, broker_id: int) -> Path:
        """A node's directory: ``server.properties``, ``data/`` (log.dirs) and ``logs/``."""
        return self._node(broker_id).dir

    def log_dir(self, broker_id: int) -> Path:
        """A node's ``log.dirs``: one sub-directory per partition it stores."""
        return self._node(broker_id).data_dir

    def advertise(self, broker_id: int, listener: str, address: Optional[str] = None, timeout: float = 60.0) -> None:
        """Make a broker tell clients ``address`` (``host:port``) for ``listener``; ``None`` restores its own.

        The node still binds the same ports (``listeners``): a client bootstraps from the real
        address and then connects wherever the metadata says, so a wrong ``address`` lets the
        bootstrap succeed and every request to this broker fail. Kafka reads
        ``advertised.listeners`` only at start-up (4.3.1 refuses to change it dynamically), so
        this rewrites the node's ``server.properties`` and restarts the broker (a graceful stop,
        then the same start as :meth:`start_broker`, waiting until it serves again).
        Misadvertising the inter-broker listener (``PLAINTEXT`` on a plain cluster) cuts the other
        brokers off from this one too; the secured profile's client listeners (``SCRAM``,
        ``MTLS``) leave replication alone.
        """
        node = self._node(broker_id)
        clients = [name for name in node.broker.listeners if name != "CONTROLLER"]
        if listener not in clients:
            raise ClusterStateError(f"Broker {broker_id} has no client listener {listener!r}.",
                                    f"Its listeners: {', '.join(clients)}.")
        if address is not None:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ClusterStateError(f"{address!r} is not a host:port address.",
                                        "Give it as host:port, e.g. 'kafka-1.internal:9092'.")
        if node.broker.state in ("running", "paused") and self._is_running(node):
            if node.broker.state == "paused":
                self.resume_broker(broker_id)
            self.stop_broker(broker_id)
        if address is None:
            node.advertised.pop(listener, None)
        else:
            node.advertised[listener] = address
        self._write_properties(node)
        self.start_broker(broker_id, timeout=timeout)

    def _summary(self) -> str:
        versions = sorted({n.version for n in self._nodes.values() if n.version}) or [kafka_spec().version]
        return f"{self.profile}, Kafka {' + '.join(versions)}, native JVMs"

    # ------------------------------------------------------------ start and stop
    def check_settings(self) -> None:
        self.distribution = ensure_distribution(progress=self._progress, version=self._default_version())
        validate_settings(self._overrides, self.distribution.broker_config_names())
        validate_values(self._overrides, self.distribution.broker_config_definitions())

    def _start_nodes(self, bar: Progress) -> None:
        assert self.distribution is not None
        # The node launcher (formats in the broker's own JVM), the jar-by-jar classpath and the
        # class-data archive for it (see labkit.runtime.classdata); without a launcher: format first, apart.
        self._launcher, self._classpath, self._archive = self._runtime(self.distribution.version)
        root = data_root()
        root.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=root))
        # every JVM's java.io.tmpdir (_java_command): what a JVM unpacks there (lz4's native library, for one)
        # goes with the cluster, not left in /tmp by every broker killed
        (self.data_dir / "tmp").mkdir()
        self.supervisor = Supervisor(self.data_dir)
        self._make_nodes()
        if self._launcher is None:
            self._format_storage()
        bar.step("storage formatted")
        for attempt in range(3):
            try:
                for node in self._nodes.values():
                    self._launch(node, format_storage=self._launcher is not None)
                    node.broker.state = "running"
                self._wait_ready(bar)
                return
            except PortInUseError:
                if attempt == 2:
                    raise
                log.info("a port was taken while starting; retrying with new ports")
                for node in self._nodes.values():
                    self._kill(node)
                self._assign_ports()

    def _teardown(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()

    # ------------------------------------------------------------ one node
    def _launch(self, node: NativeNode, format_storage: bool = False) -> None:
        """Start the node's JVM; ``format_storage`` (the cluster's start) formats its storage first, in it."""
        cmd = self._node_command(node, format_storage)
        if node.process is None:
            assert self.supervisor is not None
            node.process = self.supervisor.process(f"broker {node.broker.id}", cmd, node.stdout_path, cwd=node.dir,
                                                   logs=[node.log_path])
        node.process.command = cmd  # a restart (start_broker) does not format again
        node.log_start = node.log_path.stat().st_size if node.log_path.exists() else 0
        node.started = False
        node.process.start()
        node.broker.pid = node.process.pid

    def _kill(self, node: NativeNode) -> None:
        if node.process is not None:
            node.process.kill()

    def _terminate(self, node: NativeNode, timeout: float) -> None:
        if node.process is not None:
            node.process.stop(timeout)

    def _pause(self, node: NativeNode) -> None:
        assert node.process is not None
        node.process.pause()

    def _resume(self, node: NativeNode) -> None:
        assert node.process is not None
        node.process.resume()

    def _is_running(self, node: NativeNode) -> bool:
        return node.running()

    def _node_command(self, node: NativeNode, format_storage: bool) -> list[str]:
        spec = kafka_spec()
        launcher, classpath, archive = self._runtime(node.version)
        properties = str(node.dir / "server.properties")
        agent = _metrics.agent_options(node.metrics_port) if node.metrics_port else []
        if self.archive_dump is not None and node.broker.id == 1:
            sharing = classdata.dump_options(self.archive_dump)
            agent = []  # the JVM refuses to record an archive with a Java agent attached; the archive serves both
        else:
            sharing = classdata.use_options(archive)
        if launcher is None:
            main, args = "kafka.Kafka", [properties]
        else:
            main, args = classdata.LAUNCHER_MAIN, [properties]
            if format_storage:
                # In a file (private, beside server.properties): a secured cluster's SCRAM credential
                # must not stay on the broker's command line for its lifetime.
                args_file = node.dir / "format.args"
                args_file.touch(mode=0o600)
                args_file.write_text("\n".join(self._format_arguments(node)) + "\n")
                args = ["--format", str(args_file), properties]
        return self._java_command(main, *args, heap=spec.heap, heap_start=spec.heap_start,
                                  options=(*spec.jvm_options, *agent),
                                  log4j=spec.log4j_config,
                                  logs_dir=node.dir / "logs", classpath=classpath, sharing=sharing)

    def _format_arguments(self, node: NativeNode) -> list[str]:
        """What ``kafka-storage format`` is given for ``node`` (after the word ``format``)."""
        # A secured cluster's admin exists from the start: every controller bootstraps the same credential.
        scram = format_arguments(ADMIN, self.security.users[ADMIN]) if self.security else []
        return ["--ignore-formatted", "-t", self.cluster_id, "-c", str(node.dir / "server.properties"), *scram,
                *self._quorum_format_arguments(node)]

    def _ready_probe(self) -> Callable[[], set[int]]:
        # Its own client: the shared one backs off to 1 s between refused connections.
        probe = self.admin_for(warm=False, **{"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
        return lambda: _admin.broker_ids(probe, timeout=1.0)

    def _serving(self, node: NativeNode) -> bool:
        return node.serving()

    def _check_alive(self, nodes: list[NativeNode]) -> None:
        for node in nodes:
            if node.process is None:
                continue
            try:
                node.process.check_alive()
            except ProcessStartError:
                node.broker.state = "killed"
                out = tail(node.stdout_path, 15)
                if _FORMAT_FAILED in out:
                    raise BrokerStartError(f"Formatting the storage of node {node.broker.id} failed.",
                                           "Check the broker settings; the formatter's output is below.",
                                           broker_id=node.broker.id, log_path=node.stdout_path,
                                           log_tail=out.strip()) from None
                # the cause sits above the last lines when the broker shut itself down in order (a long stack
                # trace of the metrics agent, or a page of shutdown lines): its ERROR and FATAL lines come first
                everything = tail(node.log_path, 2000) + "\n" + tail(node.stdout_path, 400)
                causes = [line for line in everything.splitlines() if " ERROR " in line or " FATAL " in line][:6]
                text = "\n".join([*causes, "...", tail(node.log_path, 20), out] if causes else
                                  [tail(node.log_path, 30), out])
                kind = PortInUseError if any(s in everything for s in _BIND_FAILURES) else BrokerStartError
                raise kind(f"Broker {node.broker.id} exited during start-up (exit code {node.process.returncode}).",
                           "Its log's last lines are below.",
                           broker_id=node.broker.id, log_path=node.log_path, log_tail=text.strip()) from None

    def _evidence(self, nodes: list[NativeNode]) -> str:
        return "\n".join(node.process.evidence() for node in nodes if node.process is not None)

    # ------------------------------------------------------------ files
    def _make_nodes(self) -> None:
        assert self.data_dir is not None
        settings = self.settings
        if self._profile.security == "secured":
            self.security = SecuredCluster(self.data_dir, list(range(1, self._profile.brokers + 1)))
        elif self._profile.security == "plaintext+tls":
            self.tls = CertificateAuthority(self.data_dir / "tls")
        for node_id in range(1, self._profile.brokers + 1):
            node_dir = self.data_dir / f"node-{node_id}"
            (node_dir / "logs").mkdir(parents=True)
            (node_dir / "data").mkdir()
            broker = Broker(id=node_id, host="127.0.0.1", port=0, state="stopped")
            self._nodes[node_id] = NativeNode(broker, dict(settings), dir=node_dir, version=self.distribution.version,
                                              rack=self._profile.rack(node_id))
        self._assign_ports()

    def _listener_protocols(self) -> dict[str, str]:
        """Listener name -> security protocol (the first one is where clients bootstrap)."""
        if self.security is not None:
            return dict(SECURED_LISTENERS)
        if self.tls is not None:
            return {"PLAINTEXT": "PLAINTEXT", "TLS": "SSL", "CONTROLLER": "PLAINTEXT"}
        return {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}

    def _assign_ports(self) -> None:
        controllers = self._profile.controllers
        names = [n for n in self._listener_protocols() if n != "CONTROLLER"]
        exporters = len(self._nodes) if self.exporter else 0
        assert self.supervisor is not None
        self.supervisor.let_go([p for n in self._nodes.values()  # a start retried: the ports of the last try
                                for p in (*n.broker.listeners.values(), n.metrics_port) if p])
        picked = free_ports(len(self._nodes) * len(names) + controllers + exporters)
        self.supervisor.hold(picked)
        ports = iter(picked)
        for node in self._nodes.values():
            node.broker.listeners = {name: next(ports) for name in names}
            if node.broker.id <= controllers:
                node.broker.listeners["CONTROLLER"] = next(ports)
            node.metrics_port = next(ports) if exporters else None
            node.broker.port = node.broker.listeners[names[0]]
            node.broker.controller_port = node.broker.listeners.get("CONTROLLER")
        for node in self._nodes.values():
            self._write_properties(node)

    def _write_properties(self, node: NativeNode) -> None:
        b = node.broker
        voters = ",".join(f"{n.broker.id}@127.0.0.1:{n.broker.controller_port}"
                          for n in self._nodes.values() if n.broker.controller_port)
        protocols = self._listener_protocols()
        listeners = {name: f"127.0.0.1:{port}" for name, port in b.listeners.items()}
        advertised = {name: node.advertised.get(name, where) for name, where in listeners.items()
                      if name != "CONTROLLER"}
        managed = kraft_properties(b.id, bool(b.controller_port), voters, listeners, advertised=advertised,
                                   protocols=protocols, inter_broker="BROKER" if self.security else "PLAINTEXT",
                                   log_dirs=str(node.data_dir))
        managed.update(self._topology_settings(node))
        managed = {k: v for k, v in managed.items() if v is not None}
        if self.security is not None:
            managed.update(self.security.node_settings(b.id))
        if self.tls is not None:
            keystore = self.tls.issue(f"broker-{b.id}", server=True)["keystore"]
            managed.update({"listener.name.tls.ssl.keystore.type": "PEM",
                            "listener.name.tls.ssl.keystore.location": str(keystore)})
        lines = [f"# Written by labkit for cluster {self.name} ({self.profile}); node {b.id}."]
        lines += [f"{k}={render_value(v)}" for k, v in managed.items()]
        lines += ["", "# lab defaults, profile and overrides"]
        lines += [f"{k}={render_value(v)}" for k, v in sorted(node.settings.items())]
        (node.dir / "server.properties").write_text("\n".join(lines) + "\n")

    def _java_command(self, main_class: str, *args: str, heap: str, options: tuple[str, ...],
                      log4j: Path, logs_dir: Optional[Path] = None, classpath: Optional[str] = None,
                      sharing: Sequence[str] = (), heap_start: str = "") -> list[str]:
        assert self.distribution is not None
        cmd = [str(find_java().executable), f"-Xms{heap_start or heap}", f"-Xmx{heap}", *options, *sharing,
               f"-Dlabkit.cluster={self.data_dir}", f"-Djava.io.tmpdir={self.data_dir / 'tmp'}",
               f"-Dlog4j2.configurationFile={log4j}"]
        if logs_dir is not None:
            cmd.append(f"-Dkafka.logs.dir={logs_dir}")
        return cmd + ["-cp", classpath or self.distribution.classpath, main_class, *args]

    def _format_storage(self) -> None:
        """One ``kafka-storage format`` JVM per node, all at once: only when the node launcher could not be built."""
        spec = kafka_spec()
        assert self.distribution is not None
        cp, archive = classdata.tool_setup(self.distribution)
        procs = []
        for node in self._nodes.values():
            cmd = self._java_command("kafka.tools.StorageTool", "format", *self._format_arguments(node),
                                     heap=spec.tool_heap, options=spec.tool_options, log4j=spec.tools_log4j_config,
                                     classpath=cp, sharing=classdata.use_options(archive))
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)))
        for node, proc in procs:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise BrokerStartError(f"Formatting the storage of node {node.broker.id} failed.",
                                       "Check the broker settings; the formatter's output is below.",
                                       broker_id=node.broker.id, log_path=node.dir / "server.properties",
                                       log_tail=out.decode(errors="replace")[-2000:])


def start(profile: str, overrides: Mapping[str, Any], progress: bool, start_timeout: Optional[float],
          kafka_version: Optional[str] = None) -> NativeCluster:
    """The ``native`` backend's factory (``kafka_version``: another cached Kafka release to start on)."""
    # In a classroom, a learner past their limit (clusters at once, memory) is told before any JVM starts (issue 31).
    limits.check_start(load_profile(profile).brokers, under=data_root())
    return NativeCluster(profile, overrides=overrides, progress=progress, start_timeout=start_timeout,
                         kafka_version=kafka_version).start()
