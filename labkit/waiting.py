"""Waiting for things with a deadline, never with a bare sleep.

A :class:`Wait` polls a condition every ``interval`` seconds until it returns a
truthy value or ``timeout`` passes; on timeout it raises :class:`WaitTimeout`: one
paragraph with what it waited for, the last thing it saw, the machine's load (a
busy machine is the usual reason a wait runs out) and what to try, then whatever
evidence the caller can add.

A :class:`Deadline` is the bound on work that may hang (a learner's call the grader
made, a JVM starting): its seconds are a quiet machine's, so a busy machine gives
correct work the time it needs before it is judged hung. A :class:`Wait` counts them
so with ``stretch=True``: for what this machine's CPU does and only gets slower when
it is busy (a broker starting, every broker applying a change), never for a wait
whose running out is a grader's verdict on a wrong answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from .errors import WaitTimeout, load_average, machine_load

T = TypeVar("T")


@dataclass
class Wait:
    """Poll ``condition`` until it is truthy or ``timeout`` seconds have passed."""

    what: str
    timeout: float = 30.0
    interval: float = 0.2
    hint: str = ""
    #: Called on timeout; its text is attached to the error (process state, log tail).
    evidence: Optional[Callable[[], str]] = None
    #: Called on every poll; may raise to abort the wait early (e.g. a process died).
    check: Optional[Callable[[], None]] = None
    #: Count ``timeout`` in a quiet machine's seconds (a :class:`Deadline`) rather than wall seconds.
    stretch: bool = False

    def until(self, condition: Callable[[], T]) -> T:
        deadline = Deadline(self.timeout) if self.stretch else Deadline(self.timeout, share=_every_second)
        last: str = "nothing yet"
        while True:
            if self.check is not None:
                self.check()
            try:
                result = condition()
            except Exception as exc:  # noqa: BLE001 - the condition is allowed to fail while waiting
                result = None  # type: ignore[assignment]
                last = f"{type(exc).__name__}: {exc}"
            else:
                if result:
                    return result
                last = repr(result)
            if deadline.expired():
                took = str(deadline)  # before the evidence, which may take a while to gather
                extra = self.evidence() if self.evidence is not None else ""
                raise WaitTimeout(
                    f"Timed out after {took} waiting for {self.what} (last seen: {last}). "
                    f"{machine_load()}", self.hint or SLOW_HINT, evidence=extra)
            time.sleep(deadline.wait_time(self.interval))


#: What to try when a wait ran out and its caller had nothing more specific to say.
SLOW_HINT = ("Run the cell again; if it keeps happening, close other programs (or stop other notebooks' "
             "clusters with cluster.stop()) and check `labkit doctor`.")


def _every_second() -> float:
    """The share of a :class:`Deadline` that counts wall seconds: every one counts in full."""
    return 1.0


#: The most a busy machine stretches a :class:`Deadline`: ten wall seconds count for one at the least.
MAX_STRETCH = 10.0


def machine_share() -> float:
    """The share of a core a runnable process can expect now: the cores over the 1-minute load average, between
    ``1 / MAX_STRETCH`` and 1 (1 where no load average exists)."""
    measured = load_average()
    if measured is None:
        return 1.0
    load, cores = measured
    return 1.0 if load <= cores else max(1.0 / MAX_STRETCH, cores / load)


#: Linux's CPU pressure (PSI): ``some ... total=`` counts the microseconds in which a runnable task waited for a CPU.
CPU_PRESSURE = "/proc/pressure/cpu"


def cpu_stalled_seconds(path: str = CPU_PRESSURE) -> Optional[float]:
    """Seconds this machine has spent with at least one runnable task waiting for a CPU; None without PSI."""
    try:
        with open(path) as pressure:
            for line in pressure:
                if line.startswith("some "):
                    return int(line.rsplit("total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None
    return None


class MachineShare:
    """The share of a core a runnable process got since the last call: :func:`machine_share`'s estimate, or more
    where the CPU pressure proves it.

    The load average lags a minute behind and counts every runnable thread of every JVM, so a machine whose CPU is
    a quarter idle can show a load of twenty (a tenth of a core each, by the estimate). The pressure is measured
    over exactly the interval being counted: in the part of it when no task waited for a CPU, a task that wanted
    to run ran, so a task runnable throughout got at least that part. The share is never below the estimate.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 stalled: Optional[Callable[[], Optional[float]]] = None,
                 estimate: Optional[Callable[[], float]] = None) -> None:
        self._clock = clock
        self._stalled, self._estimate = stalled or cpu_stalled_seconds, estimate or machine_share
        self._last = (clock(), self._stalled())

    def __call__(self) -> float:
        now, stalled = self._clock(), self._stalled()
        (then, before), self._last = self._last, (now, stalled)
        estimate = self._estimate()
        if stalled is None or before is None or now <= then:
            return estimate
        unstalled = 1.0 - (stalled - before) / (now - then)
        return max(estimate, min(1.0, unstalled))


class Deadline:
    """``seconds`` as a quiet machine counts them, counted on this one.

    A bound on work that may hang must not fail correct work that is only starved: each wall second counts for
    the share of a core a runnable process could get in it (:class:`MachineShare`). On two cores with a load
    average of 10 and every moment some task waiting for a CPU, a 60-second deadline lasts 300 wall seconds; on a
    quiet machine, 60. Work that truly hangs is still given up on, at most :data:`MAX_STRETCH` times later.
    ``clock`` and ``share`` are for tests.
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic,
                 share: Optional[Callable[[], float]] = None) -> None:
        self.seconds = float(seconds)
        self._clock, self._share = clock, share if share is not None else MachineShare(clock)
        self._start = self._last = clock()
        self._spent, self._rate = 0.0, 1.0

    def _advance(self) -> float:
        now, self._rate = self._clock(), self._share()
        self._spent += (now - self._last) * self._rate
        self._last = now
        return self._spent

    def elapsed(self) -> float:
        """A quiet machine's seconds since it started, as counted on this one."""
        return self._advance()

    def expired(self) -> bool:
        return self._advance() >= self.seconds

    def wait_time(self, at_most: float) -> float:
        """Wall seconds to wait before asking :meth:`expired` again: ``at_most``, or less if it expires sooner."""
        left = self.seconds - self._advance()
        return max(0.0, min(at_most, left / self._rate))

    @property
    def wall(self) -> float:
        """Wall seconds since it started."""
        return self._clock() - self._start

    def __str__(self) -> str:
        """'60 s', or '60 s (412 s of wall time: the machine was busy)' once a busy machine stretched it."""
        wall = self.wall
        stretched = f" ({wall:.0f} s of wall time: the machine was busy)" if wall > self._spent + 1 else ""
        return f"{self.seconds:.0f} s{stretched}"
