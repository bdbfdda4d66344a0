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
    assert "cluster_start" in runner.discover()
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
    assert set(report["profiles"]["single-broker"]["summary"]) >= {"ready_s", "first_ack_s", "rss_mb_max"}
