"""Pure renderers of a :class:`~labkit.view.snapshot.Snapshot`: HTML for notebooks, text for terminals.

Everything the live view draws that is not a plotly figure, and the static
snapshot a saved notebook or a non-widget frontend shows instead of the live
view. Plain functions of plain data, tested without a cluster.
"""

from __future__ import annotations

import html
import re
import time
from typing import Any, Iterable, Optional, Sequence

from ..admin import TopicState
from .groupread import GroupView
from .panel import PanelData
from .snapshot import BrokerView, Snapshot
from ..viz import ROLES, replica_roles

#: Broker status (what the view shows) -> colour.
STATUS_COLOURS = {"up": "#27ae60", "starting": "#2e86de", "paused": "#f39c12", "down": "#c0392b"}
#: Button label -> the Cluster method it calls.
ACTIONS = {"kill": "kill_broker", "pause": "pause_broker", "resume": "resume_broker", "restart": "start_broker"}
#: Text marks per replica role in the static partition map (the figure uses the same ones).
_ROLE_MARKS = {"leader": "L", "follower (in sync)": "F", "follower (out of sync)": "lag",
               "replica on a dead broker": "✗", "no replica": ""}


def broker_detail(broker: BrokerView) -> str:
    """One line under the broker's status: what labkit did and what the metadata says."""
    listed = "in metadata" if broker.registered else "not in metadata"
    if broker.status == "down":
        return f"{broker.state} · " + ("still in metadata until its session times out" if broker.registered
                                       else "gone from metadata")
    if broker.status == "paused":
        return "frozen (no answers) · " + listed
    if broker.status == "starting":
        return "process running · not in metadata yet"
    return listed


def button_states(state: str, faults: bool = True, busy: bool = False) -> dict[str, bool]:
    """Which fault buttons make sense for a broker in ``state`` (all off without fault injection or while busy)."""
    if not faults or busy:
        return {a: False for a in ACTIONS}
    running, paused = state == "running", state == "paused"
    return {"kill": running or paused, "pause": running, "resume": paused, "restart": state in ("killed", "stopped")}


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _dash(value: Optional[int]) -> str:
    return "–" if value is None else str(value)


def broker_card_html(broker: BrokerView) -> str:
    """The label of one broker card."""
    colour = STATUS_COLOURS[broker.status]
    return (f"<b>broker {broker.id}</b> <span style='color:{colour};font-weight:bold'>● {broker.status}</span>"
            f"<br><small>{_esc(broker_detail(broker))}</small>")


_CELL_TAG = re.compile(r"<(t[hd])((?:\s[^>]*)?)>")


def _aligned(table: str, right_from: int) -> str:
    """``table`` with its cells padded and on one line, the columns from ``right_from`` on (numbers) right-aligned,
    their headers with them. A widget's HTML gets none of JupyterLab's table styles: the metrics table's headers
    ran together, wrapped, and stood off their columns (issue 26). A cell's own style still wins."""
    rows = []
    for row in re.split(r"(?=<tr)", table):
        column = 0

        def style(match: "re.Match[str]") -> str:
            nonlocal column
            tag, attrs = match.group(1), match.group(2)
            span = re.search(r"colspan='(\d+)'", attrs)
            base = f"padding:1px 8px;white-space:nowrap;text-align:{'right' if column >= right_from else 'left'};"
            column += int(span.group(1)) if span else 1
            if "style='" in attrs:
                return "<" + tag + attrs.replace("style='", "style='" + base, 1) + ">"
            return f"<{tag}{attrs} style='{base}'>"

        rows.append(_CELL_TAG.sub(style, row))
    return "".join(rows)


def brokers_html(brokers: Sequence[BrokerView]) -> str:
    """Brokers as an HTML table (the static view)."""
    rows = "".join(f"<tr><td>{b.id}</td><td style='color:{STATUS_COLOURS[b.status]}'><b>● {b.status}</b></td>"
                   f"<td>{_esc(broker_detail(b))}</td></tr>" for b in brokers)
    return f"<table><tr><th>broker</th><th>status</th><th></th></tr>{rows}</table>"


def partition_map_html(state: TopicState, brokers: Sequence[int], dead: Iterable[int] = ()) -> str:
    """A partition × broker table coloured by replica role (the static twin of the live figure)."""
    roles = replica_roles(state, brokers, dead)
    head = "".join(f"<th>broker {b}</th>" for b in brokers)
    rows = []
    for p, row in zip(state.partitions, roles):
        cells = "".join(f"<td title='{_esc(r)}' style='background:{ROLES[r]};text-align:center;min-width:4em'>"
                        f"{_ROLE_MARKS[r]}</td>" for r in row)
        rows.append(f"<tr><th>p{p.partition}</th>{cells}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def roles_legend_html() -> str:
    return " ".join(f"<span style='background:{c};padding:0 6px'>{_ROLE_MARKS[r] or '&nbsp;'}</span> {_esc(r)}"
                    for r, c in ROLES.items() if r != "no replica")


def groups_html(groups: Sequence[GroupView]) -> str:
    """Consumer groups as one HTML table: per partition its owner, committed and log-end offsets, and lag."""
    if not groups:
        return "<i>No consumer groups yet.</i>"
    rows = []
    for g in groups:
        members = "; ".join(f"{_esc(m.client_id or m.member_id[:12])} → "
                            + (", ".join(f"{t}-{p}" for t, p in m.partitions) or "<i>nothing</i>")
                            for m in g.members) or "<i>no members</i>"
        rows.append(f"<tr style='border-top:2px solid #ccc'><td><b>{_esc(g.id)}</b></td><td>{_esc(g.state)}</td>"
                    f"<td colspan='3' style='text-align:left'>{members}</td>"
                    f"<td><b>{g.total_lag}</b></td></tr>")
        for (t, p), x in sorted(g.offsets.items()):
            owner = g.owner(t, p)
            who = _esc(owner.client_id or owner.member_id[:12]) if owner else "<i>unassigned</i>"
            lag = x.lag
            colour = "#c0392b" if lag else "inherit"
            rows.append(f"<tr><td></td><td>{_esc(t)}-{p}</td><td>{who}</td><td>{_dash(x.committed)}</td>"
                        f"<td>{_dash(x.end)}</td><td style='color:{colour}'>{_dash(lag)}</td></tr>")
    return ("<table><thead><tr><th>group</th><th>state / partition</th><th>member</th><th>committed</th>"
            f"<th>log end</th><th>lag</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _rate(value: Optional[float]) -> str:
    """Bytes per second, readable: ``–``, ``850 B/s``, ``12.3 kB/s``, ``4.1 MB/s``."""
    if value is None:
        return "–"
    for unit, size in (("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B/s"


def _number(value: Optional[float], unit: str = "") -> str:
    return "–" if value is None else f"{value:g}{unit}"


def metrics_html(data: Optional[PanelData]) -> str:
    """The metrics panel: the cluster-wide figures an alert watches, then one row per broker."""
    if data is None:
        return "<i>No metrics yet.</i>"
    urp, offline, controller = data.under_replicated, data.offline_partitions, data.active_controller

    def flag(value: Optional[int], text: str) -> str:
        colour = "#c0392b" if value else "#27ae60"
        return f"<span style='color:{colour}'><b>{_dash(value)}</b> {text}</span>"

    head = " · ".join([flag(urp, "under-replicated"), flag(offline, "offline"),
                       f"active controller: <b>{_dash(controller)}</b>",
                       f"ISR shrinks / expands: <b>{data.isr_shrinks} / {data.isr_expands}</b>"])
    rows = []
    for b in data.brokers:
        if not b.up:
            rows.append(f"<tr><td>{b.broker}</td><td colspan='7' style='color:#c0392b;text-align:left'>not answering"
                        f" ({_esc(b.error)})</td></tr>")
            continue
        colour = "#c0392b" if b.under_replicated else "inherit"
        rows.append(f"<tr><td>{b.broker}{' ★' if b.active_controller else ''}</td>"
                    f"<td style='color:{colour}'>{_number(b.under_replicated)}</td>"
                    f"<td>{_rate(b.bytes_in_per_s)}</td><td>{_rate(b.bytes_out_per_s)}</td>"
                    f"<td>{_number(b.produce_p99_ms, ' ms')}</td><td>{_number(b.fetch_p99_ms, ' ms')}</td>"
                    f"<td>{_number(b.isr_shrinks)}</td><td>{_number(b.isr_expands)}</td></tr>")
    table = _aligned("<table><thead><tr><th>broker</th><th>under-replicated</th><th>bytes in</th><th>bytes out</th>"
                     "<th>produce p99</th><th>fetch p99</th><th>ISR shrinks</th><th>ISR expands</th></tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table>", right_from=1)
    return (f"<div class='labkit-metrics'><small>{head}</small>{table}"
            "<small>★ active controller · from each broker's Prometheus JMX exporter</small></div>")


def cluster_heading_html(label: Optional[str], colour: Optional[str]) -> str:
    """The name of one of several clusters (``start_clusters``) in its colour; '' for a cluster without a name."""
    if not label:
        return ""
    return f"<b style='color:{_esc(colour or '#000')};font-size:110%'>&#9632; {_esc(label)}</b>"


def snapshot_html(snap: Snapshot, title: str = "Kafka cluster", colour: Optional[str] = None) -> str:
    """The whole view as static HTML: what a saved notebook, nbconvert or a non-widget frontend shows
    (``colour``: the frame of one of several named clusters)."""
    frame = f" style='border-left:4px solid {_esc(colour)};padding-left:6px'" if colour else ""
    parts = [f"<div{frame}><b>{_esc(title)}</b> <small>(snapshot {time.strftime('%H:%M:%S', time.localtime(snap.taken_at))}"
             "; live in JupyterLab)</small>", brokers_html(snap.brokers)]
    for name, state in sorted(snap.topics.items()):
        parts.append(f"<p><b>{_esc(name)}</b></p>" + partition_map_html(state, snap.broker_ids, snap.dead_brokers))
    if snap.topics:
        parts.append(f"<p><small>{roles_legend_html()}</small></p>")
    parts.append("<p><b>Consumer groups</b></p>" + groups_html(snap.groups))
    if snap.metrics is not None:
        parts.append("<p><b>Metrics</b></p>" + metrics_html(snap.metrics))
    if snap.errors:
        parts.append(f"<p style='color:#c0392b'>{_esc(snap.error)}</p>")
    return "".join(parts) + "</div>"


def snapshot_text(snap: Snapshot) -> str:
    """The whole view as plain text (terminal, logs)."""
    lines = ["brokers: " + ", ".join(f"{b.id} {b.status}" for b in snap.brokers)]
    for name, state in sorted(snap.topics.items()):
        lines.append(f"topic {name}:")
        for p in state.partitions:
            lines.append(f"  p{p.partition}: leader={p.leader} replicas={list(p.replicas)} isr={list(p.isr)}")
    for g in snap.groups:
        lag = ", ".join(f"{t}-{p}:{_dash(x.lag)}" for (t, p), x in sorted(g.offsets.items()))
        lines.append(f"group {g.id} ({g.state}, {len(g.members)} members): lag {g.total_lag} [{lag}]")
    if snap.metrics is not None:
        m = snap.metrics
        lines.append(f"metrics: under-replicated {_dash(m.under_replicated)}, offline {_dash(m.offline_partitions)}, "
                     f"active controller {_dash(m.active_controller)}, ISR shrinks/expands {m.isr_shrinks}/{m.isr_expands}")
    if snap.errors:
        lines.append("errors: " + "; ".join(snap.errors))
    return "\n".join(lines)


def status_html(snap: Optional[Snapshot], interval: float, next_in: float, state: str = "live") -> str:
    """The status line: live or stopped, last refresh time and duration, pace, errors."""
    if state != "live":
        return f"<small style='color:#7f8c8d'>■ {_esc(state)}</small>"
    if snap is None:
        return "<small>● live · reading the cluster…</small>"
    pace = f"every {interval:g} s" if next_in <= interval + 1e-9 else f"quiet: next look in {next_in:.0f} s"
    text = (f"<small>● live · updated {time.strftime('%H:%M:%S', time.localtime(snap.taken_at))} "
            f"in {snap.took * 1000:.0f} ms · {pace}")
    if snap.errors:
        text += f" · <span style='color:#c0392b'>{_esc(snap.error)}</span>"
    return text + "</small>"


def topic_title(state: TopicState) -> str:
    """Figure title: the topic and what is wrong with it, if anything."""
    offline = sum(p.leader is None for p in state.partitions)
    under = sum(bool(p.out_of_sync) for p in state.partitions)
    notes = [f"{offline} offline" if offline else "", f"{under} under-replicated" if under else ""]
    extra = " · ".join(n for n in notes if n)
    return f"{state.name}: replicas per broker" + (f" <span style='color:#c0392b'>({extra})</span>" if extra else "")
