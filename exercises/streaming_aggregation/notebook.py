"""The exercise notebook streaming_aggregation: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Page views per window, late events included", exercise="streaming_aggregation")

nb.md("""
# Exercise · Page views per window, late events included

A topic receives page views as JSON, some of them late. Build the Spark Structured Streaming
query that counts the views of each page in **event-time windows** and writes each finished
window to a results topic. The dashboards that read it are configured per team: the window
length and the watermark's delay are **parameters** of your query (Spark interval strings such
as `"90 seconds"` and `"20 seconds"`), and the grader picks them when it grades — never lesson
07's 1 minute and 30 seconds.

The grader runs your query on a real Kafka cluster and Spark against generated streams whose
answers are known exactly: late events inside the watermark must be counted, events beyond it
dropped, every window written once — also when the query is stopped and restarted.

*About 30 minutes. Goes with lesson 07.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import uuid

import pandas as pd
from pyspark.sql import functions as F

import labkit
import labkit.spark
from labkit.generators import generate_page_views, send, window_counts_frame
from labkit.grading import exercise

labkit.setup_check(need_spark=True)
cluster = labkit.start_cluster("single-broker")
spark = labkit.spark.session(cluster)
ex = exercise("streaming_aggregation")
""")
nb.md("""
## The input

Each record's key is the page; its value is a JSON page view. `event_time` is when the view
happened (UTC) — not when the record reached Kafka. The generator sends the views in *rounds*;
from the second round on, a few are **late** (older than views already seen, but their window is
still open) and a few **too late** (their window had closed: it ended before the watermark, the
newest event time seen minus the delay). These try-outs use 90-second windows and a 20-second delay:
""")
nb.code("""
WINDOW, DELAY = "90 seconds", "20 seconds"
events = generate_page_views(seed=1, rounds=5, per_round=20, window=WINDOW, watermark=DELAY, round_span="45 seconds")
print(events.events[0].value.decode())
events.by_kind()
""")
nb.md("""
Parse the value with this schema:
""")
nb.code("""
VIEW_SCHEMA = "event_id STRING, page STRING, user STRING, event_time TIMESTAMP"
""")
nb.md("""
## Task 1 — `windowed_counts(raw, window, delay)`

`raw` is the table Spark's Kafka source gives (columns `key`, `value`, `topic`, `partition`,
`offset`, `timestamp`, `timestampType`; `value` is binary). Return the counts:

* parse `value` as JSON with `VIEW_SCHEMA` (`F.from_json`, after casting `value` to a string);
* a **watermark of `delay` on `event_time`** (`withWatermark`), before grouping;
* group by a **tumbling window of length `window`** over `event_time` and by `page`, and count.

The result has the columns `window` (Spark's struct with `start` and `end`), `page` and `count`.
It must work on a streaming table and on a static one alike (the checks use both).
""")
nb.code('''
def windowed_counts(raw, window, delay):
    ### BEGIN SOLUTION
    views = (raw.select(F.from_json(F.col("value").cast("string"), VIEW_SCHEMA).alias("view"))
             .select("view.*"))
    return (views.withWatermark("event_time", delay)
            .groupBy(F.window("event_time", window), "page")
            .count())
    ### END SOLUTION
''')
nb.md("""
## Task 2 — `to_kafka_records(counts)`

Turn the counts into the two columns the Kafka sink writes:

* `key`: the page, as a string (`/home`);
* `value`: a JSON object with exactly these fields (`F.to_json(F.struct(...))`):

```json
{"window_start": "2025-01-01T12:03:00.000Z", "window_end": "2025-01-01T12:04:30.000Z", "page": "/home", "count": 7}
```

The times are ISO-8601 in UTC — what `to_json` writes for a timestamp in this lab's session —
and `count` is a JSON number.
""")
nb.code('''
def to_kafka_records(counts):
    ### BEGIN SOLUTION
    return counts.select(
        F.col("page").alias("key"),
        F.to_json(F.struct(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                           "page", "count")).alias("value"))
    ### END SOLUTION
''')
nb.md("""
## Task 3 — `start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay)`

Start the query and **return** the `StreamingQuery` (do not wait for it):

* read `source_topic` with Spark's Kafka source **from the earliest offset**:
  `spark.readStream.format("kafka").options(**labkit.spark.kafka_options(cluster, subscribe=..., startingOffsets="earliest"))`;
* `windowed_counts` with `window` and `delay`, then `to_kafka_records`;
* write with the Kafka sink to `results_topic` (`kafka_options(cluster, topic=...)`), in output
  mode **append** — each window is written once, when the watermark has passed its end — with
  `checkpointLocation` set to `checkpoint`, so a restarted query goes on where it stopped.
""")
nb.code('''
def start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay):
    ### BEGIN SOLUTION
    raw = (spark.readStream.format("kafka")
           .options(**labkit.spark.kafka_options(cluster, subscribe=source_topic, startingOffsets="earliest"))
           .load())
    return (to_kafka_records(windowed_counts(raw, window, delay)).writeStream
            .format("kafka")
            .options(**labkit.spark.kafka_options(cluster, topic=results_topic))
            .option("checkpointLocation", checkpoint)
            .outputMode("append")
            .start())
    ### END SOLUTION
''')
nb.md("""
## Try it

Send the generated views one round at a time, letting your query process each round before the
next (as the grader does), then read the results topic with a plain consumer and put it next to
the expected answer. The progress table shows the watermark moving with each micro-batch.
""")
nb.code("""
run = uuid.uuid4().hex[:6]                       # new topics and checkpoint each time the cell runs
source = cluster.create_topic(f"page-views-{run}", partitions=3)
results = cluster.create_topic(f"page-view-counts-{run}", partitions=1)
query = start_query(spark, cluster, source, results, labkit.spark.checkpoint_dir(cluster, f"try-{run}"), WINDOW, DELAY)
try:
    for batch in events.rounds():
        send(cluster, source, batch)
        query.processAllAvailable()
    labkit.spark.wait_until_idle(query)
    progress = labkit.spark.progress_table(query.recentProgress)
finally:
    query.stop()
progress[["input rows", "watermark", "output rows"]]
""")
nb.code("""
yours = pd.DataFrame([json.loads(r.value) for r in cluster.read_all(results)],
                     columns=["window_start", "window_end", "page", "count"])
yours["window_start"] = pd.to_datetime(yours["window_start"], utc=True).dt.tz_localize(None)
expected = window_counts_frame(events.expected_window_counts())
expected.merge(yours[["window_start", "page", "count"]], on=["window_start", "page"], how="outer",
               suffixes=(" expected", " yours"))
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded("""
The hidden checks run your query on a longer stream with late and too-late events, with windows
and delays you have not tried, and stop and restart it mid-stream.
""")
