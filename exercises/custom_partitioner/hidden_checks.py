"""Hidden checks of custom_partitioner (the grader's only): customers and partition counts chosen now, and a
producer whose local queue fills up."""

from __future__ import annotations

import random

from labkit.grading import check, sibling

checks = sibling(__file__)


def _names(rng: random.Random, count: int) -> list[str]:
    shapes = ["{}-{}", "Kunde {} {}", "client_{}_{}", "顧客-{}-{}", "{}{}"]
    return [rng.choice(shapes).format(rng.choice(["acme", "bob", "zoë", "ACME", "globex ltd"]), rng.randint(0, 10**7))
            for _ in range(count)]


@check("rule_holds_for_unseen_customers", points=2, hidden=True)
def rule_holds_for_unseen_customers(ns):
    """choose_partition follows the rule for customers and partition counts chosen at grading time."""
    rng = random.Random()
    calls = [(name, rng.randint(2, 64)) for name in _names(rng, 300) + sorted(checks.VIPS) * 5]
    rng.shuffle(calls)
    for (customer, n), got in zip(calls, ns.choose_partition.many(calls)):
        want = checks.expected_partition(customer, n)
        assert got == want, f"choose_partition({customer!r}, {n}) returned {got!r}, the rule says {want}"


@check("rule_holds_on_unseen_topics", points=4, hidden=True)
def rule_holds_on_unseen_topics(ns):
    """With fresh producers whose local queue holds only 10 records (produce() raises BufferError when it is
    full) and other partition counts, every order lands once where the rule says, in order per customer, and
    send_orders returns only when all are delivered."""
    rng = random.Random()
    names = sorted(checks.VIPS) + _names(rng, 40)
    for n in (2, rng.randint(3, 12)):
        checks.check_on_broker(ns, checks.orders_for(rng, names, 200), partitions=n, queue_limit=10)
