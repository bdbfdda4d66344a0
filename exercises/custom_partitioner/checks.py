"""Checks for custom_partitioner: VIPs to partition 0, everyone else spread by murmur2 over the rest."""

from __future__ import annotations

import random
import uuid

from labkit.grading import check
from labkit.partitioning import java_partition

VIPS = {"acme", "globex", "initech"}


def expected_partition(customer: str, n: int) -> int:
    return 0 if customer in VIPS else 1 + java_partition(customer.encode(), n - 1)


def _orders(rng, count):
    names = sorted(VIPS) + [f"customer-{i}" for i in range(60)]
    return [{"id": f"o{i}", "customer": rng.choice(names), "amount": rng.randint(1, 500)} for i in range(count)]


@check("vips_go_to_partition_zero", points=1, hint="Check membership in VIP_CUSTOMERS first.")
def vips_go_to_partition_zero(ns):
    """choose_partition sends every VIP customer to partition 0."""
    for vip in VIPS:
        got = ns.choose_partition(vip, 6)
        assert got == 0, f"choose_partition({vip!r}, 6) returned {got}"


@check("others_spread_over_the_rest", points=2,
       hint="1 + toPositive(murmur2(customer)) % (n - 1) keeps partition 0 free for VIPs.")
def others_spread_over_the_rest(ns):
    """Other customers go to 1 + toPositive(murmur2(customer)) % (n - 1): never partition 0."""
    for i in range(200):
        customer = f"customer-{i}"
        got = ns.choose_partition(customer, 6)
        assert got == expected_partition(customer, 6), f"choose_partition({customer!r}, 6) returned {got}"


@check("send_orders_lands_where_the_rule_says", points=3,
       hint="Pass partition=choose_partition(...) to producer.produce(); keep the customer as the key.")
def send_orders_lands_where_the_rule_says(ns):
    """send_orders on the notebook's cluster: every order stored, each in the partition the rule gives."""
    _check_on_broker(ns, random.Random(5), partitions=6, count=120)


@check("rule_holds_on_unseen_topics", points=4, hidden=True)
def rule_holds_on_unseen_topics(ns):
    """With a fresh producer and other partition counts, every order lands where the rule says and none is lost."""
    rng = random.Random()
    for n in (2, rng.randint(3, 12)):
        _check_on_broker(ns, rng, partitions=n, count=200)


def _check_on_broker(ns, rng, partitions: int, count: int) -> None:
    cluster = ns.cluster
    topic = cluster.create_topic(f"grade-vip-{uuid.uuid4().hex[:6]}", partitions=partitions)
    orders = _orders(rng, count)
    producer = cluster.producer()
    ns.send_orders(producer, topic, orders, partitions)
    producer.flush(30)
    stored = cluster.read_all(topic)
    assert len(stored) == len(orders), f"{len(stored)} of {len(orders)} orders were stored"
    for record in stored:
        customer = record.key_text
        assert customer is not None, "send orders with the customer as the key"
        want = expected_partition(customer, partitions)
        assert record.partition == want, \
            f"an order of {customer!r} is in partition {record.partition}, the rule says {want} ({partitions} partitions)"
