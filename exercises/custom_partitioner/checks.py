"""Checks for custom_partitioner: VIPs to partition 0, everyone else spread by murmur2 over the rest.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``. Where the orders
landed is read from the broker by the checks themselves; the learner's ``send_orders`` runs in
their kernel (a task) with a producer the task builds.
"""

from __future__ import annotations

import json
import random

from labkit.grading import Rules, check
from labkit.grading.harness import unique
from labkit.partitioning import java_partition

#: The lab's partitioning module holds the answer (java_partition); murmur2 and to_positive are given.
RULES = Rules(forbid=["labkit.partitioning"], allow=["murmur2", "to_positive"])
CLUSTER = "single-broker"
SHARE_CLUSTER = True

VIPS = {"acme", "globex", "initech"}


def expected_partition(customer: str, n: int) -> int:
    return 0 if customer in VIPS else 1 + java_partition(customer.encode(), n - 1)


def orders_for(rng: random.Random, names: list[str], count: int) -> list[dict]:
    return [{"id": f"o{i}-{rng.randint(0, 10**6)}", "customer": rng.choice(names), "amount": rng.randint(1, 500)}
            for i in range(count)]


def send_orders_task(user, bootstrap, topic, orders, partitions, queue_limit):
    """In the learner's kernel: their send_orders with a fresh producer; how many records it left undelivered."""
    from confluent_kafka import Producer

    # Idempotent, so a retried batch keeps its place: librdkafka's default (idempotence off, up to 1,000,000
    # requests in flight) stores a retry after later batches, and a retry happens now and then on a busy machine.
    # Per-customer order is then the learner's keys and partitions, not the machine's luck.
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True}
    if queue_limit:
        config["queue.buffering.max.messages"] = queue_limit
    producer = Producer(config)
    user["send_orders"](producer, topic, orders, partitions)
    left = len(producer)
    producer.flush(30)
    return left


def check_on_broker(ns, orders: list[dict], partitions: int, queue_limit: int = 0) -> None:
    """Run send_orders on a new topic, then read the topic back: every order once, keyed by its customer,
    as JSON, in the partition the rule gives, in order per customer."""
    ns.send_orders  # noqa: B018 - not defined yet: say so
    cluster = ns.cluster
    topic = cluster.create_topic(unique("grade-vip"), partitions=partitions)
    left = ns.run(send_orders_task, cluster.bootstrap_servers, topic, orders, partitions, queue_limit)
    assert left == 0, f"send_orders returned with {left} orders not yet delivered: flush the producer at the end"
    stored = cluster.read_all(topic)
    assert len(stored) == len(orders), f"{len(stored)} records stored for {len(orders)} orders"
    by_id = {o["id"]: o for o in orders}
    seen: dict[str, list[str]] = {}
    for record in sorted(stored, key=lambda r: (r.partition, r.offset)):
        try:
            value = json.loads(record.value)
        except (TypeError, ValueError):
            raise AssertionError(f"a record's value is not JSON: {record.value!r:.80}") from None
        order = by_id.get(value.get("id")) if isinstance(value, dict) else None
        assert order is not None and value == order, f"a record's value {value!r:.80} is not one of the orders as JSON"
        customer = record.key_text
        assert customer == order["customer"], \
            f"order {order['id']} has the key {customer!r}: use the customer ({order['customer']!r}) as the key"
        want = expected_partition(customer, partitions)
        assert record.partition == want, \
            f"an order of {customer!r} is in partition {record.partition}, the rule says {want} ({partitions} partitions)"
        seen.setdefault(customer, []).append(order["id"])
    for customer, ids in seen.items():
        sent = [o["id"] for o in orders if o["customer"] == customer]
        assert ids == sent, f"{customer!r}'s orders are stored as {ids[:5]}…, not in the order they were sent"


@check("vips_go_to_partition_zero", points=1, hint="Check membership in VIP_CUSTOMERS first.")
def vips_go_to_partition_zero(ns):
    """choose_partition sends every VIP customer to partition 0."""
    calls = [(vip, n) for vip in sorted(VIPS) for n in (2, 6)]
    for (vip, n), got in zip(calls, ns.choose_partition.many(calls)):
        assert got == 0, f"choose_partition({vip!r}, {n}) returned {got!r}"


@check("others_spread_over_the_rest", points=2,
       hint="1 + toPositive(murmur2(customer)) % (n - 1) keeps partition 0 free for VIPs.")
def others_spread_over_the_rest(ns):
    """Other customers go to 1 + toPositive(murmur2(customer)) % (n - 1): never partition 0."""
    calls = [(f"customer-{i}", 6) for i in range(200)]
    for (customer, n), got in zip(calls, ns.choose_partition.many(calls)):
        assert got == expected_partition(customer, n), f"choose_partition({customer!r}, {n}) returned {got!r}"


@check("send_orders_lands_where_the_rule_says", points=3,
       hint="Pass partition=choose_partition(...) to producer.produce(); keep the customer as the key.")
def send_orders_lands_where_the_rule_says(ns):
    """send_orders with a producer on the cluster: every order stored once, keyed by its customer, as JSON,
    in the partition the rule gives."""
    rng = random.Random(5)
    names = sorted(VIPS) + [f"customer-{i}" for i in range(60)]
    check_on_broker(ns, orders_for(rng, names, 120), partitions=6)
