"""A Kafka Streams topology as Kafka describes it (``Topology.describe()``), as data and as a figure.

The launcher writes the description twice: the text Kafka prints (``TopologyDescription.toString()``)
and the same as JSON (subtopologies, their source / processor / sink nodes with topics, stores and edges).
:class:`Topology` reads the JSON: which topics the application reads and writes, its repartition topics
(read by one subtopology, written by another), its state stores; :meth:`Topology.figure` draws it, one
band per subtopology, data flowing left to right.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import plotly.graph_objects as go

COLOURS = {"topic": "#2e86de", "internal topic": "#f39c12", "source": "#76b7e8", "processor": "#95a5a6",
           "sink": "#7bc67e", "store": "#8e44ad"}


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # "source", "processor" or "sink"
    subtopology: int
    topics: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()
    predecessors: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``KSTREAM-FILTER-0000000001`` -> ``FILTER 1`` (names a learner gave stay as they are)."""
        match = re.fullmatch(r"(?:KSTREAM|KTABLE)-(.+)-0*(\d+)", self.name)
        return f"{match.group(1)} {match.group(2)}" if match else self.name


@dataclass
class Topology:
    """What ``Topology.describe()`` says: ``text`` as Kafka prints it, ``nodes`` per subtopology."""

    text: str
    nodes: list[Node] = field(default_factory=list)
    global_stores: list[dict[str, Any]] = field(default_factory=list)
    #: The application id: internal topics on the broker are ``<application id>-<name>``.
    application_id: str = ""

    @classmethod
    def read(cls, directory: Path, application_id: str = "") -> "Topology":
        data = json.loads((directory / "topology.json").read_text())
        nodes = [Node(n["name"], n["type"], s["id"], tuple(n.get("topics", ())), tuple(n.get("stores", ())),
                      tuple(n["successors"]), tuple(n["predecessors"]))
                 for s in data["subtopologies"] for n in s["nodes"]]
        return cls((directory / "topology.txt").read_text(), nodes, data.get("global_stores", []), application_id)

    @property
    def subtopologies(self) -> list[int]:
        return sorted({n.subtopology for n in self.nodes})

    def source_topics(self) -> list[str]:
        """Every topic a source node reads, repartition topics included (as named in the description)."""
        return sorted({t for n in self.nodes if n.kind == "source" for t in n.topics})

    def sink_topics(self) -> list[str]:
        return sorted({t for n in self.nodes if n.kind == "sink" for t in n.topics})

    def repartition_topics(self) -> list[str]:
        """Topics the application writes and reads back itself: ``<application id>-...-repartition`` on the broker."""
        return sorted(set(self.source_topics()) & set(self.sink_topics()))

    def stores(self) -> list[str]:
        return sorted({s for n in self.nodes for s in n.stores})

    def broker_name(self, topic: str) -> str:
        """The name on the broker: internal topics get the application id in front."""
        internal = topic in self.repartition_topics() and self.application_id \
            and not topic.startswith(self.application_id + "-")
        return f"{self.application_id}-{topic}" if internal else topic

    def __repr__(self) -> str:
        return self.text.rstrip()

    def figure(self, title: Optional[str] = None, changelogs: Optional[dict[str, str]] = None) -> "go.Figure":
        """The topology drawn, one band per subtopology, data flowing left to right: topics (blue: yours, orange:
        a repartition topic, drawn where it is written and where it is read back), sources, processors, sinks,
        and each store (purple) on a row of its own below, under the processor that keeps it, with its changelog
        topic when ``changelogs`` ({store: topic}) names it. Hover a marker for its full name."""
        import plotly.graph_objects as go

        points: list[tuple[float, float, str, str, str]] = []  # x, y, kind, label, hover
        edges: list[tuple[tuple[float, float], tuple[float, float], bool]] = []
        repartition = set(self.repartition_topics())
        y0 = 0.0
        for sub in self.subtopologies:
            members = [n for n in self.nodes if n.subtopology == sub]
            depth = _depths(members)
            rows: dict[int, int] = {}
            at: dict[str, tuple[float, float]] = {}
            for n in sorted(members, key=lambda m: (depth[m.name], m.name)):
                col = depth[n.name] + 1
                row = rows.get(col, 0)
                rows[col] = row + 1
                at[n.name] = (col, y0 - row)
                points.append((col, y0 - row, n.kind, n.label, n.name))
            height = max(rows.values(), default=1)
            for n in members:
                x, y = at[n.name]
                edges += [(at[n.name], at[s], False) for s in n.successors if s in at]
                for i, topic in enumerate(n.topics):
                    kind = "internal topic" if topic in repartition else "topic"
                    spot = (x - 1, y - 0.3 * i) if n.kind == "source" else (x + 1, y)
                    points.append((*spot, kind, _short(topic, self.application_id), self.broker_name(topic)))
                    edges.append((spot, (x, y), False) if n.kind == "source" else ((x, y), spot, False))
            placed: dict[str, tuple[float, float]] = {}  # a store once, under the first processor that uses it
            for n in sorted(members, key=lambda m: at[m.name]):
                for store in n.stores:
                    if store not in placed:
                        column = at[n.name][0]
                        placed[store] = (column + 0.9 * sum(1 for p in placed.values() if p[0] >= column), y0 - height)
                        log = (changelogs or {}).get(store)
                        points.append((*placed[store], "store", _short(store, "") + ("<br>+ changelog" if log else ""),
                                       store + (f" (changelog {log})" if log else "")))
                    edges.append((at[n.name], placed[store], True))
            y0 -= height + (1.6 if placed else 0.9)
        fig = go.Figure()
        for (x0, ya), (x1, yb), dashed in edges:
            fig.add_annotation(x=x1, y=yb, ax=x0, ay=ya, xref="x", yref="y", axref="x", ayref="y", text="",
                               showarrow=True, arrowhead=0 if dashed else 2, arrowwidth=1.2,
                               arrowcolor="#b0b7bb" if dashed else "#7f8c8d", standoff=9, startstandoff=9)
        for kind, colour in COLOURS.items():
            mine = [p for p in points if p[2] == kind]
            if mine:
                fig.add_trace(go.Scatter(
                    x=[p[0] for p in mine], y=[p[1] for p in mine], mode="markers+text", name=kind,
                    text=[p[3] for p in mine], textposition="bottom center", textfont={"size": 10},
                    hovertext=[p[4] for p in mine], hoverinfo="text",
                    marker={"size": 15, "color": colour, "symbol": "square" if "topic" in kind else
                            ("diamond" if kind == "store" else "circle")}))
        top = 0.0
        for sub in self.subtopologies:
            fig.add_annotation(x=-0.5, y=top + 0.45, xref="x", yref="y", text=f"<b>sub-topology {sub}</b>",
                               showarrow=False, xanchor="left", font={"size": 12})
            members = [n for n in self.nodes if n.subtopology == sub]
            rows = max(Counter(_depths(members).values()).values(), default=1)
            top -= rows + (1.6 if any(n.stores for n in members) else 0.9)
        fig.update_layout(title=title or f"Topology of {self.application_id or 'the application'}",
                          height=max(260, int(75 * (-top + 1))),
                          xaxis={"visible": False, "range": [-0.7, max(p[0] for p in points) + 0.7]},
                          yaxis={"visible": False, "range": [top + 0.3, 0.9]}, plot_bgcolor="white",
                          margin={"l": 10, "r": 10, "t": 50, "b": 10}, legend={"orientation": "h", "y": -0.02})
        return fig


def _short(name: str, application_id: str) -> str:
    """A label that fits: ``KSTREAM-JOINTHIS-0000000013-store`` -> ``JOINTHIS 13 store``, the application id
    taken off an internal topic's name."""
    name = name.removeprefix(application_id + "-") if application_id else name
    return re.sub(r"(?:KSTREAM|KTABLE)-([A-Z-]+?)-0*(\d+)-?", r"\1 \2 ", name).strip()


def _depths(nodes: list[Node]) -> dict[str, int]:
    """Each node's longest distance from a source of its subtopology (the column it is drawn in)."""
    by_name = {n.name: n for n in nodes}
    depth: dict[str, int] = {}

    def of(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in depth:
            preds = [p for p in by_name[name].predecessors if p in by_name and p not in seen]
            depth[name] = 0 if not preds else 1 + max(of(p, seen | {name}) for p in preds)
        return depth[name]

    for n in nodes:
        of(n.name)
    return depth


__all__ = ["Node", "Topology"]
