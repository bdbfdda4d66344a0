"""The labkit command: usage errors, doctor, the shared cluster, Kafka's tools."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_patiently
from labkit.app.cli import build_parser, main


def run(*args, env=None, timeout=180):
    return run_patiently([sys.executable, "-m", "labkit.app.cli", *args], timeout, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "labkit" in capsys.readouterr().out


def test_parser_knows_every_command():
    text = build_parser().format_help()
    for cmd in ("lab", "cluster", "kafka", "doctor", "grade", "setup"):
        assert cmd in text


def test_unknown_tool_is_a_one_line_error():
    out = run("kafka", "kafka-nosuch")
    assert out.returncode == 1
    assert out.stderr.startswith("labkit: Unknown Kafka tool") and "Traceback" not in out.stderr


def test_bad_set_is_a_usage_error(tmp_path):
    out = run("cluster", "up", "--set", "no-equals-sign", env={"LABKIT_STATE_DIR": str(tmp_path)})
    assert out.returncode == 1 and "KEY=VALUE" in out.stderr


def test_grade_takes_an_exercise_by_its_name(tmp_path, monkeypatch):
    """`labkit grade murmur2` grades the learner's copy from anywhere: the lab's terminal opens in notebooks/."""
    from labkit.grading.exercises import submission_path

    monkeypatch.setenv("LABKIT_LEARNER_DIR", str(tmp_path / "copies"))
    monkeypatch.chdir(tmp_path)
    assert submission_path("murmur2") == tmp_path / "copies" / "murmur2.ipynb"
    (tmp_path / "murmur2").mkdir()  # a class folder of that name wins: it is what the path says
    assert submission_path("murmur2") == Path("murmur2")
    out = run("grade", "no-such-exercise")
    assert out.returncode == 1 and out.stderr.startswith("labkit: No such notebook")


def test_doctor_reports_java_and_jars():
    out = run("doctor")
    assert "✓ Java" in out.stdout and "✓ Kafka jars" in out.stdout
    assert "✓ PySpark: 4.2.0 with the Kafka connector" in out.stdout
    assert out.returncode == 0  # Docker is optional


def test_doctor_says_when_the_spark_connector_is_missing(tmp_path):
    out = run("doctor", env={"LABKIT_CACHE_DIR": str(tmp_path)})
    assert "✗ PySpark: 4.2.0, but its Kafka connector is not in the cache" in out.stdout
    assert "make setup" in out.stdout and out.returncode != 0


@pytest.mark.integration
def test_shared_cluster_up_status_tools_down(tmp_path, jvm_pids):
    env = {"LABKIT_STATE_DIR": str(tmp_path)}
    up = run("cluster", "up", "--profile", "single-broker", env=env)
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "cluster.json").read_text())
    try:
        assert state["bootstrap_servers"] in up.stdout
        status = run("cluster", "status", env=env)
        assert status.returncode == 0 and "broker 1" in status.stdout and "up" in status.stdout
        created = run("kafka", "kafka-topics", "--create", "--topic", "cli-demo", "--partitions", "2", env=env)
        assert created.returncode == 0, created.stderr
        listed = run("kafka", "topics", "--list", env=env)  # "topics" is short for kafka-topics
        assert "cli-demo" in listed.stdout.split()
        again = run("cluster", "up", env=env)
        assert "already running" in again.stdout
    finally:
        down = run("cluster", "down", env=env)
    assert down.returncode == 0
    assert not (tmp_path / "cluster.json").exists()
    assert jvm_pids(state["data_dir"]) == []
    assert run("cluster", "status", env=env).returncode == 1
