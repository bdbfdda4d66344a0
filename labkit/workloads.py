"""Consumers as child processes, so a lesson can crash one mid-batch and count exactly what happened.

    group = Group(cluster, topic, "billing")
    group.start_member("a", commit="sync")
    group.start_member("b", commit="auto", crash_after=120)   # SIGKILLs itself after processing 120 records
    group.wait_processed(500)
    group.outcome(expected)   # lost / duplicated / exactly once, from every member's durable log

Each member is ``python -m labkit.workloads`` with its settings on the command
line. It appends every record it processes to its own log file (flushed per
record, so a SIGKILL loses nothing already processed) and keeps its current
assignment in a small JSON status file. Members die with the notebook's kernel
(parent-death signal), and :meth:`Group.stop` ends them all.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from .errors import LabkitError

if TYPE_CHECKING:
    from .cluster import Cluster

#: Commit styles a member can use.
COMMIT_STYLES = {
    "auto": "enable.auto.commit=true: the client commits in the background every auto.commit.interval.ms",
    "sync": "commit synchronously after processing each batch",
    "async": "commit asynchronously after each batch (no retry if it fails)",
    "every_n": "commit the offsets of what was processed, every N records",
    "before": "commit first, then process the batch (at most once)",
}


@dataclass
class Outcome:
    expected: int
    processed: int
    lost: int
    duplicated: int

    @property
    def semantics(self) -> str:
        if self.lost and self.duplicated:
            return "neither"
        if self.lost:
            return "at most once"
        if self.duplicated:
            return "at least once"
        return "exactly once (this time)"

    def as_row(self) -> dict[str, Any]:
        return {"expected": self.expected, "processed": self.processed, "lost": self.lost,
                "duplicated": self.duplicated, "behaved as": self.semantics}


class Member:
    """One consumer process of a :class:`Group`."""

    def __init__(self, name: str, proc: subprocess.Popen, log: Path, status: Path) -> None:
        self.name, self.proc, self.log, self.status_file = name, proc, log, status

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def processed(self) -> list[str]:
        if not self.log.exists():
            return []
        return [line.split(" ", 2)[2] for line in self.log.read_text().splitlines() if line.count(" ") >= 2]

    def assignment(self) -> list[tuple[str, int]]:
        try:
            return [tuple(x) for x in json.loads(self.status_file.read_text())["assignment"]]  # type: ignore[misc]
        except (OSError, ValueError, KeyError):
            return []


class Group:
    """A consumer group whose members are child processes reading ``topic``."""

    def __init__(self, cluster: "Cluster", topic: str, group_id: str, workdir: Optional[Path] = None) -> None:
        self.cluster, self.topic, self.group_id = cluster, cluster.topic_name(topic), group_id
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"labkit-group-{group_id}-"))
        self.members: dict[str, Member] = {}

    def start_member(self, name: str, commit: str = "sync", crash_after: Optional[int] = None,
                     batch: int = 20, every_n: int = 10, process_ms: float = 1.0, **config: Any) -> Member:
        """Start a member; ``crash_after`` makes it SIGKILL itself after that many records (mid-batch)."""
        if commit not in COMMIT_STYLES:
            raise LabkitError(f"Unknown commit style {commit!r}.", f"Choose one of: {', '.join(COMMIT_STYLES)}.")
        if name in self.members and self.members[name].alive:
            raise LabkitError(f"Member {name!r} is already running.", "Stop it first, or use another name.")
        log, status = self.workdir / f"{name}.log", self.workdir / f"{name}.status.json"
        conf = {k.replace("_", ".") if "." not in k else k: v for k, v in config.items()}
        cmd = [sys.executable, "-m", "labkit.workloads", "--bootstrap", self.cluster.bootstrap_servers,
               "--topic", self.topic, "--group", self.group_id, "--name", name, "--log", str(log),
               "--status", str(status), "--commit", commit, "--batch", str(batch), "--every-n", str(every_n),
               "--process-ms", str(process_ms), "--config", json.dumps(conf)]
        if crash_after is not None:
            cmd += ["--crash-after", str(crash_after)]
        if sys.platform.startswith("linux") and shutil.which("setpriv"):
            cmd = ["setpriv", "--pdeathsig", "KILL", "--"] + cmd  # members must not outlive the kernel
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=(self.workdir / f"{name}.err").open("ab"),
                                stdin=subprocess.DEVNULL)
        member = Member(name, proc, log, status)
        self.members[name] = member
        return member

    def stop_member(self, name: str, timeout: float = 30.0) -> None:
        """Graceful: SIGTERM, the member closes its consumer (leaving the group) and exits."""
        m = self.members[name]
        if m.alive:
            m.proc.send_signal(signal.SIGTERM)
            try:
                m.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()

    def crash_member(self, name: str) -> None:
        """SIGKILL: no close, no commit; the group notices only after ``session.timeout.ms``."""
        m = self.members[name]
        if m.alive:
            m.proc.kill()
            m.proc.wait()

    def processed(self) -> Counter:
        """How many times each record value was processed, over all members (dead ones included)."""
        return Counter(v for m in self.members.values() for v in m.processed())

    def assignment(self) -> dict[str, list[tuple[str, int]]]:
        return {name: m.assignment() for name, m in self.members.items() if m.alive}

    def wait_processed(self, count: int, timeout: float = 60.0) -> int:
        """Wait until ``count`` distinct records were processed; returns how many were."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = len(self.processed())
            if done >= count:
                return done
            time.sleep(0.2)
        return len(self.processed())

    def wait_dead(self, name: str, timeout: float = 60.0) -> None:
        try:
            self.members[name].proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise LabkitError(f"Member {name!r} is still running after {timeout:.0f}s.", "See its .err file.")

    def outcome(self, expected: Iterable[str]) -> Outcome:
        expected = set(expected)
        seen = self.processed()
        return Outcome(expected=len(expected), processed=sum(seen.values()),
                       lost=len(expected - set(seen)), duplicated=sum(n - 1 for v, n in seen.items() if n > 1))

    def stop(self) -> None:
        for name in list(self.members):
            self.crash_member(name)


# ------------------------------------------------------------------------------------------ the member process


def _member(args: argparse.Namespace) -> int:  # pragma: no cover - runs in the child process
    from confluent_kafka import Consumer, TopicPartition

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
            "client.id": args.name, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "enable.auto.commit": args.commit == "auto", "auto.commit.interval.ms": 1000,
            "enable.auto.offset.store": True}
    conf.update(json.loads(args.config))
    consumer = Consumer(conf)
    status = Path(args.status)

    def write_status(_c: Any, parts: list) -> None:
        # ``parts`` is the new assignment (eager protocol): assignment() is only updated after this callback.
        status.write_text(json.dumps({"assignment": sorted((p.topic, p.partition) for p in parts)}))

    consumer.subscribe([args.topic], on_assign=write_status, on_revoke=lambda c, p: status.write_text(
        json.dumps({"assignment": []})))
    log = open(args.log, "a", buffering=1)
    done = 0
    since_commit: dict[tuple[str, int], int] = {}
    try:
        while not stop["now"]:
            batch = [m for m in consumer.consume(num_messages=args.batch, timeout=0.5) if not m.error()]
            if not batch:
                continue
            if args.commit == "before":
                consumer.commit(asynchronous=False)
            for msg in batch:
                time.sleep(args.process_ms / 1000)
                log.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
                log.flush()
                done += 1
                since_commit[(msg.topic(), msg.partition())] = msg.offset() + 1
                if args.crash_after is not None and done >= args.crash_after:
                    os.kill(os.getpid(), signal.SIGKILL)
                if args.commit == "every_n" and done % args.every_n == 0:
                    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in since_commit.items()],
                                    asynchronous=False)
            if args.commit == "sync":
                consumer.commit(asynchronous=False)
            elif args.commit == "async":
                consumer.commit(asynchronous=True)
    finally:
        consumer.close()
        log.close()
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.workloads", description="one consumer group member")
    for opt in ("--bootstrap", "--topic", "--group", "--name", "--log", "--status"):
        parser.add_argument(opt, required=True)
    parser.add_argument("--commit", choices=sorted(COMMIT_STYLES), default="sync")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--every-n", type=int, default=10)
    parser.add_argument("--process-ms", type=float, default=1.0)
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--config", default="{}")
    return _member(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
