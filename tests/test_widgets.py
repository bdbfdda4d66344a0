"""labkit.view.widgets: the live cluster view's data, pictures, buttons and background thread.

Unit tests check the pure functions and drive a ClusterView over a fake cluster
(no broker); integration tests watch a real cluster, break it from the view's
own button, and run the view inside a real ipykernel to check the kernel stays
responsive while the refresh thread pushes updates.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Optional

import psutil
import pytest
from confluent_kafka import KafkaError, KafkaException

from labkit.admin import PartitionState, TopicState
from labkit.backends import ExternalCluster
from labkit.cluster import Broker, Cluster
from labkit.errors import ClusterStateError
from labkit.view.groupread import GroupReader, GroupReaderCrashed, GroupView, MemberView, PartitionLag, parse_group
from labkit.view.render import (ACTIONS, button_states, groups_html, partition_map_html, snapshot_html, snapshot_text,
                                status_html, topic_title)
from labkit.view.snapshot import BrokerView, Snapshot, broker_status, owns_brokers, short_error
from labkit.viz import ROLES
from labkit.waiting import Deadline
from labkit.view.widgets import ClusterView, next_interval

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _topic(name="orders", leaders=(1, 2, 3), isr=None) -> TopicState:
    parts = []
    for p, leader in enumerate(leaders):
        replicas = (1, 2, 3)
        parts.append(PartitionState(name, p, leader, replicas, tuple(isr[p]) if isr else replicas, 0, 10))
    return TopicState(name, tuple(parts))


def _group() -> GroupView:
    return GroupView("billing", "stable",
                     (MemberView("m-1", "worker-1", "/127.0.0.1", (("orders", 0), ("orders", 1))),
                      MemberView("m-2", "worker-2", "/127.0.0.1", ())),
                     {("orders", 0): PartitionLag(5, 12), ("orders", 1): PartitionLag(None, 3),
                      ("orders", 2): PartitionLag(4, 4)})


# ------------------------------------------------------------------------------------------ pure functions
def test_broker_status_combines_labkits_state_with_the_metadata():
    assert broker_status("running", True) == "up"
    assert broker_status("running", False) == "starting"
    assert broker_status("paused", True) == broker_status("paused", False) == "paused"
    assert broker_status("killed", True) == broker_status("stopped", False) == "down"
    assert broker_status("external", True) == "up" and broker_status("external", False) == "down"


def test_buttons_offer_only_what_makes_sense_for_the_state():
    assert button_states("running") == {"kill": True, "pause": True, "resume": False, "restart": False}
    assert button_states("paused") == {"kill": True, "pause": False, "resume": True, "restart": False}
    assert button_states("killed") == button_states("stopped") == {"kill": False, "pause": False,
                                                                     "resume": False, "restart": True}
    assert not any(button_states("running", faults=False).values())
    assert not any(button_states("killed", busy=True).values())
    assert list(ACTIONS) == ["kill", "pause", "resume", "restart"]


def test_fault_injection_is_detected_from_the_backend_class():
    from labkit.backends.docker import DockerCluster
    from labkit.backends.native import NativeCluster

    assert owns_brokers(NativeCluster.__new__(NativeCluster))
    assert owns_brokers(DockerCluster.__new__(DockerCluster))
    assert not owns_brokers(ExternalCluster("127.0.0.1:1"))


def test_refresh_slows_down_only_after_quiet_refreshes_and_never_below_the_idle_pace():
    assert [next_interval(0.5, 4.0, n) for n in range(7)] == [0.5, 0.5, 0.5, 1.0, 2.0, 4.0, 4.0]
    assert next_interval(1.0, 0.2, 10) == 1.0  # an idle pace faster than the normal one is ignored


def test_group_lag_owner_and_table():
    g = _group()
    assert g.total_lag == 7 and g.lag("orders", 0) == 7 and g.lag("orders", 1) is None and g.lag("orders", 2) == 0
    assert g.owner("orders", 1).client_id == "worker-1" and g.owner("orders", 2) is None
    assert PartitionLag(9, 5).lag == 0  # a commit beyond a (truncated) log end is no negative lag
    text = groups_html([g])
    assert "billing" in text and "worker-1 → orders-0, orders-1" in text and "worker-2 → <i>nothing</i>" in text
    assert "<td>orders-0</td><td>worker-1</td><td>5</td><td>12</td><td style='color:#c0392b'>7</td>" in text
    assert "<td>orders-2</td><td><i>unassigned</i></td>" in text
    assert "No consumer groups" in groups_html([])


def test_static_partition_map_uses_the_viz_roles_and_colours():
    state = _topic(leaders=(1, None), isr=[(1, 2), (2,)])
    text = partition_map_html(state, [1, 2, 3], dead={3})
    rows = text.split("<tr>")[2:]
    assert f"title='leader' style='background:{ROLES['leader']}" in rows[0]
    assert f"title='follower (in sync)' style='background:{ROLES['follower (in sync)']}" in rows[0]
    assert "title='replica on a dead broker'" in rows[0] and "✗" in rows[0]
    assert "title='leader'" not in rows[1] and "title='follower (out of sync)'" in rows[1]
    assert topic_title(state).endswith("(1 offline · 2 under-replicated)</span>")
    assert topic_title(_topic()) == "orders: replicas per broker"


def test_snapshot_key_dead_brokers_roles_and_renderings():
    brokers = (BrokerView(1, "running", True), BrokerView(2, "killed", True), BrokerView(3, "running", False))
    snap = Snapshot(brokers, {"orders": _topic()}, (_group(),), ("groups: timed out",), taken_at=0, took=0.123)
    same = Snapshot(brokers, {"orders": _topic()}, (_group(),), ("groups: timed out",), taken_at=99, took=9)
    moved = Snapshot(brokers, {"orders": _topic(leaders=(1, 1, 3))}, (_group(),), ("groups: timed out",))
    assert snap.key() == same.key() != moved.key()
    assert snap.topic_key("orders") != moved.topic_key("orders")
    assert snap.dead_brokers == {2, 3}
    assert snap.settling  # broker 2 is dead but still listed: the view keeps its normal pace
    calm = Snapshot((BrokerView(1, "running", True), BrokerView(2, "killed", False)), {"orders": _topic()}, ())
    assert not calm.settling
    assert Snapshot(calm.brokers, {"orders": _topic(isr=[(1, 2), (1, 2, 3), (1, 2, 3)])}, ()).settling
    assert snap.roles("orders")[0] == ["leader", "replica on a dead broker", "replica on a dead broker"]
    assert snap.leaders("orders") == {0: 1, 1: 2, 2: 3} and snap.group("billing").total_lag == 7
    text = snapshot_text(snap)
    assert "brokers: 1 up, 2 down, 3 starting" in text and "group billing (stable, 2 members): lag 7" in text
    page = snapshot_html(snap)
    assert "<b>orders</b>" in page and "still in metadata until its session times out" in page
    assert "groups: timed out" in page
    status = status_html(snap, 1.0, 1.0)
    assert "in 123 ms" in status and "every 1 s" in status and "groups: timed out" in status
    assert "quiet: next look in 4 s" in status_html(snap, 1.0, 4.0)
    assert "■ cluster stopped" in status_html(snap, 1.0, 1.0, state="cluster stopped")


def test_short_error_names_the_kafka_error():
    assert short_error(KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting"))) == \
        "Failed while waiting"
    assert short_error(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "ConsumerGroupDescribe: "))) == \
        "not coordinator"
    assert short_error(TimeoutError()) == "timed out"
    assert short_error(RuntimeError("x\n  y")) == "x y" and len(short_error(ValueError("z" * 500))) == 160


def test_group_reader_answers_are_parsed_into_members_and_offsets():
    errors = []
    gid, state, members, offsets, coordinator, incomplete = parse_group(
        {"id": "billing", "state": "stable", "error": "offsets: Broker: Not coordinator", "coordinator": 2, "passing": True,
         "members": [["m-2", "b", "/h", [["orders", 1]]], ["m-1", "a", "/h", [["orders", 2], ["orders", 0]]]],
         "committed": [["orders", 0, 5], ["orders", 3, 7]]}, errors)
    assert (gid, state, coordinator, incomplete) == ("billing", "stable", 2, True)
    assert [m.client_id for m in members] == ["a", "b"]
    assert members[0].partitions == (("orders", 0), ("orders", 2))
    assert offsets == {("orders", 0): 5, ("orders", 1): None, ("orders", 2): None, ("orders", 3): 7}
    assert errors == ["group billing: offsets: Broker: Not coordinator"]


_ECHO_READER = r"""
import json, os, sys
for line in sys.stdin:
    request = json.loads(line)
    if request["groups"] == ["crash"]:
        os._exit(134)  # what a librdkafka assertion does to the process
    groups = [{"id": "moved", "passing": True}] if request["groups"] == ["moved"] else []
    print(json.dumps({"listed": ["g1"], "groups": groups, "error": None, "asked": request["groups"],
                      "timed_out": request["groups"] == ["slow"], "pid": os.getpid()}), flush=True)
"""


def test_a_crashing_group_reader_is_reported_and_restarted(monkeypatch, tmp_path):
    script = tmp_path / "echo_reader.py"
    script.write_text(_ECHO_READER)
    monkeypatch.setattr("labkit.view.groupread.READER_SCRIPT", script)
    reader = GroupReader({"bootstrap.servers": "127.0.0.1:1", "error_cb": print})
    try:
        assert reader.read(None, timeout=5)["listed"] == ["g1"]
        first = reader.pid
        with pytest.raises(GroupReaderCrashed, match="exited with 134"):
            reader.read(["crash"], timeout=5)
        assert reader.pid is None and reader.crashes == 1
        assert reader.read(["g1"], timeout=5)["asked"] == ["g1"]
        second = reader.pid
        assert second not in (None, first)
        os.kill(second, signal.SIGKILL)  # dies between two requests: said at the next one, then restarted
        reader.proc.wait(5)
        with pytest.raises(GroupReaderCrashed, match="exited with -9"):
            reader.read(["g1"], timeout=5)
        assert reader.read(["g1"], timeout=5)["asked"] == ["g1"] and reader.crashes == 2
    finally:
        reader.close()
    assert reader.pid is None


def test_a_reader_whose_request_timed_out_is_replaced_before_the_next_request(monkeypatch, tmp_path):
    """After a timed-out answer, or one that found a group's coordinator moved, the next request goes to a new
    process (a new client: see groupreader.py), and that is no crash."""
    script = tmp_path / "echo_reader.py"
    script.write_text(_ECHO_READER)
    monkeypatch.setattr("labkit.view.groupread.READER_SCRIPT", script)
    reader = GroupReader({"bootstrap.servers": "127.0.0.1:1"})
    try:
        first = reader.read(["g1"], timeout=5)["pid"]
        assert reader.read(["g1"], timeout=5)["pid"] == first  # kept while its requests are answered
        slow = reader.read(["slow"], timeout=5)
        assert slow["pid"] == first and slow["timed_out"]
        assert reader.pid is None  # ended at once: its client may be waiting for a dead coordinator
        second = reader.read(["g1"], timeout=5)["pid"]
        assert second not in (None, first) and reader.crashes == 0
        assert reader.read(["moved"], timeout=5)["pid"] == second and reader.pid is None  # its client's cache is stale
        assert reader.read(["g1"], timeout=5)["pid"] not in (None, first, second) and reader.crashes == 0
    finally:
        reader.close()


def test_the_reader_tells_a_timeout_from_other_failures():
    from confluent_kafka import KafkaError, KafkaException

    from labkit.view.groupreader import timed_out
    assert timed_out(TimeoutError())
    assert timed_out(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    assert not timed_out(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
    assert not timed_out(ValueError("bad request"))


def test_a_moving_coordinator_is_asked_again_a_refusal_is_not():
    from confluent_kafka import KafkaError, KafkaException

    from labkit.view.groupreader import passing
    for code in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT):
        assert passing(KafkaException(KafkaError(code))), KafkaError(code).name()
    assert passing(TimeoutError())
    for code in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.INVALID_GROUP_ID):
        assert not passing(KafkaException(KafkaError(code))), KafkaError(code).name()
    assert not passing(ValueError("bad request"))


# ------------------------------------------------------------------------------------------ the view, no broker
class FakeAdmin:
    """The two AdminClient calls the view's first step and high watermarks need, answered from a FakeCluster."""

    def __init__(self, cluster: "FakeCluster") -> None:
        self.cluster = cluster

    def list_topics(self, timeout=None):
        if self.cluster.fail_metadata:
            raise self.cluster.fail_metadata
        parts = {p: SimpleNamespace(leader=leader, replicas=[1, 2, 3], isrs=[1, 2, 3])
                 for p, leader in enumerate(self.cluster.leaders)}
        return SimpleNamespace(brokers={b.id: b for b in self.cluster._brokers if b.state == "running"},
                               topics={"orders": SimpleNamespace(partitions=parts, error=None)})

    def list_offsets(self, request, request_timeout=None, isolation_level=None):
        futures = {}
        for tp in request:
            fut = Future()
            fut.set_result(SimpleNamespace(offset=10))
            futures[tp] = fut
        return futures


class FakeCluster(Cluster):
    """Enough of a native cluster for the view: brokers, metadata, one topic, fault injection."""

    backend = "native"
    owns_brokers = True

    def __init__(self, hook: bool = False) -> None:
        super().__init__()
        self._brokers = [Broker(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)]
        self.leaders = [1, 2, 3]
        self.fail_metadata: Optional[Exception] = None
        self.calls: list[tuple[str, int]] = []
        self._stopped = False
        self._callbacks = []
        self._admin = FakeAdmin(self)
        if hook:
            self.on_stop = self._callbacks.append

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:9001"

    @property
    def brokers(self):
        return list(self._brokers)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        self._stopped = True
        for callback in self._callbacks:
            callback()

    def admin(self):
        return self._admin

    def admin_for(self, addresses=None, warm=True, **config):
        return self._admin  # the view's client on the running brokers: the same fake answers

    def kill_broker(self, broker_id):
        self.calls.append(("kill", broker_id))
        self._brokers[broker_id - 1].state = "killed"
        self.leaders = [b if b != broker_id else (b % 3) + 1 for b in self.leaders]

    def pause_broker(self, broker_id):
        self.calls.append(("pause", broker_id))
        self._brokers[broker_id - 1].state = "paused"

    def resume_broker(self, broker_id):
        self._brokers[broker_id - 1].state = "running"

    def start_broker(self, broker_id):
        raise ClusterStateError(f"Broker {broker_id} is already running.", "Kill or stop it first.")


class ReadOnlyCluster(FakeCluster):
    """A fake that, like an external cluster, has no fault injection."""

    owns_brokers = False
    kill_broker = Cluster.kill_broker
    pause_broker = Cluster.pause_broker
    resume_broker = Cluster.resume_broker
    start_broker = Cluster.start_broker


def _wait(predicate, timeout=20.0, interval=0.05):
    """Whether ``predicate()`` came true within ``timeout`` of a quiet machine's seconds (a starved view thread is
    late, not wrong)."""
    deadline = Deadline(timeout)
    while not deadline.expired():
        if predicate():
            return True
        time.sleep(interval)
    return False


def _read(view, timeout=20.0):
    """The view's next snapshot whose metadata was read: one taken while the machine is busy can miss its 3-s
    timeout (the view shows that as an error and reads again), which says nothing about leaders or brokers."""
    deadline = Deadline(timeout)
    while True:
        snap = view.snapshot()
        if not any(e.startswith("metadata:") for e in snap.errors) or deadline.expired():
            return snap


def _view_threads():
    return [t for t in threading.enumerate() if t.name == "labkit-cluster-view"]


def _reader_alive(pid):
    """Whether the group reader ``pid`` (a child of this process) still runs. Other clusters of this test
    process (the session's) keep readers of their own: only this one's is looked at."""
    try:
        child = psutil.Process(pid)
        return child.status() != psutil.STATUS_ZOMBIE and "groupreader.py" in " ".join(child.cmdline())
    except psutil.NoSuchProcess:
        return False


def test_view_draws_brokers_partition_maps_and_the_right_buttons():
    fake = FakeCluster()
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100)
    try:
        snap = view.snapshot()
        assert [b.status for b in snap.brokers] == ["up", "up", "up"]
        assert snap.roles("orders")[1] == ["follower (in sync)", "leader", "follower (in sync)"]
        assert [p.high_watermark for p in snap.topics["orders"].partitions] == [10, 10, 10]
        fig = view.figures["orders"]
        assert [list(r) for r in fig.data[0].customdata] == snap.roles("orders")
        assert list(fig.data[0].x) == ["broker 1", "broker 2", "broker 3"]
        assert len(view.broker_box.children) == 3 and len(view.topic_box.children) == 1
        assert [view.buttons[(1, a)].disabled for a in ACTIONS] == [False, False, True, True]
        assert "broker 1" in view.buttons[(1, "kill")].tooltip
    finally:
        view.close()


def test_kill_button_runs_in_a_worker_and_the_view_follows():
    fake = FakeCluster()
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100, idle_refresh=0.05)
    try:
        view.buttons[(2, "kill")].click()
        assert _wait(lambda: view.snapshot().broker(2).status == "down")
        assert fake.calls == [("kill", 2)]
        assert _wait(lambda: view.snapshot().leaders("orders")[1] == 3)
        assert _wait(lambda: "kill broker 2: done" in view.message.value)
        assert [view.buttons[(2, a)].disabled for a in ACTIONS] == [True, True, True, False]
        assert view.snapshot().roles("orders")[0][1] == "replica on a dead broker"
        view.press(2, "restart").join(5)  # the fake refuses: the reason is shown, nothing raised
        assert "Broker 2 is already running" in view.message.value
    finally:
        view.close()


def test_errors_go_to_the_status_line_and_the_thread_keeps_going():
    fake = FakeCluster()
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100, idle_refresh=0.05)
    try:
        fake.fail_metadata = KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        assert _wait(lambda: "metadata: all brokers down" in view.status.value)
        assert view.running and view.snapshot().errors == ("metadata: all brokers down",)
        assert [b.status for b in view.snapshot().brokers] == ["starting"] * 3
        fake.fail_metadata = None
        assert _wait(lambda: "all brokers down" not in view.status.value and "● live" in view.status.value)
    finally:
        view.close()


def test_quiet_view_polls_less_and_wakes_when_a_broker_changes(monkeypatch):
    fake = FakeCluster()
    made = []  # while a broker is paused the view asks the running brokers only, through a client of its own
    monkeypatch.setattr(fake, "admin_for", lambda servers=None, **kw: made.append(servers) or fake.admin())
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100, idle_refresh=30)
    try:
        assert _wait(lambda: view._next_in >= 1.0, timeout=10)
        quiet = view.refreshes
        redraws = view.redraws
        time.sleep(0.6)
        assert view.refreshes <= quiet + 1 and view.redraws == redraws  # idle: no traffic to the page
        fake.pause_broker(3)  # done from a cell: labkit's broker state changes, the view looks at once
        assert _wait(lambda: view.snapshot().broker(3).status == "paused", timeout=2)
        # the snapshot is taken before the page is redrawn from it: wait for the redraw, do not race it
        assert _wait(lambda: view.redraws > redraws, timeout=2) and made == ["127.0.0.1:9001,127.0.0.1:9002"]
    finally:
        view.close()


def test_close_stops_the_thread_and_switches_the_buttons_off():
    fake = FakeCluster()
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100)
    assert view.running
    view.close()
    assert not view.running and view._thread not in threading.enumerate()
    assert all(b.disabled for b in view.buttons.values())
    assert "view closed" in view.status.value and "view closed" in repr(view)


@pytest.mark.parametrize("hook", [False, True], ids=["polls-stopped", "on_stop-hook"])
def test_stopping_the_cluster_stops_the_view(hook):
    fake = FakeCluster(hook=hook)
    view = ClusterView(fake, groups=False, refresh=0.05, max_rate=100)
    fake.stop()
    assert _wait(lambda: not view.running, timeout=5)
    assert "cluster stopped" in view.status.value
    with pytest.raises(ClusterStateError, match="stopped"):
        ClusterView(fake)


def test_a_new_view_of_the_same_cluster_retires_the_old_one():
    fake = FakeCluster()
    first = ClusterView(fake, groups=False, refresh=0.05, max_rate=100)
    second = ClusterView(fake, groups=False, refresh=0.05, max_rate=100)
    try:
        assert not first.running and second.running
        assert "replaced" in first.status.value
        third = ClusterView(fake, groups=False, refresh=0.05, max_rate=100, replace=False)
        assert second.running and third.running
        third.close()
    finally:
        second.close()


def test_backends_without_fault_injection_get_disabled_buttons_with_a_reason():
    view = ClusterView(ReadOnlyCluster(), groups=False, refresh=0.05, max_rate=100)
    try:
        assert not view.faults and view.buttons and all(b.disabled for b in view.buttons.values())
        assert "does not own" in view.buttons[(1, "kill")].tooltip
        view.press(1, "kill").join(5)
        assert "not possible on a native cluster" in view.message.value
    finally:
        view.close()


def test_outside_a_notebook_the_view_renders_as_a_static_snapshot():
    view = ClusterView(FakeCluster(), groups=False, refresh=0.05, max_rate=100)
    try:
        bundle = view._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert "<b>orders</b>" in bundle["text/html"] and "● up" in bundle["text/html"]
        assert bundle["text/plain"].startswith("<ClusterView live") and "p0: leader=1" in bundle["text/plain"]
    finally:
        view.close()


# ------------------------------------------------------------------------------------------ a real cluster
def _consume(cluster, topic, group, count):
    consumer = cluster.consumer(group, client_id="lesson-reader")
    consumer.subscribe([topic])
    got, deadline = 0, Deadline(30)
    while got < count and not deadline.expired():
        msg = consumer.poll(0.5)
        got += msg is not None and not msg.error()
    consumer.commit(asynchronous=False)
    return consumer


@pytest.mark.integration
def test_live_view_shows_a_kill_from_its_own_button_and_stops_with_the_cluster(fresh_cluster, unique):
    cluster = fresh_cluster
    topic = cluster.create_topic(unique("view"), partitions=3)
    producer = cluster.producer()
    for i in range(60):
        producer.produce(topic, key=str(i), value=b"x")
    producer.flush(10)
    group = unique("viewers")
    consumer = _consume(cluster, topic, group, 20)
    view = cluster.view(topics=[topic], refresh=0.5)
    try:
        snap = view.snapshot()
        assert [b.status for b in snap.brokers] == ["up"] * 3 and not snap.errors
        for row in snap.roles(topic):  # one leader per partition, the other two replicas follow in sync
            assert sorted(row) == ["follower (in sync)", "follower (in sync)", "leader"]
        g = snap.group(group)
        assert g.state == "stable" and [m.client_id for m in g.members] == ["lesson-reader"]
        assert sorted(g.members[0].partitions) == [(topic, p) for p in range(3)]
        assert sum(x.end for x in g.offsets.values()) == 60
        committed = {tp: x for tp, x in g.offsets.items() if x.committed is not None}
        assert sum(x.committed for x in committed.values()) >= 20  # what the consumer read and committed
        assert all(x.lag == x.end - x.committed for x in committed.values())
        assert g.total_lag == sum(x.lag for x in committed.values())  # like kafka-consumer-groups: no commit, no lag

        victim = snap.leaders(topic)[0]
        view.buttons[(victim, "kill")].click()
        assert _wait(lambda: view.snapshot().broker(victim).status == "down")
        assert _wait(lambda: _read(view).leaders(topic)[0] not in (None, victim), timeout=40)
        assert _wait(lambda: not _read(view).broker(victim).registered, timeout=40)
        after = _read(view)
        assert all(row[after.broker_ids.index(victim)] == "replica on a dead broker" for row in after.roles(topic))
        assert "kill broker" in view.message.value and view.running
        # (the group reader may just have crashed on a dead coordinator -- it is restarted on the next refresh)
        assert _wait(lambda: view._reader.group_reader_pid is not None)
        reader = view._reader.group_reader_pid
        view.close()
        assert not view.running and not _reader_alive(reader)
        consumer.close()  # while its coordinator still runs (closing later waits for a dead cluster)

        watcher = cluster.view(topics=[topic], groups=[group], refresh=0.5)
        assert watcher.running and _wait(lambda: watcher._reader.group_reader_pid is not None)
        reader = watcher._reader.group_reader_pid
        assert _reader_alive(reader)
        cluster.stop()
        assert _wait(lambda: not watcher.running, timeout=15)
        assert "cluster stopped" in watcher.status.value
        assert not _view_threads() and not _reader_alive(reader)
    finally:
        view.close()


@pytest.mark.integration
def test_an_external_cluster_is_watched_but_cannot_be_broken(cluster, unique):
    import labkit

    external = labkit.connect(cluster.bootstrap_servers)
    topic = cluster.create_topic(unique("watched"), partitions=2)
    view = external.view(topics=[topic], groups=[unique("nobody")], refresh=0.25)
    try:
        snap = view.snapshot()
        assert [b.status for b in snap.brokers] == ["up"] * 3 and set(snap.leaders(topic)) == {0, 1}
        # A group asked for by name that never had a member: listed with the state the broker gives it.
        assert _wait(lambda: [(g.id, g.state in ("dead", "not found"), g.members) for g in view.snapshot().groups]
                     == [(unique("nobody"), True, ())]), view.snapshot()
        assert view.buttons and all(b.disabled for b in view.buttons.values())

        # The group reader process dies (as it would on a librdkafka crash): said, restarted, back.
        os.kill(view._reader.group_reader_pid, signal.SIGKILL)
        assert _wait(lambda: "group reader exited" in view.status.value, timeout=10)
        assert _wait(lambda: view.snapshot().groups and not view.snapshot().errors, timeout=10)
        assert view.running
    finally:
        view.close()
        external.stop()


_KERNEL_SETUP = """
import threading, time, labkit
from IPython.display import display
c = labkit.connect({bootstrap!r})
view = c.view(topics=[{topic!r}], refresh=0.25, idle_refresh=0.25)
display(view)
"""


def _execute(client, code, timeout=60):
    """Run ``code`` in the kernel; returns (seconds until the reply, iopub messages seen meanwhile)."""
    t0 = time.monotonic()
    msg_id = client.execute(code)
    seen = []
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        seen.append(msg)
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"):
            break
    reply = client.get_shell_msg(timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    return time.monotonic() - t0, seen


def _outputs(messages):
    return [m["content"] for m in messages if m["msg_type"] in ("execute_result", "display_data", "stream")]


@pytest.mark.integration
def test_in_a_kernel_the_view_updates_from_its_thread_while_cells_run(cluster, unique):
    from jupyter_client.manager import start_new_kernel

    topic = cluster.create_topic(unique("kernel-view"), partitions=3)
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        _, seen = _execute(kc, _KERNEL_SETUP.format(bootstrap=cluster.bootstrap_servers, topic=topic))
        shown = [o for o in _outputs(seen) if "data" in o]
        assert shown and "application/vnd.jupyter.widget-view+json" in shown[0]["data"]
        assert "text/html" in shown[0]["data"]

        # A cell that keeps the main thread busy: the view's thread still sends widget updates meanwhile.
        took, seen = _execute(kc, "t0 = time.time()\nwhile time.time() - t0 < 3: sum(range(1000))")
        updates = [m for m in seen if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"]
        assert took < 6 and len(updates) >= 4, f"{len(updates)} widget updates during a 3 s busy cell"

        # Short cells answer quickly while the view runs.
        latencies = [_execute(kc, "1 + 1")[0] for _ in range(10)]
        assert sorted(latencies)[5] < 0.5, latencies

        _, seen = _execute(kc, "view.close(); print(view.running, [t.name for t in threading.enumerate()"
                               " if t.name == 'labkit-cluster-view'])")
        assert "False []" in "".join(o.get("text", "") for o in _outputs(seen))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
