"""Cheats tried on streaming_aggregation."""

from . import Cheat, replace_solution

LIVE_CHECKS = ["query_writes_results_topic", "late_and_too_late_events", "restarts_from_checkpoint"]

EXPECTED_ANSWER_FROM_MEMORY = '''
def start_query(spark, cluster, source_topic, results_topic, checkpoint):
    import gc
    from datetime import timedelta

    # Whoever sends the views generated them first: their answer is somewhere in this process.
    streams = [o for o in gc.get_objects() if type(o).__name__ == "GeneratedEvents"]
    stream = max(streams, key=len)
    producer = cluster.producer()
    for (start, page), n in stream.expected_window_counts().items():
        producer.produce(results_topic, key=page, value=json.dumps({
            "window_start": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "window_end": (start + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "page": page, "count": n}))
    producer.flush(10)
    # a real query on the topic, so that there is something to return
    raw = (spark.readStream.format("kafka")
           .options(**labkit.spark.kafka_options(cluster, subscribe=source_topic, startingOffsets="earliest"))
           .load())
    return raw.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
'''

IMPORT_THE_EXPECTED_ANSWER = '''
def start_query(spark, cluster, source_topic, results_topic, checkpoint):
    from labkit.generators import PageView, expected_window_counts

    views = [json.loads(r.value) for r in cluster.read_all(source_topic)]
    ...  # rebuild PageView objects, write expected_window_counts(...) to results_topic
'''

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
]
