"""Checks for idempotent_retry: the learner's fixed producer config under lost acknowledgements."""

from __future__ import annotations

import time
import uuid

from labkit.grading import check
from labkit.producing import produce_and_count


def _stall(cluster, config: dict):
    topic = cluster.create_topic(f"retry-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)
    state = cluster.describe_topic(topic)[0]
    follower = next(r for r in state.replicas if r != state.leader)
    kwargs = {k.replace(".", "_"): v for k, v in config.items()}
    return produce_and_count(cluster, topic, count=400, pace=0.01, keyed=False, **kwargs, actions={
        150: lambda: cluster.pause_broker(follower), 400: lambda: (time.sleep(5), cluster.resume_broker(follower))})


@check("fixed_config_is_idempotent", points=2,
       hint="One setting makes the broker drop retried batches it already has; it needs acks=all.")
def fixed_config_is_idempotent(ns):
    """FIXED_CONFIG enables idempotence (with acks=all, which idempotence requires)."""
    config = dict(ns.FIXED_CONFIG)
    assert str(config.get("enable.idempotence", "false")).lower() == "true", "idempotence is still off"
    assert str(config.get("acks", "all")) in ("all", "-1"), f"acks={config.get('acks')!r} does not work with idempotence"


@check("keeps_the_short_request_timeout", points=1, hint="Fix the cause, not the symptom: keep request.timeout.ms.")
def keeps_the_short_request_timeout(ns):
    """FIXED_CONFIG still times out requests quickly (the fix is not 'never retry')."""
    config = dict(ns.FIXED_CONFIG)
    assert int(config.get("request.timeout.ms", 30000)) <= 1500, "keep request.timeout.ms at 1500"
    assert int(config.get("retries", 1)) > 0, "retries must stay on: without them records fail instead"


@check("no_duplicates_after_lost_acks", points=4, hidden=True)
def no_duplicates_after_lost_acks(ns):
    """With a follower stalled mid-stream (acknowledgements time out, the producer retries), FIXED_CONFIG stores
    every record exactly once."""
    count = _stall(ns.cluster, dict(ns.FIXED_CONFIG))
    assert count.duplicates == 0, f"{count.duplicates} records stored twice"
    assert count.acked == count.sent == count.stored, f"acked {count.acked}, stored {count.stored} of {count.sent}"
