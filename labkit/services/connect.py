"""Kafka Connect beside a cluster: a distributed worker as a managed process, and its REST API from Python.

    worker = cluster.connect_worker()                  # starts a worker (or returns this cluster's running one)
    worker.create("file-source", {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "lines"})
    worker.wait_for("file-source")              # RUNNING, with its tasks RUNNING
    worker.status("file-source")                # the REST API's JSON: connector and task states, traces
    worker.pause(name); worker.resume(name); worker.stop(name); worker.delete(name)   # each back once the worker acted
    worker.restart(name); worker.wait_for(name)   # restart answers before the worker has acted: wait for RUNNING
    worker.offsets(name); worker.alter_offsets(name, [...]); worker.reset_offsets(name)   # KIP-875, when STOPPED

The worker is Kafka's own ``ConnectDistributed`` (``connect-runtime`` is in the Kafka lib
dir already) with ``connect-file`` and ``connect-mirror`` (MirrorMaker 2) at the same
version, fetched once from Maven Central into the cache by ``labkit setup`` (about 200 KB:
every other jar they need is Kafka's). Sized for the lab, from what the prototype
measured on a 2-core machine:

* ``plugin.discovery=service_load``: every plugin Kafka ships has a ServiceLoader manifest,
  so the default reflective scan of every jar only costs ~10 s and ~300 MB per JVM;
* the worker's internal topics (configs, offsets, status) get the cluster's replication
  factor (Connect's default 3 makes a one-broker worker hang for a minute, then exit);
* ready means ``GET /health`` answers 200 (KIP-1017): ``GET /`` answers while the herder
  is still creating its topics;
* ``offset.flush.interval.ms=1000`` (Connect: 60 s): source offsets and sink commits every
  second, so a lesson sees them at once;
* its log (``connect.log`` in the worker's directory inside the cluster's) tags each line
  with the connector and task (``[file-source|task-0]``), without the client config dumps.

A worker is a :class:`~labkit.runtime.processes.ManagedProcess` of the cluster's supervisor: it
stops with ``cluster.stop()`` (before the brokers) and dies with the kernel, even one
killed with SIGKILL.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from ..runtime.distribution import Distribution, ensure_distribution
from ..runtime.environment import environments_dir
from ..errors import LabkitError
from ..runtime.jvm import find_java
from ..runtime.maven import ArtifactSet, cached, fetch, jar_artifact, keep_missing_jars, resolve
from ..runtime.ports import free_ports
from ..runtime.processes import ManagedProcess, supervisor_of, tail
from ..runtime.progress import Progress
from ..runtime.steps import step
from . import http, java_options, replication_factor, service_dir

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

#: The plugins the lab adds to Kafka's lib dir (``connect-runtime`` and the converters are there already).
PLUGIN_MODULES = ("connect-file", "connect-mirror", "connect-mirror-client")
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
#: Plain text on both sides unless a connector says otherwise (``key.converter`` / ``value.converter``).
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
BYTES_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"


class ConnectError(LabkitError):
    """Raised when the Connect REST API refuses a request; keeps the HTTP ``status`` and the API's ``body``."""

    def __init__(self, message: str, hint: str = "", status: int = 0, body: Any = None) -> None:
        self.status, self.body = status, body
        super().__init__(message, hint)


# ---------------------------------------------------------------- the plugin jars

def plugin_artifacts(dist: Distribution) -> ArtifactSet:
    """connect-file, connect-mirror and connect-mirror-client at ``dist``'s version, without what its lib dir has."""
    have = {jar_artifact(j.name) for j in dist.jars()}
    return ArtifactSet(
        f"Kafka Connect plugins {dist.version}", f"kafka-{dist.version}",
        tuple(("org.apache.kafka", module, dist.version) for module in PLUGIN_MODULES), subdir="connect-plugins",
        # Their dependencies (connect-runtime, Jetty, Jackson, ...) are Kafka's own: never fetched again.
        excludes=frozenset(have), required="connect-mirror",
        hint_offline="Connect to the internet and run `make setup` once; after that Kafka Connect works offline.",
        keep=lambda jars: keep_missing_jars(jars, have))


def ensure_plugins(progress: bool = True, dist: Optional[Distribution] = None) -> list[Path]:
    """The plugin jars a worker adds to Kafka's lib dir (none when it has them, like a release's ``libs/``)."""
    dist = dist or ensure_distribution(progress=progress)
    have = {jar_artifact(j.name) for j in dist.jars()}
    if set(PLUGIN_MODULES) <= have:
        return []
    artifacts = plugin_artifacts(dist)
    return fetch(artifacts, progress)


#: Avro for Connect through the lab's registry: Apicurio's converter (Confluent's is not on Maven Central), at
#: the registry's version (its own POM mixes in 2.3.1 serdes that do not fit: pinned here).
APICURIO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"
#: Not needed for Avro, and one of them is not on Maven Central (org.everit.json.schema is on JitPack).
_CONVERTER_SKIP = frozenset({"apicurio-registry-serdes-jsonschema-serde", "apicurio-registry-serdes-protobuf-serde",
                             "org.everit.json.schema", "lombok"})


def converter_artifacts(dist: Distribution) -> ArtifactSet:
    """Apicurio's Avro converter and what it needs beyond Kafka's lib dir (about 2 MB: Avro, the registry client)."""
    from .registry import APICURIO_VERSION

    have = {jar_artifact(j.name) for j in dist.jars()}
    modules = ("apicurio-registry-utils-converter", "apicurio-registry-serdes-avro-serde", "apicurio-registry-client")
    return ArtifactSet(f"Apicurio Avro converter {APICURIO_VERSION}", f"apicurio-{APICURIO_VERSION}",
                       tuple(("io.apicurio", m, APICURIO_VERSION) for m in modules), subdir="connect-converter",
                       excludes=frozenset(have) | _CONVERTER_SKIP, required="apicurio-registry-utils-converter",
                       keep=lambda jars: keep_missing_jars(jars, have | _CONVERTER_SKIP))


def avro_converter_jars(dist: Optional[Distribution] = None) -> list[Path]:
    """The Avro converter's jars when ``labkit setup`` fetched them (a worker then has them), else []."""
    dist = dist or ensure_distribution(progress=False)
    return cached(converter_artifacts(dist)) or []


def avro_converter(registry_url: str, prefix: str = "value.converter") -> dict[str, str]:
    """Connector settings that make ``prefix`` (``value.converter`` or ``key.converter``) Avro through the lab's
    registry (``cluster.schema_registry_url``), in Confluent's wire format: magic byte, 4-byte schema id, Avro."""
    return {prefix: APICURIO_CONVERTER,
            f"{prefix}.apicurio.registry.url": registry_url.replace("/apis/ccompat/v7", "/apis/registry/v2"),
            f"{prefix}.apicurio.registry.as-confluent": "true",        # the id in the payload, 4 bytes
            f"{prefix}.apicurio.registry.use-id": "contentId",         # what the Confluent API calls a schema id
            f"{prefix}.apicurio.registry.headers.enabled": "false",
            f"{prefix}.apicurio.registry.auto-register": "true"}


@step("Kafka Connect plugins")
def _setup_plugins() -> str:
    dist = ensure_distribution(progress=True)
    jars = ensure_plugins(progress=True, dist=dist)
    size = sum(j.stat().st_size for j in jars)
    artifacts = converter_artifacts(dist)
    bar = Progress(True, artifacts.name, total=None)
    try:
        avro = resolve(artifacts, lambda phase, n, total, size, name: bar.step(name) if phase == "resolving" else None)
    finally:
        bar.close()
    return (f"{', '.join(PLUGIN_MODULES)}: {len(jars)} jars, {size / 1024:.0f} KB"
            + (f" ({jars[0].parent})" if jars else " (in the Kafka lib dir)")
            + f"; Avro converter: {len(avro)} jars, {sum(j.stat().st_size for j in avro) / 2**20:.1f} MB")


# ---------------------------------------------------------------- the worker

def worker_properties(cluster: Any, port: int, group: str, **settings: Any) -> dict[str, Any]:
    """What a lab worker runs with (``settings``, dots or underscores, override any of it)."""
    rf = replication_factor(cluster)
    props: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": group,
        "config.storage.topic": cluster.topic_name(f"{group}-configs"),
        "offset.storage.topic": cluster.topic_name(f"{group}-offsets"),
        "status.storage.topic": cluster.topic_name(f"{group}-status"),
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "offset.storage.partitions": 3,    # Connect's 25 and 5 are for production clusters
        "status.storage.partitions": 1,
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": port,
        "offset.flush.interval.ms": 1000,
        "plugin.discovery": "service_load",
        "task.shutdown.graceful.timeout.ms": 2000,
    }
    props.update({(k if "." in k else k.replace("_", ".")): v for k, v in settings.items()})
    return props


def _render(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_plain(cluster: Any) -> None:
    try:
        secured = bool(cluster.security_settings())
    except LabkitError:
        secured = False
    if secured:
        raise LabkitError("Kafka Connect workers run on clusters without security in this lab.",
                          "Start one with labkit.start_cluster() (profile single-broker or three-brokers).")


def start(cluster: Any, wait: bool = True, timeout: float = 120.0, heap: str = "256m",
          group: Optional[str] = None, **settings: Any) -> "ConnectWorker":
    """Start a distributed worker for ``cluster`` (see the module doc); with ``wait``, until ``GET /health`` is 200.

    ``group`` is the Connect cluster's ``group.id`` (workers with the same one share connectors);
    by default ``labkit-connect`` on a lab cluster, a unique one on a shared (external) cluster.
    """
    _check_plain(cluster)
    dist = ensure_distribution(progress=True)
    plugins = ensure_plugins(progress=True, dist=dist)
    if group is None:
        group = "labkit-connect" if getattr(cluster, "owns_brokers", False) else f"labkit-connect-{uuid.uuid4().hex[:6]}"
    where = service_dir(cluster, f"connect-{uuid.uuid4().hex[:6]}")
    port = free_ports(1)[0]
    supervisor_of(cluster).hold([port])
    props = worker_properties(cluster, port, group, **settings)
    properties = where / "worker.properties"
    properties.write_text("".join(f"{k}={_render(v)}\n" for k, v in props.items()))
    extra = [jars[0].parent for jars in (plugins, avro_converter_jars(dist)) if jars]
    classpath = ":".join([str(dist.lib_dir / "*"), *(str(folder / "*") for folder in extra)])
    marker = getattr(cluster, "data_dir", None) or where
    cmd = [str(find_java().executable),
           *java_options(heap, [f"-Dlabkit.cluster={marker}", "-Dlog4j2.formatMsgNoLookups=true",
                                f"-Dlog4j2.configurationFile={environments_dir() / 'connect-log4j2.xml'}",
                                f"-Dkafka.logs.dir={where}", f"-Djava.io.tmpdir={where}"]),
           "-cp", classpath, MAIN_CLASS, str(properties)]
    log_file = where / "connect.log"
    process = supervisor_of(cluster).process("Connect worker", cmd, where / "stdout.log", cwd=where,
                                             logs=[log_file]).start()
    worker = ConnectWorker(cluster, process, port, where, group, props)
    if wait:
        worker.wait_ready(timeout)
    return worker


class ConnectWorker:
    """A running Connect worker and a small client for its REST API (every call raises :class:`ConnectError`
    with the API's own message when refused)."""

    def __init__(self, cluster: Any, process: ManagedProcess, port: int, directory: Path, group: str,
                 properties: Mapping[str, Any]) -> None:
        self.cluster, self.process, self.port, self.directory = cluster, process, port, directory
        self.group, self.properties = group, dict(properties)
        self.started_at = time.monotonic()
        #: Seconds from the JVM's launch until ``GET /health`` answered 200 (once :meth:`wait_ready` saw it).
        self.ready_seconds: Optional[float] = None

    # ---------------------------------------------------------------- the process
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def log_path(self) -> Path:
        return self.directory / "connect.log"

    def log(self, lines: int = 30, grep: Optional[str] = None) -> str:
        """The last ``lines`` lines of the worker's log (only those containing ``grep``, when given)."""
        if grep is None:
            return tail(self.log_path, lines)
        found = [x for x in tail(self.log_path, 20000).splitlines() if grep in x]
        return "\n".join(found[-lines:])

    def wait_ready(self, timeout: float = 120.0) -> "ConnectWorker":
        """Wait until the worker has joined its Connect cluster and read its configs (``GET /health`` 200)."""
        if self.ready_seconds is None:
            self.process.wait_ready("the Connect worker to be ready (GET /health = 200)", self._healthy,
                                    timeout=timeout, interval=0.1, stretch=True,
                                    hint="A worker waits for its internal topics: is the cluster up?")
            self.ready_seconds = time.monotonic() - self.started_at
            log.info("Connect worker ready on port %d in %.1f s", self.port, self.ready_seconds)
        return self

    def _healthy(self) -> bool:
        try:
            return http("GET", self.url + "/health", timeout=2.0)[0] == 200
        except OSError:
            return False

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop the worker's JVM (its connectors stay in the config topic; a new worker picks them up)."""
        self.process.stop(timeout)

    # ---------------------------------------------------------------- REST
    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
        """One raw REST call: (HTTP status, decoded JSON); error statuses are returned, not raised."""
        self.wait_ready()
        return http(method, self.url + path, body, timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None, ok: Sequence[int] = (200, 201, 202, 204),
              timeout: float = 30.0) -> Any:
        status, answer = self.request(method, path, body, timeout)
        if status not in ok:
            message = answer.get("message") if isinstance(answer, dict) else answer
            hint = {404: "worker.connectors() lists the connectors this worker knows.",
                    409: "The worker is rebalancing or the connector is in the wrong state: try again, or stop() it "
                         "first (offsets can only change while STOPPED)."}.get(status, "See worker.log().")
            raise ConnectError(f"Connect refused {method} {path} ({status}): {message}", hint, status, answer)
        return answer

    @staticmethod
    def _name(name: str) -> str:
        return urllib.parse.quote(name, safe="")

    def info(self) -> dict[str, Any]:
        """``GET /``: the worker's Kafka version and the Kafka cluster id it works for."""
        return self._call("GET", "/")

    def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        """The plugins this worker can run (``class``, ``type``, ``version``); all kinds with ``connectors_only=False``."""
        return self._call("GET", "/connector-plugins" + ("" if connectors_only else "?connectorsOnly=false"))

    def validate(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Check a config without creating anything: ``error_count`` and, per setting, its errors."""
        return self._call("PUT", f"/connector-plugins/{self._name(plugin)}/config/validate",
                          {k: _render(v) for k, v in config.items()})

    def connectors(self) -> list[str]:
        return sorted(self._call("GET", "/connectors"))

    def create(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``name`` with ``config``, or update it when it exists (``PUT /connectors/<name>/config``).

        Values may be numbers or booleans; they are sent as Connect's strings. An update restarts
        the connector and its tasks (a FAILED task too).
        """
        return self._call("PUT", f"/connectors/{self._name(name)}/config", {k: _render(v) for k, v in config.items()})

    def config(self, name: str) -> dict[str, str]:
        return self._call("GET", f"/connectors/{self._name(name)}/config")

    def status(self, name: str) -> dict[str, Any]:
        """The connector's and each task's state (``RUNNING``, ``PAUSED``, ``STOPPED``, ``FAILED`` with a ``trace``, ...)."""
        return self._call("GET", f"/connectors/{self._name(name)}/status")

    def tasks(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/connectors/{self._name(name)}/tasks")

    def topics(self, name: str) -> list[str]:
        """The topics the connector has used since it was created (KIP-558). The worker learns them from its status
        topic, a moment after a task first used one: records already delivered do not mean it is listed yet."""
        return self._call("GET", f"/connectors/{self._name(name)}/topics").get(name, {}).get("topics", [])

    def pause(self, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Pause the connector and its tasks (they keep their resources; ``resume`` goes on where they were)."""
        return self._move(name, "pause", "PAUSED", timeout, any_tasks=True)

    def resume(self, name: str, timeout: float = 60.0, any_tasks: bool = False) -> dict[str, Any]:
        """Resume a PAUSED or STOPPED connector: RUNNING with its tasks (none needed with ``any_tasks``)."""
        return self._move(name, "resume", "RUNNING", timeout, any_tasks)

    def stop(self, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Stop the connector: its tasks are shut down, its config stays (``STOPPED``; offsets can then be changed)."""
        return self._move(name, "stop", "STOPPED", timeout, any_tasks=True)

    def _move(self, name: str, verb: str, state: str, timeout: float, any_tasks: bool) -> dict[str, Any]:
        """``PUT`` ``verb``; back once the worker reports ``state`` (a FAILED task stays so until :meth:`restart`)."""
        self._call("PUT", f"/connectors/{self._name(name)}/{verb}")
        return self.wait_for(name, state, timeout=timeout, task_state=(state, "FAILED"), any_tasks=any_tasks)

    def restart(self, name: str, include_tasks: bool = True, only_failed: bool = False) -> Optional[dict[str, Any]]:
        """Restart the connector (and its tasks, by default all of them; only the FAILED ones with ``only_failed``)."""
        query = f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
        return self._call("POST", f"/connectors/{self._name(name)}/restart{query}")

    def restart_task(self, name: str, task: int = 0) -> None:
        self._call("POST", f"/connectors/{self._name(name)}/tasks/{task}/restart")

    def delete(self, name: str, timeout: float = 60.0) -> None:
        """Delete the connector; back once the worker has stopped it and its tasks (``status`` answers 404).
        ``DELETE`` answers once the config topic holds the tombstone; until the worker has acted on it, a
        connector created again under the name could meet the old one's tasks."""
        path = f"/connectors/{self._name(name)}"
        self._call("DELETE", path)
        self.process.wait_ready(f"connector {name!r} to be gone", lambda: self.request("GET", path + "/status")[0] == 404,
                                timeout=timeout, interval=0.2, hint=f"worker.log(grep={name!r}) shows why it is not.")

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """Where the connector is (KIP-875): a source's ``partition``/``offset`` maps, a sink's ``kafka_offset`` per
        topic-partition."""
        return self._call("GET", f"/connectors/{self._name(name)}/offsets")["offsets"]

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        """Move a STOPPED connector's offsets (``PATCH``): a list of ``{"partition": ..., "offset": ...}``."""
        return self._call("PATCH", f"/connectors/{self._name(name)}/offsets", {"offsets": offsets})["message"]

    def reset_offsets(self, name: str) -> str:
        """Forget a STOPPED connector's offsets: a source starts over, a sink goes by ``auto.offset.reset``."""
        return self._call("DELETE", f"/connectors/{self._name(name)}/offsets")["message"]

    # ---------------------------------------------------------------- waiting and reading
    def wait_for(self, name: str, state: str = "RUNNING", tasks: Optional[int] = None, timeout: float = 60.0,
                 task_state: str | tuple[str, ...] | None = None, any_tasks: bool = False) -> dict[str, Any]:
        """Wait until the connector is in ``state`` and its tasks in ``task_state`` (one of them; default: the
        same); at least one task unless STOPPED, exactly ``tasks`` when given, or any number with ``any_tasks`` (a
        MirrorCheckpointConnector has none until it finds a consumer group). Returns the status."""
        want_tasks = (task_state,) if isinstance(task_state, str) else task_state or (state,)

        def reached() -> Optional[dict[str, Any]]:
            status, body = self.request("GET", f"/connectors/{self._name(name)}/status")
            if status != 200 or body["connector"]["state"] != state:
                return None
            found = body["tasks"]
            if tasks is not None and len(found) != tasks:
                return None
            if state != "STOPPED" and tasks is None and not any_tasks and not found:
                return None
            return body if all(t["state"] in want_tasks for t in found) else None

        return self.process.wait_ready(f"connector {name!r} to be {state}" + (f" with {tasks} tasks" if tasks is not None
                                                                               else ""), reached, timeout=timeout,
                                       interval=0.2, hint=f"worker.status({name!r}) shows its tasks' traces.")

    def wait_task(self, name: str, state: str, task: int = 0, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until task ``task`` of ``name`` is in ``state`` (e.g. FAILED); returns that task's status."""
        def reached() -> Optional[dict[str, Any]]:
            status, body = self.request("GET", f"/connectors/{self._name(name)}/status")
            found = [t for t in body.get("tasks", []) if t["id"] == task] if status == 200 else []
            return found[0] if found and found[0]["state"] == state else None

        return self.process.wait_ready(f"task {task} of {name!r} to be {state}", reached, timeout=timeout, interval=0.2)

    def overview(self) -> "pd.DataFrame":
        """Every connector of this worker's Connect cluster: type, state, task states (``?expand=status``)."""
        import pandas as pd

        found = self._call("GET", "/connectors?expand=status&expand=info")
        rows = []
        for name, entry in sorted(found.items()):
            status = entry["status"]
            rows.append({"connector": name, "type": status.get("type"), "class": entry["info"]["config"].get(
                "connector.class", "").rsplit(".", 1)[-1], "state": status["connector"]["state"],
                         "tasks": ", ".join(f"{t['id']}:{t['state']}" for t in status["tasks"]) or "–"})
        return pd.DataFrame(rows, columns=["connector", "type", "class", "state", "tasks"])

    def __repr__(self) -> str:
        state = "ready" if self.ready_seconds is not None else self.process.state
        return f"<ConnectWorker {self.url} group={self.group} {state if self.running else self.process.state}>"


def first_line(trace: Optional[str]) -> str:
    """The exception line of a task's ``trace`` and its last ``Caused by`` (a trace is a whole Java stack)."""
    if not trace:
        return ""
    lines = [x for x in trace.splitlines() if x and not x.startswith("\t")]
    causes = [x for x in lines if x.startswith("Caused by")]
    return lines[0] + (f"\n{causes[-1]}" if causes else "")


__all__ = ["APICURIO_CONVERTER", "BYTES_CONVERTER", "ConnectError", "avro_converter", "avro_converter_jars",
           "converter_artifacts", "ConnectWorker", "JSON_CONVERTER", "STRING_CONVERTER",
           "ensure_plugins", "first_line", "plugin_artifacts", "start", "worker_properties"]
