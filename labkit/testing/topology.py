"""A Kafka Streams topology tested without a broker: Kafka's own ``TopologyTestDriver``, called from Python.

    from labkit.testing.topology import drive
    result = drive('''
        builder.<String, String>stream(views).filter((page, view) -> !page.equals("/cart")).to(viewers);
    ''', params={"views": "views", "viewers": "viewers"},
       inputs=[("views", "/home", '{"user": "u1"}', 1_700_000_000_000)], outputs=["viewers"])
    result.outputs["viewers"]      # [Output(key='/home', value='{"user": "u1"}', timestamp=1700000000000)]

The topology is the same Java a lesson-12 application runs (``labkit.services.streams.app``): it is compiled by
:func:`labkit.services.streamsbuild.compile_topology` (one compile path for both), then driven by
``java/LabTopologyTest.java`` with ``org.apache.kafka:kafka-streams-test-utils`` at the lab's Kafka version:
every input record is processed the moment it is piped in, in one thread, with the record's timestamp as
stream time -- windows close, joins match and stores fill deterministically, in milliseconds, with no cluster.
What it cannot show is everything between the topology and the brokers: partitions and their assignment,
rebalances, commits and crashes, the real serialisation on the wire, the cache and commit interval.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import LabkitError
from ..runtime.distribution import ensure_distribution
from ..runtime.environment import environments_dir
from ..runtime.jvm import find_java
from ..runtime.processes import orphan_proof
from ..services.streamsbuild import (JAVA_DIR, compile_topology, ensure_streams, ensure_test_utils, launcher, native_dir,
                                     test_utils_artifacts)

RUNNER = JAVA_DIR / "LabTopologyTest.java"


class TopologyTestError(LabkitError):
    """Raised when the topology failed inside the TopologyTestDriver: ``reason`` is Java's exception, one line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"The topology failed in the TopologyTestDriver: {reason}",
                         "The exception is Kafka Streams' own: fix the topology (or the records piped in).")


@dataclass(frozen=True)
class Output:
    """A record the topology wrote to a sink topic."""

    key: Optional[str]
    value: Optional[str]
    timestamp: int


@dataclass
class TopologyRun:
    """What one run of the driver produced, per output topic, and how long it took."""

    outputs: dict[str, list[Output]] = field(default_factory=dict)
    #: The driver's own time to process every record and read the outputs (no JVM start, no compile).
    driver_ms: float = 0.0
    #: The whole call: javac when the topology is new, the JVM, the driver.
    seconds: float = 0.0


def _inputs(records: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        if len(record) != 4:
            raise LabkitError(f"An input record is (topic, key, value, timestamp in ms); got {record!r}.",
                              "Pass tuples like ('views', '/home', '{\"user\": \"u1\"}', 1700000000000).")
        topic, key, value, timestamp = record
        rows.append({"topic": topic, "key": key, "value": value, "timestamp": int(timestamp)})
    return rows


def drive(code: str, params: Optional[Mapping[str, Any]] = None, inputs: Iterable[Sequence[Any]] = (),
          outputs: Sequence[str] = (), config: Optional[Mapping[str, Any]] = None,
          timeout: float = 180.0) -> TopologyRun:
    """Pipe ``inputs`` -- (topic, key, value, timestamp ms), in order -- through the topology ``code`` (with
    ``params`` as Java variables) in Kafka's ``TopologyTestDriver``; returns what it wrote to each of ``outputs``.
    ``config``: Streams settings (String serdes by default)."""
    t0 = time.monotonic()
    compiled = compile_topology(code, params)
    dist = ensure_distribution(progress=False)
    jars = ensure_streams(progress=False, dist=dist)
    test_jars = ensure_test_utils(dist=dist)
    classpath = ":".join([str(launcher(dist, jars)), str(compiled.directory), str(dist.lib_dir / "*"),
                          *(str(j) for j in [*jars, *test_jars])])
    spec = {"config": {k: str(v) for k, v in (config or {}).items()}, "inputs": _inputs(inputs),
            "outputs": list(outputs)}
    with tempfile.TemporaryDirectory(prefix="labkit-topology-test-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        options = [f"-Djava.io.tmpdir={tmp}", "-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                   f"-Dlog4j2.configurationFile={environments_dir() / 'streams-log4j2.xml'}"]
        native = native_dir(jars)
        if native is not None:
            options.append(f"-Djava.library.path={native}")
        # Java's single-file source mode compiles the runner in memory: no second compile path beside streamsbuild's
        command = [str(find_java().executable), *options, "-cp", classpath, str(RUNNER), compiled.class_name,
                   str(spec_path), str(out_path)]
        proc = subprocess.run(orphan_proof(command), capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if proc.returncode != 0 or not out_path.exists():
            raise TopologyTestError(_reason(proc.stderr + proc.stdout, compiled.class_name))
        result = json.loads(out_path.read_text())
    return TopologyRun({topic: [Output(r.get("key"), r.get("value"), int(r["timestamp"])) for r in rows]
                        for topic, rows in result["outputs"].items()},
                       result["nanos"] / 1e6, time.monotonic() - t0)


def _reason(output: str, class_name: str) -> str:
    """The exception's line from a JVM's output ('Caused by: ...' wins: the topology's own error)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    causes = [line for line in lines if line.startswith("Caused by:")]
    found = causes[-1] if causes else next((line for line in lines if "Exception" in line or "Error" in line),
                                           lines[-1] if lines else "the JVM exited without a word")
    return found.removeprefix("Caused by: ")[:400].replace(class_name, "your topology")


__all__ = ["Output", "TopologyRun", "TopologyTestError", "drive", "ensure_test_utils", "test_utils_artifacts"]
