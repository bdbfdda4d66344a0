"""Two clusters in one notebook, a Connect worker and MirrorMaker 2 between them: how fast, how big.

    python benchmarks/connect_mirror.py [--runs 5] [--json PATH] [--no-fail]

Per run, what lesson 10 starts, measured from a fresh process state: ``start_clusters(["primary", "dr"],
profile="single-broker")`` until it returns (both clusters ready); a Connect worker on dr from its JVM's
launch until ``GET /health`` answers 200; its CPU seconds until then and its RSS at ready and with
MirrorMaker's three connectors running; ``mirror(primary, dr)`` from the first ``PUT`` until a record
produced on primary before it can be read on dr; the per-record replication lag (median of 100 records);
and how long ``stop()`` of both clusters takes (workers first). Prints every run, then the median, min and
max, with the machine's load average. Target on a 2-core machine: <= 300 MB RSS per worker (the default
reflective plugin scan costs ~430 MB); the times are reported beside the load, without a target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
import labkit
from labkit.services import mirror as mm

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"worker_rss_mb_mirroring": 300.0}


def one_run() -> dict:
    load = psutil.getloadavg()[0]
    t0 = time.monotonic()
    clusters = labkit.start_clusters(["primary", "dr"], profile="single-broker", progress=False)
    two_clusters = time.monotonic() - t0
    try:
        primary, dr = clusters
        topic = primary.create_topic(f"orders-{uuid.uuid4().hex[:6]}", partitions=3)
        producer = primary.producer(acks="all")
        producer.produce(topic, value=b"first")
        producer.flush(10)
        worker = dr.connect_worker()
        proc = psutil.Process(worker.process.pid)
        cpu = proc.cpu_times()
        worker_cpu = cpu.user + cpu.system
        worker_rss = proc.memory_info().rss / 2**20
        t1 = time.monotonic()
        flow = mm.mirror(primary, dr, topics=topic)
        remote = flow.wait_for_topic(topic)
        flow.wait_caught_up(topic)
        first_record = time.monotonic() - t1
        lag = statistics.median(mm.replication_latency(primary, dr, topic, remote, count=100))
        mirroring_rss = proc.memory_info().rss / 2**20
    finally:
        t2 = time.monotonic()
        clusters.stop()
        stop = time.monotonic() - t2
    return {"load_1min": load, "two_clusters_ready_s": two_clusters, "worker_ready_s": worker.ready_seconds,
            "worker_cpu_s": worker_cpu, "worker_rss_mb_ready": worker_rss, "mirror_first_record_s": first_record,
            "replication_lag_ms": lag * 1000, "worker_rss_mb_mirroring": mirroring_rss, "stop_both_s": stop}


KEYS = ("two_clusters_ready_s", "worker_ready_s", "worker_cpu_s", "worker_rss_mb_ready", "mirror_first_record_s",
        "replication_lag_ms", "worker_rss_mb_mirroring", "stop_both_s", "load_1min")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=str(RESULTS / "connect_mirror.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = parser.parse_args(argv)
    labkit.ensure_distribution(progress=True)
    heads = ["2 clusters", "worker", "worker CPU", "RSS ready", "MM2 1st rec", "lag ms", "RSS MM2", "stop", "load"]
    print("  run  " + "  ".join(f"{h:>11}" for h in heads))
    runs = []
    for i in range(args.runs):
        r = one_run()
        runs.append(r)
        print(f"  {i + 1:>3}  " + "  ".join(f"{r[k]:>11.2f}" for k in KEYS), flush=True)
    summary = {k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs),
                   "max": max(r[k] for r in runs)} for k in KEYS}
    print("  median " + "  ".join(f"{k}={v['median']:.2f}" for k, v in summary.items()))
    failed = False
    for key, limit in TARGETS.items():
        value = summary[key]["median"]
        failed |= not reporting.meets(f"median {key}", value, limit, digits=0)
    reporting.write(args.json, {"machine": reporting.machine(), "runs": runs, "summary": summary})
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
