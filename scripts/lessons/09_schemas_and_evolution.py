"""Source of notebooks/09_schemas_and_evolution.ipynb: build it with `python scripts/build_notebooks.py 09`."""

from labkit.authoring import Notebook

nb = Notebook("09 · Schemas and evolution",
              summary="Bytes on the wire (magic byte, schema id, Avro), subjects and naming strategies, a real "
                      "schema registry refusing incompatible changes under BACKWARD, FORWARD, FULL and their "
                      "transitive forms, old and new consumers on mixed data, the upgrade order, and JSON without "
                      "a registry breaking a consumer silently.",
              minutes=35)

nb.md("""
# 09 · Schemas and evolution

A broker stores bytes. Producers and consumers agree on what those bytes mean through a
**schema registry**: the producer's serializer registers the record's schema and writes its id
in front of every value, the consumer's deserializer looks the id up. When the schema changes,
the registry decides whether the new version is **compatible** with the old ones, and refuses it
if not. This lesson runs a real registry beside the cluster, reads the bytes, and evolves a
schema under every compatibility mode with old and new consumers reading the same topic.

*About 35 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

One broker is enough here; `schema_registry=True` starts a schema registry beside it: Apicurio
Registry, a real server speaking Confluent's Schema Registry API, so the standard
`SchemaRegistryClient`, `AvroSerializer` and `AvroDeserializer` of `confluent-kafka` talk to it
unchanged. Its global compatibility starts at `BACKWARD`, Confluent's default.
""")
nb.code("""
import io
import json
import uuid
from urllib.request import urlopen

import fastavro
import pandas as pd
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.schema_registry import (Schema, record_subject_name_strategy,
                                             topic_record_subject_name_strategy, topic_subject_name_strategy)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from fastavro.read import SchemaResolutionError

import labkit
from labkit import predict
from labkit.schemas import HEADER_SIZE, compatibility_matrix, new_subject, unframe
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster("single-broker", schema_registry=True)
registry = cluster.schema_registry()          # confluent_kafka.schema_registry.SchemaRegistryClient
run = uuid.uuid4().hex[:6]
print("registry:", cluster.schema_registry_url, "| global compatibility:", registry.get_compatibility())
""")

nb.md("""
## The bytes on the wire

An order, and its schema in Avro: a record with named, typed fields. The schema is JSON text;
the data it describes will be binary.
""")
nb.code("""
def order_schema(*fields):
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)})

ID = {"name": "id", "type": "string"}
CUSTOMER = {"name": "customer", "type": "string"}
AMOUNT = {"name": "amount", "type": "int"}              # cents
NOTE = {"name": "note", "type": "string"}
ORDER_V1 = order_schema(ID, CUSTOMER, AMOUNT, NOTE)

order = {"id": "o-1001", "customer": "ada", "amount": 4250, "note": "gift wrap"}
as_json = json.dumps(order).encode()
print(f"the same order as JSON: {len(as_json)} bytes")
""")
nb.md("""
The producer serializes it with `AvroSerializer`, which registers the schema on first use (under
the subject `<topic>-value`) and frames the value.
""")
nb.code("""
size_guess = predict.ask("09.avro-size", f"The order is {len(as_json)} bytes as JSON. How many bytes is its Avro "
                         "value, framing included?", within=0.25, unit="bytes")
size_guess
""")
nb.code("""
orders = cluster.create_topic(f"orders-{run}", partitions=1)
avro_serializer = AvroSerializer(registry, ORDER_V1)


def delivery_report(err, msg):
    if err is not None:
        print(f"delivery failed: {err}")


producer = cluster.producer()
producer.produce(orders, key=order["id"], value=avro_serializer(order, SerializationContext(orders, MessageField.VALUE)),
                 on_delivery=delivery_report)
producer.flush(10)
""")
nb.md("""
A **raw** consumer — no deserializer — gets exactly what the broker stores:
""")
nb.code("""
raw_consumer = cluster.consumer(f"raw-{run}")
raw_consumer.assign([TopicPartition(orders, 0, OFFSET_BEGINNING)])
try:
    msg = Wait("the first record", timeout=30, interval=0).until(lambda: raw_consumer.poll(1.0))
    if msg.error():
        raise KafkaException(msg.error())
    value = msg.value()
finally:
    raw_consumer.close()

framed = unframe(value)       # labkit.schemas: byte 0, bytes 1-4, the rest
pd.DataFrame([
    {"bytes": "0", "hex": value[:1].hex(" "), "what": f"magic byte = {framed.magic}"},
    {"bytes": "1-4", "hex": value[1:HEADER_SIZE].hex(" "), "what": f"schema id = {framed.schema_id} (big-endian int)"},
    {"bytes": f"5-{len(value) - 1}", "hex": framed.payload.hex(" "), "what": "the Avro-encoded order"},
])
""")
nb.code("""
registered = registry.get_latest_version(f"{orders}-value")
print("byte 0 is the magic byte 0:", framed.magic == 0)
print("bytes 1-4 are the id the registry gave the schema:", framed.schema_id == registered.schema_id)
print("field names travel in the JSON, not in the Avro:", b"customer" in as_json and b"customer" not in value)
print("Avro value smaller than the JSON:", len(value) < len(as_json))
""", check=True)
nb.code("""
print(f"Avro value: {len(value)} bytes ({HEADER_SIZE} of framing + {len(framed.payload)} of data); "
      f"JSON: {len(as_json)} bytes")
size_guess.reveal(len(value), "Avro writes no field names: only lengths and values in schema order "
                  "(ints as variable-length zig-zag), plus 5 bytes of framing.")
""")
nb.md("""
The payload alone is unreadable without the schema: no names, no types. That is the
deserializer's job: read the id, fetch the **writer's schema** from the registry (once, then
cached), decode. Done by hand:
""")
nb.code("""
writer_schema = registry.get_schema(framed.schema_id)      # GET /schemas/ids/<id>
decoded = fastavro.schemaless_reader(io.BytesIO(framed.payload), fastavro.parse_schema(json.loads(writer_schema.schema_str)))
print("decoded by hand == the order:", decoded == order)
print("AvroDeserializer does the same:", AvroDeserializer(registry)(value, SerializationContext(orders, MessageField.VALUE)) == order)
""", check=True)

nb.md("""
## Subjects and naming strategies

The registry keeps schemas in **subjects**; versions and compatibility are per subject. The
serializer's `subject.name.strategy` names the subject:

* **TopicNameStrategy** (the default): `<topic>-value` and `<topic>-key`: one schema line per topic.
* **RecordNameStrategy**: the record's full name, `shop.Order`: one line per record type, across
  topics; lets a topic carry several record types.
* **TopicRecordNameStrategy**: `<topic>-shop.Order`: per type, per topic.

Three serializers, one per strategy, write the same order to a second topic.
""")
nb.code("""
one_id = predict.ask("09.one-id", "The same schema is registered under three subjects (plus the first one). "
                     "How many different schema ids does the registry hand out?", choices=[1, 2, 3, 4])
one_id
""")
nb.code("""
invoices = cluster.create_topic(f"invoices-{run}", partitions=1)
ctx = SerializationContext(invoices, MessageField.VALUE)
strategies = {"TopicNameStrategy": topic_subject_name_strategy,
              "RecordNameStrategy": record_subject_name_strategy,
              "TopicRecordNameStrategy": topic_record_subject_name_strategy}
rows = []
for name, strategy in strategies.items():
    serializer = AvroSerializer(registry, ORDER_V1, conf={"subject.name.strategy": strategy})
    framed_value = serializer(order, ctx)
    producer.produce(invoices, value=framed_value, on_delivery=delivery_report)
    rows.append({"strategy": name, "subject": strategy(ctx, "shop.Order"), "schema id": unframe(framed_value).schema_id})
producer.flush(10)
subjects = pd.DataFrame(rows)
subjects
""")
nb.code("""
print("subjects:", list(subjects["subject"]))
print("all of them are in the registry:", set(subjects["subject"]) <= set(registry.get_subjects()))
print("one schema, one id, whatever the subject:", set(subjects["schema id"]) == {registered.schema_id})
""", check=True)
nb.code("""
one_id.reveal(subjects["schema id"].nunique(), "Ids are global and content-addressed: the same schema text gets "
              "the same id in every subject; a subject only adds a version number pointing to it.",
              expected=1)
""")

nb.md("""
## What the registry stores

Versions per subject, each pointing at a schema id; the schema text per id. It is plain REST
(`GET /subjects/<subject>/versions/<n>`, `GET /schemas/ids/<id>`), which the client wraps:
""")
nb.code("""
subject = f"{orders}-value"
print(json.dumps(json.load(urlopen(f"{cluster.schema_registry_url}/subjects/{subject}/versions/1")), indent=1)[:400])
""")
nb.code("""
again = registry.register_schema(subject, Schema(ORDER_V1, "AVRO"))
print("versions of", subject, "->", registry.get_versions(subject))
print("registering the same schema again: same id, no new version:",
      again == registered.schema_id and registry.get_versions(subject) == [1])
print("the registry stores the schema text as registered:",
      json.loads(registry.get_schema(registered.schema_id).schema_str) == json.loads(ORDER_V1))
""", check=True)

nb.md("""
## Evolution: what the registry accepts

Five changes to the order, each a version 2 of `ORDER_V1`:
""")
nb.code("""
CHANGES = {
    "add an optional field": order_schema(ID, CUSTOMER, AMOUNT, NOTE,
                                          {"name": "coupon", "type": ["null", "string"], "default": None}),
    "add a required field": order_schema(ID, CUSTOMER, AMOUNT, NOTE, {"name": "currency", "type": "string"}),
    "remove a field": order_schema(ID, CUSTOMER, AMOUNT),
    "rename a field": order_schema(ID, {"name": "customer_id", "type": "string"}, AMOUNT, NOTE),
    "change a type (int → long)": order_schema(ID, CUSTOMER, {"name": "amount", "type": "long"}, NOTE),
}
""")
nb.md("""
Compatibility is about who can read what:

* **BACKWARD**: a consumer with the **new** schema can read data written with the **old** one.
* **FORWARD**: a consumer with the **old** schema can read data written with the **new** one.
* **FULL**: both ("bi-directional").

Each has a `_TRANSITIVE` form (more on it below). For every change and every mode: a fresh
subject set to that mode, the original schema registered, then the change attempted as its
second version.
""")
nb.code("""
full_guess = predict.ask("09.full-accepts", "Under FULL, how many of the five changes does the registry accept?",
                         choices=[0, 1, 2, 3, 4, 5])
full_guess
""")
nb.code("""
MODES = ["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"]
verdicts = compatibility_matrix(registry, [ORDER_V1], CHANGES, MODES, prefix=f"evolve-{run}")
matrix = pd.DataFrame({change: {mode.replace("_TRANSITIVE", "_T"): v.label for mode, v in row.items()}
                       for change, row in verdicts.items()}).T
print(matrix.to_string())
""", check=True)
nb.md("""
A refusal is an HTTP **409 Conflict**, which the client raises as `SchemaRegistryError`. Here is
one, raw: the rename, on a subject in `FULL`:
""")
nb.code("""
refused_subject = f"refused-{run}-value"
new_subject(registry, refused_subject, "FULL", [ORDER_V1])
try:
    registry.register_schema(refused_subject, Schema(CHANGES["rename a field"], "AVRO"))
except SchemaRegistryError as err:
    refusal = err
print(f"{type(refusal).__name__}: HTTP {refusal.http_status_code}\\n{refusal.error_message[:300]}")
""")
nb.code("""
print("refused with HTTP 409:", refusal.http_status_code == 409)
print("the subject still has only version 1:", registry.get_versions(refused_subject) == [1])
""", check=True)
nb.code("""
full_guess.reveal(sum(v["FULL"].accepted for v in verdicts.values()),
                  "Only a field with a default can come or go in both directions; a rename is a removal plus "
                  "an addition without default, and Avro promotes int to long for readers only.",
                  expected=1)
""")

nb.md("""
## Old and new consumers on mixed data

During an upgrade, old and new producers write to the same topic for a while, and old and new
consumers read it. To see what each change does to readers, turn the registry's checks **off**
for a moment (global `NONE`: it still hands out ids, it checks nothing), let an old producer
(version 1) and a new one (version 2) interleave 4 records each per change, then switch the
checks back on.
""")
nb.code("""
def sample_order(schema, i):
    \"\"\"Order number `i` with the fields `schema` has (values chosen per field name).\"\"\"
    every_field = {"id": f"o-{i}", "customer": "ada", "customer_id": "ada", "amount": 1000 + i,
                   "note": "leave at the door", "coupon": "SPRING", "currency": "EUR"}
    return {field["name"]: every_field[field["name"]] for field in json.loads(schema)["fields"]}


registry.set_compatibility(level="NONE")                     # the global level
try:
    mixed, tag = {}, uuid.uuid4().hex[:6]                    # new topics each run of the cell
    for n, (change, v2) in enumerate(CHANGES.items()):
        topic = cluster.create_topic(f"mixed-{n}-{tag}", partitions=1)
        ctx = SerializationContext(topic, MessageField.VALUE)
        old_producer, new_producer = AvroSerializer(registry, ORDER_V1), AvroSerializer(registry, v2)
        for i in range(4):
            producer.produce(topic, value=old_producer(sample_order(ORDER_V1, 2 * i), ctx), on_delivery=delivery_report)
            producer.produce(topic, value=new_producer(sample_order(v2, 2 * i + 1), ctx), on_delivery=delivery_report)
        mixed[change] = topic
    producer.flush(10)
finally:
    registry.set_compatibility(level="BACKWARD")
print("global compatibility back to:", registry.get_compatibility())
""")
nb.md("""
A consumer's code is written against one version of the schema: its **reader schema**. The
deserializer reads each value with the writer's schema (from the id) and resolves it into the
reader's: fields the reader lacks are skipped, fields the writer lacks take the reader's default
— or the record cannot be read.
""")
nb.code("""
def consume(topic, reader_schema, group):
    \"\"\"Read `topic` to its end with a consumer whose code knows `reader_schema`: (orders read, failures).\"\"\"
    deserializer = AvroDeserializer(registry, reader_schema)
    consumer = cluster.consumer(group, enable_partition_eof=True)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    read, failures = [], []
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(msg.error())
            try:
                read.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
            except (SchemaResolutionError, SerializationError) as err:
                failures.append(f"{type(err).__name__}: {err}")
    finally:
        consumer.close()
    return read, failures


readers = {}
for change, topic in mixed.items():
    old_read, old_failed = consume(topic, ORDER_V1, f"old-app-{run}")
    new_read, new_failed = consume(topic, CHANGES[change], f"new-app-{run}")
    readers[change] = {"old consumer: read": len(old_read), "old consumer: failed": len(old_failed),
                       "new consumer: read": len(new_read), "new consumer: failed": len(new_failed),
                       "first failure": (old_failed + new_failed + [""])[0][:90]}
outcomes = pd.DataFrame(readers).T
outcomes
""")
nb.code("""
print(outcomes.drop(columns="first failure").to_string())
""", check=True)
nb.md("""
Put the registry's verdicts next to what the readers went through: **BACKWARD** accepted exactly
the changes the *new* consumer survived, **FORWARD** those the *old* consumer survived, **FULL**
those both survived (with one step of history, each `_TRANSITIVE` mode answers like its plain one).
""")
nb.code("""
new_reads_old = {c: readers[c]["new consumer: failed"] == 0 for c in CHANGES}
old_reads_new = {c: readers[c]["old consumer: failed"] == 0 for c in CHANGES}
survived = {"BACKWARD": new_reads_old, "FORWARD": old_reads_new,
            "FULL": {c: new_reads_old[c] and old_reads_new[c] for c in CHANGES}}
for mode in MODES:
    guarantee = survived[mode.replace("_TRANSITIVE", "")]
    print(f"{mode}: accepted = the changes the readers survived:",
          all(verdicts[c][mode].accepted == guarantee[c] for c in CHANGES))
""", check=True)

nb.md("""
## Which side upgrades first

From what happened: under each mode, take the changes it accepted and ask which consumers read
everything. That decides the upgrade order — the side that can still read the other side's
data goes first.
""")
nb.code("""
def upgrade_first(new_ok, old_ok):
    if new_ok and old_ok:
        return "either side, any order"
    if new_ok:
        return "consumers, then producers"
    if old_ok:
        return "producers, then consumers"
    return "no safe order: stop everything"


order_table = []
for mode in MODES:
    accepted = [c for c in CHANGES if verdicts[c][mode].accepted]
    new_ok = all(new_reads_old[c] for c in accepted)
    old_ok = all(old_reads_new[c] for c in accepted)
    order_table.append({"mode": mode, "accepted changes": ", ".join(accepted),
                        "new consumers read old data": new_ok, "old consumers read new data": old_ok,
                        "upgrade first": upgrade_first(new_ok, old_ok)})
order_table = pd.DataFrame(order_table).set_index("mode")
order_table
""")
nb.code("""
print(order_table[["new consumers read old data", "old consumers read new data", "upgrade first"]].to_string())
""", check=True)
nb.md("""
* **BACKWARD** (Confluent's default): upgrade **consumers first**. New consumers read what old
  producers still write (and what the topic still holds); once they all run, producers switch.
* **FORWARD**: upgrade **producers first**: old consumers read the new data, then they upgrade
  at their own pace.
* **FULL**: any order — at the price of only adding or removing fields that have defaults.
* **NONE**: no guarantee: the rename broke both sides.

## Transitive modes: every version, not just the last

The plain modes compare a new schema with the **latest** version only. A chain of changes, each
fine with its predecessor, can still clash with an older version — and consumers of that version
may still be running, and records written with it may still be in the topic:

* v1: `f` is an `int` with a default,
* v2: `f` removed (allowed: it had a default),
* v3: `f` comes back as a `string` with a default.
""")
nb.code("""
CHAIN = [order_schema(ID, {"name": "f", "type": "int", "default": 0}),
         order_schema(ID),
         order_schema(ID, {"name": "f", "type": "string", "default": ""})]
transitive_guess = predict.ask("09.transitive", "Under FULL, does the registry accept v3 after v1 and v2?",
                               kind="yes/no")
transitive_guess
""")
nb.code("""
chain = compatibility_matrix(registry, CHAIN[:2], {"v3 after v1, v2": CHAIN[2]}, MODES, prefix=f"chain-{run}")
print(pd.DataFrame({m: [a.label] for m, a in chain["v3 after v1, v2"].items()}, index=["v3"]).T.to_string())
""", check=True)
nb.md("""
Under `FULL` v3 went in. What does a consumer still on v1 make of the topic when producers on v1,
v2 and v3 have all written to it?
""")
nb.code("""
chain_topic = cluster.create_topic(f"chain-{uuid.uuid4().hex[:6]}", partitions=1)   # a new one each run
new_subject(registry, f"{chain_topic}-value", "FULL")
ctx = SerializationContext(chain_topic, MessageField.VALUE)
for version, schema in enumerate(CHAIN, start=1):
    serializer = AvroSerializer(registry, schema)
    for i in range(3):
        producer.produce(chain_topic, value=serializer({"id": f"v{version}-{i}", "f": 7 if version == 1 else "seven"}, ctx),
                         on_delivery=delivery_report)
producer.flush(10)
v1_read, v1_failed = consume(chain_topic, CHAIN[0], f"v1-app-{run}")
v3_read, v3_failed = consume(chain_topic, CHAIN[2], f"v3-app-{run}")
print("v1 consumer:", len(v1_read), "read,", len(v1_failed), "failed —", v1_failed[:1])
print("v3 consumer:", len(v3_read), "read,", len(v3_failed), "failed —", v3_failed[:1])
""")
nb.code("""
print("FULL accepted v3, FULL_TRANSITIVE refused it (409):",
      chain["v3 after v1, v2"]["FULL"].accepted, chain["v3 after v1, v2"]["FULL_TRANSITIVE"].status)
print("v1 consumer fails on exactly the 3 v3 records:", len(v1_failed) == 3 and len(v1_read) == 6)
print("v3 consumer fails on exactly the 3 v1 records:", len(v3_failed) == 3 and len(v3_read) == 6)
""", check=True)
nb.code("""
transitive_guess.reveal(chain["v3 after v1, v2"]["FULL"].accepted,
                        "FULL only compares v3 with v2, which has no f at all. The _TRANSITIVE modes compare with "
                        "every version, which is what consumers reading old records need.")
""")

nb.md("""
## Without a registry

Everything so far could stop a bad schema before any record was written. Without a registry, a
topic of JSON strings has no contract at all. A producer team renames `amount` to
`amount_cents` — a harmless clean-up, from where they sit — while the billing consumer keeps
summing `amount`.
""")
nb.code("""
json_guess = predict.ask("09.json-errors", "The producer writes 5 orders in the old shape, then 5 with `amount` "
                         "renamed. How many errors do the producer and the broker report?", tolerance=0)
json_guess
""")
nb.code("""
plain = cluster.create_topic(f"orders-json-{uuid.uuid4().hex[:6]}", partitions=1)   # a new one each run
sent, delivery_errors = [], []


def json_delivery(err, msg):
    (delivery_errors if err is not None else sent).append(msg)


for i in range(10):
    if i < 5:
        payload = {"id": f"o-{i}", "customer": "ada", "amount": 1000 + i}
    else:
        payload = {"id": f"o-{i}", "customer": "ada", "amount_cents": 1000 + i}     # the "clean-up"
    producer.produce(plain, value=json.dumps(payload), on_delivery=json_delivery)
producer.flush(10)

strict_failed, strict_total, lenient_total = 0, 0, 0
for record in cluster.read_all(plain):
    data = json.loads(record.value)
    try:
        strict_total += data["amount"]            # a consumer that fails loudly
    except KeyError:
        strict_failed += 1
    lenient_total += data.get("amount", 0)      # a consumer that "copes": silently wrong
true_total = sum(1000 + i for i in range(10))
print(f"acknowledged: {len(sent)}, delivery errors: {len(delivery_errors)}")
print(f"strict consumer: {strict_failed} records failed | lenient consumer: revenue {lenient_total} instead of {true_total}")
""")
nb.code("""
print("the broker acknowledged all 10, no error anywhere on the producer side:", len(sent) == 10 and not delivery_errors)
print("the strict consumer failed on every renamed record:", strict_failed == 5)
print("the lenient consumer lost exactly the renamed records' revenue:",
      true_total - lenient_total == sum(1000 + i for i in range(5, 10)))
""", check=True)
nb.code("""
json_guess.reveal(len(delivery_errors), "The broker checks nothing about a value: it is bytes. Only the consumer "
                  "notices — if it notices at all.")
""")
nb.md("""
The same rename through the registry, on a subject in `BACKWARD` (the default): the producer's
serializer asks to register the new schema, the registry answers 409, and **nothing** is sent.
""")
nb.code("""
guarded = cluster.create_topic(f"orders-guarded-{uuid.uuid4().hex[:6]}", partitions=1)   # a new one each run
ctx = SerializationContext(guarded, MessageField.VALUE)
AMOUNT_RENAMED = order_schema(ID, CUSTOMER, {"name": "amount_cents", "type": "int"})
producer.produce(guarded, value=AvroSerializer(registry, order_schema(ID, CUSTOMER, AMOUNT))(
    {"id": "o-0", "customer": "ada", "amount": 1000}, ctx), on_delivery=delivery_report)
try:
    producer.produce(guarded, value=AvroSerializer(registry, AMOUNT_RENAMED)(
        {"id": "o-5", "customer": "ada", "amount_cents": 1005}, ctx), on_delivery=delivery_report)
except SchemaRegistryError as err:
    print(f"the serializer refused: HTTP {err.http_status_code}")
producer.flush(10)
print("records in the topic:", len(cluster.read_all(guarded)))
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| brokers store bytes; a framed value is magic byte `0`, a 4-byte schema id, then the payload | a raw consumer's bytes taken apart |
| Avro carries no field names: smaller than the same record as JSON | the two sizes |
| a consumer decodes with the writer's schema fetched by id | `GET /schemas/ids/<id>` + fastavro, `AvroDeserializer` |
| subjects come from a naming strategy; versions and compatibility are per subject | three strategies, three subjects |
| ids are global: one schema, one id, in every subject | the ids of four registrations |
| BACKWARD, FORWARD and FULL accept and refuse (409) different changes | the compatibility matrix on a real registry |
| BACKWARD protects new consumers, FORWARD old ones, FULL both | old and new consumers on mixed data, counted |
| BACKWARD: consumers upgrade first; FORWARD: producers first; FULL: any order | the upgrade table computed from the runs |
| only the `_TRANSITIVE` modes protect consumers of older versions | a v1 consumer failing on v3 records FULL accepted |
| without a registry, a changed JSON producer breaks consumers silently | 10 of 10 acknowledged, 5 failed or miscounted |

Next: the graded exercise `schema_evolution` evolves a schema through business changes under FULL.
""")
nb.code("""
predict.summary("09")
""")
nb.code("""
producer.close()         # every client closed before the brokers go
cluster.stop()
""")
