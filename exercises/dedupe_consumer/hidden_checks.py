"""Hidden checks of dedupe_consumer (the grader's only): payments chosen now, an at-least-once consumer killed
twice and restarted, every balance compared with the grader's own totals."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path

from labkit.grading import check, harness, sibling
from labkit.waiting import Deadline

checks = sibling(__file__)


@check("exactly_once_effects_across_crashes", points=5, hidden=True)
def exactly_once_effects_across_crashes(ns):
    """An at-least-once consumer calling apply_payment in its own process is killed twice (at a moment when that
    leaves the database half updated, if there is one) and restarted; every restart delivers some payments again
    (applied before the crash, by a process that is gone). Every balance is exactly right -- and different
    payments of the same amount all count."""
    harness.attempted(ns, "apply_payment")
    cluster = ns.cluster
    rng = random.Random()
    payments = checks.make_payments(rng.randint(420, 520), rng)
    topic, group = cluster.create_topic(harness.unique("payments"), partitions=3), harness.unique("bank")
    harness.make_records(cluster, topic, len(payments), lambda i: json.dumps(payments[i]).encode())
    work = Path(tempfile.mkdtemp(prefix="labkit-bank-"))
    try:
        db, log = work / "bank.db", work / "delivered.log"
        args = (cluster.bootstrap_servers, topic, group, str(db), checks.SCHEMA, str(log), len(payments))
        by_id = {p["id"]: p for p in payments}
        moments = []
        for crash in range(2):
            # From this many payments on, it also dies by itself at a moment between two transactions of one
            # payment, if apply_payment has one (start_bank): no luck needed to find that moment.
            steps = rng.randint(40, 150)
            begun = len(harness.lines(log))
            pid, reaped = ns.run(checks.start_bank, *args, steps), False
            try:
                goal = begun + steps
                deadline = Deadline(60)
                moment = "a random moment"
                while len(harness.lines(log)) < goal:
                    status = ns.run(harness.reap, pid)
                    reaped = status is not None
                    if status == -signal.SIGKILL:
                        moment = "a moment when one payment's first transaction was committed and its next not"
                        break
                    if status is not None:
                        error = ns.run(harness.child_error, pid)
                        raise AssertionError(f"the consumer stopped (exit code {status}) before the crash"
                                             + (f": {error}" if error else ""))
                    if deadline.expired():
                        raise AssertionError(f"only {len(harness.lines(log)) - begun} payments were applied in "
                                             f"{deadline}")
                    time.sleep(0.02)
                for _ in range(0 if reaped else 25):  # freeze it; kill it if that leaves the database half
                    # updated, else run on (a child that died at its own crash point is a zombie: signals are safe)
                    if len(harness.lines(log)) > goal + 60:
                        break  # no such moment came soon: crash here, mid-stream
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(0.05)
                    half = checks.half_applied(db, by_id)
                    if half:
                        moment = f"a moment when {half}"
                        break
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(rng.uniform(0.005, 0.05))
                moments.append(f"crash {crash + 1} at {moment}")
            finally:
                harness.kill(ns, pid)
        pid = ns.run(checks.start_bank, *args)
        harness.wait_for_exit(ns, pid, 120, "the restarted consumer")
        delivered = harness.lines(log)
        again = len(delivered) - len(set(delivered))
        got, want = checks.balances(db), checks.totals(payments)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert got == want, (f"{checks.differences(got, want)} after 2 crashes ({'; '.join(moments)}), in which "
                         f"{again} payments were delivered again: record the payment id in the database, in the same "
                         "transaction as the balance update")
