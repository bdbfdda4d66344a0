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
import os
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
every_broker = sorted(b.id for b in cluster.brokers)

def settled_scrape():
    # every broker answered (a busy one may miss a scrape: no rows for it) and the quorum has its one leader
    found = cluster.metrics()
    active = found[found.metric == "kafka_controller_kafkacontroller_activecontrollercount"].value.sum()
    return [found] if sorted(found.broker.unique()) == every_broker and active == 1 else None


metrics = Wait("every broker's exporter to answer, one active controller", timeout=60).until(settled_scrape)[0]
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
def panel(field):
    # what the panel's latest scrape showed (None until the first one, or while a scrape fails on a busy machine)
    metrics = view.snapshot().metrics
    return getattr(metrics, field) if metrics is not None else None


state = cluster.describe_topic(orders)
controller = Wait("the panel's first scrape", timeout=60).until(lambda: panel("active_controller"))
watched = next(p.partition for p in state.partitions if p.leader != controller)
victim = state[watched].leader
print(f"active controller: broker {controller}; killing broker {victim}, the leader of partition {watched}")
q_urp = predict.ask("11.urp-delay", f"Broker {victim} is killed (SIGKILL). How soon does the panel count "
                    "under-replicated partitions?", choices=["under 1 s", "a few seconds", "30 s or more"])
q_urp
""")
nb.code("""
def replicas_on(broker):
    return sorted(d.name for d in cluster.log_dir(broker).glob(f"{orders}-*"))


def seconds_of_day(moment):            # a log line's [HH:MM:SS,mmm], or time.time(), as seconds since midnight
    if isinstance(moment, str):
        h, m, rest = moment.split("]")[0].lstrip("[").split(":")
        return int(h) * 3600 + int(m) * 60 + float(rest.replace(",", "."))
    local = time.localtime(moment)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + moment % 1


def fencings():
    return cluster.broker_log(controller, file="controller", grep=f"Fencing broker {victim} ", lines=100).splitlines()


survivors = [b for b in cluster.broker_ids if b != victim]
before, fenced_before = {b: replicas_on(b) for b in survivors}, len(fencings())
killed_at, killed_wall = time.monotonic(), time.time()
cluster.kill_broker(victim)
urp_seen = Wait("under-replicated partitions on the panel", timeout=60, interval=0.2).until(
    lambda: (panel("under_replicated") or 0) > 0 and panel("under_replicated"))
urp_after = time.monotonic() - killed_at
new_leader = cluster.wait_for_new_leader(orders, watched, victim)[watched].leader
fence_line = Wait("the controller's fencing line", timeout=60).until(
    lambda: fencings()[fenced_before:] and fencings()[-1])
fenced_after = (seconds_of_day(fence_line) - seconds_of_day(killed_wall)) % 86400
while_down = {b: replicas_on(b) for b in survivors}
print(f"under-replicated partitions after {urp_after:.1f} s:", urp_seen)
print(f"controller.log: broker {victim} fenced {fenced_after:.1f} s after the kill (broker.session.timeout.ms = "
      f"{int(cluster.describe_configs('broker', str(controller))['broker.session.timeout.ms']) / 1000:g} s; "
      f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
print(f"partition {watched} is now led by broker {new_leader}")
cluster.start_broker(victim)
Wait("no under-replicated partition", timeout=60, interval=0.2).until(lambda: panel("under_replicated") == 0)
print(f"back to 0 after {time.monotonic() - killed_at:.1f} s")
""")
nb.code("""
q_urp.reveal("under 1 s" if urp_after < 1 else "a few seconds" if urp_after < 20 else "30 s or more",
             f"A killed broker says nothing: the controller notices only when its heartbeats stop for "
             f"broker.session.timeout.ms (4 s in the lab, 9 s by default); it then fences it and shrinks "
             f"every ISR it was in (fenced {fenced_after:.1f} s after the kill here, on the panel "
             f"{urp_after:.1f} s).",
             expected="a few seconds")
""")
nb.code("""
history = view.metrics_history()
view.close("stopped after the broker came back")   # the panel keeps what it showed; its scrapes stop costing CPU
history["seconds"] = history.time - history.time.iloc[0]
px.line(history, x="seconds", y=["under_replicated", "brokers_up", "isr_expands"], height=320,
        title="What the panel showed: under-replicated partitions rise, then fall").update_traces(line_shape="hv")
""")
nb.code("""
print("under-replicated partitions rose above 0:", history.under_replicated.max() > 0)
print("and fell back to 0:", history.under_replicated.dropna().iloc[-1] == 0)
print("no partition went offline (RF 3 keeps a leader):", history.offline_partitions.fillna(0).max() == 0)
print("while the broker was down, no replica moved to the other brokers:", while_down == before)
""", check=True)
nb.md("""
Offline partitions stay at 0: every partition had two other in-sync replicas. Nor did anything
move: Kafka does not re-replicate a dead broker's partitions by itself — they stay
under-replicated until the broker returns or an operator reassigns them (lesson 13), so the other
brokers' disks hold what they held. And look at *ISR shrinks*: they stayed put. A leader shrinks its ISR when a follower is alive but lagging; a dead
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
`ClientStats`), and Kafka's `kafka-consumer-groups` tool, which computes it from the group's
commits. Below, a producer writes 1,000 records/s and the consumer needs 4 ms per record — at most
250 a second — and commits every 50 records.
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
Wait("the consumer's partition", timeout=60, interval=0).until(lambda: consumer.poll(0.1) is None and consumer.assignment())
produced = consumed = 0
start = time.monotonic()                                    # the clock starts once the consumer is in
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
if consumed % 50:                                           # what the last commit did not cover (none: _NO_OFFSET)
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
        title="The client's consumer_lag (librdkafka statistics, every 250 ms)")
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
reading once an hour and a disaster for a fraud check.

### Lag from the commit, lag from the position

librdkafka reports two lags per partition: `consumer_lag`, from the **committed** offset (the
tool's number), and `consumer_lag_stored`, from the offset the consumer has *stored* for its next
commit — its position after the last record handed to the application (Java's `records-lag` is
position-based too). A consumer that reads the whole topic but commits only once, after its first
100 records:
""")
nb.code("""
forgetful = ClientStats()
forgetful_group = f"forgetful-{uuid.uuid4().hex[:6]}"
reader = cluster.consumer(forgetful_group, enable_auto_commit=False, **forgetful.config(interval_ms=100))
reader.subscribe([clicks])
end = cluster.describe_topic(clicks)[0].high_watermark
seen = []


def read_on():
    for msg in reader.consume(num_messages=500, timeout=0.5):
        if not msg.error():
            seen.append(msg.offset())
            if len(seen) == 100:
                reader.commit(message=msg, asynchronous=False)  # the only commit
    # done once it has read to the end and a statistics report (librdkafka's own fields) has seen it there
    report = (forgetful.latest or {}).get("topics", {}).get(clicks, {}).get("partitions", {}).get("0", {})
    return bool(seen) and seen[-1] + 1 >= end and report.get("stored_offset") == end


try:
    Wait("the reader at the end of the topic, in its statistics", timeout=60, interval=0).until(read_on)
    both = forgetful.partitions()[["hi_offset", "committed_offset", "stored_offset", "consumer_lag",
                                   "consumer_lag_stored"]]
finally:
    reader.close()
tool_rows = [line.split() for line in cluster.tool("kafka-consumer-groups", "--describe", "--group",
                                                   forgetful_group).lines if line.startswith(forgetful_group)]
both.assign(**{"kafka-consumer-groups LAG": [int(r[5]) for r in tool_rows]})
""")
nb.code("""
row = both.iloc[0]
print("consumer_lag = log end − committed offset = the tool's LAG:",
      row.consumer_lag == row.hi_offset - row.committed_offset == int(tool_rows[0][5]) > 0)
print("consumer_lag_stored = log end − stored offset = 0: it has read everything:", row.consumer_lag_stored == 0)
""", check=True)
nb.md("""
Same consumer, two answers: to the tool and to `consumer_lag` it is stuck a long way behind; by
`consumer_lag_stored` it is up to date. Watch the lag from the committed offset — that is where a
restart, a rebalance or another member resumes — and the position-based one to see whether the
consumer itself keeps up.
""")

nb.md("""
## Throughput: Kafka's perf tools beside the Python client

Kafka ships `kafka-producer-perf-test` and `kafka-consumer-perf-test` (Java, from the same jars
as the brokers). Run them and the Python client on the **same topic**, same record size, same
`acks`, each with its defaults otherwise:
""")
nb.code("""
q_race = predict.ask("11.python-vs-java", "50,000 records of 200 bytes, acks=all, default settings otherwise. "
                     "Which producer is faster (\\"about the same\\": within 30 %)?",
                     choices=["Java's perf tool", "about the same", "Python's client"])
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
q_race.reveal("Python's client" if ratio > 1.3 else "Java's perf tool" if ratio < 1 / 1.3 else "about the same",
              f"Python/Java = {ratio:.2f}. The Python client is a thin layer over librdkafka (C); what differs "
              f"most is the defaults: the Java producer is idempotent (at most 5 requests in flight) and "
              f"batches 16 kB per partition, librdkafka is not (up to 1,000,000 in flight) and batches up "
              f"to 1 MB. When every acks=all round trip is slow, the Java defaults cap the throughput.",
              expected=predict.MEASURED)
""")
nb.md("""
### batch.size × linger.ms × acks

Eight runs of the Python producer, 20,000 records of 300 bytes each, uncompressed: every
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
for batch, linger, acks in itertools.product([16_384, 1_000_000], [0, 20], ["1", "all"]):
    result = perf.python_producer(cluster, sweep_topic, 20_000, len(record), acks=acks, value=record,
                                  config={"batch.size": batch, "linger.ms": linger})
    rows.append(result.as_row(**{"batch.size": batch, "linger.ms": linger, "acks": acks}))
sweep = pd.DataFrame(rows)
sweep[["batch.size", "linger.ms", "acks", "records/s", "MB/s", "p99 ms", "failed"]].round(1)
""")
nb.code("""
sweep["setting"] = "batch " + (sweep["batch.size"] // 1000).astype(str) + " kB, linger " + sweep["linger.ms"].astype(str)
px.scatter(sweep, x="p99 ms", y="records/s", color="setting", facet_col="acks",
           size="MB/s", size_max=18, log_x=True, height=420,
           title="Throughput against p99 latency, per setting (marker size: MB/s)")
""")
nb.code("""
print("8 runs, every record acknowledged:", len(sweep) == 8 and (sweep.failed == 0).all())
""", check=True)
nb.code("""
effect = {name: sweep.groupby(col)["records/s"].median().agg(lambda s: s.max() / s.min())
          for name, col in [("batch.size", "batch.size"), ("linger.ms", "linger.ms"), ("acks", "acks")]}
pd.Series(effect, name="best / worst median records/s").round(2)
""")
nb.md("""
Read the plot from the top left (fast, low latency) to the bottom right. `acks=1` answers after
the leader's write, `acks=all` after the followers fetched it: a round trip more per batch. Bigger
batches and a little `linger.ms` send fewer, fuller requests; on a laptop where brokers and
client share two cores, the saved per-request work is what counts.

### Compression, on records that differ

Compression costs CPU on the producer and saves bytes on the wire, in the followers' fetches and on
every replica's disk. How much it saves depends on the data — the same record sent again and again
compresses absurdly well, so this uses 5,000 **different** order documents of 1 kB
(`perf.order_documents`: a customer, line items from a catalogue of 100 products, like real business
events), each sent once per codec to a topic of its own. The ratio is the payload over the bytes the
broker stores; the CPU is this process's (the producer's, librdkafka's threads included):
""")
nb.code("""
documents = perf.order_documents(1000, count=5000, seed=11)
codecs = []
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    topic = cluster.create_topic(f"codec-{codec}-{run}", partitions=3, replication_factor=1)
    cpu = time.process_time()
    result = perf.python_producer(cluster, topic, len(documents), 1000, acks="all", values=documents,
                                  config={"compression.type": codec, "linger.ms": 20, "batch.size": 1_000_000})
    cpu = time.process_time() - cpu
    stored = capacity.stored_by(cluster, topic).query("kind == 'log'").bytes.sum()
    codecs.append({"compression.type": codec, "payload MB": result.bytes / 1e6, "stored MB": stored / 1e6,
                   "ratio": result.bytes / stored, "saved %": 100 * (1 - stored / result.bytes),
                   "producer CPU s": cpu, "records/s": result.records_per_s, "failed": result.failed})
codecs = pd.DataFrame(codecs).set_index("compression.type")
codecs.round(2)
""")
nb.code("""
print("every record acknowledged:", (codecs.failed == 0).all())
print("every codec stores less than none:", (codecs.loc[["gzip", "snappy", "lz4", "zstd"], "ratio"] > 1).all())
print("gzip and zstd shrink these records more than snappy and lz4:",
      codecs.loc[["gzip", "zstd"], "ratio"].min() > codecs.loc[["snappy", "lz4"], "ratio"].max())
""", check=True)
nb.md("""
Every codec shrank these JSON documents several times over (field names and product names repeat
from record to record within a batch), gzip and zstd the most; the CPU and records/s columns say
what each costs the producer. Random or already-compressed bytes (the images, the encrypted payloads)
gain nothing: measure on your own records before promising a saving. The broker stores the batches
as the producer compressed them (`compression.type=producer`, the topic default), so the saving
holds on every replica's disk.
""")

nb.md("""
## `max.in.flight.requests.per.connection`: ordering under retries

A producer keeps up to `max.in.flight.requests.per.connection` requests to a broker unanswered:
5 in the Java producer, **1,000,000** in librdkafka. If one of them fails with a retriable error
and a later one succeeds, the retry is written **after** the later records. Make a partition
refuse writes now and then while some 3,000 records stream in: its ISR is one replica short (a
follower is stopped) and its `min.insync.replicas` goes up to 3 for a moment and back to 2 —
what a leader answers when its ISR shrinks below the minimum, `NOT_ENOUGH_REPLICAS`
(`labkit.producing.produce_through_refusals`, which lesson 04 uses with 5 requests in flight):
eight times at least, and on until the first run has a record stored out of order; the second
run is refused as many times. The leader counts every refused request.
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
nb.md("""
Lesson 04 asked you to predict this; here it is as an operator meets it. Without idempotence,
retries reordered records (the first row). With it, the broker tracks each producer's
sequence numbers and refuses a batch that would skip one (`OUT_OF_ORDER_SEQUENCE_NUMBER`); the
client resends in order, up to 5 requests in flight. Look at the *duplicates* column too: a batch the leader had written just before the refusal caught
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
                    "PLAINTEXT one?", choices=["about the same", "up to 2×", "more than 2×"])
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
q_tls.reveal("about the same" if times < 1.2 else "up to 2×" if times <= 2 else "more than 2×",
             f"{times:.1f}× here. PLAINTEXT: sendfile, the page cache goes to the socket in the kernel. TLS: "
             f"read, encrypt, write, in the JVM (and the client decrypts).",
             expected=predict.MEASURED)
""")
nb.md("""
That is the price of encryption in transit: plan broker CPU for it (the factor depends on the
CPU, the JVM and the cipher: measure on your own hardware), and watch the brokers' network
threads (`NetworkProcessorAvgIdlePercent`) once clients switch to TLS.
""")

nb.md("""
## Capacity planning

The course's rule, as its deck states it:

> **(message size × 3) × daily quantity × 1.4 = volume per replicated broker**, × retention days.

The ×3 is the deck's allowance for the key, the headers and the timestamp; the replication factor
is a separate choice (its worked example then picks 4), and 1.4 is headroom. For 512-byte
messages, 20,000 a day, kept for a day:
""")
nb.code("""
capacity.deck_rule(message_bytes=512, messages_per_day=20_000, retention_days=1)
""")
nb.md("""
Test it on this cluster: what does a record really take on disk, and what does each broker keep?
Three loads — 100-byte, 512-byte and 4 kB records — each to a topic of 3 partitions with
replication factor 2 on these 3 brokers (keyed by 300 customers, so the partitions fill alike),
then the segment files on every broker's disk:
""")
nb.code("""
def replicas_level(topic):
    # every replica of every partition holds the same bytes (followers copy the leader's batches as they are)
    sizes = {}
    for b in cluster.broker_ids:
        for part in cluster.log_dir(b).glob(f"{topic}-*"):
            sizes.setdefault(part.name, set()).add(sum(f.stat().st_size for f in part.glob("*.log")))
    return len(sizes) == 3 and all(len(found) == 1 for found in sizes.values())


customers = [f"customer-{i}" for i in range(300)]
loads, per_broker, segments = [], {}, {}
for size, count in ((100, 20_000), (512, 20_000), (4096, 2_500)):
    topic = cluster.create_topic(f"capacity-{size}-{run}", partitions=3, replication_factor=2)
    load = perf.python_producer(cluster, topic, count, size, acks="all", keys=customers)
    Wait(f"every replica of {topic} level", timeout=60).until(lambda t=topic: replicas_level(t))
    on_disk = capacity.stored_by(cluster, topic).query("kind == 'log'").set_index("broker").bytes
    one_copy, segments[size] = on_disk.sum() / 2, on_disk.sum()
    per_broker[size] = on_disk / one_copy
    loads.append({"record bytes": size, "records": load.records, "failed": load.failed,
                  "bytes on disk per record (one copy)": one_copy / load.records,
                  "overhead per record": one_copy / load.records - size - len("customer-000"),
                  "real factor": one_copy / load.bytes,
                  "deck: per replicated broker": capacity.deck_rule(size, load.records).per_replicated_broker,
                  "most any broker stores": on_disk.max()})
capacity_table = pd.DataFrame(loads).set_index("record bytes")
capacity_table.round(2)
""")
nb.code("""
shares = pd.DataFrame(per_broker).T.rename(columns=lambda b: f"broker {b}")
shares.round(3).rename_axis("record bytes: each broker's share of one copy")
""")
nb.code("""
print("every record acknowledged:", (capacity_table.failed == 0).all())
print("framing per record (beyond value and key): tens of bytes, whatever the size:",
      capacity_table["overhead per record"].between(0, 100).all())
print("so the deck's ×3 overstates every load, the larger the records the more:",
      (capacity_table["real factor"] < 3).all() and capacity_table["real factor"].is_monotonic_decreasing)
print("each broker keeps about replication factor ÷ brokers = 2/3 of one copy:",
      bool(((shares - 2 / 3).abs() < 0.1).all().all()))
sizes = cluster.metrics(match="kafka_log_log_size")
print("kafka_log_log_size, summed over the replicas, is the segment files' size:",
      sizes[sizes.labels.str.endswith(f"topic=capacity-512-{run}")].value.sum() == segments[512])
""", check=True)
nb.md("""
* A record costs its value and key plus a few bytes of framing (length, attributes, offset and
  timestamp deltas, key length, header count — varints), and each batch of them 61 bytes of
  header: the overhead column. ×3 is far too much for large records and about right only for tiny
  ones.
* What a broker keeps is decided by the replication factor and the broker count: every record is
  stored RF times, spread over the brokers — here 2 copies on 3 brokers, two thirds of one copy
  each. The deck's "per replicated broker" assumes every broker holds a replica of everything,
  true only when RF equals the broker count.
* The 1.4 covers what neither counts: uneven partitions, the segment still open past retention,
  growth. Not a dead broker's share: Kafka does not move a dead broker's replicas by itself (above).
* The index files are **preallocated** to `segment.index.bytes` (10 MB) but sparse: a few kB
  allocated, trimmed when the segment rolls (`capacity.stored_by`: `bytes` vs `disk_bytes`).

The rule with measured terms, to play with (the overhead from the table above):
""")
nb.code("""
capacity.calculator(message_bytes=1000, replication=3, messages_per_day=50_000_000, retention_days=7, brokers=6,
                    overhead_bytes=int(round(capacity_table.loc[512, "overhead per record"])))
""")
nb.md("""
### How many partitions

A partition has one leader that takes its writes, and at most one consumer of a group reads it,
so a topic's partition count caps its throughput: **partitions ≥ target throughput ÷ what one
partition sustains**, measured for the producer and for one consumer. One partition of this
cluster (replication factor 3, `acks=all`, 512-byte records):
""")
nb.code("""
single = cluster.create_topic(f"one-partition-{run}", partitions=1, replication_factor=3)
one_in = perf.python_producer(cluster, single, 20_000, 512, acks="all")
one_out = perf.python_consumer(cluster, single, 20_000)
target = 100_000                               # records per second the business asks for
needed = capacity.partitions_for(target, one_in.records_per_s, one_out.records_per_s)
pd.DataFrame([{"one partition, produced (records/s)": one_in.records_per_s,
               "one partition, consumed (records/s)": one_out.records_per_s,
               "target (records/s)": target, "partitions needed": needed,
               "consumers in the group that get work, at most": needed}]).round(0)
""")
nb.code("""
print("one partition measured both ways, every record produced and read:",
      one_in.failed == 0 and one_out.records == 20_000 and one_out.failed == 0)
""", check=True)
nb.md("""
Here one Python client on a shared laptop is the limit; measure on the hardware you will run, with
Kafka's perf tools as above. Plan the count ahead with room to grow: adding partitions later moves
keys to other partitions (lesson 02). And a group gets work for at most as many consumers as the
topic has partitions (lesson 05).
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
""", check=True)
nb.code("""
print(f"median wait from produce to consume: {default['median latency ms']:.0f} ms with the defaults, "
      f"{batched['median latency ms']:.0f} ms with fetch.min.bytes (load average {os.getloadavg()[0]:.1f})")
""")
nb.md("""
`fetch.min.bytes` trades latency for fewer, fuller fetches — less work for brokers with many
consumers: each record may wait up to `fetch.wait.max.ms` on the broker for company (the median
waits above; on a busy machine everything waits longer). Now the caps on what one fetch returns: **`max.partition.fetch.bytes`** per partition
(default 1 MB) and **`fetch.max.bytes`** for the whole response (librdkafka: 50 MB; it must be at
least `message.max.bytes`, so both go down together). A broker always returns at least one whole
batch, however large, so the caps matter for topics written in small batches: write 10,000 records
of 1 kB in 16 kB batches, read them with the defaults, with 16 kB per partition, and with 64 kB per
fetch. Count the way an operator does, on the brokers: the fetch requests served
(`kafka.network:type=RequestMetrics,request=FetchConsumer`) and the bytes they carried
(`BytesOutPerSec` of the topic):
""")
nb.code("""
small_batches = cluster.create_topic(f"small-batches-{run}", partitions=3)
perf.python_producer(cluster, small_batches, 10_000, len(noise), acks="1", config={"batch.size": 16384}, value=noise)

def consumer_fetches():
    found = cluster.metrics(match="requestmetrics_requests")
    return int(found[found.labels == "request=FetchConsumer"].value.sum())

def bytes_served(topic):          # BytesOutPerSec of the topic: what consumers fetched (followers count apart)
    found = cluster.metrics(match="brokertopicmetrics_bytesout_total")
    return found[found.labels == f"topic={topic}"].value.sum()


partition_fetch = []
for name, limits in [("defaults", {}), ("max.partition.fetch.bytes=16384", {"max.partition.fetch.bytes": 16384}),
                     ("fetch.max.bytes=65536", {"fetch.max.bytes": 65536, "message.max.bytes": 65536})]:
    fetches, served_bytes = consumer_fetches(), bytes_served(small_batches)
    result = perf.python_consumer(cluster, small_batches, 10_000, config=limits)
    fetches, served_bytes = consumer_fetches() - fetches, bytes_served(small_batches) - served_bytes
    partition_fetch.append({"consumer": name, "MB/s": result.mb_per_s, "records": result.records,
                            "fetch requests served": fetches, "kB per fetch": served_bytes / max(fetches, 1) / 1000})
partition_fetch = pd.DataFrame(partition_fetch).set_index("consumer")
partition_fetch.round(1)
""")
nb.code("""
served, per_fetch = partition_fetch["fetch requests served"], partition_fetch["kB per fetch"]
print("every record read each time:", (partition_fetch.records == 10_000).all())
print("16 kB per partition: more fetch requests, smaller ones:",
      served.iloc[1] > served.iloc[0] and per_fetch.iloc[1] < per_fetch.iloc[0])
print("64 kB per fetch: more fetch requests than the defaults, smaller ones:",
      served.iloc[2] > served.iloc[0] and per_fetch.iloc[2] < per_fetch.iloc[0])
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| brokers write `server.log`, `controller.log`, `state-change.log`, a request log on demand | the files, `broker_log(file=..., grep=...)`, `kafka.request.logger=DEBUG` at run time |
| JMX metrics scraped as Prometheus does: URP, offline partitions, active controller, bytes, latency, ISR changes | `cluster.metrics()`, the live metrics panel |
| a dead broker shows as under-replicated partitions within the session timeout, then clears | the panel's history; the controller log's fencing; the state-change log's new leader |
| lag = log end − committed; a slow consumer falls further behind | the client's `consumer_lag` and `kafka-consumer-groups` |
| librdkafka's `consumer_lag` is from the committed offset, `consumer_lag_stored` from the position | a consumer that read everything and committed once |
| Kafka's perf tools and the Python client measured on the same topic | `kafka-producer-perf-test`, `kafka-consumer-perf-test`, `labkit.perf` |
| batching, linger and acks trade throughput for latency | the 8-run sweep |
| compression on varied records: several times smaller, at a CPU cost per codec | gzip, snappy, lz4, zstd and none, the bytes the broker stored |
| with idempotence off, retries with several requests in flight reorder records; on, they do not | records counted out of order on the broker |
| PLAINTEXT fetches use zero-copy; TLS cannot | broker CPU per MB, same brokers, both listeners |
| the deck's "(size × 3) × daily quantity × 1.4 per replicated broker" overstates: framing is tens of bytes; RF ÷ brokers decides each broker's share | segment files of three loads on every broker, `kafka_log_log_size` |
| a dead broker's replicas are not moved elsewhere by Kafka | the other brokers' partition directories while it was down |
| partitions ≥ target ÷ one partition's measured throughput | one partition produced and consumed |
| `fetch.min.bytes`, `fetch.max.wait.ms`, `max.partition.fetch.bytes`, `fetch.max.bytes` | fetch requests counted, bytes per fetch, latency measured |

The graded exercise *tune_producer* asks you to make a producer at least three times faster than
the team's — with `acks=all`, idempotence on, nothing lost, and within a latency budget the grader
picks: the sweep above waited 20 ms, the budget allows less.
""")
nb.code("""
predict.summary("11")
""")
nb.code("""
view.close()             # idempotent: the panel stopped refreshing after the broker section
cluster.stop()
""")
