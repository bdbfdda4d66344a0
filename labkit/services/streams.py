"""Kafka Streams applications on the lab's cluster: a topology written in a cell, run as real JVM instances.

    from labkit.services import streams
    app = streams.app(cluster, '''
        builder.<String, String>stream(input)
               .filter((page, view) -> !page.equals("/cart"))
               .to(output);
    ''', name=f"no-carts-{run}", params={"input": views, "output": out})
    app.topology                  # Kafka's own description; app.topology.figure() draws it
    app.instances[0].log(grep="LABKIT")      # its state changes, restorations, the error that stopped it
    app.internal_topics()         # the -changelog and -repartition topics it made on the broker
    app.metrics("process-total")  # Kafka Streams' own metrics, one row per metric and tag set
    app.add_instance()            # one more instance: another JVM, same application.id, the tasks shared
    app.instances[0].kill(); app.instances[0].start(); app.stop()

A topology is Java: statements that use ``builder`` (a ``StreamsBuilder``) and the ``params``, which
become Java variables (:mod:`labkit.services.streamsbuild` compiles it; a compile error shows your
line and javac's message). ``name`` is the ``application.id``, and so the consumer group. Each instance
is a JVM running Kafka's own ``KafkaStreams`` (``java/LabStreams.java``) as a
:class:`~labkit.runtime.processes.ManagedProcess` of the cluster's supervisor: ``cluster.stop()`` stops
it, and it dies with the kernel even when the kernel is killed with SIGKILL. Its state directory and log
are in the cluster's data directory. Settings Kafka Lab changes from Kafka's defaults (``config`` overrides
any of them, dots or underscores):

* ``commit.interval.ms=100`` (Kafka: 30 s, 100 ms under exactly-once) and ``statestore.cache.max.bytes=0``
  (Kafka: 10 MB): every update reaches the output topics and changelogs at once, so a lesson sees each;
* ``consumer.session.timeout.ms=6000`` (45 s): a killed instance's tasks move after 6 s with the classic
  protocol (the streams protocol takes the group's ``streams.session.timeout.ms`` from the broker instead);
* ``replication.factor`` = the cluster's brokers, at most 3; String serdes by default; RocksDB with an 8 MB
  block cache per JVM (``LabStreams.SmallRocksDB``); ``state.dir`` in the instance's directory.
"""

from __future__ import annotations

import re
import shutil
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..errors import LabkitError
from ..runtime.distribution import ensure_distribution
from ..runtime.environment import environments_dir
from ..runtime.jvm import find_java
from ..runtime.processes import ManagedProcess, supervisor_of, tail
from . import http, java_options, replication_factor, service_dir, streamsbuild, streamsgroup
from .streamsbuild import (LAUNCHER_MAIN, CompiledTopology, StreamsAppError, StreamsCompileError, compile_topology,
                           ensure_streams, launcher, native_dir)
from .streamstopology import Topology

if TYPE_CHECKING:
    import pandas as pd

STRING_SERDE = "org.apache.kafka.common.serialization.Serdes$StringSerde"
#: What Kafka Lab sets unless ``config`` says otherwise (see the module doc for why).
DEFAULTS: dict[str, Any] = {
    "default.key.serde": STRING_SERDE,
    "default.value.serde": STRING_SERDE,
    "commit.interval.ms": 100,
    "statestore.cache.max.bytes": 0,
    "consumer.session.timeout.ms": 6000,
    "consumer.heartbeat.interval.ms": 1500,
    "rocksdb.config.setter": "LabStreams$SmallRocksDB",
}
_ERROR_LINE = re.compile(r"^LABKIT error (.*)$", re.M)


def _dotted(config: Mapping[str, Any]) -> dict[str, Any]:
    return {(k if "." in k else k.replace("_", ".")): v for k, v in config.items()}


def _render(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class Instance:
    """One instance (one JVM) of an application: start, stop, kill it; read its state, log, metrics, stores."""

    def __init__(self, app: "App", name: str) -> None:
        self.app, self.name = app, name
        self.directory = service_dir(app.cluster, f"streams/{app.name}/{name}")
        self.process: Optional[ManagedProcess] = None
        #: Seconds from the JVM's launch to RUNNING at the last :meth:`start` with ``wait``.
        self.ready_seconds: Optional[float] = None

    # ---------------------------------------------------------------- the process
    def start(self, wait: bool = True, wipe_state: bool = False, timeout: float = 120.0) -> "Instance":
        """Start the JVM (again: same state directory, unless ``wipe_state``, as a new machine would have);
        with ``wait``, until it is RUNNING, and owns tasks when it is the application's only instance."""
        if self.running:
            return self
        if wipe_state:
            shutil.rmtree(self.directory / "state", ignore_errors=True)
        (self.directory / "port").unlink(missing_ok=True)
        if self.process is None:
            self.process = supervisor_of(self.app.cluster).process(
                f"Kafka Streams {self.app.name}/{self.name}", self.app._command(self), self.log_path, cwd=self.directory)
        self._started = time.monotonic()
        self.process.start()
        if wait:
            others = sum(1 for i in self.app.instances if i is not self and i.running)
            self.wait_running(timeout, tasks="active" if not others else
                              ("any" if others < self.app.task_count() else None))
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """A clean stop: SIGTERM; the instance commits, closes its stores and leaves the group."""
        if self.process is not None:
            self.process.stop(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash. Nothing is committed or closed; the group notices after its session timeout."""
        if self.process is not None:
            self.process.kill()

    def pause(self) -> None:
        """SIGSTOP (a long GC pause): the instance keeps its sockets and state but processes and commits nothing
        until :meth:`resume` (or a :meth:`kill`); returns once every thread of the JVM is stopped."""
        if self.process is not None:
            self.process.pause()

    def resume(self) -> None:
        """SIGCONT: a paused instance runs again."""
        if self.process is not None:
            self.process.resume()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    @property
    def log_path(self) -> Path:
        return self.directory / "streams.log"

    def log(self, lines: int = 30, grep: Optional[str] = None) -> str:
        """The last ``lines`` lines of the instance's log (only those containing ``grep``, when given)."""
        if grep is None:
            return tail(self.log_path, lines)
        return "\n".join([x for x in tail(self.log_path, 50000).splitlines() if grep in x][-lines:])

    @property
    def error(self) -> Optional[str]:
        """The exception that stopped the instance (Kafka's, on one line), if one did."""
        found = _ERROR_LINE.findall(tail(self.log_path, 50000))
        return found[-1] if found else None

    # ---------------------------------------------------------------- what it says about itself
    def _get(self, path: str) -> Any:
        if not self.running:
            raise StreamsAppError(f"Instance {self.name} of {self.app.name} is not running ({self._state()}).",
                                  "Start it with .start().", self.error or "", self.log_path)
        port = (self.directory / "port").read_text().strip()
        status, body = http("GET", f"http://127.0.0.1:{port}{path}", timeout=10.0)
        if status != 200:
            raise StreamsAppError(f"Instance {self.name} of {self.app.name} could not answer {path}: "
                                  f"{body.get('error') if isinstance(body, dict) else body}",
                                  "Is the store's name right, and is the instance RUNNING?", log_path=self.log_path)
        return body

    def _state(self) -> str:
        return self.process.state if self.process is not None else "new"

    @property
    def state(self) -> str:
        """Kafka Streams' state (CREATED, REBALANCING, RUNNING, ERROR ...), or the process's when it is not running."""
        if not self.running or not (self.directory / "port").exists():
            return self._state() if not self.running else "STARTING"
        try:
            return self._get("/state")["state"]
        except OSError:
            return "STARTING"

    def tasks(self) -> dict[str, list[str]]:
        """The tasks this instance runs: ``{"active": ["0_1", ...], "standby": [...]}`` (subtopology_partition)."""
        threads = self._get("/state")["threads"]
        return {kind: sorted(t for th in threads for t in th[kind]) for kind in ("active", "standby")}

    def wait_running(self, timeout: float = 120.0, tasks: Optional[str] = None) -> "Instance":
        """Wait until RUNNING and, with ``tasks="active"``, running an active task (``"any"``: an active or a standby
        one); an instance that stops with an error raises :class:`StreamsAppError` with Kafka's reason."""
        assert self.process is not None

        def running() -> bool:
            if not (self.directory / "port").exists():
                return False
            try:
                body = self._get("/state")
            except (OSError, StreamsAppError):
                return False
            kinds = {"active": ("active",), "any": ("active", "standby")}.get(tasks or "", ())
            return body["state"] == "RUNNING" and (not kinds or any(t[k] for t in body["threads"] for k in kinds))

        try:
            self.process.wait_ready(f"{self.process.name} to be RUNNING", running, timeout=timeout, interval=0.1,
                                    hint="Its log (instance.log()) says what it is waiting for.")
        except LabkitError:
            if self.error and not self.running:
                raise self.app._failed(self) from None
            raise
        self.ready_seconds = time.monotonic() - self._started
        return self

    def metrics(self, match: Optional[str] = None, group: str = "stream") -> "pd.DataFrame":
        """Kafka Streams' metrics of this instance whose name contains ``match`` (groups starting with ``group``):
        group, name, the tags Kafka gives it (thread, task, processor node, store) and the value."""
        import pandas as pd

        rows = [{"instance": self.name, "group": m["group"], "name": m["name"], **m["tags"], "value": m["value"]}
                for m in self._get(f"/metrics?prefix={urllib.parse.quote(group)}") if not match or match in m["name"]]
        frame = pd.DataFrame(rows)
        if frame.empty:
            return pd.DataFrame(columns=["instance", "group", "name", "value"])
        front = ["instance", "group", "name"]
        return frame[front + [c for c in frame.columns if c not in front + ["value"]] + ["value"]].sort_values(
            front + [c for c in ("task-id", "processor-node-id") if c in frame.columns]).reset_index(drop=True)

    def restores(self) -> "pd.DataFrame":
        """Every store partition this instance restored from its changelog since it started: records and ms."""
        import pandas as pd

        return pd.DataFrame(self._get("/restores"), columns=["store", "topic", "partition", "records", "ms"])

    def standby_updates(self) -> "pd.DataFrame":
        """What each standby task of this instance has copied from its changelog: records and the offset reached."""
        import pandas as pd

        return pd.DataFrame(self._get("/standby"), columns=["store", "topic", "partition", "records", "offset"])

    def store(self, name: str) -> list[dict[str, Any]]:
        """The contents of state store ``name`` for the tasks this instance runs (interactive query):
        ``{"key", "value"}`` rows, with ``window_start`` / ``window_end`` (ms) for a window store."""
        return self._get(f"/store?name={urllib.parse.quote(name)}")

    def __repr__(self) -> str:
        return f"<Instance {self.app.name}/{self.name} {self.state} pid={self.pid}>"


class App:
    """A Kafka Streams application: its compiled topology, its settings and its instances (see the module doc)."""

    def __init__(self, cluster: Any, name: str, compiled: CompiledTopology, config: Mapping[str, Any],
                 heap: str) -> None:
        self.cluster, self.name, self.compiled, self.heap = cluster, name, compiled, heap
        dist = ensure_distribution(progress=False)
        self._jars = ensure_streams(progress=False, dist=dist)
        self._launcher, self._native, self._dist = launcher(dist, self._jars), native_dir(self._jars), dist
        self.config: dict[str, Any] = {"application.id": name, "bootstrap.servers": cluster.bootstrap_servers,
                                       "replication.factor": replication_factor(cluster), **DEFAULTS, **_dotted(config)}
        self.instances: list[Instance] = []
        self._topology: Optional[Topology] = None

    def _command(self, instance: Instance) -> list[str]:
        props = {**self.config, "state.dir": str(instance.directory / "state")}
        (instance.directory / "streams.properties").write_text("".join(f"{k}={_render(v)}\n" for k, v in props.items()))
        classpath = ":".join(str(j) for j in streamsbuild.classpath(self._dist, self._jars))
        options = [f"-Dlabkit.cluster={getattr(self.cluster, 'data_dir', instance.directory)}",
                   f"-Djava.io.tmpdir={instance.directory}", "-Dlog4j2.formatMsgNoLookups=true",
                   f"-Dlog4j2.configurationFile={environments_dir() / 'streams-log4j2.xml'}"]
        if self._native is not None:
            options.append(f"-Djava.library.path={self._native}")
        options += streamsbuild.archive_options(self._dist, self._jars)
        return [str(find_java().executable), *java_options(self.heap, options), "-cp", classpath, LAUNCHER_MAIN,
                str(instance.directory / "streams.properties"), self.compiled.class_name, str(instance.directory),
                str(self.compiled.jar)]

    def _failed(self, instance: Instance) -> StreamsAppError:
        reason = instance.error or f"exited with code {instance.process.returncode if instance.process else '?'}"
        where = re.search(rf"{self.compiled.class_name}\.java:(\d+)", tail(instance.log_path, 50000))
        line = self.compiled.learner_line(int(where.group(1))) if where else None
        at = f" (line {line} of your topology: {self.compiled.source_line(line).strip()})" if line else ""
        return StreamsAppError(f"{self.name}/{instance.name} stopped: {reason}{at}",
                               f"The whole story is in its log: {instance.log_path}", reason, instance.log_path)

    # ---------------------------------------------------------------- instances
    def add_instance(self, wait: bool = True, timeout: float = 120.0) -> Instance:
        """Start one more instance (another JVM with the same application.id): the group shares the tasks."""
        instance = Instance(self, chr(ord("a") + len(self.instances)) if len(self.instances) < 26 else
                            f"i{len(self.instances)}")
        self.instances.append(instance)
        instance.start(wait=wait, timeout=timeout)
        return instance

    def stop(self) -> None:
        """Stop every instance cleanly (the application's topics and committed offsets stay on the broker)."""
        for instance in reversed(self.instances):
            instance.stop()

    @property
    def running(self) -> list[Instance]:
        return [i for i in self.instances if i.running]

    def task_count(self) -> int:
        """How many tasks the application has: per subtopology, as many as its source topics have partitions."""
        return streamsgroup.task_count(self)

    # ---------------------------------------------------------------- what the application is and made
    @property
    def topology(self) -> Topology:
        """The topology as Kafka describes it (written by the first instance that started)."""
        if self._topology is None:
            for instance in self.instances:
                if (instance.directory / "topology.json").exists():
                    self._topology = Topology.read(instance.directory, self.name)
                    break
            else:
                raise StreamsAppError(f"No instance of {self.name} has described its topology yet.",
                                      "Start one first: app.add_instance().")
        return self._topology

    def internal_topics(self) -> list[str]:
        """The topics Kafka Streams created for this application: ``<application.id>-...-changelog`` / ``-repartition``."""
        return sorted(t for t in self.cluster.topics(internal=True) if t.startswith(self.name + "-")
                      and t.endswith(("-changelog", "-repartition")))

    def changelogs(self) -> dict[str, str]:
        """{store: its changelog topic on the broker}, for the stores that have one."""
        topics = set(self.internal_topics())
        return {s: f"{self.name}-{s}-changelog" for s in self.topology.stores() if f"{self.name}-{s}-changelog" in topics}

    def figure(self, title: Optional[str] = None) -> Any:
        """The topology drawn, stores labelled with their changelog topics."""
        return self.topology.figure(title, self.changelogs())

    def lag(self) -> "pd.DataFrame":
        """Per partition of every topic the application reads (repartition topics too): its end offset, the offset
        the group committed, and the records between them."""
        return streamsgroup.lag(self)

    def wait_caught_up(self, timeout: float = 120.0) -> "pd.DataFrame":
        """Wait until the group has committed every record of every topic it reads; returns :meth:`lag`."""
        return streamsgroup.wait_caught_up(self, timeout)

    def metrics(self, match: Optional[str] = None, group: str = "stream") -> "pd.DataFrame":
        """:meth:`Instance.metrics` of every running instance, one table."""
        import pandas as pd

        frames = [i.metrics(match, group) for i in self.running]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["instance", "name", "value"])

    def store(self, name: str) -> list[dict[str, Any]]:
        """State store ``name`` across the running instances (each serves the partitions it runs as active tasks)."""
        return [row for i in self.running for row in i.store(name)]

    # ---------------------------------------------------------------- Kafka's tools
    @property
    def protocol(self) -> str:
        return str(self.config.get("group.protocol", "classic"))

    def members(self) -> list[str]:
        """The group's members as its coordinator sees them (client ids; classic protocol): a killed or frozen
        instance is one until its session times out."""
        return streamsgroup.members(self)

    def describe(self) -> str:
        """What the broker says about the group and its members (``kafka-streams-groups`` for the streams protocol,
        ``kafka-consumer-groups`` for the classic one)."""
        return streamsgroup.describe(self)

    def reset(self, input_topics: Optional[list[str]] = None) -> str:
        """Kafka's application reset (every instance stopped first): input offsets back to the start, internal
        topics deleted, each instance's local state wiped."""
        return streamsgroup.reset(self, input_topics)

    def __repr__(self) -> str:
        states = ", ".join(f"{i.name}: {i.state}" for i in self.instances) or "no instance"
        return f"<Kafka Streams app {self.name} ({states})>"


def app(cluster: Any, java: str, name: str = "streams-app", params: Optional[Mapping[str, Any]] = None,
        config: Optional[Mapping[str, Any]] = None, instances: int = 1, wait: bool = True, heap: str = "160m",
        timeout: float = 120.0) -> App:
    """Compile ``java`` and start ``instances`` instances of it on ``cluster`` (see the module doc).

    An application of the same ``name`` this kernel started before on this cluster is stopped first, so a
    cell can run twice. A compile error raises :class:`~labkit.services.streamsbuild.StreamsCompileError`
    before anything starts; an instance that stops with an error raises :class:`StreamsAppError`.
    """
    try:
        secured = bool(cluster.security_settings())
    except (AttributeError, LabkitError):
        secured = False
    if secured:
        raise LabkitError("Kafka Streams applications run on clusters without security in this lab.",
                          "Start one with labkit.start_cluster() (profile single-broker or three-brokers).")
    compiled = compile_topology(java, params, progress=True)
    running: dict[str, App] = cluster.__dict__.setdefault("_streams_apps", {})
    if name in running:
        running.pop(name).stop()
    created = running[name] = App(cluster, name, compiled, config or {}, heap)
    try:
        for _ in range(instances):
            created.add_instance(wait=wait, timeout=timeout)
    except BaseException:
        for instance in created.instances:
            instance.kill()
        raise
    return created


__all__ = ["App", "DEFAULTS", "Instance", "StreamsAppError", "StreamsCompileError", "app"]
