"""A live view of a running cluster for notebooks: brokers with fault buttons, partition maps, groups and lag.

    view = labkit.widgets.ClusterView(cluster, topics=[orders])
    view                      # renders; refreshes in a background thread
    view.close()              # or cluster.stop(): the view notices and stops

The refresh runs in a daemon thread (at most ``max_rate`` times a second), so
cells keep running while the view updates; the widgets are only touched when
the state changed. Errors while brokers are down go to the status line.
"""

from __future__ import annotations

import html
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from .admin import TopicState
from .viz import ROLES, _heatmap, _legend

if TYPE_CHECKING:
    from .cluster import Cluster

log = logging.getLogger(__name__)

STATE_COLOURS = {"running": "#27ae60", "paused": "#f39c12", "stopped": "#7f8c8d", "killed": "#c0392b",
                 "external": "#2e86de"}


@dataclass
class GroupView:
    """One consumer group as the broker reports it."""

    id: str
    state: str
    #: member id -> (client id, [(topic, partition), ...])
    members: dict[str, tuple[str, list[tuple[str, int]]]] = field(default_factory=dict)
    #: (topic, partition) -> (committed offset or None, log end offset, lag or None)
    lag: dict[tuple[str, int], tuple[Optional[int], int, Optional[int]]] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(x[2] or 0 for x in self.lag.values())


@dataclass
class Snapshot:
    """What the view shows at one moment."""

    brokers: list[tuple[int, str, bool]]  # (id, state labkit knows, registered in metadata)
    topics: dict[str, TopicState]
    groups: list[GroupView]
    error: Optional[str] = None

    def key(self) -> tuple:
        """Everything that changes what is drawn (so unchanged snapshots skip the redraw)."""
        topics = tuple((n, tuple((p.leader, p.replicas, p.isr, p.high_watermark) for p in s.partitions))
                       for n, s in sorted(self.topics.items()))
        groups = tuple((g.id, g.state, tuple(sorted((m, tuple(tps)) for m, (_, tps) in g.members.items())),
                        tuple(sorted(g.lag.items()))) for g in self.groups)
        return (tuple(self.brokers), topics, groups, self.error)


def read_groups(cluster: "Cluster", timeout: float = 2.0, prefix_ignore: str = "labkit-") -> list[GroupView]:
    """Consumer groups with members, their partitions, committed offsets and lag."""
    admin = cluster.admin()
    listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    ids = sorted(g.group_id for g in listed.valid if not g.group_id.startswith(prefix_ignore))
    if not ids:
        return []
    views = []
    described = admin.describe_consumer_groups(ids, request_timeout=timeout)
    for gid in ids:
        desc = described[gid].result(timeout=timeout)
        view = GroupView(gid, str(desc.state).split(".")[-1].lower())
        for m in desc.members:
            tps = [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])]
            view.members[m.member_id] = (m.client_id, sorted(tps))
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)],
                                                    request_timeout=timeout)[gid].result(timeout=timeout)
        committed = {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None)
                     for tp in offsets.topic_partitions}
        assigned = {tp for _, tps in view.members.values() for tp in tps}
        wanted = sorted(set(committed) | assigned)
        if wanted:
            ends = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted},
                                      request_timeout=timeout)
            for (t, p) in wanted:
                end = ends[TopicPartition(t, p)].result(timeout=timeout).offset
                done = committed.get((t, p))
                view.lag[(t, p)] = (done, end, None if done is None else max(end - done, 0))
        views.append(view)
    return views


def take_snapshot(cluster: "Cluster", topics: Sequence[str], groups: bool = True) -> Snapshot:
    """Read brokers, topics and groups once; failures become the snapshot's ``error``."""
    brokers_known = [(b.id, b.state) for b in cluster.brokers]
    error = None
    try:
        registered = cluster.live_broker_ids()
    except Exception as exc:  # the cluster may be half down: show it, do not raise
        registered, error = set(), f"metadata: {exc}"
    states: dict[str, TopicState] = {}
    for t in topics:
        try:
            states[t] = cluster.describe_topic(t, timeout=2.0)
        except Exception as exc:
            error = f"{t}: {exc}"
    group_views: list[GroupView] = []
    if groups:
        try:
            group_views = read_groups(cluster)
        except Exception as exc:
            error = f"groups: {exc}"
    brokers = [(bid, state, bid in registered) for bid, state in brokers_known]
    return Snapshot(brokers, states, group_views, error)


def groups_html(groups: list[GroupView]) -> str:
    """Consumer groups as a compact HTML table."""
    if not groups:
        return "<i>No consumer groups yet.</i>"
    rows = []
    for g in groups:
        members = "<br>".join(
            f"{html.escape(client or mid[:12])}: " + (", ".join(f"{t}-{p}" for t, p in tps) or "<i>idle</i>")
            for mid, (client, tps) in sorted(g.members.items())) or "<i>no members</i>"
        lag = ", ".join(f"p{p}: {'–' if x[2] is None else x[2]}" for (t, p), x in sorted(g.lag.items()))
        rows.append(f"<tr><td><b>{html.escape(g.id)}</b><br><small>{g.state}</small></td>"
                    f"<td style='text-align:left'>{members}</td><td style='text-align:left'>{lag or '–'}</td>"
                    f"<td><b>{g.total_lag}</b></td></tr>")
    return ("<table><thead><tr><th>group</th><th>members → partitions</th><th>lag per partition</th>"
            f"<th>total lag</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


class ClusterView:
    """The live dashboard. Display it (last expression of a cell); ``close()`` stops it."""

    def __init__(self, cluster: "Cluster", topics: Optional[Sequence[str]] = None, groups: bool = True,
                 refresh: float = 1.0, max_rate: float = 4.0) -> None:
        import ipywidgets as w

        self.cluster = cluster
        self.topics = [cluster.topic_name(t) for t in (topics if topics is not None else cluster.topics())]
        self.show_groups = groups
        self.interval = max(refresh, 1.0 / max_rate)
        self.refreshes = 0
        self.cpu_seconds = 0.0
        self.last: Optional[Snapshot] = None
        self._last_key: Optional[tuple] = None
        self._stop = threading.Event()
        self._busy = threading.Lock()

        self.status = w.HTML()
        self.broker_box = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self._broker_cards: dict[int, tuple[Any, Any]] = {}
        self.figures: dict[str, Any] = {}
        self.group_html = w.HTML()
        self.message = w.HTML()
        parts = [w.HTML("<b>Brokers</b>"), self.broker_box, self.message]
        for t in self.topics:
            parts.append(self._topic_figure(t))
        if groups:
            parts += [w.HTML("<b>Consumer groups</b>"), self.group_html]
        parts.append(self.status)
        self.widget = w.VBox(parts)
        self._draw(take_snapshot(cluster, self.topics, groups))
        self._thread = threading.Thread(target=self._loop, name="labkit-cluster-view", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- drawing
    def _topic_figure(self, topic: str) -> Any:
        import plotly.graph_objects as go

        fig = go.FigureWidget()
        fig.update_layout(title=f"{topic}: replicas per broker", height=150, plot_bgcolor="white",
                          margin=dict(l=40, r=20, t=40, b=30), yaxis_autorange="reversed")
        self.figures[topic] = fig
        return fig

    def _broker_card(self, broker_id: int) -> tuple[Any, Any]:
        import ipywidgets as w

        label = w.HTML()
        owns = self._owns_brokers()
        buttons = []
        for text, action, style in (("kill", self.cluster.kill_broker, "danger"),
                                    ("pause", self.cluster.pause_broker, "warning"),
                                    ("resume", self.cluster.resume_broker, "info"),
                                    ("restart", self.cluster.start_broker, "success")):
            b = w.Button(description=text, button_style=style, layout=w.Layout(width="76px"),
                         disabled=not owns,
                         tooltip=f"{text} broker {broker_id}" if owns else "this backend cannot break its brokers")
            b.on_click(self._handler(action, broker_id, text))
            buttons.append(b)
        card = w.VBox([label, w.HBox(buttons)], layout=w.Layout(border="1px solid #ddd", padding="4px",
                                                                margin="2px"))
        return card, label

    def _owns_brokers(self) -> bool:
        return getattr(self.cluster, "backend", "external") != "external"

    def _handler(self, action: Callable[[int], None], broker_id: int, text: str) -> Callable[[Any], None]:
        def run(_button: Any) -> None:
            self.message.value = f"<i>{text} broker {broker_id}…</i>"

            def work() -> None:
                try:
                    action(broker_id)
                    self.message.value = f"{text} broker {broker_id}: done"
                except Exception as exc:  # shown, never raised into the kernel
                    self.message.value = f"<span style='color:#c0392b'>{html.escape(str(exc))}</span>"
                self.refresh_now()

            threading.Thread(target=work, daemon=True).start()

        return run

    def _draw(self, snap: Snapshot) -> None:
        key = snap.key()
        if key == self._last_key:
            return
        self._last_key = key
        self.last = snap
        cards = []
        for bid, state, registered in snap.brokers:
            if bid not in self._broker_cards:
                self._broker_cards[bid] = self._broker_card(bid)
            card, label = self._broker_cards[bid]
            colour = STATE_COLOURS.get(state, "#7f8c8d")
            seen = "in metadata" if registered else "not in metadata"
            label.value = (f"<b>broker {bid}</b> <span style='color:{colour};font-weight:bold'>● {state}</span>"
                           f"<br><small>{seen}</small>")
            cards.append(card)
        if list(self.broker_box.children) != cards:
            self.broker_box.children = cards
        brokers = [b for b, _, _ in snap.brokers]
        dead = [b for b, state, registered in snap.brokers if state in ("killed", "stopped") or not registered]
        for topic, fig in self.figures.items():
            state = snap.topics.get(topic)
            if state is None:
                continue
            heat = _heatmap(state, brokers, dead, showscale=False)
            with fig.batch_update():
                if not fig.data:
                    fig.add_trace(heat)
                    _legend(fig)
                    fig.update_layout(height=150 + 34 * len(state))
                else:
                    fig.data[0].z, fig.data[0].text, fig.data[0].customdata = heat.z, heat.text, heat.customdata
                    fig.data[0].x, fig.data[0].y = heat.x, heat.y
        if self.show_groups:
            self.group_html.value = groups_html(snap.groups)

    def _quick_brokers(self) -> None:
        """Show a broker's new state at once: the full refresh may wait seconds on a dead leader."""
        for b in self.cluster.brokers:
            card = self._broker_cards.get(b.id)
            if card is not None and f"● {b.state}<" not in card[1].value:
                colour = STATE_COLOURS.get(b.state, "#7f8c8d")
                card[1].value = (f"<b>broker {b.id}</b> <span style='color:{colour};font-weight:bold'>● {b.state}"
                                 f"</span><br><small>updating…</small>")

    def _status(self, took: float) -> None:
        error = f" · <span style='color:#c0392b'>{html.escape(self.last.error)}</span>" if self.last and self.last.error else ""
        self.status.value = (f"<small>live · updated {time.strftime('%H:%M:%S')} in {took * 1000:.0f} ms · "
                             f"every {self.interval:g} s{error}</small>")

    # ---------------------------------------------------------------- refreshing
    def refresh_now(self) -> Snapshot:
        """Read the cluster and redraw if something changed; returns the snapshot."""
        with self._busy:
            t0, cpu0 = time.monotonic(), time.thread_time()
            self._quick_brokers()
            snap = take_snapshot(self.cluster, self.topics, self.show_groups)
            self._draw(snap)
            self.refreshes += 1
            self.cpu_seconds += time.thread_time() - cpu0
            self._status(time.monotonic() - t0)
            return snap

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if getattr(self.cluster, "stopped", False):
                self.status.value = "<small>cluster stopped · view closed</small>"
                break
            try:
                self.refresh_now()
            except Exception as exc:  # keep the view alive; say what went wrong
                self.status.value = f"<small style='color:#c0392b'>refresh failed: {html.escape(str(exc))}</small>"
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop refreshing (the widgets stay as they were last drawn)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def snapshot(self) -> Snapshot:
        """The data the view last showed."""
        assert self.last is not None
        return self.last

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def __repr__(self) -> str:
        snap = self.last
        if snap is None:
            return "<ClusterView>"
        brokers = ", ".join(f"{b}:{s}" for b, s, _ in snap.brokers)
        return f"<ClusterView brokers=[{brokers}] topics={list(snap.topics)} groups={[g.id for g in snap.groups]}>"


def live_view(cluster: "Cluster", topics: Optional[Sequence[str]] = None, **kw: Any) -> ClusterView:
    """A :class:`ClusterView` of ``cluster`` (all topics unless given)."""
    return ClusterView(cluster, topics=topics, **kw)


__all__ = ["ClusterView", "GroupView", "Snapshot", "groups_html", "live_view", "read_groups", "take_snapshot",
           "ROLES"]
