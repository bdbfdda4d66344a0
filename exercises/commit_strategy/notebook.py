"""The exercise notebook commit_strategy: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · A consumer loop that loses nothing", exercise="commit_strategy")

nb.md("""
# Exercise · A consumer loop that loses nothing

Write the loop of a consumer that may be killed at **any** moment — between two records, in the
middle of a batch, just before or after a commit — and still never skips a record: after a
restart, every record is processed at least once. Replays are the price of that guarantee, so
keep them small: a crash may make the loop process again only the batch it was working on.

The grader runs your loop in a separate process and kills it with `SIGKILL` twice, each time at a
moment when records are in flight (processed but not yet committed, or the other way round); it
restarts the loop and checks, from its log and from the offsets your group committed on the
broker, that no record was skipped and that each crash replayed at most one batch (100 records).

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
record — and replays little: work in batches of at most 100 records and commit each batch once it
is processed. Return once no record has arrived for `idle_seconds` (after partitions were
assigned). Don't close the consumer: the caller does.
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
nb.code("""
cluster.stop()
""")
nb.get_graded()
