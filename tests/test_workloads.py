"""labkit.workloads: consumer processes crashed mid-batch, counted exactly; waiting for a group to settle."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from labkit.errors import LabkitError, WaitTimeout
from labkit.workloads import Group, JavaMember, Member, Outcome, record_event


def test_outcome_names_the_semantics():
    assert Outcome(10, 12, 0, 2).semantics == "at least once"
    assert Outcome(10, 8, 2, 0).semantics == "at most once"
    assert Outcome(10, 10, 0, 0).semantics.startswith("exactly once")


def test_a_members_log_is_read_as_partition_offset_value_and_a_cut_line_is_skipped(tmp_path):
    log = tmp_path / "m.log"
    log.write_text("0 1 a\n1 2 b c\n12\n3 x y\n0 5 \n4 7")  # a line cut short by a SIGKILL, a malformed one
    member = Member("m", FakeProc(), log, tmp_path / "m.status")
    assert member.records() == [(0, 1, "a"), (1, 2, "b c"), (0, 5, "")]
    assert member.processed() == ["a", "b c", ""]
    assert Member("n", FakeProc(), tmp_path / "none.log", tmp_path / "n.status").records() == []


def test_a_members_client_log_is_what_its_process_printed_and_greps_like_re(tmp_path):
    proc = FakeProc()
    proc.log_path = tmp_path / "stuck.err"
    member = Member("stuck", proc, tmp_path / "stuck.log", tmp_path / "stuck.status")
    assert member.client_log() == []  # nothing printed yet: no file
    proc.log_path.write_text("%7|1796221318.001|INIT|stuck#consumer-1| [thrd:app]: librdkafka v2.16.0\n"
                             "%4|1796221318.358|MAXPOLL|stuck#consumer-1| [thrd:main]: Application maximum poll "
                             "interval (12000ms) exceeded by 16ms: leaving group\n")
    assert len(member.client_log()) == 2
    assert member.client_log(lines=1)[0].startswith("%4|1796221318.358|MAXPOLL|")  # the last lines, as broker_log
    assert [line.split("|")[1] for line in member.client_log(grep=r"\|MAXPOLL\|")] == ["1796221318.358"]


# ---------------------------------------------------------------------------------------------- wait_settled
class FakeProc:
    """Stands in for a member's ManagedProcess: running while it has no return code."""

    def __init__(self, returncode=None):
        self.returncode = returncode

    @property
    def running(self):
        return self.returncode is None


def fake_group(tmp_path, partitions=6):
    cluster = SimpleNamespace(topic_name=lambda t: t, describe_topic=lambda t: list(range(partitions)))
    return Group(cluster, "orders", "g", workdir=tmp_path)


def add_member(group, name, owns=None, returncode=None):
    """A member whose process is ``returncode`` (None: running) and who reported owning ``owns``."""
    log, status = group.workdir / f"{name}.log", group.workdir / f"{name}.status.json"
    group.members[name] = Member(name, FakeProc(returncode), log, status)
    if owns is not None:
        report(group, name, owns)


def report(group, name, owns):
    group.members[name].status_file.write_text(json.dumps({"assignment": [["orders", p] for p in owns]}))


def test_wait_settled_returns_the_assignment_once_complete_and_quiet(tmp_path):
    group = fake_group(tmp_path)
    add_member(group, "a", [0, 1, 2])
    add_member(group, "b", [3, 4, 5])
    add_member(group, "gone", [0, 1], returncode=0)  # stopped earlier: not counted
    start = time.monotonic()
    got = group.wait_settled(2, quiet=0.5, timeout=10)
    assert got == {"a": [("orders", 0), ("orders", 1), ("orders", 2)],
                   "b": [("orders", 3), ("orders", 4), ("orders", 5)]}
    assert time.monotonic() - start >= 0.5


def test_wait_settled_restarts_the_quiet_period_when_the_assignment_changes(tmp_path):
    group = fake_group(tmp_path)
    add_member(group, "a", [0, 1, 2, 3, 4, 5])
    add_member(group, "b", [])  # joined, nothing yet: complete, but about to change
    timer = threading.Timer(0.6, lambda: (report(group, "a", [0, 1, 2]), report(group, "b", [3, 4, 5])))
    start = time.monotonic()
    timer.start()
    try:
        got = group.wait_settled(2, quiet=1.0, timeout=10)
    finally:
        timer.cancel()
    assert got["b"] == [("orders", 3), ("orders", 4), ("orders", 5)]
    assert time.monotonic() - start >= 1.6, "the quiet period counts from the last change"


def test_wait_settled_times_out_with_each_members_state(tmp_path):
    group = fake_group(tmp_path)
    add_member(group, "a", [0, 1, 2])
    add_member(group, "b", [2, 3, 4, 5])  # partition 2 twice: not a complete assignment
    add_member(group, "c")  # no rebalance callback yet
    (tmp_path / "c.err").write_text("first line\nKafkaException: broker down\n")
    with pytest.raises(WaitTimeout) as err:
        group.wait_settled(3, quiet=0.1, timeout=0.6)
    text = str(err.value)
    assert "group 'g' to settle with 3 members owning 6 partitions" in text
    assert "b (running): owns [2, 3, 4, 5]" in text and "last error line: KafkaException: broker down" in text
    assert err.value.hint, "says what to try"


def test_wait_settled_fails_at_once_when_a_member_died(tmp_path):
    group = fake_group(tmp_path, partitions=3)
    add_member(group, "a", [0, 1, 2])
    add_member(group, "b", returncode=1)
    start = time.monotonic()
    with pytest.raises(LabkitError, match=r"cannot settle with 2 members, 1 running \(b exited with code 1\)"):
        group.wait_settled(2, timeout=30)
    assert time.monotonic() - start < 5


def test_wait_settled_takes_the_partition_count_when_given(tmp_path):
    group = fake_group(tmp_path, partitions=6)
    add_member(group, "a", [0, 1])
    assert group.wait_settled(1, quiet=0, partitions=2, timeout=5) == {"a": [("orders", 0), ("orders", 1)]}


@pytest.mark.integration
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
            assert first.process.returncode == -9, "the member killed itself mid-batch"
            group.start_member("takeover", commit=style, batch=50, process_ms=0.5)
            group.wait_idle("takeover", quiet=2)  # the takeover caught up
        finally:
            group.stop()
        outcomes[style] = group.outcome(ids)
    # The crash falls inside a batch of at most 50: the part of it already processed is replayed
    # (commit after), or the part not yet processed is skipped (commit before).
    assert outcomes["sync"].lost == 0 and 0 < outcomes["sync"].duplicated < 50
    assert outcomes["before"].duplicated == 0 and 0 < outcomes["before"].lost < 50


def test_wait_owned_returns_once_the_named_members_own_every_partition(tmp_path):
    group = fake_group(tmp_path)
    add_member(group, "a", [0, 1, 2])
    add_member(group, "b", [3, 4, 5])

    def take_over():
        time.sleep(0.3)
        report(group, "a", [0, 1, 2, 3, 4, 5])

    threading.Thread(target=take_over).start()
    got = group.wait_owned(["a"], timeout=10)
    assert got == {"a": [("orders", p) for p in range(6)]}
    with pytest.raises(WaitTimeout, match="c to own 6 partitions"):
        add_member(group, "c", [])
        group.wait_owned(["c"], timeout=0.3)


def test_a_java_member_reads_its_rebalance_callbacks_from_the_tools_json_lines(tmp_path):
    """kafka-verifiable-consumer prints one JSON line per event (with the JVM's warnings in between)."""
    log = tmp_path / "a.java.jsonl"
    line = '{{"timestamp":{t},"name":"{name}","partitions":[{parts}]}}'
    part = '{{"topic":"orders","partition":{p}}}'
    log.write_text("\n".join([
        '{"timestamp":1000,"name":"startup_complete"}',
        "WARN some JVM warning",
        line.format(t=2000, name="partitions_assigned", parts=",".join(part.format(p=p) for p in (0, 1, 2))),
        '{"timestamp":2500,"name":"records_consumed","count":7,"partitions":[]}',
        line.format(t=3000, name="partitions_revoked", parts=",".join(part.format(p=p) for p in (0, 1, 2))),
        line.format(t=3500, name="partitions_assigned", parts=part.format(p=1)),
        '{"timestamp":4000,"name":"partitions_assigned","partitions":[{"topic":"orders"',  # cut off by a kill
    ]))
    member = JavaMember("a", FakeProc(), log, tmp_path / "a.status.json", tmp_path / "a.events.jsonl")
    assert [(e.t, e.kind, len(e.partitions)) for e in member.events()] == [
        (1.0, "start", 0), (2.0, "assign", 3), (3.0, "revoke", 3), (3.5, "assign", 1)]
    assert member.assignment() == [("orders", 1)] and member.reported() and member.processed() == []
    record_event(member.events_file, "killed")
    assert member.events()[-1].kind == "killed" and member.assignment() == []


@pytest.mark.integration
def test_unknown_commit_style_is_a_clear_error(cluster):
    with pytest.raises(LabkitError, match="sync"):
        Group(cluster, "any", "g").start_member("x", commit="sometimes")


@pytest.mark.integration
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
            group.wait_idle("takeover", quiet=2)
        finally:
            group.stop()
        outcomes[style] = group.outcome(ids)
    assert outcomes["auto"].lost > 0, outcomes["auto"]
    assert outcomes["sync"].lost == 0 and outcomes["sync"].duplicated > 0, outcomes["sync"]


def test_restarting_a_member_that_does_not_run_says_to_start_it(tmp_path):
    group = fake_group(tmp_path)
    with pytest.raises(LabkitError, match="'z' is not running") as err:
        group.restart_member("z")
    assert "start_member" in err.value.hint
