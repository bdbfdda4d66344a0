"""The exercise notebook idempotent_retry: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Fix the duplicating producer", exercise="idempotent_retry")

nb.md("""
# Exercise · Fix the duplicating producer

An order service uses the producer settings below. In production, whenever a broker stalls for a
few seconds, some orders are stored **twice** and customers get charged twice. Reproduce it, then
fix the configuration — without giving up on retries or on the short request timeout (the team
wants failures detected quickly).

*About 15 minutes. Goes with lesson 04.*
""")
nb.md("""
## Setup
""")
nb.code("""
import time

import labkit
from labkit.grading import exercise
from labkit.producing import counts_frame, produce_and_count

labkit.setup_check()
cluster = labkit.start_cluster()
ex = exercise("idempotent_retry")

BROKEN_CONFIG = {
    "acks": "all",
    "enable.idempotence": False,
    "request.timeout.ms": 1500,
    "retries": 10,
    "retry.backoff.ms": 200,
    "linger.ms": 5,
}
""")
nb.md("""
## See the problem

Stall a follower for a few seconds while producing (this is what the grader does too): the
leader has the records but cannot acknowledge them (`acks=all` waits for the follower), the
requests time out, the producer retries... and look at the *duplicates* column.
""")
nb.code("""
def stall_test(config):
    topic = cluster.create_topic(f"orders-{time.monotonic_ns()}", partitions=1, replication_factor=3)
    state = cluster.describe_topic(topic)[0]
    follower = next(r for r in state.replicas if r != state.leader)
    kwargs = {k.replace(".", "_"): v for k, v in config.items()}
    return produce_and_count(cluster, topic, count=400, pace=0.01, keyed=False, **kwargs, actions={
        150: lambda: cluster.pause_broker(follower), 400: lambda: (time.sleep(5), cluster.resume_broker(follower))})
""")
nb.code("""
counts_frame({"broken": stall_test(BROKEN_CONFIG)})
""", tags=("demo",))
nb.md("""
## Task — `FIXED_CONFIG`

Write the fixed configuration: keep `request.timeout.ms` at 1500 and retries on.
""")
nb.code('''
### BEGIN SOLUTION
FIXED_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "request.timeout.ms": 1500,
    "retries": 10,
    "retry.backoff.ms": 200,
    "linger.ms": 5,
}
### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.code("""
counts_frame({"fixed": stall_test(FIXED_CONFIG)})
""", tags=("demo",))
nb.code("""
cluster.stop()
""")
nb.get_graded()
