"""The exercise notebook tune_producer: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Tune a producer", exercise="tune_producer")

nb.md("""
# Exercise · Tune a producer

The order service sends every order as a JSON document of about 4 kB, with `acks=all` and an
idempotent producer — nothing may be lost or stored twice. Its producer settings were copied
years ago from a Java service: Kafka's classic producer batching, 16 kB batches and no waiting
(`linger.ms=0`). Orders now arrive faster than it can send them.

Write `TUNED_CONFIG`: a producer configuration that sends **at least 3× as many records per
second** as `TEAM_CONFIG`, still with `acks=all`, idempotence on, and every record acknowledged
and stored exactly once. The grader races both configurations in turn on a cluster of its own,
with these documents and with other sizes it picks when it grades (1–12 kB), and checks that
nothing is lost while a follower freezes for a few seconds.

*About 15 minutes. Goes with lesson 11.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit import perf
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster()          # three brokers
ex = exercise("tune_producer")

TEAM_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "batch.size": 16384}
""")
nb.md("""
## Measure the team's producer

`perf.python_producer` sends records as fast as a `produce()` loop can, then waits for the last
acknowledgement: records per second, MB per second, and the latency of each record (from
`produce()` to its delivery callback). The records are JSON order documents — look at one.
""")
nb.code("""
documents = perf.order_documents(4000)
print(documents[0][:300].decode(), "...")
orders = cluster.create_topic("orders", partitions=3, exist_ok=True)

def measure(config, records=1000):
    return perf.python_producer(cluster, orders, records, 4000, config=config, values=documents)

team = measure(TEAM_CONFIG)
perf.frame([team]).round(1)
""")
nb.md("""
What does one produce request carry with `batch.size=16384`, when each record is 4 kB? How long
does a batch wait for company with `linger.ms=0`? How many bytes does each record put on the
network, three times (replication factor 3), when the same field names and product names repeat
in every document? Lesson 11's sweep shows which settings move throughput; the librdkafka
configuration reference lists the names (`batch.size`, `linger.ms`, `compression.type`, ...).

## Task — `TUNED_CONFIG`
""")
nb.code('''
### BEGIN SOLUTION
TUNED_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,                 # let batches fill
    "batch.size": 1_000_000,         # up to 1 MB per partition and request
    "compression.type": "lz4",       # JSON shrinks several times: fewer bytes to send, replicate, store
}
### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
runs = [measure(TEAM_CONFIG), measure(TUNED_CONFIG, records=3000), measure(TEAM_CONFIG),
        measure(TUNED_CONFIG, records=3000)]
table = perf.frame(runs, config=["team", "tuned", "team", "tuned"])
print(f"tuned / team: {table[table.config == 'tuned']['records/s'].median() / table[table.config == 'team']['records/s'].median():.1f}×")
table.round(1)
""", tags=("demo",))
nb.md("""
## Get graded

`labkit grade notebooks/exercises/tune_producer.ipynb`
""")
nb.code("""
cluster.stop()
""")
