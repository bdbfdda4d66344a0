"""Hidden checks of least_privilege (the grader's only): the same two jobs on topic, group and transactional-id
names chosen now, so no name from the visible checks can be hard-coded."""

from __future__ import annotations

import random
import uuid

from labkit.grading import check, sibling

checks = sibling(__file__)

TOPICS = ["invoices", "refunds", "payouts", "transfers", "settlements", "card.payments", "payments_v2"]
GROUPS = ["ledger", "accounting", "fraud-check", "reconciliation", "risk.scoring", "billing_eu"]


def hidden_names() -> "checks.Names":
    rng = random.Random()
    topic = f"{rng.choice(TOPICS)}-{uuid.uuid4().hex[:6]}"
    group = f"{rng.choice(GROUPS)}-{uuid.uuid4().hex[:6]}"
    transactional_id = rng.choice([f"{topic}-tx", f"writer-{uuid.uuid4().hex[:6]}", f"{group}.{topic}"])
    return checks.Names(topic, transactional_id, group)


@check("least_privilege_on_other_names", points=4, hidden=True)
def least_privilege_on_other_names(ns):
    """With topic, group and transactional id named at grading time: the producer commits, the consumer reads the
    committed records in its group, every other try by either user or by an outsider is refused, and the ACLs on
    these resources are exactly the four the jobs need."""
    out = checks.outcome(ns, "hidden", hidden_names)
    checks.assert_producer_works(out)
    checks.assert_consumer_works(out)
    for who in ("producer", "consumer", "outsider"):
        checks.assert_refused(out, who)
    checks.assert_minimal(out)
