"""Source of notebooks/06_commits_and_delivery_semantics.ipynb: build it with `python scripts/build_notebooks.py 06`."""

from labkit.authoring import Notebook

nb = Notebook("06 · Commits and delivery semantics",
              summary="Committed offsets and lag, auto.offset.reset (earliest, latest, none), replaying a group, "
                      "records per poll and max.poll.interval.ms, five commit styles crashed mid-batch and "
                      "counted, idempotent consumers, dead-letter topics.",
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
from labkit import groupviz, predict
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

A group that has never committed has no offset to resume from. The consumer setting
`auto.offset.reset` decides where it starts; Java's client takes `earliest`, `latest` or `none`.
Three brand-new groups, one per setting, on a topic that already holds a hundred records, while
new records keep arriving (one each time the consumer polls), until each group has read a new
one — or failed:
""")
nb.code("""
latest_reads = predict.ask("06.latest-reads", "A brand-new group with auto.offset.reset=latest subscribes to a topic "
                           "holding 100 records while new ones keep arriving. How many of the 100 does it read?",
                           choices=[0, 50, 100])
latest_reads
""")
nb.code("""
backlog = cluster.create_topic(f"backlog-{uuid.uuid4().hex[:6]}", partitions=1)   # a new one each run of the cell
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
                    "records are skipped for good, only new ones are read.",
                    expected=0)
""")
nb.md("""
* `earliest` starts at the log start offset: everything the topic still holds.
* `latest` starts at the end of the log as it is when the group first fetches: only records that
  arrive from then on.
* `none` (librdkafka: `error`) refuses to guess: the consumer gets an error instead of records.

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
## The poll loop: records per poll, and the time between polls

A consumer application is a loop: ask for records, process them, commit, ask again. Two settings
shape it. How many records one call hands over — Java's `max.poll.records` (default 500) — and
how long the application may take between two calls before the group gives up on it —
`max.poll.interval.ms` (default 5 minutes, in both clients).

In the Python client, `poll()` returns one record and `consume(num_messages=N)` up to `N`. Ask
for 50 at a time, from a consumer that also sets `max.poll.records=7`:
""")
nb.code("""
per_call = cluster.consumer(f"per-call-{uuid.uuid4().hex[:6]}", enable_auto_commit=False, max_poll_records=7)
per_call.subscribe([orders])
sizes = []
try:
    Wait("five non-empty consume() calls", timeout=60, interval=0).until(
        lambda: sizes.append(len(per_call.consume(num_messages=50, timeout=2.0))) or len([n for n in sizes if n]) >= 5)
finally:
    per_call.close()
print("records per consume(num_messages=50) call:", [n for n in sizes if n])
""")
nb.code("""
returned = [n for n in sizes if n]
print("never more than num_messages:", max(returned) <= 50)
print("max.poll.records=7 did not cap it:", max(returned) > 7)
""", check=True)
nb.md("""
librdkafka accepts the name `max.poll.records`, but only its share consumer (lesson 14) uses it;
for a classic consumer the cap is the argument of `consume()`. Either way the cap is what bounds
the time between two calls: a batch of `N` records takes `N` × the time per record.

### A batch that takes longer than max.poll.interval.ms

The member below polls a batch of 5 orders and then processes them slowly — longer than its
`max.poll.interval.ms` of 4 seconds (it keeps working until the group coordinator has logged that
the member left, as a stuck batch would). Then it commits.
""")
nb.code("""
evicted_commit = predict.ask("06.evicted-commit", "A member processes a batch for longer than max.poll.interval.ms, "
                             "then commits the batch. Its commit:", choices=["succeeds", "fails", "waits"])
evicted_commit
""")
nb.code("""
import os

slow_group = f"slow-{uuid.uuid4().hex[:6]}"
interval_ms = 4000
slow = cluster.consumer(slow_group, enable_auto_commit=False, max_poll_interval_ms=interval_ms,
                        session_timeout_ms=3000, heartbeat_interval_ms=500)   # librdkafka: session <= poll interval
slow.subscribe([orders])
batch, last_poll = [], None


def first_batch():
    global last_poll
    last_poll = time.time()               # when the last poll began (librdkafka counts from its end: later)
    batch.extend(m for m in slow.consume(num_messages=5 - len(batch), timeout=1.0) if not m.error())
    return len(batch) == 5


Wait("the slow member's first batch", timeout=60, interval=0).until(first_batch)
member = slow.memberid()


# The stuck handler: it works on the batch and returns only once the group coordinator (one broker) has logged
# that the member is out of the group: it left ("Member <id> has left group through explicit `LeaveGroup` ..."),
# or, had its client not reached the coordinator then, its session expired.
processed_slowly = [msg.value().decode() for msg in batch]
left = Wait("the coordinator to log that the slow member is out of its group", timeout=120, interval=0.2).until(
    lambda: groupviz.member_removed(cluster, slow_group, member))
try:
    slow.commit(asynchronous=False)
    commit_outcome = "committed"
except KafkaException as exc:
    commit_outcome = exc.args[0].name()
next_poll = slow.poll(1.0)
slow.close()

waited = left.t - last_poll           # the line's own time ([HH:MM:SS,mmm], this machine's clock)
print(left.line[:230])
print(f"logged {waited:.1f} s after the member's last poll began (max.poll.interval.ms = {interval_ms / 1000:g} s; "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores): {left.why}")
print("the commit after the batch:", commit_outcome)
print("the member's next poll:", next_poll.error().name() if next_poll is not None and next_poll.error() else next_poll)
""")
nb.code("""
print("the member left no sooner than max.poll.interval.ms after its last poll:", waited >= interval_ms / 1000 - 0.01)
print("then its commit of the batch failed:", commit_outcome != "committed")
""", check=True)
nb.code("""
evicted_commit.reveal("succeeds" if commit_outcome == "committed" else "fails",
                      f"{commit_outcome}: librdkafka left the group on the member's behalf when the interval ran out "
                      f"(the coordinator logged: {left.why}), so the partitions it had are no longer its to commit.",
                      expected="fails")
""")
nb.md("""
Who processes those 5 orders now? Another member of the group starts where the group's last
commit left it — and the group has none:
""")
nb.code("""
takeover = cluster.consumer(slow_group, enable_auto_commit=False)
takeover.subscribe([orders])
again = []
try:
    Wait("the takeover to read the slow batch", timeout=60, interval=0).until(
        lambda: again.extend(m.value().decode() for m in takeover.consume(num_messages=50, timeout=1.0)
                             if not m.error()) or set(processed_slowly) <= set(again))
finally:
    takeover.close()
print("the slow batch, processed again by the takeover:", sorted(set(processed_slowly) & set(again)))
""")
nb.code("""
print("every record of the evicted batch was delivered again:", set(processed_slowly) <= set(again))
""", check=True)
nb.md("""
* `max.poll.interval.ms` is enforced by the **client**: librdkafka's own timer notices that the
  application has not called `poll()`/`consume()` for that long, stops heartbeating, leaves the
  group (the broker logs an explicit `LeaveGroup`; had the client lost its coordinator connection
  just then, the broker would log the session expiring instead), and reports `_MAX_POLL_EXCEEDED`
  at the next poll. The Java
  consumer does the same. Heartbeats (a background thread, `session.timeout.ms`) only prove the
  *process* is alive; this timer proves the *loop* still turns.
* The batch's records go to another member, which processes them again: a slow batch costs
  duplicates, like a crash.
* So size batches to the slowest processing you expect: fewer records per call (`num_messages`,
  Java's `max.poll.records`) or a larger `max.poll.interval.ms`.
""")

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
outcomes, groups, attempt = {}, {}, uuid.uuid4().hex[:6]     # new groups each run of the cell
for style in COMMIT_STYLES:
    group = Group(cluster, orders, f"{style}-{attempt}")
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
tag = uuid.uuid4().hex[:6]                      # new topics each run of the cell
payments = cluster.create_topic(f"payments-{tag}", partitions=1)
retry_topic = cluster.create_topic(f"payments-retry-{tag}", partitions=1)
dead_letters = cluster.create_topic(f"payments-dlt-{tag}", partitions=1)
p = cluster.producer()
for i in range(20):
    p.produce(payments, value=json.dumps({"id": i, "amount": i * 10}) if i not in (7, 13) else b"{not json")
p.flush(10)

def process(value):
    return json.loads(value)["amount"]          # raises on a poison record

def drain(topic, attempt):
    \"\"\"Process `topic` from its start to where it ends now; returns how many records were processed.\"\"\"
    end = cluster.describe_topic(topic)[0].high_watermark
    consumer = cluster.consumer(f"payments-app-{attempt}-{tag}", enable_auto_commit=False)
    consumer.subscribe([topic])
    done = {"processed": 0, "next": 0}

    def handle_one():
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            try:
                process(msg.value())
                done["processed"] += 1
            except ValueError:
                target = retry_topic if attempt == 0 else dead_letters
                p.produce(target, value=msg.value(), headers={"error": "invalid JSON", "attempt": str(attempt + 1)})
                p.flush(10)
            consumer.commit(message=msg, asynchronous=False)
            done["next"] = msg.offset() + 1
        return done["next"] >= end

    try:
        Wait(f"{topic} read to its end", timeout=60, interval=0).until(handle_one)
    finally:
        consumer.close()
    return done["processed"]

processed_ok = drain(payments, attempt=0) + drain(retry_topic, attempt=1)
print("processed:", processed_ok, "| in the retry topic:", len(cluster.read_all(retry_topic)),
      "| dead letters:", len(cluster.read_all(dead_letters)))
""")
nb.code("""
print("good records processed, poison ones parked:", processed_ok == 18 and len(cluster.read_all(dead_letters)) == 2)
""", check=True)
nb.code("""
parked.reveal(len(cluster.read_all(dead_letters)), "Two records are not JSON: each failed once (to the retry topic) "
              "and again there (to the dead-letter topic); the other 18 were processed at the first attempt.",
              expected=2)
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| commits live in `__consumer_offsets`; lag = log end − committed | `kafka-consumer-groups --describe` |
| `auto.offset.reset` decides where a group without commits starts | earliest read the 100 stored, latest none of them (only new ones), `error` (Java's `none`) an error |
| a group can be reset to replay | `--reset-offsets --to-earliest` |
| records per call are capped by `consume(num_messages=N)` (Java: `max.poll.records`) | batches of at most 50, `max.poll.records=7` ignored |
| a loop slower than `max.poll.interval.ms` loses its membership, its commit, and its batch to another member | the coordinator's line taking it out of the group, the failed commit, the batch read again |
| commit after processing = at least once; before = at most once | a consumer SIGKILLed mid-batch, per style |
| auto-commit's outcome depends on timing | lost or duplicated, run to run |
| an idempotent consumer turns duplicates into no-ops | every order applied once despite replays |
| poison records go to retry and dead-letter topics | 18 processed, 2 parked |
""")
nb.code("""
predict.summary("06")
""")
nb.code("""
producer.close()         # every client closed before the brokers go
p.close()
cluster.stop()
""")

