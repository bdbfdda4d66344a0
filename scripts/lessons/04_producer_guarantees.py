"""Source of notebooks/04_producer_guarantees.ipynb: build it with `python scripts/build_notebooks.py 04`."""

from labkit.authoring import Notebook

nb = Notebook("04 · Producer guarantees",
              summary="acks (0, 1, all) and min.insync.replicas under broker failures, duplicates and reordering "
                      "from retries and the idempotent producer, batching and compression measured, transactions.",
              minutes=40)

nb.md("""
# 04 · Producer guarantees

What does "the write succeeded" mean? It depends on the producer's settings. This lesson breaks
brokers while producing and **counts**: records acknowledged, failed, stored, lost, duplicated, out
of order. Then it measures what batching and compression buy, and shows transactions on disk.
Before each measurement you will be asked what you expect: lock in a guess, then run the cell.

*About 40 minutes. Every cell is safe to re-run.*
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
from labkit import perf, predict
from labkit.producing import counts_frame, produce_and_count, produce_through_refusals
from labkit.segments import batches_frame, dump_partition, records_frame, segment_files
from labkit.waiting import Wait

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

With one of three brokers down, `acks=all` still works. With two down, only the leader is left.
""")
nb.code("""
two_down = predict.ask("04.acks-all-two-down", "Two of the three brokers are down. Of 100 records sent with "
                       "acks=all (min.insync.replicas=2), how many are acknowledged?", choices=[0, 50, 100])
two_down
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
Wait("the ISR to shrink to the leader", timeout=20, interval=0.5).until(
    lambda: len(cluster.describe_topic(topic)[0].isr) == 1)
results["2 brokers down, acks=all"] = produce_and_count(cluster, topic, 100, acks="all", **quick)
results["2 brokers down, acks=1"] = produce_and_count(cluster, topic, 100, acks="1", **quick)
counts_frame(results)
""")
nb.code("""
print("errors with 2 down and acks=all:", dict(results["2 brokers down, acks=all"].errors))
print("acks=all fails when the ISR is below min.insync.replicas:", results["2 brokers down, acks=all"].acked == 0)
print("acks=1 still gets acknowledgements:", results["2 brokers down, acks=1"].acked == 100)
""", check=True)
nb.code("""
two_down.reveal(results["2 brokers down, acks=all"].acked,
                "With the leader alone in the ISR, fewer than min.insync.replicas copies exist: it refuses every "
                "acks=all write (NOT_ENOUGH_REPLICAS), and the producer gives up after message.timeout.ms.")
""")
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
### acks=0: nobody answers

With `acks=0` the producer does not wait for the broker at all: a record counts as delivered as
soon as it is written to the network connection. Cheap and fast — and blind. A partition's
leader freezes (a long garbage-collection pause, a hung disk) while 1,000 records are being sent,
then crashes; a follower takes over. The same with `acks=all` (and idempotence) for comparison:
""")
nb.code("""
acks0_lost = predict.ask("04.acks0-lost", "acks=0, 1,000 records: the leader freezes at record 300 and crashes at "
                         "record 600. How many records the producer reported as delivered are not stored?",
                         within=0.5)
acks0_lost
""")
nb.code("""
def leader_freezes_then_dies(acks):
    t = cluster.create_topic(f"acks-{acks}-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)
    leader = cluster.describe_topic(t)[0].leader
    count = produce_and_count(cluster, t, count=1000, pace=0.002, keyed=False, acks=acks,
                              enable_idempotence=(acks == "all"), message_timeout_ms=30000,
                              actions={300: lambda: cluster.pause_broker(leader),
                                       600: lambda: cluster.kill_broker(leader)})
    cluster.start_broker(leader)
    cluster.wait_for_isr(t)
    return count

blind = {"acks=0": leader_freezes_then_dies("0"), "acks=all": leader_freezes_then_dies("all")}
counts_frame(blind)
""")
nb.code("""
print("acks=0: every record reported as delivered:", blind["acks=0"].acked == 1000 and blind["acks=0"].failed == 0)
print("acks=0: some of those records are not stored:", blind["acks=0"].lost > 0)
print("acks=all: every record acknowledged, none lost:", blind["acks=all"].acked == 1000 and blind["acks=all"].lost == 0)
""", check=True)
nb.code("""
acks0_lost.reveal(blind["acks=0"].lost, "Everything written into the frozen leader's connection, and what it had not "
                  "yet replicated, died with it; acks=0 never hears about it. How many depends on the moment: run "
                  "the cell again and compare.")
""")

nb.md("""
## Duplicates from retries

A producer retries when it gets no answer in time. But "no answer" does not mean "not written":
the broker may have written the batch and only the **acknowledgement** got lost or late. Then the
retry writes it again.

Make that happen: pause a follower (so `acks=all` writes can't complete), with a short
`request.timeout.ms`; the producer times out and resends batches the leader already appended.
""")
nb.code("""
twice = predict.ask("04.duplicates", "Idempotence off, a follower stalls for 5 s, request.timeout.ms = 1.5 s: will "
                    "the topic store some record twice?", kind="yes/no")
twice
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
nb.code("""
twice.reveal(plain.duplicates > 0, f"{plain.duplicates} duplicates without idempotence: the broker had written the "
             "batches whose acknowledgements timed out, and the retries wrote them again.")
""")
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

## Ordering: retries with several requests in flight

`max.in.flight.requests.per.connection` is how many produce requests a producer sends to a broker
before it has heard back from the first (librdkafka's default: 1,000,000; Java's: 5). More in
flight means more throughput — and a risk for order: if the broker **refuses** request A
(a retriable error) but accepts request B, already on its way behind it, A's retry is stored
*after* B.

The broker refuses writes when too few replicas are in sync (`NOT_ENOUGH_REPLICAS`). Make that
happen now and then: one follower of a one-partition topic stops, and eight times while 3,000
records are produced, the topic's `min.insync.replicas` goes up to 3 for a moment (refused), then
back to 2. The producer retries at once, 5 records per request
(`labkit.producing.produce_through_refusals`). The broker's log is then read back in offset order:
how many records come after one that was sent later?
""")
nb.code("""
out_of_order = predict.ask("04.reorder", "Idempotence off, up to 5 requests in flight, the broker refusing writes "
                           "now and then: will the topic store any record after one that was sent later?",
                           kind="yes/no")
out_of_order
""")
nb.code("""
ordering_topic = cluster.create_topic(f"ordering-{run}", partitions=1, replication_factor=3)
in_flight = {
    "idempotence off, 5 in flight": dict(enable_idempotence=False, max_in_flight_requests_per_connection=5),
    "idempotence on, 5 in flight": dict(enable_idempotence=True, max_in_flight_requests_per_connection=5),
}
# A reorder needs a refusal to fall between two requests in flight; if none did this time, go again.
for attempt in range(3):
    ordering = produce_through_refusals(cluster, ordering_topic, in_flight)
    if ordering["idempotence off, 5 in flight"].reordered:
        break
counts_frame(ordering)
""")
nb.code("""
loose, strict = ordering["idempotence off, 5 in flight"], ordering["idempotence on, 5 in flight"]
print("idempotence off: records stored after a later one:", loose.reordered > 0)
print("idempotence on: records stored after a later one:", strict.reordered)
print("idempotence on: every record stored once:", strict.stored == strict.sent and strict.duplicates == 0)
""", check=True)
nb.code("""
out_of_order.reveal(loose.reordered > 0, f"{loose.reordered} records landed behind later ones (and "
                    f"{loose.duplicates} twice). With idempotence the leader checks each batch's sequence number: "
                    "a batch that arrives after a gap is refused too, so the retry goes in first.")
""")
nb.md("""
With idempotence, up to 5 requests may be in flight and order still holds: the broker accepts a
producer's batches only in sequence (`OUT_OF_ORDER_SEQUENCE_NUMBER` otherwise), and librdkafka
refuses `max.in.flight.requests.per.connection` above 5 when idempotence is on. Without idempotence,
the old advice was one request in flight, paying a round trip per request; idempotence is the better
answer: order kept with 5 in flight, and no duplicates.
""")

nb.md("""
## Batching and compression, measured

A producer groups records per partition into batches. `linger.ms` waits a little for a batch to
fill, `batch.size` caps it, and compression works on whole batches — bigger batches compress
better. Send 30,000 JSON-ish records under a few settings and measure throughput and the latency
each record saw (from `produce()` to its acknowledgement):
""")
nb.code("""
shrink = predict.ask("04.zstd-ratio", "zstd against no compression: how many times less disk space does this data "
                     "take (averaged over the linger settings)?", within=0.3, unit="×")
shrink
""")
nb.code("""
import json

payload = json.dumps({"user": "someone@example.com", "page": "/products/42", "ms": 1234, "ok": True} | {
    f"field{i}": "value" for i in range(8)}).encode()

def measure(linger_ms, compression, n=30_000):
    t = cluster.create_topic(f"batching-{linger_ms}-{compression}-{run}", partitions=3)
    # produce() as fast as the client takes records, 100 customer keys in turn, then flush (labkit.perf)
    sent = perf.python_producer(cluster, t, n, len(payload), acks="all", value=payload,
                                keys=[str(k) for k in range(100)],
                                config={"linger.ms": linger_ms, "compression.type": compression,
                                        "batch.size": 262144, "enable.idempotence": True})
    # a segment file is its batches back to back: its size is what the batches take
    stored = sum(f.stat().st_size for part in range(3) for f in segment_files(cluster, t, part))
    return {"linger.ms": linger_ms, "compression": compression, "records/s": sent.records_per_s,
            "median latency ms": sent.p50_ms, "bytes on disk": stored}

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
nb.code("""
shrink.reveal(round(none / zstd, 1), "Every record repeats the same field names: compressing a whole batch "
              "removes that repetition, and bigger batches give the compressor more of it.")
""")
nb.md("""
On a laptop-sized cluster the numbers jump around, but the shape is typical: compression shrinks
what is sent and stored several times over (the ratio above); a larger `linger.ms` trades a few
milliseconds of latency for fuller batches.
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

def both_views():  # the coordinator writes the markers just after the call returns
    committed = cluster.read_all(tx_topic, isolation_level="read_committed")
    everything = cluster.read_all(tx_topic, isolation_level="read_uncommitted")
    return (committed, everything) if len(committed) == 5 and len(everything) == 8 else None

committed, everything = Wait("both transactions' markers", timeout=20, interval=0.5).until(both_views)
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
| `acks=0` reports records as delivered that no broker stored | all 1,000 "delivered", some lost when the leader froze and died; none with `acks=all` |
| retries after lost acknowledgements duplicate records | duplicates > 0 without idempotence, 0 with it |
| producer id + sequence numbers let the broker drop duplicates | the batches in the segment dump |
| retries with several requests in flight reorder records, unless idempotent | records stored after later ones without idempotence, none with it |
| batching and compression trade latency for throughput and space | the scatter plot |
| transactions are all-or-nothing for `read_committed` readers | 5 committed visible, 3 aborted hidden; COMMIT/ABORT markers |

**Next:** lesson 05 — consumer groups.
""")
nb.code("""
predict.summary("04")
""")
nb.code("""
del producer
cluster.stop()
""")

