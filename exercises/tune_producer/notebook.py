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

And there is a **latency budget**: the payment team accepts that an order waits in the producer
for its batch to fill, but at most `latency_budget_ms` milliseconds — a number each environment
sets when the service starts (from 0 to 15 ms), so your settings must follow it.

Write `tuned_config(latency_budget_ms)`: the producer configuration for that budget. It must
never let a record wait for its batch longer than the budget, and send **at least 3× as many
records per second** as `TEAM_CONFIG`, still with `acks=all`, idempotence on, and every record
acknowledged and stored exactly once. The grader picks the budgets when it grades, races both
configurations in turn on a cluster of its own, with these documents and with other sizes
(1–12 kB), and checks that nothing is lost while a follower freezes for a few seconds.

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
`produce()` to its delivery callback). With `warm_up=True` it first sends one record and waits for
it, so the clock leaves out what a new producer does once (metadata, connections, its producer id),
which on a busy machine can take longer than the run itself. The records are JSON order documents —
look at one.
""")
nb.code("""
documents = perf.order_documents(4000)
print(documents[0][:300].decode(), "...")
orders = cluster.create_topic("orders", partitions=3, exist_ok=True)


def measure(config, records=1000):
    return perf.python_producer(cluster, orders, records, 4000, config=config, values=documents, warm_up=True)
""")
nb.code("""
team = measure(TEAM_CONFIG)
perf.frame([team]).round(1)
""", tags=("demo",))
nb.md("""
What does one produce request carry with `batch.size=16384`, when each record is 4 kB? Which
setting makes a record wait for company, and what does librdkafka do when you leave it out? How
many bytes does each record put on the network, three times (replication factor 3), when the same
field names and product names repeat in every document? Lesson 11's sweep and its compression
table show what moves throughput — with no budget at all; the librdkafka configuration reference
lists every setting and its default.

## Task — `tuned_config(latency_budget_ms)`
""")
nb.code('''
def tuned_config(latency_budget_ms: float) -> dict:
    ### BEGIN SOLUTION
    return {
        "acks": "all",
        "enable.idempotence": True,
        # A record waits at most linger.ms for its batch; librdkafka's default is 5 ms, so set it: within budget.
        "linger.ms": min(5, latency_budget_ms),
        # Batches fill while earlier requests are in flight, without waiting: let them hold 1 MB per partition.
        "batch.size": 1_000_000,
        "compression.type": "lz4",   # JSON shrinks several times: fewer bytes to send, replicate, store
    }
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
runs = [measure(TEAM_CONFIG), measure(tuned_config(2), records=3000), measure(TEAM_CONFIG),
        measure(tuned_config(2), records=3000)]
table = perf.frame(runs, config=["team", "tuned", "team", "tuned"])
print(f"tuned / team: {table[table.config == 'tuned']['records/s'].median() / table[table.config == 'team']['records/s'].median():.1f}×")
table.round(1)
""", tags=("demo",))
nb.code("""
cluster.stop()
""")
nb.get_graded()
