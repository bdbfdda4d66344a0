"""Processes that live beside a cluster's brokers: a schema registry, Kafka Connect workers, MirrorMaker 2.

Each runs as a :class:`~labkit.runtime.processes.ManagedProcess` of the cluster's
:class:`~labkit.runtime.processes.Supervisor` (so it dies with the kernel, even one killed
with SIGKILL), on its own loopback port, with its log in the cluster's directory, and
is ready when its HTTP endpoint answers. ``cluster.stop()`` stops it before the
brokers (the supervisor stops the newest processes first). A cluster labkit does not
own (external) gets a supervisor of its own for its services, stopped with it.

Layer: services, below the cluster (which starts them) and above the view and the teaching helpers.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from ..runtime.processes import supervisor_of


def service_dir(cluster: Any, name: str) -> Path:
    """A directory for one service's files and logs, inside the cluster's (deleted with it)."""
    root = getattr(cluster, "data_dir", None) or supervisor_of(cluster).root
    path = Path(root) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def replication_factor(cluster: Any) -> int:
    """The replication factor for a service's own topics on ``cluster``: its broker count, at most 3.

    Services default to 3 (Connect, MirrorMaker 2): on a one-broker cluster they hang, then fail.
    """
    return max(1, min(3, len(cluster.brokers)))


def http(method: str, url: str, body: Any = None, timeout: float = 10.0,
         content_type: str = "application/json") -> tuple[int, Any]:
    """One HTTP request on loopback; (status, decoded JSON or text). Error statuses are returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def answers(url: str, timeout: float = 1.0) -> bool:
    """``url`` answers a GET with a 2xx status (a closed port or an error status: False)."""
    try:
        return 200 <= http("GET", url, timeout=timeout)[0] < 300
    except (OSError, urllib.error.URLError):
        return False


def java_options(heap: str = "128m", extra: Optional[list[str]] = None) -> list[str]:
    """JVM options for a service: a small heap, the client compiler, a collector without threads of its own."""
    return ["-Xms32m", f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k",
            "-XX:MaxMetaspaceSize=160m", "-Djava.awt.headless=true", *(extra or [])]
