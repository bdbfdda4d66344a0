"""The exercise notebook custom_partitioner: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · A custom partitioner", exercise="custom_partitioner")

nb.md("""
# Exercise · A custom partitioner

Your shop's biggest customers must never wait behind everyone else: their orders go to a
partition of their own, read by a dedicated consumer. Everyone else is spread by the usual
murmur2 rule over the remaining partitions.

The Java client lets you plug in a `Partitioner` class. The Python client (confluent-kafka)
has no such plug-in: its mechanism is the **`partition=` argument of `produce()`** — when you
give it, the configured partitioner is skipped. You'll use that, and the grader checks where
your records really landed on the broker.

*About 20 minutes. Goes with lesson 02.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit.grading import exercise
from labkit.partitioning import murmur2, to_positive

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("custom_partitioner")

VIP_CUSTOMERS = {"acme", "globex", "initech"}
""")

nb.md("""
## Task 1 — the rule

Write `choose_partition(customer, num_partitions)`:

* a customer in `VIP_CUSTOMERS` → partition **0**;
* anyone else → `1 + toPositive(murmur2(customer)) % (num_partitions - 1)`, so partitions
  1 … n−1 share the rest, each customer always in the same one.
""")
nb.code('''
def choose_partition(customer: str, num_partitions: int) -> int:
    ### BEGIN SOLUTION
    if customer in VIP_CUSTOMERS:
        return 0
    return 1 + to_positive(murmur2(customer.encode())) % (num_partitions - 1)
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")

nb.md("""
## Task 2 — send orders through it

Write `send_orders(producer, topic, orders, num_partitions)`: each order is a dict like
`{"id": "o1", "customer": "acme", "amount": 120}`. Produce one record per order with the
**customer as the key** (so per-customer ordering still holds), a JSON value, and the partition
from your rule. Handle the producer's local queue filling up (`BufferError`: `poll` and retry)
and flush at the end.
""")
nb.code('''
import json


def send_orders(producer, topic: str, orders: list, num_partitions: int) -> None:
    ### BEGIN SOLUTION
    for order in orders:
        partition = choose_partition(order["customer"], num_partitions)
        while True:
            try:
                producer.produce(topic, key=order["customer"], value=json.dumps(order), partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(30)
    ### END SOLUTION
''')
nb.code("""
topic = cluster.create_topic("orders", partitions=6)
orders = [{"id": f"o{i}", "customer": c, "amount": 10 * i}
          for i, c in enumerate(["acme", "bob", "globex", "carol", "dave", "initech"] * 5)]
send_orders(cluster.producer(), topic, orders, 6)
sorted({(r.key_text, r.partition) for r in cluster.read_all(topic)})
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
