"""The exercise notebook test_the_app: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file (the application's code comes from there)."""

import runpy
from pathlib import Path

from labkit.authoring import Notebook

APP = runpy.run_path(str(Path(__file__).with_name("checks.py")), run_name="test_the_app_checks")["APP"]

nb = Notebook("Exercise · Tests that catch the bugs", exercise="test_the_app")

nb.md("""
# Exercise · Tests that catch the bugs

A test suite is worth the bugs it catches. Below is a small Kafka application, `orders_app`, and its
contract. Write pytest tests for it, with the lab's pytest plugin (lesson 15). The grader runs your
tests against the correct application -- they must pass -- and against faulty versions of it, each
breaking one promise of the contract. You earn points for every faulty version one of your tests fails
on. Tests that fail on the correct application catch nothing, and tests that assert nothing neither.

*About 30 minutes. Goes with lesson 15.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("test_the_app")
""")
nb.md(f"""
## The application

Its docstring is its contract: every promise in it is something a faulty version breaks.

```python
{APP.rstrip()}
```
""")
nb.md("""
## How your tests run

pytest runs your file in a folder of its own, with the lab's plugin and one more fixture:

* `kafka_cluster` -- the cluster (`kafka_cluster.producer()`, `kafka_cluster.read_all(topic)` -> records with
  `.key`, `.value` (bytes, `None` for a tombstone), `.key_text`, `.partition`; `kafka_cluster.describe_topic(topic)`
  -> partitions with `.high_watermark`), and `kafka_topic_factory` / `kafka_topic` for topics of your own;
* `orders_app` -- the application on two fresh topics of the test's own, `orders_app.orders` and
  `orders_app.invoices` (3 partitions each), and a fresh consumer group `orders_app.group`.
  `orders_app.start(group=None, idle=1.0)` starts an instance (a process) that returns once it has read every
  partition to its end and `idle` seconds passed without a new order; it gives you `.wait(timeout=60)` (its exit code once it returned by itself), `.stop()`
  (SIGTERM: it finishes its batch, then exits), `.kill()` (SIGKILL, a crash) and `.running`. Start several, one
  after the other or at once.

Your tests see the application only as these processes: `import orders_app` finds nothing there. Each
test may take two minutes at most. `labkit.waiting.Wait` waits for something you can observe (a number of
invoices on the broker) without fixed sleeps.
""")
nb.md("""
## Task — tests in `test_orders_app.py`

Write the tests in the cell below (it writes the file). Aim for one test per promise of the contract:
what an invoice holds and under which key, deleted orders, a burst of orders, a crash or a stop in the
middle of a run, a new deployment. Then run the visible checks: they run your tests against the correct
application and two of the faulty versions (a minute or so); the grader has four more.
""")
nb.code('''
%%writefile test_orders_app.py
### BEGIN SOLUTION
import json

from labkit.waiting import Wait


def make_orders(n, prefix="o"):
    return {f"{prefix}{i:04d}": {"order": f"{prefix}{i:04d}", "customer": f"c{i % 7}",
                                 "items": [{"sku": "s1", "qty": 1 + i % 3, "price_cents": 199 + i}]}
            for i in range(n)}


def send(kafka_cluster, topic, records):
    producer = kafka_cluster.producer(acks="all")
    for key, value in records:
        producer.produce(topic, key=key, value=None if value is None else json.dumps(value))
    assert producer.flush(30) == 0


def invoiced(kafka_cluster, topic):
    return {r.key_text for r in kafka_cluster.read_all(topic)}


def stored(kafka_cluster, topic):
    return sum(p.high_watermark or 0 for p in kafka_cluster.describe_topic(topic).partitions)


def test_orders_sent_before_the_first_start_get_their_invoice_under_their_id(kafka_cluster, orders_app):
    orders = make_orders(12)
    deleted = ["o0003", "o0007"]
    send(kafka_cluster, orders_app.orders, [*orders.items(), *((key, None) for key in deleted)])
    assert orders_app.start().wait() == 0
    last = {}
    for record in kafka_cluster.read_all(orders_app.invoices):
        last[record.key_text] = record.value
    assert set(last) == set(orders)
    for key, order in orders.items():
        if key in deleted:
            assert last[key] is None, f"{key} was deleted, its invoice stays"
        else:
            net = sum(item["qty"] * item["price_cents"] for item in order["items"])
            assert json.loads(last[key]) == {"order": key, "customer": order["customer"],
                                             "total_cents": round(net * 1.2)}


def test_a_burst_of_orders_is_invoiced_in_full(kafka_cluster, orders_app):
    orders = make_orders(300)
    send(kafka_cluster, orders_app.orders, orders.items())
    assert orders_app.start().wait() == 0
    assert invoiced(kafka_cluster, orders_app.invoices) == set(orders)


def crashed_or_stopped_mid_run(kafka_cluster, orders_app, how):
    orders = make_orders(400)
    send(kafka_cluster, orders_app.orders, orders.items())
    first = orders_app.start()
    Wait("the first invoices", timeout=60, interval=0.05).until(
        lambda: stored(kafka_cluster, orders_app.invoices) >= 60)
    how(first)
    assert orders_app.start().wait() == 0
    assert invoiced(kafka_cluster, orders_app.invoices) == set(orders), "orders without an invoice"


def test_killed_mid_run_and_started_again_nothing_is_lost(kafka_cluster, orders_app):
    crashed_or_stopped_mid_run(kafka_cluster, orders_app, lambda instance: instance.kill())


def test_stopped_mid_run_and_started_again_nothing_is_lost(kafka_cluster, orders_app):
    crashed_or_stopped_mid_run(kafka_cluster, orders_app, lambda instance: instance.stop())
### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
