"""What the Prometheus JMX exporter agent costs a lab broker: start time, CPU, memory.

    python benchmarks/metrics_exporter.py [--runs 5] [--profile three-brokers] [--json PATH]

Runs alternate between brokers with the agent and without it (``LABKIT_METRICS=0``),
so both see the same machine load. Per run: time until ``start_cluster()`` returns,
the brokers' CPU seconds during start-up and during 10 s idle after it, peak RSS; with
the agent also the broker CPU one scrape costs (20 scrapes in a row) and how long it
takes — a full scrape (``cluster.metrics()``: every metric, the JVM's own included) and
the live panel's (only the panel's metrics, ``?name[]=``). Also checks that a broker JVM
with the agent still maps the class-data archive (``-Xshare:on`` refuses to start
otherwise): the one hard target. The costs are reported with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
from labkit.runtime import classdata, metrics
from labkit.backends.native import NativeCluster
from labkit.runtime.distribution import ensure_distribution
from labkit.runtime.environment import kafka_spec
from labkit.runtime.ports import free_ports

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def one_run(profile: str, agent: bool, idle: float = 10.0, scrapes: int = 20) -> dict:
    if agent:
        os.environ.pop(metrics.ENV_SWITCH, None)
    else:
        os.environ[metrics.ENV_SWITCH] = "0"
    try:
        t0 = time.monotonic()
        cluster = NativeCluster(profile, progress=False)
        cluster.start()
        ready = time.monotonic() - t0
    finally:
        os.environ.pop(metrics.ENV_SWITCH, None)
    try:
        assert bool(cluster.metrics_endpoints()) == agent, "the agent is attached exactly when asked"
        pids = [b.pid for b in cluster.brokers if b.pid]
        start_cpu = cpu_seconds(pids)
        time.sleep(idle)
        idle_cpu = cpu_seconds(pids) - start_cpu
        out = {"agent": agent, "ready_s": ready, "start_cpu_s": start_cpu, "idle_cpu_s": idle_cpu,
               "rss_mb": max(psutil.Process(p).memory_info().rss for p in pids) / 2**20}
        if agent:
            urls = cluster.metrics_endpoints()
            metrics.scrape_all(urls)                         # the first scrape warms the exporter up
            for kind, names in (("scrape", ()), ("panel", metrics.PANEL_METRICS)):
                before, t1 = cpu_seconds(pids), time.monotonic()
                samples = 0
                for _ in range(scrapes):
                    found, errors = metrics.scrape_all(urls, names=names)
                    assert not errors, errors
                    samples = len(found)
                wall = time.monotonic() - t1
                out.update({f"{kind}_cpu_ms": 1000 * (cpu_seconds(pids) - before) / (scrapes * len(pids)),
                            f"{kind}_ms": 1000 * wall / scrapes, f"{kind}_samples": samples})
        return out
    finally:
        cluster.stop()


def archive_maps_with_agent() -> bool:
    """A broker JVM given the agent still maps the class-data archive (-Xshare:on would refuse to start)."""
    dist = ensure_distribution(progress=False)
    _, cp, archive = classdata.broker_setup(dist)
    jar = metrics.exporter_jar()
    if not archive.exists() or jar is None:
        return False
    spec = kafka_spec()
    agent = [f"-javaagent:{jar}=127.0.0.1:{free_ports(1)[0]}:{metrics.exporter_spec().config}"]
    return classdata.usable(archive, cp, [f"-Xmx{spec.heap}", *spec.jvm_options, *agent],
                            classdata.LAUNCHER_MAIN, "--check")


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="three-brokers")
    parser.add_argument("--json", default=str(RESULTS / "metrics_exporter.json"))
    parser.add_argument("--no-fail", action="store_true")
    args = parser.parse_args(argv)
    if metrics.exporter_jar() is None:
        print("the exporter is not fetched: run `labkit setup` first")
        return 1
    maps = archive_maps_with_agent()
    print(f"class-data archive maps with the agent attached: {maps}")
    runs: dict[bool, list[dict]] = {True: [], False: []}
    print(f"{args.profile}: {args.runs} runs each, alternating")
    print(f"  {'agent':>5}  {'ready s':>7}  {'start CPU s':>11}  {'idle CPU s/10s':>14}  {'RSS MB':>6}  "
          f"{'full scrape: ms, CPU ms/broker':>30}  {'panel scrape: ms, CPU ms/broker':>31}")
    for i in range(args.runs):
        for agent in ((True, False) if i % 2 == 0 else (False, True)):
            r = one_run(args.profile, agent)
            runs[agent].append(r)
            extra = (f"  {r['scrape_ms']:>18.1f}, {r['scrape_cpu_ms']:>9.2f}  {r['panel_ms']:>19.1f}, "
                     f"{r['panel_cpu_ms']:>9.2f}") if agent else ""
            print(f"  {str(agent):>5}  {r['ready_s']:>7.2f}  {r['start_cpu_s']:>11.2f}  {r['idle_cpu_s']:>14.2f}  "
                  f"{r['rss_mb']:>6.0f}{extra}", flush=True)
    summary = {}
    for key in ("ready_s", "start_cpu_s", "idle_cpu_s", "rss_mb"):
        summary[key] = {"with": median(runs[True], key), "without": median(runs[False], key)}
    for key in ("scrape_ms", "scrape_cpu_ms", "panel_ms", "panel_cpu_ms"):
        summary[key] = median(runs[True], key)
    summary["start_overhead_pct"] = 100 * (summary["ready_s"]["with"] / summary["ready_s"]["without"] - 1)
    summary["start_cpu_overhead_pct"] = 100 * (summary["start_cpu_s"]["with"] / summary["start_cpu_s"]["without"] - 1)
    print("  medians: " + ", ".join(f"{k} {v['with']:.2f} with / {v['without']:.2f} without"
                                    for k, v in summary.items() if isinstance(v, dict)))
    print(f"  start time {summary['start_overhead_pct']:+.0f} %, start CPU {summary['start_cpu_overhead_pct']:+.0f} % "
          f"with the agent; a full scrape {summary['scrape_ms']:.1f} ms ({summary['scrape_cpu_ms']:.2f} ms broker CPU), "
          f"the panel's {summary['panel_ms']:.1f} ms ({summary['panel_cpu_ms']:.2f} ms)")
    print(f"  load average {psutil.getloadavg()[0]:.2f}")
    failed = not maps
    print(f"  {'PASS' if maps else 'FAIL'}: the class-data archive maps with the agent attached")
    report = {"machine": reporting.machine(), "profile": args.profile, "archive_maps_with_agent": maps, "runs": {"with": runs[True], "without": runs[False]},
              "summary": summary}
    reporting.write(args.json, report)
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
