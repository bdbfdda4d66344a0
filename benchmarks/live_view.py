"""What the live cluster view costs the notebook's kernel: refresh rate and CPU.

    python benchmarks/live_view.py [--runs 3] [--seconds 20] [--refresh 0.5]

A three-broker cluster with one 6-partition topic and one consumer group with
committed offsets is watched by a ClusterView for ``--seconds``; per run it
reports the refreshes per second achieved and the extra CPU the kernel process
uses with the view running (all its threads, librdkafka's included, minus an
equal window without the view), as a percentage of one core; then the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

import labkit  # noqa: E402
from labkit.widgets import ClusterView  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _process_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


def one_run(cluster, topic: str, seconds: float, refresh: float) -> dict:
    """Kernel-process CPU (all threads, librdkafka's included) with the view, minus the same window without it."""
    cpu0, t0 = _process_cpu(), time.monotonic()
    time.sleep(seconds)
    baseline = (_process_cpu() - cpu0) / (time.monotonic() - t0)
    view = ClusterView(cluster, topics=[topic], refresh=refresh)
    try:
        start_refreshes, cpu0, t0 = view.refreshes, _process_cpu(), time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        rate = (view.refreshes - start_refreshes) / wall
        with_view = (_process_cpu() - cpu0) / wall
    finally:
        view.close()
    return {"refreshes_per_s": rate, "cpu_percent_of_one_core": max(with_view - baseline, 0.0) * 100,
            "process_cpu_percent_with_view": with_view * 100}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--refresh", type=float, default=0.5)
    parser.add_argument("--json", default=str(RESULTS / "live_view.json"))
    args = parser.parse_args(argv)
    with labkit.start_cluster(progress=False) as cluster:
        topic = cluster.create_topic("watched", partitions=6)
        producer = cluster.producer()
        for i in range(3000):
            producer.produce(topic, key=str(i), value=b"x")
        producer.flush(30)
        consumer = cluster.consumer("watchers")
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        got = 0
        while got < 1000 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            got += msg is not None and not msg.error()
        consumer.commit(asynchronous=False)
        runs = []
        print(f"{'run':>3}  {'refreshes/s':>11}  {'view CPU % of a core':>20}  {'process CPU % with view':>23}")
        for i in range(args.runs):
            r = one_run(cluster, topic, args.seconds, args.refresh)
            runs.append(r)
            print(f"{i + 1:>3}  {r['refreshes_per_s']:>11.2f}  {r['cpu_percent_of_one_core']:>20.2f}  "
                  f"{r['process_cpu_percent_with_view']:>23.2f}", flush=True)
        consumer.close()
    summary = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("median " + "  ".join(f"{k}={v:.2f}" for k, v in summary.items()))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"refresh_interval_s": args.refresh, "runs": runs, "median": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
