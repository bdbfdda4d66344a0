"""Shared by the consumer exercises' checks: run learner code in a forked process, SIGKILL it, restart it."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Callable


def make_records(cluster, topic: str, count: int, value: Callable[[int], bytes]) -> None:
    producer = cluster.producer(enable_idempotence=True)
    for i in range(count):
        producer.produce(topic, key=str(i % 13), value=value(i))
        producer.poll(0)
    producer.flush(30)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def crash_and_restart(target: Callable[[], None], progress: Callable[[], int], total: int, crashes: int = 2,
                      rng: random.Random | None = None, finish_timeout: float = 120.0) -> None:
    """Run ``target`` in a forked process; SIGKILL it at random points ``crashes`` times, then let one run finish.

    ``progress()`` says how far the work got; ``target`` must return when there is nothing left to do.
    """
    rng = rng or random.Random()
    ctx = multiprocessing.get_context("fork")
    for _ in range(crashes):
        proc = ctx.Process(target=target, daemon=True)
        proc.start()
        start = progress()
        goal = start + rng.randint(20, max(21, (total - start) // 3))
        deadline = time.monotonic() + 60
        while progress() < goal and proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not proc.is_alive():
            raise AssertionError(f"the consumer loop ended by itself (exit code {proc.exitcode}) before the crash")
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
    last = ctx.Process(target=target, daemon=True)
    last.start()
    last.join(finish_timeout)
    if last.is_alive():
        os.kill(last.pid, signal.SIGKILL)
        raise AssertionError(f"the restarted consumer did not finish within {finish_timeout:.0f} s")


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"
