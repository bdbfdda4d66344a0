"""``labkit setup``'s "Fast JVM start" step: record the class-data archives once.

One single-broker cluster whose node writes the broker archive when it is stopped
with SIGTERM, after a topic, 2,000 acks=all records read back and a
``kafka-topics --describe`` (which writes the tool archive); :mod:`labkit.runtime.classdata`
checks them and puts them in place. A step module of its own (loaded by ``setup``
like the Spark and registry steps) because it starts a cluster: ``setup`` stays
importable from below the backends.
"""

from __future__ import annotations

import functools
import subprocess
import uuid
from pathlib import Path
from typing import Optional

from ..runtime.steps import step


@step("Fast JVM start")
def _class_data() -> str:
    from ..runtime.classdata import build_archives
    from ..runtime.distribution import ensure_distribution, lab_versions

    # One pair per cached release: a cluster of the previous one starts as fast (lesson 13's upgrade).
    done = [f"Kafka {v}: " + build_archives(ensure_distribution(progress=False, version=v),
                                             functools.partial(record_classes, version=v)) for v in lab_versions()]
    return "class-data archives " + "; ".join(done)


def record_classes(broker_archive: Optional[Path], tool_archive: Optional[Path], version: Optional[str] = None) -> None:
    """Run the JVMs that write ``broker_archive`` and ``tool_archive`` (None: not needed) as they exit."""
    from ..backends.native import NativeCluster
    from ..runtime.tools import tool_command

    cluster = NativeCluster("single-broker", progress=False, name="labkit-cds", kafka_version=version)
    cluster.archive_dump = broker_archive
    try:
        cluster.start()
        topic = cluster.create_topic(f"warm-up-{uuid.uuid4().hex[:6]}", partitions=3)
        producer = cluster.producer(acks="all", linger_ms=5)
        for i in range(2000):
            producer.produce(topic, key=str(i % 10), value=b"x" * 100)
            if i % 500 == 0:
                producer.poll(0)
        producer.flush(30)
        cluster.read_all(topic, timeout=30)
        if tool_archive is not None:
            cmd = tool_command("kafka-topics", ["--describe", "--topic", topic], cluster.bootstrap_servers,
                               archive_dump=tool_archive, version=version)
            subprocess.run(cmd, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        if broker_archive is not None:
            cluster.stop_broker(1, timeout=60)  # SIGTERM: the JVM writes the archive as it exits
    finally:
        cluster.stop()
