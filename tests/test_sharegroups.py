"""labkit.sharegroups: share-group members as child processes, the group as the broker reports it, record fates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from labkit.apps.sharemember import job_of
from labkit.errors import LabkitError
from labkit.sharegroups import ShareGroup, ShareMember, _setting, _table, produce_jobs, records_timeline
from labkit.waiting import Wait

# What kafka-share-groups 4.3.1 printed for a group of three members on one partition (--verbose).
STATE = """
GROUP           COORDINATOR (ID)          STATE           GROUP-EPOCH  ASSIGNMENT-EPOCH  #MEMBERS
workers         127.0.0.1:35245  (1)      Stable          4            4                 3
"""
MEMBERS = """
GROUP           CONSUMER-ID            HOST            CLIENT-ID       #PARTITIONS  MEMBER-EPOCH  ASSIGNMENT
workers         gfANHIRVQq2usZGmXLpj1A /127.0.0.1      bob             2            4             jobs:0,1
workers         xHxFHooYRDqiDqJWeQu5xQ /127.0.0.1      ada             1            4             jobs:1;more:0
"""
OFFSETS = """
GROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET  LAG
workers         jobs            0          0             20            3
workers         jobs            1          0             -             -
"""


# ---------------------------------------------------------------------------------------------- no broker
def test_the_tools_tables_are_read_by_their_headers():
    state = _table(STATE)[0]
    assert state["COORDINATOR(ID)"] == "127.0.0.1:35245(1)" and state["STATE"] == "Stable"
    assert state["GROUP-EPOCH"] == "4" and state["#MEMBERS"] == "3"
    ada = next(r for r in _table(MEMBERS) if r["CLIENT-ID"] == "ada")
    assert ada["ASSIGNMENT"] == "jobs:1;more:0" and ada["MEMBER-EPOCH"] == "4"
    assert [(r["PARTITION"], r["START-OFFSET"], r["LAG"]) for r in _table(OFFSETS)] == [("0", "20", "3"), ("1", "-", "-")]
    assert _table("Share group 'x' has no active members.") == []


def test_read_share_group_turns_the_tables_into_a_view():
    from labkit.sharegroups import read_share_group

    answers = {"--state": STATE, "--members": MEMBERS, "--offsets": OFFSETS}
    cluster = SimpleNamespace(tool=lambda *args, check: SimpleNamespace(stdout=answers[args[4]], stderr=""))
    view = read_share_group(cluster, "workers")
    assert (view.state, view.coordinator, view.group_epoch) == ("stable", 1, 4)
    assert [(m.client_id, m.partitions) for m in view.members] == [
        ("ada", (("jobs", 1), ("more", 0))), ("bob", (("jobs", 0), ("jobs", 1)))]
    assert view.offsets == {("jobs", 0): (20, 3), ("jobs", 1): (None, None)} and view.total_lag == 3
    assert list(view.to_frame()["members"]) == ["bob", "ada, bob"]


def test_a_missing_group_is_a_clear_error():
    from labkit.sharegroups import read_share_group

    missing = SimpleNamespace(stdout="", stderr="...GroupIdNotFoundException: Group nope not found.")
    with pytest.raises(LabkitError, match="does not exist"):
        read_share_group(SimpleNamespace(tool=lambda *a, check: missing), "nope")


def test_no_fates_before_any_share_group_kept_state():
    from labkit.errors import ClusterStateError
    from labkit.sharegroups import record_fates

    def missing(name):
        raise ClusterStateError(f"Topic {name!r} does not exist.", "")

    admin = SimpleNamespace(list_topics=lambda timeout: SimpleNamespace(topics={}),
                            describe_topics=lambda topics: {})
    cluster = SimpleNamespace(admin=lambda: admin, describe_topic=missing,
                              tool=lambda *a: pytest.fail("no segment to dump"))
    assert record_fates(cluster, "workers").empty


def test_group_settings_by_keyword_and_unknown_ones_refused():
    assert _setting("record_lock_duration_ms") == "share.record.lock.duration.ms"
    assert _setting("share.delivery.count.limit") == "share.delivery.count.limit"
    with pytest.raises(LabkitError, match="Unknown share group setting"):
        _setting("lock_ms")


def test_a_job_is_json_or_its_text():
    assert job_of(b'{"id": "j1", "ms": 5, "fails": 2}') == {"id": "j1", "ms": 5, "fails": 2}
    assert job_of(b"plain job") == {"id": "plain job"} and job_of(b"[1, 2]") == {"id": "[1, 2]"}


def test_deliveries_pair_each_got_with_its_acknowledgement(tmp_path):
    log = tmp_path / "ada.jsonl"
    lines = [{"t": 1.0, "e": "got", "topic": "jobs", "p": 0, "o": 5, "n": 1, "id": "j5", "k": None},
             {"t": 1.5, "e": "done", "topic": "jobs", "p": 0, "o": 5, "n": 1, "id": "j5", "ok": False, "ack": "release"},
             {"t": 2.0, "e": "got", "topic": "jobs", "p": 0, "o": 5, "n": 2, "id": "j5", "k": None},
             {"t": 2.1, "e": "acked", "topic": "jobs", "p": 0, "o": 5, "n": 2, "ack": "accept"},
             {"t": 2.2, "e": "killed"}]
    log.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"t": 3.0, "e": "go')  # SIGKILLed mid-line
    member = ShareMember("ada", SimpleNamespace(running=False), log, tmp_path / "ada.status.json")
    first, second = member.deliveries()
    assert (first.count, first.done, first.ok, first.ack) == (1, 1.5, False, "release")
    assert (second.count, second.done, second.ack) == (2, None, "accept"), "accepted on receipt, never finished"
    fig = records_timeline([first, second])
    assert [t.name for t in fig.data] == ["ada", "release"]
    with pytest.raises(LabkitError, match="No deliveries"):
        records_timeline([])


# ---------------------------------------------------------------------------------------------- a real cluster
def run_jobs(cluster, unique, members=3, **settings):
    topic = cluster.create_topic(unique("jobs"), partitions=1)
    group = ShareGroup(cluster, topic, unique("workers"), **settings)
    return topic, group


@pytest.mark.integration
def test_members_share_one_partition_retry_and_archive_poison(cluster, unique):
    topic, group = run_jobs(cluster, unique, delivery_count_limit=3)
    try:
        for name in ("ada", "bob", "cyd"):
            group.start_member(name, ack="release", max_records=1)
        assert sorted(group.wait_joined(3)) == ["ada", "bob", "cyd"]
        jobs = [{"id": f"j{i:02d}", "ms": 30, "fails": 1 if i % 6 == 0 else 0} for i in range(36)]
        ids = produce_jobs(cluster, topic, jobs + [{"id": "poison", "ms": 5, "fails": 99}])
        group.wait_done(ids[:-1])
        Wait("the poison job's third delivery", timeout=30).until(
            lambda: [d for d in group.deliveries() if d.id == "poison" and d.count == 3 and d.done])
        view = group.describe()
        fates = group.fates()
    finally:
        group.stop()
    assert all(n > 0 for n in group.per_member().values()), f"every member worked: {group.per_member()}"
    assert group.outcome(ids[:-1]).lost == 0
    again = [d for d in group.deliveries() if d.count > 1 and d.id != "poison"]
    assert {d.id for d in again} == {j["id"] for j in jobs if j["fails"]}, "each transient failure came back once"
    poison = fates[fates.offset == len(jobs)]
    assert list(poison.state) == ["archived"] and list(poison.deliveries) == [3]
    assert set(fates[fates.offset < len(jobs)].state) == {"accepted"}
    assert len(view.members) == 3 and view.total_lag == 0 and view.state == "stable"


@pytest.mark.integration
def test_a_frozen_member_loses_its_records_when_the_lock_runs_out(cluster, unique):
    topic, group = run_jobs(cluster, unique, record_lock_duration_ms=1500)
    try:
        group.start_member("frozen", max_records=3)
        group.wait_joined(1)
        ids = produce_jobs(cluster, topic, [{"id": f"j{i}", "ms": 400} for i in range(6)])
        Wait("the member to hold records", timeout=30).until(lambda: group.held().get("frozen"))
        group.freeze_member("frozen")
        held = {o for _, _, o in group.held()["frozen"]}
        group.start_member("other", max_records=3)
        group.wait_done(ids)  # the frozen member's records too, by the other one
        deliveries = group.deliveries()
        taken = [d for d in deliveries if d.member == "other" and d.offset in held]
        frozen_count = {o: max(d.count for d in deliveries if d.member == "frozen" and d.offset == o) for o in held}
        group.resume_member("frozen")
        group.wait_idle(quiet=1.5)
    finally:
        group.stop()
    assert held and {d.offset for d in taken} == held
    # The broker's delivery count, not a number fixed in advance: on a loaded machine the frozen member's own lock
    # may have run out once before it froze (it got the record again, count 2), and the other member's lock may
    # run out too (count 3 on its second delivery). What holds: the other member's first delivery of each record
    # is the next one after the frozen member's.
    assert all(min(d.count for d in taken if d.offset == o) == frozen_count[o] + 1 for o in held), \
        (frozen_count, [(d.offset, d.count) for d in taken])
    assert group.outcome(ids).lost == 0


@pytest.mark.integration
def test_a_crashed_members_records_come_back_at_once(cluster, unique):
    """A member's process dies holding a record: the broker releases it when the connection closes, not when its
    lock runs out. The lock is the broker's longest (60 s); it starts when the broker hands the record over, a
    moment before the doomed member logs it: the heir's delivery within seconds of that, not 60 s, is a release."""
    lock = 60.0
    topic, group = run_jobs(cluster, unique, record_lock_duration_ms=int(lock * 1000))
    try:
        group.start_member("doomed")
        group.wait_joined(1)
        ids = produce_jobs(cluster, topic, [{"id": "long", "ms": 120000}])
        Wait("the doomed member to hold the job", timeout=30).until(lambda: group.held().get("doomed"))
        group.crash_member("doomed")
        group.start_member("heir")
        Wait("the job to reach the heir", timeout=lock).until(
            lambda: [d for d in group.deliveries() if d.member == "heir"])
    finally:
        group.stop()
    [first] = [d for d in group.deliveries() if d.member == "doomed"]
    back = [d for d in group.deliveries() if d.member == "heir"]
    assert ids == ["long"] and back[0].count == 2, [(d.member, d.count) for d in group.deliveries()]
    assert back[0].got - first.got < lock, "released when the connection closed, not when the lock ran out"


@pytest.mark.integration
def test_settings_out_of_the_brokers_bounds_are_refused(cluster, unique):
    with pytest.raises(LabkitError, match="refused the settings"):
        ShareGroup(cluster, cluster.create_topic(unique("jobs"), partitions=1), unique("g"), record_lock_duration_ms=500)
    with pytest.raises(LabkitError, match="Unknown acknowledgement policy"):
        topic, group = run_jobs(cluster, unique)
        group.start_member("x", ack="sometimes")


CHILD = textwrap.dedent("""
    import sys, labkit
    from labkit.sharegroups import ShareGroup
    c = labkit.start_cluster("single-broker", progress=False)
    group = ShareGroup(c, c.create_topic("jobs", partitions=1), "workers")
    pids = [group.start_member(n).process.pid for n in ("ada", "bob")]
    group.wait_joined(2)
    group.freeze_member("bob")
    print(" ".join(map(str, pids)), c.data_dir, flush=True)
    sys.stdin.read()
""")


@pytest.mark.integration
def test_a_sigkilled_owner_leaves_no_member_process():
    from conftest import java_pids_of

    owner = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    *pids, data_dir = owner.stdout.readline().split()
    assert len(pids) == 2, "the owner did not start its members"
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()

    def gone(pid: int) -> bool:
        try:
            return "State:\tZ" in open(f"/proc/{pid}/status").read()
        except OSError:
            return True

    Wait("the members (one of them frozen) to die with their owner", timeout=20).until(
        lambda: all(gone(int(p)) for p in pids))
    Wait("the cluster's JVM to die too", timeout=20).until(lambda: java_pids_of(data_dir) == [])
