"""What running a cluster costs in time: a broker added and removed, and a 100 MB reassignment.

    python benchmarks/cluster_ops.py [--runs 3] [--megabytes 100] [--throttle 20000000] [--json PATH]

On one three-broker cluster (the `operations` profile: racks and a dynamic quorum), per run:

* **add**: ``cluster.add_broker()`` until every live broker lists the new one;
* **reassign**: ``--megabytes`` MB (one topic, 3 partitions, replication factor 1 on broker 1) moved to the new
  broker by ``kafka-reassign-partitions`` without a throttle, then back under ``--throttle`` bytes/s, each until
  every broker shows the new replicas in sync (the MB/s is the data divided by that time);
* **remove**: ``cluster.remove_broker()`` of the (again empty) broker until no live broker lists it.

Prints every run and the medians, with the load average before and after. No targets: the numbers are
what the lesson and the exercise cost (lesson 13 and drain_broker wait on these operations).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
import labkit
from labkit import operations as ops
from labkit import perf

RESULTS = Path(__file__).resolve().parent / "results"


def fill(cluster, megabytes: int) -> str:
    """A topic of 3 partitions, replication factor 1, all on broker 1, holding ``megabytes`` MB."""
    from confluent_kafka.admin import NewTopic

    name = f"bulk-{uuid.uuid4().hex[:6]}"
    for f in cluster.admin().create_topics([NewTopic(name, 3, replica_assignment=[[1], [1], [1]])]).values():
        f.result(timeout=30)
    cluster.wait_for_isr(name)
    perf.java_producer(cluster, name, megabytes * 1000, 1000, acks="1")
    return name


def move(cluster, topic: str, to: int, throttle: int | None) -> float:
    plan = ops.Plan({(topic, p): (to,) for p in range(3)})
    t0 = time.monotonic()
    moving = ops.reassign(cluster, plan, throttle=throttle)
    moving.wait(timeout=600)
    seconds = time.monotonic() - t0
    moving.finish()
    return seconds


def one_run(cluster, megabytes: int, throttle: int) -> dict:
    t0 = time.monotonic()
    new = cluster.add_broker().id
    added = time.monotonic() - t0
    topic = fill(cluster, megabytes)
    unthrottled = move(cluster, topic, new, None)
    throttled = move(cluster, topic, 1, throttle)
    cluster.delete_topic(topic)
    t0 = time.monotonic()
    cluster.remove_broker(new)
    removed = time.monotonic() - t0
    return {"add_s": added, "remove_s": removed, "reassign_s": unthrottled, "reassign_mb_s": megabytes / unthrottled,
            "throttled_s": throttled, "throttled_mb_s": megabytes / throttled}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--throttle", type=int, default=20_000_000, help="bytes per second for the throttled move")
    parser.add_argument("--json", default=str(RESULTS / "cluster_ops.json"))
    args = parser.parse_args(argv)
    print(f"load average (1, 5, 15 min) before: {reporting.load_text()}")
    cluster = labkit.start_cluster("operations", progress=False)
    runs = []
    try:
        print(f"  {'run':>3}  {'add s':>6}  {'remove s':>8}  {f'{args.megabytes} MB s':>9}  {'MB/s':>6}  "
              f"{'throttled s':>11}  {'MB/s':>6}")
        for i in range(args.runs):
            r = one_run(cluster, args.megabytes, args.throttle)
            runs.append(r)
            print(f"  {i + 1:>3}  {r['add_s']:>6.2f}  {r['remove_s']:>8.2f}  {r['reassign_s']:>9.1f}  "
                  f"{r['reassign_mb_s']:>6.1f}  {r['throttled_s']:>11.1f}  {r['throttled_mb_s']:>6.1f}", flush=True)
    finally:
        cluster.stop()
    summary = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("  median " + "  ".join(f"{k}={v:.2f}" for k, v in summary.items()))
    print(f"  (throttle {args.throttle / 1e6:g} MB/s)  load average after: {reporting.load_text()}")
    reporting.write(args.json, {"machine": reporting.machine(), "megabytes": args.megabytes, "throttle": args.throttle,
                                "runs": runs, "median": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
