"""Checks for dedupe_consumer: payments applied through the learner's idempotent ``apply_payment``.

``apply_payment`` runs where it is defined, in the learner's kernel, on an SQLite database the
grader chose (tasks :func:`apply_payments` and :func:`start_bank`); the grader reads the balances
back from the database file itself. The crash test (``hidden_checks.py``) runs an at-least-once
consumer that calls ``apply_payment`` in a child of the kernel, kills it twice and restarts it.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Optional

from labkit.grading import check, harness, Rules

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: The lab's consumer members (labkit.workloads) are consumer loops with their own bookkeeping; not needed here.
RULES = Rules(forbid=["labkit.workloads", "labkit.apps"])

SCHEMA = ("CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL);"
          "CREATE TABLE IF NOT EXISTS applied (id TEXT PRIMARY KEY);")


# ---------------------------------------------------------------- tasks (run in the learner's kernel)


def apply_payments(user, db_path, schema, payments):
    """A task: open the database at ``db_path``, call ``apply_payment`` on each payment in turn, close it."""
    import sqlite3

    db = sqlite3.connect(db_path)
    try:
        db.executescript(schema)
        for payment in payments:
            user["apply_payment"](db, dict(payment))
    finally:
        db.close()


def start_bank(user, bootstrap, topic, group, db_path, schema, log, total, crash_after=None):
    """A task: the grader's at-least-once consumer in a child forked from the kernel; returns its pid.

    It applies every payment with the learner's ``apply_payment``, logs it, and after each batch commits
    the offsets of the batch's *first* records: every restart delivers the last batch again, so every
    crash makes replays (a real consumer replays after a crash too, only not always).

    ``crash_after``: once it applied that many payments, it dies (SIGKILL) the first time an
    ``apply_payment`` call goes on after committing a transaction -- the one moment a random crash may
    miss, when one payment's effects are committed in part. Code that commits each payment in one
    transaction never meets it.
    """

    from labkit.grading.harness import forked

    apply_payment = user["apply_payment"]

    def body():
        import json
        import os
        import signal
        import sqlite3
        import time

        from confluent_kafka import Consumer, TopicPartition

        db = sqlite3.connect(db_path)
        db.executescript(schema)
        call = {"n": 0, "in": False, "commits": 0}

        def between_transactions(sql: str) -> None:  # SQLite's trace: every statement, COMMIT included
            if call["in"] and call["commits"] and crash_after is not None and call["n"] > crash_after:
                os.kill(os.getpid(), signal.SIGKILL)  # a statement after a commit, in the same payment
            if sql.lstrip().upper().startswith(("COMMIT", "END")):
                call["commits"] += 1

        db.set_trace_callback(between_transactions)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "enable.auto.commit": False})
        consumer.subscribe([topic])
        out = open(log, "a", buffering=1)
        with open(log) as earlier:
            seen = set(earlier.read().splitlines())  # delivered by this run or one before it
        from labkit.waiting import Deadline

        idle = Deadline(30)
        try:
            # Done when every payment was delivered once and nothing came for 3 s (or nothing for 30 s), a quiet
            # machine's seconds: a quiet spell alone is not the end on a loaded machine (a rebalance, a slow first
            # fetch, a starved process).
            while not (idle.elapsed() >= 3 and len(seen) >= total or idle.expired()):
                batch = [m for m in consumer.consume(num_messages=40, timeout=0.5) if not m.error()]
                if not consumer.assignment():
                    idle = Deadline(30)  # still joining the group: not idle yet
                if not batch:
                    continue
                idle = Deadline(30)
                first = {}
                for msg in batch:
                    first.setdefault(msg.partition(), msg.offset())
                    call.update(n=call["n"] + 1, commits=0, **{"in": True})
                    apply_payment(db, json.loads(msg.value()))
                    call["in"] = False
                    out.write(msg.value().decode() + "\n")
                    seen.add(msg.value().decode())
                    time.sleep(0.002)  # paced, so that the grader's crashes land mid-stream on a fast machine too
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in first.items()],
                                asynchronous=False)
        finally:
            consumer.close()
            db.close()
            out.close()

    return forked(body)


# ---------------------------------------------------------------- the grader's side


def make_payments(count: int, rng: random.Random) -> list[dict]:
    """``count`` payments made now: random ids, accounts and amounts; one in eight repeats the account and
    amount of an earlier payment under a new id (a different payment: it counts)."""
    tag = uuid.uuid4().hex[:6]
    accounts = [f"acct-{tag}-{i}" for i in range(rng.randint(5, 9))]
    out: list[dict] = []
    for i in range(count):
        if out and rng.random() < 0.125:
            twin = rng.choice(out)
            out.append({"id": f"pay-{tag}-{i:05d}", "account": twin["account"], "cents": twin["cents"]})
        else:
            out.append({"id": f"pay-{tag}-{i:05d}", "account": rng.choice(accounts), "cents": rng.randint(1, 99_999)})
    return out


def totals(payments: list[dict]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for p in payments:
        out[p["account"]] += p["cents"]
    return dict(out)


def balances(db_path: Path) -> dict[str, int]:
    """The balances table as the grader reads it from the database file."""
    db = sqlite3.connect(db_path)
    try:
        return dict(db.execute("SELECT account, cents FROM balances").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        db.close()


def half_applied(db_path: Path, payments: dict[str, dict]) -> Optional[str]:
    """What the database would hold if the process writing it died right now, when that is half done: ids
    recorded as applied whose amounts are not in the balances, or amounts in the balances whose ids are not
    recorded. None when it is consistent, or cannot be told (ids in ``applied`` that are not payment ids).

    Call it with the writer frozen (SIGSTOP): the database file and its journal are copied and the copy is
    opened, so SQLite recovers it exactly as the restarted consumer would (rolling back a transaction that
    was not committed).
    """
    scratch = Path(tempfile.mkdtemp(prefix="labkit-bank-copy-"))
    try:
        for suffix in ("", "-journal", "-wal"):
            original = Path(f"{db_path}{suffix}")
            if original.exists():
                shutil.copyfile(original, scratch / f"bank.db{suffix}")
        if not (scratch / "bank.db").exists():
            return None
        db = sqlite3.connect(scratch / "bank.db", timeout=1)
        try:
            ids = [row[0] for row in db.execute("SELECT id FROM applied")]
            total = db.execute("SELECT COALESCE(SUM(cents), 0) FROM balances").fetchone()[0]
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not all(i in payments for i in ids):
        return None
    recorded = sum(payments[i]["cents"] for i in ids)
    if recorded == total:
        return None
    return f"the balances held {total} cents while the payments recorded as applied came to {recorded}"


def differences(got: dict[str, int], want: dict[str, int]) -> str:
    wrong = sorted(a for a in set(got) | set(want) if got.get(a) != want.get(a))
    shown = ", ".join(f"{a}: {got.get(a, 0)} instead of {want.get(a, 0)}" for a in wrong[:2])
    return f"{len(wrong)} of {len(want)} balances are wrong ({shown})"


# ---------------------------------------------------------------- visible checks


@check("applies_a_payment", points=1,
       hint="Add the payment's cents to its account's balance (insert the row if new), inside `with db:`.")
def applies_a_payment(ns):
    """apply_payment adds each payment's amount to its account's balance, durably (the grader reads the
    database file after the connection is closed); two different payments of the same amount both count."""
    harness.attempted(ns, "apply_payment")
    rng = random.Random()
    tag, cents = uuid.uuid4().hex[:6], rng.randint(100, 9_999)
    payments = [{"id": f"{tag}-a", "account": f"acct-{tag}-1", "cents": cents},
                {"id": f"{tag}-b", "account": f"acct-{tag}-1", "cents": cents},
                {"id": f"{tag}-c", "account": f"acct-{tag}-2", "cents": cents + 7}]
    with tempfile.TemporaryDirectory(prefix="labkit-bank-") as work:
        db = Path(work) / "bank.db"
        ns.run(apply_payments, str(db), SCHEMA, payments)
        got, want = balances(db), totals(payments)
    assert got == want, f"after three payments the balances are {got}, expected {want}"


@check("replay_changes_nothing", points=2,
       hint="Record the payment id in `applied` in the same transaction as the balance update; skip known ids.")
def replay_changes_nothing(ns):
    """Applying the same payment again (on a new connection, as after a restart) changes the balance once."""
    harness.attempted(ns, "apply_payment")
    tag = uuid.uuid4().hex[:6]
    payment = {"id": f"{tag}-same", "account": f"acct-{tag}", "cents": random.randint(100, 9_999)}
    with tempfile.TemporaryDirectory(prefix="labkit-bank-") as work:
        db = Path(work) / "bank.db"
        ns.run(apply_payments, str(db), SCHEMA, [payment, payment])
        ns.run(apply_payments, str(db), SCHEMA, [payment])
        got = balances(db)
    assert got == {payment["account"]: payment["cents"]}, \
        f"after applying one payment of {payment['cents']} three times, the balances are {got}"
