"""Source of notebooks/02_keys_and_murmur2.ipynb: build it with `python scripts/build_notebooks.py 02`."""

from labkit.authoring import Notebook

nb = Notebook("02 · Keys and partitions: murmur2",
              summary="Where a keyed record goes, why Python and Java producers disagree, hot partitions, "
                      "and what adding partitions does to keys.",
              minutes=30)

nb.md("""
# 02 · Keys and partitions: murmur2

A record's **key** decides its partition, and so which records stay in order together. This lesson
takes the rule apart: the formula the Java client uses, the different default of the Python
client (a classic production surprise), what skewed keys do to a cluster, and why adding
partitions moves keys around.

*About 30 minutes. Every cell is safe to re-run.*
""")

nb.md("""
## Setup
""")
nb.code("""
import uuid
from collections import Counter

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

import labkit
from labkit import partitioning as pt

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster()
run = uuid.uuid4().hex[:6]          # topic names unique to this run
cluster
""")

nb.md("""
## Same key, same partition

Send a few records for four customers to a topic with six partitions, then ask the broker where
it stored each one.
""")
nb.code("""
orders = cluster.create_topic(f"orders-{run}", partitions=6)
producer = cluster.producer(acks="all")
customers = ["alice", "bob", "carol", "dave"]
for i in range(16):
    producer.produce(orders, key=customers[i % 4], value=f"order #{i}")
producer.flush(10)

stored = cluster.read_all(orders)
by_key = {}
for r in stored:
    by_key.setdefault(r.key_text, set()).add(r.partition)
print("records stored:", len(stored))
for customer in customers:
    print(f"  {customer:<6} -> partition(s) {sorted(by_key[customer])}")
""")
nb.code("""
print("every key in exactly one partition:", all(len(p) == 1 for p in by_key.values()))
""", check=True)
nb.md("""
All of a customer's records sit in one partition, so a consumer sees them **in the order they
were written**. That is the whole point of keys. But *which* partition? That depends on the
producer — not on the broker.
""")

nb.md("""
## The Java formula

Kafka's Java producer picks the partition of a keyed record with

```text
partition = toPositive(murmur2(keyBytes)) % numPartitions        toPositive(x) = x & 0x7fffffff
```

`murmur2` is a fast 32-bit hash; Java returns it as a *signed* `int`, so `toPositive` clears the
sign bit (for `bob` the hash is negative, so you can see it at work). `labkit.partitioning` has the same functions in Python, bit-exact with Java's:
""")
nb.code("""
key = b"bob"
h = pt.murmur2(key)
print(f"murmur2({key!r})      = {h}")
print(f"toPositive(...)        = {pt.to_positive(h)}")
print(f"... % 6                = {pt.to_positive(h) % 6}")
print(f"java_partition(key, 6) = {pt.java_partition(key, 6)}")
""", check=True)

nb.md("""
Try your own keys: the explorer below recomputes as you type or move the slider.
""")
nb.code("""
import ipywidgets as widgets

@widgets.interact(key="customer-42", partitions=widgets.IntSlider(value=6, min=1, max=48))
def explore(key, partitions):
    h = pt.murmur2(key)
    print(f"murmur2        {h:>12}   (bits: {h & 0xFFFFFFFF:032b})")
    print(f"toPositive     {pt.to_positive(h):>12}")
    print(f"Java producer  partition {pt.java_partition(key, partitions)}")
    print(f"Python default partition {pt.librdkafka_partition(key, partitions)}   (CRC32, see below)")
""")

nb.md("""
### The Python client does something else

confluent-kafka (which wraps the C library **librdkafka**) does *not* use that formula by default.
Its `partitioner` setting defaults to `consistent_random`: **CRC32** of the key. Let's prove it on
the live cluster with three producers sending the same 200 keys to three identical topics:

1. Kafka's own **Java** producer (`kafka-console-producer`, run from the lab's Kafka jars);
2. a Python producer with the **default** settings;
3. a Python producer with `partitioner="murmur2_random"`.
""")
nb.code("""
keys = [f"customer-{i}" for i in range(200)]
topics = {name: cluster.create_topic(f"placement-{name}-{run}", partitions=6)
          for name in ("java", "python-default", "python-murmur2")}

# 1. the real Java producer: key and value separated by ':' on each input line
cluster.tool("kafka-console-producer", "--topic", topics["java"],
             "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
             input="".join(f"{k}:hello\\n" for k in keys))

# 2. and 3. Python producers
for name, config in (("python-default", {}), ("python-murmur2", {"partitioner": "murmur2_random"})):
    p = cluster.producer(**config)
    for k in keys:
        p.produce(topics[name], key=k, value="hello")
    p.flush(10)

landed = pd.DataFrame({name: {r.key_text: r.partition for r in cluster.read_all(t)}
                       for name, t in topics.items()}).loc[keys]
landed.head(8)
""")
nb.code("""
same_as_java = {name: int((landed[name] == landed["java"]).sum()) for name in ("python-default", "python-murmur2")}
print("keys placed like the Java producer, of", len(keys))
for name, n in same_as_java.items():
    print(f"  {name:<15} {n}")
print("model java_partition() predicts the Java producer:",
      all(landed.loc[k, "java"] == pt.java_partition(k, 6) for k in keys))
print("model librdkafka_partition() predicts the default Python producer:",
      all(landed.loc[k, "python-default"] == pt.librdkafka_partition(k, 6) for k in keys))
""", check=True)
nb.code("""
fig = go.Figure(go.Bar(x=["Java producer", "Python, default", "Python, murmur2_random"],
                       y=[len(keys), same_as_java["python-default"], same_as_java["python-murmur2"]],
                       marker_color=["#2e86de", "#e67e22", "#27ae60"]))
fig.update_layout(title="Keys stored in the same partition as the Java producer chose (of 200)",
                  yaxis_title="keys", height=340, margin=dict(t=50, b=30))
fig
""")
nb.md("""
Only about one key in six agrees by chance. **Why it matters:** if a Java service and a Python
service both write `customer-42` to the same topic, its records end up in *two* partitions, and
per-key ordering is gone. The same goes for joins that rely on co-partitioning (Kafka Streams,
ksqlDB, Flink): both sides must use the same partitioner. The fix is one line —
`"partitioner": "murmur2_random"` in every Python producer that shares topics with Java.

librdkafka's other partitioners (`consistent`, `murmur2`, `fnv1a`, and their `_random` variants)
differ in how they treat *null* and *empty* keys; the table is in `help(labkit.partitioning)`.
""")

nb.md("""
## Hot partitions

A hash spreads *distinct keys* evenly — not *records*. If one key sends most of the traffic, its
partition (and the broker leading it) does most of the work. Compare evenly spread customers with
a day where one big customer sends half of all orders:
""")
nb.code("""
import random

rng = random.Random(42)
uniform_keys = [f"customer-{rng.randrange(1000)}" for _ in range(3000)]
skewed_keys = [("customer-7" if rng.random() < 0.5 else f"customer-{rng.randrange(1000)}") for _ in range(3000)]

counts = {}
for name, ks in (("uniform", uniform_keys), ("skewed", skewed_keys)):
    t = cluster.create_topic(f"traffic-{name}-{run}", partitions=6)
    p = cluster.producer(partitioner="murmur2_random", linger_ms=20)
    for k in ks:
        p.produce(t, key=k, value="x")
        p.poll(0)
    p.flush(30)
    counts[name] = Counter(r.partition for r in cluster.read_all(t))

frame = pd.DataFrame([{"partition": p, "traffic": name, "records": counts[name].get(p, 0)}
                      for name in counts for p in range(6)])
px.bar(frame, x="partition", y="records", color="traffic", barmode="group", height=360,
       title="Records per partition, measured on the broker (3,000 records each)")
""")
nb.code("""
hot = pt.java_partition("customer-7", 6)
print(f"customer-7 always goes to partition {hot}")
print("that partition holds the most records in the skewed topic:", counts["skewed"].most_common(1)[0][0] == hot)
""", check=True)
nb.md("""
Remedies when one key is hot: a more selective key (e.g. `customer-7:order-id` if per-customer
order is not needed), *salting* the hot key into a few sub-keys, or more partitions with a
different key — each trades away some ordering.
""")

nb.md("""
## Adding partitions remaps keys

Partitions can be added to a topic, never removed. The formula divides by the partition count,
so after adding partitions most keys map somewhere else. Kafka does **not** move old records:
a key's history stays in its old partition while new records go to the new one.
""")
nb.code("""
from confluent_kafka.admin import NewPartitions

growing = cluster.create_topic(f"growing-{run}", partitions=6)
ids = [f"customer-{i}" for i in range(300)]

def send_all(tag):
    p = cluster.producer(partitioner="murmur2_random")
    for k in ids:
        p.produce(growing, key=k, value=tag)
    p.flush(10)

send_all("before")
cluster.admin().create_partitions([NewPartitions(growing, 8)])[growing].result(timeout=30)
cluster.wait_for_isr(growing)
send_all("after")

where = {}
for r in cluster.read_all(growing):
    where.setdefault(r.key_text, {})[r.value_text] = r.partition
moved = sum(where[k]["before"] != where[k]["after"] for k in ids)
print(f"{moved} of {len(ids)} keys now write to a different partition than before")
""")
nb.code("""
print("observed = predicted by java_partition with 6 then 8 partitions:",
      all(where[k]["before"] == pt.java_partition(k, 6) and where[k]["after"] == pt.java_partition(k, 8)
          for k in ids))
""", check=True)
nb.code("""
moves = Counter((where[k]["before"], where[k]["after"]) for k in ids)
fig = go.Figure(go.Sankey(
    node=dict(label=[f"p{i} (6 partitions)" for i in range(6)] + [f"p{i} (8 partitions)" for i in range(8)],
              pad=8, thickness=14),
    link=dict(source=[b for b, _ in moves], target=[6 + a for _, a in moves], value=list(moves.values())),
))
fig.update_layout(title=f"Where 300 keys write before and after 6 → 8 partitions ({moved} moved)",
                  height=420, margin=dict(t=50, b=20))
fig
""")
nb.md("""
So plan partition counts up front (it is common to over-provision), and if you must add
partitions to a keyed topic, expect a period where a key's old and new records live in different
partitions — consumers relying on per-key order must tolerate it.
""")

nb.md("""
## Keyless records

Without a key there is nothing to hash. Modern producers (Java since 2.4, librdkafka since 1.9)
use a **sticky** partitioner: fill a batch for one partition, then switch to another. Records
spread evenly over time, but consecutive records travel together:
""")
nb.code("""
import time

keyless = cluster.create_topic(f"keyless-{run}", partitions=6)
order = []
p = cluster.producer(linger_ms=5)      # sticky.partitioning.linger.ms defaults to 10 ms
for i in range(3000):
    p.produce(keyless, value=f"event {i}", on_delivery=lambda err, msg: order.append(msg.partition()))
    p.poll(0)
    if i % 50 == 49:
        time.sleep(0.005)              # a steady stream of events, ~0.4 s in all
p.flush(30)

switches = sum(1 for a, b in zip(order, order[1:]) if a != b)
spread = Counter(r.partition for r in cluster.read_all(keyless))
print("records per partition:", dict(sorted(spread.items())))
print(f"partition changes between consecutive records: {switches} "
      f"(about 2,500 if every record picked a partition at random)")
""")
nb.code("""
print("keyless records reached several partitions:", len(spread) > 1)
print("and travelled in runs, not one by one:", switches < 1000)
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a key always maps to one partition | 16 orders, 4 customers, each in one partition |
| Java: `toPositive(murmur2(key)) % n` | the real Java producer matched `java_partition` for 200 keys |
| Python's default is CRC32, not murmur2 | ~1 in 6 keys agreed; `murmur2_random` agreed on all |
| hashing spreads keys, not load | one hot key made one partition hot |
| adding partitions remaps keys | most of 300 keys moved from 6 to 8 partitions |
| keyless records are sticky | thousands of records, only a few hundred partition switches |

**Exercises:** [murmur2 from scratch](exercises/murmur2.ipynb) ·
[The slide with two bugs](exercises/partition_formula.ipynb) ·
[Predict the placement](exercises/predict_placement.ipynb) ·
[A custom partitioner](exercises/custom_partitioner.ipynb)
""")
nb.code("""
del producer, p
cluster.stop()
""")

