"""Source of notebooks/12_kafka_streams.ipynb: build it with `python scripts/build_notebooks.py 12`."""

from labkit.authoring import Notebook

nb = Notebook("12 · Kafka Streams",
              summary="Kafka-to-Kafka processing with the real Kafka Streams library: topologies written in Java in a "
                      "cell, KStream and KTable, state stores and their changelogs, windows with grace, joins and "
                      "co-partitioning, restores and standby replicas, exactly-once, the Streams rebalance protocol, "
                      "the application reset tool, and the latency of one record.",
              minutes=50)

nb.md("""
# 12 · Kafka Streams

Kafka Streams is the part of Kafka that reads topics, computes, and writes topics again. It is a
**library**, not a cluster: an application is a few ordinary JVM processes that share an
`application.id`; Kafka itself stores everything they must not lose. In this lesson you write
topologies in Kafka Streams' Java DSL, right in a cell; labkit compiles each with the JDK and runs
it as real JVM instances beside the cluster. Then we look at everything Kafka Streams does "under
the hood": the consumer group, the state stores and their changelog topics, the repartition
topics, the restores after a crash, and the topics an application leaves behind.

*About 50 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

One broker is enough: every Kafka Streams instance is one more JVM beside it (`make setup`
fetched Kafka Streams and RocksDB into the lab's cache).
""")
nb.code("""
import json
import statistics
import struct
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone

import pandas as pd
import psutil

import labkit
from labkit import generators, predict
from labkit.services import streams
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster("single-broker")
run = uuid.uuid4().hex[:6]
cluster
""")

nb.md("""
## A library, not a cluster

The input: lesson 07's page views (same seed, same shape), keyed by page, JSON values. One
change: their event times start ten minutes ago instead of on 1 January 2025. Kafka Streams gives
every record it writes the time of the record it came from, and a topic's retention (7 days)
would delete 2025's records the moment they arrived.
""")
nb.code("""
start = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=10)
events = generators.generate_page_views(seed=7, start=start)
views = cluster.create_topic(f"page-views-{run}", partitions=3, exist_ok=True)
if not cluster.describe_topic(views).partitions[0].high_watermark:
    generators.send(cluster, views, list(events))
print(events.events[0].value.decode())
""")
nb.md("""
A **topology** is a graph of processors from source topics to sink topics. The first one keeps
every view that is not of `/cart` and writes who viewed it. It is Java: `builder` is Kafka's
`StreamsBuilder`, and every entry of `params` becomes a Java variable (here, topic names).
`streams.app` compiles it and starts one instance: a JVM running Kafka's `KafkaStreams`.
""")
nb.code("""
viewers = cluster.create_topic(f"viewers-{run}", partitions=3, exist_ok=True)
no_carts = streams.app(cluster, '''
    builder.<String, String>stream(views)
           .filter((page, view) -> !page.equals("/cart"))
           .mapValues(view -> Lab.field(view, "user"))
           .to(viewers);
''', name=f"no-carts-{run}", params={"views": views, "viewers": viewers})
print(f"compiled in {no_carts.compiled.seconds:.1f} s (0: compiled before), RUNNING {no_carts.instances[0].ready_seconds:.1f} s "
      "after its JVM started")
no_carts.topology
""")
nb.md("""
`Lab.field` is one of a few helpers labkit puts on the topology's classpath (read a JSON field,
build a JSON object, take event time from a field); everything else is Kafka's DSL. A typo is
caught before anything starts, with your line and the compiler's message:
""")
nb.code("""
try:
    streams.app(cluster, '''
        builder.<String, String>stream(views)
               .filtr((page, view) -> !page.equals("/cart"))
               .to(viewers);
    ''', name=f"typo-{run}", params={"views": views, "viewers": viewers})
except streams.StreamsCompileError as error:
    print(error)
""")
nb.code("""
group_q = predict.ask("12.group", "The application has no server of its own. Where does Kafka keep how far it has "
                      "read each partition: in the instances' memory, in a group named after application.id, or "
                      "in a topic of the application's own (<application.id>-offsets)?",
                      choices=["in memory", "in a group", "in its own topic"])
group_q
""")
nb.code("""
no_carts.wait_caught_up()
groups = [g.group_id for g in cluster.admin().list_consumer_groups().result().valid]
not_carts = sum(1 for e in events if e.page != "/cart")
print("a consumer group named after application.id:", no_carts.name in groups)
print("the group committed every view:", int(no_carts.lag()["committed"].sum()) == len(events))
print("records written = views that are not /cart:", len(cluster.read_all(viewers)) == not_carts)
""", check=True)
nb.code("""
group_q.reveal("in a group",
               "Each instance's consumer joins the group application.id and commits offsets like any consumer.")
""")
nb.code("""
processed = no_carts.metrics("process-total")
print("records processed by the instance's stream thread (Kafka Streams' own metric):",
      int(processed[processed["group"] == "stream-thread-metrics"]["value"].sum()))
processed
""")
nb.md("""
The application is the `StreamsBuilder` code; the cluster stores its progress (the group's
offsets), its output, and, as we see next, its state. An instance can die and another pick up from
there: which is why Kafka Streams needs no cluster of its own.

## The duality of streams and tables

A compacted topic of customers, keyed by customer id. `c1` moves from `north` to `east`, `c2` is
deleted with a **tombstone** (a record whose value is null).
""")
nb.code("""
customers = cluster.create_topic(f"customers-{run}", partitions=3, config={"cleanup.policy": "compact"},
                                 exist_ok=True)
changes = [("c1", "north"), ("c2", "south"), ("c3", "west"), ("c1", "east"), ("c2", None)]
if not sum(p.high_watermark or 0 for p in cluster.describe_topic(customers).partitions):
    producer = cluster.producer()
    for key, value in changes:
        producer.produce(customers, key=key, value=value)
    producer.flush(10)
pd.DataFrame(changes, columns=["key", "value"])
""")
nb.md("""
Read it twice: as a **KStream** (every record is an event, copied to another topic as it comes)
and, from the same stream, as a **KTable** (`toTable`, the same as `builder.table`: the latest value
per key, kept in a state store). The same application also counts page views per page: a table
computed from a stream (`groupByKey().count()`).
""")
nb.code("""
table_rows = predict.ask("12.table-rows", "After those five records, how many rows does the table hold?",
                         choices=[2, 3, 5])
table_rows
""")
nb.code("""
stream_copy, page_counts = (cluster.create_topic(f"{name}-{run}", partitions=3, exist_ok=True)
                            for name in ("customer-events", "page-counts"))
tables = streams.app(cluster, '''
    KStream<String, String> changes = builder.stream(customers);
    changes.to(streamCopy);
    KTable<String, String> table = changes.toTable(Materialized.as("customers-table"));
    builder.<String, String>stream(views)
           .groupByKey()
           .count(Materialized.as("views-per-page"))
           .toStream()
           .mapValues(n -> Long.toString(n))
           .to(pageCounts);
''', name=f"tables-{run}", params={"customers": customers, "streamCopy": stream_copy, "views": views,
                                     "pageCounts": page_counts})
tables.wait_caught_up()
table = {row["key"]: row["value"] for row in tables.store("customers-table")}
table
""")
nb.code("""
print("the table: the latest value per key, the tombstoned key gone:", table == {"c1": "east", "c3": "west"})
print("the stream: every one of the five records:", len(cluster.read_all(stream_copy)) == len(changes))
""", check=True)
nb.code("""
table_rows.reveal(len(table), "A table keeps the latest value per key: c1's update replaced north, c2's tombstone "
                  "deleted it. The stream keeps all five: each is an event.",
                  expected=2)
""")
nb.md("""
That is the **duality**: a stream of changes builds a table (replay the changes), and a table is
a stream of its changes. A compacted topic is the stream form of a table that Kafka can keep
forever: compaction drops a key's older values, and its tombstone after a while.

## State stores and their changelog topics

`count()` keeps its counts in a **state store**, `views-per-page`: a RocksDB database in the
instance's state directory. Every update to it is also written to a compacted topic on the broker,
the store's **changelog**: `<application.id>-views-per-page-changelog`. Kafka Streams created it.
""")
nb.code("""
changelog_q = predict.ask("12.changelog", f"{len(events)} page views of 4 pages went through count(). How many "
                          "records does the count's changelog topic hold?", choices=[4, len(events), 2 * len(events)])
changelog_q
""")
nb.code("""
changelog = tables.changelogs()["views-per-page"]
records = cluster.read_all(changelog)
latest = {r.key.decode(): struct.unpack(">q", r.value)[0] for r in records}
store = {row["key"]: row["value"] for row in tables.store("views-per-page")}
print(tables.internal_topics())
print(pd.DataFrame({"last changelog value": latest, "store (interactive query)": store}))
""")
nb.code("""
print("one changelog record per update:", len(records) == len(events))
print("the last value per key is the store's count:", latest == store == dict(Counter(e.page for e in events)))
print("the changelog is compacted:", cluster.describe_configs("topic", changelog)["cleanup.policy"] == "compact")
""", check=True)
nb.code("""
changelog_q.reveal(len(records), f"Every update of the store goes to its changelog: {len(records)} updates of "
                   f"{len(latest)} keys. Compaction will keep the last value per key, which is all a restore needs.",
                   expected=predict.MEASURED)
""")
nb.md("""
Kafka's defaults would write fewer: a record cache (`statestore.cache.max.bytes`, 10 MB) absorbs
updates to the same key between commits (`commit.interval.ms`, 30 s). labkit sets them to 0 and
100 ms so that every update shows (see `streams.DEFAULTS`).
""")

nb.md("""
## Windows, and grace for late records

Kafka Streams windows by **event time**: the record's timestamp, or, with a timestamp extractor,
a field of the value (`Lab.eventTime("event_time")`). Four kinds on the page views:

* **tumbling** windows of 1 minute: each view in exactly one window;
* **hopping** windows of 1 minute that start every 30 seconds: windows overlap;
* **sliding** windows: one per distinct "the last minute before a record" that holds records;
* **session** windows per user: a session ends after 20 seconds without a view.

Windows do not wait forever for late records. **Stream time** is the newest event time the
application has seen (per partition); a window accepts records until stream time passes its end
plus the **grace** period (30 s here), then it is closed and a late record for it is dropped.
Lesson 07's watermark, by another name. Sessions are by user, so the same views go to a second
topic keyed by user.
""")
nb.code("""
too_late_q = predict.ask("12.too-late", "A view arrives whose 1-minute window ended more than 30 s (the grace) of "
                         "stream time ago. Is it counted?", kind="yes/no")
hop_q = predict.ask("12.hops", "With 1-minute windows advancing by 30 s, in how many windows is each view counted?",
                    choices=[1, 2, 3])
too_late_q
""")
nb.code("""
hop_q
""")
nb.code("""
by_user = cluster.create_topic(f"views-by-user-{run}", partitions=3, exist_ok=True)
if not sum(p.high_watermark or 0 for p in cluster.describe_topic(by_user).partitions):
    producer = cluster.producer()
    for e in events:
        producer.produce(by_user, key=e.user, value=e.value)
    producer.flush(10)
window_out = {kind: cluster.create_topic(f"{kind}-{run}", partitions=1, exist_ok=True)
              for kind in ("tumbling", "hopping", "sliding", "sessions")}
windows = streams.app(cluster, '''
    Consumed<String, String> byEventTime = Consumed.with(Serdes.String(), Serdes.String())
                                                   .withTimestampExtractor(Lab.eventTime("event_time"));
    KGroupedStream<String, String> byPage = builder.stream(views, byEventTime).groupByKey();
    byPage.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
          .count().toStream()
          .map((w, n) -> KeyValue.pair(w.key(), Lab.object("start", w.window().startTime(), "page", w.key(), "count", n)))
          .to(tumbling);
    byPage.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30))
                                 .advanceBy(Duration.ofSeconds(30)))
          .count().toStream()
          .map((w, n) -> KeyValue.pair(w.key(), Lab.object("start", w.window().startTime(), "page", w.key(), "count", n)))
          .to(hopping);
    byPage.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(1), Duration.ofMinutes(10)))
          .count().toStream()
          .map((w, n) -> KeyValue.pair(w.key(), Lab.object("start", w.window().startTime(), "end", w.window().endTime(),
                                                           "page", w.key(), "count", n)))
          .to(sliding);
    builder.stream(viewsByUser, byEventTime).groupByKey()
           .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(20), Duration.ofMinutes(10)))
           .count().toStream()
           .map((w, n) -> KeyValue.pair(w.key(), Lab.object("start", w.window().startTime(), "end", w.window().endTime(),
                                                            "user", w.key(), "count", n)))
           .to(sessions);
''', name=f"windows-{run}", params={"views": views, "viewsByUser": by_user, **window_out})
windows.wait_caught_up()

def latest(topic, *key):
    # each window's last update (a merged session's old window ends with a null count)
    last = {}
    for r in cluster.read_all(topic):
        doc = json.loads(r.value)
        last[tuple(doc[k] for k in key)] = doc["count"]
    return {k: n for k, n in last.items() if n is not None}

def at(start_text):
    return pd.Timestamp(start_text).to_pydatetime()

tumbling = {(at(s), p): n for (s, p), n in latest(window_out["tumbling"], "start", "page").items()}
hopping = {(at(s), p): n for (s, p), n in latest(window_out["hopping"], "start", "page").items()}
expected = events.expected_window_counts(closed_only=False)
kinds = events.by_kind()
pd.DataFrame({"events": kinds}).T[["on_time", "late", "too_late", "closing"]].assign(
    **{"counted in tumbling windows": sum(tumbling.values())})
""")
nb.code("""
print("tumbling: every window's count is the generator's exact answer:", tumbling == expected)
print("late views counted, too-late ones dropped:", sum(tumbling.values()) == len(events) - kinds["too_late"])
on_the_minute = {k: n for k, n in hopping.items() if k[0].second == 0}
print("hopping windows that start on the minute are the tumbling windows:", on_the_minute == tumbling)
print("no view counted in more than two hopping windows:", sum(hopping.values()) <= 2 * len(events))
""", check=True)
nb.code("""
too_late_q.reveal(sum(tumbling.values()) > len(events) - kinds["too_late"],
                  "Its window was closed: stream time had passed the window's end plus the grace. Kafka Streams drops "
                  "it and logs 'Skipping record for expired window'.")
""")
nb.code("""
one = next(e for e in events if e.kind == generators.ON_TIME)
holding = [s for (s, p) in hopping if p == one.page and s <= one.event_time < s + timedelta(minutes=1)]
hop_q.reveal(len(holding), f"A 1-minute window every 30 s: the view at {one.event_time:%H:%M:%S} is in the windows "
             f"starting {' and '.join(f'{s:%H:%M:%S}' for s in holding)}.",
             expected=2)
""")
nb.code("""
print(windows.instances[0].log(3, grep="Skipping record for expired window"))
""")
nb.md("""
Sliding and session windows have no fixed boundaries: their edges are records' times. With a grace
of 10 minutes nothing is dropped here, so both can be checked against the views themselves: the
largest sliding count of a page is the most views it had within one minute; a user's sessions are
their views split wherever a pause longer than the session window's inactivity gap (set in the
topology above) passes without one.
""")
nb.code("""
views_df = events.to_pandas()
sliding = latest(window_out["sliding"], "start", "end", "page")
most_in_a_minute = {}
for page, times in views_df.groupby("page")["event_time"]:
    t = times.sort_values().reset_index(drop=True)
    most_in_a_minute[page] = max(int(((t >= x - pd.Timedelta(minutes=1)) & (t <= x)).sum()) for x in t)
busiest = {p: max(n for (s, e, q), n in sliding.items() if q == p) for p in most_in_a_minute}
sessions = latest(window_out["sessions"], "start", "end", "user")
per_user = Counter(user for (s, e, user) in sessions)
gaps = {user: int((t.sort_values().diff() > pd.Timedelta(seconds=20)).sum()) + 1
        for user, t in views_df.groupby("user")["event_time"]}
pd.DataFrame({"sessions (Kafka Streams)": per_user, "sessions (20 s gaps in the views)": gaps}).head(6)
""")
nb.code("""
print("sliding: each page's busiest minute, as counted from the views:", busiest == most_in_a_minute)
print("sessions: every user's sessions, as split from the views:", dict(per_user) == gaps)
""", check=True)

nb.md("""
## Joins, and why both sides need the same keys and partitions

Orders are keyed by order id; each names its customer. To add the customer's region, the orders
must be **re-keyed** by customer (`selectKey`) and joined with the accounts table. A join runs in
one task per partition: an order can only meet the account that sits in the **same partition
number** of the other topic. After a `selectKey` the records are in the wrong partitions for the
new key, so Kafka Streams writes them to a **repartition topic** (partitioned by the new key) and
reads them back.

Orders are also joined with payments: a **stream–stream join** needs a window (a payment counts
within 1 minute of its order, by the records' timestamps).

One more condition hides in "the same partition number": the key must be hashed the same way on
both sides. Kafka Streams writes its repartition topics with Java's partitioner (murmur2), so
the accounts are produced with `partitioner=murmur2_random`, librdkafka's name for it; with
Python's default (CRC32, lesson 02) many customers would sit in a partition their orders never
reach.
""")
nb.code("""
accounts, orders, payments, enriched, paid = (
    cluster.create_topic(f"{name}-{run}", partitions=3, exist_ok=True)
    for name in ("accounts", "orders", "payments", "enriched", "paid"))
regions = {f"c{i}": ["north", "south", "east"][i % 3] for i in range(10)}
now_ms = int(time.time() * 1000)
if not sum(p.high_watermark or 0 for p in cluster.describe_topic(orders).partitions):
    producer = cluster.producer(partitioner="murmur2_random")
    for customer, region in regions.items():
        producer.produce(accounts, key=customer, value=region, timestamp=now_ms - 60_000)
    for i in range(30):
        order = json.dumps({"order": f"o{i}", "customer": f"c{i % 10}", "amount": 10 + i})
        producer.produce(orders, key=f"o{i}", value=order, timestamp=now_ms + i)
        late = 180_000 if i % 3 == 0 else 20_000          # every third order is paid 3 minutes later
        producer.produce(payments, key=f"o{i}", value=json.dumps({"order": f"o{i}"}), timestamp=now_ms + i + late)
    producer.flush(10)
""")
nb.code("""
repartition_q = predict.ask("12.repartition", "Does re-keying the orders by customer before the join create a topic "
                            "on the broker?", kind="yes/no")
paid_q = predict.ask("12.paid", "30 orders; 20 are paid 20 s after the order, 10 are paid 3 minutes after. How many "
                     "records does the 1-minute stream-stream join write?", choices=[0, 10, 20, 30])
repartition_q
""")
nb.code("""
paid_q
""")
nb.code("""
joins = streams.app(cluster, '''
    KTable<String, String> region = builder.table(accounts);
    KStream<String, String> order = builder.stream(orders);
    order.selectKey((id, o) -> Lab.field(o, "customer"))
         .join(region, (o, r) -> Lab.object("order", Lab.field(o, "order"), "customer", Lab.field(o, "customer"),
                                            "region", r))
         .to(enriched);
    order.join(builder.<String, String>stream(payments),
               (o, p) -> Lab.object("order", Lab.field(o, "order"), "paid", true),
               JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
         .to(paid);
''', name=f"joins-{run}", params={"accounts": accounts, "orders": orders, "payments": payments,
                                    "enriched": enriched, "paid": paid})
joins.wait_caught_up()
made = joins.internal_topics()
made
""")
nb.code("""
joined = [json.loads(r.value) for r in cluster.read_all(enriched)]
paid_orders = sorted(json.loads(r.value)["order"] for r in cluster.read_all(paid))
print("every order enriched with its customer's region:",
      len(joined) == 30 and all(regions[j["customer"]] == j["region"] for j in joined))
print("a repartition topic for the re-keyed orders:", any(t.endswith("-repartition") for t in made))
print("joined with a payment: the orders paid within the minute:",
      paid_orders == sorted(f"o{i}" for i in range(30) if i % 3))
""", check=True)
nb.code("""
repartition_q.reveal(any(t.endswith("-repartition") for t in made),
                     "selectKey changed the key, so the records had to move to the partition of their new key: "
                     "Kafka Streams wrote them to <application.id>-...-repartition and read them back.")
""")
nb.code("""
paid_q.reveal(len(paid_orders), "A stream-stream join matches records whose timestamps are within the window: 20 s "
              "apart, yes; 3 minutes apart, no.",
              expected=20)
""")
nb.md("""
The application as Kafka describes it, drawn: the repartition topic (orange) is written at the end
of one sub-topology and read at the start of the other; each state store (purple) sits under the
processors that use it, with its changelog topic. The stream-stream join keeps both sides of its
window in two window stores.
""")
nb.code("""
joins.figure()
""")
nb.md("""
### Two inputs with different partition counts

No repartition this time: orders keyed by customer, joined with an accounts table whose topic has
**2** partitions while the orders have **3**. Kafka Streams' classic rebalance protocol
(`group.protocol=classic`, still the default in Kafka 4.3) checks partition counts only for
topics that involve a repartition topic.
""")
nb.code("""
copart_q = predict.ask("12.copartitioned", "30 orders (3 partitions) join 10 accounts (2 partitions), every customer "
                       "known. With the classic protocol, how many orders find their account?",
                       choices=["all 30", "some of them", "it refuses"])
copart_q
""")
nb.code("""
accounts2 = cluster.create_topic(f"accounts-2p-{run}", partitions=2, exist_ok=True)
orders_by_customer, enriched2 = (cluster.create_topic(f"{name}-{run}", partitions=3, exist_ok=True)
                                 for name in ("orders-by-customer", "enriched-2p"))
if not sum(p.high_watermark or 0 for p in cluster.describe_topic(orders_by_customer).partitions):
    producer = cluster.producer(partitioner="murmur2_random")
    for customer, region in regions.items():
        producer.produce(accounts2, key=customer, value=region, timestamp=now_ms - 60_000)
    for i in range(30):
        producer.produce(orders_by_customer, key=f"c{i % 10}", value=f"o{i}", timestamp=now_ms + i)
    producer.flush(10)
JOIN = '''
    builder.<String, String>stream(orders)
           .join(builder.<String, String>table(accounts), (order, region) -> order + " " + region)
           .to(enriched);
'''
classic = streams.app(cluster, JOIN, name=f"copart-classic-{run}",
                      params={"orders": orders_by_customer, "accounts": accounts2, "enriched": enriched2})
classic.wait_caught_up()
found = len(cluster.read_all(enriched2))
print(f"{found} of 30 orders found their account; the tasks:", classic.instances[0].tasks())
""")
nb.code("""
copart_q.reveal("all 30" if found == 30 else ("it refuses" if found == 0 else "some of them"),
                "Task 2 reads orders partition 2 and has no accounts partition at all; tasks 0 and 1 find a "
                "customer only where its key landed in the same partition number in both topics.",
                expected=predict.MEASURED)
""")
nb.md("""
Nothing warned: the classic assignor logs *"Skipping the repartition topic validation since
there are no repartition topics"* and runs. The Kafka developers call that skip "not correct"
(apache/kafka#19189) and fixed it in the broker-side assignor of the **streams rebalance
protocol** (KIP-1071), which checks every group of co-partitioned topics. The same application
with `group.protocol=streams`:
""")
nb.code("""
try:
    streams.app(cluster, JOIN, name=f"copart-streams-{run}", config={"group.protocol": "streams"},
                params={"orders": orders_by_customer, "accounts": accounts2, "enriched": enriched2})
    refused = None
except streams.StreamsAppError as error:
    refused = error.reason
print(refused)
""")
nb.code("""
print("refused at start:", refused is not None and "do not have the same number of partitions" in refused)
""", check=True)
nb.md("""
The streams group's state says the same (`NOT_READY` while a topic is missing or partitioned
wrongly). The fix: give co-partitioned topics the same partition count, write them with the same
partitioner, or let Kafka Streams re-partition one side (`repartition()`, or the `selectKey` above).

## Restarts: state comes back from the changelog

An instance that dies loses nothing: its state is in the changelog. A new instance (say, on a new
machine: an empty state directory) **restores** the store by reading the changelog from the start.
The more state, the longer that takes (`benchmarks/streams.py` measures the MB per second). A count
of clicks per user, with many users:
""")
nb.code("""
clicks = cluster.create_topic(f"clicks-{run}", partitions=3, exist_ok=True)

def add_users(first, count):
    producer = cluster.producer(linger_ms=20)
    for i in range(first, first + count):
        while True:
            try:
                producer.produce(clicks, key=f"user-{i:07d}", value="click")
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)

per_user = streams.app(cluster, '''
    builder.<String, String>stream(clicks).groupByKey().count(Materialized.as("clicks-per-user"));
''', name=f"per-user-{run}", params={"clicks": clicks}, config={"num.standby.replicas": 1})
""")
nb.code("""
restore_q = predict.ask("12.restore", "The count has seen 40,000 users. An instance starts with an empty state "
                        "directory. How many records does it read back from the changelog?", tolerance=0)
restore_q
""")
nb.code("""
instance = per_user.instances[0]
if not sum(p.high_watermark or 0 for p in cluster.describe_topic(clicks).partitions):
    add_users(0, 40_000)
per_user.wait_caught_up()
changelog = per_user.changelogs()["clicks-per-user"]
size = sum(p.high_watermark for p in cluster.describe_topic(changelog).partitions)
instance.kill()
instance.start(wipe_state=True)
report = instance.restores()
print(f"changelog: {size} records; restored {int(report['records'].sum())}, the slowest partition in "
      f"{report['ms'].max():.0f} ms; the instance was RUNNING {instance.ready_seconds:.1f} s after its JVM started")
report
""")
nb.code("""
print("the restart read the whole changelog back:", int(report["records"].sum()) == size)
print("one record per user:", size == 40_000)
""", check=True)
nb.code("""
restore_q.reveal(int(report["records"].sum()), "One changelog record per key (the count of each user), all read back before the "
                 "instance runs again: the more state, the longer it is down (benchmarks/streams.py measures the MB "
                 "per second; on a busy laptop single times jump around).")
""")
nb.md("""
### Standby replicas: a warm copy on another instance

The count was started with `num.standby.replicas=1`: every task's state is also kept by another
instance, which follows the changelog all the time. With one instance there was nowhere to keep
it; a second instance gets the copies. Then the first one, running every task, is killed.
""")
nb.code("""
standby_q = predict.ask("12.standby", "When the other instance takes those tasks over, how many records does it "
                        "restore before it runs them: none (its copy is warm) or the whole changelog?",
                        choices=["none", "all of it"])
standby_q
""")
nb.code("""
victim = per_user.instances[0]
survivor = per_user.add_instance()
changelog_size = sum(p.high_watermark for p in cluster.describe_topic(per_user.changelogs()["clicks-per-user"]).partitions)
Wait("the new instance's standby copies to catch up", timeout=120).until(
    lambda: survivor.tasks()["standby"] == ["0_0", "0_1", "0_2"]
    and int(survivor.standby_updates()["records"].sum()) >= changelog_size)
copied = int(survivor.standby_updates()["records"].sum())
moving = victim.tasks()["active"]
killed_at = time.monotonic()
victim.kill()
Wait("the survivor to run every task", timeout=90, interval=0.1).until(lambda: len(survivor.tasks()["active"]) == 3)
takeover = time.monotonic() - killed_at
moved = survivor.restores()
print(f"tasks {moving} moved {takeover:.1f} s after the kill; the survivor's standby tasks had copied {copied} "
      "changelog records as they were written")
moved
""")
nb.code("""
print("the survivor restored next to nothing:", int(moved["records"].sum()) < 1000)
""", check=True)
nb.code("""
standby_q.reveal("none" if int(moved["records"].sum()) < 1000 else "all of it",
                 "Its standby tasks had applied every changelog record already; only what was written after their "
                 "last update is left to read.",
                 expected=predict.MEASURED)
""")
nb.md("""
The takeover took about the **session timeout** (6 s here, `consumer.session.timeout.ms`; 45 s by
Kafka's default): the group only moves a killed instance's tasks once it stops hearing from it. A
clean `stop()` leaves the group at once.

## Exactly once

A stream of payments is booked to a ledger (a `mapValues`). The instance is killed in the middle
of the stream and restarted. Not at a random moment: it is frozen first (`pause()`, SIGSTOP, as a
long GC pause would) until the group drops it (its session timeout: by then the coordinator has
handled everything it sent, a commit on its way included), then its ledger is compared with its
commits, then it is killed. Until a kill finds ledger records whose payments are not committed, the
restarted instance is frozen and looked at again (a kill with nothing past the last commit costs
nothing). With `at_least_once`, what it processed after its last commit is processed again; with
`exactly_once_v2`, its output and its input offsets are committed in one Kafka transaction, and a
`read_committed` reader never sees an aborted one.
""")
nb.code("""
eos_q = predict.ask("12.eos", "6,000 payments, the instance killed after about a third. How many duplicates does a "
                    "read_committed reader find in the ledger with at_least_once, and with exactly_once_v2?",
                    choices=["none / none", "some / none", "some / some"])
eos_q
""")
nb.code("""
def crash_mid_stream(guarantee, count=6_000):
    tag = guarantee.split("_")[0]
    payments_in = cluster.create_topic(f"pay-{tag}-{run}-{time.time_ns() % 10**6}", partitions=3)
    ledger = cluster.create_topic(f"ledger-{tag}-{run}-{time.time_ns() % 10**6}", partitions=3)
    booking = streams.app(cluster, '''
        builder.<String, String>stream(payments).mapValues(p -> "booked " + p).to(ledger);
    ''', name=f"book-{tag}-{run}", params={"payments": payments_in, "ledger": ledger},
        config={"processing.guarantee": guarantee, "commit.interval.ms": 1000})

    def feed():            # idempotent: a retried send is not a second payment, so every duplicate is the app's
        producer = cluster.producer(linger_ms=5, enable_idempotence=True)
        for i in range(count):
            producer.produce(payments_in, key=f"account-{i % 50}", value=f"payment-{i:06d}")
            producer.poll(0)
            if i % 20 == 0:
                time.sleep(0.01)       # a steady stream over a few seconds, not one burst
        producer.flush(30)

    def booked():          # records in the ledger
        return sum(p.high_watermark or 0 for p in cluster.describe_topic(ledger).partitions)

    def uncommitted():     # ledger records whose payments the application has not committed yet
        return booked() - int(booking.lag()["committed"].sum())

    feeder = threading.Thread(target=feed)
    feeder.start()
    instance = booking.instances[0]
    for attempt in range(10):  # kill it while its ledger is ahead of its commits: frozen first, then looked at
        Wait("a third of the payments booked, the last ones not committed yet", timeout=120, interval=0.05).until(
            lambda: booked() > count // 3 and uncommitted() > 0)
        instance.pause()       # SIGSTOP: from here on it sends nothing
        Wait("the group to drop the frozen instance (its session timeout)", timeout=60, interval=0.2).until(
            lambda: not booking.members())
        at_risk = uncommitted()  # a commit sent just before the freeze has landed by now
        instance.kill()
        killed = time.monotonic()
        instance.start()
        if at_risk > 0:
            break              # else its last commit covered everything: that kill cost nothing; look again
    feeder.join()
    booking.wait_caught_up()

    def everything_visible():
        seen = Counter(r.value for r in cluster.read_all(ledger, isolation_level="read_committed"))
        return seen if len(seen) == count else None

    seen = Wait("every payment visible to a read_committed reader", timeout=120, interval=0.5).until(everything_visible)
    booking.stop()
    return {"guarantee": guarantee, "ledger offsets past the commits at the kill": at_risk,
            "booked (distinct)": len(seen), "records read": sum(seen.values()),
            "duplicates": sum(seen.values()) - len(seen), "all visible after the kill (s)": round(time.monotonic() - killed, 1)}

guarantees = pd.DataFrame([crash_mid_stream("at_least_once"), crash_mid_stream("exactly_once_v2")])
guarantees
""")
nb.code("""
alos, eos = guarantees.set_index("guarantee")["duplicates"]
print("every payment booked under both:", (guarantees["booked (distinct)"] == 6_000).all())
print("at_least_once booked some twice:", alos > 0, "| exactly_once_v2 none:", eos == 0)
""", check=True)
nb.code("""
eos_q.reveal(f"{'some' if alos else 'none'} / {'some' if eos else 'none'}",
             f"At least once: when it was killed, {guarantees['ledger offsets past the commits at the kill'][0]} ledger "
             "records were past its last commit (at most 1 s of work here); after the restart it processed everything "
             f"after that commit again: {alos} duplicates in the ledger. Exactly once: what it wrote after "
             "its last commit was in an open transaction, aborted when the instance died.",
             expected=predict.MEASURED)
""")
nb.md("""
Under exactly-once something more holds a `read_committed` reader of the ledger back after the
kill (the last column): the dead instance's transaction stays open, hiding everything written after
it, until the broker aborts it. A stateless application gets a new transactional id when it
restarts, so nothing fences the old one: it times out (`transaction.timeout.ms`, 10 s in Kafka
Streams, counted from the transaction's start, before the freeze). An application with state keeps
its id in its state directory and fences the old transaction at once.
""")

nb.md("""
## The Streams rebalance protocol (Kafka 4.x)

With `group.protocol=streams` (KIP-1071; production-ready since Kafka 4.2, on by default in new
4.2+ clusters), the broker, not the instances, computes the task assignment, and the group is a
**streams group**, with its own tool: `kafka-streams-groups`. Two instances of the page count:
""")
nb.code("""
broker_side = streams.app(cluster, '''
    builder.<String, String>stream(views).groupByKey().count(Materialized.as("per-page"));
''', name=f"broker-assigned-{run}", params={"views": views}, config={"group.protocol": "streams"}, instances=2)
broker_side.wait_caught_up()
print(broker_side.describe())
""")
nb.code("""
listed = str(cluster.tool("kafka-streams-groups", "--list"))
classic_listed = str(cluster.tool("kafka-consumer-groups", "--list"))
print("kafka-streams-groups lists it:", broker_side.name in listed.split())
print("kafka-consumer-groups does not:", broker_side.name not in classic_listed.split())
print("tasks shared between the two instances:",
      sorted(t for i in broker_side.instances for t in i.tasks()["active"]) == ["0_0", "0_1", "0_2"])
""", check=True)
nb.md("""
`ACTIVE: 0:[0,1]` means subtopology 0, partitions 0 and 1. Settings that belong to the group now
live on the broker: with the streams protocol, a client's `num.standby.replicas`,
`session.timeout.ms` and `heartbeat.interval.ms` are ignored; set them per group with
`kafka-configs --entity-type groups --add-config streams.num.standby.replicas=1`.

## What an application leaves behind, and the reset tool

Stopping an application stops its JVMs, nothing else: its internal topics and committed offsets
stay on the broker (they are what a restart needs). The topics this lesson's applications made:
""")
nb.code("""
for app in (no_carts, tables, windows, joins, classic, per_user):
    app.stop()
broker_side.stop()
left = sorted(t for t in cluster.topics(internal=True) if run in t and t.endswith(("-changelog", "-repartition")))
print(len(left), "internal topics")
left
""")
nb.md("""
To run an application again from the start, Kafka's **application reset tool**
(`kafka-streams-application-reset`) moves its input offsets back and deletes its internal topics;
the local state is the application's business (labkit wipes the instances' state directories).
Reset the page count and run it again:
""")
nb.code("""
print(tables.reset())
print("its internal topics are gone:", tables.internal_topics() == [])
tables.instances[0].start()
tables.wait_caught_up()
recount = {row["key"]: row["value"] for row in tables.store("views-per-page")}
""")
nb.code("""
print("after the reset it counted everything again, from zero:", recount == dict(Counter(e.page for e in events)))
print("and made its topics again:", len(tables.internal_topics()) == 2)
""", check=True)

nb.md("""
## A library and a framework

The same stateless job could run in Spark (lesson 07): read orders, keep those over 10, add the
customer's region from a static table, write them out. Spark is a **framework**: it plans the job
and runs it in micro-batches on executors it manages (or, in Spark 4.1's **Real-time Mode**, the
real-time trigger, in long-running tasks that pass records on as they arrive). Kafka Streams is a
**library** inside your own process, handling **one record at a time**. The race between the
three, with what each costs in processes, CPU and memory, is `benchmarks/streams.py`
(`make benchmarks`): a Spark session would double this lesson's running time. Here, Kafka Streams'
side: one order at a time, timed from `produce()` until a plain consumer reads the result.
""")
nb.code("""
latency_q = predict.ask("12.latency", "Kafka Streams handles each record as it arrives. With Kafka's own settings, "
                        "about how long from producing one order until its result can be read?",
                        choices=["1 ms", "10 ms", "100 ms", "1 s"])
latency_q
""")
nb.code("""
lat_in, lat_regions, lat_out = (cluster.create_topic(f"{name}-{run}", partitions=1, exist_ok=True)
                                for name in ("lat-orders", "lat-regions", "lat-big"))
if not cluster.describe_topic(lat_regions).partitions[0].high_watermark:
    producer = cluster.producer()
    for customer, region in regions.items():
        producer.produce(lat_regions, key=customer, value=region)
    producer.flush(10)

def probe(source, results, count=15):
    # one order at a time, timed until a plain consumer reads its result; orders are sent until one comes
    # back first (the job is warm and reading), and those are not counted
    reader = cluster.consumer(f"probe-{uuid.uuid4().hex[:6]}", auto_offset_reset="latest")
    reader.subscribe([results])
    Wait("the probe reader's assignment", timeout=30).until(lambda: reader.poll(0.1) or reader.assignment())
    producer, took = cluster.producer(linger_ms=0), []

    def one(i, wait):
        amount = str(1000 + i)            # the answer to this order, and not an earlier one, starts with it
        t0 = time.monotonic()
        producer.produce(source, key=f"c{i % 10}", value=amount)
        producer.flush(10)
        while time.monotonic() - t0 < wait:
            msg = reader.poll(0.002)
            if msg is not None and not msg.error() and msg.value().decode().split()[0] == amount:
                return (time.monotonic() - t0) * 1000
        return None

    warm_up = iter(range(10**6, 10**7))
    Wait("the job to answer", timeout=90, interval=0).until(lambda: one(next(warm_up), 3.0))
    for i in range(count):
        took.append(one(i, 30.0))
        time.sleep(0.05)
    reader.close()
    assert None not in took, "a probe got no answer"
    took = sorted(took)
    return {"p50 (ms)": round(statistics.median(took), 1), "p99 (ms)": round(took[int(0.99 * (len(took) - 1))], 1),
            "probes": len(took)}

ENRICH = '''
    GlobalKTable<String, String> region = builder.globalTable(regions);
    builder.<String, String>stream(orders)
           .filter((customer, amount) -> Double.parseDouble(amount) > 10)
           .join(region, (customer, amount) -> customer, (amount, r) -> amount + " " + r)
           .to(big);
'''
results = {}
for label, config in (("Kafka's settings (producer linger.ms 100)", {}),
                      ("producer.linger.ms 0", {"producer.linger.ms": 0})):
    job = streams.app(cluster, ENRICH, name=f"latency-{len(results)}-{run}", config=config,
                      params={"regions": lat_regions, "orders": lat_in, "big": lat_out})
    jvm = psutil.Process(job.instances[0].pid)
    results[label] = {**probe(lat_in, lat_out), "processes": 1, "threads": jvm.num_threads(),
                      "RSS (MB)": round(jvm.memory_info().rss / 1e6), "CPU s so far": round(sum(jvm.cpu_times()[:2]), 1)}
    job.stop()
latency = pd.DataFrame(results).T
latency
""")
nb.code("""
print("every probe answered, with both settings:", all(v["probes"] == 15 for v in results.values()))
""", check=True)
nb.code("""
default_p50 = results["Kafka's settings (producer linger.ms 100)"]["p50 (ms)"]
nearest = min([1, 10, 100, 1000], key=lambda ms: abs(ms - default_p50))
latency_q.reveal({1: "1 ms", 10: "10 ms", 100: "100 ms", 1000: "1 s"}[nearest],
                 f"Median {default_p50:.0f} ms: Kafka Streams gives its producer linger.ms=100 (the Java client's own "
                 "default is 5 ms), so each result waits up to 100 ms for others to share its batch. With 0, what is "
                 "left is one produce, one poll and one processing step.",
                 expected=predict.MEASURED)
""")
nb.md("""
That is the library's trade: the work happens per record, in a JVM you start, size and deploy
yourself (the table: one process, its threads, its memory); scaling out is starting another
instance, and the group hands it tasks. A framework plans the work for you and runs it where its
cluster manager says, in batches that cost latency (lesson 07) unless, like Real-time Mode, it
keeps tasks running; and it keeps its state in its own checkpoints, not in Kafka.
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| an application is JVMs sharing an `application.id`, which is its consumer group | the group's committed offsets, the output |
| a compacted topic read as a table keeps the latest value per key, a tombstone deletes; read as a stream, every record | the store queried, the stream copied |
| a stateful operation keeps a state store, each update written to its `-changelog` topic | the changelog read back, equal to the store |
| tumbling, hopping, sliding and session windows; grace drops too-late records | counts equal to the generator's exact answer and to the views themselves |
| re-keying before a join creates a `-repartition` topic; a windowed stream–stream join | the broker's topics, the joined orders |
| the classic protocol runs a join of a 3- and a 2-partition topic and misses records; the streams protocol refuses it | the missed orders, the error at start |
| a restart on an empty state directory restores the store from its changelog; a standby takes over warm | the restored records; the survivor's restore |
| `at_least_once` duplicates after a crash, `exactly_once_v2` does not | a `read_committed` reader counting duplicates |
| `group.protocol=streams`: the broker assigns tasks, `kafka-streams-groups` shows them | its `--describe` and `--list` |
| internal topics outlive the application; the reset tool removes them and rewinds the input | the topics before and after, the recount |
| a library works per record; its producer's `linger.ms` is most of the latency | one order at a time, timed |
""")
nb.code("""
predict.summary("12")
""")
nb.code("""
cluster.stop()          # stops every Kafka Streams instance first, then the broker
""")
