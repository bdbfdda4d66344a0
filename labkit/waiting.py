"""Waiting for things with a deadline, never with a bare sleep.

A :class:`Wait` polls a condition every ``interval`` seconds until it returns a
truthy value or ``timeout`` passes; on timeout it raises :class:`WaitTimeout`: one
paragraph with what it waited for, the last thing it saw, the machine's load (a
busy machine is the usual reason a wait runs out) and what to try, then whatever
evidence the caller can add.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from .errors import WaitTimeout, machine_load

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

    def until(self, condition: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.timeout
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
            if time.monotonic() >= deadline:
                extra = self.evidence() if self.evidence is not None else ""
                raise WaitTimeout(
                    f"Timed out after {self.timeout:.0f} s waiting for {self.what} (last seen: {last}). "
                    f"{machine_load()}", self.hint or SLOW_HINT, evidence=extra)
            time.sleep(min(self.interval, max(0.0, deadline - time.monotonic())))


#: What to try when a wait ran out and its caller had nothing more specific to say.
SLOW_HINT = ("Run the cell again; if it keeps happening, close other programs (or stop other notebooks' "
             "clusters with cluster.stop()) and check `labkit doctor`.")

