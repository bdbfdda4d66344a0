"""Cheats tried on streaming_aggregation."""

from . import Cheat, replace_solution

LIVE_CHECKS = ["query_writes_results_topic", "late_and_too_late_events", "restarts_from_checkpoint"]

EXPECTED_ANSWER_FROM_MEMORY = '''
def start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay):
    import gc

    # Whoever sends the views generated them first: their answer is somewhere in this process.
    streams = [o for o in gc.get_objects() if type(o).__name__ == "GeneratedEvents"]
    stream = max(streams, key=len)
    producer = cluster.producer()
    for (start, page), n in stream.expected_window_counts().items():
        producer.produce(results_topic, key=page, value=json.dumps({
            "window_start": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "window_end": (start + pd.Timedelta(window).to_pytimedelta()).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "page": page, "count": n}))
    producer.flush(10)
    # a real query on the topic, so that there is something to return
    raw = (spark.readStream.format("kafka")
           .options(**labkit.spark.kafka_options(cluster, subscribe=source_topic, startingOffsets="earliest"))
           .load())
    return raw.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
'''

IMPORT_THE_EXPECTED_ANSWER = '''
def start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay):
    from labkit.generators import PageView, expected_window_counts

    views = [json.loads(r.value) for r in cluster.read_all(source_topic)]
    ...  # rebuild PageView objects, write expected_window_counts(...) to results_topic
'''

#: Lesson 07's query (its start_sinks: 1-minute windows, a 30-second watermark, the Kafka sink), fitted to the
#: exercise's signatures but ignoring the window and delay it is given.
LESSON_07_COUNTS = '''
def windowed_counts(raw, window, delay):
    SCHEMA = "event_id STRING, page STRING, user STRING, event_time TIMESTAMP"
    views = (raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("view")).select("view.*"))
    return (views.withWatermark("event_time", "30 seconds")
            .groupBy(F.window("event_time", "1 minute").alias("window"), "page").count())
'''

LESSON_07_QUERY = '''
def start_query(spark, cluster, source_topic, results_topic, checkpoint, window, delay):
    counts = (windowed_counts(spark.readStream.format("kafka")
                              .options(**labkit.spark.kafka_options(cluster, subscribe=source_topic,
                                                                    startingOffsets="earliest")).load(),
                              window, delay)
              .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                      "page", "count"))
    return (counts.select(F.col("page").alias("key"), F.to_json(F.struct("*")).alias("value"))
            .writeStream.format("kafka").outputMode("append")
            .options(**labkit.spark.kafka_options(cluster, topic=results_topic))
            .option("checkpointLocation", checkpoint).start())
'''


def _lesson_07(nb):
    replace_solution(nb, "def windowed_counts", LESSON_07_COUNTS)
    return replace_solution(nb, "def start_query", LESSON_07_QUERY)


CHEATS = [
    Cheat("expected_answer_from_memory",
          lambda nb: replace_solution(nb, "def start_query", EXPECTED_ANSWER_FROM_MEMORY),
          targets=LIVE_CHECKS,
          why="find the generated stream in the kernel's memory (gc) and write its expected answer; return a "
              "query that only reads the topic"),
    Cheat("import_the_expected_answer",
          lambda nb: replace_solution(nb, "def start_query", IMPORT_THE_EXPECTED_ANSWER),
          targets=LIVE_CHECKS,
          why="compute the answer with the generator's own expected_window_counts"),
    # issue 25: copying the lesson's code
    Cheat("lesson_07_query", _lesson_07,
          targets=["counts_per_page_and_window", "watermark_on_event_time", *LIVE_CHECKS],
          why="copy lesson 07's start_sinks (1-minute windows, 30-second watermark) into the exercise's functions, "
              "ignoring the window and delay given"),
]
