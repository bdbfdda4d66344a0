"""Capacity planning: the course's rule as its deck states it, what a cluster really stores, how many partitions.

The deck's rule: **(message size × 3) × daily quantity × 1.4 = volume per replicated broker**, then
× retention days. The ×3 is its allowance for key, headers and timestamp (its worked example then
picks a replication factor of 4 separately); 1.4 is headroom. :func:`deck_rule` computes it term by
term. What a record really takes on disk is its size plus tens of bytes of framing (per record and
per batch: measure it with :func:`stored_by`), so ×3 is far too much for large records; and what
each broker stores is decided by the replication factor and the broker count (:func:`per_broker`).
:func:`estimate` is the rule with those terms (size × replication × daily volume × days × headroom);
:func:`calculator` puts both side by side as a notebook widget.

:func:`stored` reads what a topic really takes on the brokers' disks — per broker and kind of file
(segments ``.log``, offset ``.index``, time ``.timeindex``, the rest), by apparent size and by blocks
actually allocated. :func:`partitions_for` sizes a topic's partition count from a target throughput
and the throughput one partition gave when measured (producing, and consuming with one consumer per
partition: a group has at most as many busy members as the topic has partitions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pandas as pd

#: The course's headroom factor (traffic spikes, uneven partitions, the segment still open past retention). Not
#: "a broker's share while another is down": Kafka does not re-replicate a dead broker's partitions by itself --
#: they stay under-replicated until it returns or an operator reassigns them.
HEADROOM = 1.4
#: The deck's allowance for key, headers and timestamp: it multiplies the message size by 3.
DECK_OVERHEAD = 3


@dataclass(frozen=True)
class DeckRule:
    """The course's rule as its deck states it: (message size × 3) × daily quantity × 1.4 = volume per
    replicated broker; × retention days (bytes)."""

    message_bytes: float
    messages_per_day: float
    retention_days: float = 1.0
    overhead: float = DECK_OVERHEAD
    headroom: float = HEADROOM

    @property
    def per_day(self) -> float:
        """Volume per replicated broker and day: (size × 3) × daily quantity × 1.4."""
        return self.message_bytes * self.overhead * self.messages_per_day * self.headroom

    @property
    def per_replicated_broker(self) -> float:
        """What the rule provisions on every broker that holds a replica, for the retention period."""
        return self.per_day * self.retention_days

    def _repr_html_(self) -> str:
        return (f"<b>{human(self.per_replicated_broker)}</b> per replicated broker = ({human(self.message_bytes)} × "
                f"{self.overhead:g}) × {self.messages_per_day:,.0f} messages/day × {self.headroom:g} × "
                f"{self.retention_days:g} days")


def deck_rule(message_bytes: float, messages_per_day: float, retention_days: float = 1.0,
              overhead: float = DECK_OVERHEAD, headroom: float = HEADROOM) -> DeckRule:
    """The deck's rule, term by term (see the module doc)."""
    return DeckRule(message_bytes, messages_per_day, retention_days, overhead, headroom)


def per_broker(stored_per_record: float, messages_per_day: float, retention_days: float, replication: int,
               brokers: int, headroom: float = 1.0) -> float:
    """What one broker stores when the partitions are spread evenly: every record is kept ``replication`` times
    (``stored_per_record``: its bytes on disk, framing included), shared by ``brokers`` brokers."""
    return stored_per_record * messages_per_day * retention_days * replication / max(brokers, 1) * headroom


def partitions_for(target_per_s: float, produce_per_partition: float, consume_per_partition: float) -> int:
    """Partitions a topic needs for ``target_per_s`` (records or bytes per second, in the unit of the other two):
    enough that neither the producers nor one consumer per partition is the limit."""
    slowest = min(produce_per_partition, consume_per_partition)
    if slowest <= 0:
        raise ValueError("the per-partition throughputs must be measured (above 0)")
    return max(1, math.ceil(target_per_s / slowest))


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
               retention_days: int = 7, headroom: float = HEADROOM, brokers: int = 3, overhead_bytes: int = 70) -> Any:
    """The deck's rule beside the rule with measured terms, as a widget: change a value, compare what each
    provisions per broker (``overhead_bytes``: framing per record on disk, measured with :func:`stored_by`)."""
    import ipywidgets as w

    style = {"description_width": "150px"}
    inputs = {
        "message_bytes": w.BoundedIntText(message_bytes, min=1, max=10**8, description="message size (B)", style=style),
        "overhead_bytes": w.BoundedIntText(overhead_bytes, min=0, max=10**6, description="overhead per record (B)",
                                           style=style),
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
        v = {k: box.value for k, box in inputs.items()}
        deck = deck_rule(v["message_bytes"], v["messages_per_day"], v["retention_days"], headroom=v["headroom"])
        share = per_broker(v["message_bytes"] + v["overhead_bytes"], v["messages_per_day"], v["retention_days"],
                           v["replication"], v["brokers"], v["headroom"])
        out.value = (f"the deck: {deck._repr_html_()}<br>measured terms: <b>{human(share)}</b> per broker = "
                     f"({human(v['message_bytes'])} + {v['overhead_bytes']} B) × {v['messages_per_day']:,.0f} × "
                     f"{v['retention_days']:g} days × {v['replication']} replicas ÷ {v['brokers']} brokers × "
                     f"{v['headroom']:g}")

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


__all__ = ["DECK_OVERHEAD", "DeckRule", "Estimate", "HEADROOM", "calculator", "deck_rule", "estimate", "human",
           "partitions_for", "per_broker", "stored", "stored_by"]
