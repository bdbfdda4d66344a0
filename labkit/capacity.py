"""Capacity planning: the course's rule of thumb, a calculator for it, and what a cluster really stores.

The rule: disk = message size × replication factor × messages per day × retention
days × 1.4 (headroom). :func:`estimate` computes it; :func:`calculator` is the same
as a notebook widget. :func:`stored` reads what a topic really takes on the brokers'
disks — per broker and kind of file (segments ``.log``, offset ``.index``, time
``.timeindex``, the rest), by apparent size and by blocks actually allocated — so a
lesson can check the rule against a measured load and name where the difference
goes (per-record and per-batch overhead, index files, replication).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pandas as pd

#: The course's headroom factor (spikes, rebalancing, a broker's share when another is down).
HEADROOM = 1.4


@dataclass(frozen=True)
class Estimate:
    """The rule of thumb, term by term (bytes)."""

    message_bytes: float
    replication: int
    messages_per_day: float
    retention_days: float
    headroom: float = HEADROOM

    @property
    def per_day(self) -> float:
        """Bytes written per day, all replicas, before headroom."""
        return self.message_bytes * self.replication * self.messages_per_day

    @property
    def raw(self) -> float:
        """Bytes kept for the retention period, all replicas, before headroom."""
        return self.per_day * self.retention_days

    @property
    def total(self) -> float:
        """What to provision: ``raw`` × headroom."""
        return self.raw * self.headroom

    def per_broker(self, brokers: int) -> float:
        return self.total / max(brokers, 1)

    def _repr_html_(self) -> str:
        return (f"<b>{human(self.total)}</b> to provision = {human(self.message_bytes)} × {self.replication} replicas "
                f"× {self.messages_per_day:,.0f} messages/day × {self.retention_days:g} days × {self.headroom:g} headroom"
                f" <small>({human(self.per_day)} written per day)</small>")


def estimate(message_bytes: float, replication: int, messages_per_day: float, retention_days: float = 1.0,
             headroom: float = HEADROOM) -> Estimate:
    """size × replication × daily volume × retention days × headroom."""
    return Estimate(message_bytes, replication, messages_per_day, retention_days, headroom)


def human(n: float) -> str:
    """Bytes, readable (decimal units, as disks are sold): ``1.2 TB``."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def calculator(message_bytes: int = 1000, replication: int = 3, messages_per_day: int = 50_000_000,
               retention_days: int = 7, headroom: float = HEADROOM, brokers: int = 3) -> Any:
    """The rule of thumb as a widget: change a value, read what to provision (in total and per broker)."""
    import ipywidgets as w

    style = {"description_width": "150px"}
    inputs = {
        "message_bytes": w.BoundedIntText(message_bytes, min=1, max=10**8, description="message size (B)", style=style),
        "replication": w.BoundedIntText(replication, min=1, max=10, description="replication factor", style=style),
        "messages_per_day": w.BoundedIntText(messages_per_day, min=0, max=10**13, step=1_000_000,
                                             description="messages per day", style=style),
        "retention_days": w.BoundedFloatText(retention_days, min=0, max=3650, description="retention (days)",
                                             style=style),
        "headroom": w.BoundedFloatText(headroom, min=1, max=10, step=0.1, description="headroom", style=style),
        "brokers": w.BoundedIntText(brokers, min=1, max=1000, description="brokers", style=style),
    }
    out = w.HTML()

    def update(_: Any = None) -> None:
        values = {k: v.value for k, v in inputs.items()}
        brokers_n = values.pop("brokers")
        e = estimate(**values)
        out.value = e._repr_html_() + f"<br>per broker: <b>{human(e.per_broker(brokers_n))}</b>"

    for box in inputs.values():
        box.observe(update, names="value")
    update()
    return w.VBox([*inputs.values(), out])


# ---------------------------------------------------------------------------------------------- what is stored
def _kind(path: Path) -> str:
    suffix = path.suffix
    return suffix[1:] if suffix in (".log", ".index", ".timeindex") else "other"


def stored(log_dirs: Iterable[tuple[int, Path]], topic: str) -> "pd.DataFrame":
    """What ``topic`` takes on disk: one row per broker and kind of file (``log``, ``index``, ``timeindex``,
    ``other``), with the files' apparent ``bytes`` and the ``disk_bytes`` actually allocated (an active
    segment's index files are preallocated, sparse, to ``segment.index.bytes``)."""
    import pandas as pd

    rows = []
    for broker, root in log_dirs:
        for part in Path(root).glob(f"{topic}-*"):
            if not part.is_dir() or not part.name[len(topic) + 1:].isdigit():
                continue
            for f in part.iterdir():
                st = f.stat()
                rows.append({"broker": broker, "partition": int(part.name[len(topic) + 1:]), "kind": _kind(f),
                             "bytes": st.st_size, "disk_bytes": st.st_blocks * 512})
    frame = pd.DataFrame(rows, columns=["broker", "partition", "kind", "bytes", "disk_bytes"])
    return frame.groupby(["broker", "kind"], as_index=False)[["bytes", "disk_bytes"]].sum()


def stored_by(cluster: Any, topic: str) -> "pd.DataFrame":
    """:func:`stored` for a cluster whose brokers' directories labkit knows (the native backend)."""
    return stored(((b.id, cluster.log_dir(b.id)) for b in cluster.brokers), cluster.topic_name(topic))


__all__ = ["Estimate", "HEADROOM", "calculator", "estimate", "human", "stored", "stored_by"]
