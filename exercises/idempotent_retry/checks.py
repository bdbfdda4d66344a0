"""Checks for idempotent_retry: the learner's fixed producer config under lost acknowledgements.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``. ``FIXED_CONFIG`` is
plain data: the grader reads it as librdkafka would (aliases, underscores for dots, the last
setting wins) and builds the producer in its own process, on its own cluster, from the
producer delivery settings below only.
"""

from __future__ import annotations

from typing import Any

from labkit.clientconfig import effective_config  # a config as librdkafka applies it (also for hidden checks)
from labkit.grading import Rules, check

#: No module of the lab holds this answer; the generic rules (no dynamic imports, no grading machinery) apply.
RULES = Rules()
CLUSTER = "three-brokers"
#: The notebook pauses brokers itself: it runs on a cluster of its own while graded.
SHARE_CLUSTER = False

DEFAULTS = {"acks": "all", "enable.idempotence": False, "retries": 2147483647, "request.timeout.ms": 30000,
            "message.timeout.ms": 300000}


def setting(config: dict[str, Any], name: str) -> Any:
    return config.get(name, DEFAULTS.get(name))


def is_true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "t", "1")


def as_int(config: dict[str, Any], name: str) -> int:
    value = setting(config, name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AssertionError(f"{name}={value!r} is not a number") from None


def acks_all(config: dict[str, Any]) -> bool:
    return str(setting(config, "acks")).strip().lower() in ("all", "-1")


@check("fixed_config_is_idempotent", points=2,
       hint="Lesson 04, 'How the broker knows: producer id and sequence numbers': compare the two topics' batches "
            "in the segment dump. Which producer's batches can the broker recognise when they come again?")
def fixed_config_is_idempotent(ns):
    """FIXED_CONFIG enables idempotence (with acks=all, which idempotence requires)."""
    config = effective_config(ns.FIXED_CONFIG, "FIXED_CONFIG")
    assert is_true(setting(config, "enable.idempotence")), "idempotence is still off"
    assert acks_all(config), f"acks={config.get('acks')!r} does not work with idempotence"


@check("keeps_the_short_request_timeout", points=1, hint="Fix the cause, not the symptom: keep request.timeout.ms.")
def keeps_the_short_request_timeout(ns):
    """FIXED_CONFIG still times out requests quickly and retries them (the fix is not 'never retry')."""
    config = effective_config(ns.FIXED_CONFIG, "FIXED_CONFIG")
    assert as_int(config, "request.timeout.ms") <= 1500, "keep request.timeout.ms at 1500"
    assert as_int(config, "retries") > 0, "retries must stay on: without them records fail instead"
