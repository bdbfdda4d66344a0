"""Throughput and latency, measured the same way for Kafka's Java perf tools and the Python client.

``kafka-producer-perf-test`` and ``kafka-consumer-perf-test`` (from the cached jars,
through :mod:`labkit.runtime.tools`) print one summary line each; :func:`java_producer` and
:func:`java_consumer` run them and parse it. :func:`python_producer` and
:func:`python_consumer` measure the confluent-kafka client on the same terms: the
same payload (random upper-case letters, as the Java tool sends), the clock started
at the first record and stopped at the last acknowledgement (or the last record
read), latency from ``produce()`` to the delivery callback for every record.
Every result is a :class:`Throughput` with records/s, MB/s and latency percentiles.
Lesson 11, the ``tune_producer`` exercise and ``benchmarks/producer_throughput.py``
use them.
"""

from __future__ import annotations

import random
import re
import string
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from .errors import ToolError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Throughput:
    """One measured run."""

    client: str
    records: int
    #: Bytes of record values (what both tools count as "MB").
    bytes: int
    seconds: float
    avg_ms: Optional[float] = None
    p50_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    #: Records that were not acknowledged (producer) or not read (consumer).
    failed: int = 0
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: Records acknowledged before the clock started (:func:`python_producer`'s ``warm_up``): in the topic too.
    warm_up: int = 0

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        """MB (2**20 bytes, as Kafka's tools count them) per second."""
        return self.bytes / 2**20 / self.seconds if self.seconds > 0 else 0.0

    def as_row(self, **extra: Any) -> dict[str, Any]:
        return {**extra, "client": self.client, "records": self.records, "records/s": self.records_per_s,
                "MB/s": self.mb_per_s, "avg ms": self.avg_ms, "p50 ms": self.p50_ms, "p99 ms": self.p99_ms,
                "failed": self.failed}


def frame(runs: Sequence[Throughput], **columns: Sequence[Any]) -> "pd.DataFrame":
    """Runs as a table; ``columns`` add one value per run (``acks=["1", "all"]``)."""
    import pandas as pd

    return pd.DataFrame([r.as_row(**{k: v[i] for k, v in columns.items()}) for i, r in enumerate(runs)])


def payload(size: int, seed: int = 0) -> bytes:
    """``size`` random upper-case letters: what ``kafka-producer-perf-test`` sends (compressible like text)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


_CATALOGUE = [f"{colour} {thing}" for colour in ("red", "blue", "green", "black", "white", "large", "small", "organic",
                                                  "classic", "deluxe")
              for thing in ("mug", "t-shirt", "notebook", "lamp", "chair", "sofa", "backpack", "kettle", "bottle", "pen")]


def order_documents(size: int, count: int = 300, seed: int = 0) -> list[bytes]:
    """``count`` different JSON order documents of ``size`` bytes each (a customer, line items from a
    catalogue of 100 products): they compress about 6× with zlib, like real business events."""
    import json

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        doc: dict[str, Any] = {
            "order_id": f"o-{rng.randrange(10**9):09d}",
            "customer": {"id": f"c-{rng.randrange(10**6):06d}", "country": rng.choice(["PT", "NO", "KE", "PE", "JP"]),
                         "tier": rng.choice(["gold", "silver", "bronze"])},
            "status": rng.choice(["NEW", "PAID", "SHIPPED"]), "currency": "EUR", "items": []}
        while len(json.dumps(doc)) < size:
            doc["items"].append({"sku": f"SKU-{rng.randrange(1000):04d}", "name": rng.choice(_CATALOGUE),
                                 "qty": rng.randint(1, 5), "unit_price": round(rng.uniform(2, 200), 2),
                                 "gift_wrap": rng.random() < 0.1})
        out.append(json.dumps(doc).encode()[:size].ljust(size))
    return out


def percentile(sorted_values: Sequence[float], q: float) -> Optional[float]:
    """The ``q`` quantile (0..1) of already sorted values (nearest rank), None when empty."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))]


# ---------------------------------------------------------------------------------------------- Java tools
_PRODUCER_LINE = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th")


def parse_producer_perf(text: str, record_size: int, settings: Mapping[str, Any] = {}) -> Throughput:
    """The last summary line of ``kafka-producer-perf-test`` as a :class:`Throughput`."""
    found = list(_PRODUCER_LINE.finditer(text))
    if not found:
        raise ToolError("kafka-producer-perf-test printed no summary line.", "Its output: " + text[-300:])
    m = found[-1]
    records, rate = int(m["records"]), float(m["rate"])
    return Throughput("kafka-producer-perf-test", records, records * record_size, records / rate if rate else 0.0,
                      float(m["avg"]), float(m["p50"]), float(m["p99"]), settings=dict(settings))


def parse_consumer_perf(text: str) -> Throughput:
    """The CSV line of ``kafka-consumer-perf-test`` (without its group join time) as a :class:`Throughput`."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise ToolError("kafka-consumer-perf-test printed no result line.", "Its output: " + text[-300:])
    names = [n.strip() for n in lines[header].split(",")]
    values = dict(zip(names, (v.strip() for v in lines[header + 1].split(","))))
    fetch_ms = float(values["fetch.time.ms"])
    mb = float(values["data.consumed.in.MB"])
    return Throughput("kafka-consumer-perf-test", int(values["data.consumed.in.nMsg"]), int(mb * 2**20),
                      fetch_ms / 1000)


def _properties(settings: Mapping[str, Any]) -> list[str]:
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items()]


def java_producer(cluster: Any, topic: str, records: int, record_size: int, acks: str = "all",
                  timeout: float = 300.0, **settings: Any) -> Throughput:
    """``kafka-producer-perf-test`` as fast as it can go (``--throughput -1``) with ``acks`` and Java
    producer ``settings`` (dots may be underscores)."""
    props = {"acks": acks, **{k.replace("_", "."): v for k, v in settings.items()}}
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(record_size), "--throughput", "-1"]
    for prop in _properties(props):
        args += ["--command-property", prop]
    result = cluster.tool("kafka-producer-perf-test", *args, timeout=timeout)
    return parse_producer_perf(result.stdout, record_size, props)


def java_consumer(cluster: Any, topic: str, records: int, timeout: float = 300.0, **settings: Any) -> Throughput:
    """``kafka-consumer-perf-test`` reading ``records`` from the start of ``topic`` in a fresh group."""
    args = ["--topic", topic, "--num-records", str(records), "--timeout", "60000",
            "--group", f"perf-java-{uuid.uuid4().hex[:8]}"]
    for prop in _properties({k.replace("_", "."): v for k, v in settings.items()}):
        args += ["--command-property", prop]
    return parse_consumer_perf(cluster.tool("kafka-consumer-perf-test", *args, timeout=timeout).stdout)


# ---------------------------------------------------------------------------------------------- Python client
def python_producer(cluster: Any, topic: str, records: int, record_size: int, acks: str = "all",
                    config: Optional[Mapping[str, Any]] = None, value: Optional[bytes] = None,
                    values: Sequence[bytes] = (), keys: Sequence[Optional[bytes | str]] = (),
                    flush_timeout: float = 120.0, warm_up: bool = False) -> Throughput:
    """The confluent-kafka producer sending ``records`` values of ``record_size`` bytes as fast as it can:
    ``produce()`` in a loop (``poll(0)`` after each, ``BufferError`` waited out), then ``flush()``.

    The values are ``value``, or ``values`` in turn, or :func:`payload`; the keys are ``keys`` in turn
    (none by default: the sticky partitioner places the records). ``config`` is the producer
    configuration on top of ``acks`` (plain data: no callbacks); the clock runs from the first
    ``produce()`` to the last acknowledgement.

    That includes what a new producer does once (metadata, connections, an idempotent producer's id: on a
    busy machine it can outlast a short run). ``warm_up`` sends the first value once and waits for its
    acknowledgement before the clock starts, so runs of different lengths compare rates, not how well each
    hides that cost; the topic then holds that record too (``Throughput.warm_up``)."""
    settings = {"acks": acks, **dict(config or {})}
    producer = cluster.producer(**settings)
    pool = list(values) or [value if value is not None else payload(record_size)]
    key_pool = list(keys) or [None]
    latencies: list[float] = []
    failed = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed[0] += 1
        else:
            latencies.append(msg.latency())  # librdkafka's own: produce() to acknowledgement, in seconds

    warmed = 0
    if warm_up:
        producer.produce(topic, key=key_pool[0], value=pool[0])
        if producer.flush(flush_timeout) == 0:
            warmed = 1
        else:
            failed[0] += 1
    clock = time.perf_counter
    t0 = clock()
    size = 0
    for i in range(records):
        body = pool[i % len(pool)]
        size += len(body)
        while True:
            try:
                producer.produce(topic, key=key_pool[i % len(key_pool)], value=body, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
    left = producer.flush(flush_timeout)
    seconds = clock() - t0
    latencies.sort()
    ok = len(latencies)
    return Throughput("confluent-kafka producer", ok, size * ok // max(records, 1), seconds,
                      1000 * sum(latencies) / ok if ok else None,
                      _ms(percentile(latencies, 0.5)), _ms(percentile(latencies, 0.99)),
                      failed=failed[0] + left, settings=settings, warm_up=warmed)


def python_consumer(cluster: Any, topic: str, records: int, timeout: float = 60.0,
                    config: Optional[Mapping[str, Any]] = None) -> Throughput:
    """The confluent-kafka consumer reading ``records`` from the start of ``topic`` in a fresh group
    (``consume()`` in batches of 1000); the clock runs from the first record read to the last."""
    consumer = cluster.consumer(f"perf-python-{uuid.uuid4().hex[:8]}", **{"enable.auto.commit": False,
                                                                        **dict(config or {})})
    consumer.subscribe([topic])
    count = size = 0
    first: Optional[float] = None
    deadline = time.monotonic() + timeout
    try:
        while count < records and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    continue
                if first is None:
                    first = time.perf_counter()
                count += 1
                size += len(msg.value() or b"")
        seconds = time.perf_counter() - first if first is not None else 0.0
    finally:
        consumer.close()
    return Throughput("confluent-kafka consumer", count, size, seconds, failed=records - count,
                      settings=dict(config or {}))


def _ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else 1000 * seconds


def as_dict(result: Throughput) -> dict[str, Any]:
    """A result as plain data (JSON), with its rates."""
    return {**asdict(result), "records_per_s": result.records_per_s, "mb_per_s": result.mb_per_s}


__all__ = ["Throughput", "as_dict", "frame", "java_consumer", "java_producer", "order_documents",
           "parse_consumer_perf", "parse_producer_perf", "payload", "percentile", "python_consumer",
           "python_producer"]
