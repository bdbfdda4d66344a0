"""Consumer groups as plotly figures: who owns which partition, committed offsets and lag, rebalances over time.

    view = groupviz.read_group(cluster, "billing")        # members, assignment, committed offsets, lag (broker)
    groupviz.member_removed(cluster, "billing", "b1")      # the coordinator's log line taking b1 out, and why
    groupviz.assignment_heatmap(view)                      # members x partitions
    groupviz.lag_bars(view)                                # committed offset and lag per partition
    groupviz.rebalance_timeline(group.events())            # who held what, when (labkit.workloads members)
    groupviz.rebalance_table(group.events(), since, until) # who stopped, and for how long

The figures are built from plain data (a :class:`~labkit.view.groupread.GroupView`, a list of
:class:`~labkit.workloads.MemberEvent`), so they can be tested without a broker and
drawn from a snapshot taken before a change next to one taken after it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .errors import LabkitError
from .view.groupread import GroupView
from .view.snapshot import take_snapshot
from .waiting import Wait
from .workloads import MemberEvent

if TYPE_CHECKING:
    from .cluster import Cluster

#: Member colours, in the order members first appear.
PALETTE = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#d35400", "#7f8c8d", "#f1c40f",
           "#34495e")

Events = Union[Sequence[MemberEvent], Mapping[str, Sequence[MemberEvent]]]
Assignment = Mapping[str, Iterable[tuple[str, int]]]


# ---------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class _Unreadable:
    """The broker's answer for a group it cannot show (none such, dead, or nothing in it): final, not asked again."""

    said: str


def read_group(cluster: "Cluster", group_id: str, timeout: float = 20.0) -> GroupView:
    """The group as the broker reports it: members, their partitions, committed and log-end offsets.

    Read through the cluster's group reader (a child process kept for the cluster, see :mod:`labkit.view.groupread`).
    While the group's coordinator moves (its broker was killed or restarted, the controller gave leadership back to
    a preferred replica) the broker answers "not coordinator", or the dead one nothing: the group is read again, for
    up to ``timeout`` seconds, until its coordinator answers in full. A group that does not exist is said at once.
    """
    deadline = time.monotonic() + timeout

    def answered() -> Union[GroupView, _Unreadable]:
        ask = min(5.0, max(deadline - time.monotonic(), 0.5))  # one request's patience (a dead coordinator's)
        snapshot = take_snapshot(cluster, topics=[], groups=[group_id], timeout=ask)
        view = snapshot.groups[0] if snapshot.groups else None
        if view is None or view.incomplete:  # the error says what the broker answered, e.g. "not coordinator"
            raise LabkitError(f"{view.state if view else 'no answer'}: {'; '.join(snapshot.errors) or 'no error'}")
        if view.state in ("not found", "unknown", "dead") or not (view.members or view.offsets):
            said = "; ".join(snapshot.errors)
            return _Unreadable(f"{view.state}{': ' + said if said else ''}")
        return view

    view = Wait(f"consumer group {group_id!r} to be read from its coordinator", timeout=timeout, interval=0.25,
                stretch=True, hint="A broker may still be starting or taking over the group: run the cell again.").until(answered)
    if isinstance(view, _Unreadable):
        raise LabkitError(f"Consumer group {group_id!r} could not be read ({view.said}).",
                          "Check the group id; a group exists once a member joined or committed.")
    return view


def assignment_of(group: GroupView) -> dict[str, list[tuple[str, int]]]:
    """``{member: [(topic, partition), ...]}`` from a group view, members named by their client id."""
    out: dict[str, list[tuple[str, int]]] = {}
    for m in group.members:
        name = m.client_id if m.client_id not in out else f"{m.client_id} ({m.member_id[-6:]})"
        out[name] = sorted(m.partitions)
    return out


#: How Kafka's group coordinator (4.x, ``GroupMetadataManager``) words taking a member out of a classic group in its
#: log, and what each means.
REMOVALS = {
    "has left group through explicit `LeaveGroup`": "it left (its client sent a LeaveGroup request)",
    "has failed, removing it from the group": "its session expired (no heartbeat for session.timeout.ms)",
    "removed dynamic members who haven't joined": "a rebalance went on without it (it did not rejoin in time)",
    "removed members who haven't sent their sync requests": "a rebalance went on without it (no SyncGroup in time)",
}
#: The tail the coordinator gives a client id to make a member id: ``<client.id>-<uuid>``.
MEMBER_ID_TAIL = "-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@dataclass(frozen=True)
class Removal:
    """The coordinator's log line that took a member out of its group: the ``line``, when it was written (``t``,
    wall-clock seconds read from the line), the ``broker`` that wrote it, and ``why`` (a value of
    :data:`REMOVALS`)."""

    line: str
    t: float
    broker: int
    why: str

    @property
    def left(self) -> bool:
        """The member's client asked to leave (rather than being expired or left behind by a rebalance)."""
        return self.why == REMOVALS["has left group through explicit `LeaveGroup`"]

    @property
    def expired(self) -> bool:
        """The coordinator heard nothing from it for ``session.timeout.ms``."""
        return self.why == REMOVALS["has failed, removing it from the group"]


def logged_at(line: str, now: Optional[float] = None) -> float:
    """The wall-clock time of a broker log line (``[HH:MM:SS,mmm] ...``, this machine's local time), taken as the
    latest such moment not after ``now`` (default: the present), so a line from before midnight reads right."""
    now = time.time() if now is None else now
    try:
        clock = datetime.strptime(line[1:13], "%H:%M:%S,%f").time()
    except ValueError:
        raise LabkitError(f"Not a broker log line: {line[:60]!r}.", "Pass a line of a broker's server.log.") from None
    day = datetime.fromtimestamp(now).date()
    t = datetime.combine(day, clock).timestamp()
    return t - 86400 if t > now + 1 else t


def member_removed(cluster: "Cluster", group_id: str, member: str) -> Optional[Removal]:
    """The group coordinator's own record (``server.log``) of ``member`` -- a member id, or the client id its member
    id starts with -- going out of the classic group ``group_id``, the first if it did more than once; None while
    no live broker has logged it.

    Every way counts, not one line: a client past ``max.poll.interval.ms`` sends LeaveGroup only while its
    connection to the coordinator is up (librdkafka); otherwise it stops heartbeating and its session expires;
    and a member that does not poll cannot rejoin a rebalance, which then goes on without it."""
    who = re.compile(rf"(?<![\w-]){re.escape(member)}({MEMBER_ID_TAIL})?(?![\w-])")
    found = []
    for broker in cluster.brokers:
        if not broker.alive:
            continue
        for line in cluster.broker_log(broker.id, grep=re.escape(group_id), lines=1000).splitlines():
            why = next((why for words, why in REMOVALS.items() if words in line), None)
            if why and who.search(line):
                found.append(Removal(line, logged_at(line), broker.id, why))
    return min(found, key=lambda r: r.t) if found else None


# ---------------------------------------------------------------------------------------------- rebalances
@dataclass(frozen=True)
class Holding:
    """``member`` owned ``partition`` of ``topic`` from ``start`` to ``end`` (wall-clock seconds)."""

    member: str
    topic: str
    partition: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def holdings(events: Sequence[MemberEvent], until: Optional[float] = None) -> list[Holding]:
    """Ownership intervals from members' rebalance events.

    An ``assign`` opens an interval for each partition it names; ``revoke`` and ``lost`` close
    the ones they name; ``killed`` and ``closed`` close all of that member's. Intervals
    still open end at ``until`` (default: the last event's time).
    """
    ordered = sorted(events, key=lambda e: e.t)
    if until is None:
        until = ordered[-1].t if ordered else 0.0
    open_: dict[tuple[str, str, int], float] = {}
    out: list[Holding] = []

    def close(key: tuple[str, str, int], t: float) -> None:
        start = open_.pop(key)
        out.append(Holding(key[0], key[1], key[2], start, max(t, start)))

    for e in ordered:
        if e.kind == "assign":
            for t, p in e.partitions:
                open_.setdefault((e.member, t, p), e.t)
        elif e.kind in ("revoke", "lost"):
            for t, p in e.partitions:
                if (e.member, t, p) in open_:
                    close((e.member, t, p), e.t)
        elif e.kind in ("killed", "closed", "start"):  # a (re)started process holds nothing yet
            for key in [k for k in open_ if k[0] == e.member]:
                close(key, e.t)
    for key in list(open_):
        close(key, until)
    return sorted(out, key=lambda h: (h.topic, h.partition, h.start))


def revocations(events: Sequence[MemberEvent], since: Optional[float] = None) -> dict[str, int]:
    """Per member: how many partitions it had taken away (revoked or lost) at or after ``since``."""
    out: dict[str, int] = {}
    for e in events:
        out.setdefault(e.member, 0)
        if e.kind in ("revoke", "lost") and (since is None or e.t >= since):
            out[e.member] += len(e.partitions)
    return out


def _overlap(h: Holding, since: float, until: float) -> tuple[float, float]:
    return max(h.start, since), min(h.end, until)


def _covered(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def idle_seconds(events: Sequence[MemberEvent], member: str, since: float, until: float) -> float:
    """Seconds in [since, until] during which ``member`` (alive all along) owned no partition at all."""
    spans = [_overlap(h, since, until) for h in holdings(events, until) if h.member == member]
    return max(until - since - _covered(spans), 0.0)


def unowned_seconds(events: Sequence[MemberEvent], since: float, until: float) -> dict[tuple[str, int], float]:
    """Per partition that had an owner at some point: seconds in [since, until] with no owner."""
    spans: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for h in holdings(events, until):
        spans.setdefault((h.topic, h.partition), []).append(_overlap(h, since, until))
    return {tp: max(until - since - _covered(s), 0.0) for tp, s in sorted(spans.items())}


def owned_at(events: Sequence[MemberEvent], t: float) -> dict[str, list[tuple[str, int]]]:
    """Who owned which partitions at wall-clock time ``t``."""
    out: dict[str, list[tuple[str, int]]] = {}
    for h in holdings(events, until=float("inf")):  # still open: owned from its start on
        if h.start <= t < h.end:
            out.setdefault(h.member, []).append((h.topic, h.partition))
    return {m: sorted(v) for m, v in sorted(out.items())}


def rebalance_table(events: Sequence[MemberEvent], since: float, until: float,
                    members: Optional[Sequence[str]] = None):  # -> pandas.DataFrame (imported lazily)
    """One row per member: partitions before ``since`` and at ``until``, how many it had revoked in between,
    and for how many seconds it had nothing to consume."""
    import pandas as pd

    if until <= since:
        raise LabkitError(f"until ({until}) must be later than since ({since}).", "Pass a window of time.")
    names = list(members) if members is not None else sorted({e.member for e in events})
    before, after = owned_at(events, since), owned_at(events, until - 1e-6)
    revoked = revocations(events, since)
    rows = [{"member": m, "partitions before": len(before.get(m, [])), "revoked": revoked.get(m, 0),
             "partitions after": len(after.get(m, [])),
             "seconds with nothing to consume": round(idle_seconds(events, m, since, until), 2)
             if before.get(m) else None}
            for m in names]
    return pd.DataFrame(rows).set_index("member")


# ---------------------------------------------------------------------------------------------- figures
def _colours(names: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in names:
        if n not in out:
            out[n] = PALETTE[len(out) % len(PALETTE)]
    return out


def _label(topic: str, partition: int, topics: set[str]) -> str:
    return f"p{partition}" if len(topics) <= 1 else f"{topic}-{partition}"


def rebalance_timeline(events: Events, t0: Optional[float] = None, until: Optional[float] = None,
                       marks: Optional[Mapping[str, float]] = None, title: Optional[str] = None) -> go.Figure:
    """Partitions (rows) over time: a bar for each stretch a member owned a partition, coloured by member.

    ``events``: a list of :class:`~labkit.workloads.MemberEvent`, or ``{panel title: events}`` for
    panels stacked one above the other (e.g. eager vs cooperative). Times are seconds after ``t0``
    (default: the first event); ``marks`` draws labelled vertical lines (``{"d joins": t}``).
    """
    panels = dict(events) if isinstance(events, Mapping) else {"": list(events)}
    if not any(panels.values()):
        raise LabkitError("No rebalance events to draw.", "Start group members first (labkit.workloads.Group).")
    every = [e for evs in panels.values() for e in evs]
    start = t0 if t0 is not None else min(e.t for e in every)
    colours = _colours(e.member for e in sorted(every, key=lambda e: (e.t, e.member)))
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=[t for t in panels] if len(panels) > 1 else None)
    shown: set[str] = set()
    rows_total = 0
    for row, (_name, evs) in enumerate(panels.items(), start=1):
        held = holdings(evs, until)
        topics = {h.topic for h in held}
        labels = sorted({(h.topic, h.partition) for h in held})
        rows_total += len(labels)
        for member in colours:
            mine = [h for h in held if h.member == member]
            if not mine:
                continue
            fig.add_trace(go.Bar(
                orientation="h", base=[h.start - start for h in mine], x=[h.seconds for h in mine],
                y=[_label(h.topic, h.partition, topics) for h in mine], name=member, legendgroup=member,
                showlegend=member not in shown, marker_color=colours[member], marker_line_width=0,
                customdata=[[member, round(h.start - start, 2), round(h.end - start, 2)] for h in mine],
                hovertemplate="%{y}: %{customdata[0]} from %{customdata[1]} s to %{customdata[2]} s<extra></extra>"),
                row=row, col=1)
            shown.add(member)
        fig.update_yaxes(categoryorder="array", autorange="reversed",
                         categoryarray=[_label(t, p, topics) for t, p in labels], row=row, col=1)
        for label, t in (marks or {}).items():
            fig.add_vline(x=t - start, line_dash="dash", line_color="#555", row=row, col=1)
            if row == 1:
                fig.add_annotation(x=t - start, y=1.0, yref="paper", text=label, showarrow=False,
                                   yanchor="bottom", font_size=11)
    fig.update_xaxes(title_text="seconds", row=len(panels), col=1)
    fig.update_layout(barmode="overlay", bargap=0.25, title=title or "Who owned which partition, when",
                      height=120 + 26 * rows_total + 50 * len(panels), margin=dict(l=50, r=20, t=70, b=40),
                      plot_bgcolor="white", legend_title_text="member")
    return fig


def assignment_heatmap(group: Union[GroupView, Assignment], partitions: Optional[Sequence[tuple[str, int]]] = None,
                       title: Optional[str] = None) -> go.Figure:
    """Members (rows) x partitions (columns): a filled cell where the member owns the partition.

    ``group``: a :class:`~labkit.view.widgets.GroupView` (see :func:`read_group`) or ``{member: [(topic, p)]}``.
    ``partitions``: the columns (default: every partition some member owns).
    """
    assignment = assignment_of(group) if isinstance(group, GroupView) else {m: sorted(v) for m, v in group.items()}
    columns = sorted(partitions if partitions is not None else {tp for v in assignment.values() for tp in v})
    if not assignment:
        raise LabkitError("The group has no members to draw.", "Start its consumers, then read the group again.")
    topics = {t for t, _ in columns}
    members = sorted(assignment)
    colours = _colours(members)
    owned = {m: set(v) for m, v in assignment.items()}
    z = [[i + 1 if tp in owned[m] else 0 for tp in columns] for i, m in enumerate(members)]
    n = len(members)
    scale: list[Any] = [(0.0, "#f4f6f7"), (0.5 / (n + 1), "#f4f6f7")]
    for i, m in enumerate(members, start=1):
        scale += [((i - 0.5) / (n + 0.5), colours[m]), (min(i / (n + 0.5), 1.0), colours[m])]
    scale[-1] = (1.0, scale[-1][1])
    text = [["●" if tp in owned[m] else "" for tp in columns] for m in members]
    fig = go.Figure(go.Heatmap(
        z=z, zmin=0, zmax=n, colorscale=scale, showscale=False, xgap=3, ygap=3,
        x=[_label(t, p, topics) for t, p in columns], y=members, text=text, texttemplate="%{text}",
        hovertemplate="%{y} owns %{x}<extra></extra>" if n else None))
    unowned = [tp for tp in columns if not any(tp in v for v in owned.values())]
    idle = [m for m in members if not owned[m]]
    notes = []
    if unowned:
        notes.append(f"no owner: {', '.join(_label(t, p, topics) for t, p in unowned)}")
    if idle:
        notes.append(f"idle: {', '.join(idle)}")
    fig.update_layout(title=title or ("Partitions per member" + (f" ({'; '.join(notes)})" if notes else "")),
                      height=120 + 36 * n, margin=dict(l=60, r=20, t=50, b=30), plot_bgcolor="white",
                      yaxis_autorange="reversed")
    return fig


def lag_bars(group: GroupView, title: Optional[str] = None) -> go.Figure:
    """Per partition: the committed offset (read) and the lag behind the log end, stacked."""
    rows = sorted(group.offsets.items())
    if not rows:
        raise LabkitError(f"Group {group.id!r} has no committed offsets or assigned partitions yet.",
                          "Let its members consume and commit, then read the group again.")
    topics = {t for (t, _), _ in rows}
    labels = [_label(t, p, topics) for (t, p), _ in rows]
    owners = [(group.owner(t, p).client_id if group.owner(t, p) else "no owner") for (t, p), _ in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[x.committed or 0 for _, x in rows], name="committed", marker_color="#2e86de",
                         customdata=owners, hovertemplate="%{x} (%{customdata}): committed %{y}<extra></extra>"))
    fig.add_trace(go.Bar(x=labels, y=[x.lag or 0 for _, x in rows], name="lag", marker_color="#e74c3c",
                         customdata=owners, hovertemplate="%{x} (%{customdata}): lag %{y}<extra></extra>"))
    fig.update_layout(barmode="stack", height=340, plot_bgcolor="white", yaxis_title="offset",
                      title=title or f"Group {group.id}: committed offset and lag per partition (total lag "
                                     f"{group.total_lag})", margin=dict(l=50, r=20, t=50, b=40))
    return fig
