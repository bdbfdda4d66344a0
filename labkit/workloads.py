"""Consumers as child processes, so a lesson can crash one mid-batch and count exactly what happened.

    group = Group(cluster, topic, "billing")
    group.start_member("a", commit="sync")
    group.start_member("b", commit="auto", crash_after=120)   # SIGKILLs itself after processing 120 records
    group.wait_settled(2)      # every partition owned once, the assignment unchanged for 4 s
    group.wait_processed(500)
    group.outcome(expected)   # lost / duplicated / exactly once, from every member's durable log

Each member is ``python -m labkit.apps.member`` with its settings on the command
line. It appends every record it processes to its own log file (flushed per
record, so a SIGKILL loses nothing already processed), keeps its current
assignment in a small JSON status file, and appends every rebalance callback
(partitions assigned, revoked or lost, with the wall-clock time) to an event
log, so a lesson can tell afterwards who stopped consuming and for how long. Each member is a
:class:`~labkit.runtime.processes.ManagedProcess`: it dies with the notebook's kernel (parent-death signal),
and :meth:`Group.stop` ends them all.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from .apps.member import (CLASSIC_ONLY, COMMIT_STYLES, EVENT_KINDS, MemberEvent, read_events, ready_file,
                          record_event, run_member)
from .errors import LabkitError
from .runtime.brokerlogs import read_log
from .runtime.processes import ManagedProcess, scratch_dir
from .waiting import Wait

if TYPE_CHECKING:
    from .runtime.protocols import ClusterLike

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

    def __init__(self, name: str, process: ManagedProcess, log: Path, status: Path,
                 events_file: Optional[Path] = None) -> None:
        self.name, self.process, self.log, self.status_file = name, process, log, status
        self.events_file = events_file or log.with_suffix(".events.jsonl")

    @property
    def alive(self) -> bool:
        return self.process.running

    def records(self) -> list[tuple[int, int, str]]:
        """What it processed, in order: ``(partition, offset, value)`` per line of its log (the member writes
        one per record; a line a SIGKILL cut short is skipped)."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            fields = line.split(" ", 2)
            if len(fields) == 3 and fields[0].isdigit() and fields[1].isdigit():
                out.append((int(fields[0]), int(fields[1]), fields[2]))
        return out

    def processed(self) -> list[str]:
        """The values it processed, in order."""
        return [value for _, _, value in self.records()]

    def assignment(self) -> list[tuple[str, int]]:
        try:
            return [tuple(x) for x in json.loads(self.status_file.read_text())["assignment"]]  # type: ignore[misc]
        except (OSError, ValueError, KeyError):
            return []

    def events(self) -> list[MemberEvent]:
        """Every rebalance event this member recorded (over all its runs), oldest first."""
        return read_events(self.events_file, self.name)

    def reported(self) -> bool:
        """Its first rebalance callback has run (possibly handing it nothing)."""
        return self.status_file.exists()

    def client_log(self, lines: int = 50, grep: Optional[str] = None) -> list[str]:
        """The last ``lines`` lines its process printed, librdkafka's own log lines among them
        (``%4|<time>|MAXPOLL|...``: level, the client's clock, the event); with ``grep`` (a regular expression)
        the last ``lines`` lines that match -- read as :meth:`labkit.cluster.Cluster.broker_log` reads a broker's."""
        return read_log(self.process.log_path, lines, grep).splitlines()


#: The Java consumer's rebalance events (``kafka-verifiable-consumer``'s JSON lines) -> :data:`EVENT_KINDS`.
JAVA_EVENTS = {"startup_complete": "start", "partitions_assigned": "assign", "partitions_revoked": "revoke",
               "partitions_lost": "lost", "shutdown_complete": "closed"}


class JavaMember(Member):
    """A member running Kafka's own Java consumer (``kafka-verifiable-consumer`` from the cached jars), for
    what librdkafka does not have (the eager ``StickyAssignor``). The tool prints every rebalance callback as a
    JSON line with its time; they are read as :class:`MemberEvent` like a Python member's."""

    def events(self) -> list[MemberEvent]:
        out = read_events(self.events_file, self.name)  # what labkit wrote (killed)
        if self.log.exists():
            for line in self.log.read_text(errors="replace").splitlines():
                if not line.startswith("{"):
                    continue  # the JVM's own warnings share the output
                try:
                    raw = json.loads(line)
                    kind = JAVA_EVENTS.get(raw.get("name", ""))
                    if kind:
                        parts = tuple(sorted((str(p["topic"]), int(p["partition"])) for p in raw.get("partitions", [])))
                        out.append(MemberEvent(raw["timestamp"] / 1000, self.name, kind, parts))
                except (ValueError, KeyError, TypeError):
                    continue
        return sorted(out, key=lambda e: e.t)

    def records(self) -> list[tuple[int, int, str]]:
        return []  # the tool reports counts, not records

    def assignment(self) -> list[tuple[str, int]]:
        held: set[tuple[str, int]] = set()
        for e in self.events():
            if e.kind == "assign":
                held.update(e.partitions)
            elif e.kind in ("revoke", "lost"):
                held.difference_update(e.partitions)
            elif e.kind in ("start", "closed", "killed"):
                held.clear()
        return sorted(held)

    def reported(self) -> bool:
        return any(e.kind == "assign" for e in self.events())


def _crash(member: Member) -> None:
    """SIGKILL ``member`` if it runs, and say so in its event log."""
    if member.alive:
        member.process.kill()
        record_event(member.events_file, "killed")


class Group:
    """A consumer group whose members are child processes reading ``topic``."""

    def __init__(self, cluster: "ClusterLike", topic: str, group_id: str, workdir: Optional[Path] = None) -> None:
        self.cluster, self.topic, self.group_id = cluster, cluster.topic_name(topic), group_id
        self.workdir = Path(workdir) if workdir else scratch_dir(cluster, f"group-{group_id}-")
        self.members: dict[str, Member] = {}

    def start_member(self, name: str, commit: str = "sync", crash_after: Optional[int] = None,
                     batch: int = 20, every_n: int = 10, process_ms: float = 1.0, **config: Any) -> Member:
        """Start a member; ``crash_after`` makes it SIGKILL itself after that many records (mid-batch)."""
        if name in self.members and self.members[name].alive:
            raise LabkitError(f"Member {name!r} is already running.", "Stop it first, or use another name.")
        return self._launch(name, None, commit, crash_after, batch, every_n, process_ms, **config)

    def restart_member(self, name: str, **options: Any) -> Member:
        """SIGKILL the running member ``name`` and start it again at once, as a supervisor restarts a crashed
        process; ``options`` as for :meth:`start_member`.

        The replacement process is started first and held just before it creates its consumer; it is let go
        once the old one is dead. So the member is away only while its new consumer joins the group, not while a
        Python process starts (seconds on a busy machine, longer than a short ``session.timeout.ms``)."""
        old = self.members.get(name)
        if old is None or not old.alive:
            raise LabkitError(f"Member {name!r} is not running.", "Start it with start_member().")
        hold = self.workdir / f"{name}.hold"
        ready = ready_file(hold)
        hold.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
        new = self._launch(name, hold, **options)
        try:
            new.process.wait_ready(f"member {name}'s replacement to be ready", ready.exists, interval=0.02)
        except BaseException:
            new.process.kill()
            self.members[name] = old
            raise
        _crash(old)
        new.status_file.unlink(missing_ok=True)  # the old process's last report
        hold.touch()
        return new

    def _launch(self, name: str, hold: Optional[Path], commit: str = "sync", crash_after: Optional[int] = None,
                batch: int = 20, every_n: int = 10, process_ms: float = 1.0, **config: Any) -> Member:
        if commit not in COMMIT_STYLES:
            raise LabkitError(f"Unknown commit style {commit!r}.", f"Choose one of: {', '.join(COMMIT_STYLES)}.")
        log, status = self.workdir / f"{name}.log", self.workdir / f"{name}.status.json"
        events = self.workdir / f"{name}.events.jsonl"
        # the cluster's own client settings first (a secured cluster's credentials), then the member's
        conf = {k: v for k, v in self.cluster.client_config().items()
                if k != "bootstrap.servers" and isinstance(v, (str, int, float, bool))}
        conf.update({k.replace("_", ".") if "." not in k else k: v for k, v in config.items()})
        if conf.get("group.protocol") == "consumer":
            rejected = sorted(k for k in conf if k in CLASSIC_ONLY)
            if rejected:
                raise LabkitError(f"With group.protocol=consumer the broker owns {', '.join(rejected)}.",
                                  "Leave them out (group.remote.assignor picks the broker's assignor).")
        status.unlink(missing_ok=True)  # a restarted member reports its new assignment, not the old one
        cmd = [sys.executable, "-m", "labkit.apps.member", "--bootstrap", self.cluster.bootstrap_servers,
               "--topic", self.topic, "--group", self.group_id, "--name", name, "--log", str(log),
               "--status", str(status), "--events", str(events), "--commit", commit, "--batch", str(batch),
               "--every-n", str(every_n), "--process-ms", str(process_ms), "--config", json.dumps(conf)]
        if crash_after is not None:
            cmd += ["--crash-after", str(crash_after)]
        if hold is not None:
            cmd += ["--hold", str(hold)]
        process = ManagedProcess(f"member {name}", cmd, self.workdir / f"{name}.err").start()
        member = Member(name, process, log, status, events)
        self.members[name] = member
        return member

    def start_java_member(self, name: str, assignment_strategy: str = "org.apache.kafka.clients.consumer.StickyAssignor",
                          session_timeout_ms: int = 6000) -> Member:
        """Start a member running the Java consumer with one of Java's assignors (a class name); it reads from
        the earliest offset and commits after each batch."""
        from .runtime.tools import tool_command

        if name in self.members and self.members[name].alive:
            raise LabkitError(f"Member {name!r} is already running.", "Stop it first, or use another name.")
        log, events = self.workdir / f"{name}.java.jsonl", self.workdir / f"{name}.events.jsonl"
        cmd = tool_command("kafka-verifiable-consumer", [
            "--topic", self.topic, "--group-id", self.group_id, "--assignment-strategy", assignment_strategy,
            "--session-timeout", str(session_timeout_ms), "--reset-policy", "earliest"],
            self.cluster.bootstrap_servers, self.cluster.tool_config())
        process = ManagedProcess(f"java member {name}", cmd, log).start()
        member = JavaMember(name, process, log, self.workdir / f"{name}.status.json", events)
        self.members[name] = member
        return member

    def pause_member(self, name: str) -> None:
        """SIGSTOP: the whole process freezes, its heartbeats too (a long GC pause, a VM stalled)."""
        self.members[name].process.pause()

    def resume_member(self, name: str) -> None:
        self.members[name].process.resume()

    def stop_member(self, name: str, timeout: float = 30.0) -> None:
        """Graceful: SIGTERM, the member closes its consumer (leaving the group) and exits."""
        m = self.members[name]
        if m.alive:
            m.process.stop(timeout)

    def crash_member(self, name: str) -> None:
        """SIGKILL: no close, no commit; the group notices only after ``session.timeout.ms``."""
        _crash(self.members[name])

    def events(self, since: Optional[float] = None) -> list[MemberEvent]:
        """Every member's rebalance events (dead members included), in time order; ``since``: wall-clock time."""
        out = [e for m in self.members.values() for e in m.events() if since is None or e.t >= since]
        return sorted(out, key=lambda e: (e.t, e.member))

    def processed(self) -> Counter:
        """How many times each record value was processed, over all members (dead ones included)."""
        return Counter(v for m in self.members.values() for v in m.processed())

    def assignment(self) -> dict[str, list[tuple[str, int]]]:
        return {name: m.assignment() for name, m in self.members.items() if m.alive}

    def wait_processed(self, count: int, timeout: float = 60.0) -> int:
        """Wait until ``count`` distinct records were processed; returns how many were.

        Raises :class:`~labkit.errors.WaitTimeout` (with each member's state) when fewer were
        processed within ``timeout`` seconds.
        """
        def done() -> int:
            n = len(self.processed())
            return n if n >= count else 0

        return Wait(f"{count} records to be processed by group {self.group_id!r}", timeout=timeout, interval=0.2,
                    stretch=True, evidence=lambda: f"{len(self.processed())} processed so far\n{self._evidence()}",
                    hint="Are the members running and is the topic being written to?").until(done)

    def wait_idle(self, member: Optional[str] = None, quiet: float = 2.0, timeout: float = 60.0) -> int:
        """Wait until the members have processed nothing new for ``quiet`` seconds; returns how many records
        (distinct values) were processed by then. With ``member``, the quiet time only counts once that
        member has processed something (a member taking over first waits for its rebalance) and the group
        has caught up with every partition's end as it was when the wait began: its last record processed, or
        the group's commit at the end (a record skipped by a commit before processing is never processed). A
        starved member's pause is then not taken for the end of its work.

        For a group that may have lost records (so a count would never be reached): it has caught up
        with the topic, or has nothing left it will read. Raises :class:`~labkit.errors.WaitTimeout`
        when processing is still going on after ``timeout`` seconds.
        """
        seen = {"count": -1, "since": 0.0}
        ends = None if member is None else {p.partition: p.high_watermark for p in self.cluster.describe_topic(
            self.topic).partitions if p.high_watermark}

        def quiet_now() -> Optional[tuple[int]]:
            if member is not None and not (self.members[member].processed() and self._caught_up(ends or {})):
                return None
            total = sum(self.processed().values())
            if total != seen["count"]:
                seen["count"], seen["since"] = total, time.monotonic()
                return None
            if time.monotonic() - seen["since"] < quiet:
                return None
            return (len(self.processed()),)

        return Wait(f"group {self.group_id!r} to go quiet for {quiet:g} s", timeout=timeout, interval=0.2,
                    stretch=True, evidence=self._evidence).until(quiet_now)[0]

    def _caught_up(self, ends: dict[int, int]) -> bool:
        """Every partition's record at ``ends[p] - 1`` processed by a member (their logs: partition, offset,
        value), or the group's committed offset at ``ends[p]`` or past it."""
        highest: dict[int, int] = {}
        for m in self.members.values():
            for part, offset, _ in m.records():
                highest[part] = max(highest.get(part, -1), offset)
        behind = [p for p, end in ends.items() if highest.get(p, -1) < end - 1]
        if not behind:
            return True
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        asked = ConsumerGroupTopicPartitions(self.group_id, [TopicPartition(self.topic, p) for p in behind])
        answer = self.cluster.admin().list_consumer_group_offsets([asked])[self.group_id].result(timeout=10)
        return all(tp.offset >= ends[tp.partition] for tp in answer.topic_partitions)

    def wait_settled(self, members: int, timeout: float = 60.0, quiet: float = 4.0,
                     partitions: Optional[int] = None) -> dict[str, list[tuple[str, int]]]:
        """Wait until the group's assignment is complete and has stayed the same for ``quiet`` seconds.

        Complete: exactly ``members`` members are running, each has reported an assignment (its
        first rebalance callback ran, possibly handing it nothing), and together they own every
        partition of the topic (or ``partitions`` of them) once. Returns that assignment,
        ``{member: [(topic, partition), ...]}``, as :meth:`assignment` reports it.

        Raises :class:`~labkit.errors.WaitTimeout` (with each member's state and the last line of
        its ``.err`` file) when it does not settle within ``timeout`` seconds, and
        :class:`~labkit.errors.LabkitError` at once when fewer than ``members`` are running.
        """
        if partitions is None:
            partitions = len(self.cluster.describe_topic(self.topic))
        seen: dict[str, Any] = {"last": None, "since": 0.0}

        def stable() -> Optional[dict[str, list[tuple[str, int]]]]:
            now = self.assignment()
            if _complete(self, now, members, partitions) and now == seen["last"]:
                return now if time.monotonic() - seen["since"] >= quiet else None
            seen["last"], seen["since"] = now, time.monotonic()
            return None

        def running() -> None:
            alive = [m for m in self.members.values() if m.alive]
            if len(alive) < members:
                gone = [m for m in self.members.values() if not m.alive and m.process.returncode not in (0, -9)]
                raise LabkitError(
                    f"Group {self.group_id!r} cannot settle with {members} members, {len(alive)} running"
                    + (f" ({', '.join(f'{m.name} exited with code {m.process.returncode}' for m in gone)})." if gone
                       else "."),
                    f"Start the missing members first; a member's errors are in {self.workdir}/<name>.err.")

        return Wait(f"group {self.group_id!r} to settle with {members} members owning {partitions} partitions",
                    timeout=timeout, interval=0.2, stretch=True, check=running, evidence=self._evidence,
                    hint="A rebalance waits for every member to call poll() again: a member busy with a long "
                         "batch delays it. Raise timeout, or see the members' .err files.").until(stable)

    def _evidence(self) -> str:
        lines = []
        for m in self.members.values():
            state = "running" if m.alive else f"exited ({m.process.returncode})"
            err = self.workdir / f"{m.name}.err"
            tail = err.read_text(errors="replace").strip().splitlines()[-1:] if err.exists() else []
            lines.append(f"{m.name} ({state}): owns {[p for _, p in m.assignment()]}"
                         + (f"; last error line: {tail[0]}" if tail else ""))
        return "\n".join(lines)

    def wait_owned(self, by: Iterable[str], partitions: Optional[int] = None,
                   timeout: float = 60.0) -> dict[str, list[tuple[str, int]]]:
        """Wait until the members ``by`` together own every partition of the topic (or ``partitions`` of them),
        whoever else is in the group; returns their assignment. For "the others took over its partitions"."""
        names = list(by)
        if partitions is None:
            partitions = len(self.cluster.describe_topic(self.topic))

        def taken() -> Optional[dict[str, list[tuple[str, int]]]]:
            now = {name: self.members[name].assignment() for name in names}
            return now if len({tp for parts in now.values() for tp in parts}) >= partitions else None

        return Wait(f"{', '.join(names)} to own {partitions} partitions of {self.topic!r}", timeout=timeout,
                    interval=0.1, stretch=True, evidence=self._evidence).until(taken)

    def wait_dead(self, name: str, timeout: float = 60.0) -> None:
        if self.members[name].process.wait(timeout) is None:
            raise LabkitError(f"Member {name!r} is still running after {timeout:.0f}s.", "See its .err file.")

    def outcome(self, expected: Iterable[str]) -> Outcome:
        expected = set(expected)
        seen = self.processed()
        return Outcome(expected=len(expected), processed=sum(seen.values()),
                       lost=len(expected - set(seen)), duplicated=sum(n - 1 for v, n in seen.items() if n > 1))

    def stop(self) -> None:
        for name in list(self.members):
            self.crash_member(name)


def _complete(group: Group, assignment: dict[str, list[tuple[str, int]]], members: int, partitions: int) -> bool:
    """``members`` running members, each with a reported assignment, owning ``partitions`` partitions once."""
    owned = [tp for parts in assignment.values() for tp in parts]
    reported = all(m.reported() for m in group.members.values() if m.alive)
    return len(assignment) == members and reported and len(owned) == len(set(owned)) == partitions


__all__ = ["CLASSIC_ONLY", "COMMIT_STYLES", "EVENT_KINDS", "Group", "JavaMember", "Member", "MemberEvent", "Outcome",
           "read_events", "record_event", "run_member"]
