"""The Spark driver a notebook gets: one SparkSession per kernel, tied to a cluster, stopped with it.

Its settings (:data:`LOCAL_DEFAULTS`: ``local[2]``, small driver heap, no UI, UTC), the
Kafka options for a cluster (credentials included on a secured one), the working and
checkpoint directories inside the cluster's data directory, and the driver's log.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from ..errors import JavaError, LabkitError
from ..runtime.cache import cache_dir
from ..runtime.processes import scratch_dir
from ..runtime.progress import Progress
from .connector import SUPPORTED_JAVA, cached_connector, check_java, ensure_connector

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..runtime.protocols import ClusterLike

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"


#: Settings every lab session gets unless overridden (``**conf`` of :func:`session`).
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "false",
    # With nothing new on its topics, a query with the default trigger asks Kafka for the latest offsets again
    # after this long (Spark's default, 10 ms: a hundred ListOffsets a second). Idle for 30 s, a query on a
    # one-broker cluster used 4.75 CPU-s in the driver and 4.54 in the broker with 10 ms, and 0.9 and 1.06 with
    # 200 ms (2026-11-28, 2 cores). 100 ms: new records wait at most a tenth of a second more.
    "spark.sql.streaming.pollingDelay": "100ms",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


@dataclass
class _Owned:
    """The session labkit started, and for which cluster."""

    spark: "SparkSession"
    cluster_ref: "weakref.ReferenceType[ClusterLike] | None"
    workdir: Path
    temp_workdir: bool


_CURRENT: Optional[_Owned] = None
_LOCK = threading.RLock()


def kafka_options(cluster: "ClusterLike", **options: Any) -> dict[str, str]:
    """Options for Spark's Kafka source/sink: ``kafka.bootstrap.servers`` (and any client settings the
    cluster needs, e.g. a classroom cluster's security settings) plus yours, as strings.

    ``kafka_options(cluster, subscribe=topic, startingOffsets="earliest")``; Kafka client settings
    take the ``kafka.`` prefix, as in ``**{"kafka.max.poll.records": "500"}``.
    """
    from ..security import java_client_settings

    conf = cluster.client_config()
    # Spark's Kafka client is the Java one: security settings under their Java names (a secured cluster's
    # SCRAM password becomes a JAAS line, the CA a PEM truststore); librdkafka-only keys stay out.
    secured = java_client_settings(conf)
    plain = {k: v for k, v in conf.items() if not callable(v) and "." in k
             and not k.startswith(("security.", "sasl.", "ssl."))}
    out = {f"kafka.{k}": _option_text(v) for k, v in {**plain, **secured}.items()}
    out.update({k: _option_text(v) for k, v in options.items()})
    return out


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def workdir(cluster: "ClusterLike") -> Path:
    """The per-cluster directory for Spark's checkpoints, scratch space and output files.

    Inside the cluster's own temp dir when it has one (a native cluster: deleted with it), else a
    scratch directory of the cluster's (``runtime.processes.scratch_dir``: deleted when the session or the
    cluster stops, or when the kernel dies).
    """
    return _session_dir(cluster)[0]


def checkpoint_dir(cluster: "ClusterLike", name: str) -> str:
    """A checkpoint directory named ``name`` inside the cluster's Spark directory."""
    return str(workdir(cluster) / "checkpoints" / name)


def session(cluster: "ClusterLike", app_name: str = "kafka-lab", master: Optional[str] = None,
            progress: bool = True, log_level: str = "ERROR", checkpoint_root: Optional[str] = None,
            **conf: Any) -> "SparkSession":
    """A SparkSession for ``cluster``, with the Kafka connector on its classpath.

    ``master`` (or ``$SPARK_MASTER``) picks a Spark cluster; the default is ``local[2]``.
    ``conf`` overrides any Spark setting (underscores may stand for dots only in keys
    without dots: pass real Spark keys as ``**{"spark.x.y": v}``). Calling it again for the
    same cluster returns the running session; for another cluster the old one is stopped.
    The session stops when the cluster stops, and when Python exits.
    """
    global _CURRENT
    with _LOCK:
        if _CURRENT is not None:
            owner = _CURRENT.cluster_ref() if _CURRENT.cluster_ref is not None else None
            if owner is cluster and _alive(_CURRENT.spark):
                return _CURRENT.spark
            stop_session()
        bar = Progress(progress, "Spark", total=3)
        try:
            check_java()
            bar.step("Kafka connector")
            jars = _connector_with_bar(bar)
            bar.step("starting the JVM")
            base, temp = _session_dir(cluster)
            settings = session_conf(cluster, jars, base, master=master, checkpoint_root=checkpoint_root, **conf)
            t0 = time.monotonic()
            spark = _build(app_name, settings, log_path=base / DRIVER_LOG)
            spark.sparkContext.setLogLevel(log_level)
            bar.step(f"ready in {time.monotonic() - t0:.1f} s")
        finally:
            bar.close()
        _CURRENT = _Owned(spark, weakref.ref(cluster), base, temp)
        _chain_stop(cluster)
        return spark


def _connector_with_bar(bar: Progress) -> list[Path]:
    found = cached_connector()
    if found:
        return found
    bar.describe("fetching the Kafka connector from Maven Central (once)")
    return ensure_connector(progress=False)


def session_conf(cluster: "ClusterLike", jars: list[Path], base: Path, master: Optional[str] = None,
                 checkpoint_root: Optional[str] = None, **conf: Any) -> dict[str, str]:
    """Every Spark setting :func:`session` uses (useful to read, or to build a session yourself)."""
    settings = dict(LOCAL_DEFAULTS)
    settings.update({
        "spark.master": master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER,
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.streaming.checkpointLocation": checkpoint_root or str(base / "checkpoints"),
        "spark.local.dir": str(base / "local"),
        "spark.sql.warehouse.dir": str(base / "warehouse"),
        "spark.driver.extraJavaOptions": (f"{LOCAL_DEFAULTS['spark.driver.extraJavaOptions']} "
                                          f"-Dlog4j2.configurationFile={_log4j_config()} "
                                          f"-Djava.io.tmpdir={base / 'local'} "
                                          f"-Dlabkit.cluster={getattr(cluster, 'data_dir', None) or base}"),
    })
    settings.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()})
    return settings


_TEMP_DIRS: "weakref.WeakKeyDictionary[ClusterLike, Path]" = weakref.WeakKeyDictionary()


def _session_dir(cluster: "ClusterLike") -> tuple[Path, bool]:
    data_dir = getattr(cluster, "data_dir", None)
    if data_dir is not None:
        base, temp = Path(data_dir) / "spark", False
    else:
        if cluster not in _TEMP_DIRS or not _TEMP_DIRS[cluster].exists():  # new, or gone with the cluster's stop
            # with the cluster's other files: removed when it stops, or by the watchdog when the kernel dies
            _TEMP_DIRS[cluster] = scratch_dir(cluster, "spark-")
        base, temp = _TEMP_DIRS[cluster], True
    for sub in ("checkpoints", "local", "warehouse", "output"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return base, temp


DRIVER_LOG = "spark-driver.log"


def driver_log(cluster: "ClusterLike", lines: int = 50) -> str:
    """The last ``lines`` of what the Spark driver JVM wrote to its stderr (warnings, errors, stack traces)."""
    path = workdir(cluster) / DRIVER_LOG
    if not path.exists():
        return ""
    return "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while a child process is started, so the child keeps writing there.

    PySpark starts the driver JVM with the kernel's own stderr, which a notebook shows in red under
    the cell (Java's module warning, log-level notices, later every Spark warning). Python's own
    ``sys.stderr`` in a notebook is not descriptor 2, so the kernel's messages are unaffected.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _build(app_name: str, settings: dict[str, str], log_path: Optional[Path] = None) -> "SparkSession":
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        if log_path is None:
            return builder.getOrCreate()
        with _stderr_to(log_path):
            return builder.getOrCreate()
    except Exception as exc:
        text = str(exc)
        if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
            said = _last_line(log_path)
            raise JavaError("The Spark JVM exited before it started (Java unsuitable or out of memory)"
                            + (f": {said}" if said else "."),
                            f"Use a JDK {' or '.join(map(str, SUPPORTED_JAVA))} (JAVA_HOME), then restart the "
                            "kernel" + (f"; the JVM's output is in {log_path}." if log_path else ".")) from exc
        raise LabkitError(f"Spark did not start: {text.strip().splitlines()[0][:300]}",
                          "Restart the kernel and run the Setup cell again.") from exc


def _last_line(path: Optional[Path]) -> str:
    """The JVM's last error line in its log (the launcher scripts add their own noise after it)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()] if path else []
    except OSError:
        return ""
    errors = [line for line in lines if re.search(r"error|exception", line, re.IGNORECASE)
              and "spark-class" not in line]
    return (errors or lines or [""])[-1][:200]


def _alive(spark: "SparkSession") -> bool:
    try:
        sc = spark.sparkContext
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - a dead gateway means not alive
        return False


def stop_session() -> None:
    """Stop every streaming query and the session labkit started (safe to call twice)."""
    global _CURRENT
    with _LOCK:
        owned, _CURRENT = _CURRENT, None
        if owned is None:
            return
        try:
            if _alive(owned.spark):
                for query in owned.spark.streams.active:
                    try:
                        query.stop()
                    except Exception:  # noqa: BLE001 - stopping anyway
                        pass
                owned.spark.stop()
        except Exception as exc:  # noqa: BLE001 - the JVM may already be gone
            log.debug("stopping Spark: %s", exc)
        _shutdown_gateway()
        if owned.temp_workdir:
            shutil.rmtree(owned.workdir, ignore_errors=True)
            cluster = owned.cluster_ref() if owned.cluster_ref is not None else None
            if cluster is not None:
                _TEMP_DIRS.pop(cluster, None)


def _shutdown_gateway(timeout: float = 15.0) -> None:
    """End the driver JVM too: PySpark keeps it for the life of the Python process after ``spark.stop()``.

    The next session then starts a fresh JVM with its own settings (heap, log file, cluster marker).
    """
    from pyspark import SparkContext

    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None  # type: ignore[assignment]
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception as exc:  # noqa: BLE001 - already gone
        log.debug("closing the Py4J gateway: %s", exc)
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()   # the gateway server exits when its stdin closes
        proc.wait(timeout)
    except (OSError, ValueError):
        pass
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it did not listen
        proc.kill()
        proc.wait()


def _chain_stop(cluster: "ClusterLike") -> None:
    """Make ``cluster.stop()`` stop the Spark session first: queries would fail once the brokers go, and its
    files (on a cluster labkit did not start: a scratch directory of the cluster's supervisor) go with them."""
    ref = weakref.ref(cluster)

    def stop_if_ours() -> None:
        owned = _CURRENT
        if owned is not None and owned.cluster_ref is not None and owned.cluster_ref() is ref():
            stop_session()

    cluster.on_stop(stop_if_ours, first=True)


atexit.register(stop_session)


def _log4j_config() -> Path:
    """A log4j2 config that keeps Spark quiet on the console (errors only)."""
    path = cache_dir() / "spark-log4j2.properties"
    text = ("# Written by labkit: Spark's driver logs errors only (the notebook shows what matters).\n"
            "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex\n"
            # pyspark-shell counts as a REPL: Spark sets the console to this logger's level (default WARN).
            "logger.repl.name = org.apache.spark.repl.Main\nlogger.repl.level = error\n")
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path
