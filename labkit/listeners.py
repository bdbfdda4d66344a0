"""Listeners made visible: what each broker binds, what it tells clients, and a client's two round-trips.

A listener is a name, a security protocol and a port. ``listeners`` says where a broker
*binds*; ``advertised.listeners`` says what it *tells clients* (in every metadata response)
to connect to after the bootstrap. A client talks to the cluster in two round-trips: first a
metadata request to whichever bootstrap address it was given, then every produce and fetch
to the address the metadata names for the partition's leader. :func:`listener_table` reads
both settings from the nodes' ``server.properties``; :func:`round_trips_figure` draws the two
round-trips, so a wrong advertised address shows where it bites.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Protocol, Sequence

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go


class _NodesOnDisk(Protocol):
    @property
    def broker_ids(self) -> list[int]: ...

    def broker_dir(self, broker_id: int) -> Path: ...


def read_properties(path: Path) -> dict[str, str]:
    """A ``server.properties`` file as a dict (comments and blank lines skipped; the last value wins)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _by_name(value: str) -> dict[str, str]:
    """``"A://h:1,B://h:2"`` -> ``{"A": "h:1", "B": "h:2"}``."""
    out = {}
    for item in filter(None, value.split(",")):
        name, _, where = item.partition("://")
        out[name] = where
    return out


def listener_table(cluster: _NodesOnDisk, brokers: Optional[Iterable[int]] = None) -> "pd.DataFrame":
    """Per broker and listener: its protocol, who uses it, where it binds and what it advertises.

    Read from each node's ``server.properties`` (what the broker was started with), for the
    brokers given (default: all). ``advertises`` is empty for the controller listener: controllers
    are found through ``controller.quorum.voters``, never through metadata.
    """
    import pandas as pd

    rows = []
    for broker_id in (brokers if brokers is not None else cluster.broker_ids):
        props = read_properties(cluster.broker_dir(broker_id) / "server.properties")
        protocols = dict(item.split(":", 1) for item in props.get("listener.security.protocol.map", "").split(",")
                         if ":" in item)
        advertised = _by_name(props.get("advertised.listeners", ""))
        controller = set(props.get("controller.listener.names", "").split(","))
        for name, where in _by_name(props.get("listeners", "")).items():
            role = ("KRaft quorum" if name in controller
                    else "replication" if name == props.get("inter.broker.listener.name") else "clients")
            rows.append({"broker": broker_id, "listener": name, "protocol": protocols.get(name, name),
                         "used by": role, "binds": where, "advertises": advertised.get(name, "")})
    return pd.DataFrame(rows, columns=["broker", "listener", "protocol", "used by", "binds", "advertises"])


@dataclass
class Trip:
    """One client's two round-trips: the bootstrap, then a request to the address the metadata gave."""

    title: str
    #: The address the client was given (``bootstrap.servers``).
    bootstrap: str
    #: The broker the second request goes to (the partition's leader) and the address it advertises.
    broker_id: int
    advertised: str
    #: Whether the second request was answered, and what happened (e.g. "delivered", "_MSG_TIMED_OUT").
    answered: bool
    outcome: str
    request: str = "Produce"


def round_trips_figure(trips: Sequence[Trip], height: int = 380) -> "go.Figure":
    """A sequence diagram per trip, side by side: client, bootstrap address, advertised address.

    ① metadata request to the bootstrap address, ② the answer naming the leader's advertised
    address, ③ the produce (or fetch) sent there, ④ its answer -- or a red cross with the error.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(trips), subplot_titles=[t.title for t in trips], horizontal_spacing=0.08)
    lanes = [0.0, 1.0, 2.0]
    for col, trip in enumerate(trips, start=1):
        axis = "" if col == 1 else str(col)
        xref, yref = f"x{axis}", f"y{axis}"
        labels = ["client", f"bootstrap<br>{trip.bootstrap}", f"broker {trip.broker_id} as advertised<br>{trip.advertised}"]
        for x, label in zip(lanes, labels):
            fig.add_trace(go.Scatter(x=[x, x], y=[0.3, 4.6], mode="lines", showlegend=False, hoverinfo="skip",
                                     line=dict(color="#95a5a6", dash="dot")), row=1, col=col)
            fig.add_annotation(x=x, y=4.75, xref=xref, yref=yref, text=f"<b>{label}</b>", showarrow=False,
                               yanchor="bottom", font=dict(size=11))
        ok, bad = "#27ae60", "#c0392b"
        steps = [(0, 1, 4.0, "① Metadata request", "#2e86de"),
                 (1, 0, 3.2, f"② broker {trip.broker_id} is at {trip.advertised}", "#2e86de"),
                 (0, 2, 2.2, f"③ {trip.request} to broker {trip.broker_id}", ok if trip.answered else bad)]
        if trip.answered:
            steps.append((2, 0, 1.2, f"④ {trip.outcome}", ok))
        for start, end, y, text, colour in steps:
            fig.add_annotation(x=lanes[end], y=y, ax=lanes[start], ay=y, xref=xref, yref=yref, axref=xref,
                               ayref=yref, showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=2,
                               arrowcolor=colour, text="")
            fig.add_annotation(x=(lanes[start] + lanes[end]) / 2, y=y + 0.12, xref=xref, yref=yref, text=text,
                               showarrow=False, yanchor="bottom", font=dict(size=11, color=colour))
        if not trip.answered:
            fig.add_annotation(x=lanes[2], y=2.2, xref=xref, yref=yref, text="✗", showarrow=False,
                               font=dict(size=26, color=bad))
            fig.add_annotation(x=lanes[1], y=1.2, xref=xref, yref=yref, text=trip.outcome, showarrow=False,
                               font=dict(size=11, color=bad))
        fig.update_xaxes(visible=False, range=[-0.45, 2.45], row=1, col=col)
        fig.update_yaxes(visible=False, range=[0.3, 5.4], row=1, col=col)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white")
    return fig
