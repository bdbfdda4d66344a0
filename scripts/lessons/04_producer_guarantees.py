"""Source of notebooks/04_producer_guarantees.ipynb: build it with `python scripts/build_notebooks.py 04`."""

from labkit.authoring import Notebook

nb = Notebook("04 · Producer guarantees",
              summary="The producer's real defaults, acks (0, 1, all) and min.insync.replicas under broker failures, "
                      "duplicates and reordering from retries and the idempotent producer, batching and the four "
                      "codecs measured on varied records, transactions and consume-transform-produce.",
              minutes=45)

nb.md("""
# 04 · Producer guarantees

What does "the write succeeded" mean? It depends on the producer's settings. This lesson starts
with what those settings are when you set nothing, then breaks brokers while producing and
**counts**: records acknowledged, failed, stored, lost, duplicated, out of order. Then it
measures what batching and compression buy, and runs transactions — a consume-transform-produce
loop included, crashed in the middle. Before each measurement you will be asked what you expect:
lock in a guess, then run the cell.

*About 45 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Three brokers, `min.insync.replicas=2` (the profile's default), followers leave the ISR after
3 s of silence.
""")
nb.code("""
import json
import os
import time
import uuid

import pandas as pd
import plotly.express as px

import labkit
from labkit import perf, predict
from labkit.clientconfig import librdkafka_defaults
from labkit.producing import counts_frame, produce_and_count, produce_through_refusals
from labkit.segments import batches_frame, dump_partition, records_frame, segment_files
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                 # running this cell again starts afresh
cluster = labkit.start_cluster(replica_lag_time_max_ms=3000)
run = uuid.uuid4().hex[:6]

def restart_stopped_brokers():     # cells that stop brokers call this first: run again, they start from a whole cluster
    for b in cluster.brokers:
        if not b.alive:
            cluster.start_broker(b.id)

cluster
""")

nb.md("""
## The defaults: what the deck says, what the clients do

Many training decks still teach that a producer defaults to `acks=1`, `retries=0` and
`enable.idempotence=false`. Ask the clients themselves. librdkafka (the library under the Python
client) reports its own configuration; the Java producer shows what it does in the batches it
writes: an idempotent producer's batches carry a **producer id** (`-1` when there is none).
""")
nb.code("""
q_defaults = predict.ask("04.python-idempotent", "A Python producer created with no settings but the bootstrap "
                         "servers: are its writes idempotent?", kind="yes/no")
q_defaults
""")
nb.code("""
python_defaults = librdkafka_defaults()      # librdkafka's own configuration dump, nothing set

python_topic = cluster.create_topic(f"defaults-python-{run}", partitions=1)
plain = cluster.producer()                   # nothing set but the bootstrap servers
for i in range(10):
    plain.produce(python_topic, value=f"python {i}")
plain.flush(30)

java_topic = cluster.create_topic(f"defaults-java-{run}", partitions=1)
cluster.tool("kafka-producer-perf-test", "--topic", java_topic, "--num-records", "10", "--record-size", "100",
             "--throughput", "-1", "--command-property", "client.id=java-defaults")   # nothing else set
producer_ids = {name: {b.producer_id for b in dump_partition(cluster, t)}
                for name, t in (("python", python_topic), ("java", java_topic))}

pd.DataFrame({
    "the deck says": {"acks": "1", "retries": "0", "enable.idempotence": "false"},
    "Python (librdkafka) reports": {"acks": python_defaults["request.required.acks"] + " (= all)",
                                    "retries": python_defaults["message.send.max.retries"],
                                    "enable.idempotence": python_defaults["enable.idempotence"]},
    "producer ids in the batches": {"acks": "", "retries": "",
                                    "enable.idempotence": f"Python {sorted(producer_ids['python'])}, "
                                                          f"Java {sorted(producer_ids['java'])}"},
})
""")
nb.code("""
print("librdkafka's default acks is all (-1), not 1:", python_defaults["request.required.acks"] == "-1")
print("librdkafka's default retries is not 0:", int(python_defaults["message.send.max.retries"]) > 0)
print("the default Python producer is not idempotent (producer id -1):", producer_ids["python"] == {-1})
print("the default Java producer is idempotent (a producer id):", -1 not in producer_ids["java"])
""", check=True)
nb.code("""
q_defaults.reveal(-1 not in producer_ids["python"],
                  "librdkafka still defaults to enable.idempotence=false: set it yourself. The Java producer turned "
                  "it on by default in Kafka 3.0 (KIP-679), with acks=all.")
""")
nb.md("""
So the deck is out of date on two counts, and the two clients differ on the third:

* `acks`: all (`-1`) in both clients — since Kafka 3.0 for Java (KIP-679), long before in librdkafka;
* `retries`: effectively unbounded (2,147,483,647) in both; what bounds a record's attempts is
  `delivery.timeout.ms` (Java) / `message.timeout.ms` (librdkafka);
* `enable.idempotence`: **on** in Java since 3.0, **off** in librdkafka — a Python producer
  that should not store duplicates must set it (the sections below show why).

## acks and min.insync.replicas

* `acks=0` — don't wait for anything; `acks=1` — the leader has it; `acks=all` — every replica in
  the ISR has it.
* `min.insync.replicas=2` — a topic setting: how many in-sync replicas an `acks=all` write
  needs.

Now stop brokers, one, then two of the three, and send 100 records each time.
""")
nb.code("""
two_down = predict.ask("04.acks-all-two-down", "Two of the three brokers are down. Of 100 records sent with "
                       "acks=all (min.insync.replicas=2), how many are acknowledged?", choices=[0, 50, 100])
two_down
""")
nb.code("""
restart_stopped_brokers()
topic = cluster.create_topic(f"acks-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)   # new each run
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
                "acks=all write (NOT_ENOUGH_REPLICAS), and the producer gives up after message.timeout.ms.",
                expected=0)
""")
nb.md("""
The broker **refuses** an `acks=all` write when fewer than `min.insync.replicas` replicas are in
sync: better to fail loudly than to pretend the record is safe. With one of three brokers down
two remain, enough; with two down only the leader is left. The `acks=all` records never became
safe, so the producer gave up on them after `message.timeout.ms` (`_MSG_TIMED_OUT`; it had been
retrying the broker's `NOT_ENOUGH_REPLICAS`).

Look at the *stored* column for `acks=1`: the leader acknowledged 100 records, yet a reader sees
none of them right now. Kafka 4 does not advance the high watermark while fewer than
`min.insync.replicas` replicas are in sync, so the records sit on **one** disk, invisible, until
followers return. If that broker died for good now, they would be gone although the producer was
told "success" — the risk `acks=1` takes. Bring the followers back and read again:
""")
nb.code("""
restart_stopped_brokers()
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
soon as it is written to the network connection. A partition's leader freezes (a long
garbage-collection pause, a hung disk) while 1,000 records are being sent, then crashes; a
follower takes over. The same with `acks=all` (and idempotence) for comparison:
""")
nb.code("""
acks0_lost = predict.ask("04.acks0-lost", "acks=0, 1,000 records: the leader freezes at record 300 and crashes at "
                         "record 600. Will some records the producer reported as delivered be missing from the "
                         "topic afterwards?", kind="yes/no")
acks0_lost
""")
nb.code("""
def leader_freezes_then_dies(acks):
    t = cluster.create_topic(f"acks-{acks}-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)
    leader = cluster.describe_topic(t)[0].leader
    # flush_before: the records sent so far are on their way first -- acknowledged, or with acks=0 written to
    # the leader's connection (all acks=0 waits for) -- so the freeze and the crash meet them there
    count = produce_and_count(cluster, t, count=1000, pace=0.002, keyed=False, acks=acks,
                              enable_idempotence=(acks == "all"), message_timeout_ms=30000,
                              actions={300: lambda: cluster.pause_broker(leader),
                                       600: lambda: cluster.kill_broker(leader)},
                              flush_before=(300, 600) if acks == "0" else (300,))
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
acks0_lost.reveal(blind["acks=0"].lost > 0,
                  f"{blind['acks=0'].lost} of them: everything written into the frozen leader's connection, and what "
                  "it had not yet replicated, died with it; acks=0 never hears about it. How many depends on the "
                  "moment: run the cell again and compare.")
""")

nb.md("""
## Duplicates from retries

A producer retries when it gets no answer in time. Make that happen: pause a follower (so
`acks=all` writes can't complete) until the leader drops it from the ISR, with a short
`request.timeout.ms`; the producer times out and sends again.
""")
nb.code("""
twice = predict.ask("04.duplicates", "Idempotence off, a follower stalls until the leader drops it from the ISR "
                    "(3 s), request.timeout.ms = 1.5 s: will the topic store some record twice?", kind="yes/no")
twice
""")
nb.code("""
def retries_while_follower_stalls(idempotent: bool):
    t = cluster.create_topic(f"retries-{'idem' if idempotent else 'plain'}-{uuid.uuid4().hex[:6]}", partitions=1)
    state = cluster.describe_topic(t)[0]
    follower = next(r for r in state.replicas if r != state.leader)

    def resume_once_dropped():          # the stall ends when the leader has taken the follower out of the ISR
        Wait(f"broker {follower} to leave the ISR", timeout=60, interval=0.2).until(
            lambda: follower not in cluster.describe_topic(t)[0].isr)
        cluster.resume_broker(follower)

    count = produce_and_count(
        cluster, t, count=400, pace=0.01, keyed=False,
        acks="all", enable_idempotence=idempotent, request_timeout_ms=1500, message_timeout_ms=60000,
        retry_backoff_ms=200, linger_ms=5,
        actions={150: lambda: cluster.pause_broker(follower), 400: resume_once_dropped})
    return t, count

plain_topic, plain = retries_while_follower_stalls(idempotent=False)
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
"No answer" does not mean "not written": the leader had appended each batch and was only waiting
for the stalled follower before acknowledging. The producer's request timed out, it sent the
batch again, and the leader appended it a second time.

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
## Ordering: retries with several requests in flight

`max.in.flight.requests.per.connection` is how many produce requests a producer sends to a broker
before it has heard back from the first (librdkafka's default: 1,000,000; Java's: 5). More in
flight means more throughput.

The broker refuses writes when too few replicas are in sync (`NOT_ENOUGH_REPLICAS`, a retriable
error). Make that happen now and then: one follower of a one-partition topic stops, and at least
eight times while some 3,000 records are produced, the topic's `min.insync.replicas` goes up to 3
for a moment (refused), then back to 2. The producer retries at once, 5 records per request
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
restart_stopped_brokers()
ordering_topic = cluster.create_topic(f"ordering-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)
in_flight = {
    "idempotence off, 5 in flight": dict(enable_idempotence=False, max_in_flight_requests_per_connection=5),
    "idempotence on, 5 in flight": dict(enable_idempotence=True, max_in_flight_requests_per_connection=5),
}
ordering = produce_through_refusals(cluster, ordering_topic, in_flight)
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
                    f"{loose.duplicates} twice), over {loose.refusals} refusals. With idempotence the leader checks "
                    "each batch's sequence number: a batch that arrives after a gap is refused too, so the retry "
                    "goes in first.")
""")
nb.md("""
Why the order broke: when the broker **refuses** request A but accepts request B, already on its
way behind it, A's retry is stored *after* B. Not every refusal does that: only one that ends
while a later request is already on its way behind a refused one, which depends on the moment.
So the first run was refused at least eight times and on until one had done it (at most 32), and
the idempotent run as many times (the `refusals` column). With idempotence, up to 5 requests may
be in flight and order still holds: the broker accepts a producer's batches only in sequence
(`OUT_OF_ORDER_SEQUENCE_NUMBER` otherwise), and librdkafka refuses
`max.in.flight.requests.per.connection` above 5 when idempotence is on. Without idempotence, the
old advice was one request in flight, paying a round trip per request; idempotence is the better
answer: order kept with 5 in flight, and no duplicates.
""")

nb.md("""
## Batching and compression, measured

A producer groups records per partition into batches. `linger.ms` waits a little for a batch to
fill, `batch.size` caps it, and compression works on whole batches. Decks promise 20–40 %
savings; what you get depends on the data, so measure on realistic records:
`labkit.perf.order_documents` makes 3,000 *different* JSON orders of 512 bytes (a customer, line
items from a catalogue) — records that repeat their field names, but not their values. Each of
the four codecs sends 20,000 of them, with `linger.ms=20`: bytes stored, the producer's CPU time,
throughput, and the latency each record saw (from `produce()` to its acknowledgement):
""")
nb.code("""
shrink = predict.ask("04.zstd-ratio", "zstd against no compression, on these varied order documents: how many times "
                     "less disk space do they take?", within=0.3, unit="×")
shrink
""")
nb.code("""
orders = perf.order_documents(512, count=3000)      # more distinct records than a batch holds

def measure(compression, linger_ms=20, n=20_000):
    t = cluster.create_topic(f"codec-{compression}-{linger_ms}-{uuid.uuid4().hex[:6]}", partitions=3)
    cpu = time.process_time()   # this process: the Python loop and librdkafka's threads, compression included
    sent = perf.python_producer(cluster, t, n, 512, acks="all", values=orders, keys=[str(k) for k in range(100)],
                                config={"linger.ms": linger_ms, "compression.type": compression,
                                        "batch.size": 262144, "enable.idempotence": True})
    cpu = time.process_time() - cpu
    # a segment file is its batches back to back: its size is what the batches take
    stored = sum(f.stat().st_size for part in range(3) for f in segment_files(cluster, t, part))
    return {"compression": compression, "linger.ms": linger_ms, "bytes on disk": stored, "producer CPU s": cpu,
            "records/s": sent.records_per_s, "median latency ms": sent.p50_ms, "failed": sent.failed}

codecs = pd.DataFrame([measure(codec) for codec in ("none", "gzip", "snappy", "lz4", "zstd")]).set_index("compression")
codecs["ratio"] = codecs.loc["none", "bytes on disk"] / codecs["bytes on disk"]
print(f"measured with this machine's load average at {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
codecs.round(2)
""")
nb.code("""
px.bar(codecs.reset_index(), x="compression", y=["ratio", "producer CPU s"], barmode="group", height=340,
       title="Compression of 20,000 varied order documents: ratio and producer CPU time (this run)")
""")
nb.code("""
print("every codec stores the orders in less space than none:", bool((codecs.drop("none")["ratio"] > 1).all()))
print("every record of every run acknowledged:", int(codecs["failed"].sum()) == 0)
""", check=True)
nb.code("""
ratio = codecs.loc["zstd", "ratio"]
shrink.reveal(round(ratio, 1), f"{ratio:.1f}× here, {1 - 1 / ratio:.0%} saved: every order repeats the same field "
              "names, and whole batches give the compressor many orders at once. Identical records would compress "
              "absurdly well; real ones less.")
""")
nb.code("""
compressed = codecs.drop("none")
print(f"smallest on disk: {compressed['ratio'].idxmax()} ({compressed['ratio'].max():.1f}x), "
      f"largest: {compressed['ratio'].idxmin()} ({compressed['ratio'].min():.1f}x); least producer CPU: "
      f"{compressed['producer CPU s'].idxmin()}, most: {compressed['producer CPU s'].idxmax()}")
""")
nb.md("""
The table is this run's: the ratios depend only on the data and the codec (run it again and they
barely move); CPU time and throughput depend on the machine and how busy it is (the load average
is printed above the table), so compare them within one run, never across machines.

### linger.ms: how full do batches get?

The runs above called `produce()` as fast as they could, so batches filled whatever `linger.ms`
said. A real service produces at some rate. At a steady ~1,000 records a second, compare
`linger.ms=0` (send as soon as possible) with `linger.ms=50`: records per batch, read from the
segment, and the latency each record saw.
""")
nb.code("""
from statistics import median

def steady(linger_ms, n=2000):
    t = cluster.create_topic(f"linger-{linger_ms}-{uuid.uuid4().hex[:6]}", partitions=1)
    p = cluster.producer(linger_ms=linger_ms, compression_type="zstd", enable_idempotence=True)
    latencies = []

    def on_delivery(err, msg):
        if err is None:
            latencies.append(msg.latency())

    for i in range(n):
        p.produce(t, value=orders[i % len(orders)], on_delivery=on_delivery)
        p.poll(0)
        time.sleep(0.001)                      # a steady stream, about 1,000 records a second
    p.flush(30)
    batches = dump_partition(cluster, t)
    return {"linger.ms": linger_ms, "batches": len(batches), "records per batch": n / len(batches),
            "bytes on disk": sum(b.size for b in batches), "median latency ms": 1000 * median(latencies)}

pd.DataFrame([steady(0), steady(50)]).set_index("linger.ms").round(1)
""")
nb.md("""
Waiting for a batch to fill costs each record up to `linger.ms` of latency and buys fewer, fuller
batches: fewer requests for the broker, and more for the compressor to work on.
""")

nb.md("""
## Transactions

A **transactional** producer writes to one or more partitions atomically: all records of a
transaction become visible together, or — if it aborts — never, to consumers reading with
`isolation.level=read_committed`. Commit one transaction, abort another:
""")
nb.code("""
tx_topic = cluster.create_topic(f"transfers-{uuid.uuid4().hex[:6]}", partitions=1)    # new each run
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
### Consume, transform, produce — and crash

A service reads payments, converts each amount to cents and writes the result to a ledger. So
that a crash neither loses nor repeats a payment, it puts two things in one transaction: the
ledger records it writes, **and the input offsets it has consumed** (`send_offsets_to_transaction`,
which commits the consumer group's offsets as part of the transaction). Either both happen, or
neither.

The loop below does that for batches of up to 10 payments. Its first run dies in the middle of
its sixth transaction: the ledger records of that batch are written to the broker, then the
instance is gone — no commit, no abort. (The cell keeps its two clients but never uses them
again: from the broker's side that is a process killed with `SIGKILL`.) A second run with the
same `transactional.id` and group takes over.
""")
nb.code("""
from confluent_kafka import Consumer, Producer, TopicPartition

payments = cluster.create_topic(f"payments-{uuid.uuid4().hex[:6]}", partitions=1)     # new each run
ledger = cluster.create_topic(f"ledger-{uuid.uuid4().hex[:6]}", partitions=1)
source = cluster.producer()
for i in range(100):
    source.produce(payments, key=f"acct-{i % 7}", value=json.dumps({"id": f"p{i:03d}", "amount": i + 0.25}))
source.flush(30)

zombies = []                                               # a crashed instance's clients: never used again

def transfer(crash_in_batch=None):
    \"\"\"Payments -> ledger, each batch of up to 10 one transaction, until the end of the payments.\"\"\"
    consumer = cluster.consumer(f"ledger-writer-{run}", enable_auto_commit=False, isolation_level="read_committed")
    producer = cluster.producer(transactional_id=f"ledger-writer-{run}")
    producer.init_transactions(30)                         # fences a crashed instance and aborts its transaction
    tp = TopicPartition(payments, 0)
    start = max(consumer.committed([tp], timeout=30)[0].offset, 0)   # the group's committed offset, or 0
    end = consumer.get_watermark_offsets(tp, timeout=30)[1]
    consumer.assign([TopicPartition(payments, 0, start)])
    report = {"start": start, "done": 0, "open": [], "first": None}
    position, deadline = start, time.monotonic() + 120
    while position < end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read only up to offset {position} of {end} in 120 s")
        batch = [m for m in consumer.consume(num_messages=10, timeout=1) if not m.error()]
        if not batch:
            continue
        report["first"] = report["first"] or json.loads(batch[0].value())["id"]
        producer.begin_transaction()
        for msg in batch:
            payment = json.loads(msg.value())
            producer.produce(ledger, key=msg.key(),
                             value=json.dumps({"id": payment["id"], "cents": round(payment["amount"] * 100)}))
        if report["done"] + 1 == crash_in_batch:
            producer.flush(30)                             # the ledger records reach the broker...
            zombies.append((consumer, producer))           # ...and the instance is gone: no commit, no abort
            report["open"] = [json.loads(m.value())["id"] for m in batch]
            return report
        producer.send_offsets_to_transaction(consumer.position([tp]), consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        report["done"] += 1
        position = batch[-1].offset() + 1
    consumer.close()
    return report

crash = transfer(crash_in_batch=6)
print(f"first run: from offset {crash['start']}, {crash['done']} transactions committed, then it died with "
      f"{len(crash['open'])} ledger records in an open transaction ({crash['open'][0]} to {crash['open'][-1]})")
""")
nb.code("""
exactly = predict.ask("04.ctp-exactly", "The second run takes over. How many times does a read_committed reader see "
                      "the ledger record of a payment from the batch that was open at the crash?",
                      choices=["never", "once", "twice"])
exactly
""")
nb.code("""
if "resumed" not in crash:          # run again: the second instance has taken over already
    crash["resumed"] = transfer()      # a new instance: same transactional.id, same group
resumed = crash["resumed"]

def every_payment_committed():    # the coordinator writes the last transaction's marker just after the call returns
    view = cluster.read_all(ledger, isolation_level="read_committed")
    return view if len({json.loads(r.value)["id"] for r in view}) == 100 else None

committed_view = Wait("the last transaction's COMMIT marker", timeout=30, interval=0.5).until(every_payment_committed)
everything_view = cluster.read_all(ledger, isolation_level="read_uncommitted")
seen_committed = pd.Series([json.loads(r.value)["id"] for r in committed_view]).value_counts()
seen_everything = pd.Series([json.loads(r.value)["id"] for r in everything_view]).value_counts()
crashed_ids = crash["open"]
print(f"second run: from offset {resumed['start']} (the group's committed offset), {resumed['done']} transactions; "
      f"ledger: {len(committed_view)} records read_committed, {len(everything_view)} read_uncommitted")
pd.DataFrame({"read_committed": seen_committed, "read_uncommitted": seen_everything}).loc[crashed_ids]
""")
nb.code("""
print("read_committed: every payment in the ledger exactly once:",
      len(seen_committed) == 100 and bool((seen_committed == 1).all()))
print("read_uncommitted: the open batch's records twice (the aborted copy and the redone one):",
      bool((seen_everything[crashed_ids] == 2).all()) and bool((seen_everything.drop(crashed_ids) == 1).all()))
print("the second run started at the open batch's first payment:", resumed["first"] == crashed_ids[0])
print("the crashed transaction ended in an ABORT marker:",
      "ABORT" in [r.marker for b in dump_partition(cluster, ledger) if b.control for r in b.records])
""", check=True)
nb.code("""
exactly.reveal("once" if bool((seen_committed[crashed_ids] == 1).all()) else
               "never" if not set(crashed_ids) & set(seen_committed.index) else "twice",
               "The crashed transaction's ledger records and its input offsets were never committed: the new "
               "instance's init_transactions aborted it, and the group's committed offset still pointed at the "
               "start of that batch, so the batch was processed again, in a transaction that committed.",
               expected="once")
""")
nb.md("""
Two things made it exactly once for `read_committed` readers: the offsets were committed **in**
the transaction (so the restart re-read exactly the batch whose output was aborted), and the
`transactional.id` was the same (so `init_transactions` fenced the dead instance and aborted
its open transaction). A `read_uncommitted` reader sees the aborted copies too: exactly-once is a
property of committed data. The exercise *Transfer payments exactly once* asks you to write such
a loop with a consumer group, and kills it for real.

## What you saw

| claim | shown by |
|---|---|
| the defaults are not `acks=1`, `retries=0`: librdkafka reports `acks=-1`, retries 2,147,483,647; idempotence is off in librdkafka, on in Java | librdkafka's configuration dump; producer ids in the batches each client wrote |
| `acks=all` + `min.insync.replicas=2` survives one broker down and refuses writes with two down | 0 of 100 acknowledged, `NOT_ENOUGH_REPLICAS` |
| `acks=1` keeps accepting writes on a single copy | 100 of 100 acknowledged with two brokers down |
| `acks=0` reports records as delivered that no broker stored | all 1,000 "delivered", some lost when the leader froze and died; none with `acks=all` |
| retries after lost acknowledgements duplicate records | duplicates > 0 without idempotence, 0 with it |
| producer id + sequence numbers let the broker drop duplicates | the batches in the segment dump |
| retries with several requests in flight reorder records, unless idempotent | records stored after later ones without idempotence, none with it |
| compression and batching trade CPU and latency for space | the four codecs on varied orders: ratio, CPU, throughput; records per batch at linger 0 and 50 |
| transactions are all-or-nothing for `read_committed` readers | 5 committed visible, 3 aborted hidden; COMMIT/ABORT markers |
| consume-transform-produce with the offsets in the transaction is exactly once | crashed mid-transaction: each payment once for `read_committed`, the open batch twice for `read_uncommitted` |

**Next:** lesson 05 — consumer groups.
""")
nb.code("""
predict.summary("04")
""")
nb.code("""
producer = plain = source = None   # the clients go first, so they do not complain about brokers going away
zombies.clear()
cluster.stop()
""")
