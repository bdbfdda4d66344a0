"""Source of notebooks/00_welcome.ipynb: build it with `python scripts/build_notebooks.py 00`."""

from labkit.authoring import Notebook

nb = Notebook("00 · Welcome to Kafka Lab",
              summary="Start a three-broker cluster, write and read records, kill a leader and watch failover.",
              minutes=15)

nb.md("""
# 00 · Welcome to Kafka Lab

In this first lesson you start a **real three-broker Apache Kafka cluster** on your own machine,
look around it, write and read a few records, and then break it on purpose — killing the broker
that leads a partition — to watch Kafka elect a new leader while your client carries on.

*About 15 minutes. Every cell is safe to re-run.*
""")

nb.md("""
## Setup

The first cell checks that this machine has what the lab needs (Python, Java 17+, the Kafka jars).
If something is missing it tells you the one command that fixes it.
""")
nb.code("""
import uuid

import labkit
from labkit.viz import compare_partition_maps

labkit.setup_check()
""")

nb.md("""
## Start a cluster

`labkit.start_cluster()` launches three Kafka 4 nodes as ordinary Java processes on free ports of
`127.0.0.1`, each with its own data directory. The cluster belongs to this notebook: nobody else
sees its topics, and it disappears when the notebook's kernel stops — even if the kernel crashes.
""")
nb.code("""
cluster = labkit.start_cluster()   # profile "three-brokers"
cluster
""")
nb.code("""
print("brokers:", [b.id for b in cluster.brokers])
print("all alive:", all(b.alive for b in cluster.brokers))
print("bootstrap servers:", cluster.bootstrap_servers)
""", check=True)

nb.md("""
## Brokers and the controller quorum

Every node here plays two roles (*combined mode*):

* **broker** — stores partitions and serves producers and consumers;
* **controller** — the three controllers keep the cluster's metadata (topics, partitions,
  leaders, ISR) in a replicated log called `__cluster_metadata`, agreeing on it with the
  Raft protocol. This is **KRaft**. ZooKeeper, which used to do this job, is gone in Kafka 4.

One controller is the active one (the Raft *leader*); the others follow its log and can take
over. Kafka's own `kafka-metadata-quorum` tool shows who is who:
""")
nb.code("""
print(cluster.tool("kafka-metadata-quorum", "describe", "--status"))
""")
nb.code("""
print(cluster.tool("kafka-metadata-quorum", "describe", "--replication"))
""")

nb.md("""
### Broker discovery

A client needs only **one** reachable broker to start: it asks that broker for metadata and
learns about every broker in the cluster. That is why `bootstrap.servers` is called *bootstrap*.
""")
nb.code("""
from confluent_kafka.admin import AdminClient

one_broker = cluster.brokers[0].address
metadata = AdminClient({"bootstrap.servers": one_broker}).list_topics(timeout=10)
print("asked broker 1 only, and learned about brokers", sorted(metadata.brokers))
""", check=True)

nb.md("""
## A replicated topic

A **topic** is split into **partitions**; each partition is stored on `replication_factor`
brokers. One of those replicas is the partition's **leader** (it takes all reads and writes),
the others are **followers** that copy it. Replicas that are fully caught up form the
**in-sync replica set (ISR)**.
""")
nb.code("""
topic = cluster.create_topic(f"welcome-{uuid.uuid4().hex[:6]}", partitions=3, replication_factor=3)
cluster.describe_topic(topic)
""")
nb.md("""
Each of the three brokers leads one partition and follows the other two: leadership is spread
so that no single broker does all the work.
""")

nb.md("""
## Write and read records

The producer below is ordinary `confluent-kafka` code, as you would write it at work: a config
dict, a delivery callback that checks for an error first, `poll(0)` to serve callbacks, and
`flush()` at the end. With `acks="all"` a record counts as written only once every in-sync
replica has it.
""")
nb.code("""
from confluent_kafka import Consumer, Producer

producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
delivered = []

def on_delivery(err, msg):
    if err is not None:
        print("delivery failed:", err)
    else:
        delivered.append((msg.key().decode(), msg.partition(), msg.offset()))

cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Perth"]
for i in range(12):
    city = cities[i % len(cities)]
    producer.produce(topic, key=city, value=f"hello #{i} from {city}", on_delivery=on_delivery)
    producer.poll(0)
producer.flush(10)
print(len(delivered), "records acknowledged by all in-sync replicas")
""", check=True)

nb.md("""
A consumer in a *consumer group* reads them back. Records are **not** removed when read: another
group could read the very same records again.
""")
nb.code("""
import time

consumer = Consumer({
    "bootstrap.servers": cluster.bootstrap_servers,
    "group.id": f"welcome-readers-{uuid.uuid4().hex[:6]}",
    "auto.offset.reset": "earliest",
})
consumer.subscribe([topic])
received = []
deadline = time.monotonic() + 30
try:
    while len(received) < len(delivered) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            print("consumer error:", msg.error())
            continue
        received.append({"partition": msg.partition(), "offset": msg.offset(),
                         "key": msg.key().decode(), "value": msg.value().decode()})
finally:
    consumer.close()

import pandas as pd
pd.DataFrame(received).sort_values(["partition", "offset"]).set_index(["partition", "offset"])
""")
nb.code("""
by_key = {}
for r in received:
    by_key.setdefault(r["key"], set()).add(r["partition"])
print("records read back:", len(received))
print("every key stayed in one partition:", all(len(parts) == 1 for parts in by_key.values()))
""", check=True)

nb.md("""
Look at the table: **offsets** count up from 0 *within each partition*, and records with the same
key always land in the same partition. Lesson 01 digs into partitions and offsets, lesson 02 into
how keys choose partitions.
""")

nb.md("""
## A live view of the cluster

`cluster.view()` draws a dashboard that keeps itself up to date while you work: each broker with
its state (and buttons to kill, pause, resume or restart it), a map of which broker leads and
which follows each partition, and the consumer groups with their lag. It refreshes in the
background, so the notebook stays free. Keep an eye on it in the next section.
""")
nb.code("""
view = cluster.view(topics=[topic])
view
""")

nb.md("""
## Break it: kill a partition leader

Now the interesting part. We kill the broker that leads partition 0 with `SIGKILL` — no
shutdown, no goodbye, like pulling its power cord. The controller notices the broker stopped
heart-beating, and elects a new leader **from the ISR**, so no acknowledged record is lost.
The live view above shows the broker go down and the leadership move.
""")
nb.code("""
before = cluster.describe_topic(topic)
victim = before[0].leader
print(f"partition 0 is led by broker {victim}; killing it")
cluster.kill_broker(victim)
after = cluster.wait_for_new_leader(topic, partition=0, old_leader=victim)
after
""")
nb.code("""
compare_partition_maps(
    {"before": (before, []), f"after killing broker {victim}": (after, [victim])},
    brokers=[b.id for b in cluster.brokers],
)
""")
nb.code("""
print("new leader of partition 0 came from the old ISR:", after[0].leader in before[0].isr)
print("the dead broker left the ISR:", victim not in after[0].isr)
print("records still readable (high watermark unchanged):",
      sum(p.high_watermark for p in after.partitions) == len(delivered))
""", check=True)

nb.md("""
The lines starting with `%3|` or `%6|` that may appear in red are the client library
(librdkafka) logging that it lost its connection to the dead broker. They are information,
not errors in your code.

The client follows the new leader by itself: it refreshes its metadata and sends to whoever
leads now. `acks="all"` still works with two of three brokers, because this cluster's
`min.insync.replicas` is 2.
""")
nb.code("""
before_count = len(delivered)
for i in range(6):
    producer.produce(topic, key=cities[i], value=f"written while broker {victim} is down",
                     on_delivery=on_delivery)
    producer.poll(0)
producer.flush(30)
print(len(delivered) - before_count, "more records acknowledged with one broker down")
""", check=True)

nb.md("""
## Bring the broker back

A restarted broker rejoins as a follower, copies what it missed from the leaders, and re-enters
the ISR. It does not get its leadership back straight away: that is *preferred leader election*,
in lesson 03.
""")
nb.code("""
cluster.start_broker(victim)
cluster.wait_for_isr(topic)
""")
nb.code("""
print(cluster.tool("kafka-topics", "--describe", "--topic", topic))
""")

nb.md("""
## Clean up

Close the clients first (so they don't complain about brokers going away), then
`cluster.stop()` stops the brokers and deletes their data. If you forget, the lab does it when
the kernel stops.
""")
nb.code("""
producer.flush(10)
del producer
cluster.stop()
""")
nb.md("""
**Next:** [01 · Topics, partitions, offsets](01_topics_partitions_offsets.ipynb) — what a
partition really is, down to the files on the broker's disk.
""")

