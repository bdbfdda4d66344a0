"""Checks for transfer_exactly_once: a transactional consume-transform-produce loop, killed mid-run."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
import uuid
from collections import Counter

from labkit.grading import check


def make_payments(cluster, topic: str, count: int) -> None:
    producer = cluster.producer(enable_idempotence=True)
    for i in range(count):
        producer.produce(topic, key=f"acct-{i % 17}", value=json.dumps({"id": f"p{i:05d}", "amount": round(i * 1.25, 2)}))
        producer.poll(0)
    producer.flush(30)


def _setup(cluster, count: int):
    tag = uuid.uuid4().hex[:6]
    source = cluster.create_topic(f"payments-{tag}", partitions=3)
    target = cluster.create_topic(f"ledger-{tag}", partitions=3)
    make_payments(cluster, source, count)
    return tag, source, target


def _committed_ids(cluster, target: str) -> Counter:
    return Counter(json.loads(r.value)["id"] for r in cluster.read_all(target, isolation_level="read_committed"))


def _run(ns, cluster, source, target, tag):
    ctx = multiprocessing.get_context("fork")
    return ctx.Process(target=ns.transfer, args=(cluster.bootstrap_servers, source, target, f"transfer-{tag}",
                                                 f"transfer-{tag}"), daemon=True)


@check("transfers_every_payment_once", points=2,
       hint="One transaction per batch: produce the results, send the consumer's offsets to the transaction, commit.")
def transfers_every_payment_once(ns):
    """Run once to the end: every payment appears exactly once in the ledger, transformed to cents."""
    cluster = ns.cluster
    tag, source, target = _setup(cluster, 120)
    ns.transfer(cluster.bootstrap_servers, source, target, f"transfer-{tag}", f"transfer-{tag}")
    ids = _committed_ids(cluster, target)
    assert len(ids) == 120, f"{len(ids)} of 120 payments reached the ledger"
    assert max(ids.values()) == 1, f"{sum(n - 1 for n in ids.values())} payments were written twice"
    record = json.loads(cluster.read_all(target, isolation_level="read_committed")[0].value)
    assert set(record) == {"id", "amount_cents"}, f"ledger records look like {record}"


@check("ledger_is_transactional", points=1, hint="Create the producer with a transactional.id and call init_transactions().")
def ledger_is_transactional(ns):
    """The ledger records were written in transactions (commit markers on disk)."""
    from labkit.segments import dump_partition

    cluster = ns.cluster
    tag, source, target = _setup(cluster, 30)
    ns.transfer(cluster.bootstrap_servers, source, target, f"transfer-{tag}", f"transfer-{tag}")
    markers = [r.marker for p in range(3) for b in dump_partition(cluster, target, p) if b.control for r in b.records]
    assert markers and set(markers) == {"COMMIT"}, f"transaction markers found: {markers}"


@check("exactly_once_across_a_crash", points=5, hidden=True)
def exactly_once_across_a_crash(ns):
    """Killed with SIGKILL mid-run and restarted, the ledger (read_committed) still has every payment exactly once."""
    cluster = ns.cluster
    probe, probe_source, probe_target = _setup(cluster, 0)
    ns.transfer(cluster.bootstrap_servers, probe_source, probe_target, f"probe-{probe}", f"probe-{probe}")  # attempted?
    tag, source, target = _setup(cluster, 600)
    first = _run(ns, cluster, source, target, tag)
    first.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = sum(1 for _ in cluster.read_all(target, isolation_level="read_uncommitted"))
        if done >= 150 or not first.is_alive():
            break
        time.sleep(0.1)
    assert first.is_alive(), "the transfer ended (or crashed) before it could be interrupted"
    os.kill(first.pid, signal.SIGKILL)
    first.join(10)
    second = _run(ns, cluster, source, target, tag)
    second.start()
    second.join(120)
    if second.is_alive():
        os.kill(second.pid, signal.SIGKILL)
        raise AssertionError("the restarted transfer did not finish within 120 s")
    ids = _committed_ids(cluster, target)
    missing = 600 - len(ids)
    twice = sum(n - 1 for n in ids.values())
    assert missing == 0 and twice == 0, f"after the crash: {missing} payments missing, {twice} written twice"
