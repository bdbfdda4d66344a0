"""``labkit setup``: everything the lab needs fetched or generated before a lesson runs.

Idempotent: each step checks first and does nothing when already done.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

log = logging.getLogger(__name__)

#: Extra set-up steps registered by other modules (Spark connector, learner copies, ...).
STEPS: list[tuple[str, Callable[[], str]]] = []


def step(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(fn: Callable[[], str]) -> Callable[[], str]:
        STEPS.append((name, fn))
        return fn

    return register


@step("Kafka jars")
def _kafka_jars() -> str:
    from .distribution import ensure_distribution

    dist = ensure_distribution(progress=True)
    dist.broker_config_names()
    return f"Kafka {dist.version}, {len(dist.jars())} jars ({dist.source}: {dist.lib_dir})"


def run_setup() -> Iterator[tuple[str, str]]:
    """Run every set-up step, yielding (step name, what it found or did)."""
    _load_optional_steps()
    for name, fn in STEPS:
        yield name, fn()


def _load_optional_steps() -> None:
    import importlib

    for module in ("labkit.warmup", "labkit.spark", "labkit.services.registry", "labkit.services.connect", "labkit.grading"):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if exc.name != module:
                raise
