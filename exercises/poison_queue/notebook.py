"""The exercise notebook poison_queue: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · A worker pool for a job queue", exercise="poison_queue")

nb.md("""
# Exercise · A worker pool for a job queue

A team moves its job queue onto Kafka: one topic of jobs, a **share group** of workers (lesson 14),
each job acknowledged on its own. Jobs sometimes fail. Most failures are transient — the next
attempt works — but some jobs are *poison*: they fail every time. Write the worker.

The grader runs several copies of your worker at once on a topic of **one** partition, with jobs it
chooses at grading time. It checks, from its own log of the work and from the broker's own record of
every acknowledgement (`__share_group_state`), that every good job gets done, that poison jobs are
rejected within the number of attempts allowed, that the workers share the partition — and it kills
a worker in the middle of a job: that job must not be lost.

*About 30 minutes. Goes with lesson 14.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import logging
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("poison_queue")

# librdkafka logs a "Preview" warning for every share consumer: give its lines to Python logging, not the cell
rdkafka_log = logging.getLogger("librdkafka")
rdkafka_log.addHandler(logging.NullHandler())
rdkafka_log.propagate = False
""")
nb.md("""
## Task — `run_worker(bootstrap, topic, group, do_job, max_attempts, idle_seconds)`

Create a `ShareConsumer` in share group `group` with **explicit** acknowledgement
(`"share.acknowledgement.mode": "explicit"`, and `"logger": rdkafka_log`), subscribe to `topic`,
and work through its jobs:

* call `do_job(msg.value())` for each record: it returns when the job is done and raises an
  exception when it failed;
* a job done: `ACCEPT`. A job that failed: `RELEASE`, so that it is tried again, by any worker —
  unless it has been delivered `max_attempts` times already (`msg.delivery_count()`): then it is
  poison, `REJECT` it;
* **never acknowledge a job before `do_job` returned** for it: an acknowledgement is final, and a
  worker can be killed at any moment — `commit_sync()` after acknowledging sends them;
* take few jobs per poll (`max.poll.records`): the jobs a worker holds wait for *that* worker, while
  the others may be idle;
* return once `idle_seconds` passed since your worker's last job, and close the consumer.

The group reads from the earliest job (`share.auto.offset.reset=earliest`): whoever runs the pool sets
it, as the cell below does for its own group.
""")
nb.code('''
def run_worker(bootstrap: str, topic: str, group: str, do_job, max_attempts: int = 3,
               idle_seconds: float = 5.0) -> None:
    ### BEGIN SOLUTION
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": rdkafka_log,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 1})
    consumer.subscribe([topic])
    last_job = None
    try:
        while last_job is None or time.monotonic() - last_job < idle_seconds:
            batch = [msg for msg in consumer.poll(0.5) if msg.error() is None]
            for msg in batch:
                try:
                    do_job(msg.value())
                    outcome = AcknowledgeType.ACCEPT                 # only once the work is done
                except Exception:
                    poison = msg.delivery_count() >= max_attempts
                    outcome = AcknowledgeType.REJECT if poison else AcknowledgeType.RELEASE
                consumer.acknowledge(msg, outcome)
                last_job = time.monotonic()
            if batch:
                consumer.commit_sync(10)
    finally:
        consumer.close()
    ### END SOLUTION
''')
nb.md("""
Try it: ten jobs on a topic of one partition — two fail at their first attempt, one always — worked
by your function in this kernel. Each line of the table is one attempt.
""")
nb.code("""
import pandas as pd
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

demo_topic = cluster.create_topic(f"demo-jobs-{time.time_ns()}", partitions=1)
demo_group = f"demo-workers-{time.time_ns()}"
earliest = ConfigResource(ResourceType.GROUP, demo_group, incremental_configs=[
    ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
cluster.admin().incremental_alter_configs([earliest])[earliest].result()
producer = cluster.producer(batch_num_messages=1)   # one job per batch: each can go to a different worker
for i in range(10):
    producer.produce(demo_topic, value=json.dumps({"id": f"job-{i}", "fails": {3: 1, 6: 1, 8: 100}.get(i, 0)}))
producer.flush(10)
attempts = []

def demo_job(value):
    job = json.loads(value)
    attempts.append({"job": job["id"], "attempt": sum(a["job"] == job["id"] for a in attempts) + 1})
    attempts[-1]["failed"] = attempts[-1]["attempt"] <= job["fails"]
    if attempts[-1]["failed"]:
        raise RuntimeError(f"{job['id']} failed")

run_worker(cluster.bootstrap_servers, demo_topic, demo_group, demo_job, max_attempts=3, idle_seconds=3)
pd.DataFrame(attempts).set_index("job")
""", tags=("demo",))
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
