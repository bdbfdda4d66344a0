"""Source of notebooks/07_spark_structured_streaming.ipynb: build it with `python scripts/build_notebooks.py 07`."""

from labkit.authoring import Notebook

nb = Notebook("07 · Spark Structured Streaming",
              summary="A topic read as an unbounded table, event-time windows with a watermark and late events, "
                      "results to Kafka and Parquet, checkpoints surviving a restart, offsets per micro-batch.",
              minutes=35)

nb.md("""
# 07 · Spark Structured Streaming

Spark reads a Kafka topic as a table that never stops growing, and runs the same SQL on it as on
a file: parse, window by event time, count, write the answers back to Kafka and to files. This
lesson runs the real Spark Kafka source and sink against the live cluster and checks every count.
Before the surprising ones, lock in your own guess.

*About 35 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

The first Spark session takes a few seconds to start (one more JVM, beside the brokers). The
Kafka connector jars were fetched once by `make setup`.
""")
nb.code("""
import json
import threading
import time
import uuid
from collections import Counter

import pandas as pd
import plotly.express as px
from pyspark.sql import functions as F

import labkit
import labkit.spark
from labkit import generators, predict

labkit.setup_check(need_spark=True)
""")
nb.code("""
cluster = labkit.start_cluster()
spark = labkit.spark.session(cluster, app_name="lesson-07")
run = uuid.uuid4().hex[:6]
views = cluster.create_topic(f"page-views-{run}", partitions=3)
cluster
""")

nb.md("""
## A topic is an unbounded table

The stream: page views, keyed by page, with the moment the page was viewed (**event time**)
inside the JSON value. The generator is seeded, so every run sends the same events; it also
knows exactly what a correct windowed count must give. Send the first round:
""")
nb.code("""
events = generators.generate_page_views(seed=7)
rounds = events.rounds()
generators.send(cluster, views, rounds[0])
print(rounds[0][0].value.decode())
""")
nb.md("""
`spark.read` reads what the topic holds *now*, as a DataFrame. Every Kafka record is a row with
the same fixed columns, whatever the topic: key and value as bytes, and where and when the
broker stored it.
""")
nb.code("""
raw = (spark.read.format("kafka")
       .options(**labkit.spark.kafka_options(cluster, subscribe=views, startingOffsets="earliest"))
       .load())
raw.printSchema()
""")
nb.code("""
print(raw.columns)
print("rows = records sent:", raw.count() == len(rounds[0]))
""", check=True)
nb.md("""
Parse the value with a schema and the bytes become columns. `event_time` is a real timestamp
now, different from the Kafka `timestamp` (when the producer sent it):
""")
nb.code("""
SCHEMA = "event_id STRING, page STRING, user STRING, event_time TIMESTAMP"

def parse(df):
    return (df.select(F.col("partition"), F.col("offset"), F.col("timestamp").alias("kafka_timestamp"),
                      F.from_json(F.col("value").cast("string"), SCHEMA).alias("view"))
              .select("partition", "offset", "kafka_timestamp", "view.*"))

parse(raw).orderBy("event_time").limit(5).toPandas()
""")
nb.md("""
`spark.readStream` gives the same table, but **unbounded**: a query on it runs forever, and each
**micro-batch** processes the records that arrived since the last one. Same code, `isStreaming`:
""")
nb.code("""
stream = (spark.readStream.format("kafka")
          .options(**labkit.spark.kafka_options(cluster, subscribe=views, startingOffsets="earliest"))
          .load())
print("streaming:", stream.isStreaming, "| same columns:", stream.columns == raw.columns)
""", check=True)

nb.md("""
## Event-time windows and the watermark

Count views per page in **1-minute windows of event time**. Events arrive out of order: some are
*late* (older than events already seen). Spark can only emit a window's final count once it
is sure no more events for it will come. The **watermark** is that promise: *newest event time
seen, minus 30 seconds*. The query below runs in append mode: it writes each window once, as
final. What does it do with the late events?
""")
nb.code("""
late_counted = predict.ask("07.late-counted", "An event arrives 40 s after newer ones, but its 1-minute window is "
                           "still open (its end is after the watermark). Does Spark count it?", kind="yes/no")
late_counted
""")
nb.code("""
too_late_counted = predict.ask("07.too-late-counted", "An event arrives whose window had already ended before the "
                               "watermark. Does Spark count it?", kind="yes/no")
too_late_counted
""")
nb.code("""
windowed = (parse(stream)
            .withWatermark("event_time", "30 seconds")
            .groupBy(F.window("event_time", "1 minute").alias("window"), "page")
            .count()
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "page", "count"))

for q in spark.streams.active:          # safe to re-run: stop an earlier run of this cell
    if q.name == "window_counts":
        q.stop()
counts_query = (windowed.writeStream.format("memory").queryName("window_counts").outputMode("append")
                .option("checkpointLocation", labkit.spark.checkpoint_dir(cluster, f"window-counts-{time.time_ns()}"))
                .start())
""")
nb.md("""
Send the other rounds one at a time and let Spark finish each (`processAllAvailable`). Each
round moves event time 30 s forward and carries a few late events; from round 3 on, also a few
*too-late* ones whose window had already closed when they arrived.
""")
nb.code("""
for r in rounds[1:]:
    generators.send(cluster, views, r)
    counts_query.processAllAvailable()
labkit.spark.wait_until_idle(counts_query)
labkit.spark.progress_table(counts_query.recentProgress)[["input rows", "watermark", "output rows"]]
""")
nb.md("""
The watermark column climbs with the newest event time; `output rows` are the windows emitted
once it passed them. What the generator sent, by kind, against what Spark counted:
""")
nb.code("""
got = spark.sql("SELECT * FROM window_counts ORDER BY window_start, page").toPandas()
kinds = events.by_kind()
dropped = sum(op.get("numRowsDroppedByWatermark", 0)
              for p in counts_query.recentProgress for op in p.get("stateOperators", []))
pd.DataFrame({"events": kinds}).T[["on_time", "late", "too_late", "closing"]].assign(
    **{"counted by Spark": got["count"].sum(), "rows Spark dropped as too late": dropped})
""")
nb.code("""
def rows(df):
    # (window start, page, count) per row, sorted; a window written twice appears twice
    return sorted(zip(pd.to_datetime(df["window_start"], utc=True), df["page"], df["count"].astype(int)))

expected = sorted((pd.Timestamp(start), page, n) for (start, page), n in events.expected_window_counts().items())
print("windows emitted:", len(got), "| each exactly once, with the right count:", rows(got) == expected)
print("late events counted, too-late dropped:", got["count"].sum() == kinds["on_time"] + kinds["late"])
""", check=True)
nb.code("""
late_counted.reveal(got["count"].sum() >= kinds["on_time"] + kinds["late"],
                    "A late event still updates its window's count in state while the window is open.")
""")
nb.code("""
too_late_counted.reveal(got["count"].sum() > kinds["on_time"] + kinds["late"],
                        "The watermark had passed the window's end: its count was final and emitted, the event is "
                        "dropped (numRowsDroppedByWatermark).")
""")
nb.md("""
* A **late** event still lands in its window when the window is still open: its end is after
  the watermark. Spark updates the window's count in state and emits it later.
* A **too-late** event's window had already ended before the watermark: Spark drops it
  (`numRowsDroppedByWatermark` in the query's progress counts these rows after partial
  aggregation, so two in the same window and partition count once).
* The last event (`closing`) moves the watermark past every window, so append mode emits them all.

Which late events made it? Each one, with the watermark it met (newest event time of the earlier
rounds − 30 s):
""")
nb.code("""
newest, late_rows = None, []
for i, r in enumerate(rounds, start=1):
    watermark = None if newest is None else newest - 30_000
    for e in r:
        if e.kind in (generators.LATE, generators.TOO_LATE):
            end = e.event_time_ms - e.event_time_ms % 60_000 + 60_000
            late_rows.append({"round": i, "event": e.event_id, "event time": generators.iso(e.event_time_ms)[11:19],
                         "window ends": generators.iso(end)[11:19],
                         "watermark about": generators.iso(watermark)[11:19], "kind": e.kind})
    newest = max([e.event_time_ms for e in r] + ([newest] if newest else []))
pd.DataFrame(late_rows).head(12)
""")
nb.md("""
Spark's watermark is a little behind that column: it is computed at the end of each micro-batch
and applied in the next. The generator keeps every late event clear of that boundary, which is
why the expected counts are exact.

## Writing results: to Kafka and to Parquet

A streaming query ends in a **sink**. Two of them, fed by the same windowed count:

* the **Kafka sink** writes each emitted row as a record (key = page, value = JSON) to a results
  topic, where any plain consumer reads it;
* the **file sink** writes Parquet files into a directory, which any batch job can read.

Each query keeps a **checkpoint** directory: the offsets of every micro-batch, the aggregation
state, and which batches finished.
""")
nb.code("""
def start_sinks(source_topic):
    for q in spark.streams.active:          # safe to re-run: this section's earlier sinks stop first
        if q.name in ("to_kafka", "to_files"):
            q.stop()
    counts = (parse(spark.readStream.format("kafka")
                    .options(**labkit.spark.kafka_options(cluster, subscribe=source_topic,
                                                          startingOffsets="earliest")).load())
              .withWatermark("event_time", "30 seconds")
              .groupBy(F.window("event_time", "1 minute").alias("window"), "page").count()
              .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                      "page", "count"))
    to_kafka = (counts.select(F.col("page").alias("key"), F.to_json(F.struct("*")).alias("value"))
                .writeStream.format("kafka").queryName("to_kafka").outputMode("append")
                .options(**labkit.spark.kafka_options(cluster, topic=results))
                .option("checkpointLocation", to_kafka_cp).start())
    to_files = (counts.writeStream.format("parquet").queryName("to_files").outputMode("append")
                .option("path", parquet_dir).option("checkpointLocation", to_files_cp).start())
    return to_kafka, to_files

def finish(*queries, idle=False):
    # process everything sent so far; idle=True also waits for the batches that only move the watermark
    for q in queries:
        labkit.spark.wait_until_idle(q) if idle else q.processAllAvailable()
""")
nb.md("""
A fresh topic for this part, so both sinks see the whole stream, a results topic, an output
directory and a checkpoint per query. Run the sinks over the first four rounds, then **stop** them
mid-stream:
""")
nb.code("""
pipe = uuid.uuid4().hex[:6]              # new topics, files and checkpoints each run of the cell
pipeline_in = cluster.create_topic(f"page-views-pipeline-{pipe}", partitions=3)
results = cluster.create_topic(f"window-counts-{pipe}", partitions=1)
parquet_dir = str(labkit.spark.workdir(cluster) / "output" / f"window-counts-{pipe}")
to_kafka_cp = labkit.spark.checkpoint_dir(cluster, f"to-kafka-{pipe}")
to_files_cp = labkit.spark.checkpoint_dir(cluster, f"to-files-{pipe}")
to_kafka, to_files = start_sinks(pipeline_in)
for r in rounds[:4]:
    generators.send(cluster, pipeline_in, r)
    finish(to_kafka, to_files)
finish(to_kafka, to_files, idle=True)
to_kafka.stop(); to_files.stop()
print("windows emitted before the stop:", len(cluster.read_all(results)))
""")
nb.md("""
While the queries are down, round 5 arrives. Restart them **from the same checkpoints**: they
resume at the offsets they had reached, with the counts of the still-open windows restored from
state, and catch up. Then the rest of the stream:
""")
nb.code("""
generators.send(cluster, pipeline_in, rounds[4])
to_kafka, to_files = start_sinks(pipeline_in)
finish(to_kafka, to_files)
for r in rounds[5:]:
    generators.send(cluster, pipeline_in, r)
    finish(to_kafka, to_files)
finish(to_kafka, to_files, idle=True)

def kafka_results():
    return pd.DataFrame([json.loads(rec.value) for rec in cluster.read_all(results)])

def parquet_results():
    return spark.read.parquet(parquet_dir).toPandas()

print("Kafka sink:", len(kafka_results()), "records | file sink:", len(parquet_results()), "rows | expected:",
      len(expected))
""")
nb.code("""
print("after stop and restart, both sinks hold every window once, with the right count:",
      rows(kafka_results()) == expected and rows(parquet_results()) == expected)
""", check=True)
nb.md("""
### A crash at the worst moment

A micro-batch has three steps: Spark writes the batch's offsets to the checkpoint, runs the batch
(the sinks write), then records the batch as committed. A crash between the last two leaves
output written but the batch not marked done. `forget_last_commit` puts a stopped query's
checkpoint in exactly that state; on restart Spark runs that batch again:
""")
nb.code("""
kafka_copies = predict.ask("07.kafka-sink-copies", "After the batch runs again, how many copies of its windows does "
                           "the results topic (Kafka sink) hold?", choices=[1, 2, 3])
kafka_copies
""")
nb.code("""
to_kafka.stop(); to_files.stop()
replayed = {"Kafka sink": labkit.spark.forget_last_commit(to_kafka_cp),
            "file sink": labkit.spark.forget_last_commit(to_files_cp)}
print("batch each query will run again:", replayed)
to_kafka, to_files = start_sinks(pipeline_in)
finish(to_kafka, to_files, idle=True)
in_kafka, in_files = kafka_results(), parquet_results()
copies = pd.DataFrame({
    "Kafka sink": in_kafka.groupby(["window_start", "page"]).size().value_counts(),
    "file sink": in_files.groupby(["window_start", "page"]).size().value_counts()}).fillna(0).astype(int)
copies.rename_axis("copies of a window")
""")
nb.code("""
print("file sink: every window exactly once:", rows(in_files) == expected)
print("Kafka sink: every window present:", set(rows(in_kafka)) == set(expected),
      "| some written twice:", len(rows(in_kafka)) > len(expected))
""", check=True)
nb.code("""
kafka_copies.reveal(int(copies["Kafka sink"][copies["Kafka sink"] > 0].index.max()),
                    "The Kafka sink cannot take back what it produced: the replayed batch wrote its windows again. "
                    "The file sink checked its own log of finished batches and wrote nothing twice.",
                    expected=2)
""")
nb.md("""
* The **file sink is exactly-once**: it keeps its own log of finished batches
  (`_spark_metadata/` in the output directory), sees that batch already written, and skips it.
* The **Kafka sink is at-least-once**: it cannot take back records it produced, so the replayed
  batch wrote its windows a second time. Downstream, make the writes idempotent: here the key
  (window, page) and the count are the same in both copies, so a consumer that upserts by key,
  or a compacted topic, ends up with the right answer.

## Offsets per micro-batch, starting offsets, triggers

Every micro-batch reads a range of offsets per partition, recorded in the checkpoint and in the
query's progress. Put a backlog of 6,000 views in a topic:
""")
nb.code("""
clicks = cluster.create_topic(f"clicks-{run}", partitions=3)
backlog = generators.generate_page_views(seed=11, rounds=40, per_round=150, late_per_round=0,
                                         too_late_per_round=0, closing=False)
generators.send(cluster, clicks, list(backlog))
print("backlog:", len(backlog), "events")
""")
nb.md("""
`maxOffsetsPerTrigger` caps how many records one micro-batch takes (spread over the partitions
in proportion to what each has waiting; the keys are the four pages, so here one partition
holds none — lesson 02's partitioner at work).
The **trigger** `availableNow` processes everything there is *now*, in as many capped batches as
it takes, then stops the query by itself: a streaming job run like a batch job.
""")
nb.code("""
batch_count = predict.ask("07.micro-batches", "6,000 records waiting, maxOffsetsPerTrigger = 1000: how many "
                          "micro-batches with records does availableNow run?", tolerance=0)
batch_count
""")
nb.code("""
per_page = (spark.readStream.format("kafka")
            .options(**labkit.spark.kafka_options(cluster, subscribe=clicks, startingOffsets="earliest",
                                                  maxOffsetsPerTrigger=1000))
            .load()
            .groupBy(F.col("key").cast("string").alias("page")).count())
catch_up = (per_page.writeStream.format("memory").queryName(f"catch_up_{run}").outputMode("complete")
            .trigger(availableNow=True)
            .option("checkpointLocation", labkit.spark.checkpoint_dir(cluster, f"catch-up-{time.time_ns()}"))
            .start())
catch_up.awaitTermination(120)
batches = labkit.spark.progress_table(catch_up.recentProgress)
batches[["input rows", "start offsets", "end offsets", "duration ms"]]
""")
nb.code("""
print("none over 1000 records:", bool((batches["input rows"] <= 1000).all()),
      "| all 6000 read:", batches["input rows"].sum() == 6000, "| stopped by itself:", not catch_up.isActive)
""", check=True)
nb.code("""
print("micro-batches with records:", int((batches["input rows"] > 0).sum()))
print("each batch starts where the previous ended:",
      all(a == b for a, b in zip(batches["end offsets"][:-1], batches["start offsets"][1:])))
""")
nb.code("""
batch_count.reveal(int((batches["input rows"] > 0).sum()),
                   "At most 1000 records per batch, split over the partitions in proportion to what each has "
                   "waiting (rounded per partition), until nothing is left.")
""")
nb.md("""
Each batch's end offsets are the next one's start offsets: no record read twice, none skipped.

`startingOffsets` only matters the first time a query runs (after that the checkpoint decides):
`earliest`, `latest`, or per partition as JSON, e.g. `{"topic": {"0": 42, "1": -2}}`
(−2 = earliest, −1 = latest). A new query on the same topic, starting at `latest`:
""")
nb.code("""
latest_rows = predict.ask("07.latest-rows", "A new query with startingOffsets=latest starts on the 6,000-record "
                          "topic, then 50 more events arrive. How many rows does it see?",
                          choices=[0, 50, 6000, 6050])
latest_rows
""")
nb.code("""
only_new = (spark.readStream.format("kafka")
            .options(**labkit.spark.kafka_options(cluster, subscribe=clicks, startingOffsets="latest"))
            .load()
            .writeStream.format("memory").queryName(f"only_new_{run}")
            .option("checkpointLocation", labkit.spark.checkpoint_dir(cluster, f"only-new-{time.time_ns()}"))
            .start())
labkit.spark.wait_for_progress(only_new, lambda p: len(p) > 0)          # it has fixed its starting offsets
generators.send(cluster, clicks, list(backlog)[:50])
only_new.processAllAvailable()
seen_by_latest = spark.table(f"only_new_{run}").count()
print("rows seen by the 'latest' query:", seen_by_latest)
only_new.stop()
""", check=True)
nb.code("""
latest_rows.reveal(seen_by_latest, "startingOffsets only applies to a query's first run, and latest means the end of "
                   "each partition at that moment: the backlog is skipped, the new events are read.",
                   expected=50)
""")
nb.md("""
### A live view of a running query

With a `processingTime` trigger, a micro-batch starts every second. This query starts at
`earliest` with the same 1000-record cap, so it first **catches up** on the backlog (processing
rate above input rate), then **keeps up** with a feed of about 400 events per second from a
background thread (the two rates meet, and batches take less than the trigger interval):
""")
nb.code("""
live = (per_page.writeStream.format("memory").queryName(f"live_{run}").outputMode("complete")
        .trigger(processingTime="1 second")
        .option("checkpointLocation", labkit.spark.checkpoint_dir(cluster, f"live-{time.time_ns()}"))
        .start())
feed = generators.generate_page_views(seed=12, rounds=20, per_round=250, late_per_round=0,
                                      too_late_per_round=0, closing=False)
feeder = threading.Thread(target=generators.send, args=(cluster, clicks, list(feed)), kwargs={"rate": 400})
feeder.start()
labkit.spark.watch_progress(live, seconds=25, until=lambda: not feeder.is_alive())
feeder.join()
live.stop()
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a topic reads as a table: key, value, topic, partition, offset, timestamp | `spark.read` / `readStream` on the live topic |
| event-time windows with a watermark count late events and drop too-late ones | every count equal to the generator's answer |
| results go to a Kafka topic and to Parquet files | both sinks read back |
| a restart from the checkpoint loses nothing and counts nothing twice | stop, send, restart: both sinks exact |
| the file sink is exactly-once, the Kafka sink at-least-once | a batch replayed after a simulated crash |
| micro-batches read offset ranges; `maxOffsetsPerTrigger`, `startingOffsets`, triggers | the progress table, `availableNow`, `latest` |

Next: the graded exercise `streaming_aggregation` builds this pipeline from scratch.
""")
nb.code("""
predict.summary("07")
""")
nb.code("""
cluster.stop()          # stops the Spark session and its queries first, then the brokers
""")

