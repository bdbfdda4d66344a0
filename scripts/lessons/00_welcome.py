"""Source of notebooks/00_welcome.ipynb: build it with `python scripts/build_notebooks.py 00`."""

from labkit.authoring import Notebook

nb = Notebook("00 · Welcome to Kafka Lab",
              summary="Start a three-broker cluster, see what brokers advertise, write and read records, kill a leader "
                      "and watch failover.",
              minutes=20)

nb.md("""
# 00 · Welcome to Kafka Lab

In this first lesson you start a **real three-broker Apache Kafka cluster** on your own machine,
look around it, write and read a few records, and then break it on purpose — killing the broker
that leads a partition — to watch Kafka elect a new leader while your client carries on.

*About 20 minutes. Every cell is safe to re-run.*

Along the way the lesson asks you to **predict** what the cluster will do before it shows you:
pick an answer and lock it in, then run the next cells. Your guesses are kept on this machine,
and the lesson ends with how many you got right.
""")

nb.md("""
## Setup

The first cell checks that this machine has what the lab needs (Python, Java 17+, the Kafka jars).
If something is missing it tells you the one command that fixes it.
""")
nb.code("""
import uuid

import labkit
from labkit import predict
from labkit.viz import compare_partition_maps
from labkit.waiting import Wait

labkit.setup_check()
""")

nb.md("""
## Start a cluster

`labkit.start_cluster()` launches three Kafka 4 nodes as ordinary Java processes on free ports of
`127.0.0.1`, each with its own data directory. The cluster belongs to this notebook: nobody else
sees its topics, and it disappears when the notebook's kernel stops — even if the kernel crashes.
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                 # running this cell again starts afresh
cluster = labkit.start_cluster()   # profile "three-brokers"
run = uuid.uuid4().hex[:6]         # names unique to this run
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

A client is configured with `bootstrap.servers`: a list of broker addresses. Give it only the
address of broker 1, and let it send its first request (a *metadata* request):
""")
nb.code("""
q_discovery = predict.ask("00.discovery", "A client is given the address of broker 1 only. After its first "
                          "request, how many brokers does it know about?", choices=[1, 2, 3])
q_discovery
""")
nb.code("""
import logging

from confluent_kafka.admin import AdminClient

# the clients' own log lines go to the lab's log file (lab.log, beside your progress), not into the notebook
client_log = logging.getLogger("labkit.librdkafka")

one_broker = cluster.brokers[0].address
admin = AdminClient({"bootstrap.servers": one_broker, "logger": client_log})
metadata = admin.list_topics(timeout=10)
print("asked broker 1 only, and learned about brokers", sorted(metadata.brokers))
""", check=True)
nb.code("""
q_discovery.reveal(len(metadata.brokers), "Any broker answers a metadata request with the whole cluster: "
                   "every broker's id and address.",
                   expected=3)
""")
nb.md("""
So a client needs only **one** reachable broker to start: that broker's metadata tells it about
every other one. That is why the setting is called *bootstrap* servers (list two or three, in
case one is down when the client starts).

### Advertised listeners: the addresses clients really use

A broker has two address settings: `listeners`, the sockets it binds, and
`advertised.listeners`, the address it publishes for itself in metadata. Here is what broker 1
binds, what it advertises, and what the metadata said:
""")
nb.code("""
broker_1 = cluster.describe_configs("broker", str(cluster.brokers[0].id))
print("broker 1 listeners:           ", broker_1["listeners"])
print("broker 1 advertised.listeners:", broker_1["advertised.listeners"])
print("the metadata lists brokers at:", {i: f"{b.host}:{b.port}" for i, b in sorted(metadata.brokers.items())})
""", check=True)
nb.md("""
Now a consumer bootstraps from `localhost:<port of broker 1>` — the same broker under another
name — and reads all three partitions of a topic, so it must talk to every partition leader.
Its statistics (`statistics.interval.ms`) list the connections it holds, and where each address
came from (`learned` from metadata, or `configured` by you).
""")
nb.code("""
q_address = predict.ask("00.advertised", "The consumer is given localhost; broker 1 advertises 127.0.0.1. Which "
                        "host name do its connections to the partition leaders use?",
                        choices=["localhost", "127.0.0.1"])
q_address
""")
nb.code("""
import json

from confluent_kafka import Consumer, TopicPartition

probe_topic = cluster.create_topic(f"probe-{run}", partitions=3, replication_factor=3)
connections = {}

def on_stats(stats_json):
    for b in json.loads(stats_json)["brokers"].values():
        if b["nodeid"] >= 0:
            connections[b["nodeid"]] = {"connected to": b["nodename"], "source": b["source"], "state": b["state"]}

probe = Consumer({
    "bootstrap.servers": f"localhost:{cluster.brokers[0].port}",   # broker 1, under another name
    "group.id": f"probe-{uuid.uuid4().hex[:6]}",
    "enable.auto.commit": False,
    "statistics.interval.ms": 200,                                  # call on_stats every 200 ms
    "stats_cb": on_stats,
    "logger": client_log,
})
probe.assign([TopicPartition(probe_topic, p, 0) for p in range(3)])

def connected_to_every_broker():
    probe.poll(0.2)                                                 # serves the statistics callback
    return len(connections) == 3 and all(c["state"] == "UP" for c in connections.values())

try:
    Wait("a connection to every broker", timeout=60, interval=0).until(connected_to_every_broker)
finally:
    probe.close()
dict(sorted(connections.items()))
""")
nb.code("""
advertised = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
print("connections held:", sorted(c["connected to"] for c in connections.values()))
print("every connection goes to an advertised address:",
      {c["connected to"] for c in connections.values()} == advertised)
print("none to 'localhost':", not any(c["connected to"].startswith("localhost") for c in connections.values()))
""", check=True)
nb.code("""
used = {c["connected to"].rsplit(":", 1)[0] for c in connections.values()}
q_address.reveal("127.0.0.1" if used == {"127.0.0.1"} else "localhost" if used == {"localhost"} else str(used),
                 "The bootstrap address is only asked for metadata; every later connection goes where the "
                 "brokers advertise.",
                 expected="127.0.0.1")
""")
nb.md("""
After bootstrapping, a client connects to the **advertised** addresses only; the bootstrap
address has done its job. That is why `advertised.listeners` matters so much in Docker, Kubernetes or the cloud: if a
broker advertises an address the client cannot reach (a container's internal name, a private
IP), bootstrapping succeeds — and then every produce and fetch fails. Lesson 08 breaks it on
purpose and fixes it.
""")

nb.md("""
## A replicated topic

A **topic** is split into **partitions**; each partition is stored on `replication_factor`
brokers. One of those replicas is the partition's **leader** (it takes all reads and writes),
the others are **followers** that copy it. Replicas that are fully caught up form the
**in-sync replica set (ISR)**.
""")
nb.code("""
topic = cluster.create_topic(f"welcome-{run}", partitions=3, replication_factor=3)
delivered = []                     # (key, partition, offset) of every record the brokers acknowledged
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

producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "logger": client_log})

def on_delivery(err, msg):
    if err is not None:
        print("delivery failed:", err)
    else:
        delivered.append((msg.key().decode(), msg.partition(), msg.offset()))

cities = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Perth"]
acked_before = len(delivered)
for i in range(12):
    city = cities[i % len(cities)]
    producer.produce(topic, key=city, value=f"hello #{i} from {city}", on_delivery=on_delivery)
    producer.poll(0)
producer.flush(30)
print(len(delivered) - acked_before, "records acknowledged by all in-sync replicas")
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
    "logger": client_log,
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
shutdown, no goodbye, like pulling its power cord. Watch the live view above while it happens.
""")
nb.code("""
q_lost = predict.ask("00.lost-on-kill", f"{len(delivered)} records were acknowledged with acks=all. After the "
                     "leader of partition 0 is killed, how many of them can no longer be read?", tolerance=0)
q_lost
""")
nb.code("""
if all(b.alive for b in cluster.brokers):       # run again, the cell waits on the broker it killed: no second kill
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
      sum(p.high_watermark for p in after.partitions) == sum(p.high_watermark for p in before.partitions))
""", check=True)
nb.code("""
q_lost.reveal(sum(p.high_watermark for p in before.partitions) - sum(p.high_watermark for p in after.partitions),
              "acks=all means every in-sync replica had the record, and the new leader came from the ISR.")
""")

nb.md("""
The controller noticed that the broker stopped heart-beating and elected a new leader **from
the ISR**: a replica that had every acknowledged record. So nothing acknowledged was lost.

The producer noticed too: its library (librdkafka) logged that its connection to the dead
broker failed — into `client_log`, which writes to the lab's log file (`lab.log`), not under a
cell; without a `logger` those lines (`%3|...|FAIL|...`) appear in red under whatever cell runs. They are information, not
errors in your code.

The client follows the new leader by itself: it refreshes its metadata and sends to whoever
leads now. Can it still write with `acks="all"` while one of the three brokers is dead?
""")
nb.code("""
q_write = predict.ask("00.write-degraded", "One of three brokers is dead. Are new records still acknowledged "
                      "with acks=all?", kind="yes/no")
q_write
""")
nb.code("""
before_count = len(delivered)
for i in range(6):
    producer.produce(topic, key=cities[i], value=f"written while broker {victim} is down",
                     on_delivery=on_delivery)
    producer.poll(0)
producer.flush(30)
down = sum(not b.alive for b in cluster.brokers)
print(len(delivered) - before_count, f"more records acknowledged with {down} of {len(cluster.brokers)} brokers down")
""", check=True)
nb.code("""
min_isr = cluster.describe_configs("topic", topic)["min.insync.replicas"]
q_write.reveal(len(delivered) - before_count == 6,
               f"acks=all waits for the in-sync replicas that are left; this topic's min.insync.replicas is "
               f"{min_isr}, and {len(after[0].isr)} replicas are still in sync.")
""")

nb.md("""
## Bring the broker back

A restarted broker rejoins as a follower, copies what it missed from the leaders, and re-enters
the ISR. Its leadership comes back a little later: the controller checks every
`leader.imbalance.check.interval.seconds` (30 in the lab) whether partitions are led by their
*preferred* replica, and moves them back. Lesson 03 watches that happen.
""")
nb.code("""
if not next(b for b in cluster.brokers if b.id == victim).alive:   # run again: it is back already
    cluster.start_broker(victim)
cluster.wait_for_isr(topic)
""")
nb.code("""
print(cluster.tool("kafka-topics", "--describe", "--topic", topic))
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| one broker is enough to bootstrap: metadata lists them all | a client given broker 1 learned brokers 1, 2 and 3 |
| clients connect where brokers *advertise*, not where you pointed them | bootstrapped from `localhost`, connected to the advertised `127.0.0.1` addresses |
| a topic's partitions are replicated, leaders spread over the brokers | `describe_topic`: one leader per broker, ISR of three |
| a key always lands in the same partition | 12 records, 6 cities, each city in one partition |
| a killed leader is replaced from the ISR; nothing acknowledged is lost | `SIGKILL`, new leader from the old ISR, high watermark unchanged |
| writes go on with a broker down | six more records acknowledged with `acks="all"` |

## Clean up

Close the clients first (so they don't complain about brokers going away), then
`cluster.stop()` stops the brokers and deletes their data. If you forget, the lab does it when
the kernel stops.
""")
nb.code("""
predict.summary("00")
""")
nb.code("""
producer = None      # the client goes first, so it does not complain about brokers going away
cluster.stop()
""")
nb.md("""
**Next:** [01 · Topics, partitions, offsets](01_topics_partitions_offsets.ipynb) — what a
partition really is, down to the files on the broker's disk.
""")

