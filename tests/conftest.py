"""Shared fixtures: one real three-broker cluster per test session for integration tests (under pytest-xdist,
the tests that use it run in one worker: see ``_shared_group``).

Tests that break brokers on purpose start their own cluster (``fresh_cluster``)
so the shared one stays healthy. Names carry a unique suffix so tests never collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Optional

import pytest
from _pytest.junitxml import xml_key

REPO = Path(__file__).resolve().parent.parent
#: pytest's bound on a test that grades a notebook for real: a backstop for a grader that hangs. It sits above the
#: grader's own bounds (on learner code, on its drills), which count a quiet machine's seconds
#: (labkit.waiting.Deadline) and so last up to ten times longer on a busy machine -- make test's workers make it one.
#: Tests that run a subprocess under run_patiently with a bound near pyproject's 600-s default use it too.
GRADING_TIMEOUT = 1800
OUTPUT = REPO / "test-output"
#: Lessons executed in a real browser (test_browser.py) instead of papermill, and the text each must show
#: rendered (a prediction's widget, the metrics panel); an empty tuple: plotly figures only.
BROWSER_LESSONS = {"00_welcome": ("Predict:",), "02_keys_and_murmur2": ("Predict:",),
                   "07_spark_structured_streaming": ("Predict:",), "11_operations_and_performance": ("Predict:", "ISR shrinks / expands"),
                   "12_kafka_streams": ("Predict:", "-repartition"), "14_share_groups": ("Predict:",)}

#: The browser tests' Chromium (Debian's, driven by Playwright), how it is started, and the notebook on screen
#: (JupyterLab keeps other documents in the DOM, hidden).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def run_patiently(args, seconds: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(args, timeout=seconds, **kwargs)`` with ``seconds`` a quiet machine's
    (:class:`labkit.waiting.Deadline`): a command starved by a busy machine is not a command that hangs. On the
    deadline, or anything else that stops the wait (pytest's own backstop), the command is killed, as
    ``subprocess.run`` kills it; the deadline's end raises ``subprocess.TimeoutExpired`` with its wall seconds."""
    from labkit.waiting import Deadline

    check = kwargs.pop("check", False)
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    deadline = Deadline(seconds)
    with subprocess.Popen(args, **kwargs) as proc:
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=max(1.0, deadline.wait_time(30.0)))
                    break
                except subprocess.TimeoutExpired:
                    if deadline.expired():
                        proc.kill()
                        out, err = proc.communicate()
                        raise subprocess.TimeoutExpired(args, round(deadline.wall), out, err) from None
        except BaseException:
            proc.kill()
            raise
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


#: pytest's bound on a browser test: a backstop for one that hangs, above the waits inside it, which count a quiet
#: machine's seconds (:func:`patiently`) and so stretch on a busy one (CI of 4973203: load average 36 on two cores).
BROWSER_TIMEOUT = 2700


def patiently(wait, seconds, *args, **kwargs):
    """``wait(*args, timeout=..., **kwargs)`` -- a Playwright wait: for a selector, a function, a load state -- given
    ``seconds`` of a quiet machine (:class:`labkit.waiting.Deadline`; or a ``Deadline`` already running), not of
    the wall. Playwright counts wall
    milliseconds, and a page that a busy machine starves (its renderer, JupyterLab's server, Playwright's own
    driver) is not a page that hangs: CI of 4973203 lost three browser tests at a load average of 36 on two
    cores. The wait is given again, 20 wall seconds at a time at most, until it returns or the deadline runs
    out; then Playwright's error is raised, saying how far the machine stretched it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from labkit.waiting import Deadline

    deadline = seconds if isinstance(seconds, Deadline) else Deadline(seconds)
    while True:
        try:
            return wait(*args, timeout=round(max(1.0, deadline.wait_time(20.0)) * 1000), **kwargs)
        except PlaywrightTimeout as exc:
            if deadline.expired():
                raise PlaywrightTimeout(f"after {deadline}: {exc.message}") from None


def goto(page, url: str, seconds: float = 120.0) -> None:
    """``page.goto(url)`` until the page has loaded, both steps within one ``seconds`` of a quiet machine
    (:func:`patiently`): asked for again while nothing of it has come (not even the server's first answer), then
    waited on."""
    from labkit.waiting import Deadline

    deadline = Deadline(seconds)
    patiently(page.goto, deadline, url, wait_until="commit")
    patiently(page.wait_for_load_state, deadline, "load")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, one per browser test module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def cluster(kafka_cluster):
    """The session's three-broker cluster: the ``kafka_cluster`` fixture of labkit's pytest plugin
    (labkit/testing/plugin.py, the same one learners use in their own projects)."""
    return kafka_cluster


@pytest.fixture
def fresh_cluster(request):
    """A private cluster for a test that kills, pauses or restarts brokers, started the plugin's way.

    Parametrize indirectly with a profile name, default three-brokers.
    """
    from labkit.testing.plugin import started

    with started(getattr(request, "param", "three-brokers")) as c:
        yield c


@pytest.fixture
def unique():
    """unique("orders") -> "orders-1a2b3c4d": topic and group names that never collide."""
    suffix = uuid.uuid4().hex[:8]
    return lambda name: f"{name}-{suffix}"


@pytest.fixture(scope="session")
def output_dir() -> Path:
    OUTPUT.mkdir(exist_ok=True)
    return OUTPUT


class ClusterElsewhere:
    """A cluster labkit did not start (a grader's, reached by address): no data dir, its brokers are not ours;
    its stop hooks run when it stops, as a real cluster's do."""

    def __init__(self, bootstrap: str = "127.0.0.1:9") -> None:
        self.bootstrap = bootstrap
        self.hooks: list = []

    def client_config(self, **config):
        return {"bootstrap.servers": self.bootstrap, **config}

    def on_stop(self, hook, first=False):
        if first:
            self.hooks.insert(0, hook)
        else:
            self.hooks.append(hook)

    def stop(self):
        hooks, self.hooks = self.hooks, []
        for hook in hooks:
            hook()


def java_pids_of(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if marker in cmdline and "java" in cmdline and "State:\tZ" not in status:
            pids.append(int(entry.name))
    return pids


def assert_no_jvm_left(marker: str, what: str) -> None:
    """Wait until no JVM whose command line contains ``marker`` runs: the kernel's watchdog kills its JVMs as the
    kernel exits, a moment (longer on a loaded machine). Fails naming each one left: its state and command."""
    from labkit.errors import WaitTimeout
    from labkit.waiting import Wait

    try:
        Wait(f"{what}'s JVMs to go", timeout=30, interval=0.25).until(lambda: not java_pids_of(marker))
    except WaitTimeout:
        raise AssertionError(f"a JVM outlived {what}'s kernel: {_described(java_pids_of(marker))}") from None


def _described(pids: list[int]) -> str:
    out = []
    for pid in pids:
        try:
            state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                         if line.startswith("State:"))
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, StopIteration):
            continue
        out.append(f"{pid} ({state.split(None, 1)[1]}): {cmd[:160]} ... {cmd[-160:]}")
    return "; ".join(out) or "gone as the check ended"


@pytest.fixture
def jvm_pids():
    return java_pids_of


_SCRATCH: list[Path] = []


def pytest_configure(config):
    import tempfile

    # The learner's record (predictions, lessons done) goes to a scratch dir, never the real one; and every
    # process that runs tests (each pytest-xdist worker too) keeps its clusters' directories in one of its own,
    # so a test that looks for leftovers never sees another worker's live cluster. pytest-xdist's controller runs
    # no test and makes none: its workers would inherit its directories through the environment.
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    for name in ("LABKIT_STATE_DIR", "LABKIT_DATA_DIR"):
        if not os.environ.get(name):
            scratch = Path(tempfile.mkdtemp(prefix=f"labkit-test-{name[7:].lower()}-"))
            _SCRATCH.append(scratch)
            os.environ[name] = str(scratch)


def pytest_unconfigure(config):
    import shutil

    for scratch in _SCRATCH:
        shutil.rmtree(scratch, ignore_errors=True)


def _shared_group(item) -> str | None:
    """The worker group of a test that shares a costly fixture, so that under pytest-xdist the fixture starts once:
    every test on the session cluster (Spark's session rides on it) in one group, and the tests of a module that
    share a module-scoped fixture (a secured cluster, a Connect worker, JupyterLab and Chromium) in one per module.
    Spread over four workers, each would start its own copy, and a session cluster idles for the whole run."""
    if "kafka_cluster" in item.fixturenames:  # the plugin's session cluster, through `cluster` or its other fixtures
        return "session-cluster"
    defs = item._fixtureinfo.name2fixturedefs
    if any(defs[name][-1].scope == "module" for name in item.fixturenames if defs.get(name)):
        return item.nodeid.split("::")[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # With workers (make test: pytest-xdist, --dist loadgroup) the groups above go first, biggest first (xdist's
    # order), then one test at a time, longest first, so none is left running alone at the end: the lessons,
    # the exercises' gradings, the other integration tests, the unit tests. In one process, the reverse:
    # cluster-free tests first, fast feedback before the slow ones. (A worker has ``workerinput``, not ``-n``.)
    workers = hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))
    if workers:
        for item in items:
            group = _shared_group(item)
            if group:
                item.add_marker(pytest.mark.xdist_group(group))

    def rank(item):
        if item.get_closest_marker("browser"):
            tier = 4
        elif item.get_closest_marker("notebook"):
            tier = 3 if item.nodeid.startswith("tests/test_notebooks.py") else 2
        elif item.get_closest_marker("integration"):
            tier = 1
        else:
            tier = 0
        return -tier if workers else tier

    items.sort(key=rank)
    users = [item for item in items if "kafka_cluster" in item.fixturenames]  # items: xdist renames them later
    config.stash[_LAST_ON_SESSION_CLUSTER] = users[-1] if users else None
    os.environ.setdefault("LABKIT_TEST", "1")


#: The last test, in this process's order, on the session cluster. Under pytest-xdist one worker runs them all, in
#: that order, and then goes on to other tests for the rest of the run: a session fixture would keep three idle
#: brokers going until the end (fresh clone 13: the group's tests were done 7 minutes into a 32-minute run, and the
#: idle cluster burnt ~0.09 CPU-s a second, ~130 CPU-s, beside the tests).
_LAST_ON_SESSION_CLUSTER = pytest.StashKey[Optional[pytest.Item]]()


#: CPU seconds this process and its descendants had used when a test's setup began.
_CPU_AT_SETUP = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU seconds of this process, of the children it reaped, and of its live descendants (with what each of them
    reaped): a broker, kernel or JupyterLab that lives through several tests counts in each for what it used then."""
    from labkit.runtime.processes import cpu_seconds

    t = os.times()
    total, pending = t.user + t.system + t.children_user + t.children_system, _children(os.getpid())
    while pending:
        pid = pending.pop()
        total += cpu_seconds(pid) or 0.0  # gone meanwhile: its time went to whoever reaped it
        pending += _children(pid)
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")  # a child belongs to the thread that started it
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU_AT_SETUP] = _cpu_seconds()
    # when it started (Unix time) and in which worker: to see when the workers, and the two cores, were idle
    item.user_properties += [("started", round(time.time(), 1)), ("worker", os.environ.get("PYTEST_XDIST_WORKER", ""))]
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if item is item.config.stash.get(_LAST_ON_SESSION_CLUSTER, None):
        # The session cluster stops now, with what rides on it (the registry, `cluster`): its fixture's own
        # teardown. Should a later test still ask for it, pytest starts it again -- slower, never wrong.
        defs = item._fixtureinfo.name2fixturedefs.get("kafka_cluster")
        if defs:
            defs[-1].finish(item._request)
    # `make test` is CPU-bound on two cores: its wall time is the CPU its tests use, shared out. Each test's CPU
    # seconds (from its setup to its teardown: this process and every process under it -- brokers, kernels, JVMs,
    # JupyterLab, Chromium) go to test-output/junit.xml beside its time, as the property cpu_s. A process that
    # lives through several tests (the session cluster, a module's JupyterLab) counts in each for its share.
    if _CPU_AT_SETUP in item.stash:
        item.user_properties.append(("cpu_s", round(_cpu_seconds() - item.stash[_CPU_AT_SETUP], 2)))


#: Test id -> its CPU seconds, as reported (under pytest-xdist: the workers' reports, in the controller).
_CPU_BY_TEST: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if report.when == "teardown":
        for name, value in report.user_properties:
            if name == "cpu_s":
                _CPU_BY_TEST[report.nodeid] = float(value)


#: The host's speed when the run began (CPU seconds of a fixed pure-Python loop) and the load average then.
_HOST = pytest.StashKey[tuple[float, str]]()


def _loop_cpu_seconds() -> float:
    """CPU seconds a fixed pure-Python loop takes here, the least of five tries (one try varies by ~15 %)."""
    best = float("inf")
    for _ in range(5):
        start, total = time.process_time(), 0
        for i in range(3_000_000):
            total += i * i
        best = min(best, time.process_time() - start)
    return best


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def pytest_sessionstart(session):
    # How fast this host is, before any test runs (pytest-xdist starts its workers after this hook): the same
    # tests used 1.65 times the CPU on 2026-11-30's host as on the day before's (README, "Tests"), so a run's minutes
    # compare only with runs on a host as fast. In junit.xml as properties of the run. Not in a worker.
    # Only a run that records it (junit.xml) or prints it (--durations) pays the loop's ~0.7 CPU-s.
    config = session.config
    xml = config.stash.get(xml_key, None)
    if hasattr(config, "workerinput") or (xml is None and not getattr(config.option, "durations", None)):
        return
    loop, load = _loop_cpu_seconds(), _load()
    config.stash[_HOST] = (loop, load)
    if xml is not None:
        xml.add_global_property("host_loop_cpu_s", round(loop, 3))
        xml.add_global_property("load_at_start", load)


def pytest_terminal_summary(terminalreporter, config):
    # Beside --durations (make test asks for 30), the tests that used the most CPU, the run's total, and the
    # host's speed.
    count = getattr(config.option, "durations", None)
    if not count or not _CPU_BY_TEST:
        return
    if _HOST in config.stash:
        loop, load = config.stash[_HOST]
        terminalreporter.write_line(f"this host: a 3,000,000-step Python loop took {loop:.3f} CPU-s (the least of 5); "
                                    f"load average {load} at the start, {_load()} at the end")
    terminalreporter.write_sep("=", f"most CPU: {count} of {len(_CPU_BY_TEST)} tests, "
                                    f"{sum(_CPU_BY_TEST.values()):,.0f} CPU-s in all (junit.xml: cpu_s)")
    for nodeid, cpu in sorted(_CPU_BY_TEST.items(), key=lambda kv: -kv[1])[:count]:
        terminalreporter.write_line(f"{cpu:7.1f}s cpu  {nodeid}")
