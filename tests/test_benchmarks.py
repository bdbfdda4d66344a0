"""The benchmarks run and report sane numbers (a smoke test, not a timing assertion)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import REPO


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runner_discovers_benchmarks():
    runner = _load("run")
    assert {"cluster_start", "live_view", "spark_pipeline", "metrics_exporter", "producer_throughput"} <= \
        set(runner.discover())
    with pytest.raises(SystemExit):
        runner.main(["no_such_benchmark"])


@pytest.mark.integration
def test_cluster_start_benchmark_reports_every_measurement(tmp_path: Path):
    out = tmp_path / "cluster_start.json"
    code = _load("cluster_start").main(["--profiles", "single-broker", "--runs", "1", "--json", str(out),
                                        "--no-fail"])
    assert code == 0
    report = json.loads(out.read_text())
    run = report["profiles"]["single-broker"]["runs"][0]
    assert 0 < run["ready_s"] <= run["first_ack_s"] < 120
    assert 50 < run["rss_mb_max"] < 4096, "the sampler saw the broker JVM"
    assert 30 < run["pss_mb_cluster"] <= run["rss_mb_max"] + 1, "PSS counts shared pages once: never above RSS"
    assert set(report["profiles"]["single-broker"]["summary"]) >= {"ready_s", "first_ack_s", "rss_mb_max",
                                                                   "pss_mb_cluster"}


@pytest.mark.integration
@pytest.mark.slow
def test_spark_pipeline_benchmark_smoke(tmp_path: Path, jvm_pids):
    out = tmp_path / "spark_pipeline.json"
    code = _load("spark_pipeline").main(["--quick", "--profile", "single-broker", "--probes", "2",
                                         "--events", "2000", "--json", str(out)])
    assert code == 0, "every probe arrived, every event was processed, no JVM was left"
    report = json.loads(out.read_text())
    run = report["runs"][0]
    assert 0 < run["session_start_s"] < 300
    assert run["leftover_jvms"] == [] and jvm_pids(run["marker"]) == []
    for trigger in ("default", "1s"):
        latencies = [p["latency_ms"] for p in run["latency"][trigger]["probes"]]
        assert len(latencies) == 2 and all(0 < ms < 60_000 for ms in latencies)
    assert [t["rows"] for t in run["throughput"]] == [2000, 2000]
    assert run["throughput"][1]["batches"] >= 4, "maxOffsetsPerTrigger split the events into batches"
    assert all(t["output_rows"] > 0 and t["wall_rows_per_s"] > 0 for t in run["throughput"])
    summary = report["summary"]
    assert summary["latency"]["default"]["median_ms"] > 0 and set(summary["throughput"]) == {"unset", "500"}


@pytest.mark.integration
def test_producer_throughput_benchmark_reports_both_clients(tmp_path: Path):
    out = tmp_path / "producer_throughput.json"
    code = _load("producer_throughput").main(["--runs", "1", "--records", "5000", "--setups", "defaults",
                                              "--json", str(out), "--no-fail"])
    assert code == 0
    summary = json.loads(out.read_text())["setups"]["defaults"]["summary"]
    assert summary["java_median"] > 0 and summary["python_median"] > 0
    assert summary["ratio"] == pytest.approx(summary["python_median"] / summary["java_median"])
