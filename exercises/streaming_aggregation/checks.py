"""Checks for streaming_aggregation: the learner's Spark query against generated page views with known answers.

The learner writes three functions (see the notebook):

* ``windowed_counts(raw, window, delay)`` -- Kafka rows -> parsed views -> a ``delay`` watermark -> count per
  tumbling ``window`` and page;
* ``to_kafka_records(counts)`` -- those counts as Kafka records (key = page, value = JSON);
* ``start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay)`` -- the running query.

The window length and the watermark delay are chosen at grade time from :data:`SHAPES`, none of them
lesson 07's (1 minute, 30 seconds): a query copied from the lesson counts the wrong windows.

Spark and the learner's functions live in the learner's kernel: the task :func:`in_kernel` runs one
step there (call a function on a table built from plain data, start the query, let it process
what has arrived, stop it) and hands back plain data only. Everything else happens here, in the
grader: the page views are generated now (:func:`labkit.generators.generate_page_views` with a new
seed) and sent to the source topic by the grader, round by round, so the kernel never holds them
or their answer; the results topic is read back with a plain consumer; the query's checkpoint is
read from disk. Every learner call is bounded in time (in the kernel) and every query a check
started is stopped before the check returns. Hidden checks are in ``hidden_checks.py``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import tempfile
import time
import uuid
import weakref
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Optional

from labkit.grading import check, harness, Rules
from labkit.waiting import Deadline

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: The generator's expected answers (expected_window_counts, GeneratedEvents, PageView, ...) are the answer;
#: the learner is given the generator, send and window_counts_frame (the notebook's setup cell).
RULES = Rules(forbid=["labkit.generators"], allow=["generate_page_views", "send", "window_counts_frame", "counts_frame"])

FIELDS = {"window_start", "window_end", "page", "count"}
#: (window, watermark delay, event time each generated round covers) the grader picks from. Each round span
#: brings late events from round 2 and too-late ones by round 5 for that window and delay, whatever the seed
#: (checked over 300 seeds for every stream the checks generate).
SHAPES = (("30 seconds", "10 seconds", "20 seconds"), ("90 seconds", "20 seconds", "45 seconds"),
          ("2 minutes", "1 minute", "75 seconds"))
#: Time limits, in a quiet machine's seconds (labkit.waiting.Deadline: a busy machine stretches them).
CALL_TIMEOUT = 60.0     # start_query / processAllAvailable; a correct one takes a few seconds
SESSION_TIMEOUT = 300.0  # the first step may start the kernel's Spark session again (the notebook stopped it)
RESULTS_TIMEOUT = 30.0  # at most this long for the results topic to fill after the last round ...
RESULTS_QUIET = 10.0    # ... giving up earlier when nothing new arrives for this long

#: Namespaces whose query hung once, with what hung: not run again, so a hang costs one timeout.
_HUNG: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------- the task: one step in the learner's kernel


def in_kernel(user, op, bootstrap, *args):
    """A task: one step of a check, next to Spark and the learner's functions. Returns plain data:
    ``{"error": "<one line>", "hung": bool}`` when the learner's code raised or did not return in time.

    ops: ``active`` (ids of running queries), ``plan`` (explain windowed_counts on the Kafka source),
    ``counts`` (windowed_counts on a static table of Kafka rows), ``records`` (to_kafka_records on a
    table of counts), ``start`` / ``process`` / ``status`` / ``stop`` (the learner's query), ``stop_new``
    (stop every query not running before). ``plan``, ``counts`` and ``start`` end with the window and
    the delay the learner's functions are called with.
    """
    import contextlib
    import io
    import re
    import threading
    from datetime import datetime, timezone

    import labkit
    import labkit.spark
    from labkit.waiting import Deadline
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    class Refused(Exception):
        pass

    def one_line(exc):
        text = str(exc).strip()
        # Spark errors carry the JVM stack and plan after the first line; the first line says what happened.
        first = text.splitlines()[0] if text else ""
        first = re.sub(r"^\[[A-Z_.]+\]\s*", "", first)
        first = re.sub(r"\s*SQLSTATE: \w+\.?$", "", first)
        return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__

    def bounded(fn, *fn_args, what, timeout=60.0, on_timeout=""):
        box = {}

        def run():
            try:
                box["value"] = fn(*fn_args)
            except BaseException as exc:  # noqa: BLE001 - reported below
                box["error"] = exc

        worker = threading.Thread(target=run, name=f"check: {what}", daemon=True)
        worker.start()
        deadline = Deadline(timeout)  # a quiet machine's seconds: a starved Spark job is not a hung one
        while worker.is_alive() and not deadline.expired():
            worker.join(deadline.wait_time(1.0))
        if worker.is_alive():
            raise Refused(f"{what} did not return within {deadline}" + (f" ({on_timeout})" if on_timeout else ""),
                          True)
        error = box.get("error")
        if error is None:
            return box.get("value")
        if isinstance(error, NotImplementedError):
            raise error
        raise Refused(f"{what} raised {one_line(error)}", False)

    def dataframe(value, what):
        from pyspark.sql import DataFrame

        if value is None:
            raise Refused(f"{what} returned None: return the DataFrame", False)
        if not isinstance(value, DataFrame):
            raise Refused(f"{what} must return a Spark DataFrame, not {type(value).__name__}", False)
        return value

    cluster = user.get("cluster")
    if getattr(cluster, "bootstrap_servers", None) != bootstrap:
        cluster = labkit.connect(bootstrap)
    spark = labkit.spark.session(cluster, progress=False)
    queries = getattr(spark, "_labkit_grading_queries", None)
    if queries is None:
        queries = {}
        spark._labkit_grading_queries = queries
    try:
        if op == "active":
            return [str(q.id) for q in spark.streams.active]
        if op == "stop_new":
            before, stopped = set(args[0]), 0
            for query in spark.streams.active:
                if str(query.id) not in before:
                    with contextlib.suppress(Exception):
                        query.stop()
                        stopped += 1
            return {"stopped": stopped}
        if op == "plan":
            topic, window, delay = args
            raw = (spark.readStream.format("kafka")
                   .options(**labkit.spark.kafka_options(cluster, subscribe=topic, startingOffsets="earliest"))
                   .load())
            out = dataframe(bounded(user["windowed_counts"], raw, window, delay,
                                    what=f"windowed_counts(raw, {window!r}, {delay!r})"), "windowed_counts")
            if not out.isStreaming:
                return {"streaming": False}

            def explain():
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    out.explain(mode="extended")
                return buffer.getvalue()

            return {"streaming": True, "plan": bounded(explain, what="explaining the plan")}
        if op == "counts":
            now = datetime.now(timezone.utc)  # Kafka's timestamp: when the rows were made, not the event time
            views, window, delay = args
            rows = [(bytearray(k), bytearray(v), "page-views", 0, i, now, 0) for i, (k, v) in enumerate(views)]
            raw = spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset LONG, "
                                              "timestamp TIMESTAMP, timestampType INT")
            out = dataframe(bounded(user["windowed_counts"], raw, window, delay,
                                    what=f"windowed_counts(raw, {window!r}, {delay!r})"), "windowed_counts")
            columns = list(out.columns)
            if not {"window", "page", "count"} <= set(columns):
                return {"columns": columns}
            window = out.schema["window"].dataType
            if not (isinstance(window, T.StructType) and {"start", "end"} <= set(window.names)):
                return {"columns": columns, "window": False}
            got = bounded(lambda: out.select(F.unix_seconds(F.col("window.start")).alias("start"),
                                             F.unix_seconds(F.col("window.end")).alias("end"),
                                             F.col("page").cast("string").alias("page"),
                                             F.col("count").cast("long").alias("count")).collect(),
                          what="reading the result of windowed_counts")
            return {"columns": columns, "window": True,
                    "rows": [(r["start"], r["end"], r["page"], r["count"]) for r in got]}
        if op == "records":
            rows = [((datetime.fromtimestamp(s, tz=timezone.utc), datetime.fromtimestamp(e, tz=timezone.utc)), p, n)
                    for s, e, p, n in args[0]]
            counts = spark.createDataFrame(rows, "window STRUCT<start: TIMESTAMP, end: TIMESTAMP>, page STRING, "
                                                 "count BIGINT")
            out = dataframe(bounded(user["to_kafka_records"], counts, what="to_kafka_records(counts)"),
                            "to_kafka_records")
            columns = list(out.columns)
            if set(columns) != {"key", "value"}:
                return {"columns": columns}
            got = bounded(lambda: out.select(F.col("key").cast("string").alias("key"),
                                             F.col("value").cast("string").alias("value")).collect(),
                          what="reading the result of to_kafka_records")
            return {"columns": columns, "rows": [(r["key"], r["value"]) for r in got]}
        if op == "start":
            from pyspark.sql.streaming import StreamingQuery

            source, results, checkpoint, window, delay = args
            query = bounded(user["start_query"], spark, cluster, source, results, checkpoint, window, delay,
                            what="start_query(...)",
                            on_timeout="return the query that writeStream...start() gives; do not wait for it with "
                                       "awaitTermination()")
            if query is None:
                raise Refused("start_query returned None: return the query that writeStream...start() gives", False)
            if not isinstance(query, StreamingQuery):
                raise Refused("start_query must return the StreamingQuery that writeStream...start() gives, not "
                              f"{type(query).__name__}", False)
            queries[str(query.id)] = query
            if not query.isActive:
                error = query.exception()
                raise Refused("the query returned by start_query is not running"
                              + (f": {one_line(error)}" if error is not None else
                                 " (a one-off trigger? leave the default trigger)"), False)
            return {"id": str(query.id)}
        query = queries.get(args[0])
        if query is None:
            raise Refused("the query is gone", False)
        if op == "process":
            bounded(query.processAllAvailable, what=f"the query ({args[1]})",
                    on_timeout="leave the default trigger, so each micro-batch starts as soon as data arrives")
            return {"ok": True}
        if op == "status":
            error = None if query.isActive else query.exception()
            return {"active": query.isActive, "error": one_line(error) if error is not None else ""}
        if op == "stop":
            bounded(query.stop, what="stopping the query")
            return {"ok": True}
        raise ValueError(f"unknown step {op!r}")
    except Refused as refused:
        message, hung = refused.args
        return {"error": message, "hung": hung}


# ---------------------------------------------------------------- the grader's side


class _Timeout(AssertionError):
    """Learner code (or the query it started) did not return in time."""


def step(ns, op: str, *args: Any, timeout: float = CALL_TIMEOUT + SESSION_TIMEOUT) -> Any:
    """:func:`in_kernel` for ``op``; its answer, or AssertionError (``_Timeout`` if it hung) with its message."""
    answer = ns.run(in_kernel, op, ns.cluster.bootstrap_servers, *args, timeout=timeout)
    if isinstance(answer, dict) and answer.get("error"):
        raise (_Timeout if answer.get("hung") else AssertionError)(answer["error"])
    return answer


def seed() -> int:
    return random.SystemRandom().randrange(1, 1_000_000)


def shape() -> tuple[str, str, str]:
    """(window, delay, round span) chosen now."""
    return random.SystemRandom().choice(SHAPES)


def length(duration: str) -> timedelta:
    """A Spark interval string ("90 seconds") as a timedelta."""
    from labkit.generators import parse_duration

    return timedelta(milliseconds=parse_duration(duration))


def all_counts(events) -> dict[tuple[datetime, str], int]:
    """Counts per (window, page) over every event: what a *batch* query gives (no watermark in batch)."""
    window_ms = int(length(events.window).total_seconds() * 1000)
    counts: Counter = Counter()
    for e in events:
        start_ms = e.event_time_ms - e.event_time_ms % window_ms
        counts[(datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc), e.page)] += 1
    return dict(counts)


def label(start: datetime, page: str, window: timedelta = timedelta(0)) -> str:
    return f"{start:%H:%M:%S}-{start + window:%H:%M:%S} {page}" if window else f"{start:%H:%M:%S} {page}"


def _parse_time(value: Any, field: str, record: str) -> datetime:
    assert isinstance(value, str), f"{field} must be an ISO-8601 string like \"2025-01-01T12:03:00.000Z\"; got {record}"
    try:
        moment = datetime.fromisoformat(re.sub(r"Z$", "+00:00", value.strip()).replace(" ", "T"))
    except ValueError:
        raise AssertionError(f"{field} {value!r} is not an ISO-8601 time like \"2025-01-01T12:03:00.000Z\"") from None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def parse_record(key: Optional[bytes | str], value: Optional[bytes | str], window: timedelta
                 ) -> tuple[datetime, str, int]:
    """One results-topic record of ``window``-long windows -> (window start, page, count); AssertionError saying
    what is wrong."""
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
    assert end - start == window, \
        f"window_start and window_end must be {window.total_seconds():g} s apart (the window asked for): {shown}"
    assert isinstance(doc["count"], int) and not isinstance(doc["count"], bool), \
        f"count must be a JSON number, not {type(doc['count']).__name__}: {shown}"
    assert key_text == doc["page"], f"the record key must be the page ({doc['page']!r}), got {key_text!r}"
    return start, doc["page"], doc["count"]


def compare(got: list[tuple[datetime, str, int]], expected: dict[tuple[datetime, str], int],
            duplicate_hint: str, too_many_hint: str, too_few_hint: str, window: timedelta = timedelta(0)) -> None:
    """AssertionError (one line) unless every expected window arrived exactly once with its count."""
    seen: dict[tuple[datetime, str], list[int]] = {}
    for start, page, n in got:
        seen.setdefault((start, page), []).append(n)
    twice = sorted(k for k, v in seen.items() if len(v) > 1)
    if twice:
        k = twice[0]
        raise AssertionError(f"{len(twice)} windows were written more than once, e.g. {label(*k, window)} with "
                             f"counts {seen[k]} ({duplicate_hint})")
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    wrong = sorted(k for k in set(seen) & set(expected) if seen[k][0] != expected[k])
    more = [k for k in wrong if seen[k][0] > expected[k]]
    fewer = [k for k in wrong if seen[k][0] < expected[k]]
    problems, hints = [], []
    if missing:
        problems.append(f"{len(missing)} of {len(expected)} windows missing (e.g. {label(*missing[0], window)})")
    if extra:
        problems.append(f"{len(extra)} windows that should not exist "
                        f"(e.g. {label(*extra[0], window)}: {seen[extra[0]][0]})")
    if wrong:
        examples = ", ".join(f"{label(*k, window)}: {seen[k][0]} instead of {expected[k]}" for k in wrong[:2])
        problems.append(f"{len(wrong)} windows with a wrong count ({examples})")
    if more or extra:
        hints.append(too_many_hint)
    if (fewer or missing) and too_few_hint not in hints:
        hints.append(too_few_hint)
    if hints:
        problems[-1] += f" ({'; '.join(hints)})"
    assert not problems, "; ".join(problems)


# ---------------------------------------------------------------- running the learner's query


def _read_results(ns, topic: str, expected: dict[tuple[datetime, str], int], query_id: str,
                  window: timedelta) -> list:
    """The parsed records of the results topic once every ``expected`` window has arrived, or one record proves the
    answer wrong (a malformed record at once; a window that should not exist, a wrong count or a repeat after a
    short wait for the rest), or nothing new came for a while."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    cluster = ns.cluster
    consumer = cluster.consumer(f"sa-check-{uuid.uuid4().hex[:8]}", enable_auto_commit=False)
    records: list = []
    seen: set[tuple[datetime, str]] = set()
    wrong = False
    try:
        partitions = cluster.describe_topic(topic).partitions
        consumer.assign([TopicPartition(topic, p.partition, OFFSET_BEGINNING) for p in partitions])
        deadline, quiet = Deadline(RESULTS_TIMEOUT), Deadline(RESULTS_QUIET)
        last_status = time.monotonic()
        while not deadline.expired() and not quiet.expired():
            msg = consumer.poll(0.25)
            if msg is not None and not msg.error():
                start, page, count = record = parse_record(msg.key(), msg.value(), window)
                wrong = wrong or expected.get((start, page)) != count or (start, page) in seen
                seen.add((start, page))
                records.append(record)
                quiet = Deadline(RESULTS_QUIET)
                continue
            if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"reading the results topic failed: {msg.error()}")
            if (wrong or len(seen) >= len(expected)) and quiet.elapsed() > 1.5:
                break  # every window expected is there (or one already proves the answer wrong): nothing more came
            if time.monotonic() - last_status > 3:
                last_status = time.monotonic()
                status = step(ns, "status", query_id)
                if not status["active"]:
                    raise AssertionError("the query stopped" + (f": {status['error']}" if status["error"] else ""))
    finally:
        consumer.close()
    assert records, ("nothing arrived on the results topic after the last round: write to results_topic with the "
                     "Kafka sink in output mode append; a window is written once the watermark, on event_time, "
                     "has passed its end")
    return records


def checkpoint_offsets(checkpoint: Path) -> dict[str, dict[int, int]]:
    """What the query's checkpoint says it has read: the last ``offsets/N`` file, {topic: {partition: offset}}."""
    logs = sorted((int(p.name), p) for p in (checkpoint / "offsets").glob("*") if p.name.isdigit()) \
        if (checkpoint / "offsets").is_dir() else []
    if not logs:
        return {}
    found: dict[str, dict[int, int]] = {}
    for line in logs[-1][1].read_text().splitlines()[2:]:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            for topic, parts in doc.items():
                if isinstance(parts, dict):
                    found[topic] = {int(p): int(o) for p, o in parts.items() if str(p).lstrip("-").isdigit()}
    return found


def _check_checkpoint(ns, checkpoint: Path, source: str) -> None:
    """The checkpoint it was given records the source topic read to its end (Spark's Kafka source did the reading)."""
    ends = {p.partition: p.high_watermark or 0 for p in ns.cluster.describe_topic(source).partitions}
    read = checkpoint_offsets(checkpoint).get(source)
    assert read is not None, ("the checkpoint it was given does not record reading the source topic: read "
                              "source_topic with Spark's Kafka source and set checkpointLocation to checkpoint")
    assert read == ends, (f"the query's checkpoint records offsets {read} of the source topic, which ends at {ends}: "
                          "every round must be read")


def run_stream(ns, events, restart_after: Optional[int] = None) -> list:
    """Run the learner's query over ``events`` round by round; returns the parsed result records.

    The query is started with the window and watermark delay ``events`` was generated for. Round 1 is on
    the topic *before* the query starts (it must read from the earliest offset).
    With ``restart_after=n`` the query is stopped after round ``n`` and started again on the same
    checkpoint. The checkpoint must record the source topic read to its end.
    """
    if ns in _HUNG:
        raise AssertionError(f"not run again: in an earlier check, {_HUNG[ns]}")
    try:
        return _run_stream_once(ns, events, restart_after)
    except _Timeout as exc:
        _HUNG[ns] = str(exc)
        raise


def _run_stream_once(ns, events, restart_after: Optional[int]) -> list:
    from labkit.generators import send

    cluster = ns.cluster
    tag = uuid.uuid4().hex[:6]
    source = cluster.create_topic(f"sa-views-{tag}", partitions=3)
    results = cluster.create_topic(f"sa-counts-{tag}", partitions=1)
    checkpoint = Path(tempfile.mkdtemp(prefix="labkit-sa-")) / "checkpoint"
    rounds = events.rounds()
    before = step(ns, "active")
    try:
        send(cluster, source, rounds[0])
        query = step(ns, "start", source, results, str(checkpoint), events.window, events.watermark)["id"]
        for number, batch in enumerate(rounds, start=1):
            if number > 1:
                send(cluster, source, batch)
            step(ns, "process", query, f"round {number} of {len(rounds)}")
            if number == restart_after:
                step(ns, "stop", query)
                query = step(ns, "start", source, results, str(checkpoint), events.window, events.watermark)["id"]
        got = _read_results(ns, results, events.expected_window_counts(), query, length(events.window))
        _check_checkpoint(ns, checkpoint, source)
        return got
    finally:
        try:
            step(ns, "stop_new", before)
        finally:
            shutil.rmtree(checkpoint.parent, ignore_errors=True)


# ---------------------------------------------------------------- visible checks


_INTERVAL = {"week": 604800, "day": 86400, "hour": 3600, "minute": 60, "second": 1, "millisecond": 1e-3,
             "microsecond": 1e-6}
_WATERMARK = re.compile(r"EventTimeWatermark (?:[0-9a-f-]{36}, )?([^#,\s]+)#\d+: [a-z_]+, ([^\n\]]+)")


def _interval_seconds(text: str) -> Optional[float]:
    parts = re.findall(r"(-?\d+(?:\.\d+)?)\s*(week|day|hour|minute|second|millisecond|microsecond)s?", text)
    return sum(float(n) * _INTERVAL[unit] for n, unit in parts) if parts else None


def stream(rounds: int, per_round: int, **options: Any):
    """Page views generated now, for a window and delay chosen now (:data:`SHAPES`)."""
    from labkit.generators import generate_page_views

    window, delay, span = shape()
    return generate_page_views(seed=seed(), rounds=rounds, per_round=per_round, window=window, watermark=delay,
                               round_span=span, **options)


@check("counts_per_page_and_window", points=2,
       hint='Parse value with F.from_json(F.col("value").cast("string"), VIEW_SCHEMA), then group by '
            'F.window("event_time", window) and the page, and count.')
def counts_per_page_and_window(ns):
    """windowed_counts on a small static table of Kafka rows, with a window length chosen at grade time: one
    row per window and page, with the window (start, end), the page and the count of views in it."""
    harness.attempted(ns, "windowed_counts")
    events = stream(rounds=3, per_round=25)
    window = length(events.window)
    out = step(ns, "counts", [(e.key, e.value) for e in events], events.window, events.watermark)
    missing = {"window", "page", "count"} - set(out["columns"])
    assert not missing, f"the result needs the columns window, page and count; it has {out['columns']}"
    assert out.get("window"), \
        'the window column must be Spark\'s window struct (start, end), as F.window("event_time", window) makes it'
    got = []
    for start_s, end_s, page, count in out["rows"]:
        assert start_s is not None and page is not None, \
            "some rows have no window or page: is the JSON parsed with the right schema?"
        start = datetime.fromtimestamp(start_s, tz=timezone.utc)
        assert end_s - start_s == window.total_seconds(), (
            f"windowed_counts(raw, {events.window!r}, {events.watermark!r}): windows must be "
            f"{window.total_seconds():g} s long; one starting {label(start, page)} runs {end_s - start_s} s")
        got.append((start, page, count))
    compare(got, all_counts(events), duplicate_hint="count once per window and page: tumbling windows",
            too_many_hint="window by event_time from the JSON, not Kafka's timestamp, with the window given",
            too_few_hint="window by event_time from the JSON, not Kafka's timestamp, with the window given",
            window=window)


@check("watermark_on_event_time", points=1,
       hint='Call .withWatermark("event_time", delay) on the parsed views, before grouping.')
def watermark_on_event_time(ns):
    """windowed_counts on Spark's Kafka source (a streaming table, not started), with a delay chosen at grade
    time: the plan has a watermark of that delay on event_time, the time of the view from the JSON."""
    harness.attempted(ns, "windowed_counts")
    window, delay, _span = shape()
    out = step(ns, "plan", f"sa-plan-{uuid.uuid4().hex[:6]}", window, delay)
    assert out["streaming"], "given a streaming table, windowed_counts must return a streaming one (use the raw input)"
    marks = _WATERMARK.findall(out["plan"])
    assert marks, 'there is no watermark: add .withWatermark("event_time", delay) before grouping'
    column, found = marks[0]
    assert column == "event_time", (f"the watermark is on {column!r}; put it on event_time, the time the view "
                                    "happened (Kafka's timestamp is when it was written)")
    seconds = _interval_seconds(found)
    assert seconds == length(delay).total_seconds(), \
        f"windowed_counts(raw, {window!r}, {delay!r}): the watermark delay is {found.strip()}, not {delay}"


@check("kafka_records_format", points=2,
       hint='select(F.col("page").alias("key"), F.to_json(F.struct(F.col("window.start").alias("window_start"), '
            '...)).alias("value"))')
def kafka_records_format(ns):
    """to_kafka_records on a small static table of counts: exactly the columns key and value; key = the page;
    value = JSON {"window_start", "window_end", "page", "count"} with ISO-8601 times."""
    harness.attempted(ns, "to_kafka_records")
    events = stream(rounds=3, per_round=25)
    window = length(events.window)
    expected = all_counts(events)
    rows = [(int(start.timestamp()), int((start + window).timestamp()), page, n)
            for (start, page), n in expected.items()]
    out = step(ns, "records", rows)
    assert set(out["columns"]) == {"key", "value"}, \
        f"the Kafka sink writes the columns key and value; the result has {out['columns']}"
    got = [parse_record(key, value, window) for key, value in out["rows"]]
    compare(got, expected, duplicate_hint="one record per row of counts",
            too_many_hint="copy count from the counts table", too_few_hint="copy count from the counts table",
            window=window)


@check("query_writes_results_topic", points=2,
       hint="readStream from source_topic with startingOffsets earliest, your two functions with the window and "
            "delay given, then writeStream format kafka, option topic, checkpointLocation, outputMode append, "
            "start().")
def query_writes_results_topic(ns):
    """start_query on a short generated stream (no late events), with a window and delay chosen at grade time:
    a running query that reads the topic from the beginning and writes every closed window once to the
    results topic, with the right counts; its checkpoint (the one it was given) records the topic read to
    the end."""
    harness.attempted(ns, "windowed_counts", "to_kafka_records", "start_query")
    events = stream(rounds=2, per_round=15, late_per_round=0, too_late_per_round=0)
    got = run_stream(ns, events)
    compare(got, events.expected_window_counts(),
            duplicate_hint="use output mode append: each window is written once, when the watermark passes its end",
            too_many_hint="read the source topic once, from the earliest offset",
            too_few_hint='read the source topic from the earliest offset (startingOffsets "earliest"), and window '
                         'with the window and delay given',
            window=length(events.window))
