"""Checks for transfer_exactly_once: a transactional consume-transform-produce loop, killed mid-batch.

``transfer`` runs in a child forked from the learner's kernel (task :func:`start_transfer`); the
grader reads the ledger itself, as a ``read_committed`` reader and record by record, and the
offsets the group committed. Payments (ids, accounts, amounts) are chosen at every grading. The
crash test is in ``hidden_checks.py``.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from pathlib import Path

from labkit.grading import check, harness, Rules

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: No part of labkit writes transactions for the learner; its consumer members (labkit.workloads) and produce
#: helpers (labkit.producing) are other lessons' tools, not this one's.
RULES = Rules(forbid=["labkit.workloads", "labkit.apps", "labkit.producing"])
#: How long one run of transfer over a few hundred payments may take.
RUN_TIMEOUT = 120.0


# ---------------------------------------------------------------- tasks (run in the learner's kernel)


def start_transfer(user, bootstrap, source, target, group, transactional_id, slow_commits=0.0):
    """A task: ``transfer`` in a child forked from the kernel; returns the child's pid.

    With ``slow_commits`` (seconds), the child's consumers take that long before each ``commit()`` -- a slow
    network, as the grader simulates it: offsets committed outside the transaction then trail the ledger
    long enough for a crash to land between the two. (Offsets sent *in* the transaction are not slowed.)
    """

    from labkit.grading.harness import forked

    transfer = user["transfer"]

    def body():
        if slow_commits:
            import time

            import confluent_kafka

            class SlowCommits(confluent_kafka.Consumer):
                def commit(self, *args, **kwargs):
                    time.sleep(slow_commits)
                    return super().commit(*args, **kwargs)

            confluent_kafka.Consumer = SlowCommits   # in this child only: the kernel keeps its own
            if user.get("Consumer") is not None:
                user["Consumer"] = SlowCommits
        transfer(bootstrap, source, target, group, transactional_id)

    return forked(body)


# ---------------------------------------------------------------- the grader's side


def stuck_where(pid: int) -> str:
    """Where a child that does not return is waiting: its threads and their kernel wait channels (from /proc)."""
    try:
        waits = Counter((t / "wchan").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return "the process is gone"
    return f"{sum(waits.values())} threads, waiting in " + ", ".join(
        f"{w if w not in ('', '0') else 'running'} x{n}" for w, n in waits.most_common())


def make_payments(cluster, topic: str, count: int, rng: random.Random) -> dict[str, dict]:
    """``count`` payments chosen now, produced to ``topic``; {id: {"key", "amount", "cents"}}."""
    tag = uuid.uuid4().hex[:6]
    producer = cluster.producer(enable_idempotence=True)
    made = {}
    for i in range(count):
        cents = rng.randint(1, 2_000_000)
        key = f"acct-{tag}-{rng.randint(0, 16)}"
        pid = f"p-{tag}-{i:05d}"
        made[pid] = {"key": key, "amount": cents / 100, "cents": cents}
        producer.produce(topic, key=key, value=json.dumps({"id": pid, "amount": cents / 100}))
        producer.poll(0)
    assert producer.flush(30) == 0, "the grader's own payments were not all acknowledged"
    return made


def setup(cluster, count: int, rng: random.Random):
    """Fresh source and ledger topics, ``count`` payments; (source, ledger, group, transactional id, payments)."""
    tag = uuid.uuid4().hex[:6]
    source = cluster.create_topic(f"payments-{tag}", partitions=3)
    target = cluster.create_topic(f"ledger-{tag}", partitions=3)
    return source, target, f"transfer-{tag}", f"transfer-{tag}-tx", make_payments(cluster, source, count, rng)


def committed_group_offsets(cluster, group: str, topic: str, partitions: int = 3) -> int:
    """The sum of the offsets ``group`` committed on ``topic`` (0 where nothing is committed), from the broker."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = cluster.admin().list_consumer_group_offsets(request, request_timeout=10)[group].result(timeout=15)
    return sum(max(tp.offset, 0) for tp in result.topic_partitions)


def check_ledger(cluster, target: str, payments: dict[str, dict], when: str) -> None:
    """The ledger as a read_committed reader sees it: every payment exactly once, in cents, with its key."""
    rows = cluster.read_all(target, isolation_level="read_committed")
    ids: Counter = Counter()
    for row in rows:
        try:
            record = json.loads(row.value)
        except (TypeError, ValueError):
            raise AssertionError(f"a ledger record is not JSON: {row.value_text!r:.80}") from None
        assert isinstance(record, dict) and set(record) == {"id", "amount_cents"}, \
            f'ledger records must be {{"id": ..., "amount_cents": ...}}; one is {row.value_text:.120}'
        payment = payments.get(record["id"])
        assert payment is not None, f"the ledger has a payment the source never had: {row.value_text:.120}"
        assert record["amount_cents"] == payment["cents"] and isinstance(record["amount_cents"], int), \
            (f"payment {record['id']} of {payment['amount']} is {record['amount_cents']!r} in the ledger, not "
             f"{payment['cents']}: round(amount * 100), an int")
        assert row.key_text == payment["key"], \
            f"payment {record['id']} has the key {row.key_text!r} in the ledger; keep the source key {payment['key']!r}"
        ids[record["id"]] += 1
    missing = len(payments) - len(ids)
    twice = sum(n - 1 for n in ids.values())
    assert missing == 0 and twice == 0, \
        f"{when}: {missing} of {len(payments)} payments missing from the ledger, {twice} written twice"


def control_records(cluster, target: str) -> tuple[int, int]:
    """(data records, offsets taken by other records) in ``target``: transaction markers take offsets too."""
    data = cluster.read_all(target, isolation_level="read_uncommitted")
    partitions = cluster.describe_topic(target).partitions
    offsets = sum((p.high_watermark or 0) - (p.log_start_offset or 0) for p in partitions)
    return len(data), offsets - len(data)


# ---------------------------------------------------------------- visible checks


@check("transfers_every_payment_once", points=2,
       hint="One transaction per batch: produce the results, send the consumer's offsets to the transaction, commit.")
def transfers_every_payment_once(ns):
    """Run once to the end: every payment appears exactly once in the ledger (read_committed), with its key,
    as {"id", "amount_cents"} with the amount in cents."""
    harness.attempted(ns, "transfer")
    cluster = ns.cluster
    rng = random.Random()
    source, target, group, txid, payments = setup(cluster, rng.randint(100, 160), rng)
    pid = ns.run(start_transfer, cluster.bootstrap_servers, source, target, group, txid)
    harness.wait_for_exit(ns, pid, RUN_TIMEOUT, "transfer (it must return once no record has arrived for 3 s)",
                          explain=stuck_where)
    check_ledger(cluster, target, payments, "after one run")


@check("ledger_is_transactional", points=1,
       hint="Create the producer with a transactional.id and call init_transactions(); commit every transaction.")
def ledger_is_transactional(ns):
    """The ledger was written in committed transactions: the topic holds transaction markers beside the
    records, and a read_committed reader sees every record that was written."""
    harness.attempted(ns, "transfer")
    cluster = ns.cluster
    rng = random.Random()
    source, target, group, txid, payments = setup(cluster, rng.randint(30, 60), rng)
    pid = ns.run(start_transfer, cluster.bootstrap_servers, source, target, group, txid)
    harness.wait_for_exit(ns, pid, RUN_TIMEOUT, "transfer (it must return once no record has arrived for 3 s)",
                          explain=stuck_where)
    written, markers = control_records(cluster, target)
    assert written, "transfer wrote nothing to the ledger"
    assert markers, "the ledger holds no transaction markers: its records were not written in transactions"
    visible = len(cluster.read_all(target, isolation_level="read_committed"))
    assert visible == written, (f"{written - visible} of {written} ledger records are invisible to read_committed "
                                "readers: commit every transaction you begin")
