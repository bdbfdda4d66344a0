"""The exercise notebook failover_assignment: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · An active/passive assignment", exercise="failover_assignment")

nb.md("""
# Exercise · An active/passive assignment

Some consumers must not share work: a job that needs all of a topic's partitions in one process
(a single-writer ledger, an in-memory aggregate), with hot standbys ready to take over. That is
an **active/passive** strategy: *all* partitions go to the live member with the **highest
priority**; the others stay idle until it dies.

Kafka's Java client would let you write this as a custom assignor. The Python client
(librdkafka) only runs its built-in assignors, so here the members use **`assign()`**: each one
learns who is alive, computes the assignment itself, and assigns itself its share. You write the
assignment function, then the step each member runs to follow it; the grader kills the active
member of a live group and checks that the standby takes over and no record is lost.

*About 25 minutes. Goes with lesson 05.*
""")
nb.md("""
## Setup
""")
nb.code("""
from confluent_kafka import TopicPartition

import labkit
from labkit import groupviz
from labkit.grading import exercise, load_checks_module

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("failover_assignment")
""")
nb.md("""
## Task 1 — `failover_assign(members, partitions)`

`members` maps each **live** member's name to its priority (an `int`, higher wins); `partitions`
is a list of `(topic, partition)`. Return `{member: [(topic, partition), ...]}` with **every**
member as a key: the active member gets all partitions, sorted; the others get `[]`.

* Ties: the member whose **name sorts first** wins. Every member runs this function on its own,
  so all of them must reach the same answer whatever order they list things in.
* No members: return `{}`.
""")
nb.code('''
def failover_assign(members: dict[str, int], partitions: list[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    ### BEGIN SOLUTION
    if not members:
        return {}
    active = min(members, key=lambda name: (-members[name], name))
    return {name: sorted(partitions) if name == active else [] for name in members}
    ### END SOLUTION
''')
nb.code("""
failover_assign({"primary": 10, "standby": 5}, [("payments", 1), ("payments", 0)])
""")
nb.md("""
## Task 2 — `follow(consumer, me, live, partitions)`

Each member runs a loop (written for you, see below) that every half second reads who is alive,
`live = {name: priority}`, and calls `follow(consumer, me, live, partitions)`. Make `consumer`
consume exactly what `failover_assign` gives `me`, and return that list:

* if it differs from what the consumer has now (`consumer.assignment()`), call
  `consumer.assign([TopicPartition(topic, partition), ...])`, or `consumer.unassign()` when `me`
  gets nothing; leave the consumer alone when nothing changed;
* don't set an offset in the `TopicPartition`: then the consumer starts from the group's
  **committed** offset (the loop commits after each batch), which is what makes a takeover
  lose nothing.
""")
nb.code('''
def follow(consumer, me: str, live: dict[str, int], partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
    ### BEGIN SOLUTION
    mine = failover_assign(live, partitions).get(me, [])
    current = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
    if current != mine:
        if mine:
            consumer.assign([TopicPartition(topic, partition) for topic, partition in mine])
        else:
            consumer.unassign()
    return mine
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.md("""
## See it on a live group

The lab's harness (`Team` in `exercises/failover_assignment.py`) runs each member as a process.
For liveness every member also joins a small **lease group** (an ordinary subscribed consumer
whose client id carries its name and priority) and reads the live members back from the broker
with `describe_consumer_groups`; a member that dies drops out of it after `session.timeout.ms`
(6 s here). Start a primary and a standby, kill the primary, and watch the standby take over:
""")
nb.code("""
import time

harness = load_checks_module("failover_assignment")
topic = cluster.create_topic("payments-demo", partitions=3, exist_ok=True)
producer = cluster.producer()
for i in range(300):
    producer.produce(topic, key=str(i), value=f"payment-{i:04d}")
producer.flush(10)

team = harness.Team(cluster, topic, follow)
team.start("primary", 10)
team.start("standby", 5)
try:
    team.wait(lambda: len(team.mine("primary")) == 3, "the primary taking every partition")
    time.sleep(2)
    killed = time.time()
    team.kill("primary")
    took = team.wait(lambda: len(team.mine("standby")) == 3, "the standby taking over", timeout=30)
    print(f"the standby took over {took:.1f} s after the primary died")
finally:
    team.stop()
groupviz.rebalance_timeline(team.events(), t0=killed, marks={"primary killed": killed},
                            title="Active/passive: the standby takes over (seconds after the kill)")
""")
nb.md("""
## Question

What do you give up by assigning with `assign()` instead of a group assignor, and what would a
custom assignor in the Java client (`ConsumerPartitionAssignor`) give you instead?
""")
nb.md("""
### BEGIN SOLUTION
With `assign()` the group coordinator does not manage the assignment: there is no rebalance,
no `on_revoke`, no generation fencing. The application must detect liveness itself (here a lease
group and `describe_consumer_groups`), failover waits for that detection (the session timeout),
and for a moment two members can both consume (the old one has not noticed yet), so commits
must keep processing at-least-once and effects idempotent. A custom assignor runs inside the
group's rebalance: membership, fencing of zombies and revocation before reassignment come from
the protocol.
### END SOLUTION
""")
nb.md("""
## Get graded

`labkit grade notebooks/exercises/failover_assignment.ipynb`
""")
nb.code("""
cluster.stop()
""")

