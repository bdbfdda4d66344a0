"""No broker outlives the Python process that started it, whatever happens to that process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ClusterElsewhere, run_patiently

from labkit.runtime.processes import start_ticks
from labkit.waiting import Wait

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent("""
    import sys, time, labkit
    c = labkit.start_cluster(sys.argv[1], progress=False)
    {after_start}
    print(c.data_dir, flush=True)
    time.sleep(600)
""")


def start_child(profile: str, after_start: str = "") -> tuple[subprocess.Popen, Path]:
    code = CHILD.format(after_start=after_start)
    proc = subprocess.Popen([sys.executable, "-c", code, profile], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    assert line, "the child did not start its cluster"
    return proc, Path(line)


def kill_owner(proc: subprocess.Popen, data_dir: Path, what: str) -> None:
    """SIGKILL the child that started a cluster; everything it started must die and its directory go."""
    from conftest import java_pids_of

    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    Wait(f"{what}'s JVMs to die after their owner was SIGKILLed", timeout=20, interval=0.2).until(
        lambda: java_pids_of(str(data_dir)) == [])
    Wait(f"{what}'s data dir to be removed", timeout=10).until(lambda: not data_dir.exists())


@pytest.mark.parametrize("profile,after_start", [
    ("three-brokers", ""),
    ("single-broker", "c.pause_broker(1)"),  # a paused (SIGSTOPped) broker must die too
])
def test_sigkill_of_the_owner_leaves_no_broker(profile, after_start, jvm_pids):
    proc, data_dir = start_child(profile, after_start)
    marker = str(data_dir)
    expected = 3 if profile == "three-brokers" else 1
    assert len(jvm_pids(marker)) == expected
    kill_owner(proc, data_dir, "the cluster")


def test_normal_exit_without_stop_cleans_up(jvm_pids):
    code = "import labkit; c = labkit.start_cluster('single-broker', progress=False); print(c.data_dir, flush=True)"
    out = run_patiently([sys.executable, "-c", code], 120, capture_output=True, text=True)
    data_dir = out.stdout.strip()
    assert data_dir, out.stderr
    assert jvm_pids(data_dir) == []
    assert not Path(data_dir).exists()


@pytest.mark.parametrize("ours", [True, False])
def test_pid_reuse_guard_in_watchdog(tmp_path, ours):
    """The watchdog kills a watched process only while its pid still names the process it was told about
    (same start time): a pid reused by another process after ours ended is left alone."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ticks = start_ticks(victim.pid) if ours else str(int(start_ticks(victim.pid)) - 1)
    watchdog = subprocess.Popen([sys.executable, "-S", str(Path(__file__).parents[1] / "labkit" / "runtime" / "watchdog.py")],
                                stdin=subprocess.PIPE, text=True)
    watchdog.stdin.write(f"watch {victim.pid} {ticks}\ncleanup {tmp_path / 'gone'}\n")
    (tmp_path / "gone").mkdir()
    watchdog.stdin.close()  # the "parent" dies
    watchdog.wait(timeout=15)
    try:
        if ours:
            assert victim.wait(10) == -9
        else:
            assert victim.poll() is None  # not ours: left alone
        assert not (tmp_path / "gone").exists()
    finally:
        victim.kill()
        victim.wait()


def test_a_cluster_started_on_use_starts_nothing_until_a_cell_uses_it(monkeypatch, tmp_path, jvm_pids):
    """What the grader's kernel gets (LABKIT_CLUSTER_ON_USE): the notebook's own cluster costs nothing unused."""
    import labkit

    monkeypatch.setenv("LABKIT_CLUSTER_ON_USE", "1")
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path))
    unused = labkit.start_cluster("single-broker", progress=False)
    assert "starts when a cell first uses it" in repr(unused)
    unused.stop()
    assert jvm_pids(str(tmp_path)) == [] and list(tmp_path.iterdir()) == []

    cluster = labkit.start_cluster("single-broker", progress=False)
    assert list(tmp_path.iterdir()) == []
    topic = cluster.create_topic("on-first-use", partitions=2)  # the first use starts it, then does the work
    assert [p.partition for p in cluster.describe_topic(topic)] == [0, 1]
    assert len(jvm_pids(str(cluster.data_dir))) == 1 and f"{cluster.brokers[0].id}@" in repr(cluster)
    cluster.label = "mine"  # attributes are the real cluster's
    assert cluster.label == "mine"
    cluster.stop()
    assert jvm_pids(str(tmp_path)) == []


def test_what_the_lab_writes_beside_a_cluster_goes_with_it():
    """A broker's temp files (lz4's native library, unpacked when it first reads an lz4 batch) and a group's
    member logs are in the cluster's directory: a SIGKILLed broker cannot delete its own, and /tmp would keep
    one of each per broker or group ever started."""
    after = textwrap.dedent("""
        from labkit import workloads
        t = c.create_topic("squeezed", partitions=1)
        p = c.producer(compression_type="lz4"); p.produce(t, b"x" * 1000); p.flush(30)
        print(workloads.Group(c, t, "g").workdir, flush=True)
    """).replace("\n", "; ").strip("; ")
    proc, group_dir = start_child("single-broker", after)
    data_dir = Path(proc.stdout.readline().strip())
    try:
        assert group_dir.is_relative_to(data_dir) and group_dir.is_dir()
        Wait("the broker to unpack lz4's native library", timeout=30).until(
            lambda: list((data_dir / "tmp").glob("liblz4-java-*")))
    finally:
        kill_owner(proc, data_dir, "the cluster")


def test_scratch_beside_a_cluster_labkit_does_not_own_goes_when_it_stops():
    from labkit.runtime.processes import scratch_dir

    cluster = ClusterElsewhere()
    path = scratch_dir(cluster, "plan-")
    assert path.is_dir() and path.name.startswith("plan-")
    cluster.stop()
    assert not path.exists() and not path.parent.parent.exists()
    # used again after it stopped (a grader's checks after the notebook's own cluster.stop()): a new supervisor,
    # with a watchdog, and the directory goes with the next stop -- not the stopped one's root made again
    again = scratch_dir(cluster, "plan-")
    assert again.is_dir() and not again.is_relative_to(path.parent.parent) and len(cluster.hooks) == 1
    cluster.stop()
    assert not again.exists() and not again.parent.parent.exists()


def test_scratch_beside_a_cluster_labkit_does_not_own_goes_when_its_owner_is_killed():
    """A grader's kernel never stops the cluster it was handed: its reassignment plans and group files go
    with the kernel, killed or not."""
    code = textwrap.dedent("""
        import time, types
        from labkit.runtime.processes import scratch_dir
        print(scratch_dir(types.SimpleNamespace(on_stop=lambda hook: None), "plan-"), flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    path = Path(proc.stdout.readline().strip())
    assert path.is_dir() and path.name.startswith("plan-")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    Wait("the watchdog to remove the scratch directory's root", timeout=10).until(
        lambda: not path.parent.parent.exists())
