"""End-to-end latency and sustained throughput of lesson 07's Spark pipeline on this machine.

    python benchmarks/spark_pipeline.py [--runs 3] [--probes 10] [--events 200000] [--profile three-brokers]
    python benchmarks/spark_pipeline.py --quick          # smoke mode: 1 run, few probes, 5,000 events

The pipeline is the lesson's: Spark's Kafka source (``labkit.spark.session(cluster)``,
``kafka_options``), JSON page views parsed with ``from_json``, a 30-second watermark,
``groupBy(window(event_time, "1 minute"), page).count()``, results written as JSON to a
results topic with Spark's Kafka sink. Every run is a fresh child process -- a fresh
cluster and a fresh Spark JVM, so the session start is a cold one as in a new kernel --
that measures:

* **cluster start** and **Spark session start** (``labkit.spark.session(cluster)``,
  connector already cached);
* **end-to-end latency**: one page view produced (its own page, event time = now) until
  its result row is read by a plain confluent-kafka consumer on the results topic. An
  append-mode window only comes out once the watermark passes it (a minute and a half
  later), so latency is measured with the same windowed count in ``update`` mode, which
  emits the new count in the micro-batch that saw the event; once with the default
  trigger (next batch as soon as possible) and once with ``processingTime="1 second"``.
  The query keeps running between probes, which are spaced 0.3-1.3 s apart at random
  (so they land at every phase of the trigger); one warm-up probe per query is not counted;
* the same latency through a **stateless** query (parse the page, write it out), with the default
  trigger and with **Real-time Mode** (``trigger(realTime="30 seconds")``, Spark 4.1+: stateless
  queries only, the duration a checkpoint interval, not a latency; ``--stateless`` picks them);
* **sustained throughput**: ``--events`` generated page views
  (``labkit.generators.generate_page_views``) produced to a 3-partition topic first, then
  the lesson's append-mode query from ``startingOffsets="earliest"`` until
  ``processAllAvailable()`` returns, with ``maxOffsetsPerTrigger`` unset (one big batch)
  and set (several batches). Reported as rows/wall-second from the query's start
  (incl. planning and the query's own start-up) and as Spark's processing rate,
  sum(numInputRows) / sum(batch durations), i.e. ``processedRowsPerSecond`` weighted by rows.

Prints every run, then the medians (latency: median and p90 over all probes of all runs).
Each run stops its queries, the Spark session and the cluster, and checks that no
broker or Spark JVM of its cluster is left. There are no speed targets: the exit code is
1 only if something did not work (a probe never arrived, events went missing, a JVM was
left behind), unless ``--no-fail``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

RESULTS = Path(__file__).resolve().parent / "results"
TRIGGERS = {"default": None, "1s": "1 second"}
PROBE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 1800.0


# ---------------------------------------------------------------- the lesson's pipeline (child side)


def start_query(spark: Any, cluster: Any, source: str, results: str, checkpoint: str, *, starting: str,
                output_mode: str, trigger: Optional[str] = None, max_offsets: Optional[int] = None) -> Any:
    """The lesson's windowed count from ``source`` to ``results`` (Kafka source and sink), started."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    import labkit.spark

    schema = StructType([StructField("event_id", StringType()), StructField("page", StringType()),
                         StructField("user", StringType()), StructField("event_time", TimestampType())])
    source_options = {"subscribe": source, "startingOffsets": starting}
    if max_offsets:
        source_options["maxOffsetsPerTrigger"] = max_offsets
    raw = spark.readStream.format("kafka").options(**labkit.spark.kafka_options(cluster, **source_options)).load()
    events = raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*")
    counts = (events.withWatermark("event_time", "30 seconds")
              .groupBy(F.window("event_time", "1 minute"), "page").count())
    out = counts.select(F.to_json(F.struct(F.col("window.start").alias("window_start"),
                                           F.col("window.end").alias("window_end"), "page", "count")).alias("value"))
    writer = (out.writeStream.format("kafka").options(**labkit.spark.kafka_options(cluster, topic=results))
              .option("checkpointLocation", checkpoint).outputMode(output_mode))
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def start_stateless_query(spark: Any, cluster: Any, source: str, results: str, checkpoint: str,
                          trigger: Optional[str]) -> Any:
    """A stateless query on the same page views (parse, keep the page and its time, write them out): the kind
    Spark's Real-time Mode runs (Spark 4.1/4.2: stateless queries only), with its real-time trigger or the
    default micro-batch one. The real-time trigger's duration is how often it checkpoints, not a latency."""
    from pyspark.sql import functions as F

    import labkit.spark

    raw = (spark.readStream.format("kafka")
           .options(**labkit.spark.kafka_options(cluster, subscribe=source, startingOffsets="latest")).load())
    page = F.get_json_object(F.col("value").cast("string"), "$.page")
    out = raw.select(F.to_json(F.struct(page.alias("page"), F.col("timestamp").alias("sent"))).alias("value"))
    writer = (out.writeStream.format("kafka").options(**labkit.spark.kafka_options(cluster, topic=results))
              .option("checkpointLocation", checkpoint).outputMode("update"))
    if trigger == "realtime":
        writer = writer.trigger(realTime="30 seconds")
    return writer.start()


def stop_quietly(query: Any, timeout: float = 10.0) -> None:
    """Stop ``query`` between micro-batches when possible: stopping one mid-batch makes Spark log
    ERROR lines about the aborted write (harmless, but they look like failures)."""
    deadline = time.monotonic() + timeout
    try:
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        query.stop()


def _probe_value(page: str, run: int, i: int) -> tuple[bytes, bytes]:
    from labkit.generators import PageView

    event = PageView(f"probe-{run}-{i}", page, "bench", int(time.time() * 1000), 0, "on_time")
    return event.key, event.value


def measure_latency(spark: Any, cluster: Any, trigger_name: str, probes: int, run: int,
                    stateless: bool = False) -> dict:
    """Probes through an update-mode query kept running (the lesson's count, or with ``stateless`` the query of
    :func:`start_stateless_query`); latency of each, in ms."""
    from confluent_kafka import OFFSET_END, TopicPartition

    import labkit.spark

    tag = uuid.uuid4().hex[:6]
    # Real-time Mode holds a task slot per source partition for the whole batch: with 3 partitions on local[2]
    # the third partition's records waited for a slot (a probe never arrived in 60 s), so the stateless query
    # reads one partition, like the lesson's latency job
    partitions = 1 if stateless else 3
    source = cluster.create_topic(f"latency-in-{trigger_name}-{tag}", partitions=partitions)
    results = cluster.create_topic(f"latency-out-{trigger_name}-{tag}", partitions=partitions)
    consumer = cluster.consumer(f"bench-latency-{tag}", enable_auto_commit=False)
    consumer.assign([TopicPartition(results, p, OFFSET_END) for p in range(partitions)])
    producer = cluster.producer(acks="all", linger_ms=0)
    checkpoint = labkit.spark.checkpoint_dir(cluster, f"latency-{tag}")
    query = (start_stateless_query(spark, cluster, source, results, checkpoint, trigger_name) if stateless else
             start_query(spark, cluster, source, results, checkpoint, starting="latest", output_mode="update",
                         trigger=TRIGGERS[trigger_name]))
    acked: dict[str, float] = {}

    def send(page: str, i: int) -> tuple[float, float]:
        key, value = _probe_value(page, run, i)
        wall, t0 = time.time(), time.monotonic()
        producer.produce(source, key=key, value=value,
                         on_delivery=lambda err, msg, p=page: acked.setdefault(p, time.monotonic()))
        producer.poll(0)
        return wall, t0

    def wait_for(pages: set[str], timeout: float) -> Optional[tuple[str, float, int]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            producer.poll(0)
            msg = consumer.poll(0.02)
            if msg is None or msg.error():
                if query.exception() is not None:
                    raise RuntimeError(f"latency query failed: {str(query.exception()).splitlines()[0]}")
                continue
            now = time.monotonic()
            page = json.loads(msg.value())["page"]
            if page in pages:
                return page, now, msg.timestamp()[1]
        return None

    try:
        # Warm-up: "latest" is resolved at the query's first trigger, so resend until one comes through.
        warm_start, seen, i = time.monotonic(), None, 0
        while seen is None and time.monotonic() - warm_start < 180:
            i += 1
            send(f"/warmup-{i}", -i)
            seen = wait_for({f"/warmup-{j}" for j in range(1, i + 1)}, 5.0)
        if seen is None:
            raise RuntimeError("the latency query produced nothing in 180 s")
        warmup_s = seen[1] - warm_start
        rows = []
        for i in range(probes):
            time.sleep(random.uniform(0.3, 1.3))
            page = f"/probe-{i}"
            wall, t0 = send(page, i)
            got = wait_for({page}, PROBE_TIMEOUT_S)
            if got is None:
                rows.append({"latency_ms": None})
                continue
            _, t1, out_ts = got
            rows.append({"latency_ms": (t1 - t0) * 1000,
                         "ack_ms": (acked[page] - t0) * 1000 if page in acked else None,
                         "spark_wrote_ms": out_ts - wall * 1000})
        batches = [p for p in query.recentProgress if p.get("numInputRows")]
        batch_ms = [p["durationMs"].get("triggerExecution", 0) for p in batches]
    finally:
        stop_quietly(query)
        consumer.close()
        producer.flush(10)
    return {"trigger": trigger_name, "warmup_s": warmup_s, "probes": rows,
            "batch_ms_median": statistics.median(batch_ms) if batch_ms else None}


def produce_events(cluster: Any, events: int) -> dict:
    """``events`` generated page views in a new 3-partition topic; returns its name and the time taken."""
    from labkit.generators import generate_page_views, send

    per_round = 1000 if events >= 10_000 else 100
    t0 = time.monotonic()
    generated = generate_page_views(seed=7, rounds=max(1, events // per_round), per_round=per_round)
    picked = list(generated.events[:events])
    generate_s = time.monotonic() - t0
    topic = cluster.create_topic(f"pageviews-{uuid.uuid4().hex[:6]}", partitions=3)
    t0 = time.monotonic()
    send(cluster, topic, picked, timeout=300)
    return {"topic": topic, "events": len(picked), "generate_s": generate_s, "produce_s": time.monotonic() - t0}


def measure_throughput(spark: Any, cluster: Any, topic: str, events: int, max_offsets: Optional[int]) -> dict:
    """The lesson's append-mode query over ``events`` already in ``topic``, from earliest until all are processed."""
    import labkit.spark

    tag = uuid.uuid4().hex[:6]
    results = cluster.create_topic(f"throughput-out-{tag}", partitions=3)
    t0 = time.monotonic()
    query = start_query(spark, cluster, topic, results, labkit.spark.checkpoint_dir(cluster, f"throughput-{tag}"),
                        starting="earliest", output_mode="append", max_offsets=max_offsets)
    try:
        query.processAllAvailable()
        elapsed = time.monotonic() - t0
        # The last batch's progress is posted right after its commit: wait for it (briefly).
        progress = labkit.spark.wait_for_progress(
            query, lambda p: sum(x.get("numInputRows", 0) for x in p) >= events, timeout=30,
            what=f"the progress of all {events} rows")
    finally:
        stop_quietly(query)
    batches = [p for p in progress if p.get("numInputRows")]
    rows = sum(p["numInputRows"] for p in batches)
    busy_s = sum(p["durationMs"].get("triggerExecution", 0) for p in batches) / 1000
    return {"max_offsets": max_offsets, "rows": rows, "batches": len(batches), "elapsed_s": elapsed,
            "wall_rows_per_s": rows / elapsed, "spark_rows_per_s": rows / busy_s if busy_s else None,
            "batch_rows_per_s_median": statistics.median(p.get("processedRowsPerSecond") or 0 for p in batches),
            "output_rows": sum(p.get("sink", {}).get("numOutputRows", 0) or 0 for p in progress)}


def one_run(args: argparse.Namespace) -> dict:
    """One fresh cluster and Spark session: start times, latency per trigger, throughput per setting."""
    import labkit
    import labkit.spark

    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    t0 = time.monotonic()
    cluster = labkit.start_cluster(args.profile, progress=False)
    out["cluster_start_s"] = time.monotonic() - t0
    out["marker"] = str(getattr(cluster, "data_dir", "") or "")
    try:
        t0 = time.monotonic()
        spark = labkit.spark.session(cluster, app_name="benchmark-spark-pipeline", progress=False)
        out["session_start_s"] = time.monotonic() - t0
        out["spark_master"] = spark.sparkContext.master
        out["latency"] = {name: measure_latency(spark, cluster, name, args.probes, args.run)
                          for name in args.triggers}
        out["stateless_latency"] = {name: measure_latency(spark, cluster, name, args.probes, args.run, stateless=True)
                                    for name in args.stateless}
        produced = produce_events(cluster, args.events)
        out["produce"] = produced
        out["throughput"] = [measure_throughput(spark, cluster, produced["topic"], produced["events"], m)
                             for m in args.max_offsets]
    finally:
        t0 = time.monotonic()
        labkit.spark.stop_session()
        cluster.stop()
        out["stop_s"] = time.monotonic() - t0
        out["load_after"] = os.getloadavg()[0]
    return out


# ---------------------------------------------------------------- the parent: runs, medians, report


def java_pids_of(marker: str) -> list[int]:
    """Live java processes whose command line contains ``marker`` (brokers and the Spark JVM carry
    ``-Dlabkit.cluster=<cluster dir>``)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if marker in cmdline and "java" in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def run_child(args: argparse.Namespace, run: int) -> dict:
    """One run in a fresh Python process; afterwards, check no JVM of its cluster is left."""
    with tempfile.TemporaryDirectory(prefix="spark-pipeline-") as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(out), "--run", str(run),
               "--profile", args.profile, "--probes", str(args.probes), "--events", str(args.events),
               "--triggers", *args.triggers, "--stateless", *args.stateless,
               "--max-offsets", *[str(m or 0) for m in args.max_offsets]]
        proc = subprocess.Popen(cmd, start_new_session=True)
        try:
            code = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # our own child's process group (the cluster's watchdog cleans up brokers)
            proc.wait()
            raise RuntimeError(f"run {run} took more than {RUN_TIMEOUT_S:.0f} s") from None
        if code != 0 or not out.exists():
            raise RuntimeError(f"run {run} failed (exit {code}); see its output above")
        result = json.loads(out.read_text())
    left: list[int] = []
    if result.get("marker"):
        deadline = time.monotonic() + 20
        while (left := java_pids_of(result["marker"])) and time.monotonic() < deadline:
            time.sleep(0.5)
    result["leftover_jvms"] = left
    return result


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100)."""
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _median(values: list[Any]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs: list[dict], triggers: list[str], max_offsets: list[Optional[int]],
              stateless: Optional[list[str]] = None) -> dict:
    summary: dict[str, Any] = {
        "cluster_start_s": _median([r["cluster_start_s"] for r in runs]),
        "session_start_s": _median([r["session_start_s"] for r in runs]),
        "latency": {}, "stateless_latency": {}, "throughput": {}}
    for part, name in [("latency", t) for t in triggers] + [("stateless_latency", t) for t in stateless or []]:
        probes = [p for r in runs for p in r[part][name]["probes"]]
        got = [p["latency_ms"] for p in probes if p["latency_ms"] is not None]
        summary[part][name] = {
            "probes": len(probes), "missed": len(probes) - len(got),
            "median_ms": _median(got), "p90_ms": percentile(got, 90) if got else None,
            "min_ms": min(got, default=None), "max_ms": max(got, default=None),
            "ack_median_ms": _median([p.get("ack_ms") for p in probes]),
            "spark_wrote_median_ms": _median([p.get("spark_wrote_ms") for p in probes]),
            "p99_ms": percentile(got, 99) if got else None,
            "run_medians_ms": [_median([p["latency_ms"] for p in r[part][name]["probes"]]) for r in runs],
            "batch_ms_median": _median([r[part][name]["batch_ms_median"] for r in runs])}
    for i, m in enumerate(max_offsets):
        rs = [r["throughput"][i] for r in runs]
        summary["throughput"][str(m or "unset")] = {
            key: _median([t[key] for t in rs])
            for key in ("wall_rows_per_s", "spark_rows_per_s", "batch_rows_per_s_median", "elapsed_s", "batches")}
    summary["produce_events_per_s"] = _median([r["produce"]["events"] / r["produce"]["produce_s"] for r in runs])
    return summary


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.0f}"


def print_run(i: int, r: dict) -> None:
    lat = "  ".join(f"{n}: median {_ms(_median([p['latency_ms'] for p in v['probes']]))} ms"
                    for n, v in r["latency"].items())
    thr = "  ".join(f"maxOffsets {t['max_offsets'] or 'unset'}: {t['wall_rows_per_s']:.0f} rows/s wall, "
                    f"{t['spark_rows_per_s'] or 0:.0f} Spark ({t['batches']} batches)" for t in r["throughput"])
    print(f"  run {i}: cluster {r['cluster_start_s']:.1f} s, Spark session {r['session_start_s']:.1f} s; "
          f"latency {lat}; {thr}; load {r['load_before']:.1f} → {r['load_after']:.1f}"
          + (f"; LEFTOVER JVMs {r['leftover_jvms']}" if r["leftover_jvms"] else ""), flush=True)


def print_summary(s: dict, args: argparse.Namespace, runs: list[dict]) -> None:
    loads = [r[k] for r in runs for k in ("load_before", "load_after")]
    print(f"\nmedians over {len(runs)} run(s): profile {args.profile}, Spark {runs[0]['spark_master']}, "
          f"{psutil.cpu_count()} cores, load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"  cluster start                     {s['cluster_start_s']:8.1f} s")
    print(f"  Spark session start (cold JVM)    {s['session_start_s']:8.1f} s")
    print(f"\n  end-to-end latency (update mode)  {'median':>8} {'p90':>8} {'min':>8} {'max':>8}  probes"
          f"  (medians: produce ack / Spark wrote / batch duration)")
    for name, v in [*s["latency"].items(), *((f"stateless {n}", v) for n, v in s["stateless_latency"].items())]:
        label = {"default": "default trigger", "stateless default": "stateless, default trigger",
                 "stateless realtime": "stateless, real-time trigger"}.get(name, f"processingTime {TRIGGERS.get(name)}")
        print(f"  {label:<33} {_ms(v['median_ms']):>6}ms {_ms(v['p90_ms']):>6}ms {_ms(v['min_ms']):>6}ms "
              f"{_ms(v['max_ms']):>6}ms  {v['probes'] - v['missed']}/{v['probes']}"
              f"  ({_ms(v['ack_median_ms'])} / {_ms(v['spark_wrote_median_ms'])} / {_ms(v['batch_ms_median'])} ms)")
    print(f"\n  throughput, {args.events} events   {'wall rows/s':>12} {'Spark rows/s':>13} {'elapsed':>8} "
          f"{'batches':>8}")
    for m, v in s["throughput"].items():
        label = f"maxOffsetsPerTrigger {m}"
        print(f"  {label:<33} {v['wall_rows_per_s']:>12.0f} {v['spark_rows_per_s'] or 0:>13.0f} "
              f"{v['elapsed_s']:>7.1f}s {v['batches']:>8.0f}")
    print(f"  (producing the events with labkit.generators.send: {s['produce_events_per_s']:.0f} events/s)")


def problems(runs: list[dict], args: argparse.Namespace) -> list[str]:
    found = []
    for i, r in enumerate(runs, 1):
        for name, v in [*r["latency"].items(), *((f"stateless {n}", v) for n, v in r.get("stateless_latency", {}).items())]:
            missed = sum(p["latency_ms"] is None for p in v["probes"])
            if missed:
                found.append(f"run {i}: {missed} {name}-trigger probe(s) never arrived")
        for t in r["throughput"]:
            if t["rows"] != r["produce"]["events"]:
                found.append(f"run {i}: processed {t['rows']} of {r['produce']['events']} events")
        if r["leftover_jvms"]:
            found.append(f"run {i}: JVMs left running: {r['leftover_jvms']}")
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="fresh cluster + Spark runs (default 3; quick: 1)")
    parser.add_argument("--probes", type=int, default=None, help="latency probes per trigger per run (default 10)")
    parser.add_argument("--events", type=int, default=None, help="events for the throughput runs (default 200000)")
    parser.add_argument("--max-offsets", type=int, nargs="+", default=None,
                        help="maxOffsetsPerTrigger settings to measure, 0 = unset (default: 0 20000)")
    parser.add_argument("--triggers", nargs="+", choices=list(TRIGGERS), default=list(TRIGGERS))
    parser.add_argument("--stateless", nargs="*", choices=["default", "realtime"], default=["default", "realtime"],
                        help="triggers for the stateless query (realtime: Spark's Real-time Mode)")
    parser.add_argument("--profile", default="three-brokers", help="cluster profile (default: the lessons')")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 1 run, 3 probes, 5,000 events")
    parser.add_argument("--json", default=str(RESULTS / "spark_pipeline.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when something did not work")
    parser.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 3)
    args.probes = args.probes or (3 if args.quick else 10)
    args.events = args.events or (5_000 if args.quick else 200_000)
    max_offsets = args.max_offsets or ([0, args.events // 4] if args.quick else [0, 20_000])
    args.max_offsets = [m or None for m in max_offsets]

    if args.child:
        Path(args.child).write_text(json.dumps(one_run(args)))
        return 0

    import labkit
    import labkit.spark

    labkit.ensure_distribution(progress=True)
    labkit.spark.ensure_connector(progress=True)
    print(f"Spark pipeline: {args.runs} run(s), profile {args.profile}, {args.probes} latency probes per trigger "
          f"per run, {args.events} events per throughput run", flush=True)
    runs = []
    for i in range(1, args.runs + 1):
        args.run = i
        r = run_child(args, i)
        runs.append(r)
        print_run(i, r)
    summary = summarize(runs, args.triggers, args.max_offsets, args.stateless)
    print_summary(summary, args, runs)
    found = problems(runs, args)
    for p in found:
        print(f"  PROBLEM: {p}")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"profile": args.profile, "events": args.events, "probes_per_run": args.probes,
                                "machine": {"cpus": psutil.cpu_count(),
                                            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
                                "runs": runs, "summary": summary, "problems": found}, indent=2))
    print(f"\nwrote {path}")
    return 1 if found and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
