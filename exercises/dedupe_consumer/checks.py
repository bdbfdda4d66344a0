"""Checks for dedupe_consumer: payments applied through the learner's idempotent apply_payment, with crashes."""

from __future__ import annotations

import importlib.util
import inspect
import json
import random
import sqlite3
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from confluent_kafka import Consumer

from labkit.grading import check

_spec = importlib.util.spec_from_file_location("exercise_crashing", Path(__file__).parent.parent / "_crashing.py")
crashing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crashing)

SCHEMA = ("CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL);"
          "CREATE TABLE IF NOT EXISTS applied (id TEXT PRIMARY KEY);")


def payment(i: int) -> dict:
    return {"id": f"pay-{i:05d}", "account": f"acct-{i % 7}", "cents": 100 + i}


def expected_balances(count: int) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for i in range(count):
        p = payment(i)
        totals[p["account"]] += p["cents"]
    return dict(totals)


def open_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    return db


def _attempted(fn) -> None:
    if "raise NotImplementedError" in inspect.getsource(fn):
        raise NotImplementedError("not done yet")


def _at_least_once_loop(ns, bootstrap, topic, group, db_path: Path, applied_log: Path) -> None:
    """The grader's consumer: commits after processing (at least once), so replays happen after crashes."""
    db = open_db(db_path)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "enable.auto.commit": False})
    consumer.subscribe([topic])
    log = applied_log.open("a", buffering=1)
    idle_since = time.monotonic()
    try:
        while time.monotonic() - idle_since < 3:
            batch = [m for m in consumer.consume(num_messages=40, timeout=0.5) if not m.error()]
            if not consumer.assignment():
                idle_since = time.monotonic()  # still joining the group: not idle yet
            if not batch:
                continue
            idle_since = time.monotonic()
            for msg in batch:
                ns.apply_payment(db, json.loads(msg.value()))
                log.write(msg.value().decode() + "\n")
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
        db.close()


def _balances(db_path: Path) -> dict[str, int]:
    db = sqlite3.connect(db_path)
    try:
        return dict(db.execute("SELECT account, cents FROM balances").fetchall())
    finally:
        db.close()


@check("applies_a_payment", points=1, hint="Add the payment's cents to its account's balance (insert the row if new).")
def applies_a_payment(ns):
    """apply_payment adds the amount to the account's balance."""
    db = open_db(Path(tempfile.mkdtemp()) / "bank.db")
    ns.apply_payment(db, {"id": "a", "account": "acct-1", "cents": 250})
    ns.apply_payment(db, {"id": "b", "account": "acct-1", "cents": 50})
    got = dict(db.execute("SELECT account, cents FROM balances").fetchall())
    assert got == {"acct-1": 300}, f"balances are {got}"


@check("replay_changes_nothing", points=2,
       hint="Record the payment id in `applied` in the same transaction as the balance update; skip known ids.")
def replay_changes_nothing(ns):
    """Applying the same payment twice changes the balance once."""
    db = open_db(Path(tempfile.mkdtemp()) / "bank.db")
    for _ in range(3):
        ns.apply_payment(db, {"id": "same", "account": "acct-2", "cents": 70})
    got = dict(db.execute("SELECT account, cents FROM balances").fetchall())
    assert got == {"acct-2": 70}, f"after applying one payment three times, balances are {got}"


@check("exactly_once_effects_across_crashes", points=5, hidden=True)
def exactly_once_effects_across_crashes(ns):
    """An at-least-once consumer is killed twice at random points and restarted: every balance is exactly right,
    though some payments were delivered more than once."""
    _attempted(ns.apply_payment)
    cluster = ns.cluster
    topic, group = cluster.create_topic(crashing.unique("payments"), partitions=3), crashing.unique("bank")
    crashing.make_records(cluster, topic, 500, lambda i: json.dumps(payment(i)).encode())
    work = Path(tempfile.mkdtemp())
    db_path, log = work / "bank.db", work / "delivered.log"
    crashing.crash_and_restart(lambda: _at_least_once_loop(ns, cluster.bootstrap_servers, topic, group, db_path, log),
                               progress=lambda: len(crashing.lines(log)), total=500, rng=random.Random())
    assert _balances(db_path) == expected_balances(500), "some balances are wrong after the crashes"
