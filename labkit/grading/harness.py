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

from ..waiting import Wait


def unique(name: str) -> str:
    """``name`` with a random suffix: topics and groups of one grading never meet another's."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def make_records(cluster: Any, topic: str, count: int, value: Callable[[int], bytes]) -> None:
    """Produce ``count`` records (keys ``i % 13``) idempotently and wait for every acknowledgement."""
    producer = cluster.producer(enable_idempotence=True)
    for i in range(count):
        producer.produce(topic, key=str(i % 13), value=value(i))
        producer.poll(0)
    assert producer.flush(30) == 0, "the grader's own records were not all acknowledged"


def lines(path: Path | str) -> list[str]:
    path = Path(path)
    return path.read_text().splitlines() if path.exists() else []


def forked(body: Callable[[], None]) -> int:
    """Run ``body()`` in a child forked from this process; returns its pid at once (inside a task).

    The child exits 0 when ``body`` returns, 1 when it raises (the traceback goes to
    ``<pid>.error`` in the current directory's ``.labkit-harness/``), and never runs
    anything of its parent's after that.
    """
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        body()
    except BaseException:  # noqa: BLE001 - the child must end here whatever happens
        import traceback

        code = 1
        where = Path(".labkit-harness")
        where.mkdir(exist_ok=True)
        (where / f"{os.getpid()}.error").write_text(traceback.format_exc())
    finally:
        os._exit(code)


def reap(user: Any, pid: int) -> Optional[int]:
    """A task: the exit status of ``pid`` (a child of the kernel) if it has ended, else None."""
    import os as _os

    try:
        done, status = _os.waitpid(pid, _os.WNOHANG)
    except ChildProcessError:
        return -1
    if not done:
        return None
    return _os.waitstatus_to_exitcode(status)


def kill(ns: Any, pid: int) -> None:
    """SIGKILL a forked child (as a crash would) and let the kernel reap it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    Wait(f"process {pid} to be reaped", timeout=10, interval=0.05).until(lambda: ns.run(reap, pid) is not None)


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
        deadline = time.monotonic() + 60
        while progress() < goal and ns.run(reap, pid) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        status = ns.run(reap, pid)
        if status is not None:
            raise AssertionError(f"the work ended by itself (exit code {status}) before the crash")
        kill(ns, pid)
    pid = ns.run(start, *args)

    def ended() -> Optional[tuple[int]]:
        code = ns.run(reap, pid)
        return None if code is None else (code,)

    try:
        status = Wait("the restarted work to finish", timeout=finish_timeout, interval=0.2).until(ended)[0]
    except Exception:
        kill(ns, pid)
        raise AssertionError(f"the restarted work did not finish within {finish_timeout:.0f} s") from None
    if status != 0:
        raise AssertionError(f"the restarted work failed (exit code {status})")
