"""The exercise notebook dr_failover: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Fail a consumer group over to dr", exercise="dr_failover")

nb.md("""
# Exercise · Fail a consumer group over to dr

MirrorMaker 2 copies `orders` from the cluster `primary` to the cluster `dr`, where it is called
`primary.orders`, and translates the consumer groups' committed offsets into **checkpoints**.
Now primary is gone. Your job is the failover routine: given the dr cluster and a group, resume
the group's consumption on `primary.orders` **from its translated offsets**.

MirrorMaker's Java client library does this with `RemoteClusterUtils.translateOffsets`; the
Python client has no such thing, so you read the checkpoints yourself. The checks run a real
drill: a primary cluster of their own, MirrorMaker 2 to this notebook's cluster (dr), a group
consuming on primary, and primary killed at a random moment; then your routine takes over.
Nothing that reached dr may be left unprocessed, and no more may be processed twice than
failing over at the translated offsets costs.

*About 30 minutes. Goes with lesson 10.*
""")
nb.md("""
## Setup

This cluster plays **dr**. (MirrorMaker does not write the group's offsets on dr for you:
`sync.group.offsets.enabled` is off, as by default.)
""")
nb.code("""
import struct

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

import labkit
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("dr_failover")
""")
nb.md("""
## Task 1 — `decode_checkpoint(key, value)`

Checkpoints live on dr in the compacted topic `<source alias>.checkpoints.internal`
(`primary.checkpoints.internal`), one record per group, topic and partition. They use Kafka's
protocol types, big-endian: `INT16`, `INT32`, `INT64` are signed integers of 2, 4 and 8 bytes; a
`STRING` is an `INT16` length in **bytes** followed by that many bytes of UTF-8.

| part | fields, in order |
|---|---|
| key | group `STRING`, topic `STRING` (the topic **on dr**, e.g. `primary.orders`), partition `INT32` |
| value | version `INT16` (0), upstream offset `INT64` (the group's commit on primary), downstream offset `INT64` (where to resume on dr), metadata `STRING` |

Return `(group, topic, partition, upstream_offset, downstream_offset)`. `struct.unpack_from`
with formats like `">h"`, `">i"`, `">q"` reads them. Here is a real record MirrorMaker wrote:
""")
nb.code("""
SAMPLE_KEY = bytes.fromhex("0007 62696c6c696e67 000e 7072696d6172792e6f7264657273 00000000")
SAMPLE_VALUE = bytes.fromhex("0000 0000000000000028 0000000000000001 0000")
""")
nb.code('''
def decode_checkpoint(key: bytes, value: bytes) -> tuple[str, str, int, int, int]:
    ### BEGIN SOLUTION
    def string(data: bytes, pos: int) -> tuple[str, int]:
        (length,) = struct.unpack_from(">h", data, pos)
        start = pos + 2
        return data[start:start + length].decode("utf-8"), start + length

    group, pos = string(key, 0)
    topic, pos = string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    if version != 0:
        raise ValueError(f"unknown checkpoint version {version}")
    return group, topic, partition, upstream, downstream
    ### END SOLUTION
''')
nb.code("""
decode_checkpoint(SAMPLE_KEY, SAMPLE_VALUE)
""")
nb.md("""
The group `billing` had committed offset 40 on `orders` partition 0 at primary; on dr it must
resume at offset **1** of `primary.orders`. Not 40: dr numbers its copy itself, and MirrorMaker
only knows the offset pairs it wrote down, so it translates conservatively (never past what the
group processed).

## Task 2 — `translated_offsets(bootstrap, group, source_alias, topic)`

Read `<source_alias>.checkpoints.internal` on the cluster at `bootstrap` **from the beginning to
its current end** (every partition), decode every record, and keep the **latest** checkpoint of
`group` for each partition of the remote topic `<source_alias>.<topic>` (checkpoints of other
groups and other topics are not yours). Return `{partition: downstream offset}`.

* Read with `assign()` (no consumer group of your own is needed) from `OFFSET_BEGINNING`, and
  stop once every partition is read up to the high watermark you found when you began
  (`get_watermark_offsets`). A compacted topic may have gaps: go by positions, not by counting.
* No such topic, or no checkpoint of the group: return `{}`.
""")
nb.code('''
def translated_offsets(bootstrap: str, group: str, source_alias: str, topic: str) -> dict[int, int]:
    ### BEGIN SOLUTION
    import time
    import uuid

    checkpoints = f"{source_alias}.checkpoints.internal"
    remote = f"{source_alias}.{topic}"
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"translate-{uuid.uuid4().hex[:8]}",
                       "enable.auto.commit": False})
    try:
        found = reader.list_topics(checkpoints, timeout=10).topics.get(checkpoints)
        if found is None or found.error is not None or not found.partitions:
            return {}
        ends = {}
        for p in found.partitions:
            low, high = reader.get_watermark_offsets(TopicPartition(checkpoints, p), timeout=10)
            if high > low:
                ends[p] = high
        if not ends:
            return {}
        reader.assign([TopicPartition(checkpoints, p, OFFSET_BEGINNING) for p in ends])
        latest = {}
        deadline = time.monotonic() + 30
        while ends and time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is None or msg.error():
                continue
            if msg.key() is not None and msg.value() is not None:
                g, t, partition, _upstream, downstream = decode_checkpoint(msg.key(), msg.value())
                if g == group and t == remote:
                    latest[partition] = downstream
            if msg.offset() + 1 >= ends.get(msg.partition(), 0):
                ends.pop(msg.partition(), None)
        return latest
    finally:
        reader.close()
    ### END SOLUTION
''')
nb.md("""
## Task 3 — `failover_consumer(bootstrap, group, source_alias, topic)`

Return a `Consumer` on the cluster at `bootstrap`, in `group`, that reads `<source_alias>.<topic>`
starting from the translated offsets: every partition of the remote topic, each at its
translated offset, or from the beginning where the group has no checkpoint (it never committed
there, so nothing was processed). Either `assign()` the partitions with those offsets, or
commit them to the group on dr first and then `subscribe()`. The checks poll the consumer you
return and process what it delivers.
""")
nb.code('''
def failover_consumer(bootstrap: str, group: str, source_alias: str, topic: str) -> Consumer:
    ### BEGIN SOLUTION
    remote = f"{source_alias}.{topic}"
    offsets = translated_offsets(bootstrap, group, source_alias, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    partitions = consumer.list_topics(remote, timeout=10).topics[remote].partitions
    consumer.assign([TopicPartition(remote, p, offsets.get(p, OFFSET_BEGINNING)) for p in sorted(partitions)])
    return consumer
    ### END SOLUTION
''')
nb.md("""
## Check it

The last check is the drill: a primary cluster of its own with `orders` (older records already
deleted, so offsets on the two sides differ), MirrorMaker 2 to this cluster, a group consuming
on primary and committing after every batch; at a random moment the group crashes and then the
whole primary is killed. Your `failover_consumer` takes over on dr. It takes about half a minute.
""")
nb.code("""
ex.check(globals())
""")
nb.md("""
## Questions

Answer each with the letter of one choice; the grader checks them.

**`WHY_TWICE`** — A group that fails over at its translated offsets processes some records twice.
Where do they come from?

* **a** — MirrorMaker copies some records to dr twice.
* **b** — What the group processed on primary after its last commit, plus the records between the
  last offset sync MirrorMaker wrote and that commit (one sync every `offset.lag.max` records).
* **c** — Records primary acknowledged after the last checkpoint was written.
* **d** — The failover consumer reading each partition from its beginning.

**`UPSTREAM_ON_DR`** — What if the group started on dr at the checkpoint's *upstream* offset (its
commit on primary) instead of the translated one?

* **a** — Nothing changes: MirrorMaker keeps the offsets of the copy equal to primary's.
* **b** — The broker on dr translates it when the consumer fetches.
* **c** — It counts in primary's numbering: on dr it points at another record, or past the end
  (then `auto.offset.reset` decides), so records are skipped or read again.
""")
nb.code('''
### BEGIN SOLUTION
WHY_TWICE = "b"
UPSTREAM_ON_DR = "c"
### END SOLUTION
''')
nb.code("""
cluster.stop()
""")
nb.get_graded()
