"""The exercise notebook commit_strategy: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · A consumer loop that loses nothing", exercise="commit_strategy")

nb.md("""
# Exercise · A consumer loop that loses nothing

Write the loop of a consumer that may be killed at **any** moment — between two records, in the
middle of a batch, just before or after a commit — and still never skips a record: after a
restart, every record is processed at least once.

The grader runs your loop in a separate process, kills it with `SIGKILL` at two random points,
restarts it, and checks that nothing was skipped.

*About 20 minutes. Goes with lesson 06.*
""")
nb.md("""
## Setup
""")
nb.code("""
import time

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("commit_strategy")
""")
nb.md("""
## Task — `consume_loop(consumer, process, idle_seconds)`

You get a subscribed `Consumer` with **`enable.auto.commit=false`** and a `process(msg)` function.
Poll or consume records, call `process` on each, and commit so that a crash can never skip a
record. Return once no record has arrived for `idle_seconds` (after partitions were assigned).
Don't close the consumer: the caller does.
""")
nb.code('''
def consume_loop(consumer, process, idle_seconds: float = 3.0) -> None:
    ### BEGIN SOLUTION
    last = time.monotonic()
    while True:
        batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
        if not consumer.assignment():
            last = time.monotonic()
        if not batch:
            if time.monotonic() - last > idle_seconds:
                return
            continue
        last = time.monotonic()
        for msg in batch:
            process(msg)
        consumer.commit(asynchronous=False)   # only after the whole batch was processed
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.md("""
## Get graded

`labkit grade notebooks/exercises/commit_strategy.ipynb`
""")
nb.code("""
cluster.stop()
""")

