"""labkit.groupviz: rebalance arithmetic and figure builders on synthetic events and group views (no broker)."""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

import pandas as pd
import pytest

from labkit import groupviz
from labkit.errors import LabkitError
from labkit.view.groupread import GroupView, MemberView, PartitionLag
from labkit.workloads import MemberEvent

T = "orders"


def ev(t, member, kind, *parts):
    return MemberEvent(t, member, kind, tuple((T, p) for p in parts))


# An eager rebalance at t=10: a and b revoke everything, c joins, all get a new assignment at t=11.
EAGER = [
    ev(0.0, "a", "start"), ev(0.0, "b", "start"),
    ev(1.0, "a", "assign", 0, 1, 2), ev(1.0, "b", "assign", 3, 4, 5),
    ev(9.5, "c", "start"),
    ev(10.0, "a", "revoke", 0, 1, 2), ev(10.2, "b", "revoke", 3, 4, 5),
    ev(11.0, "a", "assign", 0, 1), ev(11.0, "b", "assign", 3, 4), ev(11.0, "c", "assign", 2, 5),
]
# The same change, cooperatively: only 2 and 5 move, in two rounds.
COOPERATIVE = [
    ev(0.0, "a", "start"), ev(0.0, "b", "start"),
    ev(1.0, "a", "assign", 0, 1, 2), ev(1.0, "b", "assign", 3, 4, 5),
    ev(9.5, "c", "start"),
    ev(10.0, "a", "revoke", 2), ev(10.0, "b", "revoke", 5), ev(10.0, "c", "assign"),
    ev(12.0, "c", "assign", 2, 5),
]


def test_holdings_follow_assign_and_revoke():
    held = groupviz.holdings(EAGER, until=20.0)
    p0 = [(h.member, h.start, h.end) for h in held if h.partition == 0]
    assert p0 == [("a", 1.0, 10.0), ("a", 11.0, 20.0)]
    p5 = [(h.member, h.start, h.end) for h in held if h.partition == 5]
    assert p5 == [("b", 1.0, 10.2), ("c", 11.0, 20.0)]


def test_killed_and_restarted_members_hold_nothing():
    events = [ev(1, "a", "assign", 0, 1), ev(5, "a", "killed"), ev(6, "a", "start"), ev(7, "a", "assign", 0)]
    held = groupviz.holdings(events, until=10)
    assert [(h.partition, h.start, h.end) for h in held] == [(0, 1, 5), (0, 7, 10), (1, 1, 5)]
    assert groupviz.owned_at(events, 5.5) == {}
    assert groupviz.owned_at(events, 8) == {"a": [(T, 0)]}


def test_revocations_count_partitions_after_since():
    assert groupviz.revocations(EAGER, since=5) == {"a": 3, "b": 3, "c": 0}
    assert groupviz.revocations(COOPERATIVE, since=5) == {"a": 1, "b": 1, "c": 0}
    assert groupviz.revocations(EAGER, since=10.1) == {"a": 0, "b": 3, "c": 0}


def test_idle_and_unowned_seconds():
    assert groupviz.idle_seconds(EAGER, "a", 5, 20) == pytest.approx(1.0)
    assert groupviz.idle_seconds(EAGER, "b", 5, 20) == pytest.approx(0.8)
    assert groupviz.idle_seconds(COOPERATIVE, "a", 5, 20) == 0
    gaps = groupviz.unowned_seconds(COOPERATIVE, 5, 20)
    assert gaps[(T, 2)] == pytest.approx(2.0) and gaps[(T, 5)] == pytest.approx(2.0)
    assert gaps[(T, 0)] == 0 and gaps[(T, 3)] == 0
    eager = groupviz.unowned_seconds(EAGER, 5, 20)
    assert all(s > 0 for s in eager.values()) and eager[(T, 3)] == pytest.approx(0.8)


def test_rebalance_table_per_member():
    table = groupviz.rebalance_table(COOPERATIVE, since=5, until=20)
    assert table.loc["a"].to_dict() == {"partitions before": 3, "revoked": 1, "partitions after": 2,
                                        "seconds with nothing to consume": 0.0}
    assert table.loc["c", "partitions before"] == 0 and table.loc["c", "partitions after"] == 2
    assert pd.isna(table.loc["c", "seconds with nothing to consume"])
    eager = groupviz.rebalance_table(EAGER, since=5, until=20)
    assert eager.loc["a", "seconds with nothing to consume"] == pytest.approx(1.0)
    with pytest.raises(LabkitError, match="later than"):
        groupviz.rebalance_table(EAGER, since=5, until=5)


def test_rebalance_timeline_draws_one_bar_per_holding():
    fig = groupviz.rebalance_timeline(EAGER, t0=10.0, until=20.0, marks={"c joins": 9.5})
    bars = {t.name: t for t in fig.data}
    assert set(bars) == {"a", "b", "c"}
    assert len(bars["a"].x) == 5  # 0,1,2 before; 0,1 after
    assert list(bars["c"].base) == [1.0, 1.0] and list(bars["c"].y) == ["p2", "p5"]
    assert fig.layout.shapes and fig.layout.shapes[0].x0 == -0.5


def test_rebalance_timeline_panels_share_member_colours():
    fig = groupviz.rebalance_timeline({"eager": EAGER, "cooperative": COOPERATIVE}, t0=10.0, until=20.0)
    colours = {}
    for trace in fig.data:
        assert colours.setdefault(trace.name, trace.marker.color) == trace.marker.color
    assert sum(1 for t in fig.data if t.showlegend) == 3, "one legend entry per member"
    assert [a.text for a in fig.layout.annotations] == ["eager", "cooperative"]
    with pytest.raises(LabkitError, match="No rebalance events"):
        groupviz.rebalance_timeline([])


def _view():
    members = (MemberView("m-1", "alpha", "/127.0.0.1", ((T, 0), (T, 1))),
               MemberView("m-2", "beta", "/127.0.0.1", ((T, 2),)),
               MemberView("m-3", "gamma", "/127.0.0.1", ()))
    offsets = {(T, 0): PartitionLag(40, 100), (T, 1): PartitionLag(None, 80), (T, 2): PartitionLag(90, 90)}
    return GroupView("billing", "stable", members, offsets)


def test_assignment_heatmap_marks_owned_cells_and_idle_members():
    view = _view()
    fig = groupviz.assignment_heatmap(view, partitions=[(T, p) for p in range(4)])
    heat = fig.data[0]
    assert list(heat.y) == ["alpha", "beta", "gamma"] and list(heat.x) == ["p0", "p1", "p2", "p3"]
    assert [list(r) for r in heat.text] == [["●", "●", "", ""], ["", "", "●", ""], ["", "", "", ""]]
    assert "no owner: p3" in fig.layout.title.text and "idle: gamma" in fig.layout.title.text
    assert groupviz.assignment_of(view) == {"alpha": [(T, 0), (T, 1)], "beta": [(T, 2)], "gamma": []}
    plain = groupviz.assignment_heatmap({"x": [(T, 1)], "y": [(T, 0)]})
    assert [list(r) for r in plain.data[0].text] == [["", "●"], ["●", ""]]
    with pytest.raises(LabkitError, match="no members"):
        groupviz.assignment_heatmap({})


def test_lag_bars_stack_committed_and_lag():
    fig = groupviz.lag_bars(_view())
    committed, lag = fig.data
    assert list(committed.y) == [40, 0, 90] and list(lag.y) == [60, 0, 0]
    assert list(committed.customdata) == ["alpha", "alpha", "beta"]
    assert "total lag 60" in fig.layout.title.text
    with pytest.raises(LabkitError, match="no committed offsets"):
        groupviz.lag_bars(GroupView("empty", "empty"))


# ---------------------------------------------------------------------------------------------- member_removed
class LoggedCluster:
    """Brokers whose server.log holds ``logs[id]``: broker_log greps it as labkit.runtime.brokerlogs does."""

    def __init__(self, logs, dead=()):
        self.logs = logs
        self.brokers = [SimpleNamespace(id=i, alive=i not in dead) for i in logs]

    def broker_log(self, broker_id, lines=50, file="server", grep=None):
        found = [line for line in self.logs[broker_id] if grep is None or re.search(grep, line)]
        return "\n".join(found[-lines:])


UUID = "be21ad7a-3675-4325-9331-97befa27316b"
JOINED = f"[13:37:30,100] INFO [GroupCoordinator id=3] Pending dynamic member with id stuck-{UUID} joins group stuck-0481da"
LEFT = (f"[13:37:58,362] INFO [GroupCoordinator id=1] [Group stuck-0481da] Member stuck-{UUID} has left group through "
        "explicit `LeaveGroup` request; client reason: not provided (GroupMetadataManager)")
FAILED = (f"[13:37:59,400] INFO [GroupCoordinator id=3] Member stuck-{UUID} in group stuck-0481da has failed, removing "
          "it from the group. (GroupMetadataManager)")
OTHER = (f"[13:37:40,000] INFO [GroupCoordinator id=3] Member stuck-{UUID} in group stuck-ffffff has failed, removing "
         "it from the group. (GroupMetadataManager)")


def test_a_member_out_of_its_group_is_found_by_client_id_or_member_id_whichever_way_it_went():
    cluster = LoggedCluster({1: [JOINED, LEFT], 2: [], 3: [OTHER]})
    by_name = groupviz.member_removed(cluster, "stuck-0481da", "stuck")
    assert by_name is not None and by_name.left and not by_name.expired and by_name.broker == 1
    assert by_name.line == LEFT and by_name.why == groupviz.REMOVALS["has left group through explicit `LeaveGroup`"]
    assert groupviz.member_removed(cluster, "stuck-0481da", f"stuck-{UUID}") == by_name
    # another group's line about the same member, a member only joining, a name that is a prefix: not it
    assert groupviz.member_removed(LoggedCluster({3: [OTHER, JOINED]}), "stuck-0481da", "stuck") is None
    assert groupviz.member_removed(cluster, "stuck-0481da", "stu") is None
    # its session expired instead (a LeaveGroup that never reached the coordinator), logged by another broker
    expired = groupviz.member_removed(LoggedCluster({1: [JOINED], 3: [FAILED]}), "stuck-0481da", "stuck")
    assert expired is not None and expired.expired and expired.broker == 3
    # a rebalance that went on without it
    dropped = groupviz.member_removed(LoggedCluster({1: [
        f"[13:38:10,000] INFO Group stuck-0481da removed dynamic members who haven't joined: [stuck-{UUID}]"]}),
        "stuck-0481da", "stuck")
    assert dropped is not None and not dropped.left and not dropped.expired


def test_the_first_removal_counts_and_a_dead_brokers_log_is_not_read():
    both = groupviz.member_removed(LoggedCluster({1: [FAILED], 3: [LEFT]}), "stuck-0481da", "stuck")
    assert both is not None and both.left  # 13:37:58 before 13:37:59
    assert groupviz.member_removed(LoggedCluster({1: [LEFT]}, dead={1}), "stuck-0481da", "stuck") is None


def test_a_log_lines_time_is_the_latest_such_moment_not_after_now():
    now = dt.datetime(2026, 12, 2, 0, 0, 5).timestamp()
    assert groupviz.logged_at("[00:00:01,250] INFO x", now=now) == pytest.approx(now - 3.75)
    assert groupviz.logged_at("[23:59:59,000] INFO x", now=now) == pytest.approx(now - 6.0)  # before midnight
    with pytest.raises(LabkitError, match="Not a broker log line"):
        groupviz.logged_at("no time here", now=now)
