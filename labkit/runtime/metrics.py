"""Broker metrics the way operators scrape them: the Prometheus JMX exporter inside every broker JVM.

The exporter (``io.prometheus.jmx:jmx_prometheus_javaagent``, pinned in
``environments/kafka.toml``) is a Java agent: the native backend starts each broker
JVM with ``-javaagent:<jar>=127.0.0.1:<port>:environments/jmx-exporter.yaml`` and
the broker then serves the MBeans that file selects in Prometheus' text format on
``http://127.0.0.1:<port>/metrics``. ``labkit setup`` fetches the jar through
:mod:`labkit.runtime.maven`; without it (or with ``LABKIT_METRICS=0``) brokers start without
the agent and :func:`scrape_cluster` says how to get it.

Reading is plain HTTP and ``prometheus_client``'s own text-format parser:

* :func:`scrape_cluster` -> a tidy pandas frame, one row per sample
  (``broker``, ``metric``, ``labels``, ``value``): what ``cluster.metrics()`` returns;
* :func:`scrape_all` -> the samples of several brokers at once, which the live view's
  metrics panel (:mod:`labkit.view.panel`) turns into an operator's first dashboard.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from .environment import environments_dir, load_toml
from ..errors import LabkitError
from .maven import ArtifactSet, cached, resolve
from .steps import step

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
                   timeout: float = 2.0, patience: float = 30.0) -> "pd.DataFrame":
    """Every sample of every running broker (``brokers``: only those) as a tidy frame.

    ``match``: keep metrics whose name contains it (``"replicamanager"``). A running broker whose exporter
    does not answer within ``timeout`` is asked again, with more time, for up to ``patience`` seconds: on a
    busy machine an exporter walking every MBean can take longer than the first timeout (fresh clone 16: two
    of three running brokers left out). Brokers that still do not answer, and those not running (killed,
    paused), are left out; the frame's ``attrs["errors"]`` says which and why.
    """
    import time

    def running() -> set[int]:  # labkit's view of its brokers, read again before each retry (a cell may kill one)
        return {b.id for b in cluster.brokers if b.state in ("running", "external")}

    urls, alive = endpoints_of(cluster), running()
    wanted = {b: u for b, u in urls.items() if b in alive and (brokers is None or b in brokers)}
    samples, errors = scrape_all(wanted, timeout)
    deadline = time.monotonic() + patience
    while errors and time.monotonic() < deadline:
        still = {b: wanted[b] for b in errors.keys() & running()}
        if not still:
            break
        time.sleep(0.2)  # a refused connection fails at once: ask again at a poll's pace, not in a busy loop
        more, again = scrape_all(still, max(timeout, min(10.0, deadline - time.monotonic())))
        samples.extend(more)
        errors = {**{b: e for b, e in errors.items() if b not in still}, **again}
    if match:
        samples = [s for s in samples if match in s.metric]
    out = frame(samples)
    out.attrs["errors"] = errors
    return out


def value(samples: Iterable[Sample], metric: str, **labels: str) -> Optional[float]:
    """The sum of ``metric`` over the samples whose labels include ``labels`` (None: no such sample)."""
    found = [s.value for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found) if found else None


__all__ = ["MetricsUnavailable", "Sample", "agent_options", "enabled", "exporter_artifacts", "exporter_jar", "frame",
           "parse", "scrape_all", "scrape_cluster", "value"]
