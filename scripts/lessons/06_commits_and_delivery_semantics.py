"""Source of notebooks/06_commits_and_delivery_semantics.ipynb: build it with `python scripts/build_notebooks.py 06`."""

from labkit.authoring import Notebook

nb = Notebook("06 · Commits and delivery semantics",
              summary="Committed offsets and lag, auto.offset.reset (earliest, latest, none), replaying a group, "
                      "five commit styles crashed mid-batch and counted, idempotent consumers, dead-letter topics.",
              minutes=35)

nb.md("""
# 06 · Commits and delivery semantics

A consumer group remembers how far it got by **committing offsets**. *When* a consumer commits,
relative to when it processes, decides what a crash costs: records lost, or records processed
twice. This lesson crashes real consumer processes in the middle of a batch and counts. Before
each count, lock in your own guess.

*About 35 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import time
import uuid

import pandas as pd
import plotly.express as px

from confluent_kafka import KafkaException

import labkit
from labkit import predict
from labkit.waiting import Wait
from labkit.workloads import COMMIT_STYLES, Group

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster()
run = uuid.uuid4().hex[:6]
orders = cluster.create_topic(f"orders-{run}", partitions=3)
ids = [f"order-{i:05d}" for i in range(600)]
producer = cluster.producer(enable_idempotence=True)
for order_id in ids:
    producer.produce(orders, key=order_id, value=order_id)
producer.flush(30)
cluster
""")

nb.md("""
## Committed offsets and lag

A commit stores, per partition, the offset of the **next** record the group should read. The
broker keeps commits in the internal topic `__consumer_offsets`. **Lag** is the distance from the
committed offset to the end of the log. Read 250 records, commit, and ask Kafka's own
`kafka-consumer-groups` tool:
""")
nb.code("""
group_id = f"reporting-{run}"
consumer = cluster.consumer(group_id, enable_auto_commit=False)
consumer.subscribe([orders])
read = 0
deadline = time.monotonic() + 30
while read < 250 and time.monotonic() < deadline:
    for msg in consumer.consume(num_messages=250 - read, timeout=1.0):
        read += msg.error() is None
consumer.commit(asynchronous=False)
consumer.close()
print(cluster.tool("kafka-consumer-groups", "--describe", "--group", group_id))
""")
nb.code("""
described = cluster.tool("kafka-consumer-groups", "--describe", "--group", group_id).lines
rows = [line.split() for line in described if line.startswith(group_id)]
print("committed + lag = log end, for every partition:", all(int(r[3]) + int(r[5]) == int(r[4]) for r in rows))
""", check=True)
nb.code("""
print("total lag:", sum(int(r[5]) for r in rows))
""")
nb.code("""
print("__consumer_offsets exists:", "__consumer_offsets" in cluster.topics(internal=True))
""", check=True)

nb.md("""
### auto.offset.reset: where a group without commits starts

A group that has never committed has no offset to resume from. `auto.offset.reset` decides:
`earliest` (the log start), `latest` (only records that arrive from now on), or `none` — fail
instead of guessing. Three brand-new groups on a topic that already holds 100 records, while new
records keep arriving (one each time the consumer polls), until each group has read a new one — or
failed:
""")
nb.code("""
latest_reads = predict.ask("06.latest-reads", "A brand-new group with auto.offset.reset=latest subscribes to a topic "
                           "holding 100 records while new ones keep arriving. How many of the 100 does it read?",
                           choices=[0, 50, 100])
latest_reads
""")
nb.code("""
backlog = cluster.create_topic(f"backlog-{run}", partitions=1)
for i in range(100):
    producer.produce(backlog, key=str(i), value=f"old-{i}")
producer.flush(10)

def new_group_reads(reset):
    consumer = cluster.consumer(f"fresh-{reset}-{uuid.uuid4().hex[:6]}", auto_offset_reset=reset,
                                enable_auto_commit=False)
    consumer.subscribe([backlog])
    values, errors = [], []

    def read_a_new_one():
        msg = consumer.poll(0.2)
        if msg is not None:
            (errors if msg.error() else values).append(msg.error().name() if msg.error() else msg.value())
        if consumer.assignment():                       # it is in: records keep arriving
            producer.produce(backlog, key="new", value=f"new-{time.time_ns()}")
            producer.poll(0)
        return bool(errors) or any(v.startswith(b"new") for v in values)

    try:
        Wait(f"the {reset} group to read a new record or fail", timeout=60, interval=0).until(read_a_new_one)
    finally:
        consumer.close()
    return {"old read": sum(v.startswith(b"old") for v in values), "new read": sum(v.startswith(b"new") for v in values),
            "errors": sorted(set(errors))}

resets = {reset: new_group_reads(reset) for reset in ("earliest", "latest", "error")}
pd.DataFrame(resets).T
""")
nb.md("""
librdkafka spells Java's `none` as `error`; it refuses `none` itself:
""")
nb.code("""
try:
    cluster.consumer(f"fresh-none-{run}", auto_offset_reset="none")
    refused = "accepted"
except KafkaException as exc:
    refused = exc.args[0].name()
print("auto.offset.reset=none:", refused)
""", check=True)
nb.code("""
print("earliest: read the 100 stored records:", resets["earliest"]["old read"] == 100)
print("latest: none of the stored records, only what arrived after it started:",
      resets["latest"]["old read"] == 0 and resets["latest"]["new read"] > 0)
print("error (Java's none): nothing read, an _AUTO_OFFSET_RESET error instead:",
      resets["error"]["old read"] + resets["error"]["new read"] == 0 and "_AUTO_OFFSET_RESET" in resets["error"]["errors"])
""", check=True)
nb.code("""
latest_reads.reveal(resets["latest"]["old read"],
                    "latest starts at the end of the log as it was when the group first fetched: the 100 stored "
                    "records are skipped for good, only new ones are read.")
""")
nb.md("""
`latest` is a common surprise: a new service deployed with it silently skips everything already
in the topic — and so does an old group whose commits expired (`offsets.retention.minutes`).
`none`/`error` makes that a visible error instead.

### Replaying

A group can be **reset** to re-read — Kafka's tool does it while the group is inactive:
""")
nb.code("""
print(cluster.tool("kafka-consumer-groups", "--reset-offsets", "--group", group_id, "--topic", orders,
                   "--to-earliest", "--execute"))
""")
nb.code("""
rows = [line.split() for line in cluster.tool("kafka-consumer-groups", "--describe", "--group", group_id).lines
        if line.startswith(group_id)]
print("after the reset the group's lag is the whole topic again:", sum(int(r[5]) for r in rows) == len(ids))
""", check=True)

nb.md("""
## Five ways to commit, each crashed mid-batch

Each run below starts a consumer **process** that reads batches of 50 records, "processes" each
one (10 ms of work, recorded in a durable log), and commits in one of these styles:
""")
nb.code("""
pd.DataFrame({"style": list(COMMIT_STYLES), "what it does": list(COMMIT_STYLES.values())})
""")
nb.md("""
The process kills itself with `SIGKILL` after record 235 — in the middle of its fifth batch, no
chance to commit or close. A second member of the same group then takes over from the last
committed offsets and finishes. Finally we count, per style, records never processed (*lost*)
and processed twice (*duplicated*). First, your guesses:
""")
nb.code("""
sync_twice = predict.ask("06.sync-duplicates", "Commit after each batch of 50 (sync), crash after record 235: how "
                         "many records are processed twice?", tolerance=10)
sync_twice
""")
nb.code("""
before_lost = predict.ask("06.before-lost", "Commit before processing each batch of 50, crash after record 235: how "
                          "many records are lost?", tolerance=10)
before_lost
""")
nb.code("""
auto_lost = predict.ask("06.auto-lost", "Auto-commit every second (the client commits what consume() returned), "
                        "crash after record 235: how many records are lost?", tolerance=10)
auto_lost
""")
nb.code("""
outcomes, groups = {}, {}
for style in COMMIT_STYLES:
    group = Group(cluster, orders, f"{style}-{run}")
    group.start_member("first", commit=style, crash_after=235, batch=50, process_ms=10)
    group.wait_dead("first", timeout=90)
    group.start_member("takeover", commit=style, batch=50, process_ms=0.5)
    group.wait_idle("takeover", quiet=2)   # caught up: nothing new processed for 2 s
    group.stop()
    outcomes[style], groups[style] = group.outcome(ids), group
table = pd.DataFrame({style: o.as_row() for style, o in outcomes.items()}).T
table
""")
nb.code("""
px.bar(table.reset_index().rename(columns={"index": "commit style"}), x="commit style", y=["lost", "duplicated"],
       barmode="group", height=360, title="One crash after record 235, mid-batch: what each commit style cost")
""")
nb.code("""
print("commit after processing (sync): nothing lost, some processed twice:",
      outcomes["sync"].lost == 0 and outcomes["sync"].duplicated > 0)
print("commit before processing: nothing twice, some lost:",
      outcomes["before"].duplicated == 0 and outcomes["before"].lost > 0)
print("every N records: at most N-1 processed twice:", outcomes["every_n"].lost == 0 and outcomes["every_n"].duplicated < 10)
""", check=True)
nb.code("""
sync_twice.reveal(outcomes["sync"].duplicated, "The batch in progress had not been committed: the takeover read it "
                  "again from the last commit, up to a batch of 50 minus the records it never reached.")
""")
nb.code("""
before_lost.reveal(outcomes["before"].lost, "The whole batch was committed before the crash; the records after 235 "
                   "in it were never processed, and the takeover started behind them.")
""")
nb.code("""
auto_lost.reveal(outcomes["auto"].lost, "Auto-commit commits what consume() has returned, processed or not, on its "
                 "own timer: depending on where the crash falls it loses records or replays them.")
""")
nb.md("""
* **Commit after processing** (`sync`, `every_n`) is **at-least-once**: a crash replays what was
  processed since the last commit. Committing more often (every N) shrinks the replay.
* **Asynchronous commits** are not retried when they fail (a later commit may already have moved
  on). And look at what `async` did here: `commit(asynchronous=True)` without explicit offsets
  commits the consumer's positions *when the request is sent* — by then the next batch may
  already have been fetched, so records can be **lost**. Pass the offsets you processed
  (`commit(offsets=[...])`) to make it at-least-once.
* **Commit before processing** is **at-most-once**: the crashed batch's unprocessed records are
  skipped for good.
* **Auto-commit** commits, in the background, the offsets of records `poll`/`consume` already
  *returned* — whatever the processing status. Depending on when the crash falls relative to
  the commit timer it loses records or replays them (run the cell again and compare).

Exactly-once *effects* need one of two things: transactions that cover the output and the
offsets together (lesson 04's exercise), or an **idempotent consumer**.

## The idempotent consumer

If each record carries a unique id and the consumer remembers which ids it has applied (in the
same store as its results), a replayed record is recognised and skipped. At-least-once delivery
plus deduplication gives exactly-once effects:
""")
nb.code("""
applied, skipped = set(), 0
for member in groups["sync"].members.values():      # the sync run: first member, then the takeover
    for order_id in member.processed():
        if order_id in applied:
            skipped += 1            # a replayed record: already applied, skip it
        else:
            applied.add(order_id)   # apply the effect and remember the id (atomically, in a real store)
print("effects applied:", len(applied), "| replays recognised and skipped:", skipped)
""")
nb.code("""
print("every order applied exactly once:", applied == set(ids))
print("replays skipped = duplicates delivered:", skipped == outcomes["sync"].duplicated)
""", check=True)

nb.md("""
## Poison records: retry topic and dead-letter topic

A record that can never be processed (bad JSON, a bug) must not block its partition forever.
A common pattern: on failure, publish it to a **retry topic** (processed later, maybe a few
times), and after too many attempts to a **dead-letter topic** for a human to inspect; then
commit and move on. 20 payments, two of them not JSON:
""")
nb.code("""
parked = predict.ask("06.dead-letters", "After the first pass and one retry pass, how many records are in the "
                     "dead-letter topic?", choices=[0, 2, 4, 20])
parked
""")
nb.code("""
payments = cluster.create_topic(f"payments-{run}", partitions=1)
retry_topic = cluster.create_topic(f"payments-retry-{run}", partitions=1)
dead_letters = cluster.create_topic(f"payments-dlt-{run}", partitions=1)
p = cluster.producer()
for i in range(20):
    p.produce(payments, value=json.dumps({"id": i, "amount": i * 10}) if i not in (7, 13) else b"{not json")
p.flush(10)

def process(value):
    return json.loads(value)["amount"]          # raises on a poison record

def drain(topic, attempt):
    consumer = cluster.consumer(f"payments-app-{attempt}-{run}", enable_auto_commit=False)
    consumer.subscribe([topic])
    ok, idle_until = 0, time.monotonic() + 8
    while time.monotonic() < idle_until:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        idle_until = time.monotonic() + 3
        try:
            process(msg.value())
            ok += 1
        except ValueError:
            target = retry_topic if attempt == 0 else dead_letters
            p.produce(target, value=msg.value(), headers={"error": "invalid JSON", "attempt": str(attempt + 1)})
            p.flush(10)
        consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    return ok

processed_ok = drain(payments, attempt=0) + drain(retry_topic, attempt=1)
print("processed:", processed_ok, "| in the retry topic:", len(cluster.read_all(retry_topic)),
      "| dead letters:", len(cluster.read_all(dead_letters)))
""")
nb.code("""
print("good records processed, poison ones parked:", processed_ok == 18 and len(cluster.read_all(dead_letters)) == 2)
""", check=True)
nb.code("""
parked.reveal(len(cluster.read_all(dead_letters)), "Two records are not JSON: each failed once (to the retry topic) "
              "and again there (to the dead-letter topic); the other 18 were processed at the first attempt.")
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| commits live in `__consumer_offsets`; lag = log end − committed | `kafka-consumer-groups --describe` |
| `auto.offset.reset` decides where a group without commits starts | earliest read the 100 stored, latest none of them (only new ones), `error` (Java's `none`) an error |
| a group can be reset to replay | `--reset-offsets --to-earliest` |
| commit after processing = at least once; before = at most once | a consumer SIGKILLed mid-batch, per style |
| auto-commit's outcome depends on timing | lost or duplicated, run to run |
| an idempotent consumer turns duplicates into no-ops | every order applied once despite replays |
| poison records go to retry and dead-letter topics | 18 processed, 2 parked |
""")
nb.code("""
predict.summary("06")
""")
nb.code("""
del producer, p
cluster.stop()
""")

