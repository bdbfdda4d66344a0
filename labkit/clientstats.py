"""Client-side metrics: librdkafka's statistics, as the confluent-kafka client reports them.

Every librdkafka client can emit a JSON document of statistics every
``statistics.interval.ms`` through ``stats_cb`` (the Python client calls it from
``poll()``/``consume()``/``flush()``). :class:`ClientStats` is such a callback that
keeps the documents and turns them into frames an operator reads::

    stats = ClientStats()
    consumer = cluster.consumer("billing", **stats.config(interval_ms=500))
    ... consumer.poll(1.0) ...
    stats.partitions()      # per partition: both lags, committed, stored and high-watermark offsets
    stats.brokers()         # per broker: round-trip time p50/p99, requests sent by type
    stats.history()         # one row per report: records and bytes sent/received, queue, total lags

Field names are librdkafka's (``STATISTICS.md`` in its repository). It reports two lags per
partition: ``consumer_lag`` = high watermark − the **committed** offset (what
``kafka-consumer-groups`` shows too), and ``consumer_lag_stored`` = high watermark − the
**stored** offset, the one the next commit would write: the consumer's position after the last
record handed to the application (Java's ``records-lag`` is position-based like it). A consumer
that reads but does not commit has a growing ``consumer_lag`` and a ``consumer_lag_stored`` near 0
(lesson 11). Both are -1 while unknown. Times are microseconds in the documents and milliseconds
in the frames.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pandas as pd


class ClientStats:
    """A ``stats_cb`` that keeps librdkafka's statistics reports (the last ``keep`` of them)."""

    def __init__(self, keep: int = 2000) -> None:
        self.reports: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()

    # ---- what the client calls
    def __call__(self, stats_json: str) -> None:
        report = json.loads(stats_json)
        with self._lock:
            self.reports.append(report)

    def config(self, interval_ms: int = 1000) -> dict[str, Any]:
        """Client settings that make the client report here every ``interval_ms``."""
        return {"stats_cb": self, "statistics.interval.ms": interval_ms}

    # ---- reading
    @property
    def latest(self) -> Optional[dict[str, Any]]:
        """The newest report (None before the first one arrived)."""
        with self._lock:
            return self.reports[-1] if self.reports else None

    def _pick(self, report: Optional[dict[str, Any]]) -> dict[str, Any]:
        found = report if report is not None else self.latest
        return found or {}

    def history(self) -> "pd.DataFrame":
        """One row per report: seconds since the first, records/bytes sent and received, messages queued
        in the client, and the total consumer lags over its partitions (from the committed and from the
        stored offset)."""
        import pandas as pd

        with self._lock:
            reports = list(self.reports)
        if not reports:
            return pd.DataFrame(columns=["seconds", "txmsgs", "txmsg_bytes", "rxmsgs", "rxmsg_bytes", "msg_cnt",
                                         "consumer_lag", "consumer_lag_stored", "requests"])
        t0 = reports[0].get("ts", 0)
        rows = [{"seconds": (r.get("ts", 0) - t0) / 1e6, "txmsgs": r.get("txmsgs", 0),
                 "txmsg_bytes": r.get("txmsg_bytes", 0), "rxmsgs": r.get("rxmsgs", 0),
                 "rxmsg_bytes": r.get("rxmsg_bytes", 0), "msg_cnt": r.get("msg_cnt", 0),
                 "consumer_lag": total_lag(r), "consumer_lag_stored": total_lag(r, "consumer_lag_stored"),
                 "requests": r.get("tx", 0)} for r in reports]
        return pd.DataFrame(rows)

    def brokers(self, report: Optional[dict[str, Any]] = None) -> "pd.DataFrame":
        """Per broker the client talks to: state, round-trip time p50/p99 (ms), requests sent by type."""
        import pandas as pd

        rows = []
        for b in self._pick(report).get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue  # the bootstrap connections
            rtt = b.get("rtt", {})
            requests = {k: v for k, v in b.get("req", {}).items() if v}
            rows.append({"broker": b["nodeid"], "state": b.get("state"), "rtt p50 ms": rtt.get("p50", 0) / 1000,
                         "rtt p99 ms": rtt.get("p99", 0) / 1000, "requests": b.get("tx", 0),
                         "bytes sent": b.get("txbytes", 0), "bytes received": b.get("rxbytes", 0),
                         "by type": requests})
        return pd.DataFrame(rows).set_index("broker").sort_index() if rows else pd.DataFrame()

    def partitions(self, report: Optional[dict[str, Any]] = None) -> "pd.DataFrame":
        """Per topic-partition: the client's view of it (both lags, offsets, records queued and sent)."""
        import pandas as pd

        rows = []
        for topic, t in self._pick(report).get("topics", {}).items():
            for pid, p in t.get("partitions", {}).items():
                if int(pid) < 0:
                    continue  # librdkafka's UA (unassigned) pseudo-partition
                rows.append({"topic": topic, "partition": int(pid), "leader": p.get("leader"),
                             "consumer_lag": p.get("consumer_lag"), "consumer_lag_stored": p.get("consumer_lag_stored"),
                             "committed_offset": p.get("committed_offset"), "stored_offset": p.get("stored_offset"),
                             "hi_offset": p.get("hi_offset"), "app_offset": p.get("app_offset"),
                             "fetchq_cnt": p.get("fetchq_cnt"), "msgq_cnt": p.get("msgq_cnt"),
                             "txmsgs": p.get("txmsgs"), "rxmsgs": p.get("rxmsgs")})
        return pd.DataFrame(rows).set_index(["topic", "partition"]).sort_index() if rows else pd.DataFrame()

    def requests(self, kind: str, report: Optional[dict[str, Any]] = None) -> int:
        """How many requests of ``kind`` (``"Fetch"``, ``"Produce"``, ...) the client sent to all brokers so far."""
        return sum(b.get("req", {}).get(kind, 0) for b in self._pick(report).get("brokers", {}).values())

    def batch_size(self, topic: str, report: Optional[dict[str, Any]] = None) -> Optional[float]:
        """A producer's average batch size (bytes) for ``topic`` over the last reporting window."""
        found = self._pick(report).get("topics", {}).get(topic, {}).get("batchsize", {})
        return found.get("avg") if found.get("cnt") else None


def total_lag(report: dict[str, Any], field: str = "consumer_lag") -> Optional[int]:
    """The sum of ``field`` (``consumer_lag``: from the committed offset; ``consumer_lag_stored``: from the stored
    offset) over a report's partitions that know theirs (None: none does)."""
    lags = [p.get(field, -1) for t in report.get("topics", {}).values()
            for pid, p in t.get("partitions", {}).items() if int(pid) >= 0]
    known = [x for x in lags if x is not None and x >= 0]
    return sum(known) if known else None


__all__ = ["ClientStats", "total_lag"]
