"""Source of notebooks/10_connect_and_mirrormaker.ipynb: build it with `python scripts/build_notebooks.py 10`."""

from labkit.authoring import Notebook

nb = Notebook("10 · Kafka Connect and MirrorMaker 2",
              summary="Connect workers, file source and sink, converters (string, JSON, Avro), a poison record and a "
                      "dead-letter queue; MirrorMaker 2 between two clusters, offset translation, a disaster drill, "
                      "failing back and active/active.",
              minutes=45)

nb.md("""
# 10 · Kafka Connect and MirrorMaker 2

**Kafka Connect** moves data between Kafka and other systems with *connectors* instead of code
you write; **MirrorMaker 2** is a set of connectors that copies topics, configs and consumer
offsets from one Kafka cluster to another — the usual way to keep a disaster-recovery copy.
This lesson runs both for real: two clusters, `primary` and `dr`, a Connect worker on each,
then a disaster: the whole primary dies mid-stream and a consumer group moves to dr.

*About 45 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Two single-broker clusters in one notebook. `start_clusters` names them: the names show in
their repr and in their live views (each in its own colour), and MirrorMaker 2 uses them as
the clusters' *aliases*. Each gets a Kafka Connect worker, starting in the background.
""")
nb.code("""
import json
import statistics
import shutil
import struct
import tempfile
import threading
import time
import uuid
from pathlib import Path

import ipywidgets
import pandas as pd
from confluent_kafka import TopicPartition

import labkit
from labkit import predict
from labkit.services import mirror as mm
from labkit.services.connect import JSON_CONVERTER, avro_converter, avro_converter_jars, first_line
from labkit.waiting import Wait
from labkit.workloads import Group

labkit.setup_check()
""")
nb.code("""
clusters = labkit.start_clusters(["primary", "dr"], profile="single-broker")
primary, dr = clusters
connect = primary.connect_worker(wait=False)       # a Connect worker for each cluster, starting in the background
dr_connect = dr.connect_worker(wait=False)
run = uuid.uuid4().hex[:6]
workdir = Path(tempfile.mkdtemp(prefix="lesson10-"))
clusters
""")

nb.md("""
## Kafka Connect: workers, connectors, tasks

A **worker** is a JVM (Kafka's own `ConnectDistributed`). Workers with the same `group.id`
form a *Connect cluster* and share the work through a consumer-group-like protocol; here each
Connect cluster has one worker. A **connector** is a configured plugin instance — "copy this
file into that topic" — created through the worker's REST API; it splits its job into
**tasks**, the threads that actually move records. A worker keeps everything in Kafka itself:
connector configs, source offsets and statuses live in three compacted topics.
""")
nb.code("""
connect.wait_ready()
print(f"worker ready {connect.ready_seconds:.1f} s after its JVM started; {connect.info()}")
pd.DataFrame(connect.plugins())
""")
nb.code("""
internal = sorted(t for t in primary.topics(internal=True) if t.startswith(connect.group))
print("the worker keeps its state in Kafka:", internal == [f"{connect.group}-{k}" for k in ("configs", "offsets", "status")])
print("connectors it can run include FileStreamSource/Sink and MirrorMaker 2's three:",
      {"FileStreamSourceConnector", "FileStreamSinkConnector", "MirrorSourceConnector", "MirrorCheckpointConnector",
       "MirrorHeartbeatConnector"} <= {p["class"].rsplit(".", 1)[-1] for p in connect.plugins()})
""", check=True)

nb.md("""
### A source connector: lines of a file into a topic

`FileStreamSource` tails a file and writes each new line to a topic. A connector is created by
`PUT /connectors/<name>/config` — `connect.create(name, config)` (create, or update if it exists).
""")
nb.code("""
lines_in, lines_out = workdir / "in.txt", workdir / "out.txt"
lines_in.write_text("".join(f"line {i}\\n" for i in range(1, 6)))
lines = primary.create_topic(f"lines-{run}", partitions=1, exist_ok=True)
connect.create("file-source", {"connector.class": "FileStreamSource", "file": str(lines_in), "topic": lines})
connect.wait_for("file-source")
connect.status("file-source")
""")
nb.md("""
### A sink connector: a topic into a file

`FileStreamSink` does the opposite: it consumes topics (as a consumer group named
`connect-<connector>`) and appends each record to a file.
""")
nb.code("""
connect.create("file-sink", {"connector.class": "FileStreamSink", "file": str(lines_out), "topics": lines})
connect.wait_for("file-sink")
with lines_in.open("a") as fh:
    fh.write("line 6\\nline 7\\n")                          # appended lines travel too
Wait("7 lines in out.txt", timeout=30).until(lambda: lines_out.exists() and len(lines_out.read_text().splitlines()) >= 7)
connect.overview()
""")
nb.code("""
print("the sink's file holds exactly the source file's lines:", lines_out.read_text() == lines_in.read_text())
print("both connectors and their tasks RUNNING:",
      all(s["connector"]["state"] == "RUNNING" and [t["state"] for t in s["tasks"]] == ["RUNNING"]
          for s in (connect.status("file-source"), connect.status("file-sink"))))
""", check=True)
nb.md("""
**Pause and resume.** A paused sink keeps its place; records pile up in the topic and arrive
when it resumes. Each connector also has **offsets** (KIP-875): a source's position in its
file, a sink's position in the topic — readable any time, changeable when the connector is
`STOPPED`.
""")
nb.code("""
connect.pause("file-sink")   # back once the worker has paused the connector and its task
with lines_in.open("a") as fh:
    fh.write("line 8\\n")
Wait("line 8 in the topic", timeout=20).until(lambda: len(primary.read_all(lines)) == 8)
paused_lines = len(lines_out.read_text().splitlines())
connect.resume("file-sink")
Wait("8 lines in out.txt", timeout=20).until(lambda: len(lines_out.read_text().splitlines()) == 8)
print("while paused, the file stayed at 7 lines:", paused_lines == 7)
""", check=True)
nb.code("""
{"file-source": connect.offsets("file-source"), "file-sink": connect.offsets("file-sink")}
""")

nb.md("""
## A poison record

A sink reads `payments`: JSON values, converted by the `JsonConverter` into Connect's own data
model. The fourth record is not JSON.
""")
nb.code("""
payments = primary.create_topic(f"payments-{run}", partitions=1, exist_ok=True)
payments_file = workdir / "payments.txt"
producer = primary.producer()
values = [json.dumps({"id": i, "amount": 10 * i}) for i in (1, 2, 3)] + ["this is not JSON"] + \\
         [json.dumps({"id": i, "amount": 10 * i}) for i in (4, 5, 6)]
for i, value in enumerate(values):
    producer.produce(payments, key=f"k{i}", value=value)
producer.flush(10)
q_poison = predict.ask("10.poison", "The sink reads 7 records; the 4th is not JSON. With Connect's default error "
                       "handling, how many payments reach the file?", choices=[0, 3, 6, 7])
q_poison
""")
nb.code("""
payments_sink = {"connector.class": "FileStreamSink", "file": str(payments_file), "topics": payments,
                 "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false"}
connect.create("payments-sink", payments_sink)
failed = connect.wait_task("payments-sink", "FAILED")      # the task's thread has ended: it writes nothing more
written = len(payments_file.read_text().splitlines()) if payments_file.exists() else 0
print(first_line(failed["trace"]))
""")
nb.code("""
print("the task FAILED:", failed["state"] == "FAILED")
print("the connector itself is still RUNNING:", connect.status("payments-sink")["connector"]["state"] == "RUNNING")
print("payments written to the file:", written)
""", check=True)
nb.code("""
q_poison.reveal(written, "The task converts the whole batch it polled before handing it to the file, so the "
                "three good records before the poison one are not written either; and nothing is committed.",
                expected=0)
""")
nb.md("""
With `errors.tolerance=none` (the default) the first bad record stops the task, and it stays
`FAILED`: restarting it reads the same record again and fails again. The connector stays
`RUNNING` — monitoring must look at the **tasks**.

### Error tolerance and a dead-letter queue

`errors.tolerance=all` skips records that fail in conversion or transformation; for a sink,
`errors.deadletterqueue.topic.name` sends each of them to a **dead-letter topic**, with headers
saying where it came from and why. Updating the config restarts the failed task:
""")
nb.code("""
dlq = f"payments-dlq-{run}"
connect.create("payments-sink", {**payments_sink,
                                 "errors.tolerance": "all",
                                 "errors.deadletterqueue.topic.name": dlq,
                                 "errors.deadletterqueue.topic.replication.factor": 1,
                                 "errors.deadletterqueue.context.headers.enable": True,
                                 "errors.log.enable": True})
connect.wait_for("payments-sink")
Wait("6 payments in the file", timeout=30).until(lambda: len(payments_file.read_text().splitlines()) == 6)
reader = primary.consumer(f"dlq-reader-{uuid.uuid4().hex[:6]}")
reader.subscribe([dlq])
try:
    dead = Wait("the dead letter", timeout=30, interval=0).until(
        lambda: (lambda msg: msg if msg is not None and not msg.error() else None)(reader.poll(1.0)))
finally:
    reader.close()
headers = {k: (v.decode() if v is not None else None) for k, v in dead.headers()}
pd.DataFrame([(k, v.splitlines()[0][:90]) for k, v in headers.items()], columns=["header", "value"])
""")
nb.code("""
print("the six good payments reached the file:", payments_file.read_text().splitlines()[0] == "{amount=10, id=1}"
      and len(payments_file.read_text().splitlines()) == 6)
print("the poison record is in the dead-letter topic, unchanged:", dead.value() == b"this is not JSON")
print("its headers say where it came from:", headers["__connect.errors.topic"] == payments,
      headers["__connect.errors.offset"] == "3")
print("and which step failed:", headers["__connect.errors.stage"], "/", headers["__connect.errors.class.name"])
""", check=True)
nb.md("""
The file holds `{amount=10, id=1}`: the sink writes the Connect value's `toString()`, not the
JSON it read. The converter turned bytes into Connect's data model; what the connector does with
it is the connector's business. The dead-letter topic exists for **sink** connectors only; a
source connector's bad records can only be tolerated and logged (`errors.log.enable`).

## Converters

A connector never sees bytes. On the way **in**, a *converter* turns Connect's data (a value and
its schema) into the bytes stored in Kafka; on the way **out**, bytes back into data. The same
file source, three converters:
""")
nb.code("""
def first_value(converter: dict, name: str) -> bytes:
    topic = primary.create_topic(f"{name}-{run}", partitions=1, exist_ok=True)
    connect.create(name, {"connector.class": "FileStreamSource", "file": str(lines_in), "topic": topic, **converter})
    Wait(f"{name} to write", timeout=30).until(lambda: primary.read_all(topic))
    connect.delete(name)
    return primary.read_all(topic)[0].value

stored = {"StringConverter (this worker's default)": first_value({}, "as-string"),
          "JsonConverter, schemas.enable=false": first_value(
              {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false"}, "as-json"),
          "JsonConverter, schemas.enable=true (its default)": first_value(
              {"value.converter": JSON_CONVERTER}, "as-json-schema")}
pd.DataFrame([(k, v.decode()) for k, v in stored.items()], columns=["value.converter", "bytes stored for 'line 1'"])
""")
nb.code("""
envelope = json.loads(stored["JsonConverter, schemas.enable=true (its default)"])
print("StringConverter stores the text itself:", stored["StringConverter (this worker's default)"] == b"line 1")
print("JsonConverter with schemas stores an envelope:", sorted(envelope) == ["payload", "schema"],
      envelope["schema"]["type"], "/", envelope["payload"])
""", check=True)
nb.md("""
`schemas.enable=true` carries the schema inside **every** record — and a sink reading plain JSON
with it fails (`JsonConverter with schemas.enable requires "schema" and "payload" fields`), the
other classic poison. A **schema registry** stores the schema once instead: the record carries
a magic byte and a 4-byte schema id, then the Avro payload (lesson 09). Here, a Python producer
writes Avro through the registry, and a sink reads it with an Avro converter that asks the same
registry for the schema (Apicurio's converter, as Confluent's is not on Maven Central):
""")
nb.code("""
from labkit.services import registry as schema_registry

if schema_registry.built() is None or not avro_converter_jars():
    print("No schema registry in this lab (`make setup` builds one): the Avro part is skipped.")
else:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    primary.start_schema_registry()
    avro_topic = primary.create_topic(f"payments-avro-{run}", partitions=1, exist_ok=True)
    schema = ('{"type": "record", "name": "Payment", "fields": '
              '[{"name": "id", "type": "int"}, {"name": "amount", "type": "int"}]}')
    to_avro = AvroSerializer(primary.schema_registry(), schema)
    for i in (1, 2, 3):
        producer.produce(avro_topic, value=to_avro({"id": i, "amount": 10 * i},
                                                   SerializationContext(avro_topic, MessageField.VALUE)))
    producer.flush(10)
    avro_file = workdir / "payments-avro.txt"
    connect.create("avro-sink", {"connector.class": "FileStreamSink", "file": str(avro_file), "topics": avro_topic,
                                 **avro_converter(primary.schema_registry_url)})
    Wait("3 Avro payments in the file", timeout=60).until(
        lambda: avro_file.exists() and len(avro_file.read_text().splitlines()) == 3)
    raw = primary.read_all(avro_topic)[0].value
    print("stored:", raw.hex(" "), f"(magic byte 0, schema id {struct.unpack('>I', raw[1:5])[0]}, then Avro)")
    print("the sink got:", avro_file.read_text().splitlines())
""")
nb.md("""
Clean up the Connect part: the rest of the lesson uses the same workers for MirrorMaker 2.
""")
nb.code("""
for name in connect.connectors():
    connect.delete(name)
connect.connectors()
""")

nb.md("""
## MirrorMaker 2: primary → dr

MirrorMaker 2 is three connectors. **MirrorSourceConnector** copies records, topic configs and
new partitions; **MirrorCheckpointConnector** translates the consumer groups' committed offsets;
**MirrorHeartbeatConnector** writes a heartbeat every second. Kafka ships a dedicated driver
(`connect-mirror-maker`) that runs them in embedded workers, or they run as ordinary connectors
on a Connect cluster. The lab does the latter, with **the worker of the target cluster**
(`dr_connect`): the same REST API as above (status, pause, restart), a flow starts seconds after
its `PUT`, and a worker whose *source* cluster dies keeps running and resumes when it returns —
while the driver, run for both directions, exits when either cluster is down at start. The
worker must be the target's: MirrorMaker's records are written by the worker's own producer.

`mirror(primary, dr, topics=...)` creates the three connectors (lab-sized intervals: topics,
configs and groups are looked at every 2 s instead of every 10 minutes).

First, `orders` on primary: three partitions, a retention of one day, 600 orders — and, as if
retention had already removed them, the oldest third of each partition deleted.
""")
nb.code("""
orders = primary.create_topic(f"orders-{run}", partitions=3, config={"retention.ms": 86400000}, exist_ok=True)
if not any(p.high_watermark for p in primary.describe_topic(orders).partitions):    # once, if the cell runs again
    for i in range(600):
        producer.produce(orders, key=f"customer-{i % 17}", value=f"order-{i:06d}")
    producer.flush(10)
    ends = {p.partition: p.high_watermark for p in primary.describe_topic(orders).partitions}
    # DeleteRecords answers once the partition's leader (the only replica here) has moved its log start
    for future in primary.admin().delete_records([TopicPartition(orders, p, end // 3) for p, end in ends.items()]
                                                 ).values():
        future.result()
primary.describe_topic(orders)
""")
nb.code("""
q_name = predict.ask("10.remote-topic", f"MirrorMaker 2 copies {orders} from primary to dr. What is it called on "
                     "dr (without the run's suffix)?",
                     choices=["orders", "primary.orders", "dr.orders", "orders.replica"])
q_name
""")
nb.code("""
flow = mm.mirror(primary, dr, topics=orders)
remote = flow.wait_for_topic(orders)
flow.wait_caught_up(orders)
print(flow.status())
dr.describe_topic(remote)
""")
nb.code("""
source_records = {p: [r.value for r in primary.read_all(orders) if r.partition == p] for p in range(3)}
copied_records = {p: [r.value for r in dr.read_all(remote) if r.partition == p] for p in range(3)}
print("the copy is called <alias>.<topic>:", remote == f"primary.{orders}")
print("same partitions, same records in the same order:", source_records == copied_records)
print("but not at the same offsets: dr numbers its copy from 0:",
      [p.log_start_offset for p in dr.describe_topic(remote).partitions] == [0, 0, 0]
      and all(p.log_start_offset > 0 for p in primary.describe_topic(orders).partitions))
""", check=True)
nb.code("""
q_name.reveal(remote.replace(f"-{run}", ""), "DefaultReplicationPolicy prefixes the source cluster's alias, so a copy never collides with "
              "dr's own topic of the same name, and everyone can see where it came from.",
              expected="primary.orders")
""")
nb.md("""
### Topic configs and partitions follow

Change `retention.ms` and add a partition on primary: MirrorMaker's next look (every 2 s here)
applies both on dr.
""")
nb.code("""
def retention_on_dr() -> str:
    return dr.describe_configs("topic", remote)["retention.ms"]

copied_retention = retention_on_dr()
t0 = time.monotonic()
primary.alter_configs("topic", orders, {"retention.ms": 7200000})    # each returns once primary's broker has it
if len(primary.describe_topic(orders)) < 4:                          # a topic only gains partitions (cell re-run)
    primary.add_partitions(orders, 4)
Wait("the change on dr", timeout=30).until(lambda: retention_on_dr() == "7200000" and len(dr.describe_topic(remote)) == 4)
print(f"on dr {time.monotonic() - t0:.1f} s later")
""")
nb.code("""
print("retention.ms was copied when the topic was created:", copied_retention == "86400000")
print("a changed retention.ms and a 4th partition followed:", retention_on_dr() == "7200000",
      len(dr.describe_topic(remote)) == 4)
""", check=True)
nb.md("""
### Replication lag, measured

How far behind is dr? Produce 200 orders on primary and time each until it can be read on dr:
""")
nb.code("""
latency = [s * 1000 for s in mm.replication_latency(primary, dr, orders, remote, count=200)]
print(f"replication lag per record: median {statistics.median(latency):.0f} ms, "
      f"95th percentile {statistics.quantiles(latency, n=20)[-1]:.0f} ms, max {max(latency):.0f} ms")
""")
nb.md("""
That is the window of records a sudden loss of primary can take with it: acknowledged on
primary, not yet on dr. It grows with load, with a slow link, or when the connector is paused.

## Checkpoints: consumer offsets translated

A group's committed offsets belong to primary's numbering; on dr the same record has another
offset (here fewer: dr's copy starts at 0 — in general not even a fixed difference). The checkpoint connector reads each
group's commits on primary and writes, on dr, **checkpoints**: the committed offset and its
translation. Let a group, `reports`, read 240 orders on primary and commit:
""")
nb.code("""
consumer = primary.consumer("reports", enable_auto_commit=False)
consumer.subscribe([orders])
read = 0
deadline = time.monotonic() + 30
try:
    while read < 240 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        read += 1
    consumer.commit(asynchronous=False)
finally:
    consumer.close()
reports_committed = mm.committed(primary, "reports", orders)
q_translate = predict.ask("10.translate", "On dr, where does the translated offset point, compared with the "
                          "record the group had reached on primary?",
                          choices=["the same record", "an earlier record", "a later record"])
q_translate
""")
nb.code("""
Wait("the group's checkpoints on dr", timeout=30).until(
    lambda: {c.partition for c in flow.checkpoints("reports")} >= set(reports_committed))
flow.checkpoints_frame("reports")
""")
nb.code("""
key, value = next((r.key, r.value) for r in dr.read_all(flow.checkpoints_topic))
print("a checkpoint record, as stored:", key.hex(" "), "|", value.hex(" "))
print("decoded:", mm.decode_checkpoint(key, value))
""")
nb.md("""
The key is the group, the topic **on dr** and the partition (Kafka's protocol encoding: a
2-byte length before each string); the value a version, the offset committed on primary, the
offset to resume at on dr, and metadata. How far off is the translation? Look the committed
record up on both sides:
""")
nb.code("""
dr_offset_of = {r.value: (r.partition, r.offset) for r in dr.read_all(remote)}
# partition -> dr offset of the record the group would have read next (the end of dr's copy if it had read all)
reached = {p.partition: p.high_watermark for p in dr.describe_topic(remote).partitions}
for r in primary.read_all(orders):
    if r.offset == reports_committed.get(r.partition):
        reached[r.partition] = dr_offset_of[r.value][1]
reached = {p: o for p, o in reached.items() if p in reports_committed}
translated = mm.translated_offsets(dr, "reports", "primary", orders)
pd.DataFrame({"committed on primary": reports_committed, "same record on dr": reached,
              "translated (resume on dr at)": translated}).rename_axis("partition")
""")
nb.code("""
print("translated offsets are never ahead of where the group was:", all(translated[p] <= reached[p] for p in reached))
""", check=True)
nb.code("""
behind = sum(reached[p] - translated[p] for p in reached)
q_translate.reveal("the same record" if behind == 0 else "an earlier record",
                   f"{behind} records earlier in all. MirrorMaker only knows the offset pairs it wrote down (offset "
                   "syncs: one per offset.lag.max = 100 records, and at each flush); it translates with the last "
                   "one before the commit, so a failed-over group re-reads a little and never skips.",
                   expected=predict.MEASURED)
""")
nb.md("""
The pairs it wrote down are on **primary**, in `mm2-offset-syncs.dr.internal`:
""")
nb.code("""
pd.DataFrame(flow.offset_syncs()).tail(8)
""")

nb.md("""
## Disaster: the whole primary dies mid-stream

Orders keep coming (a producer thread, ~100 a second, `acks=all`), and a new group, `billing`,
processes them on primary — all of `orders` from the start, then the new ones — as a separate
process committing after each batch of 20. Watch both clusters; then kill primary's broker and
billing at the same moment: a data centre gone.
""")
nb.code("""
acked, stop_producing = {}, threading.Event()

def on_delivery(err, msg):
    if err is None:
        acked[msg.value().decode()] = msg.partition()

def produce_orders(cluster, topic, first):
    orders_producer = cluster.producer(enable_idempotence=True, message_timeout_ms=3000, linger_ms=5)
    seq = first
    while not stop_producing.is_set():
        orders_producer.produce(topic, key=f"customer-{seq % 17}", value=f"order-{seq:06d}", on_delivery=on_delivery)
        orders_producer.poll(0)
        seq += 1
        time.sleep(0.01)
    orders_producer.flush(5)

def order_values(values):
    return {v for v in values if v.startswith("order-")}

backlog = primary.describe_topic(orders).partitions
on_primary = Group(primary, orders, "billing")
on_primary.start_member("billing-primary", commit="sync", batch=20, process_ms=2)
feeder = threading.Thread(target=produce_orders, args=(primary, orders, 1000), daemon=True)
feeder.start()
on_primary.wait_processed(sum(p.high_watermark - p.log_start_offset for p in backlog) + 200, timeout=60)
ipywidgets.HBox([primary.view(topics=[orders], groups=False).widget, dr.view(topics=[remote], groups=False).widget])
""")
nb.code("""
q_lost = predict.ask("10.lost", "Primary dies now. How many acknowledged orders will be missing on dr: none or a "
                     "handful, about a second's worth, or everything since the last checkpoint?",
                     choices=["a handful or none", "a second's worth", "since checkpoint"])
q_lost
""")
nb.code("""
Wait("a checkpoint of billing past the backlog", timeout=30).until(
    lambda: sum(c.upstream_offset for c in flow.checkpoints("billing")) > sum(p.high_watermark for p in backlog))
on_primary.crash_member("billing-primary")           # SIGKILL: no commit, no goodbye
primary.kill_broker(1)                               # SIGKILL: the whole cluster
stop_producing.set()
feeder.join(10)
print(f"primary killed; {len(acked)} orders were acknowledged by it")
""")
nb.md("""
**Fail over.** Nothing on dr is waiting for billing: the group has no offsets there
(`sync.group.offsets.enabled` would write them, but it is off by default and only works while
the group has no members on dr). So do what MirrorMaker's client library does
(`RemoteClusterUtils.translateOffsets`): read the latest checkpoints, commit them to billing on
dr, and start billing there on `primary.orders`.
""")
nb.code("""
failover_at = mm.translated_offsets(dr, "billing", "primary", orders)
mm.commit_offsets(dr, "billing", remote, failover_at)
on_dr = Group(dr, remote, "billing")
on_dr.start_member("billing-dr", commit="sync", batch=20, process_ms=2)
waiting = {r.value for r in dr.read_all(remote) if r.offset >= failover_at.get(r.partition, 0)}
if waiting:
    on_dr.wait_processed(len(waiting), timeout=60)
failover_at
""")
nb.code("""
on_dr_now = {r.value.decode(): (r.partition, r.offset) for r in dr.read_all(remote) if r.value.startswith(b"order-")}
done_on_primary = order_values(on_primary.processed())
done_on_dr = order_values(on_dr.processed())
lost = sorted(set(acked) - set(on_dr_now))
twice = sorted(done_on_primary & done_on_dr)
never = sorted(set(on_dr_now) - done_on_primary - done_on_dr)
expected_twice = {v for v in done_on_primary if v in on_dr_now and on_dr_now[v][1] >= failover_at.get(on_dr_now[v][0], 0)}
pd.DataFrame([{"acknowledged by primary": len(acked), "on dr at failover": len(on_dr_now),
               "lost (acked, not on dr)": len(lost), "processed on primary": len(done_on_primary),
               "processed on dr": len(done_on_dr), "processed twice": len(twice)}])
""")
nb.code("""
print("every order that reached dr was processed, none skipped:", never == [])
print("processed twice = what billing had processed on primary at or after its translated offsets:",
      set(twice) == expected_twice)
""", check=True)
nb.code("""
q_lost.reveal("a handful or none" if len(lost) <= 20 else ("a second's worth" if len(lost) <= 150 else
              "since checkpoint"),
              f"{len(lost)} lost: what primary had acknowledged but MirrorMaker had not copied yet (the replication "
              "lag measured above). Checkpoints do not decide loss; they decide the duplicates.",
              expected=predict.MEASURED)
""")
nb.md("""
* **Lost** = the replication lag at the moment of the crash: records acknowledged by primary but
  not yet copied. Here milliseconds; with a lagging or paused flow, seconds of orders. They are
  not destroyed — primary's disk has them — and they arrive on dr **late**, when primary comes
  back, after dr has moved on.
* **Duplicates** = billing's own at-least-once window (what it processed after its last commit)
  plus the translation gap (offset syncs every 100 records): billing resumes on dr a little
  early. Never late: no order is skipped. The exercise `dr_failover` asks you to write this
  failover yourself.

## Failing back

Primary comes back with its data. The `primary → dr` flow resumes by itself. While dr was in
charge, new orders went to dr's own `orders` topic; they must go back to primary: a flow
`dr → primary` on **primary's** worker.
""")
nb.code("""
primary.start_broker(1)
Wait("primary's Connect worker to serve again", timeout=60).until(lambda: connect.request("GET", "/connectors")[0] == 200)
flow.wait_caught_up(orders, timeout=60)              # the late records, if any, reach dr now
late = {r.value for r in dr.read_all(remote) if r.offset >= failover_at.get(r.partition, 0)} - waiting
if late:
    on_dr.wait_processed(len(waiting | late), timeout=60)
on_dr.stop_member("billing-dr")                      # billing leaves dr cleanly (commits, leaves the group)
dr_orders = dr.create_topic(f"orders-{run}", partitions=3, exist_ok=True)   # dr's own orders, while in charge
dr_producer = dr.producer(enable_idempotence=True)
for seq in range(900000, 900150):
    dr_producer.produce(dr_orders, key=f"customer-{seq % 17}", value=f"order-{seq:06d}")
dr_producer.flush(10)
back = mm.mirror(dr, primary, topics=dr_orders)
back_copy = back.wait_for_topic(dr_orders)
back.wait_caught_up(dr_orders)
print(f"{len(late)} orders reached dr late, after primary came back (billing on dr processed them)")
print(f"{back_copy} on primary holds dr's {sum(p.high_watermark for p in dr.describe_topic(dr_orders).partitions)} orders")
""")
nb.md("""
Billing must return to primary too — but where in `orders`? Its progress is on dr
(`primary.orders`), and **no checkpoint translates it back**: the `dr → primary` flow never copies
`primary.orders` home (that would be a loop, below), so it writes no offset syncs for it. Left as
it is, billing resumes on primary from its own pre-crash commits and re-reads what dr already
processed. The fix: translate dr's commits back with primary's offset syncs (the `primary → dr`
pairs) and set them on primary before billing starts there.
""")
nb.code("""
progress_on_dr = mm.committed(dr, "billing", remote)
syncs = flow.offset_syncs()

def back_to_primary(partition, dr_offset):
    last = max((s for s in syncs if s.partition == partition and s.downstream_offset <= dr_offset),
               key=lambda s: s.downstream_offset, default=None)
    if last is None:              # nothing of this partition was ever copied: both sides start at the same offset
        return dr_offset
    return last.upstream_offset + (dr_offset - last.downstream_offset)   # contiguous offsets: no compaction here

stale = mm.committed(primary, "billing", orders)
fixed = {p: back_to_primary(p, o) for p, o in progress_on_dr.items()}
mm.commit_offsets(primary, "billing", orders, fixed)
pd.DataFrame({"billing on primary before the crash": stale, "billing on dr (primary.orders)": progress_on_dr,
              "set on primary before failing back": fixed}).rename_axis("partition")
""")
nb.code("""
home = Group(primary, orders, "billing")
home.start_member("billing-home", commit="sync", batch=20)
home.wait_settled(1, quiet=2)                       # it owns every partition and had time to read
home.wait_idle(quiet=1)
home.stop()
reread = order_values(home.processed()) & (done_on_primary | order_values(on_dr.processed()))
print(f"from its pre-crash commits billing would have re-read {sum(fixed[p] - stale.get(p, 0) for p in fixed)} orders")
""")
nb.code("""
print("billing back on primary re-read none of what it had processed:", reread == set())
""", check=True)

nb.md("""
## Active/active, and why the prefix prevents loops

Now both directions run: `primary → dr` on dr's worker, `dr → primary` on primary's. Widen both
to every topic whose name ends in `orders-…` — which includes the copies, `primary.orders-…` on
dr and `dr.orders-…` on primary.
""")
nb.code("""
q_loop = predict.ask("10.loop", "With both flows copying every topic matching '.*orders-…', will dr's copy "
                     "primary.orders-… come back to primary (as dr.primary.orders-…)?", kind="yes/no")
q_loop
""")
nb.code("""
pattern = f".*orders-{run}"
flows = {"primary → dr": mm.mirror(primary, dr, topics=pattern), "dr → primary": mm.mirror(dr, primary, topics=pattern)}


def copying(flow):
    \"\"\"The topic-partitions the flow's source task copies (its task config), once it has taken the pattern.\"\"\"
    configs = [t["config"] for t in flow.worker.tasks(flow.connector("source"))]
    if not configs or any(c.get("topics") != pattern or "task.assigned.partitions" not in c for c in configs):
        return None
    return sorted(tp for c in configs for tp in c["task.assigned.partitions"].split(",") if tp)


# MirrorMaker matched the pattern against the topics each source cluster has and assigned what it will copy
copies = {name: Wait(f"the {name} flow to take the pattern", timeout=60).until(lambda f=flow: copying(f))
          for name, flow in flows.items()}
on_primary_topics = sorted(t for t in primary.topics() if t.endswith(f"orders-{run}"))
on_dr_topics = sorted(t for t in dr.topics() if t.endswith(f"orders-{run}"))
looped = [t for t in on_primary_topics + on_dr_topics if t.count(".") > 1]
pd.DataFrame({"topics on the source matching the pattern": {"primary → dr": on_primary_topics,
                                                            "dr → primary": on_dr_topics},
              "partitions its task copies": copies})
""")
nb.code("""
print("each cluster has its own orders and the other's copy:",
      len(on_primary_topics) == 2 and len(on_dr_topics) == 2)
print("neither flow copies the other's copy back:",
      not any(tp.startswith("dr.") for tp in copies["primary → dr"])
      and not any(tp.startswith("primary.") for tp in copies["dr → primary"]))
print("no copy of a copy (dr.primary.orders… or primary.dr.orders…):", looped == [])
""", check=True)
nb.code("""
q_loop.reveal(bool(looped), "The alias prefix records where a topic came from. DefaultReplicationPolicy knows that "
              "primary.orders on dr came from primary, so the dr → primary flow never sends it back: no loop, "
              "whatever the pattern.")
""")
nb.md("""
The heartbeats record the hops: dr's `heartbeats` holds the `primary → dr` beats of the first
flow; primary's `heartbeats` (the `dr → primary` beats) come back to dr as `primary.heartbeats` —
one round trip, and no further.
""")
nb.code("""
{t: sorted({(h.source, h.target) for h in mm.read_heartbeats(dr, t)}) for t in ("heartbeats", "primary.heartbeats")}
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a Connect worker keeps its state in Kafka; connectors are created through its REST API | three internal topics; `connect.create`, `status`, `overview` |
| a source copies a file into a topic, a sink a topic into a file; pause keeps the place | the sink's file equals the source's |
| a poison record fails the **task**, not the connector, and nothing of its batch is written | task FAILED, 0 payments in the file |
| `errors.tolerance=all` + a dead-letter topic skip it and keep it, with headers saying why | 6 payments written, the record and its `__connect.errors.*` headers |
| converters decide the bytes: plain text, JSON with or without a schema, Avro through a registry | the same line stored three ways; Avro payments read back as structs |
| MirrorMaker 2 copies `orders` to `primary.orders`, configs and new partitions follow | same records per partition, `retention.ms` and a 4th partition on dr |
| offsets differ between clusters; checkpoints translate them, never ahead | the committed record looked up on both sides |
| a failover loses the replication lag and re-reads the translation gap | lost / processed twice counted; none skipped |
| failing back needs the group's offsets translated home by hand | re-reads avoided with the offset syncs |
| active/active: the alias prefix stops loops | no `dr.primary.orders` |

Exercise: [`dr_failover`](exercises/dr_failover.ipynb) — write the failover routine yourself.
""")
nb.code("""
predict.summary("10")
""")
nb.code("""
producer.close()                # every client closed before the brokers go
dr_producer.close()
for cluster in clusters:        # stops each cluster's Connect worker and registry first, then its broker
    cluster.stop()
shutil.rmtree(workdir, ignore_errors=True)   # the files the connectors read and wrote
""")
