"""labkit.widgets: the live cluster view's data, its buttons, and its background thread."""

from __future__ import annotations

import threading
import time

import pytest

from labkit.widgets import ClusterView, GroupView, Snapshot, groups_html

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_groups_html_lists_members_partitions_and_lag():
    g = GroupView("billing", "stable", {"m1": ("worker-1", [("orders", 0), ("orders", 1)]), "m2": ("worker-2", [])},
                  {("orders", 0): (5, 12, 7), ("orders", 1): (None, 3, None)})
    text = groups_html([g])
    assert "billing" in text and "worker-1: orders-0, orders-1" in text and "worker-2: <i>idle</i>" in text
    assert "p0: 7" in text and "p1: –" in text and "<b>7</b>" in text
    assert "No consumer groups" in groups_html([])


def test_snapshot_key_changes_only_when_the_picture_does():
    a = Snapshot([(1, "running", True)], {}, [])
    b = Snapshot([(1, "running", True)], {}, [])
    c = Snapshot([(1, "killed", False)], {}, [])
    assert a.key() == b.key() != c.key()


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.integration
def test_live_view_follows_a_kill_from_its_own_button(fresh_cluster, unique):
    cluster = fresh_cluster
    topic = cluster.create_topic(unique("view"), partitions=3)
    producer = cluster.producer()
    for i in range(60):
        producer.produce(topic, key=str(i), value=b"x")
    producer.flush(10)
    consumer = cluster.consumer(unique("viewers"))
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        got += msg is not None and not msg.error()
    consumer.commit(asynchronous=False)

    view = ClusterView(cluster, topics=[topic], refresh=0.5)
    try:
        snap = view.snapshot()
        state = snap.topics[topic]
        assert all(p.leader is not None for p in state.partitions)
        assert [g.id for g in snap.groups] == [unique("viewers")]
        group = snap.groups[0]
        assert sorted(tp for _, tps in group.members.values() for tp in tps) == [(topic, p) for p in range(3)]
        assert sum(end for _, end, _ in group.lag.values()) == 60
        assert all(lag == end - done for done, end, lag in group.lag.values() if done is not None)
        assert sum(done or 0 for done, _, _ in group.lag.values()) >= 20

        victim = state[0].leader
        kill_button = view._broker_cards[victim][0].children[1].children[0]
        assert kill_button.description == "kill"
        kill_button.click()
        assert _wait(lambda: any(b == victim and s == "killed" and not reg
                                 for b, s, reg in view.snapshot().brokers)), view.snapshot().brokers
        assert _wait(lambda: view.snapshot().topics[topic][0].leader not in (None, victim))
        assert view.refreshes > 2 and view.running
    finally:
        consumer.close()
        view.close()
    assert not view.running


@pytest.mark.integration
def test_stopping_the_cluster_stops_the_view(fresh_cluster):
    view = fresh_cluster.view(refresh=0.3)
    assert view.running
    fresh_cluster.stop()
    assert _wait(lambda: not view.running, timeout=20)
    assert not [t for t in threading.enumerate() if t.name == "labkit-cluster-view" and t is view._thread]


@pytest.mark.integration
def test_external_clusters_get_disabled_fault_buttons(cluster):
    import labkit

    external = labkit.connect(cluster.bootstrap_servers)
    view = external.view(topics=[], groups=False)
    try:
        buttons = [b for card, _ in view._broker_cards.values() for b in card.children[1].children]
        assert buttons and all(b.disabled for b in buttons)
    finally:
        view.close()
        external.stop()
