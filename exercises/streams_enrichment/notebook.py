"""The exercise notebook streams_enrichment: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Revenue per region, enriched and windowed", exercise="streams_enrichment")

nb.md("""
# Exercise · Revenue per region, enriched and windowed

Orders arrive keyed by order id; each names its customer. A compacted topic maps each customer to
their region. Write the Kafka Streams topology that adds the region to every order and keeps, per
region, the **revenue of each minute**: 1-minute tumbling windows of the order's own time, with a
**grace of 30 seconds** for orders that arrive late.

The grader runs your topology on a real cluster with orders chosen at grade time: late ones and
too-late ones, customers who move to another region or are deleted, and an instance killed in the
middle of the stream and started again. Every region's revenue must come out exact.

*About 35 minutes. Goes with lesson 12.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import time
import uuid
from datetime import datetime, timezone

import pandas as pd

import labkit
from labkit.grading import exercise
from labkit.services import streams

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("streams_enrichment")
""")
nb.md("""
## The input

* `orders`, keyed by order id, JSON values; `time` is when the order was placed (UTC):

```json
{"order": "o-1f2e3d-7", "customer": "c042", "amount": 35, "time": "2025-01-01T12:03:07.250Z"}
```

* `customers`, a compacted topic keyed by customer id; the value is the region, as text (`north`).
  A customer who moves gets a new record; a deleted customer a **tombstone** (a null value).

An order counts for the region its customer is in when the order is processed; an order whose
customer is unknown or deleted counts nowhere.

## The output

`revenue`, keyed by region; every time a window's revenue changes, a JSON value with exactly these
fields (`window_start` in ISO-8601, UTC):

```json
{"region": "north", "window_start": "2025-01-01T12:03:00Z", "revenue": 140.0}
```

The last value of each (region, window) is what counts.
""")
nb.md("""
## Task 1 — `TOPOLOGY`

Java statements, as in lesson 12: `builder` is the `StreamsBuilder`, and `orders`, `customers`
and `revenue` are the topics' names (Java `String` variables). `Lab.field(json, "name")`,
`Lab.number(json, "name")`, `Lab.object("name", value, ...)` and `Lab.eventTime("time")` (a
timestamp extractor reading the `time` field) are there to help. You will need:

* the customers as a table (`builder.table`), the orders as a stream whose time is their `time`
  (`Consumed.with(Serdes.String(), Serdes.String()).withTimestampExtractor(...)`);
* the orders **re-keyed by customer** before the join (`selectKey`): a join only meets records with
  the same key in the same partition number;
* the region's revenue per window: `groupBy` the region, `windowedBy(TimeWindows.ofSizeAndGrace(...))`,
  `aggregate` the amounts (a `Double` per window: `Materialized.with(Serdes.String(), Serdes.Double())`);
* every update written to `revenue` as the JSON above (`toStream()`, then `map` to a new key and value).
""")
nb.code('''
### BEGIN SOLUTION
TOPOLOGY = """
KTable<String, String> regions = builder.table(customers);
builder.stream(orders, Consumed.with(Serdes.String(), Serdes.String())
                               .withTimestampExtractor(Lab.eventTime("time")))
       .selectKey((orderId, order) -> Lab.field(order, "customer"))
       .join(regions, (order, region) -> Lab.object("region", region, "amount", Lab.number(order, "amount")))
       .groupBy((customer, sale) -> Lab.field(sale, "region"))
       .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
       .aggregate(() -> 0.0, (region, sale, total) -> total + Lab.number(sale, "amount"),
                  Materialized.with(Serdes.String(), Serdes.Double()))
       .toStream()
       .map((window, total) -> KeyValue.pair(window.key(), Lab.object(
               "region", window.key(), "window_start", window.window().startTime(), "revenue", total)))
       .to(revenue);
"""
### END SOLUTION
''')
nb.md("""
## Task 2 — `SETTINGS`

The Kafka Streams settings your application runs with (a dict, as `streams.app(config=...)` takes
it). An instance may crash at any moment and be started again: choose the processing guarantee
that keeps every revenue exact then.
""")
nb.code('''
### BEGIN SOLUTION
SETTINGS = {"processing.guarantee": "exactly_once_v2"}
### END SOLUTION
''')
nb.md("""
## Try it

A few customers and orders, one round. The table must be loaded before the orders come: a join
looks the customer up when the order is processed. Then read the last revenue of each window.
""")
nb.code("""
run = uuid.uuid4().hex[:6]
orders_topic, customers_topic, revenue_topic = (cluster.create_topic(f"{name}-{run}", partitions=3)
                                                for name in ("orders", "customers", "revenue"))
now = int(time.time() * 1000)
minute = now - now % 60_000 - 5 * 60_000          # five minutes ago: recent enough for the topics' retention
producer = cluster.producer(partitioner="murmur2_random")   # Java's partitioner, as Kafka Streams uses
for customer, region in {"c1": "north", "c2": "south", "c3": "north"}.items():
    producer.produce(customers_topic, key=customer, value=region)
producer.flush(10)
app = streams.app(cluster, TOPOLOGY, name=f"try-{run}", config=SETTINGS,
                  params={"orders": orders_topic, "customers": customers_topic, "revenue": revenue_topic})
app.wait_caught_up()
for i, (customer, amount, second) in enumerate([("c1", 10, 5), ("c2", 20, 15), ("c3", 30, 40), ("c1", 40, 70)]):
    moment = datetime.fromtimestamp((minute + second * 1000) / 1000, tz=timezone.utc)
    producer.produce(orders_topic, key=f"o{i}", value=json.dumps(
        {"order": f"o{i}", "customer": customer, "amount": amount, "time": moment.isoformat().replace("+00:00", "Z")}))
producer.flush(10)
app.wait_caught_up()
updates = [json.loads(r.value) for r in cluster.read_all(revenue_topic, isolation_level="read_committed")]
yours = pd.DataFrame(updates).groupby(["region", "window_start"]).last() if updates else pd.DataFrame()
print("expected: north 40.0 and south 20.0 in the first minute, north 40.0 in the second")
yours
""", tags=("demo",))
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded("The hidden checks send late and too-late orders, move and delete customers, and kill your instance while orders keep coming.")
