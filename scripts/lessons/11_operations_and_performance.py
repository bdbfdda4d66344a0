"""Source of notebooks/11_operations_and_performance.ipynb: build it with `python scripts/build_notebooks.py 11`."""

from labkit.authoring import Notebook

nb = Notebook("11 · Operations and performance",
              summary="Kafka as operators see it: broker logs, JMX metrics scraped with the Prometheus exporter "
                      "and a live metrics panel, consumer lag, Kafka's perf tools beside the Python client, "
                      "tuning sweeps, in-flight reordering, zero-copy vs TLS, capacity planning.",
              minutes=40)

nb.md("""
# 11 · Operations and performance

Running Kafka is mostly reading what it tells you: its **log files**, its **metrics**, the **lag**
of its consumers — and knowing which knobs move throughput and latency. This lesson breaks a broker
while a metrics panel watches, makes a consumer fall behind, races Kafka's own perf tools against
the Python client, and checks the capacity-planning rule of thumb against the bytes on disk.

*About 40 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Three brokers, each with a second client listener over TLS (the zero-copy section reads the same
data both ways). Every broker JVM carries the **Prometheus JMX exporter** as a Java agent: the
way operators expose Kafka's JMX metrics to Prometheus.
""")
nb.code("""
import time
import uuid

import pandas as pd
import plotly.express as px

import labkit
from labkit import capacity, perf, predict
from labkit.clientstats import ClientStats
from labkit.producing import counts_frame, produce_through_refusals
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster("three-brokers-tls")
run = uuid.uuid4().hex[:6]
cluster
""")

nb.md("""
## Where a broker writes its logs

Each broker writes Kafka's usual set of files (the lab's `environments/log4j2.xml` is Kafka's own
layout): `server.log` for the broker itself, `controller.log` for the KRaft controller,
`state-change.log` for partitions changing leader or followers, `kafka-request.log` (empty until
you switch it on), `log-cleaner.log` for compaction.
""")
nb.code("""
logs = cluster.broker_dir(1) / "logs"
pd.DataFrame([{"file": f.name, "bytes": f.stat().st_size} for f in sorted(logs.glob("*.log"))])
""")
nb.code("""
names = {f.name for f in logs.glob("*.log")}
print("separate files:", sorted(n for n in names if n != "stdout.log"))
print("the controller's records are in controller.log, not in server.log:",
      bool(cluster.broker_log(1, file="controller", grep="Replayed")) and
      not cluster.broker_log(1, file="server", grep="Replayed"))
""", check=True)

nb.md("""
## Metrics, scraped the way operators do

A broker publishes hundreds of JMX metrics. The exporter serves the ones its configuration
(`environments/jmx-exporter.yaml`) selects on an HTTP port per broker, in Prometheus' text format;
`cluster.metrics()` scrapes every broker and parses that text with `prometheus_client`'s own
parser into one row per sample:
""")
nb.code("""
print(cluster.metrics_endpoints())
metrics = cluster.metrics()
metrics[metrics.metric.str.contains("replicamanager|kafkacontroller_activecontroller")].head(12)
""")
nb.code("""
first = metrics[metrics.metric == "kafka_server_replicamanager_underreplicatedpartitions"]
active = metrics[metrics.metric == "kafka_controller_kafkacontroller_activecontrollercount"]
print("every broker answered its scrape:", sorted(metrics.broker.unique()) == [b.id for b in cluster.brokers])
print("under-replicated partitions now:", int(first.value.sum()))
print("exactly one active controller:", int(active.value.sum()) == 1)
""", check=True)
nb.md("""
The names are the exporter project's Kafka conventions (what Grafana dashboards expect):
`kafka_server_replicamanager_underreplicatedpartitions` is the MBean
`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`; meters such as
`BytesInPerSec` become counters, `kafka_server_brokertopicmetrics_bytesin_total`, whose rate
Prometheus computes between two scrapes — as the panel below does.
""")

nb.md("""
## A broker dies while the metrics panel watches

The live view gets a **metrics panel** with `metrics=True`: under-replicated and offline
partitions, the active controller (★), bytes in and out per second, produce and fetch p99 latency,
ISR shrinks and expands — scraped from every broker at each refresh. Keep it in sight.
""")
nb.code("""
orders = cluster.create_topic(f"orders-{run}", partitions=6, replication_factor=3)
view = cluster.view(topics=[orders], metrics=True)
view
""")
nb.md("""
The victim: the leader of the first partition not led by the active controller (killing the
controller is a different story: a new one is elected first).
""")
nb.code("""
state = cluster.describe_topic(orders)
controller = view.snapshot().metrics.active_controller
watched = next(p.partition for p in state.partitions if p.leader != controller)
victim = state[watched].leader
print(f"active controller: broker {controller}; killing broker {victim}, the leader of partition {watched}")
q_urp = predict.ask("11.urp-delay", f"Broker {victim} is killed (SIGKILL). How soon does the panel count "
                    "under-replicated partitions?", choices=["under a second", "a few seconds",
                                                             "half a minute or more"])
q_urp
""")
nb.code("""
killed_at = time.monotonic()
cluster.kill_broker(victim)
Wait("under-replicated partitions on the panel", timeout=60, interval=0.2).until(
    lambda: (view.snapshot().metrics.under_replicated or 0) > 0)
urp_after = time.monotonic() - killed_at
new_leader = cluster.wait_for_new_leader(orders, watched, victim)[watched].leader
print(f"under-replicated partitions after {urp_after:.1f} s:", view.snapshot().metrics.under_replicated)
print(f"partition {watched} is now led by broker {new_leader}")
cluster.start_broker(victim)
Wait("no under-replicated partition", timeout=60, interval=0.2).until(
    lambda: view.snapshot().metrics.under_replicated == 0)
print(f"back to 0 after {time.monotonic() - killed_at:.1f} s")
""")
nb.code("""
q_urp.reveal("under a second" if urp_after < 1 else "a few seconds" if urp_after < 20 else "half a minute or more",
             f"A killed broker says nothing: the controller notices only when its heartbeats stop for "
             f"broker.session.timeout.ms (4 s in the lab, 9 s by default); it then fences it and shrinks "
             f"every ISR it was in ({urp_after:.1f} s here).")
""")
nb.code("""
history = view.metrics_history()
history["seconds"] = history.time - history.time.iloc[0]
px.line(history, x="seconds", y=["under_replicated", "brokers_up", "isr_expands"], height=320,
        title="What the panel showed: under-replicated partitions rise, then fall").update_traces(line_shape="hv")
""")
nb.code("""
print("under-replicated partitions rose above 0:", history.under_replicated.max() > 0)
print("and fell back to 0:", history.under_replicated.iloc[-1] == 0)
print("no partition went offline (RF 3 keeps a leader):", history.offline_partitions.fillna(0).max() == 0)
""", check=True)
nb.md("""
Offline partitions stay at 0: every partition had two other in-sync replicas. And look at *ISR
shrinks*: they stayed put. A leader shrinks its ISR when a follower is alive but lagging; a dead
broker is taken out of every ISR by the **controller** when it fences it. Both logs say so:
""")
nb.code("""
election = rf"Leader {orders}-{watched} .*Previous leader Some\\({victim}\\)"
print(cluster.broker_log(controller, file="controller", grep=f"Fencing broker {victim}|handleBrokerFenced", lines=2))
print(cluster.broker_log(new_leader, file="state-change", grep=election, lines=1))
""")
nb.code("""
fenced = cluster.broker_log(controller, file="controller", grep=f"Fencing broker {victim} ")
elected = cluster.broker_log(new_leader, file="state-change", grep=election)
print("controller.log: the controller fenced the dead broker:", "because its session has timed out" in fenced)
print("state-change.log: the partition's new leader took over from the dead one:",
      f"Leader {orders}-{watched} " in elected)
""", check=True)
nb.md("""
### Optional: the request log

`kafka-request.log` stays empty because the `kafka.request.logger` logger is at `WARN`. Operators
switch it on at run time, per broker, without a restart — it is verbose, so only for a moment:
""")
nb.code("""
def request_log(level):
    cluster.tool("kafka-configs", "--entity-type", "broker-loggers", "--entity-name", "1", "--alter",
                 "--add-config", f"kafka.request.logger={level}")

request_log("DEBUG")
cluster.describe_topic(orders)
Wait("request log lines", timeout=20).until(lambda: cluster.broker_log(1, file="request", grep="Completed request"))
request_log("WARN")
print(cluster.broker_log(1, file="request", grep="Completed request", lines=2)[:600])
""")
nb.code("""
print("the request log fills once switched on:", bool(cluster.broker_log(1, file="request", grep="Completed request")))
""", check=True)

nb.md("""
## Consumer lag, as operators watch it

Lag is how far a group is behind the end of the log: **log-end offset − committed offset** per
partition. Two places show it: the client's own metrics (librdkafka's statistics, here through
`ClientStats`, Java's `records-lag`), and Kafka's `kafka-consumer-groups` tool, which computes it
from the group's commits. Below, a producer writes 1,000 records/s and the consumer needs 4 ms
per record — at most 250 a second.
""")
nb.code("""
q_lag = predict.ask("11.lag", "After 5 s, how many records behind is the consumer?", unit="records",
                    within=0.35)
q_lag
""")
nb.code("""
clicks = cluster.create_topic(f"clicks-{run}", partitions=1)
group = f"dashboard-{run}"
stats = ClientStats()
producer = cluster.producer(linger_ms=5)
consumer = cluster.consumer(group, enable_auto_commit=False, **stats.config(interval_ms=250))
consumer.subscribe([clicks])
produced = consumed = 0
start = time.monotonic()
while time.monotonic() - start < 5:
    while produced < (time.monotonic() - start) * 1000:     # the producer: 1,000 records/s
        producer.produce(clicks, value=f"click-{produced}")
        produced += 1
    producer.poll(0)
    msg = consumer.poll(0.05)
    if msg is None:
        continue
    if msg.error():
        print("consumer error:", msg.error())
        continue
    time.sleep(0.004)                                       # the consumer: 4 ms of work per record
    consumed += 1
    if consumed % 50 == 0:
        consumer.commit(asynchronous=False)
consumer.commit(asynchronous=False)
producer.flush(10)
consumer.poll(0.5)                                          # one more statistics report
described = cluster.tool("kafka-consumer-groups", "--describe", "--group", group)
consumer.close()
print(f"produced {produced}, consumed {consumed}")
print(described)
""")
nb.code("""
rows = [line.split() for line in described.lines if line.startswith(group)]
tool_lag = sum(int(r[5]) for r in rows)
lag_over_time = stats.history().dropna(subset=["consumer_lag"])
px.line(lag_over_time, x="seconds", y="consumer_lag", height=300,
        title="The client's lag metric (librdkafka statistics, every 250 ms)")
""")
nb.code("""
print("kafka-consumer-groups shows the group behind:", tool_lag > 0)
print("the client's lag metric kept growing:", lag_over_time.consumer_lag.iloc[-1] > lag_over_time.consumer_lag.iloc[0])
""", check=True)
nb.code("""
q_lag.reveal(tool_lag, f"1,000 in per second, at most 250 out: the lag grows by ~750 a second. A consumer that "
             f"cannot keep up never catches up by itself — add consumers (up to one per partition) or make each "
             f"record cheaper. The client said {int(lag_over_time.consumer_lag.iloc[-1])} in its last report.")
""")
nb.md("""
Alert on lag that **keeps growing**, not on a number: a lag of 10,000 is fine for a batch job
reading once an hour and a disaster for a fraud check. The client's metric is measured from its
position; the tool's from the last commit, so a consumer that forgets to commit looks stuck to
the tool while its own metric looks fine.
""")

nb.md("""
## Throughput: Kafka's perf tools beside the Python client

Kafka ships `kafka-producer-perf-test` and `kafka-consumer-perf-test` (Java, from the same jars
as the brokers). Run them and the Python client on the **same topic**, same record size, same
`acks`, each with its defaults otherwise:
""")
nb.code("""
q_race = predict.ask("11.python-vs-java", "50,000 records of 200 bytes, acks=all, default settings otherwise. "
                     "Which producer is faster?", choices=["the Java perf tool", "about the same (within 30 %)",
                                                           "the Python client"])
q_race
""")
nb.code("""
bench = cluster.create_topic(f"bench-{run}", partitions=3)
race = [perf.java_producer(cluster, bench, 50_000, 200, acks="all"),
        perf.python_producer(cluster, bench, 50_000, 200, acks="all"),
        perf.java_consumer(cluster, bench, 100_000),
        perf.python_consumer(cluster, bench, 100_000)]
perf.frame(race).round(1)
""")
nb.code("""
print("every record acknowledged and read back, by both clients:",
      [r.records for r in race] == [50_000, 50_000, 100_000, 100_000] and not any(r.failed for r in race))
""", check=True)
nb.code("""
ratio = race[1].records_per_s / race[0].records_per_s
q_race.reveal("the Python client" if ratio > 1.3 else "the Java perf tool" if ratio < 1 / 1.3
              else "about the same (within 30 %)",
              f"Python/Java = {ratio:.2f}. The Python client is a thin layer over librdkafka (C); what differs "
              f"most is the defaults: the Java producer is idempotent (at most 5 requests in flight) and "
              f"batches 16 kB per partition, librdkafka is not (up to 1,000,000 in flight) and batches up "
              f"to 1 MB. When every acks=all round trip is slow, the Java defaults cap the throughput.")
""")
nb.md("""
### batch.size × linger.ms × compression × acks

Sixteen runs of the Python producer, 20,000 JSON-like records of 300 bytes each: every
combination of two values of each setting. Throughput from first record to last
acknowledgement; p99 latency from `produce()` to the delivery callback, per record.
""")
nb.code("""
import json
import itertools

record = json.dumps({"user": "someone@example.com", "page": "/products/42", "ms": 1234, "ok": True} |
                    {f"field{i}": "value" for i in range(14)}).encode().ljust(300)[:300]
sweep_topic = cluster.create_topic(f"sweep-{run}", partitions=3)
rows = []
for batch, linger, compression, acks in itertools.product([16_384, 1_000_000], [0, 20], ["none", "lz4"], ["1", "all"]):
    result = perf.python_producer(cluster, sweep_topic, 20_000, len(record), acks=acks, value=record,
                                  config={"batch.size": batch, "linger.ms": linger, "compression.type": compression})
    rows.append(result.as_row(**{"batch.size": batch, "linger.ms": linger, "compression": compression, "acks": acks}))
sweep = pd.DataFrame(rows)
sweep[["batch.size", "linger.ms", "compression", "acks", "records/s", "MB/s", "p99 ms", "failed"]].round(1)
""")
nb.code("""
sweep["setting"] = "batch " + (sweep["batch.size"] // 1000).astype(str) + " kB, linger " + sweep["linger.ms"].astype(str)
px.scatter(sweep, x="p99 ms", y="records/s", color="setting", symbol="compression", facet_col="acks",
           size="MB/s", size_max=18, log_x=True, height=420,
           title="Throughput against p99 latency, per setting (marker size: MB/s)")
""")
nb.code("""
print("16 runs, every record acknowledged:", len(sweep) == 16 and (sweep.failed == 0).all())
""", check=True)
nb.code("""
effect = {name: sweep.groupby(col)["records/s"].median().agg(lambda s: s.max() / s.min())
          for name, col in [("batch.size", "batch.size"), ("linger.ms", "linger.ms"),
                            ("compression", "compression"), ("acks", "acks")]}
pd.Series(effect, name="best / worst median records/s").round(2)
""")
nb.md("""
Read the plot from the top left (fast, low latency) to the bottom right. `acks=1` answers after
the leader's write, `acks=all` after the followers fetched it: a round trip more per batch. Bigger
batches and a little `linger.ms` send fewer, fuller requests; on a laptop where brokers and
client share two cores, the saved per-request work is what counts. Compression costs CPU on the
producer and saves bytes on the wire and on disk.
""")

nb.md("""
## `max.in.flight.requests.per.connection`: ordering under retries

A producer keeps up to `max.in.flight.requests.per.connection` requests to a broker unanswered:
5 in the Java producer, **1,000,000** in librdkafka. If one of them fails with a retriable error
and a later one succeeds, the retry is written **after** the later records. Make a partition
refuse writes now and then while 3,000 records stream in: its ISR is one replica short (a
follower is stopped) and its `min.insync.replicas` goes up to 3 for a moment and back to 2 —
what a leader answers when its ISR shrinks below the minimum, `NOT_ENOUGH_REPLICAS`
(`labkit.producing.produce_through_refusals`, which lesson 04 uses with 5 requests in flight).
The leader counts every refused request.
""")
nb.code("""
q_reorder = predict.ask("11.reorder", "Idempotence off, librdkafka's default max.in.flight, retries on. Will the "
                        "partition store some records out of the order they were sent?", kind="yes/no")
q_reorder
""")
nb.code("""
def failed_produce_requests(topic):
    found = cluster.metrics(match="failedproducerequests")
    return int(found[found.labels == f"topic={topic}"].value.sum())

ordering = cluster.create_topic(f"ordering-{run}", partitions=1, replication_factor=3)
inflight = produce_through_refusals(cluster, ordering, {"enable.idempotence=false": {"enable.idempotence": False},
                                                        "enable.idempotence=true": {"enable.idempotence": True}})
refused = failed_produce_requests(ordering)
print(f"the leader refused {refused} produce requests (kafka_server_brokertopicmetrics_failedproducerequests_total)")
counts_frame(inflight)
""")
nb.code("""
plain, idempotent = inflight.values()
print("idempotence off: records stored out of order:", plain.reordered > 0)
print("idempotence on: stored out of order:", idempotent.reordered, "duplicates:", idempotent.duplicates)
print("every record acknowledged in every run:", all(r.acked == r.sent for r in inflight.values()))
""", check=True)
nb.code("""
q_reorder.reveal(plain.reordered > 0, f"{plain.reordered} records landed after later ones. With idempotence "
                 "the broker tracks each producer's sequence numbers and refuses a batch that would skip one "
                 "(OUT_OF_ORDER_SEQUENCE_NUMBER); the client resends in order, up to 5 requests in flight.")
""")
nb.md("""
Look at the *duplicates* column too: a batch the leader had written just before the refusal caught
it is written again by the retry. Idempotence fixes both. (`max.in.flight.requests.per.connection=1`
is the old fix for ordering alone: one round trip per request, and the duplicates stay.) For an
operator the signals are `FailedProduceRequestsPerSec` on the leader and the under-replicated
partition on the panel while the follower was down; the fix is on the producer:
`enable.idempotence=true` (the Java producer's default since Kafka 3.0, not librdkafka's).
""")

nb.md("""
## Zero-copy: PLAINTEXT fetches vs TLS fetches

To serve a fetch on a PLAINTEXT listener the broker asks the kernel to copy file pages straight
to the socket (`sendfile`): the records never enter the JVM. TLS must encrypt every byte, so the
broker reads them into its heap, encrypts, and writes — `sendfile` is impossible. Read the same
30 MB from the same brokers through both listeners, twice each, and let the brokers' own
`process_cpu_seconds_total` count the CPU it cost them:
""")
nb.code("""
q_tls = predict.ask("11.tls-cost", "Per MB served, how much broker CPU does a TLS fetch cost compared with a "
                    "PLAINTEXT one?", choices=["about the same", "up to twice as much", "more than twice as much"])
q_tls
""")
nb.code("""
import os

zc = cluster.create_topic(f"zero-copy-{run}", partitions=3)
noise = os.urandom(1000)                       # random bytes: nothing for compression to gain
perf.python_producer(cluster, zc, 30_000, len(noise), acks="1", config={"linger.ms": 20}, value=noise)

def broker_cpu():
    return cluster.metrics(match="process_cpu_seconds").value.sum()

reads = []
for listener in ["PLAINTEXT", "TLS", "PLAINTEXT", "TLS"]:
    config = cluster.tls_settings() if listener == "TLS" else {}
    before = broker_cpu()
    result = perf.python_consumer(cluster, zc, 30_000, config=config)
    cpu = broker_cpu() - before
    reads.append({"listener": listener, "MB": result.bytes / 2**20, "MB/s": result.mb_per_s,
                  "broker CPU s": cpu, "broker CPU ms per MB": 1000 * cpu / (result.bytes / 2**20)})
zero_copy = pd.DataFrame(reads)
zero_copy.round(2)
""")
nb.code("""
per_mb = zero_copy.groupby("listener")["broker CPU ms per MB"].median()
px.bar(zero_copy, x="listener", y="broker CPU ms per MB", color="listener", barmode="group", height=320,
       title="Broker CPU per MB served: sendfile vs encrypt-and-copy")
""")
nb.code("""
print("every read got all 30,000 records:", (zero_copy.MB.round(1) == round(30_000 * 1000 / 2**20, 1)).all())
print("TLS costs the brokers more CPU per MB than PLAINTEXT:", per_mb["TLS"] > per_mb["PLAINTEXT"])
""", check=True)
nb.code("""
times = per_mb["TLS"] / per_mb["PLAINTEXT"]
q_tls.reveal("about the same" if times < 1.2 else "up to twice as much" if times <= 2 else "more than twice as much",
             f"{times:.1f}× here. PLAINTEXT: sendfile, the page cache goes to the socket in the kernel. TLS: "
             f"read, encrypt, write, in the JVM (and the client decrypts).")
""")
nb.md("""
That is the price of encryption in transit: plan broker CPU for it (the factor depends on the
CPU, the JVM and the cipher: measure on your own hardware), and watch the brokers' network
threads (`NetworkProcessorAvgIdlePercent`) once clients switch to TLS.
""")

nb.md("""
## Capacity planning

The course's rule of thumb: **disk = message size × replication factor × messages per day ×
retention days × 1.4 headroom**. Try it:
""")
nb.code("""
capacity.calculator(message_bytes=1000, replication=3, messages_per_day=50_000_000, retention_days=7)
""")
nb.md("""
Now check it against what this cluster stores for a measured load: 20,000 records of 512 bytes,
replication factor 3, one "day" of retention.
""")
nb.code("""
cap_topic = cluster.create_topic(f"capacity-{run}", partitions=3, replication_factor=3)
load = perf.python_producer(cluster, cap_topic, 20_000, 512, acks="all")
rule = capacity.estimate(message_bytes=512, replication=3, messages_per_day=load.records, retention_days=1)
def log_size_metric():
    sizes = cluster.metrics(match="kafka_log_log_size")
    return sizes[sizes.labels.str.endswith(f"topic={cap_topic}")].value.sum()

Wait("every replica to have every record", timeout=30).until(lambda: log_size_metric() >= rule.raw)
on_disk = capacity.stored_by(cluster, cap_topic)
on_disk.pivot_table(index="kind", values=["bytes", "disk_bytes"], aggfunc="sum")
""")
nb.code("""
log_bytes = on_disk.query("kind == 'log'").bytes.sum()
metric = log_size_metric()
overhead = (log_bytes / 3 - load.bytes) / load.records
pd.Series({"payload × replicas (the rule without headroom)": rule.raw, "segment files (.log), all replicas": log_bytes,
           "kafka_log_log_size, summed over brokers": metric, "the rule with 1.4 headroom": rule.total,
           "overhead per record (bytes)": overhead}).round(1)
""")
nb.code("""
print("the size metric is the segment files' size:", metric == log_bytes)
print("stored more than size × replication × count:", log_bytes > rule.raw)
print("and less than the rule with its 1.4 headroom:", log_bytes < rule.total)
""", check=True)
nb.md("""
Where the difference goes: each record carries a few bytes of framing (length, attributes,
offset and timestamp deltas, key length, header count — varints), each batch of them 61 bytes
of header, and every replica stores all of it. The index files of the active segment are
**preallocated** to `segment.index.bytes` (10 MB) — the `bytes` column — but sparse: the
`disk_bytes` actually allocated are a few kB, and they are trimmed when the segment rolls. The
1.4 covers what the rule leaves out: uneven partitions, the segment that is still open past
retention, a broker's share while another is down.
""")

nb.md("""
## Fetch tuning

A consumer's fetch request waits on the broker until **`fetch.min.bytes`** are available or
**`fetch.max.wait.ms`** passed (librdkafka spells it `fetch.wait.max.ms`); **`max.partition.fetch.bytes`**
caps what one partition returns per fetch. Two consumers read the same trickle of 300 records/s —
one with the defaults (`fetch.min.bytes=1`), one asking for at least 64 kB or 500 ms:
""")
nb.code("""
trickle = cluster.create_topic(f"trickle-{run}", partitions=3)
consumers = {}
for i, (name, config) in enumerate([("fetch.min.bytes=1 (default)", {}),
                                    ("fetch.min.bytes=65536, fetch.wait.max.ms=500",
                                     {"fetch.min.bytes": 65536, "fetch.wait.max.ms": 500})]):
    client_stats = ClientStats()
    c = cluster.consumer(f"trickle-{i}-{run}", auto_offset_reset="latest", **config,
                         **client_stats.config(interval_ms=200))
    c.subscribe([trickle])
    consumers[name] = (c, client_stats, [])
Wait("both consumers assigned", timeout=30).until(
    lambda: all(c.poll(0.1) is None and c.assignment() for c, _, _ in consumers.values()))
producer = cluster.producer(linger_ms=0)
fetches_before = {n: s.requests("Fetch") for n, (_, s, _) in consumers.items()}
start, sent = time.monotonic(), 0
while time.monotonic() - start < 3:
    while sent < (time.monotonic() - start) * 300:
        producer.produce(trickle, value=b"x" * 500)
        sent += 1
    producer.poll(0)
    for c, _, latencies in consumers.values():
        msg = c.poll(0.005)
        if msg is not None and not msg.error():
            latencies.append(time.time() * 1000 - msg.timestamp()[1])
fetch_rows = []
for name, (c, s, latencies) in consumers.items():
    c.poll(0.3)
    fetch_rows.append({"consumer": name, "fetch requests in 3 s": s.requests("Fetch") - fetches_before[name],
                       "median latency ms": pd.Series(latencies).median(), "records": len(latencies)})
    c.close()
fetch_min = pd.DataFrame(fetch_rows).set_index("consumer")
fetch_min.round(1)
""")
nb.code("""
default, batched = fetch_min.iloc[0], fetch_min.iloc[1]
print("fetch.min.bytes=64 kB sent fewer fetch requests:", batched["fetch requests in 3 s"] < default["fetch requests in 3 s"])
print("and its records waited longer:", batched["median latency ms"] > default["median latency ms"])
""", check=True)
nb.md("""
`fetch.min.bytes` trades latency for fewer, fuller fetches — less work for brokers with many
consumers. Now `max.partition.fetch.bytes`. A broker always returns at least one whole batch,
however large, so the limit matters for topics written in small batches: write 10,000 records of
1 kB in 16 kB batches, read them with the default 1 MB per partition and with 16 kB, and count the
fetch requests the way an operator does, on the brokers
(`kafka.network:type=RequestMetrics,request=FetchConsumer`):
""")
nb.code("""
small_batches = cluster.create_topic(f"small-batches-{run}", partitions=3)
perf.python_producer(cluster, small_batches, 10_000, len(noise), acks="1", config={"batch.size": 16384}, value=noise)

def consumer_fetches():
    found = cluster.metrics(match="requestmetrics_requests")
    return int(found[found.labels == "request=FetchConsumer"].value.sum())

partition_fetch = []
for limit in [1_048_576, 16_384]:
    before = consumer_fetches()
    result = perf.python_consumer(cluster, small_batches, 10_000, config={"max.partition.fetch.bytes": limit})
    partition_fetch.append({"max.partition.fetch.bytes": limit, "MB/s": result.mb_per_s,
                            "fetch requests served": consumer_fetches() - before, "records": result.records})
partition_fetch = pd.DataFrame(partition_fetch).set_index("max.partition.fetch.bytes")
partition_fetch.round(1)
""")
nb.code("""
print("16 kB per partition needed more fetch requests:",
      partition_fetch["fetch requests served"].iloc[1] > partition_fetch["fetch requests served"].iloc[0])
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| brokers write `server.log`, `controller.log`, `state-change.log`, a request log on demand | the files, `broker_log(file=..., grep=...)`, `kafka.request.logger=DEBUG` at run time |
| JMX metrics scraped as Prometheus does: URP, offline partitions, active controller, bytes, latency, ISR changes | `cluster.metrics()`, the live metrics panel |
| a dead broker shows as under-replicated partitions within the session timeout, then clears | the panel's history; the controller log's fencing; the state-change log's new leader |
| lag = log end − committed; a slow consumer falls further behind | the client's lag metric and `kafka-consumer-groups` |
| Kafka's perf tools and the Python client measured on the same topic | `kafka-producer-perf-test`, `kafka-consumer-perf-test`, `labkit.perf` |
| batching, linger, compression and acks trade throughput for latency | the 16-run sweep |
| with idempotence off, retries with several requests in flight reorder records; on, they do not | records counted out of order on the broker |
| PLAINTEXT fetches use zero-copy; TLS cannot | broker CPU per MB, same brokers, both listeners |
| size × replication × volume × 1.4 covers what is stored | segment files, `kafka_log_log_size`, the index files |
| `fetch.min.bytes`, `fetch.max.wait.ms`, `max.partition.fetch.bytes` | fetch requests counted, latency measured |

The graded exercise *tune_producer* asks you to make a producer at least three times faster than
the default — with `acks=all`, idempotence on, and nothing lost.
""")
nb.code("""
predict.summary("11")
""")
nb.code("""
view.close()
cluster.stop()
""")
