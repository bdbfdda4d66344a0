"""The exercise notebook transfer_exactly_once: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Transfer payments exactly once", exercise="transfer_exactly_once")

nb.md("""
# Exercise · Transfer payments exactly once

A service reads payments from a `payments` topic, converts each amount to cents, and writes it to
a `ledger` topic. If the service crashes half-way and restarts, the ledger must still contain
**every payment exactly once** — for readers using `isolation.level=read_committed`.

The tool for this is a Kafka transaction that covers both the output records *and* the input
offsets: they commit together, or not at all.

The grader starts your `transfer` in a separate process, kills it with `SIGKILL` in the middle of
the run — while a batch is in flight: records in the ledger whose input offsets are not committed
yet — starts it again, and counts the ledger as a `read_committed` reader.

*About 35 minutes. Goes with lesson 04.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import time

from confluent_kafka import Consumer, KafkaError, Producer

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster()
ex = exercise("transfer_exactly_once")
""")

nb.md("""
## Task — `transfer(bootstrap_servers, source, target, group_id, transactional_id)`

* Consume `source` in consumer group `group_id` from the earliest offset, **without auto-commit**,
  reading only committed data. Use `"session.timeout.ms": 6000` so that after a crash the
  restarted instance gets the partitions within seconds.
* For each batch of records (`consumer.consume(num_messages=..., timeout=...)`): begin a
  transaction; for each payment `{"id": ..., "amount": 12.5}` produce `{"id": ..., "amount_cents": 1250}`
  to `target` with the same key; send the consumer's positions to the transaction
  (`producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
  consumer.consumer_group_metadata())`); commit.
* The producer needs `transactional.id = transactional_id` and `init_transactions()` once — which
  also fences off (and aborts the open transaction of) a crashed instance with the same id.
* Return when no record has arrived for 3 seconds *after* partitions were assigned. Close the
  consumer at the end.
""")
nb.code('''
def transfer(bootstrap_servers: str, source: str, target: str, group_id: str, transactional_id: str) -> None:
    ### BEGIN SOLUTION
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": group_id, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 6000,
    })
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id})
    producer.init_transactions(30)
    consumer.subscribe([source])
    last_record = time.monotonic()
    try:
        while True:
            batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
            if not consumer.assignment():
                last_record = time.monotonic()      # still joining the group: not idle yet
            if not batch:
                if time.monotonic() - last_record > 3:
                    return
                continue
            last_record = time.monotonic()
            producer.begin_transaction()
            for msg in batch:
                payment = json.loads(msg.value())
                producer.produce(target, key=msg.key(),
                                 value=json.dumps({"id": payment["id"], "amount_cents": round(payment["amount"] * 100)}))
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
    finally:
        consumer.close()
    ### END SOLUTION
''')
nb.md("""
## Try it

Some payments, one run, then read the ledger as a `read_committed` reader would.
""")
nb.code("""
payments = cluster.create_topic("payments", partitions=3)
ledger = cluster.create_topic("ledger", partitions=3)
p = cluster.producer()
for i in range(50):
    p.produce(payments, key=f"acct-{i % 5}", value=json.dumps({"id": f"p{i:03d}", "amount": i + 0.5}))
p.flush(10)

transfer(cluster.bootstrap_servers, payments, ledger, "ledger-writer", "ledger-writer-1")
rows = cluster.read_all(ledger, isolation_level="read_committed")
print(len(rows), "ledger records, e.g.", rows[0].value_text if rows else None)
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded("The hidden check kills your transfer mid-run and restarts it.")
