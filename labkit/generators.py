"""Seeded page-view events with event times, keys and late arrivals -- and the answer a windowed count must give.

    events = generate_page_views(seed=7)            # deterministic: same seed, same events
    for batch in events.rounds():
        send(cluster, topic, batch)                 # confluent-kafka, key = page, value = JSON
        query.processAllAvailable()                 # let Spark see this round before the next
    events.expected_window_counts()                 # {(window start, page): count} Spark must produce

Events are made in *rounds*; each round moves event time forward and is meant to be
processed completely before the next is sent. Rounds from the second on carry a few
**late** events (older than the newest event time already seen, but whose 1-minute
window is still open, so Spark counts them); once some window has closed for sure,
rounds also carry a few **too-late** ones (their window closed before they arrived:
Spark drops them). With the default 30-second rounds that is from round 6 on. Late events are placed so that
which group they fall in does not depend on how Spark cuts the rounds into
micro-batches, so the expected answer is exact. A final closing event moves the
watermark past every window, so an append-mode query emits them all.

Event times are fixed (they start at :data:`BASE_TIME`), independent of when the
events are sent; the Kafka record timestamp stays the send time.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

from .errors import LabkitError
from .runtime.librdkafka import Producer as LabProducer
from .runtime.librdkafka import quiet

if TYPE_CHECKING:
    import pandas as pd
    from confluent_kafka import Producer

    from .runtime.protocols import ClusterLike

#: Event time of the first event of every generated stream (a round minute, UTC).
BASE_TIME = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
PAGES = ("/home", "/search", "/product", "/cart")
ON_TIME, LATE, TOO_LATE, CLOSING = "on_time", "late", "too_late", "closing"

_UNITS = {"ms": 0.001, "millisecond": 0.001, "s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
          "h": 3600, "hour": 3600}


def parse_duration(text: Union[str, int, float, timedelta]) -> int:
    """``"1 minute"``, ``"30 seconds"``, ``"500 ms"`` (Spark's interval style), seconds or a timedelta -> ms."""
    if isinstance(text, timedelta):
        return int(text.total_seconds() * 1000)
    if isinstance(text, (int, float)):
        return int(text * 1000)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", text.lower())
    unit = match.group(2) if match else ""
    unit = unit if unit in _UNITS else unit.removesuffix("s")  # "ms" is a unit, "seconds" a plural
    if not match or unit not in _UNITS:
        raise LabkitError(f"Cannot read the duration {text!r}.", 'Write it like Spark does: "1 minute", "30 seconds".')
    return int(float(match.group(1)) * _UNITS[unit] * 1000)


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def iso(ms: int) -> str:
    """Milliseconds since the epoch -> ``2025-01-01T12:00:03.250Z``."""
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass(frozen=True)
class PageView:
    """One page view: who saw which page when (``event_time_ms``), in which round it is sent."""

    event_id: str
    page: str
    user: str
    event_time_ms: int
    round: int
    #: What the generator made it: "on_time", "late" (out of order, still counted),
    #: "too_late" (its window closed before it arrived) or "closing" (moves the watermark on).
    kind: str

    @property
    def event_time(self) -> datetime:
        return from_ms(self.event_time_ms)

    @property
    def key(self) -> bytes:
        return self.page.encode()

    @property
    def value(self) -> bytes:
        """The JSON the topic carries: ``{"event_id", "page", "user", "event_time"}`` (ISO-8601, UTC)."""
        return json.dumps({"event_id": self.event_id, "page": self.page, "user": self.user,
                           "event_time": iso(self.event_time_ms)}).encode()


#: ``{(window start, key): count}``
WindowCounts = dict[tuple[datetime, str], int]


@dataclass(frozen=True)
class GeneratedEvents:
    """A generated stream: its events in send order, and the window and watermark it was made for."""

    events: tuple[PageView, ...]
    window: str = "1 minute"
    watermark: str = "30 seconds"
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.events)

    def rounds(self) -> list[list[PageView]]:
        """The events grouped by round, in send order."""
        out: dict[int, list[PageView]] = {}
        for e in self.events:
            out.setdefault(e.round, []).append(e)
        return [out[r] for r in sorted(out)]

    def by_kind(self) -> Counter:
        return Counter(e.kind for e in self.events)

    def expected_window_counts(self, closed_only: bool = True) -> WindowCounts:
        """What a windowed count with this stream's window and watermark must produce (see module doc)."""
        return expected_window_counts(self.events, self.window, self.watermark, closed_only=closed_only)

    def to_pandas(self) -> "pd.DataFrame":
        import pandas as pd

        rows = [{**asdict(e), "event_time": e.event_time} for e in self.events]
        return pd.DataFrame(rows).drop(columns=["event_time_ms"])


def generate_page_views(seed: int = 0, rounds: int = 8, per_round: int = 30, late_per_round: int = 3,
                        too_late_per_round: int = 2, pages: Sequence[str] = PAGES, users: int = 20,
                        window: str = "1 minute", watermark: str = "30 seconds", round_span: str = "30 seconds",
                        start: datetime = BASE_TIME, closing: bool = True) -> GeneratedEvents:
    """A reproducible stream of page views (same arguments, same events).

    Round ``r`` holds ``per_round`` on-time events in its own ``round_span`` of event time,
    then (from round 2) ``late_per_round`` late and up to ``too_late_per_round`` too-late events
    (from the first round in which a window has surely closed: round 6 with 30-second rounds, a
    1-minute window and a 30-second watermark), shuffled in. ``closing`` adds a last round with one event far enough
    ahead to close every window.
    """
    rng = random.Random(seed)
    window_ms, delay_ms, span_ms = parse_duration(window), parse_duration(watermark), parse_duration(round_span)
    base = to_ms(start)
    events: list[PageView] = []
    maxima: list[int] = []  # max event time through each round
    counter = 0

    def make(page: str, t: int, r: int, kind: str) -> PageView:
        nonlocal counter
        counter += 1
        return PageView(f"pv-{seed}-{counter:06d}", page, f"user-{rng.randrange(users):02d}", t, r, kind)

    for r in range(1, rounds + 1):
        lo = base + (r - 1) * span_ms
        batch = [make(rng.choice(pages), lo + rng.randrange(span_ms), r, ON_TIME) for _ in range(per_round)]
        newest = max([e.event_time_ms for e in batch] + maxima[-1:])
        maxima.append(newest)
        if r >= 2:
            batch += [make(rng.choice(pages), t, r, LATE)
                      for t in _draw(rng, late_per_round, _late_ok(maxima, r, window_ms, delay_ms),
                                     base, maxima[-2])]
        if r >= 3:
            batch += [make(rng.choice(pages), t, r, TOO_LATE)
                      for t in _draw(rng, too_late_per_round, _too_late_ok(maxima, r, window_ms, delay_ms),
                                     base, maxima[-3])]
        rng.shuffle(batch)
        events += batch
    if closing:
        t = maxima[-1] + window_ms + delay_ms + 1
        events.append(make(pages[0], t, rounds + 1, CLOSING))
    result = GeneratedEvents(tuple(events), window, watermark, seed,
                             params={"rounds": rounds, "per_round": per_round, "late_per_round": late_per_round,
                                     "too_late_per_round": too_late_per_round, "pages": list(pages)})
    expected_window_counts(result.events, window, watermark)  # proves the answer is unambiguous
    return result


def _late_ok(maxima: list[int], r: int, window_ms: int, delay_ms: int):  # type: ignore[no-untyped-def]
    # Kept for sure: the window ends after the newest watermark this round can reach.
    return lambda t: _window_end(t, window_ms) > maxima[r - 1] - delay_ms


def _too_late_ok(maxima: list[int], r: int, window_ms: int, delay_ms: int):  # type: ignore[no-untyped-def]
    # Dropped for sure: the window ended before the oldest watermark this round can meet.
    return lambda t: _window_end(t, window_ms) < _lowest_watermark(maxima, r, delay_ms)


def _draw(rng: random.Random, count: int, ok, lo: int, hi: int) -> list[int]:  # type: ignore[no-untyped-def]
    """``count`` times in ``[lo, hi)`` that pass ``ok`` (rejection sampling; fewer if the range has none)."""
    out: list[int] = []
    for _ in range(count * 200):
        if len(out) == count or hi <= lo:
            break
        t = lo + rng.randrange(hi - lo)
        if ok(t):
            out.append(t)
    return out


def _window_end(t: int, window_ms: int) -> int:
    return t - t % window_ms + window_ms


def _lowest_watermark(maxima: list[int], r: int, delay_ms: int) -> int:
    """The oldest watermark Spark may filter round ``r``'s rows with.

    Spark drops a late row when its window ended at or before the watermark of the
    *previous* micro-batch; if a round's last micro-batch is the one right before the
    next round's first, that watermark reflects only rounds ``<= r - 2``.
    """
    return maxima[r - 3] - delay_ms if r >= 3 else 0


def expected_window_counts(events: Iterable[PageView], window: str = "1 minute", watermark: str = "30 seconds",
                           closed_only: bool = True) -> WindowCounts:
    """Per ``(window start, page)`` the count Spark's ``groupBy(window(event_time, window), page).count()``
    with ``withWatermark(event_time, watermark)`` ends with, when each round is processed before the next.

    A row is dropped when its window ended before (or at) the watermark it meets; the watermark is
    the newest event time seen in earlier micro-batches minus ``watermark``. Which earlier batches
    count depends on batch boundaries, so an event whose fate depends on them raises
    :class:`LabkitError` (the generator never makes one). ``closed_only`` keeps only the windows the
    final watermark has closed: those an append-mode query emits.
    """
    window_ms, delay_ms = parse_duration(window), parse_duration(watermark)
    by_round: dict[int, list[PageView]] = {}
    for e in events:
        by_round.setdefault(e.round, []).append(e)
    maxima: list[int] = []
    counts: Counter = Counter()
    for r in sorted(by_round):
        batch = by_round[r]
        maxima.append(max([e.event_time_ms for e in batch] + maxima[-1:]))
        lowest = maxima[-3] - delay_ms if len(maxima) >= 3 else 0
        highest = maxima[-1] - delay_ms
        for e in batch:
            end = _window_end(e.event_time_ms, window_ms)
            if end < lowest:
                continue  # dropped whatever the batches
            if end <= highest:
                raise LabkitError(f"Event {e.event_id} (round {r}, {iso(e.event_time_ms)}) may or may not be dropped, "
                                  "depending on how Spark splits the rounds into micro-batches.",
                                  "Move it further back or forward in event time.")
            counts[(e.event_time_ms - e.event_time_ms % window_ms, e.page)] += 1
    final = (maxima[-1] - delay_ms) if maxima else 0
    return {(from_ms(start), page): n for (start, page), n in sorted(counts.items())
            if not closed_only or start + window_ms <= final}


def window_counts_frame(counts: WindowCounts) -> "pd.DataFrame":
    """``{(window start, page): n}`` as a table sorted by window and page (columns window_start, page, count)."""
    import pandas as pd

    rows = [{"window_start": start.replace(tzinfo=None), "page": page, "count": n}
            for (start, page), n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["window_start", "page", "count"])


# ---------------------------------------------------------------- producing


def send(target: Union["ClusterLike", "Producer", str], topic: str, events: Sequence[PageView],
         rate: Optional[float] = None, timeout: float = 30.0) -> list[PageView]:
    """Produce ``events`` to ``topic`` (key = page, value = JSON), ``rate`` events/s (None: as fast as possible).

    ``target`` is a labkit cluster, bootstrap servers, or your own confluent-kafka Producer.
    Waits until every record is acknowledged and returns the events sent; raises
    :class:`LabkitError` if any delivery failed.
    """
    from confluent_kafka import Producer

    if isinstance(target, Producer):
        producer, topic_name = target, topic
    elif isinstance(target, str):
        producer, topic_name = LabProducer({"bootstrap.servers": target, "linger.ms": 5, "acks": "all", **quiet()}), topic
    else:
        producer = target.producer(acks="all", linger_ms=5)
        topic_name = target.topic_name(topic)
    failures: list[str] = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            failures.append(str(err))

    t0 = time.monotonic()
    for i, e in enumerate(events):
        if rate:
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                producer.poll(delay)
        while True:
            try:
                producer.produce(topic_name, key=e.key, value=e.value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(timeout)
    if left or failures:
        raise LabkitError(f"{left + len(failures)} of {len(events)} events were not delivered to {topic_name!r}"
                          + (f" ({failures[0]})" if failures else "") + ".",
                          "Check that the cluster is running and the topic exists.")
    return list(events)


#: The name learner copies of streaming_aggregation made before the rename import (``labkit.producing.counts_frame``
#: is the other table of counts: records acknowledged, lost and duplicated).
counts_frame = window_counts_frame
