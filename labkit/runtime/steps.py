"""The set-up step registry: what ``labkit setup`` fetches or generates, contributed by the parts that need it.

A part registers a step at import (``@step("Spark Kafka connector")``); each step is
idempotent and returns one line saying what it found or did. Which modules contribute
steps, and running them, is the ``labkit setup`` command's business
(:mod:`labkit.app.setup`): this registry imports nothing, so any layer may add to it.
"""

from __future__ import annotations

from typing import Callable

#: (name, step) in registration order.
STEPS: list[tuple[str, Callable[[], str]]] = []


def step(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register the decorated function as the set-up step ``name``."""
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        STEPS.append((name, fn))
        return fn

    return register
