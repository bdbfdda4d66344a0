"""What labkit's pytest plugin costs a test session, and what reusing its cluster saves.

    python benchmarks/pytest_plugin.py [--runs 3] [--tests 20] [--profile three-brokers] [--json PATH] [--no-fail]

Each run is a real ``python -m pytest`` in a fresh folder outside the repository (other plugins of this
environment left out, ``--disable-plugin-autoload``, so only the lab's is measured), interleaved:

* ``collect_without_s`` / ``collect_with_s`` -- a session of one plain test without and with ``-p kafka_lab``:
  the plugin's cost to a session that never asks for a cluster (importing labkit);
* ``one_test_s`` -- a session of one test on ``kafka_cluster`` + ``kafka_topic`` (produce a record, read it back):
  the cluster's start and stop, what every test would pay with a cluster of its own;
* ``many_tests_s`` -- ``--tests`` such tests on the session's one cluster; ``per_reused_test_s`` is what each test
  after the first costs (the JUnit report's times), the first one's is the start.

Prints every run and the medians, with the load average. Target: a test on the reused cluster costs <= 1 s
(median); the rest is reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"per_reused_test_s": 1.0}

PLAIN = "def test_nothing():\n    assert True\n"
KAFKA = '''
import pytest


@pytest.mark.parametrize("n", range({tests}))
def test_a_record_round_trip(kafka_cluster, kafka_topic, n):
    producer = kafka_cluster.producer(acks="all")
    producer.produce(kafka_topic, key=str(n), value=b"x")
    assert producer.flush(30) == 0
    assert [r.value for r in kafka_cluster.read_all(kafka_topic)] == [b"x"]
'''


def session(folder: Path, test: str, plugin: bool, profile: str) -> tuple[float, list[float]]:
    """Wall seconds of one pytest session on ``test``, and each test's time from its JUnit report."""
    (folder / "test_bench.py").write_text(test)
    report = folder / "report.xml"
    cmd = [sys.executable, "-m", "pytest", "--disable-plugin-autoload", "-p", "no:cacheprovider", "-q",
           f"--junitxml={report}", *(["-p", "kafka_lab", "--kafka-profile", profile] if plugin else [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LABKIT_BOOTSTRAP"))}
    env["LABKIT_DATA_DIR"] = str(folder)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the benchmark's session failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    times = [float(case.get("time", 0)) for case in ET.parse(report).getroot().iter("testcase")]
    report.unlink()
    return wall, times


def one_run(profile: str, tests: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-pytest-plugin-") as tmp:
        folder = Path(tmp)
        without, _ = session(folder, PLAIN, False, profile)
        with_plugin, _ = session(folder, PLAIN, True, profile)
        one, _ = session(folder, KAFKA.format(tests=1), True, profile)
        many, times = session(folder, KAFKA.format(tests=tests), True, profile)
    return {"collect_without_s": without, "collect_with_s": with_plugin, "plugin_import_s": with_plugin - without,
            "one_test_s": one, "cluster_start_stop_s": one - with_plugin, "many_tests_s": many,
            "first_test_s": times[0], "per_reused_test_s": statistics.median(times[1:]),
            "load_average": psutil.getloadavg()[0]}


KEYS = ("collect_without_s", "collect_with_s", "plugin_import_s", "one_test_s", "cluster_start_stop_s",
        "many_tests_s", "first_test_s", "per_reused_test_s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--profile", default="three-brokers")
    parser.add_argument("--json", default=str(RESULTS / "pytest_plugin.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = parser.parse_args(argv)
    load_before = psutil.getloadavg()
    print(f"pytest plugin, profile {args.profile}, {args.tests} tests per session: {args.runs} runs, load average "
          f"{reporting.load_text()}")
    print(f"  {'run':>3}  {'plain':>6}  {'+plugin':>7}  {'1 test':>7}  {args.tests:>3} tests  {'first':>6}  "
          f"{'reused':>6}  load")
    runs = []
    for i in range(args.runs):
        r = one_run(args.profile, args.tests)
        runs.append(r)
        print(f"  {i + 1:>3}  {r['collect_without_s']:>6.2f}  {r['collect_with_s']:>7.2f}  {r['one_test_s']:>7.2f}  "
              f"{r['many_tests_s']:>9.2f}  {r['first_test_s']:>6.2f}  {r['per_reused_test_s']:>6.2f}  "
              f"{r['load_average']:.1f}", flush=True)
    summary = {k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs),
                   "max": max(r[k] for r in runs)} for k in KEYS}
    median = {k: v["median"] for k, v in summary.items()}
    print(f"  median: the plugin adds {median['plugin_import_s']:.2f} s to a session that uses no cluster; a cluster "
          f"of one's own costs {median['cluster_start_stop_s']:.1f} s (start and stop); on the session's cluster each "
          f"further test costs {median['per_reused_test_s']:.2f} s: {args.tests} tests in "
          f"{median['many_tests_s']:.1f} s instead of about {args.tests * median['one_test_s']:.0f} s")
    failed = False
    for key, limit in TARGETS.items():
        failed |= not reporting.meets(f"median {key}", median[key], limit, digits=2)
    report = {"machine": reporting.machine(load_average_before=load_before, load_average_after=psutil.getloadavg()),
              "profile": args.profile, "tests": args.tests, "runs": runs, "summary": summary}
    reporting.write(args.json, report)
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
