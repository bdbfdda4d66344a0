"""Source of notebooks/02_keys_and_murmur2.ipynb: build it with `python scripts/build_notebooks.py 02`."""

from labkit.authoring import Notebook

nb = Notebook("02 · Keys and partitions: murmur2",
              summary="Where a keyed record goes, why Python and Java producers disagree, the slide's Math.abs, "
                      "hot partitions, co-partitioning, what adding partitions does to keys, sticky keyless records.",
              minutes=35)

nb.md("""
# 02 · Keys and partitions: murmur2

A record's **key** decides its partition, and so which records stay in order together. This lesson
takes the rule apart: the formula the Java client uses, the different default of the Python
client (a classic production surprise), what skewed keys do to a cluster, and why adding
partitions moves keys around.

*About 35 minutes. Every cell is safe to re-run.*
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
from labkit import predict

labkit.setup_check()
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                  # running this cell again starts afresh
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
### And the Python client?

confluent-kafka wraps the C library **librdkafka**, which has a `partitioner` setting of its own.
Three producers send the same 200 keys to three identical topics of 6 partitions:

1. Kafka's own **Java** producer (`kafka-console-producer`, run from the lab's Kafka jars);
2. a Python producer with the **default** settings;
3. a Python producer with `partitioner="murmur2_random"`.
""")
nb.code("""
keys = [f"customer-{i}" for i in range(200)]
q_python = predict.ask("02.python-agrees", "Of the 200 keys, how many does the default Python producer store in the "
                       "partition the Java producer chose: all 200, about one in six (chance), or none?",
                       choices=["all 200", "about 1 in 6", "none"])
q_python
""")
nb.code("""
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
    print(f"  {name:<15} {n} ({n / len(keys):.0%})")
print("model java_partition() predicts the Java producer:",
      all(landed.loc[k, "java"] == pt.java_partition(k, 6) for k in keys))
print("model librdkafka_partition() predicts the default Python producer:",
      all(landed.loc[k, "python-default"] == pt.librdkafka_partition(k, 6) for k in keys))
""", check=True)
nb.code("""
fig = go.Figure(go.Bar(x=["Java producer", "Python, default", "Python, murmur2_random"],
                       y=[len(keys), same_as_java["python-default"], same_as_java["python-murmur2"]],
                       marker_color=["#2e86de", "#e67e22", "#27ae60"]))
fig.update_layout(title=f"Keys stored in the same partition as the Java producer chose (of {len(keys)})",
                  yaxis_title="keys", height=340, margin=dict(t=50, b=30))
fig
""")
nb.code("""
agreed = same_as_java["python-default"]
q_python.reveal("all 200" if agreed == len(keys) else "none" if agreed == 0 else "about 1 in 6",
                f"{agreed} of {len(keys)}: librdkafka's default partitioner, consistent_random, hashes the key with "
                "CRC32, not murmur2.",
                expected="about 1 in 6")
""")
nb.md("""
confluent-kafka does *not* use the Java formula by default: its `partitioner` setting defaults to
`consistent_random`, **CRC32** of the key. Only the share printed above agrees — what chance gives
with six partitions (one in six). **Why it matters:** if a Java service and a Python service both write
`customer-42` to the same topic, its records end up in *two* partitions, and per-key ordering is
gone. Joins that rely on co-partitioning break the same way (below). The fix is one line —
`"partitioner": "murmur2_random"` in every Python producer that shares topics with Java.

librdkafka's other partitioners (`consistent`, `murmur2`, `fnv1a`, and their `_random` variants)
differ in how they treat *null* and *empty* keys; the table is in `help(labkit.partitioning)`.

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
    print(f"Python default partition {pt.librdkafka_partition(key, partitions)}   (CRC32)")
""")

nb.md("""
### The slide's `Math.abs` is not `toPositive`

A slide copied through many Kafka trainings writes the formula as
`Math.abs(murmur2(key)) % (numPartitions - 1)`. The modulus is one bug (the exercise
*The slide with two bugs* finds it). The other looks harmless: `Math.abs` instead of `toPositive`.
It is not only about the one hash, −2³¹, whose absolute value does not fit in an `int`: for a
negative hash `h`, `toPositive(h)` is `h + 2³¹` while `Math.abs(h)` is `−h` — different numbers,
and usually different partitions. Fix the modulus and keep `Math.abs`: how many keys move?
""", slide="subslide")
nb.code("""
q_abs = predict.ask("02.math-abs", "The slide's Math.abs(murmur2(key)) % 6 (modulus fixed): what share of keys "
                    "does it put in a different partition than the Java producer? (None would mean: only the "
                    "hash -2^31 differs.)",
                    choices=["none", "about 1 in 6", "about 1 in 3", "about 1 in 2"])
q_abs
""")
nb.code("""
def slide_partition(key, n):
    return abs(pt.murmur2(key)) % n        # Math.abs (no key here hashes to -2**31, where Java's would overflow)

elsewhere = [k for k in keys if slide_partition(k, 6) != landed.loc[k, "java"]]
negative = [k for k in keys if pt.murmur2(k) < 0]
many = [f"key-{i}" for i in range(30_000)]
share_many = sum(slide_partition(k, 6) != pt.java_partition(k, 6) for k in many) / len(many)
print(f"the {len(keys)} keys the Java producer wrote: {len(elsewhere)} ({len(elsewhere) / len(keys):.0%}) "
      f"land elsewhere under Math.abs")
print(f"  {len(negative)} of them have a negative hash; Math.abs moves {len(elsewhere)} of those")
print(f"30,000 more keys (model only): {share_many:.1%} land elsewhere")
""")
nb.code("""
key = elsewhere[0]
h = pt.murmur2(key)
print(f"key {key!r}: murmur2 = {h}")
print(f"  toPositive(h) = {pt.to_positive(h):>10}   % 6 = {pt.to_positive(h) % 6}   "
      f"<- the Java producer stored it in partition {landed.loc[key, 'java']}")
print(f"  Math.abs(h)   = {abs(h):>10}   % 6 = {abs(h) % 6}")
print("Math.abs disagrees only where the hash is negative:", set(elsewhere) <= set(negative))
print("and on about a third of the keys (between 25 % and 42 %):", 0.25 < len(elsewhere) / len(keys) < 0.42)
""", check=True)
nb.code("""
share = len(elsewhere) / len(keys)
q_abs.reveal("none" if not elsewhere else "about 1 in 6" if share < 0.25
             else "about 1 in 3" if share < 0.42 else "about 1 in 2",
             f"{share:.0%} here. Half the hashes are negative; for those, toPositive and Math.abs differ by "
             "2h + 2^31, a multiple of 6 only for one negative hash in three — so two in three move.",
             expected="about 1 in 3")
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
## Adding partitions

Partitions can be added to a topic, never removed. 300 customers write to a topic of 6
partitions; then it grows to 8, and they write again.
""")
nb.code("""
ids = [f"customer-{i}" for i in range(300)]
q_moved = predict.ask("02.moved", "The topic grows from 6 to 8 partitions. What share of 300 keys will "
                      "write to a different partition afterwards?",
                      choices=["about 1 in 4", "about half", "about 3 in 4", "all of them"])
q_moved
""")
nb.code("""
growing = cluster.create_topic(f"growing-{uuid.uuid4().hex[:6]}", partitions=6)   # a new topic each run

def send_all(tag):
    p = cluster.producer(partitioner="murmur2_random")
    for k in ids:
        p.produce(growing, key=k, value=tag)
    p.flush(10)

send_all("before")
cluster.add_partitions(growing, 8)   # returns once every broker's metadata has the 8 partitions
send_all("after")

where = {}
for r in cluster.read_all(growing):
    where.setdefault(r.key_text, {})[r.value_text] = r.partition
moved = sum(where[k]["before"] != where[k]["after"] for k in ids)
print(f"{moved} of {len(ids)} keys now write to a different partition than before")
""")
nb.code("""
share = moved / len(ids)
q_moved.reveal("all of them" if moved == len(ids) else "about 3 in 4" if share > 0.62 else
               "about half" if share > 0.37 else "about 1 in 4",
               f"{share:.0%} moved: a hash stays put only if h % 6 == h % 8, true for 6 of every 24 values "
               "(24 is the least common multiple): one key in four stays.",
               expected="about 3 in 4")
""")
nb.md("""
The formula divides by the partition count, so after adding partitions most keys map somewhere
else. And Kafka does **not** move old records: a key's history stays in its old partition while
its new records go to the new one.
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
## Co-partitioning

A stream processor that joins `orders` with `payments` per customer wants each customer's orders
and payments in the **same partition number** of both topics: then the task that reads
partition 2 of both topics sees every record of its customers and joins them locally. That holds
only when both topics are **co-partitioned**: same key, same partitioner, same partition count.
Write the same 100 customers to three topics — orders (6 partitions), payments (6), and
refunds (8) — and ask the broker where each customer ended up:
""")
nb.code("""
customers_100 = [f"customer-{i}" for i in range(100)]
joined = {name: cluster.create_topic(f"{name}-{run}", partitions=n)
          for name, n in (("orders-cp", 6), ("payments-cp", 6), ("refunds-cp", 8))}
p = cluster.producer(partitioner="murmur2_random")
for name, t in joined.items():
    for c in customers_100:
        p.produce(t, key=c, value=name)
p.flush(10)
partition_of = {name: {r.key_text: r.partition for r in cluster.read_all(t)} for name, t in joined.items()}
pd.DataFrame(partition_of).loc[customers_100].head(6)
""")
nb.code("""
same_6_6 = sum(partition_of["orders-cp"][c] == partition_of["payments-cp"][c] for c in customers_100)
same_6_8 = sum(partition_of["orders-cp"][c] == partition_of["refunds-cp"][c] for c in customers_100)
print(f"orders (6) and payments (6): {same_6_6} of 100 customers in the same partition number")
print(f"orders (6) and refunds (8):  {same_6_8} of 100 customers in the same partition number")
print("same partition count: co-partitioned:", same_6_6 == 100)
print("different count: not co-partitioned:", same_6_8 < 100)
""", check=True)
nb.md("""
**Kafka Streams** (and ksqlDB) joins read partition *n* of both inputs in one task, so they
require co-partitioned topics: Streams refuses a join whose topics have different partition
counts, but it cannot check the partitioner — a Python producer with the default partitioner
(above) silently breaks a join. **Flink** does not need co-partitioned topics: its `keyBy`
reshuffles records by key across its own tasks over the network, whatever partition they came
from — at the cost of that shuffle.
""")

nb.md("""
## Keyless records

Without a key there is nothing to hash. Modern producers use a **sticky** partitioner: keyless
records go to one partition for a while, then to another, so they form bigger batches than
one-record-each round robin would. The **Java** producer switches when it has sent a batch's
worth to the partition (since 2.4, KIP-480; since 3.3, after `batch.size` bytes, KIP-794).
librdkafka has a setting for it too, `sticky.partitioning.linger.ms`.

Send 3,000 small keyless records from Python as a steady stream of about a second with
`sticky.partitioning.linger.ms=50`. Together they are far below one batch (`batch.size` is 1 MB,
`batch.num.messages` 10,000).
""")
nb.code("""
q_sticky = predict.ask("02.sticky", "3,000 keyless records over about a second, all fitting in one batch. How does "
                       "the Python producer spread them: all in one partition (the batch never fills), a new "
                       "partition every ~50 ms, or a new partition for every record?",
                       choices=["one partition", "every ~50 ms", "every record"])
q_sticky
""")
nb.code("""
import time

keyless = cluster.create_topic(f"keyless-{run}", partitions=6)
sent_at, placed_in = [], {}

def on_delivery(err, msg):
    if err is None and msg.value() != b"warm-up":
        placed_in[int(msg.value())] = msg.partition()

p = cluster.producer(linger_ms=5, sticky_partitioning_linger_ms=50)
p.produce(keyless, value="warm-up")    # one record first: the producer learns the partitions' leaders
p.flush(10)
start = time.monotonic()
for i in range(3000):
    sent_at.append(time.monotonic() - start)
    p.produce(keyless, value=str(i), on_delivery=on_delivery)
    p.poll(0)
    if i % 5 == 4:
        time.sleep(0.002)              # a steady stream of events, about 1.3 s in all
p.flush(30)

order = [placed_in[i] for i in range(3000)]
run_starts = [0] + [i for i in range(1, len(order)) if order[i] != order[i - 1]]
switches = len(run_starts) - 1
every = pd.Series([sent_at[b] - sent_at[a] for a, b in zip(run_starts, run_starts[1:])]).median()
spread = Counter(order)
print("records per partition:", dict(sorted(spread.items())))
print(f"{switches} partition switches in {sent_at[-1]:.2f} s: a new partition every {every * 1000:.0f} ms (median), "
      f"about {len(order) // len(run_starts)} records each")
px.scatter(x=sent_at, y=order, labels={"x": "seconds since the first record", "y": "partition"}, height=300,
           title="Partition of each keyless record over time")
""")
nb.code("""
print("keyless records reached several partitions:", len(spread) > 1)
print("the partition changed although no batch was ever full:", switches > 5 and len(order) < 10_000)
print("and records travelled in runs, not one by one:", switches < len(order) / 10)
""", check=True)
nb.code("""
q_sticky.reveal("one partition" if switches == 0 else "every record" if switches > len(order) / 2 else "every ~50 ms",
                "librdkafka's sticky partitioner picks a new random partition each sticky.partitioning.linger.ms; "
                "a run lasts one interval, or two when the draw repeats the partition.",
                expected="every ~50 ms")
""")
nb.md("""
**librdkafka** (so the Python client) switches on a **timer**: every `sticky.partitioning.linger.ms`
(default 10 ms) it picks a new random partition — full batch or not. The Java producer would have
kept all 3,000 in one partition until a batch's worth was sent.
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a key always maps to one partition | 16 orders, 4 customers, each in one partition |
| Java: `toPositive(murmur2(key)) % n` | the real Java producer matched `java_partition` for 200 keys |
| Python's default is CRC32, not murmur2 | only chance agreement with Java; `murmur2_random` agreed on all |
| `Math.abs` is not `toPositive` | about a third of keys (all with negative hashes) land elsewhere; one key shown |
| hashing spreads keys, not load | one hot key made one partition hot |
| adding partitions remaps keys | most of 300 keys moved from 6 to 8 partitions |
| co-partitioning needs the same partition count (and partitioner) | 6 and 6: every customer aligned; 6 and 8: most not |
| librdkafka's keyless records are sticky on a timer | partition switches every `sticky.partitioning.linger.ms`, no batch ever full |

**Exercises:** [murmur2 from scratch](exercises/murmur2.ipynb) ·
[The slide with two bugs](exercises/partition_formula.ipynb) ·
[Predict the placement](exercises/predict_placement.ipynb) ·
[A custom partitioner](exercises/custom_partitioner.ipynb)
""")
nb.code("""
predict.summary("02")
""")
nb.code("""
producer = p = None  # the clients go first, so they do not complain about brokers going away
cluster.stop()
""")

