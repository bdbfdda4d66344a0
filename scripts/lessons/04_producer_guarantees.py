"""Source of notebooks/04_producer_guarantees.ipynb: build it with `python scripts/build_notebooks.py 04`."""

from labkit.authoring import Notebook

nb = Notebook("04 · Producer guarantees",
              summary="acks and min.insync.replicas under broker failures, duplicates from retries and the "
                      "idempotent producer, batching and compression measured, transactions.",
              minutes=35)

nb.md("""
# 04 · Producer guarantees

What does "the write succeeded" mean? It depends on the producer's settings. This lesson breaks
brokers while producing and **counts**: records acknowledged, failed, stored, duplicated. Then it
measures what batching and compression buy, and shows transactions on disk.

*About 35 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Three brokers, `min.insync.replicas=2` (the profile's default), followers leave the ISR after
3 s of silence.
""")
nb.code("""
import time
import uuid

import pandas as pd
import plotly.express as px

import labkit
from labkit.producing import counts_frame, produce_and_count
from labkit.segments import batches_frame, dump_partition, records_frame

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster(replica_lag_time_max_ms=3000)
run = uuid.uuid4().hex[:6]
cluster
""")

nb.md("""
## acks and min.insync.replicas

* `acks=0` — don't wait for anything; `acks=1` — the leader has it; `acks=all` — every replica in
  the ISR has it.
* `min.insync.replicas=2` — the broker *refuses* an `acks=all` write when fewer than 2 replicas
  are in sync: better to fail loudly than to pretend the record is safe.

With one of three brokers down, `acks=all` still works. With two down, only the leader is left:
""")
nb.code("""
topic = cluster.create_topic(f"acks-{run}", partitions=1, replication_factor=3)
leader = cluster.describe_topic(topic)[0].leader
followers = [b.id for b in cluster.brokers if b.id != leader]
quick = dict(message_timeout_ms=5000)        # give up on a record after 5 s

results = {"all brokers up, acks=all": produce_and_count(cluster, topic, 100, acks="all", **quick)}
cluster.stop_broker(followers[0])
results["1 broker down, acks=all"] = produce_and_count(cluster, topic, 100, acks="all", **quick)
cluster.stop_broker(followers[1])
deadline = time.monotonic() + 20
while len(cluster.describe_topic(topic)[0].isr) > 1 and time.monotonic() < deadline:
    time.sleep(0.5)
results["2 brokers down, acks=all"] = produce_and_count(cluster, topic, 100, acks="all", **quick)
results["2 brokers down, acks=1"] = produce_and_count(cluster, topic, 100, acks="1", **quick)
counts_frame(results)
""")
nb.code("""
print("errors with 2 down and acks=all:", dict(results["2 brokers down, acks=all"].errors))
print("acks=all fails when the ISR is below min.insync.replicas:", results["2 brokers down, acks=all"].acked == 0)
print("acks=1 still gets acknowledgements:", results["2 brokers down, acks=1"].acked == 100)
""", check=True)
nb.md("""
The `acks=all` records never became safe, so the producer gave up on them after
`message.timeout.ms` (`_MSG_TIMED_OUT`; it had been retrying the broker's `NOT_ENOUGH_REPLICAS`).

Look at the *stored* column for `acks=1`: the leader acknowledged 100 records, yet a reader sees
none of them right now. Kafka 4 does not advance the high watermark while fewer than
`min.insync.replicas` replicas are in sync, so the records sit on **one** disk, invisible, until
followers return. If that broker died for good now, they would be gone although the producer was
told "success" — the risk `acks=1` takes. Bring the followers back and read again:
""")
nb.code("""
for b in followers:
    cluster.start_broker(b)
cluster.wait_for_isr(topic)
readable = cluster.read_all(topic)
print("readable records once the followers are back:", len(readable))
""")
nb.code("""
print("the acks=1 records became visible after the followers caught up:",
      len(readable) == sum(r.acked for r in results.values()))
""", check=True)

nb.md("""
## Duplicates from retries

A producer retries when it gets no answer in time. But "no answer" does not mean "not written":
the broker may have written the batch and only the **acknowledgement** got lost or late. Then the
retry writes it again.

Make that happen: pause a follower (so `acks=all` writes can't complete), with a short
`request.timeout.ms`; the producer times out and resends batches the leader already appended.
""")
nb.code("""
def retries_while_follower_stalls(idempotent: bool):
    t = cluster.create_topic(f"retries-{'idem' if idempotent else 'plain'}-{uuid.uuid4().hex[:6]}", partitions=1)
    state = cluster.describe_topic(t)[0]
    follower = next(r for r in state.replicas if r != state.leader)
    count = produce_and_count(
        cluster, t, count=400, pace=0.01, keyed=False,
        acks="all", enable_idempotence=idempotent, request_timeout_ms=1500, message_timeout_ms=60000,
        retry_backoff_ms=200, linger_ms=5,
        actions={150: lambda: cluster.pause_broker(follower), 400: lambda: (time.sleep(5), cluster.resume_broker(follower))})
    return t, count

# A retry duplicates a record only when it races the original write; if this run got lucky, go again.
for attempt in range(3):
    plain_topic, plain = retries_while_follower_stalls(idempotent=False)
    if plain.duplicates:
        break
idem_topic, idem = retries_while_follower_stalls(idempotent=True)
counts_frame({"enable.idempotence=false": plain, "enable.idempotence=true": idem})
""")
nb.code("""
print("without idempotence, duplicates stored:", plain.duplicates > 0)
print("with idempotence, duplicates stored:", idem.duplicates)
print("with idempotence, every record stored exactly once:", idem.stored == idem.sent and idem.lost == 0)
""", check=True)
nb.md("""
### How the broker knows: producer id and sequence numbers

An idempotent producer gets a **producer id** from the cluster and numbers every batch it sends
to a partition. The leader remembers the last sequence numbers per producer and drops a batch
it has already written. It is all in the segment files — compare the two topics' batches
(Kafka's `kafka-dump-log`):
""")
nb.code("""
batches_frame(dump_partition(cluster, plain_topic)).head(4)
""")
nb.code("""
idem_batches = dump_partition(cluster, idem_topic)
batches_frame(idem_batches).head(4)
""")
nb.code("""
ids = {b.producer_id for b in idem_batches}
sequences = [r.sequence for b in idem_batches for r in b.records]
print("one producer id for the idempotent producer:", len(ids) == 1 and -1 not in ids)
print("sequence numbers stored 0, 1, 2, ... without repeats:", sequences == list(range(len(sequences))))
""", check=True)
nb.md("""
Since Kafka 3.0 the Java producer enables idempotence by default. librdkafka (the Python client)
still defaults to `enable.idempotence=false`: set it yourself.
""")

nb.md("""
## Batching and compression, measured

A producer groups records per partition into batches. `linger.ms` waits a little for a batch to
fill, `batch.size` caps it, and compression works on whole batches — bigger batches compress
better. Send 30,000 JSON-ish records under a few settings and measure throughput and the latency
each record saw (from `produce()` to its acknowledgement):
""")
nb.code("""
import json

payload = json.dumps({"user": "someone@example.com", "page": "/products/42", "ms": 1234, "ok": True} | {
    f"field{i}": "value" for i in range(8)}).encode()

def measure(linger_ms, compression, n=30_000):
    t = cluster.create_topic(f"batching-{linger_ms}-{compression}-{run}", partitions=3)
    p = cluster.producer(acks="all", linger_ms=linger_ms, compression_type=compression, batch_size=262144,
                         enable_idempotence=True)
    latencies = []
    t0 = time.perf_counter()
    for i in range(n):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(t, key=str(i % 100), value=payload,
                          on_delivery=lambda err, msg, sent=sent: latencies.append(time.perf_counter() - sent))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(60)
    seconds = time.perf_counter() - t0
    stored = sum(b.size for part in range(3) for b in dump_partition(cluster, t, part))
    return {"linger.ms": linger_ms, "compression": compression, "records/s": n / seconds,
            "median latency ms": 1000 * pd.Series(latencies).median(), "bytes on disk": stored}

runs = pd.DataFrame([measure(linger, comp) for linger in (0, 5, 50) for comp in ("none", "lz4", "zstd")])
runs.round(1)
""")
nb.code("""
px.scatter(runs, x="median latency ms", y="records/s", color="compression", symbol="linger.ms",
           size="bytes on disk", size_max=28, height=420,
           title="Throughput vs latency per setting (marker size: bytes stored on disk)")
""")
nb.code("""
none = runs[runs.compression == "none"]["bytes on disk"].mean()
zstd = runs[runs.compression == "zstd"]["bytes on disk"].mean()
print("zstd stores this data in less space than no compression:", zstd < none)
""", check=True)
nb.md("""
On a laptop-sized cluster the numbers jump around, but the shape is typical: compression shrinks
what is sent and stored severalfold; a larger `linger.ms` trades a few milliseconds of latency
for fuller batches.
""")

nb.md("""
## Transactions

A **transactional** producer writes to one or more partitions atomically: all records of a
transaction become visible together, or — if it aborts — never, to consumers reading with
`isolation.level=read_committed`. Commit one transaction, abort another:
""")
nb.code("""
tx_topic = cluster.create_topic(f"transfers-{run}", partitions=1)
producer = cluster.producer(transactional_id=f"bank-{run}")
producer.init_transactions(30)

producer.begin_transaction()
for i in range(5):
    producer.produce(tx_topic, key="acct-1", value=f"committed {i}")
producer.commit_transaction(30)

producer.begin_transaction()
for i in range(3):
    producer.produce(tx_topic, key="acct-1", value=f"aborted {i}")
producer.flush(30)                      # they really reach the broker...
producer.abort_transaction(30)          # ...and are then aborted

deadline = time.monotonic() + 20        # the coordinator writes the markers just after the call returns
while time.monotonic() < deadline:
    committed = cluster.read_all(tx_topic, isolation_level="read_committed")
    everything = cluster.read_all(tx_topic, isolation_level="read_uncommitted")
    if len(committed) == 5 and len(everything) == 8:
        break
    time.sleep(0.5)
print("read_committed sees:  ", [r.value_text for r in committed])
print("read_uncommitted sees:", [r.value_text for r in everything])
""")
nb.code("""
print("read_committed sees only the committed transaction:", [r.value_text for r in committed] == [f"committed {i}" for i in range(5)])
print("read_uncommitted also sees the aborted records:", len(everything) == 8)
""", check=True)
nb.md("""
On disk, each transaction ends with a **control batch**: a marker saying COMMIT or ABORT. A
`read_committed` consumer uses them (and the aborted-transaction index) to skip aborted records.
Note the offsets the markers take: offsets in a transactional topic have gaps for consumers.
""")
nb.code("""
tx_batches = dump_partition(cluster, tx_topic)
batches_frame(tx_batches)
""")
nb.code("""
markers = [r.marker for b in tx_batches if b.control for r in b.records]
print("transaction markers on disk:", markers)
""", check=True)
nb.md("""
Exactly-once *processing* (read → transform → write, with the input offsets committed in the same
transaction) builds on this; the exercise *transfer exactly once* asks you to write one.

## What you saw

| claim | shown by |
|---|---|
| `acks=all` + `min.insync.replicas=2` survives one broker down and refuses writes with two down | 0 of 100 acknowledged, `NOT_ENOUGH_REPLICAS` |
| `acks=1` keeps accepting writes on a single copy | 100 of 100 acknowledged with two brokers down |
| retries after lost acknowledgements duplicate records | duplicates > 0 without idempotence, 0 with it |
| producer id + sequence numbers let the broker drop duplicates | the batches in the segment dump |
| batching and compression trade latency for throughput and space | the scatter plot |
| transactions are all-or-nothing for `read_committed` readers | 5 committed visible, 3 aborted hidden; COMMIT/ABORT markers |

**Next:** lesson 05 — consumer groups.
""")
nb.code("""
del producer
cluster.stop()
""")

