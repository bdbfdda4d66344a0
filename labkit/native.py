"""The default backend: Kafka's own JVMs, started on this machine from the cached jars.

Every node is a combined KRaft broker+controller (or broker-only beyond the
profile's controller count) bound to free loopback ports, with its own
directory under one per-cluster temp dir. A watchdog process (and, on Linux, a
parent-death signal) makes sure no broker outlives the Python process that
started it, even when that process is killed with SIGKILL.
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Mapping, Optional

from .cluster import Broker, Cluster
from .distribution import Distribution, ensure_distribution, find_java
from .environment import kafka_spec
from .errors import BrokerStartError, ClusterStateError, PortInUseError
from .profiles import DEFAULT_PROFILE, load_profile, normalize_overrides, render_value, validate_settings
from .progress import Progress
from .waiting import Wait

log = logging.getLogger(__name__)

_BIND_FAILURES = ("Address already in use", "BindException")
_ALL_CLUSTERS: "weakref.WeakSet[NativeCluster]" = weakref.WeakSet()


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


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago (the bind race is retried by the caller)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class _Watchdog:
    """The parent side of ``_watchdog.py``."""

    def __init__(self) -> None:
        script = Path(__file__).with_name("_watchdog.py")
        self._proc = subprocess.Popen([sys.executable, "-S", str(script)], stdin=subprocess.PIPE, text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                      close_fds=True)
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def send(self, line: str) -> None:
        with self._lock:
            if self._proc.stdin is None or self._proc.stdin.closed:
                return
            try:
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def close(self) -> None:
        self.send("exit")
        with self._lock:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except BrokenPipeError:
                    pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


@dataclass
class _Node:
    broker: Broker
    dir: Path
    proc: Optional[subprocess.Popen] = None
    stdout: Optional[IO[bytes]] = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.dir / "logs" / "server.log"

    @property
    def stdout_path(self) -> Path:
        return self.dir / "logs" / "stdout.log"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class NativeCluster(Cluster):
    """A Kafka cluster of JVMs on this machine, owned by this Python process."""

    backend = "native"

    def __init__(self, profile: str = DEFAULT_PROFILE, overrides: Optional[Mapping[str, Any]] = None,
                 start_timeout: float = 120.0, progress: bool = True, name: Optional[str] = None) -> None:
        super().__init__()
        self.profile = profile
        self._profile = load_profile(profile)
        self._overrides = normalize_overrides(overrides or {})
        self.start_timeout = start_timeout
        self._progress = progress
        self.name = name or f"labkit-{uuid.uuid4().hex[:8]}"
        self.cluster_id = new_cluster_id()
        self.data_dir: Optional[Path] = None
        self.distribution: Optional[Distribution] = None
        self._nodes: dict[int, _Node] = {}
        self._watchdog: Optional[_Watchdog] = None
        self._lock = threading.RLock()
        self._stopped = False
        self._started = False
        #: Seconds the last start() took until the cluster was ready.
        self.start_seconds: Optional[float] = None

    # ------------------------------------------------------------ public API
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.broker.address for n in self._nodes.values())

    @property
    def brokers(self) -> list[Broker]:
        with self._lock:
            for node in self._nodes.values():
                if node.broker.state in ("running", "paused") and not node.running():
                    node.broker.state = "killed"  # died on its own
                    node.broker.pid = None
            return [n.broker for n in self._nodes.values()]

    @property
    def broker_ids(self) -> list[int]:
        return list(self._nodes)

    @property
    def settings(self) -> dict[str, Any]:
        """The broker settings every node was started with (lab defaults, profile, overrides)."""
        return dict(next(iter(self._nodes.values())).settings) if self._nodes else {}

    def start(self) -> "NativeCluster":
        """Format storage, launch every node and wait until the cluster answers. Returns ``self``."""
        if self._started:
            raise ClusterStateError("This cluster was already started.", "Create a new one with labkit.start_cluster().")
        self._started = True
        t0 = time.monotonic()
        self.distribution = ensure_distribution(progress=self._progress)
        settings = dict(self._profile.settings)
        settings.update(self._overrides)
        validate_settings(self._overrides, self.distribution.broker_config_names())
        root = data_root()
        root.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=root))
        self._watchdog = _Watchdog()
        self._watchdog.send(f"cleanup {self.data_dir}")
        _ALL_CLUSTERS.add(self)
        try:
            bar = _StartProgress(self._progress, self._profile.brokers)
            self._make_nodes(settings)
            self._format_storage()
            bar.step("storage formatted")
            for attempt in range(3):
                try:
                    self._launch_all()
                    self._wait_ready(bar)
                    break
                except PortInUseError:
                    if attempt == 2:
                        raise
                    log.info("a port was taken while starting; retrying with new ports")
                    self._kill_all()
                    self._assign_ports()
            bar.close()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Kill every node, remove the cluster's directory and stop the watchdog. Safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._run_stop_hooks()
            self._close_admin()
            self._kill_all()
            if self._watchdog is not None:
                self._watchdog.close()
            if self.data_dir is not None:
                shutil.rmtree(self.data_dir, ignore_errors=True)
            _ALL_CLUSTERS.discard(self)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL a broker: no controlled shutdown, like pulling the plug."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGKILL)
            self._reap(node)
            node.broker.state = "killed"

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """Stop a broker gracefully (SIGTERM: controlled shutdown moves its leaderships first)."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGTERM)
            assert node.proc is not None
            try:
                node.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(node, signal.SIGKILL)
            self._reap(node)
            node.broker.state = "stopped"

    def start_broker(self, broker_id: int, wait: bool = True, timeout: float = 60.0) -> None:
        """Start a stopped or killed broker again with the same id, ports and data; wait until it registers."""
        node = self._node(broker_id)
        if node.running():
            raise ClusterStateError(f"Broker {broker_id} is already running.",
                                    "Kill or stop it first, or resume it if it is paused.")
        with self._lock:
            self._launch(node)
        if wait:
            Wait(f"broker {broker_id} to rejoin the cluster", timeout=timeout, interval=0.25,
                 check=lambda: self._check_alive([node]),
                 evidence=lambda: self._evidence([node])).until(lambda: self._rejoined(node.broker))

    def pause_broker(self, broker_id: int) -> None:
        """Freeze a broker (SIGSTOP): it keeps its sockets but stops answering, like a long GC pause."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._signal(node, signal.SIGSTOP)
            node.broker.state = "paused"

    def resume_broker(self, broker_id: int) -> None:
        """Let a paused broker run again (SIGCONT)."""
        node = self._node(broker_id, need_running=True)
        with self._lock:
            self._signal(node, signal.SIGCONT)
            node.broker.state = "running"

    def broker_log(self, broker_id: int, lines: int = 50) -> str:
        """The last ``lines`` lines of a broker's ``server.log``."""
        return _tail(self._node(broker_id).log_path, lines)

    def broker_dir(self, broker_id: int) -> Path:
        """A node's directory: ``server.properties``, ``data/`` (log.dirs) and ``logs/``."""
        return self._node(broker_id).dir

    def log_dir(self, broker_id: int) -> Path:
        """A node's ``log.dirs``: one sub-directory per partition it stores."""
        return self._node(broker_id).data_dir

    def _summary(self) -> str:
        version = self.distribution.version if self.distribution else kafka_spec().version
        return f"{self.profile}, Kafka {version}, native JVMs"

    # ------------------------------------------------------------ internals
    def _node(self, broker_id: int, need_running: bool = False) -> _Node:
        if self._stopped:
            raise ClusterStateError("This cluster has been stopped.", "Start a new one with labkit.start_cluster().")
        node = self._nodes.get(broker_id)
        if node is None:
            raise ClusterStateError(f"There is no broker {broker_id} in this cluster.",
                                    f"Broker ids are {', '.join(map(str, self._nodes))}.")
        if need_running and not node.running():
            raise ClusterStateError(f"Broker {broker_id} is not running (it is {node.broker.state}).",
                                    f"Start it first with cluster.start_broker({broker_id}).")
        return node

    def _make_nodes(self, settings: Mapping[str, Any]) -> None:
        assert self.data_dir is not None
        for node_id in range(1, self._profile.brokers + 1):
            node_dir = self.data_dir / f"node-{node_id}"
            (node_dir / "logs").mkdir(parents=True)
            (node_dir / "data").mkdir()
            broker = Broker(id=node_id, host="127.0.0.1", port=0, state="stopped")
            self._nodes[node_id] = _Node(broker, node_dir, settings=dict(settings))
        self._assign_ports()

    def _assign_ports(self) -> None:
        controllers = self._profile.controllers
        ports = free_ports(len(self._nodes) + controllers)
        for i, node in enumerate(self._nodes.values()):
            node.broker.port = ports[i]
            node.broker.controller_port = ports[len(self._nodes) + i] if node.broker.id <= controllers else None
        for node in self._nodes.values():
            self._write_properties(node)

    def _write_properties(self, node: _Node) -> None:
        b = node.broker
        voters = ",".join(f"{n.broker.id}@127.0.0.1:{n.broker.controller_port}"
                          for n in self._nodes.values() if n.broker.controller_port)
        listeners = f"PLAINTEXT://127.0.0.1:{b.port}"
        if b.controller_port:
            listeners += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        managed = {
            "process.roles": "broker,controller" if b.controller_port else "broker",
            "node.id": b.id,
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.data_dir),
        }
        lines = [f"# Written by labkit for cluster {self.name} ({self.profile}); node {b.id}."]
        lines += [f"{k}={render_value(v)}" for k, v in managed.items()]
        lines += ["", "# lab defaults, profile and overrides"]
        lines += [f"{k}={render_value(v)}" for k, v in sorted(node.settings.items())]
        (node.dir / "server.properties").write_text("\n".join(lines) + "\n")

    def _java_command(self, main_class: str, *args: str, heap: str, options: tuple[str, ...],
                      log4j: Path, logs_dir: Optional[Path] = None) -> list[str]:
        assert self.distribution is not None
        cmd = [str(find_java().executable), f"-Xms{heap}", f"-Xmx{heap}", *options,
               f"-Dlabkit.cluster={self.data_dir}", f"-Dlog4j2.configurationFile={log4j}"]
        if logs_dir is not None:
            cmd.append(f"-Dkafka.logs.dir={logs_dir}")
        return cmd + ["-cp", self.distribution.classpath, main_class, *args]

    def _format_storage(self) -> None:
        spec = kafka_spec()
        procs = []
        for node in self._nodes.values():
            cmd = self._java_command("kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", self.cluster_id,
                                     "-c", str(node.dir / "server.properties"), heap=spec.tool_heap,
                                     options=spec.tool_options, log4j=spec.tools_log4j_config)
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL)))
        for node, proc in procs:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise BrokerStartError(f"Formatting the storage of node {node.broker.id} failed.",
                                       "Check the broker settings; the formatter's output is below.",
                                       broker_id=node.broker.id, log_path=node.dir / "server.properties",
                                       log_tail=out.decode(errors="replace")[-2000:])

    def _launch_all(self) -> None:
        for node in self._nodes.values():
            self._launch(node)

    def _launch(self, node: _Node) -> None:
        spec = kafka_spec()
        cmd = self._java_command("kafka.Kafka", str(node.dir / "server.properties"), heap=spec.heap,
                                 options=spec.jvm_options, log4j=spec.log4j_config, logs_dir=node.dir / "logs")
        # On Linux, also ask the kernel to kill the JVM when the thread that started it dies.
        # Only from the main thread: a worker thread ending must not take a broker with it.
        if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread() \
                and shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd
        node.stdout = open(node.stdout_path, "ab")
        node.proc = subprocess.Popen(cmd, stdout=node.stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, close_fds=True, cwd=node.dir)
        node.broker.pid = node.proc.pid
        node.broker.state = "running"
        assert self._watchdog is not None and self.data_dir is not None
        self._watchdog.send(f"watch {node.proc.pid} {self.data_dir}")

    def _wait_ready(self, bar: Progress) -> None:
        self._wait_registered(list(self._nodes.values()), bar.step, timeout=self.start_timeout,
                              interval=0.2, hint="The broker logs may say why; try `labkit doctor`.")

    def _check_alive(self, nodes: list[_Node]) -> None:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is not None:
                node.broker.state = "killed"
                tail = _tail(node.log_path, 30) + "\n" + _tail(node.stdout_path, 15)
                kind = PortInUseError if any(s in tail for s in _BIND_FAILURES) else BrokerStartError
                raise kind(f"Broker {node.broker.id} exited during start-up (exit code {node.proc.returncode}).",
                           f"See {node.log_path} (tail below).",
                           broker_id=node.broker.id, log_path=node.log_path, log_tail=tail.strip())

    def _evidence(self, nodes: list[_Node]) -> str:
        parts = []
        for node in nodes:
            state = "running" if node.running() else f"exited ({node.proc.returncode if node.proc else '-'})"
            parts.append(f"--- broker {node.broker.id} ({state}), last lines of {node.log_path} ---\n"
                         + _tail(node.log_path, 8))
        return "\n".join(parts)

    def _signal(self, node: _Node, sig: signal.Signals) -> None:
        if node.proc is not None and node.proc.poll() is None:
            try:
                os.kill(node.proc.pid, sig)
            except ProcessLookupError:
                pass

    def _reap(self, node: _Node) -> None:
        if node.proc is not None:
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(node.proc.pid, signal.SIGKILL)
                node.proc.wait()
            if self._watchdog is not None:
                self._watchdog.send(f"forget {node.proc.pid}")
        if node.stdout is not None:
            node.stdout.close()
            node.stdout = None
        node.proc = None
        node.broker.pid = None

    def _kill_all(self) -> None:
        for node in self._nodes.values():
            self._signal(node, signal.SIGCONT)
            self._signal(node, signal.SIGKILL)
        for node in self._nodes.values():
            self._reap(node)
            node.broker.state = "stopped" if self._stopped else "killed"


def _StartProgress(enabled: bool, brokers: int) -> Progress:  # noqa: N802 - the backends' name for it
    """The cluster start-up bar: one step per broker registered, plus the metadata round-trip."""
    return Progress(enabled, "Starting Kafka", total=brokers + 1,
                    bar_format="{desc}: {bar} {n_fmt}/{total_fmt} [{elapsed}] {postfix}")
