"""When something runs out or a client fails in a learner's cell, the lab says so in one readable paragraph."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from confluent_kafka import KafkaError, KafkaException

from labkit.errors import WaitTimeout, kafka_error_paragraph
from labkit.runtime.processes import STOPPED, ManagedProcess, cpu_seconds, thread_states
from labkit import waiting
from labkit.waiting import Wait


def test_a_wait_that_runs_out_says_what_it_saw_how_busy_the_machine_was_and_what_to_try():
    seen = iter(range(100))
    with pytest.raises(WaitTimeout) as raised:
        Wait("the answer", timeout=0.2, interval=0.05, evidence=lambda: "broker 2: no answer").until(
            lambda: next(seen) > 1000)
    text = str(raised.value)
    first, evidence = text.split("\n", 1)
    assert first.startswith("Timed out after 0 s waiting for the answer (last seen: False).")
    assert "load average was" in first and "cores" in first and "Run the cell again" in first
    assert evidence == "broker 2: no answer"


def test_a_stretched_wait_gives_a_busy_machine_the_time_a_quiet_one_would_take(monkeypatch):
    """A broker starting is this machine's CPU work: its wait counts a quiet machine's seconds (stretch=True).
    Any other wait counts wall seconds, however busy the machine."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (20.0, 20.0, 20.0))  # a tenth of a core for each runnable process
    monkeypatch.setattr(waiting, "cpu_stalled_seconds", time.monotonic)  # and some task waits for a CPU all the time
    with pytest.raises(WaitTimeout) as raised:
        Wait("the broker", timeout=0.2, interval=0.05).until(lambda: False)
    assert str(raised.value).startswith("Timed out after 0 s waiting for the broker (last seen: False)."), \
        "wall seconds: nothing stretched, and nothing to say about it"
    ready_at = time.monotonic() + 1.0
    assert Wait("the broker", timeout=0.2, interval=0.05, stretch=True).until(lambda: time.monotonic() >= ready_at), \
        "0.2 s of a quiet machine last 2 wall seconds here"
    with pytest.raises(WaitTimeout) as raised:
        Wait("the broker", timeout=0.2, interval=0.05, stretch=True).until(lambda: False)
    assert time.monotonic() - ready_at >= 1.8
    assert re.match(r"Timed out after 0 s \(\d+ s of wall time: the machine was busy\) waiting for the broker "
                    r"\(last seen: False\)\.", str(raised.value))


def test_a_kafka_error_is_one_paragraph_with_what_it_usually_means():
    text = kafka_error_paragraph(KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "Local: Message timed out")),
                                 "line 3 of the cell: producer.flush()")
    assert text.startswith("Kafka said _MSG_TIMED_OUT: Local: Message timed out (line 3 of the cell:")
    assert "message.timeout.ms" in text and "load average" in text and "\n" not in text


@pytest.mark.notebook
def test_a_notebook_cell_shows_a_kafka_error_as_that_paragraph_not_a_trace():
    from nbclient import NotebookClient

    from labkit.runtime.kernels import IOPUB_TIMEOUT

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import labkit\nlabkit.setup_check();"),
                nbformat.v4.new_code_cell("from confluent_kafka import KafkaError, KafkaException\n"
                                          "raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))")]
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120, iopub_timeout=IOPUB_TIMEOUT).execute()
    (error,) = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert len(error.traceback) == 1 and "Kafka said UNKNOWN_TOPIC_OR_PART" in error.traceback[0]
    assert "line 2 of the cell" in error.traceback[0] and "cluster.create_topic" in error.traceback[0]


def test_pause_returns_once_every_thread_is_stopped(tmp_path: Path):
    """SIGSTOP is only pending when kill() returns; pause() waits until the scheduler stopped every thread."""
    code = "import threading, time\n[threading.Thread(target=time.sleep, args=(60,)).start() for _ in range(8)]\n" \
           "print('up', flush=True)\ntime.sleep(60)"
    proc = ManagedProcess("sleeper", [sys.executable, "-c", code], tmp_path / "sleeper.log")
    proc.start()
    try:
        Wait("the threads", timeout=20).until(lambda: "up" in (tmp_path / "sleeper.log").read_text())
        assert not thread_states(proc.pid) & STOPPED
        proc.pause()
        states = thread_states(proc.pid)
        assert states and states <= STOPPED, f"pause() returned with threads in states {states}"
        proc.resume()
        assert not thread_states(proc.pid) & STOPPED
    finally:
        proc.kill()


def test_a_process_cpu_seconds_count_what_it_reaped_and_none_once_it_is_gone():
    """processes.cpu_seconds, the one reader of a process's CPU time (the tests' cpu_s, the classroom benchmark)."""
    import subprocess

    # the child burns 0.5 CPU-s by its own clock, however fast the machine, then its parent reaps it
    burn = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    parent = (f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}]); "
              "print('reaped', flush=True); input()")
    proc = subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"reaped\n"
        assert cpu_seconds(proc.pid) > 0.45, "the busy child's CPU counts in the parent that reaped it (in clock ticks)"
    finally:
        proc.communicate(b"\n", timeout=30)
    assert cpu_seconds(proc.pid) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_deadline_counts_a_quiet_machines_seconds():
    from labkit.waiting import MAX_STRETCH, Deadline

    clock = _Clock()
    quiet = Deadline(60, clock=clock, share=lambda: 1.0)
    clock.now += 59.5
    assert not quiet.expired() and quiet.wait_time(1.0) == pytest.approx(0.5)
    clock.now += 0.5
    assert quiet.expired() and str(quiet) == "60 s"

    share = [0.25]  # a load average four times the cores: four wall seconds count for one
    clock = _Clock()
    busy = Deadline(60, clock=clock, share=lambda: share[0])
    clock.now += 200
    assert not busy.expired(), "200 wall seconds on a machine this busy are 50 of a quiet one's"
    assert busy.elapsed() == pytest.approx(50.0)
    assert busy.wait_time(100.0) == pytest.approx(40.0)
    share[0] = 1.0  # the load went away: the remaining 10 s run at full speed
    clock.now += 10
    assert busy.expired()
    assert str(busy) == "60 s (210 s of wall time: the machine was busy)"
    assert MAX_STRETCH == 10.0


def test_the_tests_own_commands_run_within_a_quiet_machines_seconds():
    """conftest.run_patiently: subprocess.run's answer, and its TimeoutExpired (the command killed) on the deadline."""
    import subprocess

    from conftest import run_patiently

    done = run_patiently([sys.executable, "-c", "print('hi')"], 30, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "hi\n")
    with pytest.raises(subprocess.CalledProcessError):
        run_patiently([sys.executable, "-c", "raise SystemExit(3)"], 30, check=True)
    marker = f"sleeping-{os.getpid()}-{time.monotonic_ns()}"
    with pytest.raises(subprocess.TimeoutExpired):
        run_patiently([sys.executable, "-c", "import time; time.sleep(3600)", marker], 1)  # else: a hang
    import psutil

    assert not [q for q in psutil.process_iter(["cmdline"]) if marker in (q.info["cmdline"] or [])], "left running"


def test_the_share_counts_the_cpu_pressure_over_the_interval_and_is_never_below_the_load_estimate(tmp_path):
    """A quarter-idle machine with a load of twenty: the load says a tenth of a core, the pressure proves more."""
    from labkit.waiting import MachineShare, cpu_stalled_seconds

    clock, stalled, estimate = _Clock(), [50.0], [0.1]
    share = MachineShare(clock, stalled=lambda: stalled[0], estimate=lambda: estimate[0])
    clock.now += 10
    stalled[0] += 6.0  # some task waited for a CPU during 6 of the 10 seconds
    assert share() == pytest.approx(0.4)
    clock.now += 10
    stalled[0] += 10.0  # every moment: the pressure proves nothing, the load's estimate stands
    assert share() == pytest.approx(0.1)
    estimate[0] = 0.5
    clock.now += 10
    stalled[0] += 1.0
    assert share() == pytest.approx(0.9)
    clock.now += 10
    stalled[0] += 10.0
    assert share() == pytest.approx(0.5), "never below the load's estimate"
    stalled[0] = None
    clock.now += 10
    assert share() == pytest.approx(0.5), "no pressure reading: the estimate"

    pressure = tmp_path / "cpu"
    pressure.write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert cpu_stalled_seconds(str(pressure)) == pytest.approx(2.5)
    assert cpu_stalled_seconds(str(tmp_path / "absent")) is None


def test_the_machine_share_is_the_cores_over_the_load_and_never_less_than_a_tenth(monkeypatch):
    import os

    from labkit.waiting import machine_share

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for load, share in ((0.5, 1.0), (2.0, 1.0), (8.0, 0.25), (50.0, 0.1)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert machine_share() == pytest.approx(share)

    def no_load_average():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", no_load_average)
    assert machine_share() == 1.0
