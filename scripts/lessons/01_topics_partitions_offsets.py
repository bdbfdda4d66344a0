"""Source of notebooks/01_topics_partitions_offsets.ipynb: build it with `python scripts/build_notebooks.py 01`."""

from labkit.authoring import Notebook

nb = Notebook("01 · Topics, partitions, offsets",
              summary="A topic as partitioned logs: offsets, ordering, immutable records, the segment files "
                      "and their indexes on disk, retention and compaction happening live.",
              minutes=35)

nb.md("""
# 01 · Topics, partitions, offsets

A Kafka topic is not a queue: it is split into partitions, and kept as **append-only logs** on the
brokers' disks. This lesson shows what that means — offsets handed out by the broker, ordering
that holds only inside a partition, records that stay after being read and never change — and
then opens a broker's data directory to read its segments and their indexes, and to watch
segments roll, expire and get compacted.

*About 35 minutes. Every cell is safe to re-run.*
""")

nb.md("""
## Setup

The cluster for this lesson checks retention and compaction every second (the defaults are
minutes), so you can watch them happen.
""")
nb.code("""
import json
import time
import uuid

import pandas as pd
import plotly.express as px

import labkit
from labkit import predict
from labkit.segments import (batches_frame, dump_indexed_segment, dump_segment, list_segments, records_frame,
                             segment_files)
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                 # running this cell again starts afresh
cluster = labkit.start_cluster(log_retention_check_interval_ms=1000, log_cleaner_backoff_ms=500)
run = uuid.uuid4().hex[:6]         # names unique to this run
cluster
""")

nb.md("""
## A topic is a set of logs

Create a topic with three partitions and write 30 click events for five users (the user is the
key). The delivery report of each record says where the broker put it: a **partition** and an
**offset**.

Before you run it: how are the offsets counted?
""")
nb.code("""
q_offsets = predict.ask("01.offsets", "30 records go to 3 partitions. Does the broker count offsets 0, 1, 2, ... "
                        "in each partition, or with one counter across the topic (0 to 29)?",
                        choices=["per partition", "across the topic"])
q_offsets
""")
nb.code("""
clicks = cluster.create_topic(f"clicks-{uuid.uuid4().hex[:6]}", partitions=3)   # a new topic each time the cell runs
producer = cluster.producer(acks="all")
placed = []

def on_delivery(err, msg):
    if err is not None:
        print("failed:", err)
    else:
        placed.append({"seq": json.loads(msg.value())["seq"], "user": msg.key().decode(),
                       "partition": msg.partition(), "offset": msg.offset()})

users = ["ana", "ben", "chen", "dara", "eli"]
for seq in range(30):
    producer.produce(clicks, key=users[seq % 5], value=json.dumps({"seq": seq, "page": f"/p/{seq % 7}"}),
                     on_delivery=on_delivery)
producer.flush(10)
placed = pd.DataFrame(placed).sort_values("seq")
placed.pivot_table(index="offset", columns="partition", values="seq", aggfunc="first")
""")
nb.md("""
Each column is one partition's log; the numbers in it are the events' sequence numbers. Offsets
start at 0 in **every** partition and count up by one: the broker assigns them when it appends.
""")
nb.code("""
per_partition = placed.groupby("partition")["offset"].apply(list)
print("offsets in each partition are 0, 1, 2, ... with no gaps:",
      all(offs == list(range(len(offs))) for offs in per_partition))
""", check=True)
nb.code("""
q_offsets.reveal("per partition" if all(offs[0] == 0 for offs in per_partition) else "across the topic",
                 "Each partition is a log of its own; the offset is a position in that log, not in the topic.",
                 expected="per partition")
""")

nb.md("""
## Order within a partition, not across

Read the topic back. Within one partition, records come in exactly the order they were
appended. Across partitions there is no order at all: the consumer interleaves them however its
fetches return.
""")
nb.code("""
consumer = cluster.consumer(f"readers-{uuid.uuid4().hex[:6]}")   # a new group: it starts from the beginning
consumer.subscribe([clicks])
seen = []

def read_one():
    msg = consumer.poll(1.0)
    if msg is not None and not msg.error():
        seen.append((msg.partition(), json.loads(msg.value())["seq"]))
    return len(seen) >= 30

try:
    Wait("the 30 clicks", timeout=60, interval=0).until(read_one)
finally:
    consumer.close()

print("order the consumer saw (seq):", [s for _, s in seen])
""")
nb.code("""
in_order = all([s for p, s in seen if p == part] == sorted(s for p, s in seen if p == part) for part in range(3))
print("records read:", len(seen))
print("each partition read in write order:", in_order)
""", check=True)
nb.md("""
If you need events in order, they must share a partition — which is what keys are for
(lesson 02). A user's clicks all carry the same key, so they share a partition and stay in order.
""")

nb.md("""
## Reading does not remove anything

Kafka consumers *pull* records and remember how far they got (their committed offset); the
records stay. A second consumer group reads the same 30 records again — producers know nothing
about how many consumers there are.
""")
nb.code("""
again = cluster.read_all(clicks)
print("a second reader got", len(again), "records; the topic still holds",
      sum(p.high_watermark for p in cluster.describe_topic(clicks).partitions))
""", check=True)

nb.md("""
## Changing a record

An accounts topic holds ana's e-mail address, keyed by her name:
""")
nb.code("""
accounts = cluster.create_topic(f"accounts-{uuid.uuid4().hex[:6]}", partitions=1)   # a new topic each run
producer.produce(accounts, key="ana", value=json.dumps({"email": "ana@old.example"}))
producer.flush(10)
cluster.read_all(accounts)
""")
nb.md("""
She changes her address, and the accounts service writes the new one: a record with the same key.
""")
nb.code("""
q_update = predict.ask("01.update", "ana's new address is written (a new record, same key). Is the record with "
                       "her old address gone from the topic?", kind="yes/no")
q_update
""")
nb.code("""
producer.produce(accounts, key="ana", value=json.dumps({"email": "ana@new.example"}))
producer.flush(10)
history = cluster.read_all(accounts)
pd.DataFrame([{"offset": r.offset, "key": r.key_text, "value": r.value_text} for r in history])
""")
nb.code("""
print("records stored for ana:", sum(r.key_text == "ana" for r in history))
print("the old address is still stored, at its old offset:", history[0].offset == 0 and "old" in history[0].value_text)
print("the update was appended after it, at the next offset:",
      history[-1].offset == history[-2].offset + 1 and "new" in history[-1].value_text)
""", check=True)
nb.code("""
q_update.reveal(not any("old" in r.value_text for r in history),
                "Kafka never rewrites a record: the update is appended, the old version stays readable.")
""")
nb.md("""
**Records are immutable**: a stored record never changes, the log is append-only, and an
"update" is a new record with the same key. A consumer that wants "the current address" keeps
the *last* value it read per key. The old
version only leaves the log when **retention** deletes its whole segment, or when **compaction**
keeps just the newest record per key — both happen live further down.
""")

nb.md("""
## On disk: a directory per partition

Every broker has a data directory (`log.dirs`). Inside it, one directory per partition replica
it stores, named `<topic>-<partition>`:
""")
nb.code("""
data_dir = cluster.log_dir(1)
print(data_dir)
sorted(p.name for p in data_dir.iterdir() if p.name.startswith(clicks))
""")
nb.md("""
And in a partition's directory, **segments**: a `.log` file with the records, an `.index`
(offset → byte position) and a `.timeindex` (timestamp → offset), all named after the segment's
**base offset** — its first offset.
""")
nb.code("""
list_segments(cluster, clicks, partition=0)
""")
nb.md("""
The index files of the *active* segment are pre-allocated at 10 MB (they are sparse, so they
take almost no real disk space) and trimmed to size when the segment is closed.
""")
nb.md("""
The `.log` file is a sequence of **record batches**, exactly as the producer sent them. Kafka
ships a tool to print them, `kafka-dump-log`; `labkit.segments.dump_segment` runs it (from the
lab's Kafka jars) and turns its output into a table:
""")
nb.code("""
batches = dump_segment(cluster, segment_files(cluster, clicks, partition=0)[0])
batches_frame(batches)
""")
nb.code("""
records_frame(batches).head(6)
""")
nb.md("""
Each batch records its offsets, its producer id and sequence numbers (used by idempotent
producers, lesson 04), whether it belongs to a transaction, and its compression.
""")

nb.md("""
### Segment indexes: finding an offset, or a time, without reading the log

A consumer asks for "offset 537" or "the first record after 10:42"; the broker does not read a
segment from its start to find it. Beside every `.log` are two **sparse** indexes:

* `.index` maps an offset to the **byte position** in the `.log` where the batch holding it starts;
* `.timeindex` maps a timestamp to an offset (the largest timestamp seen up to that offset).

A new topic gets 1,000 sensor readings, one per second of the last ~17 minutes (the producer sets
each record's timestamp), in batches of 10 records of about 200 bytes.
""")
nb.code("""
q_index = predict.ask("01.index-entries", "1,000 records in batches of 10, about 190 KB, in the open segment. "
                      "How many entries will its offset index (.index) get: one per record (1,000), one per "
                      "batch (100), one per ~4 KB of log (a few dozen), or none until the segment is closed?",
                      choices=["one per record", "one per batch", "one per ~4 KB", "none yet"])
q_index
""")
nb.code("""
readings = cluster.create_topic(f"readings-{uuid.uuid4().hex[:6]}", partitions=1)   # a new topic each run
p = cluster.producer(batch_num_messages=10, linger_ms=5)
start_ms = int(time.time() * 1000) - 1_000_000          # one reading per second, ending about now
for i in range(1000):
    p.produce(readings, key=f"sensor-{i % 10}", value=json.dumps({"reading": i, "pad": "x" * 150}),
              timestamp=start_ms + i * 1000)
    p.poll(0)
p.flush(10)

segment = dump_indexed_segment(cluster, segment_files(cluster, readings)[0])   # kafka-dump-log on all 3 files
print(f"{segment.records} records in {len(segment.batches)} batches; "
      f".index: {len(segment.offsets)} entries, .timeindex: {len(segment.times)} entries")
pd.DataFrame(segment.offsets).head(5)
""")
nb.code("""
n = len(segment.offsets)
q_index.reveal("one per record" if n == segment.records else "one per batch" if n == len(segment.batches)
               else "none yet" if n == 0 else "one per ~4 KB",
               f"{n} entries for {len(segment.batches)} batches: the broker adds one each time more than "
               "index.interval.bytes (4,096) of log were written since the last, even in the open segment.",
               expected="one per ~4 KB")
""")
nb.code("""
batch_starts = {b.last_offset: b.position for b in segment.batches}
print("the offset index is sparse (fewer entries than batches):", 0 < len(segment.offsets) < len(segment.batches))
print("each entry points at the first byte of the batch that holds its offset:",
      all(batch_starts.get(e.offset) == e.position for e in segment.offsets))
""", check=True)
nb.md("""
**Lookup by offset.** To serve a fetch from offset 537, the broker binary-searches `.index` for
the last entry at or below 537, jumps to that byte of the `.log` and reads batch headers forward
until it reaches the batch holding 537 — never more than about 4 KB of reading. The fetch
returns that whole batch; the consumer skips the records before 537.
`labkit.segments` replays the lookup on the dumped files:
""")
nb.code("""
by_offset = segment.lookup_offset(537)
print(by_offset)
""")
nb.md("""
**Lookup by time.** `offsets_for_times` (what `kafka-consumer-groups --reset-offsets --to-datetime`
uses) goes through `.timeindex` first: the last entry at or below the timestamp gives an offset,
`.index` gives its byte position, and the broker reads forward to the first record whose timestamp
is at or after the one asked for. Ask for half a second after reading 537 was taken:
""")
nb.code("""
wanted = start_ms + 537_500
by_time = segment.lookup_time(wanted)
print(by_time)
""")
nb.code("""
from confluent_kafka import TopicPartition

reader = cluster.consumer(f"lookups-{run}", enable_auto_commit=False)
try:
    [answer] = reader.offsets_for_times([TopicPartition(readings, 0, wanted)], timeout=30)
    reader.assign([TopicPartition(readings, 0, 537)])
    [fetched] = reader.consume(num_messages=1, timeout=60) or [None]   # returns with the first record
finally:
    reader.close()
print("broker: first record at or after reading 537 + 0.5 s is offset", answer.offset)
print("the index lookup by time finds the broker's answer:", by_time.offset == answer.offset)
print("a fetch from offset 537 returns record 537 first:",
      fetched is not None and fetched.offset() == 537 == json.loads(fetched.value())["reading"])
print("the index lookup by offset lands on it too:", by_offset.offset == 537)
""", check=True)

nb.md("""
## Segments roll

A partition's newest segment is the **active** one: appends go there. When it reaches
`segment.bytes` (or gets older than `segment.ms`), the broker closes it and starts a new one,
named after the next offset. Kafka 4 accepts `segment.bytes` down to 1 MiB; write 3.5 MB:
""")
nb.code("""
rolling = cluster.create_topic(f"rolling-{uuid.uuid4().hex[:6]}", partitions=1, config={"segment.bytes": 1_048_576})
p = cluster.producer(linger_ms=20, compression_type="none")

def write_3500(topic):
    for i in range(3500):
        p.produce(topic, key=f"k{i}", value=b"x" * 1000)
        p.poll(0)
    p.flush(30)

write_3500(rolling)
logs = list_segments(cluster, rolling).query("kind == 'log'")
logs
""")
nb.code("""
print("more than one segment:", len(logs) > 1, "| base offsets increase:", list(logs.base_offset) == sorted(logs.base_offset))
""", check=True)
nb.code("""
px.bar(logs, x="file", y="bytes", title="Segment files of the partition (the last one is active)", height=320)
""")

nb.md("""
## Retention

Retention (`retention.ms`, `retention.bytes`) removes old records, and moves the partition's
**log start offset** (its first readable offset) forward. Shorten this topic's retention to
5 seconds, keep writing a little (a fresh record every half second), and watch.
""")
nb.code("""
q_retention = predict.ask("01.retention", "Retention drops to 5 s, and the 3,500 records above will soon be "
                          "older than that. Once retention has run, can any of them still be read?", kind="yes/no")
q_retention
""")
nb.code("""
import threading

if len(list_segments(cluster, rolling).query("kind == 'log'")) < 2:   # run again: first the segments to expire
    write_3500(rolling)
start_before = cluster.describe_topic(rolling)[0].log_start_offset
writing = threading.Event()

def keep_writing():                    # a fresh record every half second, beside whatever the cell does
    while writing.is_set():
        p.produce(rolling, key="tick", value=b"still writing")
        p.poll(0)
        time.sleep(0.5)

writing.set()
ticker = threading.Thread(target=keep_writing, daemon=True)
ticker.start()
try:
    cluster.alter_configs("topic", rolling, {"retention.ms": 5000})      # returns once every broker has it
    print(cluster.tool("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", rolling))
    Wait("retention to move the log start offset", timeout=180, interval=0.5).until(
        lambda: cluster.describe_topic(rolling)[0].log_start_offset > start_before)
    # retention back to Kafka's default (7 days) at once: nothing more goes while we look at what is left
    cluster.alter_configs("topic", rolling, {"retention.ms": 7 * 24 * 3600 * 1000})
finally:
    writing.clear()
    ticker.join()
    p.flush(10)
after = cluster.describe_topic(rolling)[0]
print(f"log start offset: {start_before} -> {after.log_start_offset}   (high watermark {after.high_watermark})")
list_segments(cluster, rolling).query("kind == 'log'")
""")
nb.code("""
kept = cluster.read_all(rolling)
old_kept = [r for r in kept if r.key != b"tick"]
print("old segments deleted, log start moved forward:", after.log_start_offset > start_before)
print("the newest records are still readable:", kept[-1].key == b"tick")
print("records older than retention.ms still readable (they share the active segment with fresh ones):",
      len(old_kept) > 0)
""", check=True)
nb.code("""
q_retention.reveal(len(old_kept) > 0, f"{len(old_kept)} of the old records survive: retention deletes whole "
                   "segments, and the segment they share with the fresh ticks is not old enough to go.")
""")
nb.md("""
Retention never deletes single records: it deletes whole **closed** segments whose newest
record is older than the limit.

A consumer that was behind the new log start offset has lost those records: its next fetch is
out of range, and `auto.offset.reset` decides where it restarts (lesson 06). And the old records
you still see would have gone the same way once their segment held nothing newer than five seconds
(the loop above set retention back to the default, so here they stay).
""")

nb.md("""
## Compaction keeps the latest value per key

With `cleanup.policy=compact` the broker's **log cleaner** rewrites closed segments, keeping only
the newest record of each key. A record with a null value (a **tombstone**) deletes its key —
and the tombstone itself goes after `delete.retention.ms`. Offsets never change: compaction
leaves gaps.
""")
nb.code("""
profiles = cluster.create_topic(f"profiles-{uuid.uuid4().hex[:6]}", partitions=1, config={   # new each run
    "cleanup.policy": "compact", "segment.ms": 1000, "min.cleanable.dirty.ratio": 0.01,
    "delete.retention.ms": 1000, "min.compaction.lag.ms": 0,
})
p = cluster.producer()
for version in range(1, 6):
    for user in ("ana", "ben", "chen"):
        p.produce(profiles, key=user, value=json.dumps({"user": user, "version": version}))
p.produce(profiles, key="chen", value=None)          # tombstone: delete chen
p.flush(10)
before = cluster.read_all(profiles)
print(len(before), "records before compaction")
q_compact = predict.ask("01.compaction", f"{len(before)} records: 5 versions each of ana, ben and chen, then a "
                        "tombstone for chen. How many records are left once the cleaner has run and the "
                        "tombstone expired?", tolerance=0)
q_compact
""")
nb.code("""
def compacted():
    records = cluster.read_all(profiles)
    users = [r.key for r in records if r.key != b"tick"]
    return len(users) == len(set(users)) and b"chen" not in users, records

def cleaned():
    p.produce(profiles, key="tick", value=b"{}")   # new writes roll segments so the cleaner has work
    p.flush(5)
    done, records = compacted()
    return records if done else None

started = time.monotonic()
after = Wait("the log cleaner to compact the topic", timeout=180, interval=1).until(cleaned)
done = True
print(f"compacted after {time.monotonic() - started:.0f} s")
pd.DataFrame([{"offset": r.offset, "key": r.key_text, "value": r.value_text} for r in after if r.key != b"tick"])
""")
nb.code("""
survivors = {r.key_text: json.loads(r.value) for r in after if r.key != b"tick"}
print("one record per key:", done)
print("latest values kept:", {u: v["version"] for u, v in sorted(survivors.items())})
print("tombstoned key gone:", "chen" not in survivors)
""", check=True)
nb.code("""
q_compact.reveal(len(survivors), "Compaction keeps the newest record of each key; the tombstone deleted chen's "
                 "versions and then went itself after delete.retention.ms.")
""")

nb.md("""
## Partitions can be added, never removed

A partition is a log with data in it; Kafka will not merge logs. Asking for fewer partitions is
an error:
""")
nb.code("""
from labkit.errors import ClusterStateError

try:
    cluster.add_partitions(clicks, 2)            # clicks has 3
except ClusterStateError as exc:
    refusal = exc.__cause__.args[0]              # the broker's own answer (a confluent_kafka KafkaError)
    print("refused:", refusal.name())
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a topic is one log per partition; offsets come from the broker | 30 events: offsets 0, 1, 2 … in each partition |
| order holds within a partition, not across | per-partition order kept, the merged stream interleaved |
| reading removes nothing | a second reader got all 30 again |
| records are immutable: an update is a new record | ana's old address still stored at offset 0, the new one appended |
| partitions are directories of segment files | `.log`, `.index`, `.timeindex` named by base offset; the batches inside |
| the indexes are sparse and find records by offset and by time | an entry per ~4 KB; lookups replayed = the broker's fetch and `offsets_for_times` |
| segments roll; retention deletes whole segments | 3.5 MB → several segments; retention moved the log start offset, records sharing the active segment stayed |
| compaction keeps the newest value per key; tombstones delete | 16 records → one per key, `chen` gone, offsets kept |
| partitions can't be removed | `INVALID_PARTITIONS` |

**Next:** [02 · Keys and partitions: murmur2](02_keys_and_murmur2.ipynb) — which partition a key goes to, and
why Python and Java producers disagree.
""")
nb.code("""
predict.summary("01")
""")
nb.code("""
producer = p = None  # the clients go first, so they do not complain about brokers going away
cluster.stop()
""")

