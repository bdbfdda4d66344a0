"""Source of notebooks/13_cluster_operations.ipynb: build it with `python scripts/build_notebooks.py 13`."""

from labkit.authoring import Notebook

nb = Notebook("13 · Running a cluster over time",
              summary="An operator's year on one live cluster, with a producer and a consumer running through every "
                      "step: scale out and a throttled reassignment, drain and remove a broker, a rolling upgrade and "
                      "features finalized, the KRaft quorum grown and its leader killed, racks and follower fetching, "
                      "tiered storage, how many partitions.",
              minutes=45)

nb.md("""
# 13 · Running a cluster over time

A cluster outlives its first configuration: traffic grows and shrinks, machines are replaced,
Kafka releases come out. This lesson runs one cluster through an operator's year — add a broker,
move partitions onto it under a throttle, drain one and remove it, upgrade every broker to a new
release, change the controller quorum, use racks — while an `acks=all` producer and a consumer
keep running. At the end of every step we count what they lost: the answer should be nothing.

*About 45 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

The cluster starts on the **previous** Kafka release (the lab keeps two in its cache), with three
combined broker+controller nodes, one per rack, and a **dynamic** controller quorum (KIP-853), so
controllers can be added and removed later.
""")
nb.code("""
import re
import time
import uuid
from datetime import datetime

import pandas as pd
import plotly.express as px

import labkit
from labkit import operations as ops
from labkit import perf, predict
from labkit.clientstats import ClientStats
from labkit.producing import Traffic
from labkit.waiting import Wait

labkit.setup_check()
releases = ops.releases()
releases
""")
nb.code("""
cluster = labkit.start_cluster("operations", kafka_version=releases["previous"])
run = uuid.uuid4().hex[:6]
counted = {}          # what each step's producer and consumer saw
cluster
""")
nb.code("""
orders = cluster.create_topic(f"orders-{run}", partitions=6, replication_factor=3)
history = cluster.create_topic(f"history-{run}", partitions=3, replication_factor=2)
filled = perf.java_producer(cluster, history, 8_000, 1000, acks="1")      # ~8 MB of history to move later
print(f"{filled.records} records of 1 kB in {history}")
ops.placement(cluster)
""")
nb.code("""
print("three brokers, one per rack:", sorted(ops.racks(cluster).values()) == ["rack-a", "rack-b", "rack-c"])
print("every broker runs the previous release:", set(cluster.versions.values()) == {releases["previous"]})
start_quorum = ops.quorum(cluster, replication=False)
print("a dynamic quorum of three voters:", start_quorum.dynamic and len(start_quorum.voters) == 3)
""", check=True)

nb.md("""
## Scale out: a fourth broker

Traffic has grown. Start a producer (`acks=all`, 200 records/s) and a consumer, and keep them
running while broker 4 joins (rack-a, beside broker 1).
""")
nb.code("""
q_empty = predict.ask("13.new-broker", "Broker 4 joins a cluster whose topics have 9 partitions and 24 replicas. "
                      "How many replicas does it hold once it has registered?", tolerance=0)
q_empty
""")
nb.code("""
traffic = Traffic(cluster, orders).start()
if 4 not in cluster.broker_ids:
    cluster.add_broker()
joined = ops.placement(cluster)
joined
""")
nb.code("""
print("broker 4 registered:", 4 in cluster.live_broker_ids())
print("and holds no replica:", joined.loc[4, "replicas"] == 0)
""", check=True)
nb.code("""
q_empty.reveal(int(joined.loc[4, "replicas"]), "Kafka never moves data by itself: a new broker gets replicas of "
               "topics created from now on, and whatever a reassignment gives it.")
""")
nb.md("""
### A plan, and a throttle

Kafka's own tool proposes a plan (`kafka-reassign-partitions --generate`). Look at what it changes:
""")
nb.code("""
proposal = ops.generate_plan(cluster, [orders, history], brokers=[1, 2, 3, 4])
kafka_moves = proposal.changes(cluster)
now_first = {(p.topic, p.partition): p.replicas[0] for p in ops.partitions(cluster, [orders, history])}
print(f"Kafka's proposal adds {sum(len(g) for g in kafka_moves.gains)} replicas "
      f"({sum(len(g) for g in kafka_moves.gains if 4 not in g)} of them on the three old brokers) and changes the "
      f"preferred leader of {sum(now_first[(t, p)] != r[0] for (t, p), r in proposal.targets.items())} of "
      f"{len(proposal)} partitions")
kafka_moves
""")
nb.md("""
It computes a layout from scratch, so whatever differs from today moves — replicas, and the order
of replicas (the first one is the preferred leader). An operator usually writes a smaller plan:
move just enough replicas *onto the new broker*, each replacing a follower on the busiest broker,
and make the new broker the preferred leader of its share of partitions.
""")
nb.code("""
def onto(new_broker, parts):
    load = {b: 0 for b in {r for p in parts for r in p.replicas} | {new_broker}}
    for p in parts:
        for r in p.replicas:
            load[r] += 1
    target = sum(load.values()) // len(load)          # replicas per broker when even
    leaders = len(parts) // len(load)                 # partitions each broker should lead
    plan = {}
    for p in sorted(parts, key=lambda p: (p.topic, p.partition)):
        if load[new_broker] >= target or new_broker in p.replicas:
            continue
        busiest = max(p.replicas[1:] or p.replicas, key=lambda r: load[r])   # replace a follower
        replicas = [new_broker if r == busiest else r for r in p.replicas]
        if sum(r[0] == new_broker for r in plan.values()) < leaders:
            replicas.remove(new_broker)
            replicas.insert(0, new_broker)                                   # the new broker's turn to lead
        plan[(p.topic, p.partition)] = tuple(replicas)
        load[busiest] -= 1
        load[new_broker] += 1
    return ops.Plan(plan)

scale_out = onto(4, ops.partitions(cluster, [orders, history]))
scale_out.changes(cluster)
""")
nb.md("""
Copying replicas competes with producers and consumers for disk and network, so the move runs under
a **replication throttle**: `--throttle` sets `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` on the brokers and marks the moving replicas as throttled.
""")
nb.code("""
throttle = 2_000_000                                   # bytes per second
sizes = ops.replica_bytes(cluster)
to_copy = sum(sizes.get((r[0] if r[0] != 4 else r[1], t, p), 0) for (t, p), r in scale_out.targets.items())
q_time = predict.ask("13.throttled-seconds", f"Broker 4 must copy {to_copy / 1e6:.1f} MB under a throttle of "
                     f"{throttle / 1e6:.0f} MB/s. How many seconds will the reassignment take?", within=0.5, unit="s")
q_time
""")
nb.code("""
timeline = []

def watch(frame):
    timeline.append({"seconds": time.monotonic() - move.started,
                     "MB on broker 4": sum(ops.replica_bytes(cluster).get((4, t, p), 0)
                                           for t, p in scale_out.targets) / 1e6})

move = ops.reassign(cluster, scale_out, throttle=throttle)
seen_throttles = ops.throttles(cluster)
move.wait(on_progress=watch)
landed = sum(ops.replica_bytes(cluster).get((4, t, p), 0) for t, p in scale_out.targets)
move.finish()
print(f"{landed / 1e6:.1f} MB landed on broker 4 in {move.seconds:.1f} s "
      f"({landed / 1e6 / move.seconds:.2f} MB/s; throttle {throttle / 1e6:.0f} MB/s)")
print("while it ran, broker 4 had:", seen_throttles["broker 4"])
px.line(pd.DataFrame(timeline), x="seconds", y="MB on broker 4", height=300,
        title="Bytes on the new replicas while the throttled reassignment runs")
""")
nb.code("""
print("the throttle was set on the brokers while replicas moved:",
      seen_throttles["broker 4"].get("follower.replication.throttled.rate") == str(throttle))
print("the copy was no faster than the throttle allows:", landed / move.seconds <= 1.5 * throttle)
print("and every throttle is gone afterwards:", not any(ops.throttles(cluster).values()))
""", check=True)
nb.code("""
q_time.reveal(round(move.seconds, 1), f"{to_copy / 1e6:.1f} MB at {throttle / 1e6:.0f} MB/s is at least "
              f"{to_copy / throttle:.1f} s; the follower fetches in rounds and the tools check progress every half "
              "second, so it takes a little longer — never less.")
""")
nb.md("""
### Leadership, rebalanced

Broker 4 now holds replicas and is the *preferred* leader of some partitions, but a reassignment
keeps the current leader while it is in the new list: broker 4 leads nothing yet. A **preferred
leader election** makes each partition's first replica its leader (the controller also does this by
itself every `leader.imbalance.check.interval.seconds`, 30 s in the lab).
""")
nb.code("""
elected = ops.elect_preferred(cluster, [orders, history])
after_scale_out = ops.placement(cluster, [orders, history])
counted["scale out"] = traffic.stop()
print(f"{elected} partitions changed leader")
after_scale_out
""")
nb.code("""
print("broker 4 holds replicas now:", after_scale_out.loc[4, "replicas"] > 0)
print("and leads its share of partitions:", after_scale_out.loc[4, "leaders"] > 0)
print("every partition is led by its preferred replica:",
      all(p.leader == p.replicas[0] for p in ops.partitions(cluster, [orders, history])))
print("no acknowledged record lost while it all happened:", counted["scale out"].lost == 0)
print("the consumer read every acknowledged record:", counted["scale out"].unread == 0)
""", check=True)
nb.code("""
counted["scale out"]
""")

nb.md("""
## Drain a broker, then remove it

The season is over; broker 4 goes. First move every replica it holds to the other brokers
(**drain**), then stop and unregister it. This time Kafka's own proposal is fine — spreading over
brokers 1–3 is the point.
""")
nb.code("""
traffic = Traffic(cluster, orders).start()
on_4 = {t for t, _ in ops.replicas_on(cluster, 4)}
drain = ops.generate_plan(cluster, sorted(on_4), brokers=[1, 2, 3]) if on_4 else ops.Plan()
if drain.targets:
    moving = ops.reassign(cluster, drain, throttle=10_000_000)
    moving.wait()
    moving.finish()
print("replicas left on broker 4:", ops.replicas_on(cluster, 4))
""")
nb.code("""
q_drained = predict.ask("13.drain-lost", "Broker 4 is drained and removed while records keep coming. How many "
                        "acknowledged records are lost?", tolerance=0)
q_drained
""")
nb.code("""
if 4 in cluster.broker_ids:
    cluster.remove_broker(4)
ops.elect_preferred(cluster, [orders, history])
counted["drain and remove"] = traffic.stop()
print("brokers now:", sorted(cluster.live_broker_ids()))
counted["drain and remove"]
""")
nb.code("""
print("broker 4 is gone from the cluster:", 4 not in cluster.live_broker_ids())
print("no partition is under-replicated:",
      all(set(p.isr) == set(p.replicas) for p in ops.partitions(cluster, internal=True)))
print("nothing acknowledged was lost:", counted["drain and remove"].lost == 0)
""", check=True)
nb.code("""
q_drained.reveal(counted["drain and remove"].lost, "Draining copies every replica before the broker goes: at no "
                 "moment was a partition short of its in-sync replicas.")
""")
nb.md("""
### …and what happens when you skip the drain

Kafka will unregister a broker that still holds replicas. Add broker 5, create a topic (new topics
do land on it), then remove it without draining. labkit refuses at first and says why:
""")
nb.code("""
if not any(b.id >= 5 for b in cluster.brokers):
    cluster.add_broker()
extra = max(cluster.broker_ids)
audit = cluster.create_topic(f"audit-{run}", partitions=4, replication_factor=3)
try:
    cluster.remove_broker(extra)
except labkit.LabkitError as refused:
    print(refused)
""")
nb.code("""
q_skip = predict.ask("13.skip-drain", f"Remove broker {extra} anyway (force=True). What becomes of the partitions "
                     "it held: moved to other brokers by Kafka, left under-replicated, or offline?",
                     choices=["moved by Kafka", "under-replicated", "offline"])
q_skip
""")
nb.code("""
held = ops.replicas_on(cluster, extra)
cluster.remove_broker(extra, force=True)
stuck = [p for p in ops.partitions(cluster, [audit]) if set(p.isr) != set(p.replicas)]
print(f"broker {extra} held {len(held)} replicas; after removing it:")
print(cluster.tool("kafka-topics", "--describe", "--under-replicated-partitions", "--topic", audit))
""")
nb.code("""
print("the removed broker is still named in replica lists:", all(extra in p.replicas for p in stuck) and bool(stuck))
print("those partitions stay under-replicated:", all(extra not in p.isr for p in stuck))
print("but every partition still has a leader:", all(p.leader is not None for p in ops.partitions(cluster, [audit])))
""", check=True)
nb.code("""
q_skip.reveal("under-replicated" if stuck and all(p.leader is not None for p in ops.partitions(cluster, [audit]))
              else "offline" if stuck else "moved by Kafka",
              f"The controller dropped broker {extra} from every ISR, but only a reassignment changes a replica list. "
              "With RF 3 and min.insync.replicas 2, acks=all writes still work — one more failure and they stop.",
              expected="under-replicated")
""")
nb.md("""
The repair is the drain that was skipped: a reassignment that replaces the missing broker. It works
even though that broker is gone — the new replicas copy from the leaders.
""")
nb.code("""
repair = ops.Plan({(p.topic, p.partition): tuple(next(b for b in (1, 2, 3) if b not in p.replicas) if r == extra else r
                                                 for r in p.replicas) for p in stuck})
if repair.targets:
    fixing = ops.reassign(cluster, repair)
    fixing.wait()
    fixing.finish()
print("under-replicated partitions now:",
      sum(set(p.isr) != set(p.replicas) for p in ops.partitions(cluster, internal=True)))
""")

nb.md("""
## A rolling upgrade

A new Kafka release is out. Upgrading is a **rolling restart** with new jars: one broker at a
time, stopped gracefully (it hands its leaderships away first), started on the new release with
the same data directory, and the next one only when every partition has its whole ISR again.
""")
nb.code("""
q_roll_lost = predict.ask("13.roll-lost", "Three brokers restart one after the other on a new release while "
                          "records keep coming (acks=all). How many acknowledged records are lost?", tolerance=0)
q_roll_lost
""")
nb.code("""
features_before = ops.features(cluster, version=releases["lab"])
traffic = Traffic(cluster, orders).start()
rolled = ops.rolling_restart(cluster, version=releases["lab"])
counted["rolling upgrade"] = traffic.stop()
rolled
""")
nb.code("""
counted["rolling upgrade"]
""")
nb.code("""
print("every broker runs the lab's release now:", set(cluster.versions.values()) == {releases["lab"]})
print("nothing acknowledged was lost:", counted["rolling upgrade"].lost == 0)
print("the producer saw leaders move:", counted["rolling upgrade"].leader_changes > 0)
""", check=True)
nb.code("""
q_roll_lost.reveal(counted["rolling upgrade"].lost, f"Each broker's controlled shutdown moved its leaderships to "
                   f"in-sync followers first; the producer saw {counted['rolling upgrade'].leader_changes} leader "
                   f"changes and sent {counted['rolling upgrade'].retries} records again (its retries), and stored "
                   f"{counted['rolling upgrade'].duplicates} twice — an idempotent producer would store none twice.")
""")
nb.md("""
### Finalizing: the one-way door

A cluster's **features** (`metadata.version`, `share.version`, ...) say which record formats and
protocols its brokers and controllers may use; `kafka-features describe` lists each one's level.
""")
nb.code("""
q_mv = predict.ask("13.metadata-version", "Every broker runs the new release. Has metadata.version moved to the "
                   "new release's level by itself?", kind="yes/no")
q_mv
""")
nb.code("""
features_rolled = ops.features(cluster, version=releases["lab"])
print("metadata.version after the roll:", features_rolled.loc["metadata.version", "finalized"],
      "- the new code supports up to", features_rolled.loc["metadata.version", "supported max"])
q_mv.reveal(features_rolled.loc["metadata.version", "finalized"] != features_before.loc["metadata.version", "finalized"],
            "The brokers run the new code but the cluster still speaks the old release: features move only when an "
            "operator finalizes them (kafka-features upgrade). Until then the old jars could still run this cluster.")
""")
nb.code("""
release = releases["lab"].rsplit(".", 1)[0]          # "4.3": the release's feature levels
finalized = ops.finalize(cluster, release, version=releases["lab"])
pd.DataFrame({"before": features_before["finalized"], "after finalizing": finalized["finalized"]})
""")
nb.code("""
back = cluster.tool("kafka-features", "downgrade", "--release-version", releases["previous"].rsplit(".", 1)[0],
                    check=False, version=releases["lab"])
print(back.stdout.strip().splitlines()[-2] if back.stdout.strip() else back.stderr.strip())
""")
nb.code("""
print("metadata.version moved to the new release:", finalized.loc["metadata.version", "finalized"].startswith(release))
print("and the way back is refused:", back.returncode != 0 and "downgrade" in back.stdout)
""", check=True)
nb.md("""
Why a one-way door: a higher `metadata.version` lets the controllers write records the old code
cannot read. Kafka refuses to downgrade it ("it might delete metadata information") — after
finalizing, the old jars cannot run this cluster any more. Finalize once the new release has run
well for a while.
""")

nb.md("""
## The KRaft controller quorum

The cluster's metadata lives in a Raft log replicated by the **voters**; one of them, the
**leader**, is the active controller. Others may follow as **observers** (every broker does).
""")
nb.code("""
before_quorum = ops.quorum(cluster)
print(f"leader: node {before_quorum.leader} (epoch {before_quorum.epoch}); voters {sorted(before_quorum.voters)}")
before_quorum.replication
""")
nb.md("""
A dynamic quorum (KIP-853, `kraft.version` 1) takes new voters while it runs. A new node with a
controller listener starts as an observer; `kafka-metadata-quorum add-controller` makes it a voter.
""")
nb.code("""
traffic = Traffic(cluster, orders).start()
fresh = next((b.id for b in cluster.brokers if b.controller_port and b.id not in before_quorum.voters), None)
if fresh is None:
    fresh = cluster.add_broker(controller=True).id
observers = ops.quorum(cluster, replication=False).observers
cluster.add_controller(fresh)
grown = ops.quorum(cluster, replication=False)
print(f"node {fresh}: an observer first {observers}, now a voter: {sorted(grown.voters)}")
""")
nb.code("""
print("the new node joined as an observer:", fresh in observers)
print("and became a voter:", fresh in grown.voters and len(grown.voters) == 4)
""", check=True)
nb.md("""
Now kill the active controller (SIGKILL), with the producer and the consumer still running.
""")
nb.code("""
q_election = predict.ask("13.election-seconds", "The active controller is killed. How many seconds until another "
                         "voter is the leader?", within=0.5, unit="s")
q_election
""")
nb.code("""
victim = ops.quorum(cluster, replication=False).leader
killed_at = datetime.now()
cluster.kill_broker(victim)

def new_leader():
    leader = ops.quorum(cluster, replication=False).leader
    return leader if leader not in (-1, victim) else None

winner = Wait("a new active controller", timeout=60, interval=0.2).until(new_leader)
line = cluster.broker_log(winner, grep=r"Completed transition to Leader", lines=1)
stamp = re.match(r"\\[(\\d\\d:\\d\\d:\\d\\d,\\d+)\\]", line)[1]
won_at = datetime.combine(killed_at.date(), datetime.strptime(stamp, "%H:%M:%S,%f").time())
election_s = (won_at - killed_at).total_seconds()
print(f"killed node {victim}; node {winner} became leader {election_s:.2f} s later (its server.log: {stamp})")
print(cluster.broker_log(winner, file="controller", grep="Becoming the active controller", lines=1))
""")
nb.code("""
cluster.start_broker(victim)
cluster.remove_controller(fresh)
counted["quorum"] = traffic.stop()
print("voters again:", sorted(ops.quorum(cluster, replication=False).voters))
counted["quorum"]
""")
nb.code("""
print("another voter took over:", winner != victim and winner in grown.voters)
print("after a pre-vote (KIP-996) among the voters still alive:",
      bool(cluster.broker_log(winner, grep=r"Completed transition to ProspectiveState", lines=1)))
print("nothing acknowledged was lost:", counted["quorum"].lost == 0)
""", check=True)
nb.code("""
q_election.reveal(round(election_s, 1), "A killed controller says nothing: the others notice only when their "
                  "fetches go unanswered for controller.quorum.fetch.timeout.ms (2 s, here and by default), then a "
                  "pre-vote (KIP-996) and a vote among the voters still alive take a few hundred ms.")
""")
nb.md("""
### Eligible leader replicas (KIP-966)

What if a partition's ISR shrinks below `min.insync.replicas`? Kafka 4 keeps the replicas that
were in sync when that happened as **eligible leader replicas** (ELR): they have every committed
record, so they may lead again without an unclean election. `kafka-topics --describe` shows them.
Stop two of a partition's three replicas, one after the other:
""")
nb.code("""
from confluent_kafka.admin import NewTopic

elr = cluster.topic_name(f"elr-{run}")
if elr not in cluster.topics():
    spare = fresh                                       # an observer now: stopping it leaves the quorum alone
    for f in cluster.admin().create_topics([NewTopic(elr, 1, replica_assignment=[[1, 2, spare]],
                                                     config={"min.insync.replicas": "2"})]).values():
        f.result(timeout=30)
cluster.wait_for_isr(elr)
first, second = cluster.describe_topic(elr)[0].replicas[2], cluster.describe_topic(elr)[0].replicas[1]
cluster.stop_broker(first)
cluster.stop_broker(second)
shrunk = Wait("the ELR to show", timeout=30, interval=0.3).until(
    lambda: (lambda out: out if "Elr: " + str(second) in out else None)(
        cluster.tool("kafka-topics", "--describe", "--topic", elr).stdout))
print(shrunk)
""")
nb.code("""
print("the ISR shrank to the leader:", "Isr: 1\\t" in shrunk)
print(f"broker {second} is kept as an eligible leader replica:", f"Elr: {second}" in shrunk)
""", check=True)
nb.code("""
for b in (second, first):
    cluster.start_broker(b, wait=False)                 # both at once; the ISR says when they are back
cluster.wait_for_isr(elr, timeout=120)
""")

nb.md("""
## Racks and follower fetching

Each broker has a `broker.rack`; when a topic is created, Kafka puts each partition's replicas in
different racks, so losing a whole rack loses no partition.
""")
nb.code("""
rack_of = ops.racks(cluster)
spread = pd.DataFrame([{"partition": p.partition, "replicas": list(p.replicas),
                        "racks": sorted(rack_of[r] for r in p.replicas)} for p in ops.partitions(cluster, [orders])])
spread
""")
nb.code("""
print("every partition of", "orders has its replicas in three different racks:",
      all(len(set(r)) == 3 for r in spread.racks))
""", check=True)
nb.md("""
Consumers fetch from partition leaders. This profile also sets `replica.selector.class` to Kafka's
`RackAwareReplicaSelector` on the brokers, and a consumer can say where it runs with `client.rack`
(KIP-392).
""")
nb.code("""
cluster.wait_for_isr(history)                      # both replicas back in sync after the restarts above,
ops.elect_preferred(cluster, [history])            # led by the preferred one (no leader move while we read),
marker = cluster.producer(acks="all")              # and a record both have: a leader learns where a follower is
marker.produce(history, value=b"rack marker", partition=0)   # only from that follower's fetches
marker.flush(30)
leader0 = cluster.describe_topic(history)[0].leader
follower0 = next(r for r in cluster.describe_topic(history)[0].replicas if r != leader0)
q_rack = predict.ask("13.follower-fetch", f"A consumer with client.rack={rack_of[follower0]} reads partition 0 of "
                     f"{history}: led by broker {leader0} ({rack_of[leader0]}), with a follower, broker {follower0}, "
                     f"in {rack_of[follower0]}. Which broker serves most of its bytes?",
                     choices=["the leader", "the follower"])
q_rack
""")
nb.code("""
from confluent_kafka import TopicPartition

def bytes_out():
    found = cluster.metrics(match="brokertopicmetrics_bytesout_total")
    found = found[found.labels == f"topic={history}"]
    return {int(b): v for b, v in zip(found.broker, found.value)}

stats = ClientStats()
before = bytes_out()
reader = cluster.consumer(f"rack-reader-{run}", client_rack=rack_of[follower0], **stats.config(interval_ms=200))
reader.assign([TopicPartition(history, 0, 0)])
end = cluster.describe_topic(history)[0].high_watermark
read = 0
while read < end:
    msg = reader.poll(1.0)
    if msg is not None and not msg.error():
        read += 1
reader.poll(0.5)
fetched_from = stats.latest["topics"][history]["partitions"]["0"]["broker"]
reader.close()
after = bytes_out()
served = {b: after.get(b, 0) - before.get(b, 0) for b in sorted(set(before) | set(after))}
print(f"read {read} records; the client fetched from broker {fetched_from}; MB served per broker:",
      {b: round(v / 1e6, 2) for b, v in served.items()})
""")
nb.code("""
print("the client fetched from the follower in its rack:", fetched_from == follower0)
print("that follower served the bytes, the leader almost none:", served.get(follower0, 0) > 10 * served.get(leader0, 0))
""", check=True)
nb.code("""
q_rack.reveal("the follower" if fetched_from == follower0 else "the leader",
              "The first fetch goes to the leader, which answers with a preferred read replica in the client's rack; "
              "from then on the follower serves it (up to its high watermark): no bytes cross racks — or availability "
              "zones, which cloud providers charge for.",
              expected="the follower")
""")

nb.md("""
## Tiered storage

Tiered storage (KIP-405) keeps recent segments on the brokers' disks and copies closed segments
to a remote store (object storage in production). Kafka ships
a `LocalTieredStorage` for trying it — a "remote" tier in a local directory — in its test jar.
The lab runs it on its own small cluster, on the release whose test jar is published
(`releases["tiered storage"]`).
""")
nb.code("""
tiered = labkit.start_cluster("tiered-storage")
logs = tiered.create_topic(f"clickstream-{run}", partitions=1, config={
    "remote.storage.enable": "true",        # this topic is tiered
    "local.retention.ms": 2000,             # keep only 2 s of closed segments on the broker's disk
    "retention.ms": -1,                     # and everything in the remote tier
    "segment.bytes": 1_048_576, "file.delete.delay.ms": 1000})
perf.java_producer(tiered, logs, 4000, 1000, acks="1")
local = tiered.log_dir(1) / f"{logs}-0"
remote = tiered.data_dir / "remote-tier" / "kafka-tiered-storage"
q_tier = predict.ask("13.tiered-read", "The local copies of the old segments are deleted after 2 s. Can a consumer "
                     "still read offset 0?", kind="yes/no")
q_tier
""")
nb.code("""
offloaded = Wait("closed segments copied, then deleted locally", timeout=120, interval=0.5).until(
    lambda: len(list(local.glob("*.log"))) == 1 and len(list(remote.glob("*/*.log"))) >= 3)
earliest = tiered.tool("kafka-get-offsets", "--topic", logs, "--time", "-2").stdout.strip()
earliest_local = tiered.tool("kafka-get-offsets", "--topic", logs, "--time", "-4").stdout.strip()
print("on the broker's disk:", sorted(f.name for f in local.glob("*.log")))
print("in the remote tier:  ", len(list(remote.glob("*/*.log"))), "segments")
print(f"earliest offset {earliest}   earliest local offset {earliest_local}")
""")
nb.code("""
reader = tiered.consumer(f"history-reader-{run}")
reader.assign([TopicPartition(logs, 0, 0)])
first_record = Wait("offset 0", timeout=30, interval=0).until(
    lambda: (lambda m: m if m is not None and not m.error() else None)(reader.poll(1.0)))
reader.close()


def remote_fetched():
    fetched = tiered.metrics(match="remotefetchbytes_total")
    return fetched[fetched.labels == f"topic={logs}"].value.sum()


# the broker counts a remote read when its reader thread has finished it, a moment after the record is served
remote_bytes = Wait("the broker's count of bytes read from the remote tier", timeout=30, interval=0.5).until(
    remote_fetched)
print(f"offset {first_record.offset()} read back; the broker fetched {remote_bytes / 1e6:.1f} MB from the remote tier")
""")
nb.code("""
print("only the active segment stays local:", len(list(local.glob("*.log"))) == 1)
print("offset 0 is still readable:", first_record.offset() == 0)
print("it came from the remote tier:", remote_bytes > 0)
""", check=True)
nb.code("""
q_tier.reveal(first_record.offset() == 0, "Total retention (retention.ms) decides what exists; local retention "
              "(local.retention.ms) only what stays on the broker's disk. Reads below the earliest local offset "
              "go to the remote tier.")
""")
nb.code("""
try:
    tiered.create_topic(f"profiles-{run}", partitions=1, config={"cleanup.policy": "compact",
                                                                 "remote.storage.enable": "true"})
except labkit.LabkitError as refused:
    print(refused)
tiered.stop()
""")
nb.md("""
A compacted topic cannot be tiered: compaction rewrites old segments, and the remote tier holds
segments that never change.
""")

nb.md("""
## How many partitions?

A partition is the unit of parallelism: a topic's throughput is about what one partition takes
times the partition count. Measure one partition here:
""")
nb.code("""
one = cluster.create_topic(f"one-partition-{run}", partitions=1, replication_factor=3)
single = perf.python_producer(cluster, one, 10_000, 500, acks="all")
target = 50_000                                                   # records per second the team needs
needed = -(-target // int(single.records_per_s))
print(f"one partition took {single.records_per_s:,.0f} records/s of 500 bytes (acks=all, on this laptop); "
      f"{target:,} records/s need about {needed} partitions")
""")
nb.md("""
More partitions are not free. Each replica is a directory on every broker holding it, with its
segment file open (and its indexes mapped into memory), a row in every metadata response, and work
for a broker that restarts or a controller that fails over. Count the files:
""")
nb.code("""
from pathlib import Path

def open_segments(topic=None):
    \"\"\"Per broker, the segment files (.log) its process has open: all of them, or those of `topic`'s partitions
    (a partition's directory is named topic-N).\"\"\"
    def counted(pid):
        files = [Path(f"/proc/{pid}/fd/{fd.name}").resolve() for fd in Path(f"/proc/{pid}/fd").iterdir()]
        return sum(f.suffix == ".log" and (topic is None or f.parent.name.rsplit("-", 1)[0] == topic) for f in files)
    return {b.id: counted(b.pid) for b in cluster.brokers if b.pid}

files_before = open_segments()
t0 = time.monotonic()
many = cluster.create_topic(f"many-{run}", partitions=60, replication_factor=3, exist_ok=True)
created_s = time.monotonic() - t0
hosted = {b: sum(b in p.replicas for p in ops.partitions(cluster, [many])) for b in files_before}
# each broker creates its logs as it applies the new topic: wait until it has them all open (counted by topic:
# the other topics' files come and go meanwhile -- segments rolled, cleaned, deleted by retention)
new_files = Wait("every broker to open its new partitions' segments", timeout=120, interval=0.5).until(
    lambda: (lambda now: now if all(now[b] >= hosted[b] for b in hosted) else None)(open_segments(many)))
files_after = open_segments()
metadata = cluster.admin().list_topics(timeout=10)
cost = pd.DataFrame({"replicas of the new topic": hosted, "its open segment files": new_files,
                     "all open segment files before": files_before, "after": files_after})
print(f"60 partitions × 3 replicas created in {created_s:.1f} s; a metadata response now lists "
      f"{sum(len(t.partitions) for t in metadata.topics.values())} partitions")
cost
""")
nb.code("""
print("every broker holds one more open segment file per new replica:",
      all(new_files[b] == hosted[b] for b in hosted))
""", check=True)
nb.md("""
Rules of thumb that follow: size partitions for the throughput you need in a year or two (adding
partitions later remaps keys), and keep a broker's partition count in the low thousands: every one
costs open files, memory for indexes, and time when a broker restarts or a controller fails over.
""")

nb.md("""
## What the producer and the consumer saw
""")
nb.code("""
seen = pd.DataFrame([c.as_row(step) for step, c in counted.items()]).set_index("run")
seen
""")
nb.code("""
print("no step lost an acknowledged record:", (seen["lost (acked, not stored)"] == 0).all())
print("the consumer read every acknowledged record:", (seen["unread"] == 0).all())
""", check=True)
nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a new broker gets no replicas by itself | broker 4 registered with 0 replicas |
| a reassignment moves replicas; a throttle caps the copy rate | a minimal plan onto broker 4, MB landed vs the throttle, throttles removed after |
| a preferred election rebalances leadership | every partition led by its first replica |
| drain before removing; a removed broker with replicas leaves partitions under-replicated | broker 4 drained and removed; broker 5 removed undrained, repaired by a reassignment |
| a rolling upgrade loses nothing; features move only when finalized, and not back | 0 lost across three restarts, `metadata.version` before/after, the downgrade refused |
| a dynamic quorum grows and shrinks; a dead controller is replaced within seconds | add-controller / remove-controller, the election timed from the winner's log |
| eligible leader replicas (KIP-966) | `Elr:` in `kafka-topics --describe` |
| racks spread replicas; `client.rack` fetches from a follower in the same rack | replicas per rack, bytes served per broker |
| tiered storage: local vs total retention, old offsets read from the remote tier | segment files, earliest vs earliest-local offset, offset 0 read back |
| partitions from throughput; too many cost open files and metadata | one partition measured, open segment files before and after |

The graded exercise *drain_broker* asks you to write the drain plan yourself: move every replica
off a broker within a throttle, keeping replication factor and rack spread, and rebalance leaders.
""")
nb.code("""
predict.summary("13")
""")
nb.code("""
cluster.stop()
""")
