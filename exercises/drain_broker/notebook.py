"""The exercise notebook drain_broker: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Drain a broker", exercise="drain_broker")

nb.md("""
# Exercise · Drain a broker

Broker 4 runs on a machine that is being retired. Before anyone switches it off, every replica
it holds must live somewhere else — while producers and consumers keep running. Write the plan
and the calls that drain it:

* **move every replica off broker 4** (internal topics such as `__consumer_offsets` too) and
  nothing else: each partition keeps its other replicas, one new broker takes broker 4's place;
* **keep the replication factor**, and **keep the rack spread**: no partition may end up with
  fewer racks than it had;
* copy within a **replication throttle** (bytes per second) and remove the throttle afterwards;
* **rebalance leadership**: every partition led by its first (preferred) replica, the preferred
  leaders spread evenly over the brokers that stay.

The grader drains a cluster of its own — four brokers, three racks, topics laid out as it
chooses when it grades, an `acks=all` producer and a consumer running — and checks what the
brokers report, and that no acknowledged record was lost.

*About 30 minutes. Goes with lesson 13.*
""")
nb.md("""
## Setup

Four brokers in three racks: brokers 1 and 4 share `rack-a`.
""")
nb.code("""
import labkit
from labkit import operations as ops
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("four-brokers-racks")
ex = exercise("drain_broker")
ops.racks(cluster)
""")
nb.md("""
A topic laid out by hand, so that broker 4 holds replicas (a new topic may or may not land there):
""")
nb.code("""
from confluent_kafka.admin import NewTopic

orders = cluster.topic_name("orders")
if orders not in cluster.topics():
    layout = [[4, 2, 3], [1, 4, 2], [2, 3, 4], [3, 1, 2], [4, 3, 1], [2, 4, 3]]
    for f in cluster.admin().create_topics([NewTopic(orders, 6, replica_assignment=layout)]).values():
        f.result(timeout=30)
cluster.wait_for_isr(orders)
ops.placement(cluster, internal=True)
""")
nb.md("""
## Task 1 — `drain_plan(layout, racks, broker)`

`layout` lists the cluster's partitions as `[topic, partition, replicas]` (`replicas[0]` is the
preferred leader), `racks` maps broker id → rack, `broker` is the one to drain. Return the new
replica lists, in Kafka's reassignment format: a list of
`{"topic": ..., "partition": ..., "replicas": [...]}` for the partitions whose replicas (or their
order) change. Pure data in, pure data out: no cluster here.
""")
nb.code('''
def drain_plan(layout, racks, broker):
    ### BEGIN SOLUTION
    from collections import Counter

    others = sorted(b for b in racks if b != broker)
    load = Counter(r for _, _, replicas in layout for r in replicas if r != broker)
    new = {}
    for topic, partition, replicas in layout:
        replicas = list(replicas)
        if broker in replicas:
            keep = [r for r in replicas if r != broker]
            in_racks = {racks[r] for r in keep}
            # a rack the partition does not use yet first (the spread never shrinks), then the least loaded broker
            spare = min((b for b in others if b not in keep), key=lambda b: (racks[b] in in_racks, load[b], b))
            load[spare] += 1
            replicas = [spare if r == broker else r for r in replicas]
        new[(topic, partition)] = replicas
    # Preferred leaders: the partitions with the fewest choices pick first, each its replica leading least so far.
    leads = Counter()
    for key in sorted(new, key=lambda k: (len(new[k]), k)):
        replicas = new[key]
        first = min(replicas, key=lambda r: (leads[r], replicas.index(r)))
        leads[first] += 1
        new[key] = [first] + [r for r in replicas if r != first]
    old = {(t, p): list(r) for t, p, r in layout}
    return [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(new.items()) if r != old[(t, p)]]
    ### END SOLUTION
''')
nb.code("""
sample = [["orders", 0, [4, 2, 3]], ["orders", 1, [1, 4, 2]], ["orders", 2, [2, 3, 1]], ["payments", 0, [4, 1]]]
drain_plan(sample, {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a"}, 4)
""")
nb.md("""
## Task 2 — `drain(cluster, broker, throttle)`

Drain `broker` on a live cluster: read its layout and racks (`labkit.operations` has `partitions`
and `racks`), make your plan, run it as a reassignment capped at `throttle` bytes per second,
wait until it is complete, remove the throttle, and run a preferred leader election. Return when
all of it is done. (`labkit.operations` also has `Plan`, `reassign` — whose result you can
`wait()` for and `finish()` — `throttles` and `elect_preferred`; `cluster.tool(...)` runs Kafka's
own `kafka-reassign-partitions` if you prefer.)
""")
nb.code('''
def drain(cluster, broker, throttle):
    ### BEGIN SOLUTION
    layout = [[p.topic, p.partition, list(p.replicas)] for p in ops.partitions(cluster, internal=True)]
    plan = drain_plan(layout, ops.racks(cluster), broker)
    if plan:
        moving = ops.reassign(cluster, ops.Plan({(m["topic"], m["partition"]): tuple(m["replicas"]) for m in plan}),
                              throttle=throttle)
        moving.wait()
        moving.finish()          # kafka-reassign-partitions --verify: removes the throttles
    ops.elect_preferred(cluster)
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
drain(cluster, 4, throttle=5_000_000)
print("replicas left on broker 4:", ops.replicas_on(cluster, 4))
ops.placement(cluster, internal=True)
""", tags=("demo",))
nb.code("""
cluster.stop()
""")
nb.get_graded()
