"""The Python producer (confluent-kafka) against Kafka's own kafka-producer-perf-test (Java), side by side.

    python benchmarks/producer_throughput.py [--runs 5] [--records 200000] [--record-size 200] [--acks all]

One cluster, one topic (3 partitions, replication factor 3), the same record size, the
same acks and the same kind of payload (random upper-case letters, what the Java tool
sends). Runs are interleaved — Java, Python, then Python, Java, ... — so both see the
same machine. Each client is measured in two set-ups:

* ``defaults``: each client's own defaults. They differ: the Java producer is idempotent
  (so at most 5 requests in flight per broker) and batches up to 16 kB per partition;
  librdkafka is not idempotent (1,000,000 requests may be in flight) and batches up to 1 MB
  or 10,000 records; both linger 5 ms;
* ``same settings``: both idempotent (5 in flight), ``batch.size`` 1 MB, ``linger.ms`` 5.

Both measure from the first record to the last acknowledgement (the Java tool's own
``records/sec``; its JVM start is not counted). Prints every run, the medians and the
Python/Java ratio per set-up. Target: Python >= 0.7 x Java with each client's defaults.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
import labkit
from labkit import perf

RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 0.7
#: Set-up name -> (Java producer settings, librdkafka settings) on top of acks.
SAME = {"enable.idempotence": True, "batch.size": 1_000_000, "linger.ms": 5}
SETUPS = {"defaults": ({}, {}), "same settings": (SAME, SAME)}


def one_pair(cluster, topic: str, records: int, size: int, acks: str, setup: str, java_first: bool) -> dict:
    java_settings, python_settings = SETUPS[setup]

    def java():
        return perf.java_producer(cluster, topic, records, size, acks=acks, **java_settings)

    def python():
        return perf.python_producer(cluster, topic, records, size, acks=acks, config=python_settings)

    order = (java, python) if java_first else (python, java)
    results = {fn.__name__: fn() for fn in order}
    for name, r in results.items():
        assert r.records == records and not r.failed, f"{name}: {r.records} of {records} acknowledged"
    return {name: perf.as_dict(r) for name, r in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=200)
    parser.add_argument("--acks", default="all")
    parser.add_argument("--profile", default="three-brokers")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--json", default=str(RESULTS / "producer_throughput.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when the target is missed")
    args = parser.parse_args(argv)

    load_before = psutil.getloadavg()
    cluster = labkit.start_cluster(args.profile, progress=False)
    report: dict = {"machine": {"cpus": psutil.cpu_count(), "load_average_before": load_before},
                    "records": args.records, "record_size": args.record_size, "acks": args.acks, "setups": {}}
    failed = False
    try:
        topic = cluster.create_topic(f"throughput-{uuid.uuid4().hex[:6]}", partitions=3, replication_factor=3)
        # one warm-up run each: the first JVM and the first producer pay for class loading and connections
        one_pair(cluster, topic, args.records // 10, args.record_size, args.acks, "defaults", True)
        for setup in args.setups:
            print(f"\n{setup}: {args.runs} runs of {args.records:,} records of {args.record_size} B, acks={args.acks}")
            print(f"  {'run':>3}  {'Java rec/s':>11}  {'Python rec/s':>12}  {'Java p99 ms':>11}  {'Python p99 ms':>13}")
            runs = []
            for i in range(args.runs):
                pair = one_pair(cluster, topic, args.records, args.record_size, args.acks, setup, java_first=i % 2 == 0)
                runs.append(pair)
                print(f"  {i + 1:>3}  {pair['java']['records_per_s']:>11,.0f}  {pair['python']['records_per_s']:>12,.0f}"
                      f"  {pair['java']['p99_ms']:>11,.0f}  {pair['python']['p99_ms']:>13,.0f}", flush=True)
            java = statistics.median(r["java"]["records_per_s"] for r in runs)
            python = statistics.median(r["python"]["records_per_s"] for r in runs)
            ratio = python / java
            summary = {"java_median": java, "python_median": python, "ratio": ratio,
                       "java_mb_s": statistics.median(r["java"]["mb_per_s"] for r in runs),
                       "python_mb_s": statistics.median(r["python"]["mb_per_s"] for r in runs)}
            report["setups"][setup] = {"runs": runs, "summary": summary}
            print(f"  median: Java {java:,.0f} records/s ({summary['java_mb_s']:.1f} MB/s), "
                  f"Python {python:,.0f} records/s ({summary['python_mb_s']:.1f} MB/s): Python/Java = {ratio:.2f}")
            if setup == "defaults":
                failed |= not reporting.meets("Python/Java", ratio, TARGET, at_most=False, digits=2)
    finally:
        cluster.stop()
    report["machine"]["load_average_after"] = psutil.getloadavg()
    print(f"\nload average before {load_before[0]:.2f}, after {report['machine']['load_average_after'][0]:.2f} "
          f"({psutil.cpu_count()} CPUs)")
    reporting.write(args.json, report)
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
