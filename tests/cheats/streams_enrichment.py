"""Cheats tried on streams_enrichment."""

from . import Cheat, replace_solution

LIVE_CHECKS = ["revenue_per_region_and_window", "late_and_too_late_orders", "customers_move_and_leave",
               "exact_after_a_crash"]

#: What the notebook's "Try it" cell shows as the answer, written whatever the input: a topology that reads
#: the orders (so it starts and describes itself) and writes the sample's revenue for every order.
HARD_CODED = '''
TOPOLOGY = """
KTable<String, String> regions = builder.table(customers);
builder.<String, String>stream(orders)
       .selectKey((id, order) -> Lab.field(order, "customer"))
       .join(regions, (order, region) -> order)
       .flatMap((customer, order) -> List.of(
           KeyValue.pair("north", Lab.object("region", "north", "window_start", Lab.field(order, "time").substring(0, 17) + "00Z", "revenue", 40.0)),
           KeyValue.pair("south", Lab.object("region", "south", "window_start", Lab.field(order, "time").substring(0, 17) + "00Z", "revenue", 20.0))))
       .to(revenue);
"""
'''

#: The right join and windows, but the results go out through a KafkaProducer of its own (bootstrap servers read
#: from the instance's properties file in its working directory), outside Kafka Streams' transactions; and a
#: do-nothing sink to the revenue topic, so the topology "writes" it.
PLAIN_PRODUCER = '''
TOPOLOGY = """
Properties own = new Properties();
try (java.io.Reader in = new java.io.FileReader("streams.properties")) { own.load(in); } catch (Exception e) { throw new RuntimeException(e); }
Properties config = new Properties();
config.put("bootstrap.servers", own.getProperty("bootstrap.servers"));
config.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
config.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
org.apache.kafka.clients.producer.KafkaProducer<String, String> out = new org.apache.kafka.clients.producer.KafkaProducer<>(config);
KTable<String, String> regions = builder.table(customers);
KStream<String, String> totals = builder.stream(orders, Consumed.with(Serdes.String(), Serdes.String())
                                                    .withTimestampExtractor(Lab.eventTime("time")))
       .selectKey((orderId, order) -> Lab.field(order, "customer"))
       .join(regions, (order, region) -> Lab.object("region", region, "amount", Lab.number(order, "amount")))
       .groupBy((customer, sale) -> Lab.field(sale, "region"))
       .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
       .aggregate(() -> 0.0, (region, sale, total) -> total + Lab.number(sale, "amount"),
                  Materialized.with(Serdes.String(), Serdes.Double()))
       .toStream()
       .map((window, total) -> KeyValue.pair(window.key(), Lab.object(
               "region", window.key(), "window_start", window.window().startTime(), "revenue", total)));
totals.foreach((region, json) -> out.send(new org.apache.kafka.clients.producer.ProducerRecord<>(revenue, region, json)));
totals.filter((region, json) -> false).to(revenue);
"""
'''

NO_GRACE = '''
TOPOLOGY = """
KTable<String, String> regions = builder.table(customers);
builder.stream(orders, Consumed.with(Serdes.String(), Serdes.String())
                               .withTimestampExtractor(Lab.eventTime("time")))
       .selectKey((orderId, order) -> Lab.field(order, "customer"))
       .join(regions, (order, region) -> Lab.object("region", region, "amount", Lab.number(order, "amount")))
       .groupBy((customer, sale) -> Lab.field(sale, "region"))
       .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)))
       .aggregate(() -> 0.0, (region, sale, total) -> total + Lab.number(sale, "amount"),
                  Materialized.with(Serdes.String(), Serdes.Double()))
       .toStream()
       .map((window, total) -> KeyValue.pair(window.key(), Lab.object(
               "region", window.key(), "window_start", window.window().startTime(), "revenue", total)))
       .to(revenue);
"""
'''

CHEATS = [
    Cheat("outputs_hard_coded_from_the_sample", lambda nb: replace_solution(nb, "TOPOLOGY = ", HARD_CODED),
          targets=LIVE_CHECKS,
          why="write the visible sample's answer (north 40, south 20) for every order, whatever the input"),
    Cheat("writes_through_a_plain_producer", lambda nb: replace_solution(nb, "TOPOLOGY = ", PLAIN_PRODUCER),
          targets=["exact_after_a_crash"],
          why="the right join and windows, but the results sent by a KafkaProducer of its own (outside Kafka "
              "Streams' transactions), with a sink to revenue that writes nothing"),
    Cheat("ignores_the_grace_period", lambda nb: replace_solution(nb, "TOPOLOGY = ", NO_GRACE),
          targets=["late_and_too_late_orders"],
          why="tumbling windows without grace (ofSizeWithNoGrace): every late order dropped"),
]
