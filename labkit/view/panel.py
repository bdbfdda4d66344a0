"""The live view's metrics panel: the few numbers an operator's first dashboard shows, per broker.

:class:`PanelReader` scrapes every running broker's exporter (:mod:`labkit.runtime.metrics`)
and returns :class:`BrokerMetrics` per broker: under-replicated and offline partitions,
the active controller, bytes in/out per second, request latency p99, ISR shrinks and
expands, with rates from the counters of two scrapes. :mod:`labkit.view.render` draws them.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from ..runtime.metrics import (ACTIVE_CONTROLLER, BYTES_IN, BYTES_OUT, ISR_EXPANDS, ISR_SHRINKS, OFFLINE,
                               PANEL_METRICS, REQUEST_TIME, URP, Sample, endpoints_of, scrape_all, value)

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class BrokerMetrics:
    """What the metrics panel shows for one broker at one moment (None: not known)."""

    broker: int
    #: The scrape answered.
    up: bool
    under_replicated: Optional[float] = None
    #: Reported by the active controller only (None elsewhere).
    offline_partitions: Optional[float] = None
    active_controller: bool = False
    bytes_in_per_s: Optional[float] = None
    bytes_out_per_s: Optional[float] = None
    produce_p99_ms: Optional[float] = None
    fetch_p99_ms: Optional[float] = None
    #: Counters since the broker started.
    isr_shrinks: Optional[float] = None
    isr_expands: Optional[float] = None
    error: str = ""
    taken_at: float = 0.0


@dataclass(frozen=True)
class PanelData:
    """The panel at one moment: a row per broker and the cluster-wide figures an alert would watch."""

    brokers: tuple[BrokerMetrics, ...]
    taken_at: float = 0.0

    @property
    def under_replicated(self) -> Optional[int]:
        """Under-replicated partitions, summed over the brokers that answered (each counts the ones it leads)."""
        found = [b.under_replicated for b in self.brokers if b.up and b.under_replicated is not None]
        return int(sum(found)) if found else None

    @property
    def offline_partitions(self) -> Optional[int]:
        found = [b.offline_partitions for b in self.brokers if b.active_controller and b.offline_partitions is not None]
        return int(found[0]) if found else None

    @property
    def active_controller(self) -> Optional[int]:
        found = [b.broker for b in self.brokers if b.up and b.active_controller]
        return found[0] if len(found) == 1 else None

    @property
    def isr_shrinks(self) -> int:
        return int(sum(b.isr_shrinks or 0 for b in self.brokers))

    @property
    def isr_expands(self) -> int:
        return int(sum(b.isr_expands or 0 for b in self.brokers))

    def key(self) -> tuple:
        """What changes the drawing (rates and latencies rounded: small wobbles do not redraw)."""
        def r(x: Optional[float]) -> Optional[float]:
            return None if x is None else round(x, 0 if x > 100 else 1)

        return tuple((b.broker, b.up, b.under_replicated, b.offline_partitions, b.active_controller,
                      r(b.bytes_in_per_s), r(b.bytes_out_per_s), r(b.produce_p99_ms), b.isr_shrinks, b.isr_expands)
                     for b in self.brokers)

    def as_row(self) -> dict[str, Any]:
        """The cluster-wide figures as one row (what the panel's history keeps)."""
        return {"time": self.taken_at, "under_replicated": self.under_replicated,
                "offline_partitions": self.offline_partitions, "active_controller": self.active_controller,
                "isr_shrinks": self.isr_shrinks, "isr_expands": self.isr_expands,
                "brokers_up": sum(b.up for b in self.brokers),
                "bytes_in_per_s": sum(b.bytes_in_per_s or 0 for b in self.brokers),
                "bytes_out_per_s": sum(b.bytes_out_per_s or 0 for b in self.brokers)}


def _p99(samples: Sequence[Sample], request: str) -> Optional[float]:
    found = [s.value for s in samples if s.metric == REQUEST_TIME and s.labels.get("request") == request
             and s.labels.get("quantile") == "0.99"]
    return max(found) if found and not any(math.isnan(x) for x in found) else None


def broker_metrics(broker: int, samples: Sequence[Sample], taken_at: float,
                   previous: Optional[tuple[float, dict[str, float]]] = None, error: str = "") -> BrokerMetrics:
    """One broker's panel figures from its samples; rates from ``previous`` (time, counters) when given."""
    if error:
        return BrokerMetrics(broker, False, error=error, taken_at=taken_at)
    counters = {name: _total(samples, name) for name in (BYTES_IN, BYTES_OUT)}
    rates: dict[str, Optional[float]] = {BYTES_IN: None, BYTES_OUT: None}
    if previous is not None:
        t0, before = previous
        dt = taken_at - t0
        for name in rates:
            now, then = counters.get(name), before.get(name)
            if dt > 0 and now is not None and then is not None and now >= then:
                rates[name] = (now - then) / dt
    return BrokerMetrics(
        broker, True,
        under_replicated=value(samples, URP),
        offline_partitions=value(samples, OFFLINE) if (value(samples, ACTIVE_CONTROLLER) or 0) >= 1 else None,
        active_controller=(value(samples, ACTIVE_CONTROLLER) or 0) >= 1,
        bytes_in_per_s=rates[BYTES_IN], bytes_out_per_s=rates[BYTES_OUT],
        produce_p99_ms=_p99(samples, "Produce"), fetch_p99_ms=_p99(samples, "FetchConsumer"),
        isr_shrinks=value(samples, ISR_SHRINKS), isr_expands=value(samples, ISR_EXPANDS), taken_at=taken_at)


def _total(samples: Sequence[Sample], name: str) -> Optional[float]:
    """The broker-wide counter: the sample without a ``topic`` label (Kafka keeps both)."""
    found = [s.value for s in samples if s.metric == name and "topic" not in s.labels]
    return sum(found) if found else None


class PanelReader:
    """Reads the panel's figures from a cluster, remembering counters between reads (for rates) and a history."""

    def __init__(self, cluster: Any, timeout: float = 1.5, history: int = 600) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._previous: dict[int, tuple[float, dict[str, float]]] = {}
        self._history: list[dict[str, Any]] = []
        self._keep = history
        self._lock = threading.Lock()

    def read(self, brokers: Optional[Mapping[int, str]] = None) -> PanelData:
        """Scrape the brokers (``brokers``: id -> labkit state; only running ones are asked) and return the panel."""
        urls = endpoints_of(self.cluster)
        states = dict(brokers) if brokers is not None else {b.id: b.state for b in self.cluster.brokers}
        asked = {b: u for b, u in urls.items() if states.get(b, "running") in ("running", "external")}
        taken_at = time.time()
        samples, errors = scrape_all(asked, self.timeout, PANEL_METRICS)
        by_broker: dict[int, list[Sample]] = {b: [] for b in urls}
        for s in samples:
            by_broker[s.broker].append(s)
        rows = []
        with self._lock:
            for broker in sorted(urls):
                if broker not in asked:
                    rows.append(BrokerMetrics(broker, False, error=states.get(broker, "down"), taken_at=taken_at))
                    self._previous.pop(broker, None)
                    continue
                row = broker_metrics(broker, by_broker[broker], taken_at, self._previous.get(broker),
                                     errors.get(broker, ""))
                rows.append(row)
                if row.up:
                    self._previous[broker] = (taken_at, {n: v for n in (BYTES_IN, BYTES_OUT)
                                                         if (v := _total(by_broker[broker], n)) is not None})
            data = PanelData(tuple(rows), taken_at)
            self._history.append(data.as_row())
            del self._history[:-self._keep]
        return data

    def history(self) -> "pd.DataFrame":
        """Every read so far, one row each (cluster-wide figures), oldest first."""
        import pandas as pd

        with self._lock:
            return pd.DataFrame(list(self._history))


def panel_frame(data: PanelData) -> "pd.DataFrame":
    """The panel as a table, a row per broker (what the HTML panel shows)."""
    import pandas as pd

    return pd.DataFrame([{"broker": b.broker, "up": b.up, "under-replicated": b.under_replicated,
                          "offline": b.offline_partitions, "controller": b.active_controller,
                          "bytes in/s": b.bytes_in_per_s, "bytes out/s": b.bytes_out_per_s,
                          "produce p99 ms": b.produce_p99_ms, "fetch p99 ms": b.fetch_p99_ms,
                          "ISR shrinks": b.isr_shrinks, "ISR expands": b.isr_expands}
                         for b in data.brokers]).set_index("broker")
