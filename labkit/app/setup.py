"""``labkit setup``: everything the lab needs fetched or generated before a lesson runs.

Idempotent: each step checks first and does nothing when already done. The steps
themselves are registered by the parts that need them (:mod:`labkit.runtime.steps`);
this module knows which parts those are and runs their steps in that order, Kafka's jars first.
"""

from __future__ import annotations

import importlib
import logging
from typing import Iterator

from ..runtime.steps import STEPS

log = logging.getLogger(__name__)

#: Modules that register set-up steps when imported, in the order their steps run.
STEP_MODULES = ("labkit.runtime.distribution", "labkit.runtime.metrics", "labkit.app.warmup", "labkit.spark.connector", "labkit.services.registry",
                "labkit.services.connect", "labkit.services.streamsbuild", "labkit.grading.exercises")


def run_setup() -> Iterator[tuple[str, str]]:
    """Run every set-up step, yielding (step name, what it found or did)."""
    for module in STEP_MODULES:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(STEP_MODULES)}
    for name, fn in sorted(STEPS, key=lambda s: rank.get(s[1].__module__, len(rank))):
        yield name, fn()
