"""What checks of the process-heavy exercises share: records to work on, and learner code run in a
process the grader can kill at a random point and start again.

The learner's code runs where their functions are -- in their kernel -- but in a child
forked from it (:func:`forked`, called inside a task), so the grader can SIGKILL it
mid-batch, like a crash, without touching the kernel. The grader watches progress
from the outside (a log the process writes, the broker) and decides; nothing the
child says is taken for a verdict.

    pid = ns.run(start_loop, bootstrap, topic, group, log)    # a task that returns forked(...)
    crash_and_restart(ns, start_loop, (bootstrap, topic, group, log), progress=lambda: len(lines(log)), total=600)
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..waiting import Deadline


def unique(name: str) -> str:
    """``name`` with a random suffix: topics and groups of one grading never meet another's."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def make_records(cluster: Any, topic: str, count: int, value: Callable[[int], bytes]) -> None:
    """Produce ``count`` records (keys ``i % 13``) idempotently and wait for every acknowledgement."""
    producer = cluster.producer(enable_idempotence=True)
    for i in range(count):
        producer.produce(topic, key=str(i % 13), value=value(i))
        producer.poll(0)
    acknowledged(producer)


def acknowledged(producer: Any, what: str = "records", seconds: float = 30) -> None:
    """Wait until the broker has acknowledged everything the grader's own ``producer`` (``cluster.producer()``)
    holds: its ``flush`` gives up only after ``seconds`` in which nothing was acknowledged, so a slow broker on a
    busy machine is waited for. The learner's code plays no part in it: what is left is a
    :class:`~.checks.GraderFault`, never a failed check."""
    from .checks import GraderFault

    left = producer.flush(seconds)
    if left:
        raise GraderFault(f"the grader's own {what} were not all acknowledged within {seconds:.0f} s in which the "
                          f"broker acknowledged none ({left} still waiting)")


def lines(path: Path | str) -> list[str]:
    path = Path(path)
    return path.read_text().splitlines() if path.exists() else []


def _errors_dir() -> Path:
    """Where a forked child leaves its traceback: a scratch dir, never next to the learner's notebook."""
    import tempfile

    return Path(tempfile.gettempdir()) / "labkit-harness"


def forked(body: Callable[[], None]) -> int:
    """Run ``body()`` in a child forked from this process; returns its pid at once (inside a task).

    The child exits 0 when ``body`` returns, 1 when it raises (the traceback is kept for
    :func:`child_error`), and never runs anything of its parent's after that. The kernel's
    garbage is collected before the fork and frozen in the child: a Kafka client left in a
    reference cycle would otherwise be finalised in the child, where its destructor waits for
    threads a forked child does not have (and hangs it).
    """
    import gc

    gc.collect()
    pid = os.fork()
    if pid:
        return pid
    gc.freeze()
    code = 0
    try:
        body()
    except BaseException:  # noqa: BLE001 - the child must end here whatever happens
        import traceback

        code = 1
        where = _errors_dir()
        where.mkdir(exist_ok=True)
        (where / f"{os.getpid()}.error").write_text(traceback.format_exc())
    finally:
        os._exit(code)


def reap(user: Any, pid: int) -> Optional[int]:
    """A task: the exit status of ``pid`` (a child of the kernel) if it has ended, else None (-1: not ours)."""
    import os as _os

    try:
        done, status = _os.waitpid(pid, _os.WNOHANG)
    except ChildProcessError:
        return -1
    if not done:
        return None
    return _os.waitstatus_to_exitcode(status)


def child_error(user: Any, pid: int) -> str:
    """A task: the last line of the traceback a :func:`forked` child left, if any."""
    from labkit.grading.harness import _errors_dir

    path = _errors_dir() / f"{pid}.error"
    if not path.exists():
        return ""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def kill(ns: Any, pid: int, timeout: float = 15.0) -> None:
    """SIGKILL a forked child (as a crash would) and let the kernel reap it; one that ended already is only reaped:
    once reaped, its pid may be another process's (a broker's) at any moment."""
    if ns.run(reap, pid) is not None:
        return
    try:  # not reaped: the pid is still our child's, even if it has just ended
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = Deadline(timeout)
    while ns.run(reap, pid) is None:
        if deadline.expired():
            raise AssertionError(f"the grader could not reap the killed process {pid}")
        time.sleep(0.05)


def wait_for_exit(ns: Any, pid: int, timeout: float, what: str,
                  explain: Callable[[int], str] = lambda pid: "") -> None:
    """Wait until the forked child ``pid`` ends by itself; AssertionError when it fails or outlives ``timeout``
    seconds as a quiet machine counts them (a :class:`~labkit.waiting.Deadline`; it is killed then;
    ``explain(pid)`` may say where it was stuck)."""
    deadline = Deadline(timeout)
    while True:
        status = ns.run(reap, pid)
        if status is not None:
            break
        if deadline.expired():
            where = explain(pid)
            kill(ns, pid)
            raise AssertionError(f"{what} did not finish within {deadline}" + (f" ({where})" if where else ""))
        time.sleep(0.25)
    if status != 0:
        raise AssertionError(f"{what} failed (exit code {status}): {ns.run(child_error, pid) or 'no traceback'}")


def attempted(ns: Any, *names: str) -> None:
    """Raise NotImplementedError ("not attempted") while one of the learner's ``names`` still raises
    NotImplementedError in its definition -- read from its code, before a check starts anything costly."""
    import ast
    import textwrap

    from .checks import NotDefined

    for name in names:
        try:
            source = ns.source(name)
        except NotDefined:
            if ns.has(name):
                continue  # defined some other way (no def to read): attempted
            raise
        for node in ast.walk(ast.parse(textwrap.dedent(source))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                    raise NotImplementedError(f"`{name}` is not done yet")


def crash_and_restart(ns: Any, start: Callable[..., int], args: Sequence[Any], progress: Callable[[], int],
                      total: int, crashes: int = 2, rng: Optional[random.Random] = None,
                      finish_timeout: float = 120.0) -> None:
    """Start the learner's work with the task ``start(user, *args)`` (which returns a :func:`forked` pid),
    SIGKILL it at a random point ``crashes`` times, then let one run finish.

    ``progress()`` says how far the work got; the work must end by itself when nothing is left.
    """
    rng = rng or random.Random()
    for _ in range(crashes):
        pid = ns.run(start, *args)
        begun = progress()
        goal = begun + rng.randint(20, max(21, (total - begun) // 3))
        deadline = Deadline(60)
        while progress() < goal and ns.run(reap, pid) is None and not deadline.expired():
            time.sleep(0.02)
        status = ns.run(reap, pid)
        if status is not None:
            raise AssertionError(f"the work ended by itself (exit code {status}) before the crash")
        kill(ns, pid)
    wait_for_exit(ns, ns.run(start, *args), finish_timeout, "the restarted work")
