"""How fast a lab cluster starts and how much memory its brokers use.

    python benchmarks/cluster_start.py [--runs 5] [--profiles single-broker three-brokers] [--json PATH]

Per run, for each profile: time until ``start_cluster()`` returns (ready), time
until the first ``acks=all`` record is acknowledged (from the same start), and
the peak resident memory (RSS) of each broker JVM and the peak of the whole cluster's
proportional set size (PSS: pages the brokers share, like their class-data archive,
count once between them), sampled every 100 ms from launch through a small workload
(20,000 records produced and consumed). Prints every run, then the median, min and
max; checks the targets on a 2-core machine: three-broker cluster ready in <= 3 s
(median), a single broker in <= 1.5 s, <= 600 MB RSS per broker, a three-broker
cluster <= 450 MB PSS in all (issue 31: memory decides how many learners a server
holds); the secured profile (TLS, SCRAM, ACLs) is measured beside them, without a target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
import labkit
from labkit.backends.native import NativeCluster
from labkit.runtime import limits

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"three-brokers": {"ready_s": 3.0, "rss_mb_max": 600.0, "pss_mb_cluster": 450.0},
           "single-broker": {"ready_s": 1.5, "rss_mb_max": 600.0}, "secured": {"rss_mb_max": 600.0}}


class RssSampler(threading.Thread):
    """Samples a cluster's broker JVMs every ``interval`` seconds: keeps each broker's peak RSS and the peak of
    their PSS summed at the same moment (the cluster's share of the machine's memory)."""

    def __init__(self, cluster: NativeCluster, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.cluster, self.interval = cluster, interval
        self.peak: dict[int, int] = {}
        self.peak_pss = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pss = 0
            for node_id, node in list(self.cluster._nodes.items()):
                pid = node.process.pid if node.process is not None else None
                if pid is None:
                    continue
                try:
                    rss = psutil.Process(pid).memory_info().rss
                    pss += (limits.pss_kb(pid) or 0) * 1024
                except (psutil.Error, OSError):
                    continue
                self.peak[node_id] = max(self.peak.get(node_id, 0), rss)
            self.peak_pss = max(self.peak_pss, pss)
            self._halt.wait(self.interval)

    def stop(self) -> dict[int, int]:
        self._halt.set()
        self.join()
        return self.peak


def workload(cluster: NativeCluster, records: int = 20_000) -> float:
    """Produce ``records`` small records with acks=all and read them back; returns seconds taken."""
    t0 = time.monotonic()
    topic = cluster.create_topic(f"bench-{uuid.uuid4().hex[:6]}", partitions=3)
    producer = cluster.producer(acks="all", linger_ms=5)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i % 100), value=b"x" * 100)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0, "the workload's records were not all acknowledged"
    read = cluster.read_all(topic, timeout=60)
    assert len(read) == records, f"read back {len(read)} of {records} records"
    return time.monotonic() - t0


def one_run(profile: str) -> dict:
    t0 = time.monotonic()
    cluster = NativeCluster(profile, progress=False)
    sampler = RssSampler(cluster)
    sampler.start()
    try:
        cluster.start()
        ready = time.monotonic() - t0
        topic = cluster.create_topic(f"first-{uuid.uuid4().hex[:6]}", partitions=1)
        producer = cluster.producer(acks="all")
        acked: list = []
        producer.produce(topic, value=b"hello", on_delivery=lambda err, msg: acked.append(err))
        producer.flush(60)
        if acked != [None]:
            raise RuntimeError(f"the first record was not acknowledged: {acked}")
        first_ack = time.monotonic() - t0
        work = workload(cluster)
    finally:
        peaks = sampler.stop()
        cluster.stop()
    rss_mb = [v / 2**20 for v in peaks.values()]
    return {"ready_s": ready, "first_ack_s": first_ack, "workload_s": work,
            "rss_mb_max": max(rss_mb), "rss_mb_per_broker": rss_mb, "pss_mb_cluster": sampler.peak_pss / 2**20}


def summarize(runs: list[dict]) -> dict:
    out = {}
    for key in ("ready_s", "first_ack_s", "workload_s", "rss_mb_max", "pss_mb_cluster"):
        values = [r[key] for r in runs]
        out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profiles", nargs="+", default=["single-broker", "three-brokers", "secured"])
    parser.add_argument("--json", default=str(RESULTS / "cluster_start.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = parser.parse_args(argv)
    dist = labkit.ensure_distribution(progress=True)
    from labkit.runtime import classdata

    archives = {kind: (path.name if path else None) for kind, path in classdata.status(dist).items()}
    missing = [kind for kind, name in archives.items() if name is None]
    print(f"class-data archives: {archives}" + (f" ({', '.join(missing)} missing: run `labkit setup` for the fast "
                                                "start)" if missing else ""))
    print(f"load average (1, 5, 15 min) before: {reporting.load_text()}")

    report = {"machine": reporting.machine(), "class_data_archives": archives, "profiles": {}}
    failed = False
    for profile in args.profiles:
        print(f"\n{profile}: {args.runs} runs")
        print(f"  {'run':>3}  {'ready s':>8}  {'1st ack s':>9}  {'20k rec s':>9}  {'peak RSS MB/broker':>18}  "
              f"{'peak PSS MB, cluster':>20}")
        runs = []
        for i in range(args.runs):
            r = one_run(profile)
            runs.append(r)
            print(f"  {i + 1:>3}  {r['ready_s']:>8.2f}  {r['first_ack_s']:>9.2f}  {r['workload_s']:>9.2f}  "
                  f"{r['rss_mb_max']:>18.0f}  {r['pss_mb_cluster']:>20.0f}", flush=True)
        summary = summarize(runs)
        report["profiles"][profile] = {"runs": runs, "summary": summary}
        print("  median " + "  ".join(f"{k}={v['median']:.2f}" for k, v in summary.items()))
        report["profiles"][profile]["load_average_after"] = psutil.getloadavg()
        print(f"  load average after: {reporting.load_text()}")
        for key, limit in TARGETS.get(profile, {}).items():
            failed |= not reporting.meets(f"median {key}", summary[key]["median"], limit)
    reporting.write(args.json, report)
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
