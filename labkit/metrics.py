"""Broker metrics the way operators scrape them: the Prometheus JMX exporter inside every broker JVM.

The exporter (``io.prometheus.jmx:jmx_prometheus_javaagent``, pinned in
``environments/kafka.toml``) is a Java agent: the native backend starts each broker
JVM with ``-javaagent:<jar>=127.0.0.1:<port>:environments/jmx-exporter.yaml`` and
the broker then serves the MBeans that file selects in Prometheus' text format on
``http://127.0.0.1:<port>/metrics``. ``labkit setup`` fetches the jar through
:mod:`labkit.maven`; without it (or with ``LABKIT_METRICS=0``) brokers start without
the agent and :func:`scrape_cluster` says how to get it.

Reading is plain HTTP and ``prometheus_client``'s own text-format parser:

* :func:`scrape_cluster` -> a tidy pandas frame, one row per sample
  (``broker``, ``metric``, ``labels``, ``value``): what ``cluster.metrics()`` returns;
* :class:`PanelReader` -> :class:`BrokerMetrics` per broker: the few numbers an
  operator's first dashboard shows (under-replicated and offline partitions, the
  active controller, bytes in/out per second, request latency p99, ISR shrinks and
  expands), with rates from the counters of two scrapes. The live view's metrics
  panel draws them (:mod:`labkit.render`).
"""

from __future__ import annotations

import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from .environment import environments_dir, load_toml
from .errors import LabkitError
from .maven import ArtifactSet, cached, resolve
from .setup import step

if TYPE_CHECKING:
    import pandas as pd

#: ``LABKIT_METRICS=0`` starts brokers without the exporter agent.
ENV_SWITCH = "LABKIT_METRICS"

#: Sample names the panel reads (see environments/jmx-exporter.yaml for how MBeans become these names).
URP = "kafka_server_replicamanager_underreplicatedpartitions"
OFFLINE = "kafka_controller_kafkacontroller_offlinepartitionscount"
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
ISR_SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpands_total"
REQUEST_TIME = "kafka_network_requestmetrics_totaltimems"
LOG_SIZE = "kafka_log_log_size"
CPU_SECONDS = "process_cpu_seconds_total"
#: What the panel asks for (``?name[]=``: the exporter then skips the JVM's own metrics, a quarter of a scrape).
PANEL_METRICS = (URP, OFFLINE, ACTIVE_CONTROLLER, BYTES_IN, BYTES_OUT, ISR_SHRINKS, ISR_EXPANDS, REQUEST_TIME)


class MetricsUnavailable(LabkitError):
    """Raised when a cluster's brokers run without the metrics exporter (not fetched, switched off, or a
    backend that does not attach it)."""


# ---------------------------------------------------------------------------------------------- the agent
@dataclass(frozen=True)
class ExporterSpec:
    """The exporter pinned in ``environments/kafka.toml`` ([metrics])."""

    coordinates: tuple[str, str, str]
    config: Path
    enabled: bool


@lru_cache(maxsize=None)
def exporter_spec() -> ExporterSpec:
    root = environments_dir()
    table = load_toml(root / "kafka.toml").get("metrics", {})
    group, artifact, version = str(table.get("exporter", "io.prometheus.jmx:jmx_prometheus_javaagent:1.0.1")).split(":")
    return ExporterSpec((group, artifact, version), root / str(table.get("config", "jmx-exporter.yaml")),
                        bool(table.get("enabled", True)))


def exporter_artifacts() -> ArtifactSet:
    """The agent jar as a Maven artifact (one self-contained jar: its dependencies are shaded inside)."""
    group, artifact, version = exporter_spec().coordinates
    return ArtifactSet(f"Prometheus JMX exporter {version}", f"jmx-exporter-{version}", ((group, artifact, version),),
                       subdir="agent", required=artifact,
                       hint_404="Check the exporter version pinned in environments/kafka.toml ([metrics]).")


def enabled() -> bool:
    """Brokers get the agent unless ``LABKIT_METRICS=0`` or ``enabled = false`` in kafka.toml."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return exporter_spec().enabled


def exporter_jar() -> Optional[Path]:
    """The cached agent jar, or None when ``labkit setup`` has not fetched it (nothing is downloaded here)."""
    jars = cached(exporter_artifacts())
    return jars[0] if jars else None


def agent_options(port: int, host: str = "127.0.0.1") -> list[str]:
    """The JVM option that attaches the exporter serving on ``host:port``; none when off or not fetched."""
    jar = exporter_jar() if enabled() else None
    if jar is None:
        return []
    return [f"-javaagent:{jar}={host}:{port}:{exporter_spec().config}"]


@step("Prometheus JMX exporter")
def _fetch_exporter() -> str:
    jars = resolve(exporter_artifacts())
    return f"{':'.join(exporter_spec().coordinates)} ({jars[0] if jars else 'missing'})"


# ---------------------------------------------------------------------------------------------- scraping
@dataclass(frozen=True)
class Sample:
    """One sample of one broker's scrape."""

    broker: int
    metric: str
    labels: Mapping[str, str]
    value: float

    def label_text(self) -> str:
        return format_labels(self.labels)


def format_labels(labels: Mapping[str, str]) -> str:
    """``{"topic": "a", "partition": "0"}`` -> ``partition=0,topic=a`` (sorted: one spelling per label set)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def parse(text: str, broker: int = 0) -> list[Sample]:
    """Prometheus text format -> samples, with ``prometheus_client``'s parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return [Sample(broker, s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples]


def fetch(url: str, timeout: float = 2.0, names: Sequence[str] = ()) -> str:
    """One scrape: the body of ``url``, only the metrics ``names`` when given (raises ``OSError``/``URLError``
    when the broker does not answer)."""
    if names:
        url += "?" + urllib.parse.urlencode([("name[]", n) for n in names])
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8", errors="replace")


def endpoints_of(cluster: Any) -> dict[int, str]:
    """Broker id -> metrics URL of ``cluster`` (raises :class:`MetricsUnavailable` with the fix)."""
    found = getattr(cluster, "metrics_endpoints", None)
    urls = found() if callable(found) else {}
    if not urls:
        raise MetricsUnavailable("This cluster's brokers do not expose metrics.", _why_not())
    return urls


def _why_not() -> str:
    if not enabled():
        return f"{ENV_SWITCH}=0 or [metrics] enabled = false switched the exporter off; start a cluster without it."
    if exporter_jar() is None:
        return "The Prometheus JMX exporter is not fetched yet: run `make setup` (or `labkit setup`), then start a new cluster."
    return "Only clusters the native backend starts carry the exporter (start one with labkit.start_cluster())."


def scrape_all(endpoints: Mapping[int, str], timeout: float = 2.0,
               names: Sequence[str] = ()) -> tuple[list[Sample], dict[int, str]]:
    """Scrape every broker at once (only ``names`` when given); (samples, broker -> error for those that did
    not answer)."""
    def one(item: tuple[int, str]) -> tuple[int, list[Sample], str]:
        broker, url = item
        try:
            return broker, parse(fetch(url, timeout, names), broker), ""
        except (OSError, urllib.error.URLError, ValueError) as exc:
            return broker, [], f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"

    samples: list[Sample] = []
    errors: dict[int, str] = {}
    if not endpoints:
        return samples, errors
    with ThreadPoolExecutor(max_workers=min(8, len(endpoints)), thread_name_prefix="labkit-scrape") as pool:
        for broker, found, error in pool.map(one, sorted(endpoints.items())):
            samples.extend(found)
            if error:
                errors[broker] = error
    return samples, errors


def frame(samples: Iterable[Sample]) -> "pd.DataFrame":
    """Samples as a tidy frame: ``broker``, ``metric``, ``labels`` (``k=v,...``), ``value``."""
    import pandas as pd

    rows = [(s.broker, s.metric, s.label_text(), s.value) for s in samples]
    return pd.DataFrame(rows, columns=["broker", "metric", "labels", "value"])


def scrape_cluster(cluster: Any, match: Optional[str] = None, brokers: Optional[Sequence[int]] = None,
                   timeout: float = 2.0) -> "pd.DataFrame":
    """Every sample of every running broker (``brokers``: only those) as a tidy frame.

    ``match``: keep metrics whose name contains it (``"replicamanager"``). Brokers that do not
    answer (killed, paused) are left out; the frame's ``attrs["errors"]`` says which and why.
    """
    urls = endpoints_of(cluster)
    running = {b.id for b in cluster.brokers if b.state in ("running", "external")}
    wanted = {b: u for b, u in urls.items() if b in running and (brokers is None or b in brokers)}
    samples, errors = scrape_all(wanted, timeout)
    if match:
        samples = [s for s in samples if match in s.metric]
    out = frame(samples)
    out.attrs["errors"] = errors
    return out


def value(samples: Iterable[Sample], metric: str, **labels: str) -> Optional[float]:
    """The sum of ``metric`` over the samples whose labels include ``labels`` (None: no such sample)."""
    found = [s.value for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found) if found else None


# ---------------------------------------------------------------------------------------------- the panel
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


__all__ = ["BrokerMetrics", "MetricsUnavailable", "PanelData", "PanelReader", "Sample", "agent_options",
           "broker_metrics", "enabled", "exporter_artifacts", "exporter_jar", "frame", "panel_frame", "parse",
           "scrape_all", "scrape_cluster", "value"]
