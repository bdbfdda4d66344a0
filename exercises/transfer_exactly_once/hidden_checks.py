"""Hidden checks of transfer_exactly_once (the grader's only): payments chosen now, the transfer killed while
a batch is in flight, restarted, and the ledger counted by the grader."""

from __future__ import annotations

import os
import random
import signal
import time

from labkit.grading import check, harness, sibling
from labkit.waiting import Deadline

checks = sibling(__file__)

#: Seconds the grader makes each consumer commit() wait in the first run (a slow network).
SLOW_COMMITS = 1.0


@check("exactly_once_across_a_crash", points=5, hidden=True)
def exactly_once_across_a_crash(ns):
    """Killed with SIGKILL mid-run -- at a moment when the ledger holds records whose source offsets the group
    has not committed (a batch in flight; offsets committed outside a transaction are slowed down, like on a
    slow network) -- and restarted, the ledger (read_committed) still has every payment exactly once."""
    harness.attempted(ns, "transfer")
    cluster = ns.cluster
    rng = random.Random()
    source, target, group, txid, payments = checks.setup(cluster, rng.randint(560, 640), rng)
    args = (cluster.bootstrap_servers, source, target, group, txid)
    pid = ns.run(checks.start_transfer, *args, SLOW_COMMITS)
    moment = "a quiet moment (no batch in flight)"
    try:
        start_after = rng.randint(80, 200)
        deadline = Deadline(90)
        while True:  # let it transfer some payments first
            status = ns.run(harness.reap, pid)
            if status is not None:
                raise AssertionError(f"the transfer ended (exit code {status}) before it could be interrupted"
                                     + (f": {ns.run(harness.child_error, pid)}" if status else ""))
            written = sum(p.high_watermark or 0 for p in cluster.describe_topic(target).partitions)
            if written >= start_after:
                break
            assert not deadline.expired(), f"the transfer wrote only {written} ledger records in {deadline}"
            time.sleep(0.05)
        for sample in range(40):  # freeze it; kill it once a crash would hurt a wrong loop, else run on
            os.kill(pid, signal.SIGSTOP)
            visible, written, consumed = _settled(cluster, source, target, group)
            if visible != consumed:
                moment = (f"a moment when read_committed readers saw {visible} ledger records and the group had "
                          f"committed source offsets for {consumed}")
                break
            if written != consumed and sample >= 12:
                moment = f"a moment when a transaction of {written - consumed} records was open"
                break
            os.kill(pid, signal.SIGCONT)
            time.sleep(rng.uniform(0.02, 0.15))
    finally:
        harness.kill(ns, pid)
    pid = ns.run(checks.start_transfer, *args)
    harness.wait_for_exit(ns, pid, checks.RUN_TIMEOUT, "the restarted transfer", explain=checks.stuck_where)
    checks.check_ledger(cluster, target, payments, f"after a crash at {moment}")


def _settled(cluster, source: str, target: str, group: str, looks: int = 20) -> tuple[int, int, int]:
    """What the brokers hold of a frozen transfer: (ledger records read_committed readers see, ledger records
    written, source offsets the group committed), once two looks in a row at the offsets agree (the ledger's
    ends, its last stable offsets, the group's commits). Requests the transfer sent before it froze still reach
    the brokers (a write, an offset commit, the end of its transaction): a moment judged while one lands would be
    one that never was. The ledger is read once, when nothing moves any more."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from labkit.admin import list_offsets

    admin = cluster.admin()
    ledger = [TopicPartition(target, p.partition) for p in cluster.describe_topic(target).partitions]

    def look() -> tuple:
        return (list_offsets(admin, ledger, OffsetSpec.latest(), timeout=10),
                list_offsets(admin, ledger, OffsetSpec.latest(), timeout=10, committed=True),
                checks.committed_group_offsets(cluster, group, source))

    seen = look()
    for _ in range(looks):
        now = look()
        if now == seen:
            break
        seen = now
    return (len(cluster.read_all(target, isolation_level="read_committed")),
            len(cluster.read_all(target, isolation_level="read_uncommitted")), seen[2])
