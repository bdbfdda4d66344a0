"""One consumer-group member: the program :class:`labkit.workloads.Group` runs as ``python -m labkit.apps.member``.

A confluent-kafka consumer with rebalance callbacks and a consume-process-commit loop in
the commit style asked for (lesson 05 shows :func:`run_member`). It appends every record
it processes to its log (flushed per record, so a SIGKILL loses nothing already
processed), keeps its assignment in a JSON status file, and appends every rebalance
callback to an event log (:func:`record_event`; the parent reads it with :func:`read_events`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..errors import LabkitError

#: Commit styles a member can use.
COMMIT_STYLES = {
    "auto": "enable.auto.commit=true: the client commits in the background every auto.commit.interval.ms",
    "sync": "commit synchronously after processing each batch",
    "async": "commit asynchronously after each batch (no retry if it fails)",
    "every_n": "commit the offsets of what was processed, every N records",
    "before": "commit first, then process the batch (at most once)",
}

#: Rebalance events a member records: its process started, partitions assigned / revoked / lost in a
#: rebalance callback, its process killed (written by :meth:`Group.crash_member`), its consumer closed.
EVENT_KINDS = ("start", "assign", "revoke", "lost", "killed", "closed")

#: Client settings the broker-side protocol (``group.protocol=consumer``, KIP-848) rejects: the broker owns them.
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


@dataclass(frozen=True)
class MemberEvent:
    """One rebalance event of one member: ``kind`` (see :data:`EVENT_KINDS`) at wall-clock time ``t``."""

    t: float
    member: str
    kind: str
    partitions: tuple[tuple[str, int], ...] = ()


def read_events(path: Path, member: str) -> list[MemberEvent]:
    """The events of one member's event log; a half-written last line (SIGKILL) is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            raw = json.loads(line)
            out.append(MemberEvent(float(raw["t"]), member, str(raw["kind"]),
                                   tuple(sorted((str(t), int(p)) for t, p in raw.get("partitions", [])))))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def record_event(path: Path, kind: str, partitions: Iterable[tuple[str, int]] = ()) -> None:
    """Append one event (see :data:`EVENT_KINDS`) to an event log, stamped with the wall-clock time."""
    if kind not in EVENT_KINDS:
        raise LabkitError(f"Unknown member event {kind!r}.", f"Use one of: {', '.join(EVENT_KINDS)}.")
    with path.open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "kind": kind, "partitions": sorted(partitions)}) + "\n")


def ready_file(hold: Path) -> Path:
    """What a member started with ``--hold FILE`` makes once it is ready to create its consumer."""
    return hold.with_name(hold.name + ".ready")


def run_member(args: argparse.Namespace) -> int:  # pragma: no cover - runs in the child process
    """The code every member process runs (lesson 05 shows it): a confluent-kafka consumer, its rebalance
    callbacks, and the consume-process-commit loop in the commit style asked for."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    def commit(**kwargs: Any) -> None:
        # A commit sent while the group rebalances is refused (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
        # STALE_MEMBER_EPOCH, ...). The records stay uncommitted and are delivered again: at least once.
        try:
            consumer.commit(**kwargs)
        except KafkaException as exc:
            sys.stderr.write(f"{time.time():.3f} commit refused: {exc.args[0].str()}\n")
            sys.stderr.flush()

    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    extra = json.loads(args.config)
    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
            "client.id": args.name, "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "enable.auto.commit": args.commit == "auto", "auto.commit.interval.ms": 1000,
            "enable.auto.offset.store": True}
    if extra.get("group.protocol") == "consumer":
        for key in CLASSIC_ONLY:
            conf.pop(key, None)
    conf.update(extra)
    events = Path(args.events) if args.events else Path(args.log).with_suffix(".events.jsonl")
    if args.hold:  # started ahead of a restart: ready, and waiting for the word to create its consumer
        hold = Path(args.hold)
        ready_file(hold).touch()
        while not hold.exists():
            if stop["now"]:
                return 0
            time.sleep(0.005)
    record_event(events, "start")
    consumer = Consumer(conf)
    status = Path(args.status)
    held: set[tuple[str, int]] = set()

    def changed(kind: str, parts: list) -> None:
        # Eager protocols revoke everything, then assign the whole new assignment; cooperative ones (and
        # group.protocol=consumer) pass only the partitions that move. assignment() is only updated after
        # the callback returns, so the member keeps its own account.
        tps = {(p.topic, p.partition) for p in parts}
        if kind == "assign":
            held.update(tps)
        else:
            held.difference_update(tps)
        record_event(events, kind, tps)
        status.write_text(json.dumps({"assignment": sorted(held)}))

    consumer.subscribe([args.topic], on_assign=lambda c, p: changed("assign", p),
                       on_revoke=lambda c, p: changed("revoke", p), on_lost=lambda c, p: changed("lost", p))
    log = open(args.log, "a", buffering=1)
    done = 0
    since_commit: dict[tuple[str, int], int] = {}
    try:
        while not stop["now"]:
            batch = [m for m in consumer.consume(num_messages=args.batch, timeout=0.5) if not m.error()]
            if not batch:
                continue
            if args.commit == "before":
                commit(asynchronous=False)
            for msg in batch:
                time.sleep(args.process_ms / 1000)
                log.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
                log.flush()
                done += 1
                since_commit[(msg.topic(), msg.partition())] = msg.offset() + 1
                if args.crash_after is not None and done >= args.crash_after:
                    os.kill(os.getpid(), signal.SIGKILL)
                if args.commit == "every_n" and done % args.every_n == 0:
                    commit(offsets=[TopicPartition(t, p, o) for (t, p), o in since_commit.items()],
                           asynchronous=False)
            if args.commit == "sync":
                commit(asynchronous=False)
            elif args.commit == "async":
                commit(asynchronous=True)
    finally:
        consumer.close()
        log.close()
        record_event(events, "closed")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.apps.member", description="one consumer group member")
    for opt in ("--bootstrap", "--topic", "--group", "--name", "--log", "--status"):
        parser.add_argument(opt, required=True)
    parser.add_argument("--commit", choices=sorted(COMMIT_STYLES), default="sync")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--every-n", type=int, default=10)
    parser.add_argument("--process-ms", type=float, default=1.0)
    parser.add_argument("--crash-after", type=int, default=None)
    parser.add_argument("--config", default="{}")
    parser.add_argument("--events", default=None)
    parser.add_argument("--hold", default=None, help="a file: once ready (ready_file(FILE) made), wait until it exists")
    return run_member(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
