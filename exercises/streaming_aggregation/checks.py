"""Checks for streaming_aggregation: the learner's Spark query against generated page views with known answers.

The learner writes three functions (see the notebook):

* ``windowed_counts(raw)`` -- Kafka rows -> parsed views -> 30 s watermark -> count per 1-minute window and page;
* ``to_kafka_records(counts)`` -- those counts as Kafka records (key = page, value = JSON);
* ``start_query(spark, cluster, source_topic, results_topic, checkpoint)`` -- the running query.

Visible checks run the first two on small static tables and look at the streaming plan (seconds);
the visible live check and the hidden ones run ``start_query`` on a real topic with
:func:`labkit.generators.generate_page_views` (late and too-late events included), one round at a
time, and read the results topic back with a plain confluent-kafka consumer. Every learner call is
bounded in time and every query a check started is stopped before the check returns.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import threading
import time
import uuid
import weakref
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional

from labkit.grading import check

WINDOW = timedelta(minutes=1)
DELAY = timedelta(seconds=30)
FIELDS = {"window_start", "window_end", "page", "count"}
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset LONG, timestamp TIMESTAMP, "
                "timestampType INT")
VIEW_SCHEMA = "event_id STRING, page STRING, user STRING, event_time TIMESTAMP"
#: Event time each generated round covers: 35 s rounds bring late events from round 2 and too-late
#: ones in round 5 (with the default 30 s, too-late ones need 6 rounds: a longer grading run).
ROUND_SPAN = "35 seconds"
CALL_TIMEOUT = 60.0     # start_query / processAllAvailable; a correct one takes a few seconds
RESULTS_TIMEOUT = 30.0  # at most this long for the results topic to fill after the last round ...
RESULTS_QUIET = 10.0    # ... giving up earlier when nothing new arrives for this long

#: start_query functions whose query hung once, with what hung: not run again, so a hang costs one timeout.
_HUNG: "weakref.WeakKeyDictionary[Callable[..., Any], str]" = weakref.WeakKeyDictionary()


class _Timeout(AssertionError):
    """Learner code (or the query it started) did not return in time."""


# ---------------------------------------------------------------- calling learner code safely


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # Spark errors carry the JVM stack and plan after the first line; the first line says what happened.
    first = text.splitlines()[0] if text else ""
    first = re.sub(r"^\[[A-Z_.]+\]\s*", "", first)
    first = re.sub(r"\s*SQLSTATE: \w+\.?$", "", first)
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def _bounded(fn: Callable[..., Any], *args: Any, what: str, timeout: float = CALL_TIMEOUT,
             on_timeout: str = "") -> Any:
    """``fn(*args)`` in a helper thread: its result, or a one-line AssertionError if it raises or hangs.

    ``NotImplementedError`` passes through (the grader reports "not attempted").
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"check: {what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise _Timeout(f"{what} did not return within {timeout:.0f} s" + (f" ({on_timeout})" if on_timeout else ""))
    error = box.get("error")
    if error is None:
        return box.get("value")
    if isinstance(error, (NotImplementedError, AssertionError)):
        raise error
    raise AssertionError(f"{what} raised {_one_line(error)}") from error


def _spark(ns):
    import labkit.spark

    return labkit.spark.session(ns.cluster, progress=False)


@contextlib.contextmanager
def _stops_new_queries(spark):
    """Stop every streaming query started inside the block (the learner's, however the block ends)."""
    before = {q.id for q in spark.streams.active}
    try:
        yield
    finally:
        for query in spark.streams.active:
            if query.id not in before:
                with contextlib.suppress(Exception):
                    query.stop()


def _dataframe(value: Any, what: str):
    from pyspark.sql import DataFrame

    assert value is not None, f"{what} returned None: return the DataFrame"
    assert isinstance(value, DataFrame), f"{what} must return a Spark DataFrame, not {type(value).__name__}"
    return value


# ---------------------------------------------------------------- inputs and the reference


def _seed() -> int:
    return random.SystemRandom().randrange(1, 1_000_000)


def _kafka_frame(spark, events):
    """A static DataFrame shaped like Spark's Kafka source (key, value, topic, ...), one row per event.

    Kafka's own ``timestamp`` is the time the rows are made, not the event time: windowing by it is wrong.
    """
    now = datetime.now(timezone.utc)
    rows = [(bytearray(e.key), bytearray(e.value), "page-views", 0, i, now, 0) for i, e in enumerate(events)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def _reference_counts(raw):
    from pyspark.sql import functions as F

    views = raw.select(F.from_json(F.col("value").cast("string"), VIEW_SCHEMA).alias("v")).select("v.*")
    return views.groupBy(F.window("event_time", "1 minute"), "page").count()


def _all_counts(events) -> dict[tuple[datetime, str], int]:
    """Counts per (minute, page) over every event: what a *batch* query gives (no watermark in batch)."""
    counts: Counter = Counter()
    for e in events:
        t = e.event_time
        counts[(t.replace(second=0, microsecond=0), e.page)] += 1
    return dict(counts)


def _with_barely_late_views(events):
    """``events`` (made with ``closing=False``) plus four rounds: one view that moves event time on to ``M``
    (a minute boundary ``W`` plus 15 s), one a second behind it, then two views at ``W`` - 5 s and ``W`` - 12 s,
    and a closing view.

    The two are late, but by less than 30 s: a 30-second watermark (``M`` - 30 s = ``W`` - 15 s) keeps them,
    while a shorter one (10 s: ``W`` + 5 s) has already closed their window. The generator's own late views
    are older but still in an open window, so they cannot tell a 30-second watermark from a 10-second one.
    """
    import dataclasses

    from labkit.generators import CLOSING, LATE, ON_TIME, PageView

    views = list(events.events)
    last_round = max(e.round for e in views)
    newest = max(e.event_time_ms for e in views)
    minute, delay = int(WINDOW.total_seconds() * 1000), int(DELAY.total_seconds() * 1000)
    boundary = ((newest + delay) // minute + 1) * minute   # W, a minute boundary past newest + 30 s
    ahead = boundary + 15_000                               # M
    pages = list(events.params.get("pages") or ("/home", "/search", "/product", "/cart"))

    def view(n: int, page: str, t: int, r: int, kind: str):
        return PageView(f"pv-{events.seed}-edge-{n}", page, "user-00", t, last_round + r, kind)

    views += [view(1, pages[0], ahead, 1, ON_TIME), view(2, pages[0], ahead - 1_000, 2, LATE),
              view(3, pages[1 % len(pages)], boundary - 5_000, 3, LATE),
              view(4, pages[2 % len(pages)], boundary - 12_000, 3, LATE),
              view(5, pages[0], ahead + minute + delay + 1_000, 4, CLOSING)]
    result = dataclasses.replace(events, events=tuple(views))
    result.expected_window_counts()  # raises if any view's fate depended on how Spark cuts micro-batches
    return result


def _label(start: datetime, page: str) -> str:
    return f"{start:%H:%M}-{start + WINDOW:%H:%M} {page}"


def _parse_time(value: Any, field: str, record: str) -> datetime:
    assert isinstance(value, str), f"{field} must be an ISO-8601 string like \"2025-01-01T12:03:00.000Z\"; got {record}"
    try:
        moment = datetime.fromisoformat(re.sub(r"Z$", "+00:00", value.strip()).replace(" ", "T"))
    except ValueError:
        raise AssertionError(f"{field} {value!r} is not an ISO-8601 time like \"2025-01-01T12:03:00.000Z\"") from None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _parse_record(key: Optional[bytes | str], value: Optional[bytes | str]) -> tuple[datetime, str, int]:
    """One results-topic record -> (window start, page, count); AssertionError saying what is wrong."""
    key_text = key.decode(errors="replace") if isinstance(key, (bytes, bytearray)) else key
    value_text = value.decode(errors="replace") if isinstance(value, (bytes, bytearray)) else value
    shown = (value_text or "")[:160]
    assert value_text is not None, "a result record has no value"
    try:
        doc = json.loads(value_text)
    except ValueError:
        raise AssertionError(f"a result value is not JSON: {shown!r}") from None
    assert isinstance(doc, dict), f"a result value must be a JSON object, got {shown!r}"
    assert set(doc) == FIELDS, (f"a result value has the fields {sorted(doc)}; it must have exactly "
                                f"{sorted(FIELDS)}: {shown}")
    start = _parse_time(doc["window_start"], "window_start", shown)
    end = _parse_time(doc["window_end"], "window_end", shown)
    assert end - start == WINDOW, f"window_start and window_end must be 1 minute apart: {shown}"
    assert isinstance(doc["count"], int) and not isinstance(doc["count"], bool), \
        f"count must be a JSON number, not {type(doc['count']).__name__}: {shown}"
    assert key_text == doc["page"], f"the record key must be the page ({doc['page']!r}), got {key_text!r}"
    return start, doc["page"], doc["count"]


def _compare(got: list[tuple[datetime, str, int]], expected: dict[tuple[datetime, str], int],
             duplicate_hint: str, too_many_hint: str, too_few_hint: str) -> None:
    """AssertionError (one line) unless every expected window arrived exactly once with its count."""
    seen: dict[tuple[datetime, str], list[int]] = {}
    for start, page, n in got:
        seen.setdefault((start, page), []).append(n)
    twice = sorted(k for k, v in seen.items() if len(v) > 1)
    if twice:
        k = twice[0]
        raise AssertionError(f"{len(twice)} windows were written more than once, e.g. {_label(*k)} with counts "
                             f"{seen[k]} ({duplicate_hint})")
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    wrong = sorted(k for k in set(seen) & set(expected) if seen[k][0] != expected[k])
    more = [k for k in wrong if seen[k][0] > expected[k]]
    fewer = [k for k in wrong if seen[k][0] < expected[k]]
    problems, hints = [], []
    if missing:
        problems.append(f"{len(missing)} of {len(expected)} windows missing (e.g. {_label(*missing[0])})")
    if extra:
        problems.append(f"{len(extra)} windows that should not exist (e.g. {_label(*extra[0])}: {seen[extra[0]][0]})")
    if wrong:
        examples = ", ".join(f"{_label(*k)}: {seen[k][0]} instead of {expected[k]}" for k in wrong[:2])
        problems.append(f"{len(wrong)} windows with a wrong count ({examples})")
    if more or extra:
        hints.append(too_many_hint)
    if (fewer or missing) and too_few_hint not in hints:
        hints.append(too_few_hint)
    if hints:
        problems[-1] += f" ({'; '.join(hints)})"
    assert not problems, "; ".join(problems)


# ---------------------------------------------------------------- running the learner's query


def _start(ns, spark, cluster, source: str, results: str, checkpoint: str):
    query = _bounded(ns.start_query, spark, cluster, source, results, checkpoint, what="start_query(...)",
                     on_timeout="return the query that writeStream...start() gives; do not wait for it with "
                                "awaitTermination()")
    assert query is not None, "start_query returned None: return the query that writeStream...start() gives"
    assert hasattr(query, "processAllAvailable") and hasattr(query, "stop"), \
        f"start_query must return the StreamingQuery that writeStream...start() gives, not {type(query).__name__}"
    if not query.isActive:
        error = query.exception()
        raise AssertionError("the query returned by start_query is not running"
                             + (f": {_one_line(error)}" if error is not None else
                                " (a one-off trigger? leave the default trigger)"))
    return query


def _process(query, what: str) -> None:
    _bounded(query.processAllAvailable, what=f"the query ({what})",
             on_timeout="leave the default trigger, so each micro-batch starts as soon as data arrives")


def _read_results(cluster, topic: str, want: int, query, timeout: float = RESULTS_TIMEOUT) -> list:
    """The records of the results topic once ``want`` have arrived (plus a short wait for any extra ones)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer = cluster.consumer(f"sa-check-{uuid.uuid4().hex[:8]}", enable_auto_commit=False)
    records: list = []
    try:
        partitions = cluster.describe_topic(topic).partitions
        consumer.assign([TopicPartition(topic, p.partition, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_new < RESULTS_QUIET:
            msg = consumer.poll(0.25)
            if msg is not None and not msg.error():
                records.append(msg)
                last_new = time.monotonic()
                continue
            if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"reading the results topic failed: {msg.error()}")
            if len(records) >= want and time.monotonic() - last_new > 1.5:
                break  # everything expected is there, and nothing more came for a moment
            if not query.isActive:
                error = query.exception()
                raise AssertionError("the query stopped" + (f": {_one_line(error)}" if error is not None else ""))
    finally:
        consumer.close()
    assert records, ("nothing arrived on the results topic after the last round: write to results_topic with the "
                     "Kafka sink in output mode append; a window is written once the watermark, on event_time, "
                     "has passed its end")
    return [_parse_record(m.key(), m.value()) for m in records]


def _run_stream(ns, events, restart_after: Optional[int] = None) -> list:
    """Run the learner's query over ``events`` round by round; returns the parsed result records.

    Round 1 is on the topic *before* the query starts (it must read from the earliest offset).
    With ``restart_after=n`` the query is stopped after round ``n`` and started again on the same
    checkpoint.
    """
    start_query = ns.start_query
    with contextlib.suppress(TypeError):  # not every callable can be weakly referenced
        if start_query in _HUNG:
            raise AssertionError(f"not run again: in an earlier check, {_HUNG[start_query]}")
    try:
        return _run_stream_once(ns, events, restart_after)
    except _Timeout as exc:
        with contextlib.suppress(TypeError):
            _HUNG[start_query] = str(exc)
        raise


def _run_stream_once(ns, events, restart_after: Optional[int]) -> list:
    from labkit.generators import send
    import labkit.spark

    cluster = ns.cluster
    spark = _spark(ns)
    tag = uuid.uuid4().hex[:6]
    source = cluster.create_topic(f"sa-views-{tag}", partitions=3)
    results = cluster.create_topic(f"sa-counts-{tag}", partitions=1)
    checkpoint = labkit.spark.checkpoint_dir(cluster, f"sa-check-{tag}")
    rounds = events.rounds()
    with _stops_new_queries(spark):
        send(cluster, source, rounds[0])
        query = _start(ns, spark, cluster, source, results, checkpoint)
        for number, batch in enumerate(rounds, start=1):
            if number > 1:
                send(cluster, source, batch)
            _process(query, f"round {number} of {len(rounds)}")
            if number == restart_after:
                query.stop()
                query = _start(ns, spark, cluster, source, results, checkpoint)
        return _read_results(cluster, results, len(events.expected_window_counts()), query)


# ---------------------------------------------------------------- visible checks


@check("counts_per_page_and_minute", points=2,
       hint='Parse value with F.from_json(F.col("value").cast("string"), VIEW_SCHEMA), then '
            'groupBy(F.window("event_time", "1 minute"), "page").count().')
def counts_per_page_and_minute(ns):
    """windowed_counts on a small static table of Kafka rows: one row per 1-minute window and page, with the
    window (start, end), the page and the count of views in it."""
    from labkit.generators import generate_page_views
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = _spark(ns)
    events = generate_page_views(seed=_seed(), rounds=3, per_round=25)
    out = _dataframe(_bounded(ns.windowed_counts, _kafka_frame(spark, events), what="windowed_counts(raw)"),
                     "windowed_counts")
    missing = {"window", "page", "count"} - set(out.columns)
    assert not missing, f"the result needs the columns window, page and count; it has {out.columns}"
    window = out.schema["window"].dataType
    assert isinstance(window, T.StructType) and {"start", "end"} <= set(window.names), \
        'the window column must be Spark\'s window struct (start, end), as F.window("event_time", "1 minute") makes it'
    rows = _bounded(lambda: out.select(F.unix_seconds(F.col("window.start")).alias("start"),
                                       F.unix_seconds(F.col("window.end")).alias("end"),
                                       F.col("page").cast("string").alias("page"),
                                       F.col("count").cast("long").alias("count")).collect(),
                    what="reading the result of windowed_counts")
    got = []
    for row in rows:
        assert row["start"] is not None and row["page"] is not None, \
            "some rows have no window or page: is the JSON parsed with the right schema?"
        start = datetime.fromtimestamp(row["start"], tz=timezone.utc)
        assert row["end"] - row["start"] == 60, \
            f"windows must be 1 minute long; one runs {_label(start, row['page'])[:5]} for {row['end'] - row['start']} s"
        got.append((start, row["page"], row["count"]))
    _compare(got, _all_counts(events), duplicate_hint="count once per window and page: tumbling windows",
             too_many_hint="window by event_time from the JSON, not Kafka's timestamp",
             too_few_hint="window by event_time from the JSON, not Kafka's timestamp")


_WATERMARK = re.compile(r"EventTimeWatermark (?:[0-9a-f-]{36}, )?([^#,\s]+)#\d+: [a-z_]+, ([^\n\]]+)")
_INTERVAL = {"week": 604800, "day": 86400, "hour": 3600, "minute": 60, "second": 1, "millisecond": 1e-3,
             "microsecond": 1e-6}


def _interval_seconds(text: str) -> Optional[float]:
    parts = re.findall(r"(-?\d+(?:\.\d+)?)\s*(week|day|hour|minute|second|millisecond|microsecond)s?", text)
    return sum(float(n) * _INTERVAL[unit] for n, unit in parts) if parts else None


def _streaming_plan(df) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        df.explain(mode="extended")
    return buffer.getvalue()


@check("watermark_on_event_time", points=1,
       hint='Call .withWatermark("event_time", "30 seconds") on the parsed views, before the groupBy.')
def watermark_on_event_time(ns):
    """windowed_counts on Spark's Kafka source (a streaming table, not started): the plan has a 30-second
    watermark on event_time, the time of the view from the JSON."""
    import labkit.spark

    spark = _spark(ns)
    raw = (spark.readStream.format("kafka")
           .options(**labkit.spark.kafka_options(ns.cluster, subscribe=f"sa-plan-{uuid.uuid4().hex[:6]}",
                                                 startingOffsets="earliest")).load())
    out = _dataframe(_bounded(ns.windowed_counts, raw, what="windowed_counts(raw)"), "windowed_counts")
    assert out.isStreaming, "given a streaming table, windowed_counts must return a streaming one (use the raw input)"
    plan = _bounded(_streaming_plan, out, what="explaining the plan")
    marks = _WATERMARK.findall(plan)
    assert marks, 'there is no watermark: add .withWatermark("event_time", "30 seconds") before grouping'
    column, delay = marks[0]
    assert column == "event_time", (f"the watermark is on {column!r}; put it on event_time, the time the view "
                                    "happened (Kafka's timestamp is when it was written)")
    seconds = _interval_seconds(delay)
    assert seconds == DELAY.total_seconds(), f"the watermark delay is {delay.strip()}; the task asks for 30 seconds"


@check("kafka_records_format", points=2,
       hint='select(F.col("page").alias("key"), F.to_json(F.struct(F.col("window.start").alias("window_start"), '
            '...)).alias("value"))')
def kafka_records_format(ns):
    """to_kafka_records on a small static table of counts: exactly the columns key and value; key = the page;
    value = JSON {"window_start", "window_end", "page", "count"} with ISO-8601 times."""
    from labkit.generators import generate_page_views
    from pyspark.sql import functions as F

    spark = _spark(ns)
    events = generate_page_views(seed=_seed(), rounds=3, per_round=25)
    counts = _reference_counts(_kafka_frame(spark, events))
    out = _dataframe(_bounded(ns.to_kafka_records, counts, what="to_kafka_records(counts)"), "to_kafka_records")
    assert set(out.columns) == {"key", "value"}, \
        f"the Kafka sink writes the columns key and value; the result has {out.columns}"
    rows = _bounded(lambda: out.select(F.col("key").cast("string").alias("key"),
                                       F.col("value").cast("string").alias("value")).collect(),
                    what="reading the result of to_kafka_records")
    got = [_parse_record(row["key"], row["value"]) for row in rows]
    _compare(got, _all_counts(events), duplicate_hint="one record per row of counts",
             too_many_hint="copy count from the counts table", too_few_hint="copy count from the counts table")


@check("query_writes_results_topic", points=2,
       hint="readStream from source_topic with startingOffsets earliest, your two functions, then writeStream "
            "format kafka, option topic, checkpointLocation, outputMode append, start().")
def query_writes_results_topic(ns):
    """start_query on a short generated stream (no late events): a running query that reads the topic from the
    beginning and writes every closed window once to the results topic, with the right counts."""
    from labkit.generators import generate_page_views

    events = generate_page_views(seed=_seed(), rounds=2, per_round=15, late_per_round=0, too_late_per_round=0)
    got = _run_stream(ns, events)
    _compare(got, events.expected_window_counts(),
             duplicate_hint="use output mode append: each window is written once, when the watermark passes its end",
             too_many_hint="read the source topic once, from the earliest offset",
             too_few_hint='read the source topic from the earliest offset (startingOffsets "earliest")')


# ---------------------------------------------------------------- hidden checks


@check("late_and_too_late_events", points=4, hidden=True)
def late_and_too_late_events(ns):
    """A fresh generated stream on a 3-partition topic, sent in rounds with processAllAvailable between them:
    late events inside the watermark are counted (also two only 5 and 12 s behind it), too-late ones are
    dropped, and every window reaches the results topic exactly once with exactly the expected count."""
    from labkit.generators import generate_page_views

    events = _with_barely_late_views(generate_page_views(seed=_seed(), rounds=5, per_round=25, too_late_per_round=4,
                                                         round_span=ROUND_SPAN, closing=False))
    got = _run_stream(ns, events)
    _compare(got, events.expected_window_counts(),
             duplicate_hint="use output mode append: each window is written once, when the watermark passes its end",
             too_many_hint="events beyond the watermark were counted: is the watermark 30 seconds on event_time?",
             too_few_hint="late events inside the watermark were lost, or the topic was not read from the earliest "
                          "offset: is the watermark 30 seconds on event_time?")


@check("restarts_from_checkpoint", points=3, hidden=True)
def restarts_from_checkpoint(ns):
    """The query is stopped mid-stream and started again with the same checkpoint: it goes on where it
    stopped, so no window is lost or written twice and the counts stay exact."""
    from labkit.generators import generate_page_views

    events = generate_page_views(seed=_seed(), rounds=5, per_round=20, round_span=ROUND_SPAN)
    got = _run_stream(ns, events, restart_after=4)  # the first windows are on the results topic by then,
    # and round 5 brings too-late events a query that lost its watermark would count
    _compare(got, events.expected_window_counts(),
             duplicate_hint="after a restart the query must go on from the checkpoint it was given "
                            "(option checkpointLocation = checkpoint)",
             too_many_hint="events were counted twice after the restart: use the checkpoint you were given",
             too_few_hint="windows lost their counts after the restart: use the checkpoint you were given")
