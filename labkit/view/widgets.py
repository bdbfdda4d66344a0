"""A live view of a running cluster for notebooks: brokers with fault buttons, partition maps, groups and lag.

    view = cluster.view(topics=[orders])          # or labkit.view.widgets.live_view(cluster, ...)
    view                                          # renders; refreshes in a background thread
    view.snapshot()                               # the data it shows, as plain objects
    view.close()                                  # or cluster.stop(): the view notices and stops

The refresh runs in one daemon thread, at most ``max_rate`` times a second, so
cells keep running while the view updates. The widgets are only touched when
what they show changed, and after a few unchanged refreshes the thread polls
less often (down to every ``idle_refresh`` seconds) until something moves again;
a button press or a broker that labkit sees change state wakes it at once.
Errors while brokers are down go to the status line; nothing is raised into
the notebook. Consumer groups are read by a small child process (:mod:`labkit.view.groupread`).
Outside a live notebook the view renders as a static HTML (or text) snapshot.

Everything from the cluster to what is drawn goes through plain data
(:class:`~labkit.view.snapshot.Snapshot`, read by :mod:`labkit.view.snapshot`) and pure
functions (:mod:`labkit.view.render`), which is what the unit tests check; this
module only holds the widgets and the refresh thread.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ..errors import LabkitError, UnsupportedOperation
from .render import (ACTIONS, _esc, broker_card_html, button_states, cluster_heading_html, groups_html, metrics_html,
                     snapshot_html, snapshot_text, status_html, topic_title)
from .snapshot import BrokerView, ClusterReader, GroupsOption, Snapshot, _ClusterStopped, owns_brokers, short_error
from ..viz import TITLE, TOP_MARGIN, _heatmap, _legend

if TYPE_CHECKING:
    import pandas as pd

    from ..runtime.protocols import ClusterLike

log = logging.getLogger(__name__)

_BUTTON_STYLES = {"kill": "danger", "pause": "warning", "resume": "info", "restart": "success"}
#: How often (seconds) the thread looks at labkit's own broker states between refreshes.
_PROBE_SECONDS = 0.25
#: How long (seconds) a background refresh waits for the group reader before drawing without its answer.
_GROUPS_WAIT = 0.25


def next_interval(interval: float, idle_interval: float, unchanged: int) -> float:
    """Seconds until the next refresh after ``unchanged`` refreshes in a row that changed nothing.

    Two quiet refreshes keep the normal pace; after that the wait doubles each
    time, up to ``idle_interval``.
    """
    if unchanged <= 2:
        return interval
    return min(interval * 2 ** (unchanged - 2), max(idle_interval, interval))


# ---------------------------------------------------------------------------------------------- the view
#: Every view that is still refreshing, so a new view of the same cluster can retire the old one.
_LIVE_VIEWS: "weakref.WeakSet[ClusterView]" = weakref.WeakSet()


class ClusterView:
    """The live dashboard of one cluster. Display it (last expression of a cell); ``close()`` stops it.

    ``topics``: names to map (None: every topic, following new ones). ``groups``:
    None for every consumer group, a list of ids, or False for none. ``refresh``:
    seconds between refreshes (never faster than ``max_rate`` per second);
    ``idle_refresh``: the slowest pace while nothing changes (default 4 × refresh).
    ``replace``: stop other live views of the same cluster (so re-running a cell
    does not pile up threads). ``timeout``: seconds one refresh may wait on the cluster.
    ``metrics``: add the metrics panel (under-replicated and offline partitions, the active
    controller, bytes in/out, request p99, ISR shrinks/expands from the brokers' exporters);
    :meth:`metrics_history` is what it showed over time.
    """

    def __init__(self, cluster: "ClusterLike", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                 refresh: float = 1.0, *, max_rate: float = 4.0, idle_refresh: Optional[float] = None,
                 timeout: float = 3.0, replace: bool = True, metrics: bool = False) -> None:
        import ipywidgets as w

        if refresh <= 0 or max_rate <= 0:
            raise ValueError("refresh and max_rate must be positive (seconds between refreshes, refreshes per second)")
        self.cluster = cluster
        self.topics: Optional[list[str]] = None if topics is None else [cluster.topic_name(t) for t in topics]
        self.groups: GroupsOption = [groups] if isinstance(groups, str) else (
            sorted(groups) if isinstance(groups, (list, tuple, set, frozenset)) else groups)
        self.interval = max(refresh, 1.0 / max_rate)
        self.idle_interval = max(idle_refresh if idle_refresh is not None else 4 * self.interval, self.interval)
        self.timeout = timeout
        self.faults = owns_brokers(cluster)
        #: Counters for benchmarks and tests.
        self.refreshes = 0
        self.redraws = 0
        self.thread_cpu_seconds = 0.0
        self.last: Optional[Snapshot] = None
        self._unchanged = 0
        self._next_in = self.interval
        self._drawn_key: Optional[tuple] = None
        self._topic_keys: dict[str, tuple] = {}
        self._busy: set[int] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ui = threading.RLock()
        self._refreshing = threading.Lock()
        self._closed_reason = ""
        self._reader = ClusterReader(cluster, self.topics, self.groups, timeout=timeout, metrics=metrics)

        self.status = w.HTML(status_html(None, self.interval, self.interval))
        self.message = w.HTML()
        self.broker_box = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self.topic_box = w.VBox()
        self.group_html = w.HTML()
        self.metrics_html = w.HTML(metrics_html(None))
        self._cards: dict[int, tuple[Any, Any]] = {}
        #: (broker id, action) -> its Button, e.g. ``view.buttons[(2, "kill")].click()``.
        self.buttons: dict[tuple[int, str], Any] = {}
        self.figures: dict[str, Any] = {}
        parts = [w.HTML("<b>Brokers</b>" + ("" if self.faults else
                                             " <small>(this backend cannot break its brokers)</small>")),
                 self.broker_box, self.message]
        if metrics:
            parts += [w.HTML("<b>Metrics</b>"), self.metrics_html]
        parts.append(self.topic_box)
        if self.groups is not False:
            parts += [w.HTML("<b>Consumer groups</b>"), self.group_html]
        parts.append(self.status)
        # One of several named clusters (start_clusters): its name on top, its colour around the whole view.
        self.label, self.colour = getattr(cluster, "label", None), getattr(cluster, "colour", None)
        if self.label:
            parts.insert(0, w.HTML(cluster_heading_html(self.label, self.colour)))
        self.widget = w.VBox(parts, layout=w.Layout(border=f"3px solid {self.colour}", padding="4px")
                             if self.colour else w.Layout())

        if replace:
            for other in list(_LIVE_VIEWS):
                if other.cluster is cluster and other is not self:
                    other.close("replaced by a newer view of this cluster")
        try:
            self.refresh_now()
        except BaseException:
            self._reader.close()
            raise
        self._listen_for_stop()
        self._thread = threading.Thread(target=self._loop, name="labkit-cluster-view", daemon=True)
        _LIVE_VIEWS.add(self)
        self._thread.start()

    # ------------------------------------------------------------------ public
    @property
    def running(self) -> bool:
        """True while the refresh thread runs."""
        return self._thread.is_alive()

    def snapshot(self) -> Snapshot:
        """The data the view shows now (read at the last refresh)."""
        assert self.last is not None  # the constructor takes the first one
        return self.last

    def metrics_history(self) -> "pd.DataFrame":
        """What the metrics panel showed, one row per refresh (cluster-wide figures); empty without the panel."""
        import pandas as pd

        panel = self._reader.panel
        return panel.history() if panel is not None else pd.DataFrame()

    def refresh_now(self) -> Snapshot:
        """Read the cluster now (groups included) and redraw what changed; returns the snapshot.

        Cluster errors end up in the snapshot's ``errors``, not raised.
        """
        return self._refresh(groups_wait=None)

    def _refresh(self, groups_wait: Optional[float]) -> Snapshot:
        """Two steps: brokers and partition maps are drawn as soon as the metadata answers, then
        offsets and groups (waiting ``groups_wait`` s for the group reader, None: until it answers)."""
        with self._refreshing:
            layout = self._reader.layout(stopped=self._stop.is_set)
            with self._ui:
                # What the page shows until the second step is done: the new layout, the previous groups.
                kept = tuple(e for e in self.last.errors if e.startswith(("group", "offsets"))) if self.last else ()
                interim = replace(layout, groups=self.last.groups if self.last else (), errors=layout.errors + kept)
                self.last = interim
                self._draw_brokers(interim.brokers)
                self._draw_topics(interim)
            snap = self._reader.complete(layout, stopped=self._stop.is_set, groups_wait=groups_wait)
            changed = self._drawn_key != snap.key()
            self._unchanged = 0 if changed or snap.settling else self._unchanged + 1
            self._next_in = next_interval(self.interval, self.idle_interval, self._unchanged)
            with self._ui:
                self.last = snap
                self.refreshes += 1
                if changed:
                    self._draw(snap)
                    self.redraws += 1
                if not self._stop.is_set():
                    self.status.value = status_html(snap, self.interval, self._next_in)
            return snap

    def press(self, broker_id: int, action: str) -> threading.Thread:
        """What a broker button does: run ``action`` ("kill", "pause", "resume", "restart") in a worker thread.

        The result (or the error) appears in the view's message line; the view
        refreshes as soon as it is done. Returns the worker thread.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        with self._ui:
            self._busy.add(broker_id)
            self.message.value = f"<small><i>{action} broker {broker_id}…</i></small>"
            self._draw_brokers(self.last.brokers if self.last else ())
        worker = threading.Thread(target=self._run_action, args=(broker_id, action), daemon=True,
                                  name=f"labkit-view-{action}-{broker_id}")
        worker.start()
        return worker

    def close(self, reason: str = "view closed") -> None:
        """Stop refreshing; the widgets keep what they showed last, the buttons are switched off."""
        first = not self._stop.is_set()
        self._stop.set()
        self._wake.set()
        if first:
            self._closed_reason = reason
        if hasattr(self, "_thread") and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self.timeout * 3 + 5)
        self._finish()

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live widget in JupyterLab; a static HTML / text snapshot anywhere else."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        if self.last is not None:
            name = f" {self.label!r}" if self.label else ""
            bundle["text/html"] = snapshot_html(self.last, title=f"Kafka cluster{name} ({self._state_word()})",
                                                colour=self.colour)
        bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        name = f"{self.label} " if self.label else ""
        head = f"<ClusterView {name}{self._state_word()}, every {self.interval:g} s, {self.refreshes} refreshes>"
        return head if self.last is None else head + "\n" + snapshot_text(self.last)

    def _state_word(self) -> str:
        if hasattr(self, "_thread") and self.running:
            return "live"
        return self._closed_reason or "stopped"

    # ------------------------------------------------------------------ drawing (under self._ui)
    def _draw(self, snap: Snapshot) -> None:
        self._drawn_key = snap.key()
        self._draw_brokers(snap.brokers)
        self._draw_topics(snap)
        if self.groups is not False:
            self.group_html.value = groups_html(snap.groups)
        if snap.metrics is not None:
            self.metrics_html.value = metrics_html(snap.metrics)

    def _draw_brokers(self, brokers: Sequence[BrokerView]) -> None:
        stopped = self._stop.is_set()
        for b in brokers:
            if b.id not in self._cards:
                self._cards[b.id] = self._broker_card(b.id)
            _, label = self._cards[b.id]
            text = broker_card_html(b)
            if label.value != text:
                label.value = text
            states = button_states(b.state, self.faults and not stopped, b.id in self._busy)
            for action, enabled in states.items():
                button = self.buttons[(b.id, action)]
                if button.disabled == enabled:
                    button.disabled = not enabled
        cards = [self._cards[b.id][0] for b in brokers]
        if list(self.broker_box.children) != cards:
            self.broker_box.children = cards

    def _broker_card(self, broker_id: int) -> tuple[Any, Any]:
        import ipywidgets as w

        label = w.HTML()
        buttons = []
        for action in ACTIONS:
            tip = (f"{action} broker {broker_id}" if self.faults else
                   "Not possible here: labkit does not own this cluster's brokers (start one with start_cluster()).")
            b = w.Button(description=action, button_style=_BUTTON_STYLES[action], tooltip=tip, disabled=True,
                         layout=w.Layout(width="76px"))
            b.on_click(lambda _b, bid=broker_id, a=action: self.press(bid, a))
            self.buttons[(broker_id, action)] = b
            buttons.append(b)
        card = w.VBox([label, w.HBox(buttons)],
                      layout=w.Layout(border="1px solid #ddd", padding="4px", margin="2px"))
        return card, label

    def _draw_topics(self, snap: Snapshot) -> None:
        import plotly.graph_objects as go

        names = list(snap.topics) if self.topics is None else [t for t in self.topics if t in snap.topics]
        for name in names:
            key = snap.topic_key(name)
            if self._topic_keys.get(name) == key:
                continue
            self._topic_keys[name] = key
            state = snap.topics[name]
            heat = _heatmap(state, snap.broker_ids, snap.dead_brokers, showscale=False)
            fig = self.figures.get(name)
            if fig is None:
                fig = go.FigureWidget()
                fig.add_trace(heat)
                _legend(fig)
                fig.update_layout(plot_bgcolor="white", margin=dict(l=40, r=20, t=TOP_MARGIN, b=30), title=TITLE,
                                  yaxis_autorange="reversed")
                self.figures[name] = fig
            with fig.batch_update():
                trace = fig.data[0]
                trace.z, trace.text, trace.customdata = heat.z, heat.text, heat.customdata
                trace.x, trace.y = heat.x, heat.y
                fig.layout.title.text = topic_title(state)
                fig.layout.height = 180 + 34 * len(state)
        shown = [self.figures[n] for n in names if n in self.figures]
        if list(self.topic_box.children) != shown:
            self.topic_box.children = shown

    # ------------------------------------------------------------------ the thread
    def _loop(self) -> None:
        cpu0 = time.thread_time()
        try:
            took = 0.0
            while self._pause(max(self._next_in - took, _PROBE_SECONDS / 5)):
                started = time.monotonic()
                try:
                    self._refresh(groups_wait=_GROUPS_WAIT)
                except _ClusterStopped:
                    break
                except Exception as exc:
                    log.debug("live view refresh failed", exc_info=True)
                    with self._ui:
                        self.status.value = (f"<small style='color:#c0392b'>refresh failed: "
                                             f"{_esc(short_error(exc))}</small>")
                took = time.monotonic() - started  # refreshes start every interval, however long one takes
                self.thread_cpu_seconds = time.thread_time() - cpu0
        finally:
            self.thread_cpu_seconds = time.thread_time() - cpu0
            if self._cluster_stopped() and not self._stop.is_set():
                self._closed_reason = "cluster stopped · view stopped"
            self._stop.set()
            self._finish()

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` (less if woken or if a broker changed state); False when the view must stop."""
        deadline = time.monotonic() + seconds
        seen = self._local_states()
        while True:
            if self._stop.is_set() or self._cluster_stopped():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if self._wake.wait(min(left, _PROBE_SECONDS)):
                self._wake.clear()
                self._unchanged = 0
                return not self._stop.is_set()
            if seen is not None and self._local_states() != seen:
                self._unchanged = 0
                return True

    def _local_states(self) -> Optional[tuple]:
        """labkit's own broker states when reading them is free (processes on this machine), else None."""
        if getattr(self.cluster, "backend", "") != "native":
            return None
        try:
            return tuple((b.id, b.state) for b in self.cluster.brokers)
        except Exception:  # noqa: BLE001
            return None

    def _cluster_stopped(self) -> bool:
        return bool(getattr(self.cluster, "stopped", False))

    def _listen_for_stop(self) -> None:
        """Stop with the cluster: through its ``on_stop`` hook when it has one (else the loop polls ``stopped``)."""
        hook = getattr(self.cluster, "on_stop", None)
        if not callable(hook):
            return
        me = weakref.ref(self)

        def stopped() -> None:
            view = me()
            if view is not None:
                view._closed_reason = view._closed_reason or "cluster stopped · view stopped"
                view._stop.set()
                view._wake.set()

        hook(stopped)

    def _run_action(self, broker_id: int, action: str) -> None:
        t0 = time.monotonic()
        try:
            getattr(self.cluster, ACTIONS[action])(broker_id)
            text = f"<small>{action} broker {broker_id}: done in {time.monotonic() - t0:.1f} s</small>"
        except UnsupportedOperation as exc:
            self.faults = False
            text = f"<small style='color:#c0392b'>{_esc(exc)}</small>"
        except LabkitError as exc:
            text = f"<small style='color:#c0392b'>{action} broker {broker_id}: {_esc(exc)}</small>"
        except Exception as exc:
            log.debug("live view action failed", exc_info=True)
            text = f"<small style='color:#c0392b'>{action} broker {broker_id} failed: {_esc(short_error(exc))}</small>"
        with self._ui:
            self._busy.discard(broker_id)
            self.message.value = text
            self._draw_brokers(self._fresh_brokers())
        self._wake.set()

    def _fresh_brokers(self) -> tuple[BrokerView, ...]:
        """The last snapshot's brokers with labkit's current states (the metadata follows at the next refresh)."""
        if self.last is None:
            return ()
        try:
            states = {b.id: b.state for b in self.cluster.brokers}
        except Exception:  # noqa: BLE001
            return self.last.brokers
        return tuple(BrokerView(b.id, states.get(b.id, b.state), b.registered) for b in self.last.brokers)

    def _finish(self) -> None:
        """Show that the view stopped and switch the buttons off (idempotent)."""
        _LIVE_VIEWS.discard(self)
        thread = getattr(self, "_thread", None)
        if thread is None or threading.current_thread() is thread or not thread.is_alive():
            self._reader.close()  # only once nobody reads through it any more
        with self._ui:
            reason = self._closed_reason or "view stopped"
            text = status_html(self.last, self.interval, self.interval, state=reason)
            if self.status.value != text:
                self.status.value = text
            for button in self.buttons.values():
                if not button.disabled:
                    button.disabled = True


def live_view(cluster: "ClusterLike", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
              refresh: float = 1.0, **options: Any) -> ClusterView:
    """A :class:`ClusterView` of ``cluster``: every topic and group unless given. Same as ``cluster.view()``."""
    return ClusterView(cluster, topics=topics, groups=groups, refresh=refresh, **options)


__all__ = ["ClusterView", "live_view", "next_interval"]
