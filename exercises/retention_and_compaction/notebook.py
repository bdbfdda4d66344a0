"""The exercise notebook retention_and_compaction: its text, code, and reference solution (the learner copy is
generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Keep only the latest", exercise="retention_and_compaction")

nb.md("""
# Exercise · Keep only the latest

The `customers` topic is a **table**: the key is a customer id, the value the customer's current
profile (JSON). Services rebuild their copy of the table by reading the topic from the beginning,
so the topic must keep each customer's **latest** profile for ever — and nothing else. And when a
customer asks to be forgotten, the deletion must reach every service and then the customer must
**disappear** from the topic entirely, within a time the privacy team sets.

You write the topic's configuration and the code that deletes a customer. The grader creates
topics with your configuration on its own broker, writes to them, lets the broker's log cleaner
run, and checks what a **fresh consumer** reads — with other customers and other timings than the
ones below.

*About 20 minutes. Goes with lesson 01.*
""")
nb.md("""
## Setup

One broker. Its log cleaner looks for work every 0.5 s (`log.cleaner.backoff.ms`; the default is
15 s), so you can watch it within seconds; the grader's broker does the same.
""")
nb.code("""
import json
import time

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker", log_cleaner_backoff_ms=500)
ex = exercise("retention_and_compaction")
""")

nb.md("""
## Task 1 — the topic's configuration

Write `table_topic_config(max_dirty_ms, keep_tombstone_ms)`: the topic settings (a dict of
strings) for a topic where

1. a reader starting from the beginning finds **only the latest value of each key** once the log
   cleaner has run; the latest values are never deleted, however old they get;
2. **no superseded record stays readable much longer than `max_dirty_ms`** after it was written
   (as long as the topic keeps being written to) — even when only a few keys of a big table
   changed;
3. a deleted key's **tombstone** (a record with a null value) stays readable for
   `keep_tombstone_ms` after the cleaner compacted it, so slow readers still learn about the
   deletion, and **then disappears** too: the key is gone.

Useful names: `cleanup.policy`, `segment.ms`, `min.cleanable.dirty.ratio`,
`max.compaction.lag.ms`, `min.compaction.lag.ms`, `delete.retention.ms`, `retention.ms`
(read their descriptions in Kafka's documentation: which are about *when* the cleaner may or must
run, which about *what* it removes?). Remember that the cleaner never touches the segment being
written to.
""")
nb.code('''
def table_topic_config(max_dirty_ms: int, keep_tombstone_ms: int) -> dict:
    ### BEGIN SOLUTION
    return {
        "cleanup.policy": "compact",                     # keep the latest value per key, delete nothing by age
        "max.compaction.lag.ms": str(max_dirty_ms),      # roll and compact within this time, whatever the ratio
        "delete.retention.ms": str(keep_tombstone_ms),   # tombstones stay this long after compaction
    }
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")

nb.md("""
## Task 2 — forget a customer

Write `delete_customer(producer, topic, customer_id)`: delete the customer the way a compacted
topic understands — so that the cleaner removes every earlier record of that key, and only those.
Make sure the deletion has reached the broker when the function returns.
""")
nb.code('''
def delete_customer(producer, topic: str, customer_id: str) -> None:
    ### BEGIN SOLUTION
    producer.produce(topic, key=customer_id, value=None)   # a tombstone
    producer.flush(10)
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")

nb.md("""
## Watch it happen

Three versions of three customers, then `chen` is deleted. A writer keeps appending a `tick`
record every 0.2 s (the cleaner only works on closed segments, and a segment closes when a record
arrives after its time is up). Read the topic from the beginning now and then:
""")
nb.code("""
topic = cluster.create_topic("customers", partitions=1, config=table_topic_config(1000, 3000))
producer = cluster.producer()
for version in (1, 2, 3):
    for customer in ("ana", "ben", "chen"):
        producer.produce(topic, key=customer, value=json.dumps({"customer": customer, "version": version}))
producer.flush(10)
delete_customer(producer, topic, "chen")

def table():
    return [(r.offset, r.key_text, r.value_text) for r in cluster.read_all(topic) if r.key_text != "tick"]

started = time.monotonic()
for second in range(8):
    for _ in range(5):
        producer.produce(topic, key="tick", value=b"{}")
        producer.poll(0)
        time.sleep(0.2)
    print(f"after {time.monotonic() - started:.0f} s:", [(offset, key, value and json.loads(value)["version"])
                                                        for offset, key, value in table()])
producer.flush(10)
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
