"""Checks for commit_strategy: the learner's consumer loop, killed at random points, must lose nothing."""

from __future__ import annotations

import importlib.util
import inspect
import random
import time
from pathlib import Path
import tempfile

from confluent_kafka import Consumer

from labkit.grading import check

_spec = importlib.util.spec_from_file_location("exercise_crashing", Path(__file__).parent.parent / "_crashing.py")
crashing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crashing)


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "enable.auto.commit": False})


def _attempted(fn) -> None:
    if "raise NotImplementedError" in inspect.getsource(fn):
        raise NotImplementedError("not done yet")


def _run_loop(ns, bootstrap, topic, group, log: Path, idle: float = 3.0) -> None:
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([topic])
    out = log.open("a", buffering=1)

    def process(msg) -> None:
        time.sleep(0.002)
        out.write(msg.value().decode() + "\n")
        out.flush()

    try:
        ns.consume_loop(consumer, process, idle_seconds=idle)
    finally:
        consumer.close()
        out.close()


@check("processes_everything_once_without_crashes", points=2,
       hint="Poll, process every record of the batch, then commit what you processed; stop when idle.")
def processes_everything_once_without_crashes(ns):
    """Run to the end without crashes: every record processed, and the group's lag is zero afterwards."""
    cluster = ns.cluster
    topic, group = cluster.create_topic(crashing.unique("events"), partitions=3), crashing.unique("loop")
    crashing.make_records(cluster, topic, 200, lambda i: f"e{i:05d}".encode())
    log = Path(tempfile.mkdtemp()) / "processed.log"
    _run_loop(ns, cluster.bootstrap_servers, topic, group, log)
    seen = crashing.lines(log)
    assert sorted(set(seen)) == [f"e{i:05d}" for i in range(200)], f"{len(set(seen))} of 200 records processed"
    described = cluster.tool("kafka-consumer-groups", "--describe", "--group", group).lines
    lags = [int(line.split()[5]) for line in described if line.startswith(group)]
    assert lags and sum(lags) == 0, f"after the loop the group still has lag {sum(lags)}: commit what you processed"


@check("commits_explicitly", points=1, hint="Auto-commit commits what poll returned, processed or not.")
def commits_explicitly(ns):
    """The loop commits itself (the consumer it gets has enable.auto.commit=false)."""
    _attempted(ns.consume_loop)
    source = inspect.getsource(ns.consume_loop)
    assert ".commit(" in source, "the loop never calls consumer.commit(...)"


@check("nothing_lost_across_random_crashes", points=5, hidden=True)
def nothing_lost_across_random_crashes(ns):
    """Killed with SIGKILL at two random points and restarted, the loop still processes every record at least once."""
    _attempted(ns.consume_loop)
    cluster = ns.cluster
    topic, group = cluster.create_topic(crashing.unique("events"), partitions=3), crashing.unique("loop")
    crashing.make_records(cluster, topic, 600, lambda i: f"e{i:05d}".encode())
    log = Path(tempfile.mkdtemp()) / "processed.log"
    crashing.crash_and_restart(lambda: _run_loop(ns, cluster.bootstrap_servers, topic, group, log),
                               progress=lambda: len(crashing.lines(log)), total=600, rng=random.Random())
    missing = {f"e{i:05d}" for i in range(600)} - set(crashing.lines(log))
    assert not missing, f"{len(missing)} records were never processed, e.g. {sorted(missing)[:3]}"
