"""labkit.workloads: consumer processes crashed mid-batch, counted exactly."""

from __future__ import annotations

import time

import pytest

from labkit.errors import LabkitError
from labkit.workloads import Group, Outcome

pytestmark = pytest.mark.integration


def test_outcome_names_the_semantics():
    assert Outcome(10, 12, 0, 2).semantics == "at least once"
    assert Outcome(10, 8, 2, 0).semantics == "at most once"
    assert Outcome(10, 10, 0, 0).semantics.startswith("exactly once")


def test_commit_after_processing_duplicates_and_before_loses(cluster, unique):
    topic = cluster.create_topic(unique("work"), partitions=3)
    ids = [f"r{i:04d}" for i in range(300)]
    producer = cluster.producer()
    for v in ids:
        producer.produce(topic, key=v, value=v)
    producer.flush(10)
    outcomes = {}
    for style in ("sync", "before"):
        group = Group(cluster, topic, unique(style))
        try:
            first = group.start_member("first", commit=style, crash_after=135, batch=50, process_ms=5)
            group.wait_dead("first", timeout=60)
            assert first.proc.returncode == -9, "the member killed itself mid-batch"
            group.start_member("takeover", commit=style, batch=50, process_ms=0.5)
            group.wait_processed(len(ids) - 50 if style == "before" else len(ids), timeout=60)
            time.sleep(2)  # the takeover's last batch
        finally:
            group.stop()
        outcomes[style] = group.outcome(ids)
    # The crash falls inside a batch of at most 50: the part of it already processed is replayed
    # (commit after), or the part not yet processed is skipped (commit before).
    assert outcomes["sync"].lost == 0 and 0 < outcomes["sync"].duplicated < 50
    assert outcomes["before"].duplicated == 0 and 0 < outcomes["before"].lost < 50


def test_unknown_commit_style_is_a_clear_error(cluster):
    with pytest.raises(LabkitError, match="sync"):
        Group(cluster, "any", "g").start_member("x", commit="sometimes")


def test_auto_commit_crash_loses_records_sync_after_processing_does_not(cluster, unique):
    """Auto-commit commits what consume() returned, processed or not: a crash mid-batch after a commit loses
    the rest of the batch. Committing synchronously after processing never loses anything."""
    topic = cluster.create_topic(unique("auto"), partitions=3)
    ids = [f"a{i:04d}" for i in range(600)]
    producer = cluster.producer()
    for v in ids:
        producer.produce(topic, key=v, value=v)
    producer.flush(10)
    outcomes = {}
    for style in ("auto", "sync"):
        group = Group(cluster, topic, unique(style))
        try:
            # A 200-record batch takes 4 s to process; auto.commit.interval.ms is 1 s, so by record 100
            # (2 s in) the whole batch's offsets have been committed.
            group.start_member("first", commit=style, crash_after=100, batch=200, process_ms=20)
            group.wait_dead("first", timeout=60)
            group.start_member("takeover", commit=style, batch=50, process_ms=0.5)
            time.sleep(6)
            group.wait_processed(len(ids), timeout=20)
        finally:
            group.stop()
        outcomes[style] = group.outcome(ids)
    assert outcomes["auto"].lost > 0, outcomes["auto"]
    assert outcomes["sync"].lost == 0 and outcomes["sync"].duplicated > 0, outcomes["sync"]
