"""What a Kafka Streams application of the lab costs, and one stateless job in Kafka Streams and in Spark.

    python benchmarks/streams.py [--runs 5] [--probes 30] [--keys 200000] [--no-spark]
    python benchmarks/streams.py --quick          # smoke mode: 1 run, 5 probes, 20,000 keys

On one single-broker cluster (lesson 12's), each measurement repeated ``--runs`` times (medians printed):

* **compile**: ``javac`` of a topology cell never compiled before (labkit.services.streamsbuild; a cell run
  twice comes from the cache and costs nothing);
* **ready**: a new application's instance from its JVM's launch until Kafka Streams says RUNNING with its tasks
  (``Instance.ready_seconds``): JVM start, group join, internal topics, RocksDB opened;
* **restore**: a count over ``--keys`` distinct keys (one changelog record each), the instance killed and
  started on an empty state directory: records and bytes of the changelog (``kafka-log-dirs``), the slowest
  partition's restoration (the restore listener), MB per second;
* **latency** of one stateless job (keep orders over 10, add the customer's region from a static table, write
  them out), one order at a time from ``produce()`` until a plain consumer reads the result: Kafka Streams with
  its producer's ``linger.ms`` at Kafka Streams' default (100 ms) and at 0, Spark micro-batch (default trigger)
  and Spark Real-time Mode (``trigger(realTime=...)``, Spark 4.1+) on the same topics, one local Spark session
  (``labkit.spark.session``); with what each costs: processes, threads, RSS, CPU seconds while probed.

There are no speed targets: the exit code is 1 only when something did not work (a probe never answered, a
restore read fewer records than the changelog holds, a JVM was left), unless ``--no-fail``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from benchmarks import reporting

RESULTS = Path(__file__).resolve().parent / "results"
ENRICH = """
    GlobalKTable<String, String> region = builder.globalTable(regions);
    builder.<String, String>stream(orders)
           .filter((customer, amount) -> Double.parseDouble(amount) > 10)
           .join(region, (customer, amount) -> customer, (amount, r) -> amount + " " + r)
           .to(big);
"""


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def measure_compile(run: int) -> float:
    from labkit.services.streamsbuild import compile_topology

    marker = f"{uuid.uuid4().hex}"  # a new class each time: never from the cache
    code = f'builder.<String, String>stream(input).mapValues(v -> v + "{marker}").to(output);'
    return compile_topology(code, {"input": "in", "output": "out"}).seconds


def measure_ready(cluster: Any, source: str) -> float:
    from labkit.services import streams

    app = streams.app(cluster, 'builder.<String, String>stream(input).groupByKey().count(Materialized.as("n"));',
                      name=f"ready-{uuid.uuid4().hex[:6]}", params={"input": source})
    try:
        return float(app.instances[0].ready_seconds or 0)
    finally:
        app.stop()


def changelog_bytes(cluster: Any, topic: str) -> int:
    out = str(cluster.tool("kafka-log-dirs", "--describe", "--topic-list", topic))
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    return sum(p["size"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"])


def measure_restore(cluster: Any, keys: int) -> dict:
    from labkit.services import streams

    tag = uuid.uuid4().hex[:6]
    source = cluster.create_topic(f"restore-in-{tag}", partitions=3)
    producer = cluster.producer(linger_ms=20)
    for i in range(keys):
        while True:
            try:
                producer.produce(source, key=f"user-{i:08d}", value="x")
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)
    app = streams.app(cluster, 'builder.<String, String>stream(input).groupByKey().count(Materialized.as("n"));',
                      name=f"restore-{tag}", params={"input": source})
    try:
        app.wait_caught_up(600)
        changelog = app.changelogs()["n"]
        records = sum(p.high_watermark for p in cluster.describe_topic(changelog).partitions)
        size = changelog_bytes(cluster, changelog)
        instance = app.instances[0]
        instance.kill()
        t0 = time.monotonic()
        instance.start(wipe_state=True, timeout=600)
        ready = time.monotonic() - t0
        restored = instance.restores()
        slowest = float(restored["ms"].max()) / 1000
        return {"keys": keys, "changelog_records": records, "changelog_mb": size / 1e6,
                "restored_records": int(restored["records"].sum()), "restore_s": slowest, "restart_ready_s": ready,
                "mb_per_s": size / 1e6 / slowest if slowest else None}
    finally:
        app.stop()
        cluster.delete_topic(source)


def probe(cluster: Any, source: str, results: str, count: int) -> list[float]:
    """One order at a time, timed until its own result is read; orders are sent until one answers first."""
    reader = cluster.consumer(f"probe-{uuid.uuid4().hex[:6]}", auto_offset_reset="latest")
    reader.subscribe([results])
    deadline = time.monotonic() + 30
    while not reader.assignment() and time.monotonic() < deadline:
        reader.poll(0.1)
    producer = cluster.producer(linger_ms=0)

    def one(i: int, wait: float) -> Optional[float]:
        amount = str(1000 + i)
        t0 = time.monotonic()
        producer.produce(source, key=f"c{i % 10}", value=amount)
        producer.flush(10)
        while time.monotonic() - t0 < wait:
            msg = reader.poll(0.002)
            if msg is not None and not msg.error() and msg.value().decode().split()[0] == amount:
                return (time.monotonic() - t0) * 1000
        return None

    try:
        warm, start = 10**6, time.monotonic()
        while one(warm, 3.0) is None:
            warm += 1
            if time.monotonic() - start > 180:
                raise RuntimeError("the job answered nothing in 180 s")
        took = []
        for i in range(count):
            took.append(one(i, 30.0))
            time.sleep(0.05)
    finally:
        reader.close()
    if None in took:
        raise RuntimeError(f"{took.count(None)} of {count} probes got no answer")
    return [t for t in took if t is not None]


def cost(process: psutil.Process, before: Optional[float] = None) -> dict:
    cpu = sum(process.cpu_times()[:2])
    return {"processes": 1, "threads": process.num_threads(), "rss_mb": process.memory_info().rss / 1e6,
            "cpu_s": cpu - (before or 0.0)}


def latency_streams(cluster: Any, topics: dict, config: dict, probes: int) -> dict:
    from labkit.services import streams

    app = streams.app(cluster, ENRICH, name=f"latency-{uuid.uuid4().hex[:6]}", config=config,
                      params={"regions": topics["regions"], "orders": topics["orders"], "big": topics["big"]})
    try:
        jvm = psutil.Process(app.instances[0].pid)
        before = sum(jvm.cpu_times()[:2])
        took = probe(cluster, topics["orders"], topics["big"], probes)
        return {"latency_ms": took, **cost(jvm, before)}
    finally:
        app.stop()


def latency_spark(spark: Any, cluster: Any, topics: dict, trigger: str, probes: int) -> dict:
    import labkit.spark
    from pyspark.sql import functions as F

    static = spark.createDataFrame(topics["regions_rows"], "customer STRING, region STRING")
    orders = (spark.readStream.format("kafka")
              .options(**labkit.spark.kafka_options(cluster, subscribe=topics["orders"], startingOffsets="latest"))
              .load()
              .select(F.col("key").cast("string").alias("customer"), F.col("value").cast("string").alias("amount"))
              .where(F.col("amount").cast("double") > 10)
              .join(F.broadcast(static), "customer")
              .select(F.col("customer").alias("key"), F.concat_ws(" ", "amount", "region").alias("value")))
    writer = (orders.writeStream.format("kafka").options(**labkit.spark.kafka_options(cluster, topic=topics["big"]))
              .option("checkpointLocation", labkit.spark.checkpoint_dir(cluster, f"latency-{uuid.uuid4().hex[:6]}"))
              .outputMode("update"))
    query = (writer.trigger(realTime="30 seconds") if trigger == "realtime" else writer).start()
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    before = sum(jvm.cpu_times()[:2])
    try:
        took = probe(cluster, topics["orders"], topics["big"], probes)
        return {"latency_ms": took, **cost(jvm, before)}
    finally:
        query.stop()


JOBS = ("streams (linger 100 ms)", "streams (linger 0)", "spark micro-batch", "spark real-time")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="repetitions of each measurement (default 5; quick 1)")
    parser.add_argument("--probes", type=int, default=None, help="latency probes per job per run (default 30)")
    parser.add_argument("--keys", type=int, default=None, help="distinct keys in the restored count (default 200000)")
    parser.add_argument("--no-spark", action="store_true", help="measure Kafka Streams only")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 1 run, 5 probes, 20,000 keys")
    parser.add_argument("--json", default=str(RESULTS / "streams.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when something did not work")
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.quick else 5)
    probes = args.probes or (5 if args.quick else 30)
    keys = args.keys or (20_000 if args.quick else 200_000)

    import labkit

    report: dict[str, Any] = {"machine": reporting.machine(), "runs": runs, "probes": probes, "keys": keys}
    cluster = labkit.start_cluster("single-broker", progress=False)
    marker = str(cluster.data_dir)
    failures: list[str] = []
    try:
        source = cluster.create_topic(f"bench-{uuid.uuid4().hex[:6]}", partitions=3)
        report["compile_s"] = [measure_compile(i) for i in range(runs)]
        report["ready_s"] = [measure_ready(cluster, source) for _ in range(runs)]
        report["restore"] = [measure_restore(cluster, keys) for _ in range(runs)]
        failures += [f"restore read {r['restored_records']} of {r['changelog_records']} records"
                     for r in report["restore"] if r["restored_records"] != r["changelog_records"]]
        tag = uuid.uuid4().hex[:6]
        topics = {name: cluster.create_topic(f"{name}-{tag}", partitions=1) for name in ("orders", "regions", "big")}
        topics["regions_rows"] = [(f"c{i}", ["north", "south", "east"][i % 3]) for i in range(10)]
        producer = cluster.producer()
        for customer, region in topics["regions_rows"]:
            producer.produce(topics["regions"], key=customer, value=region)
        producer.flush(10)
        latency: dict[str, list[dict]] = {job: [] for job in JOBS}
        for _ in range(runs):
            latency["streams (linger 100 ms)"].append(latency_streams(cluster, topics, {}, probes))
            latency["streams (linger 0)"].append(latency_streams(cluster, topics, {"producer.linger.ms": 0}, probes))
        if not args.no_spark:
            import labkit.spark

            t0 = time.monotonic()
            spark = labkit.spark.session(cluster, app_name="benchmark-streams", progress=False)
            report["spark_session_s"] = time.monotonic() - t0
            for _ in range(runs):
                latency["spark micro-batch"].append(latency_spark(spark, cluster, topics, "micro-batch", probes))
                latency["spark real-time"].append(latency_spark(spark, cluster, topics, "realtime", probes))
            labkit.spark.stop_session()
        report["latency"] = {job: rows for job, rows in latency.items() if rows}
    except Exception as exc:  # noqa: BLE001 - reported, and the exit code says it
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        cluster.stop()
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    if left:
        failures.append(f"JVMs left running: {left}")
    report["failures"] = failures
    report["machine"]["load_average_after"] = psutil.getloadavg()
    print_report(report)
    reporting.write(args.json, report)
    return 1 if failures and not args.no_fail else 0


def print_report(r: dict) -> None:
    med = statistics.median
    print(f"Kafka Streams on a single broker: {r['runs']} run(s), load average {reporting.load_text()} now "
          f"(at the start: {', '.join(f'{x:.2f}' for x in r['machine']['load_average'])})")
    if r.get("compile_s"):
        print(f"  compile a topology cell (javac)        median {med(r['compile_s']):6.2f} s   {r['compile_s']}")
    if r.get("ready_s"):
        print(f"  instance ready (launch -> RUNNING)     median {med(r['ready_s']):6.2f} s")
    if r.get("restore"):
        rs = r["restore"]
        print(f"  restore {rs[0]['changelog_records']} records, {rs[0]['changelog_mb']:.1f} MB of changelog: "
              f"median {med(x['restore_s'] for x in rs):.2f} s, {med(x['mb_per_s'] or 0 for x in rs):.1f} MB/s; "
              f"restart to RUNNING median {med(x['restart_ready_s'] for x in rs):.1f} s")
    if r.get("spark_session_s") is not None:
        print(f"  Spark session start                    {r['spark_session_s']:6.1f} s")
    for job, rows in r.get("latency", {}).items():
        every = [ms for row in rows for ms in row["latency_ms"]]
        print(f"  {job:<24} p50 {med(every):7.1f} ms  p99 {percentile(every, 99):7.1f} ms  "
              f"(run medians {[round(med(row['latency_ms']), 1) for row in rows]}); "
              f"{rows[0]['processes']} process, {med(row['threads'] for row in rows):.0f} threads, "
              f"RSS {med(row['rss_mb'] for row in rows):.0f} MB, CPU {med(row['cpu_s'] for row in rows):.2f} s "
              f"while probed")
    for failure in r["failures"]:
        print(f"  FAILED: {failure}")


if __name__ == "__main__":
    sys.exit(main())
