"""The exercise notebook range_assignor: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · The range assignor", exercise="range_assignor")

nb.md("""
# Exercise · The range assignor

When a consumer group rebalances, one member (the leader) runs an **assignor** that decides who
reads which partition. The oldest and still default-in-many-clients one is **range**. Implement
it; the grader compares your function with a reference on hundreds of layouts you have not seen
and with what real consumers (subscribed to different topics) were handed by the group.

*About 20 minutes. Goes with lesson 05.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("range_assignor")
""")
nb.md("""
## Task — `range_assign(members, subscriptions, partitions)`

* `members`: member ids, e.g. `["consumer-2", "consumer-1"]` (in any order);
* `subscriptions`: member id → the topics it subscribes to;
* `partitions`: topic → number of partitions.

Return member id → list of `(topic, partition)`. The rule works **topic by topic**: take the
members subscribed to the topic, **sorted by member id**; with `n` partitions and `m` members,
each gets `n // m` consecutive partitions and the first `n % m` members get one more. Every
member appears in the result, even if it gets nothing.
""")
nb.code('''
def range_assign(members, subscriptions, partitions):
    ### BEGIN SOLUTION
    result = {m: [] for m in members}
    for topic in sorted(partitions):
        subscribed = sorted(m for m in members if topic in subscriptions[m])
        if not subscribed:
            continue
        per, extra = divmod(partitions[topic], len(subscribed))
        start = 0
        for i, member in enumerate(subscribed):
            count = per + (1 if i < extra else 0)
            result[member] += [(topic, p) for p in range(start, start + count)]
            start += count
    return result
    ### END SOLUTION
''')
nb.code("""
range_assign(["C1", "C0"], {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
""")
nb.code("""
ex.check(globals())
""")
nb.md("""
Notice how range favours the first members: with many topics whose partition counts don't divide
evenly, `C0` collects one extra partition *per topic*. That imbalance is why round robin and the
sticky assignors exist (lesson 05).
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
