"""One share-group member: the program :class:`labkit.sharegroups.ShareGroup` runs as
``python -m labkit.apps.sharemember``.

A confluent-kafka ``ShareConsumer`` (KIP-932, a preview API in librdkafka 2.16) that works
through jobs. A job is a record value: plain text (its id), or JSON
``{"id": ..., "ms": work time, "fails": deliveries that fail}`` -- ``"fails": 1`` fails its
first delivery only (a transient error), a large number fails every time (a poison
record). Whether a delivery fails is decided by the broker's ``delivery_count()``, so a
job fails the same way whichever member gets it.

What a member does with a failed job is its acknowledgement policy (:data:`ACK_POLICIES`).
It appends every delivery it got and every acknowledgement it gave to its log (JSON
lines, flushed per line: a SIGKILL loses nothing written), the broker's answer to every
acknowledgement commit too, and keeps its assignment (from librdkafka's statistics: a
share consumer has no rebalance callback) and the records it holds in a JSON status file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Optional

#: How a member acknowledges. Every explicit policy accepts a job once its work succeeded.
ACK_POLICIES = {
    "implicit": "share.acknowledgement.mode=implicit: the next poll accepts every record of the last one, "
                "whatever its work did",
    "release": "explicit: a failed job is released, to be delivered again (the broker archives it at the "
               "group's share.delivery.count.limit)",
    "reject": "explicit: a failed job is rejected at once (archived, never delivered again)",
    "retry": "explicit: a failed job is released until its delivery count reaches max_attempts, then rejected",
    "early": "explicit: every job is accepted and committed on receipt, before its work (a crash loses it)",
}

#: What a member writes to its log, one JSON object per line: ``e`` is one of these (``acked``: the
#: ``early`` policy's acknowledgement on receipt; ``killed`` is written by the parent that SIGKILLed it).
LOG_EVENTS = ("start", "got", "acked", "done", "commit", "killed", "closed")


def job_of(value: Optional[bytes]) -> dict[str, Any]:
    """A record value as a job: the JSON object it holds, or ``{"id": text}``."""
    text = value.decode(errors="replace") if value is not None else ""
    try:
        job = json.loads(text)
    except ValueError:
        return {"id": text}
    return job if isinstance(job, dict) else {"id": text}


def note(log: Any, event: str, **fields: Any) -> None:
    """Append one event to a member's log, stamped with the wall-clock time."""
    log.write(json.dumps({"t": time.time(), "e": event, **fields}) + "\n")
    log.flush()


def run_member(args: argparse.Namespace) -> int:  # pragma: no cover - runs in the child process
    """The loop every share member runs (lesson 14 shows it): poll, work, acknowledge, commit."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    types = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    log = open(args.log, "a", buffering=1)
    status = Path(args.status)
    state: dict[str, Any] = {"assignment": [], "join_state": "init", "held": []}

    def save() -> None:  # whole or not at all: the parent reads it any time (a frozen member mid-write too)
        scratch = status.with_suffix(".tmp")
        scratch.write_text(json.dumps(state))
        os.replace(scratch, status)

    def stats(raw: str) -> None:
        # librdkafka's statistics are the only place a share consumer's assignment shows (served inside poll).
        data = json.loads(raw)
        state["join_state"] = data.get("cgrp", {}).get("join_state", "")
        state["assignment"] = sorted([t, int(p)] for t, v in data.get("topics", {}).items()
                                     for p in v.get("partitions", {}) if int(p) >= 0)
        save()

    def committed(offsets: dict, exc: Optional[Exception]) -> None:
        error = None if exc is None else exc.args[0].name()
        for tp, done in offsets.items():
            note(log, "commit", topic=tp.topic, p=tp.partition, offsets=sorted(done), error=error)

    explicit = args.ack != "implicit"
    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            "max.poll.records": args.max_records, "statistics.interval.ms": 500, "stats_cb": stats,
            # librdkafka's own lines (its "Preview" warning on every share consumer) go to a file, not stderr.
            "logger": _file_logger(args.log + ".rdkafka")}
    conf.update(json.loads(args.config))
    consumer = ShareConsumer(conf)
    consumer.set_acknowledgement_commit_callback(committed)
    consumer.subscribe([args.topic])
    note(log, "start", policy=args.ack)
    try:
        while not stop["now"]:
            batch = [m for m in consumer.poll(0.5) if not m.error()]
            if not batch:
                continue
            # Logged before it is listed as held, never after: whoever sees a record held (and then freezes or
            # kills the member) finds its delivery in the log.
            for m in batch:
                note(log, "got", topic=m.topic(), p=m.partition(), o=m.offset(), n=m.delivery_count(),
                     k=m.key().decode(errors="replace") if m.key() else None, id=job_of(m.value()).get("id"))
            state["held"] = [[m.topic(), m.partition(), m.offset()] for m in batch]
            save()
            if args.ack == "early":  # the mistake poison_queue grades: acknowledged before the work is done
                state["held"] = []  # held: got and not acknowledged
                save()
                for m in batch:
                    consumer.acknowledge(m, types["accept"])
                consumer.commit_sync(10)
                for m in batch:
                    note(log, "acked", topic=m.topic(), p=m.partition(), o=m.offset(), n=m.delivery_count(),
                         ack="accept")
            for m in batch:
                job = job_of(m.value())
                time.sleep(float(job.get("ms", args.process_ms)) / 1000)
                ok = m.delivery_count() > int(job.get("fails", 0))
                ack = "accept" if ok or args.ack in ("implicit", "early") else args.ack
                if args.ack == "retry" and not ok:
                    ack = "reject" if m.delivery_count() >= args.max_attempts else "release"
                # Out of "held" before it is acknowledged, never after: "held" is what the member has not
                # acknowledged. A member frozen in between (lesson 14 freezes members at any moment) must not list
                # a record whose acceptance may already be on its way to the broker, which never hands it out again.
                state["held"] = [h for h in state["held"] if h != [m.topic(), m.partition(), m.offset()]]
                save()
                if explicit and args.ack != "early":
                    consumer.acknowledge(m, types[ack])
                note(log, "done", topic=m.topic(), p=m.partition(), o=m.offset(), n=m.delivery_count(),
                     id=job.get("id"), ok=ok, ack=ack)
            if explicit and args.ack != "early":
                consumer.commit_async()
    finally:
        consumer.close()  # commits what is acknowledged and leaves the group
        state["held"] = []
        save()
        note(log, "closed")
        log.close()
    return 0


def _file_logger(path: str) -> logging.Logger:
    logger = logging.getLogger("labkit.sharemember")
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.apps.sharemember", description="one share group member")
    for opt in ("--bootstrap", "--topic", "--group", "--name", "--log", "--status"):
        parser.add_argument(opt, required=True)
    parser.add_argument("--ack", choices=sorted(ACK_POLICIES), default="release")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--max-records", type=int, default=1)
    parser.add_argument("--process-ms", type=float, default=1.0)
    parser.add_argument("--config", default="{}")
    return run_member(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
