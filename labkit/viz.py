"""Plotly figures of a cluster's state, for lessons.

Figures are built from the plain state objects in :mod:`labkit.admin`, so a
lesson can draw a snapshot taken before a failure next to one taken after it.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .admin import TopicState

#: Replica roles, in legend order, with their colours.
ROLES = {
    "leader": "#2e86de",
    "follower (in sync)": "#7bc67e",
    "follower (out of sync)": "#f39c12",
    "replica on a dead broker": "#c0392b",
    "no replica": "#f4f6f7",
}
_CODE = {name: i for i, name in enumerate(ROLES)}
#: A figure's title in a top margin of its own, just above the plot, under the row plotly's toolbar takes on
#: hover: the toolbar covered "(6 under-replicated)" at the end of a replica map's title (issue 26).
TITLE = dict(x=0, xref="paper", xanchor="left", y=1, yref="paper", yanchor="bottom", pad={"b": 8})
TOP_MARGIN = 70


def replica_roles(state: TopicState, brokers: Sequence[int], dead: Iterable[int] = ()) -> list[list[str]]:
    """For each partition (row) and broker (column): the role that broker plays."""
    dead = set(dead)
    rows = []
    for p in state.partitions:
        row = []
        for b in brokers:
            if b not in p.replicas:
                row.append("no replica")
            elif b in dead:
                row.append("replica on a dead broker")
            elif b == p.leader:
                row.append("leader")
            elif b in p.isr:
                row.append("follower (in sync)")
            else:
                row.append("follower (out of sync)")
        rows.append(row)
    return rows


def _heatmap(state: TopicState, brokers: Sequence[int], dead: Iterable[int], showscale: bool) -> go.Heatmap:
    roles = replica_roles(state, brokers, dead)
    n = len(ROLES)
    # A discrete colour scale: role i occupies the band [i/n, (i+1)/n].
    scale = []
    for i, colour in enumerate(ROLES.values()):
        scale += [(i / n, colour), ((i + 1) / n, colour)]
    text = [["L" if r == "leader" else ("F" if r.startswith("follower (in") else
             ("lag" if "out of sync" in r else ("✗" if "dead" in r else ""))) for r in row] for row in roles]
    return go.Heatmap(
        z=[[_CODE[r] + 0.5 for r in row] for row in roles], zmin=0, zmax=n, colorscale=scale, showscale=False,
        x=[f"broker {b}" for b in brokers], y=[f"p{p.partition}" for p in state.partitions],
        text=text, texttemplate="%{text}", textfont={"size": 14},
        customdata=roles, hovertemplate="%{y} on %{x}: %{customdata}<extra></extra>", xgap=3, ygap=3)


def partition_map(state: TopicState, brokers: Sequence[int], dead: Iterable[int] = (),
                  title: Optional[str] = None) -> go.Figure:
    """Partitions × brokers: who leads, who follows in sync, who lags, who is down."""
    fig = go.Figure(_heatmap(state, brokers, dead, showscale=False))
    _legend(fig)
    fig.update_layout(title={**TITLE, "text": title or f"Topic {state.name}: replicas per broker"},
                      height=160 + 40 * len(state), margin=dict(l=40, r=20, t=TOP_MARGIN, b=30),
                      yaxis_autorange="reversed", plot_bgcolor="white")
    return fig


def compare_partition_maps(snapshots: Mapping[str, tuple[TopicState, Iterable[int]]],
                           brokers: Sequence[int]) -> go.Figure:
    """Side-by-side partition maps, e.g. ``{"before": (state, dead), "after kill": (state2, {2})}``."""
    names = list(snapshots)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.08)
    for i, name in enumerate(names, start=1):
        state, dead = snapshots[name]
        fig.add_trace(_heatmap(state, brokers, dead, showscale=False), row=1, col=i)
        fig.update_yaxes(autorange="reversed", row=1, col=i)
    _legend(fig)
    rows = len(next(iter(snapshots.values()))[0])
    fig.update_layout(height=170 + 40 * rows, margin=dict(l=40, r=20, t=60, b=30), plot_bgcolor="white")
    return fig


def _legend(fig: go.Figure) -> None:
    for name, colour in ROLES.items():
        if name == "no replica":
            continue
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name,
                                 marker=dict(size=12, color=colour, symbol="square")))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.15, x=0), showlegend=True)
    fig.update_xaxes(showgrid=False, zeroline=False)
    fig.update_yaxes(showgrid=False, zeroline=False)
