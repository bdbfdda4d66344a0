"""Source of notebooks/03_replication_and_failover.ipynb: build it with `python scripts/build_notebooks.py 03`."""

from labkit.authoring import Notebook

nb = Notebook("03 · Replication and failover",
              summary="Leaders, followers, ISR and the high watermark; kill and pause brokers and watch "
                      "elections, leadership coming back by itself, preferred elections by hand, ISR shrink and "
                      "catch-up, N−1 failures, and unclean elections losing acknowledged records.",
              minutes=35)

nb.md("""
# 03 · Replication and failover

Every partition is stored on several brokers: one **leader** takes the writes, **followers**
copy it. This lesson breaks brokers on purpose — kill, pause, restart — and counts what happens
to leadership, to the in-sync replica set, and to the records.

*About 35 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Followers that stop fetching leave the ISR after `replica.lag.time.max.ms`; this cluster uses
3 seconds instead of 30 so you don't wait.
""")
nb.code("""
import json
import os
import re
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import labkit
from labkit import operations, predict
from labkit.producing import counts_frame, produce_and_count
from labkit.viz import compare_partition_maps, partition_map
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                 # running this cell again starts afresh
cluster = labkit.start_cluster(replica_lag_time_max_ms=3000)
brokers = [b.id for b in cluster.brokers]
run = uuid.uuid4().hex[:6]

def alive(broker_id):
    return next(b for b in cluster.brokers if b.id == broker_id).alive

cluster
""")

nb.md("""
## Leaders, followers, the ISR and the high watermark

A topic with three partitions, each replicated three times (`replication.factor=3`). For each
partition the cluster reports the **replicas** (the first is the *preferred* leader), the
current **leader**, the **ISR** (in-sync replicas: caught up with the leader) and two offsets:
the log start and the **high watermark** — the offset up to which every in-sync replica has the
records. Consumers only ever see records below the high watermark.
""")
nb.code("""
payments = cluster.create_topic(f"payments-{run}", partitions=3, replication_factor=3)
first = produce_and_count(cluster, payments, count=300, acks="all")
state = cluster.describe_topic(payments)
state
""")
nb.code("""
partition_map(state, brokers)
""")
nb.code("""
print("every partition has 3 replicas, all in sync:", all(len(p.replicas) == 3 and set(p.isr) == set(p.replicas)
                                                    for p in state.partitions))
print("high watermarks add up to the records written:", sum(p.high_watermark for p in state.partitions) == 300)
""", check=True)
nb.md("""
The live view keeps this picture up to date while you break things below:
""")
nb.code("""
view = cluster.view(topics=[payments])
view
""")

nb.md("""
## Kill a leader while a producer is writing

Send 400 records with `acks=all`, and halfway through kill (SIGKILL) the broker leading
partition 0. Nobody tells the cluster: a broker proves it is alive by sending heartbeats to the
active KRaft controller, and the controller declares it dead — it *fences* it — once no heartbeat
came for `broker.session.timeout.ms`. This cluster's setting:
""")
nb.code("""
session_ms = int(cluster.describe_configs("broker", str(brokers[0]))["broker.session.timeout.ms"])
print(f"broker.session.timeout.ms = {session_ms} ms (Kafka's default: 9000)")
""")
nb.code("""
q_failover = predict.ask("03.failover-seconds", "The leader of partition 0 is killed (SIGKILL, no goodbye). "
                         "How many seconds until the partition has a new leader?", tolerance=1.5, unit="s")
q_failover
""")
nb.code("""
if all(b.alive for b in cluster.brokers):        # run again, the cell reports the kill it already made
    before = cluster.describe_topic(payments)
    victim = before[0].leader
    quorum = cluster.tool("kafka-metadata-quorum", "describe", "--status").stdout
    active_controller = int(re.search(r"LeaderId:\\s+(\\d+)", quorum)[1])
    timing = {}

    def kill_leader():
        timing["killed"] = time.time()
        cluster.kill_broker(victim)
        cluster.wait_for_new_leader(payments, 0, victim)   # the loop waits here; records already sent are retried
        timing["elected"] = time.time()

    failover = produce_and_count(cluster, payments, count=400, pace=0.005, acks="all", actions={200: kill_leader})
after = cluster.describe_topic(payments)
failover_s = timing["elected"] - timing["killed"]

def fenced_at(broker_id):      # when a controller logged fencing it: wall-clock seconds, or None
    for b in cluster.brokers:
        line = b.alive and cluster.broker_log(b.id, file="controller", lines=1,
                                              grep=f"Fencing broker {broker_id} at epoch")
        if line:
            clock = datetime.strptime(line[1:13], "%H:%M:%S,%f").time()
            return datetime.combine(datetime.fromtimestamp(timing["killed"]).date(), clock).timestamp()
    return None

fence = fenced_at(victim)
fenced_after = "??" if fence is None else f"{fence - timing['killed']:.1f}"
print(f"killed broker {victim} (the active controller too: {victim == active_controller}); "
      f"a controller fenced it {fenced_after} s later (broker.session.timeout.ms = {session_ms} ms); "
      f"partition 0 led by broker {after[0].leader} after {failover_s:.1f} s")
print(f"this machine's load average meanwhile: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
counts_frame({"acks=all, leader killed": failover})
""")
nb.code("""
print("the controller logged fencing the killed broker:", fence is not None)
print("it fenced it only after the kill, then elected the new leader:",
      fence is not None and timing["killed"] - 1 <= fence <= timing["elected"])
print("new leader came from the old ISR:", after[0].leader in before[0].isr)
print("no acknowledged record lost:", failover.lost == 0)
print("every record acknowledged in the end:", failover.acked == failover.sent)
""", check=True)
nb.code("""
q_failover.reveal(round(failover_s, 1), f"The controller acts only once the broker missed its heartbeats for "
                  f"broker.session.timeout.ms ({session_ms / 1000:.0f} s here, 9 s by default): it fenced it "
                  f"{fenced_after} s after the kill, then elected a leader from the ISR. When the "
                  "killed node was also the active controller, a new controller must be elected first; a busy "
                  "machine adds its delays too.")
""")
nb.code("""
compare_partition_maps({"before": (before, []), f"after killing broker {victim}": (after, [victim])}, brokers)
""")
nb.md("""
Nothing acknowledged was lost: `acks=all` acknowledges a record once every in-sync replica has
it, and the new leader comes from the ISR (lesson 00 showed the same). Look at the *duplicates*
column too. When the leader dies, requests it had already written (and
replicated) may never be acknowledged; the producer retries them against the new leader, which
stores them again. Nothing acknowledged was lost — but a record may be stored twice. Lesson 04
shows how the **idempotent producer** prevents exactly that.
""")

nb.md("""
### The killed broker comes back — and so does its leadership

Restarted, it rejoins as a follower of every partition, fetches what it missed, and re-enters
the ISR. It is still the *preferred* leader of partition 0 (first in the replica list).
""")
nb.code("""
q_back = predict.ask("03.leadership-back", f"Broker {victim} is back in the ISR. Without anyone asking, will it "
                     "lead partition 0 again within a minute?", kind="yes/no")
q_back
""")
nb.code("""
if not alive(victim):                            # run again: it is back already
    cluster.start_broker(victim)
back = cluster.wait_for_isr(payments)
in_sync_at = time.monotonic()
print("ISR complete again:", all(set(p.isr) == set(p.replicas) for p in back.partitions))
print("leaders now:", {p.partition: p.leader for p in back.partitions})
""")
nb.md("""
Now just watch partition 0 (or the live view above) for up to 75 seconds:
""")
nb.code("""
def led_by_victim():
    state = cluster.describe_topic(payments)
    return state if state[0].leader == victim else None

home = Wait(f"broker {victim} to lead partition 0 again", timeout=75, interval=0.25).until(led_by_victim)
rebalanced_at = time.monotonic()
print(f"broker {victim} leads partition 0 again {rebalanced_at - in_sync_at:.0f} s after rejoining the ISR "
      f"({time.time() - timing['killed']:.0f} s after the kill)")
""")
nb.code("""
print("the restarted broker got its leadership back by itself:", home[0].leader == victim)
print("every partition is led by its preferred replica again:", all(p.leader == p.replicas[0] for p in home.partitions))
""", check=True)
nb.code("""
check_s = cluster.describe_configs("broker", str(brokers[0]))["leader.imbalance.check.interval.seconds"]
q_back.reveal(home[0].leader == victim, "auto.leader.rebalance.enable (on by default): the controller's periodic "
              "check moves leadership back to each preferred replica that is in sync. It runs every "
              f"leader.imbalance.check.interval.seconds, so the wait is anywhere from 0 to {check_s} s here.")
""")
nb.md("""
Every Kafka cluster rebalances leadership by itself (`auto.leader.rebalance.enable=true`): the
active controller checks every `leader.imbalance.check.interval.seconds` (30 s in the lab, 300 s
by Kafka's default) for partitions not led by their preferred replica, and elects the preferred
one wherever it is in the ISR.
""")

nb.md("""
## Preferred leader election, by hand

Spreading preferred leaders evenly is how Kafka balances load, and operators move them on
purpose: change a partition's replica order with `kafka-reassign-partitions` (the first replica
becomes the preferred leader), then elect it with `kafka-leader-election`. Left alone, the
controller's check would do the election — within 30 s here, within 5 minutes by default.

**Why this demo cannot race the automatic check:** that check runs on a fixed period, and it
*just* ran (it gave the restarted broker its leadership back a moment ago). The next one is a full
`leader.imbalance.check.interval.seconds` away; the reorder and the manual election below take
a few seconds. So whatever you see move in the next cells, you moved. (To rule the automatic
check out entirely, a cluster can set `auto.leader.rebalance.enable=false` — then only
manual elections move leaders.)

Make the second replica of partition 2 its preferred leader:
""")
nb.code("""
current = cluster.describe_topic(payments)[2]
new_order = [current.replicas[1], current.replicas[0], *current.replicas[2:]]
with tempfile.TemporaryDirectory() as work:     # the plan is a file the tool reads; gone after it ran
    plan = Path(work) / "reorder.json"
    move = {"topic": payments, "partition": 2, "replicas": new_order}
    plan.write_text(json.dumps({"version": 1, "partitions": [move]}))
    cluster.tool("kafka-reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
# A tool returns once the controller has committed the change; each broker applies it a moment later
# (seconds on a busy machine). Read the result only when every running broker shows it:
reordered = operations.wait_for_placement(cluster, payments, 2, replicas=new_order)
print(f"partition 2: replicas {list(current.replicas)} -> {list(reordered.replicas)}, "
      f"leader still broker {reordered.leader}, preferred now broker {reordered.replicas[0]}")
""")
nb.code("""
print("the reorder moved no leadership:", reordered.leader == current.leader != reordered.replicas[0])
""", check=True)
nb.code("""
print(cluster.tool("kafka-leader-election", "--election-type", "PREFERRED", "--topic", payments, "--partition", "2"))
elected = operations.wait_for_placement(cluster, payments, 2, leader=new_order[0])   # every broker shows it
balanced = cluster.describe_topic(payments)
print(f"done {time.monotonic() - rebalanced_at:.0f} s after the automatic check ran "
      "(its next run is 30 s after it)")
""")
nb.code("""
print("partition 2 is led by its new preferred replica:", elected.leader == balanced[2].leader == new_order[0])
""", check=True)

nb.md("""
## A paused follower drops out of the ISR, then catches up

`pause_broker` freezes a broker (SIGSTOP): it is not dead — its process and connections stay —
it just stops answering, like a machine in a long garbage-collection pause. Writes continue;
after `replica.lag.time.max.ms` without fetching, the leader removes the follower from the ISR.
""")
nb.code("""
follower = next(r for r in balanced[1].replicas if r != balanced[1].leader)
cluster.pause_broker(follower)
paused = produce_and_count(cluster, payments, count=200, pace=0.02, acks="all")

def without_follower():
    state = cluster.describe_topic(payments)
    return state if follower not in state[1].isr else None

lagging = Wait(f"broker {follower} to leave the ISR", timeout=30, interval=0.5).until(without_follower)
print(f"broker {follower} paused; partition 1 ISR is now {list(lagging[1].isr)}")
partition_map(lagging, brokers, title=f"broker {follower} paused: out of sync")
""")
nb.code("""
print("paused follower left the ISR:", follower not in lagging[1].isr)
print("writes went on with acks=all (2 in-sync replicas >= min.insync.replicas):", paused.acked == paused.sent)
""", check=True)
nb.code("""
cluster.resume_broker(follower)
caught_up = cluster.wait_for_isr(payments)
print("after resume, back in the ISR:", follower in caught_up[1].isr)
""", check=True)

nb.md("""
## Replication factor N survives N − 1 failures

With three replicas, a partition stays readable while any one copy is alive. (Writes with
`acks=all` additionally need `min.insync.replicas` copies — lesson 04.) Stop two of the three
brokers gracefully and read everything back from the last one:
""")
nb.code("""
survivor, *others = brokers
if all(alive(b) for b in brokers):               # run again: they are stopped already
    written = sum(p.high_watermark for p in cluster.describe_topic(payments).partitions)
    for b in others:
        cluster.stop_broker(b)
Wait(f"broker {survivor} to lead every partition", timeout=30, interval=0.5).until(
    lambda: all(p.leader == survivor for p in cluster.describe_topic(payments).partitions))
readable = cluster.read_all(payments)
print(f"brokers {others} stopped; all partitions led by broker {survivor}")
print("records readable:", len(readable))
""")
nb.code("""
print("every record written so far is still readable from one broker:", len(readable) == written)
""", check=True)
nb.code("""
for b in others:
    if not alive(b):
        cluster.start_broker(b)
cluster.wait_for_isr(payments)
""")

nb.md("""
## Unclean leader election: availability or acknowledged records

If the **only** in-sync replica dies, Kafka waits for it to come back rather than electing an
out-of-sync follower, which would silently drop the records it lacks: the partition is offline
until then. `unclean.leader.election.enable=true` — a **topic-level** setting (a broker-wide
default exists too) — chooses availability instead. Two topics show both sides, each with one
partition on the same two brokers and `min.insync.replicas=1`; only the second allows unclean
elections:
""")
nb.code("""
leader, lagger = brokers[0], brokers[1]
clean, unclean = cluster.topic_name(f"clean-{run}"), cluster.topic_name(f"unclean-{run}")
for t, unclean_election in ((clean, "false"), (unclean, "true")):
    # kafka-topics places the two replicas where we say (leader first); cluster.create_topic then finds the
    # topic there, with the shape asked for, and returns once every live broker knows it
    cluster.tool("kafka-topics", "--create", "--if-not-exists", "--topic", t,
                 "--replica-assignment", f"{leader}:{lagger}", "--config", "min.insync.replicas=1",
                 "--config", f"unclean.leader.election.enable={unclean_election}")
    cluster.create_topic(t, partitions=1, replication_factor=2)
    cluster.wait_for_isr(t)
    print(f"{t}: replicas {list(cluster.describe_topic(t)[0].replicas)}, unclean.leader.election.enable="
          f"{cluster.describe_configs('topic', t)['unclean.leader.election.enable']}")
""")
nb.md("""
Fifty records go to each topic while both replicas are in sync. Then broker `lagger` is paused
until it drops out of the ISR, and a hundred more records go to each topic — acknowledged by
`leader` alone (`acks=all` with an ISR of one meets `min.insync.replicas=1`):
""")
nb.code("""
acked = {clean: [], unclean: []}

def on_delivery(err, msg):
    if err is None:
        acked[msg.topic()].append(msg.value().decode())

p = cluster.producer(acks="all")
if next(b for b in cluster.brokers if b.id == lagger).state == "paused":   # run again: in sync first
    cluster.resume_broker(lagger)
    for t in (clean, unclean):
        cluster.wait_for_isr(t)
for i in range(50):
    for t in (clean, unclean):
        p.produce(t, value=f"in-sync-{i:03d}", on_delivery=on_delivery)
p.flush(10)
cluster.pause_broker(lagger)
Wait(f"broker {lagger} to leave both ISRs", timeout=30, interval=0.25).until(
    lambda: all(lagger not in cluster.describe_topic(t)[0].isr for t in (clean, unclean)))
for i in range(100):
    for t in (clean, unclean):
        p.produce(t, value=f"leader-only-{i:03d}", on_delivery=on_delivery)
p.flush(10)
print({t: len(v) for t, v in acked.items()}, "records acknowledged per topic")
""")
nb.code("""
q_unclean = predict.ask("03.unclean-lost", f"Now broker {leader} dies and the out-of-sync broker {lagger} comes "
                        f"back. Of the {len(acked[unclean])} records acknowledged on {unclean}, how many are lost?",
                        tolerance=0)
q_unclean
""")
nb.code("""
if alive(leader):                                # run again: it is dead already
    cluster.kill_broker(leader)
cluster.resume_broker(lagger)

def clean_offline():
    state = cluster.describe_topic(clean)
    return state if state[0].leader is None else None

offline = {unclean: cluster.wait_for_new_leader(unclean, 0, old_leader=leader)[0],
           clean: Wait(f"{clean} to have no leader", timeout=30, interval=0.25).until(clean_offline)[0]}
kept = {r.value_text for r in cluster.read_all(unclean)}
lost_unclean = [v for v in acked[unclean] if v not in kept]
print(f"{clean}: leader {offline[clean].leader} — offline, waiting for broker {leader}")
print(f"{unclean}: leader {offline[unclean].leader}, ISR {list(offline[unclean].isr)}, "
      f"{len(kept)} records readable, {len(lost_unclean)} acknowledged records gone")
print(cluster.tool("kafka-topics", "--describe", "--topic", clean))
""")
nb.code("""
print("clean topic: no leader while its only in-sync replica is down:", offline[clean].leader is None)
print("unclean topic: the out-of-sync broker was elected:", offline[unclean].leader == lagger)
print("unclean topic: acknowledged records lost:", len(lost_unclean))
print("  exactly those written while the new leader was out of sync:",
      sorted(lost_unclean) == sorted(v for v in acked[unclean] if v.startswith("leader-only")))
""", check=True)
nb.code("""
q_unclean.reveal(len(lost_unclean), f"All {len(lost_unclean)} records broker {leader} alone had acknowledged: "
                 f"broker {lagger} never fetched them, and an unclean election makes its log the truth.")
""")
nb.md("""
`kafka-topics --describe` shows why the clean topic waits: its ISR is empty, and Kafka 4 keeps
the dead leader as an **eligible leader replica** (`Elr`), the only broker allowed to lead
without losing data. Bring it back:
""")
nb.code("""
if not alive(leader):                            # run again: it is back already
    cluster.start_broker(leader)
for t in (clean, unclean):
    cluster.wait_for_isr(t)
clean_now = {r.value_text for r in cluster.read_all(clean)}
unclean_now = {r.value_text for r in cluster.read_all(unclean)}
print(f"{clean}: {len(clean_now)} records, led by broker {cluster.describe_topic(clean)[0].leader}")
print(f"{unclean}: {len(unclean_now)} records, broker {leader} back as a follower")
""")
nb.code("""
print("clean topic: nothing acknowledged lost once its leader came back:", set(acked[clean]) <= clean_now)
print("unclean topic: the lost records stay lost (the old leader truncated its log to the new leader's):",
      not any(v in unclean_now for v in lost_unclean))
""", check=True)
nb.md("""
The trade-off in one line: a clean topic is **unavailable** while its last in-sync replica is
down and loses nothing; an unclean one stays **available** and silently loses what only the
dead leader had. Keep it off for anything you cannot afford to lose.
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| each partition has a leader and followers; the ISR and high watermark bound what is readable | the partition map and `describe_topic` |
| a new leader is elected from the ISR and clients follow it | 400 records, leader killed at 200, none lost; fenced after `broker.session.timeout.ms` (the controller's log), then the election |
| a restarted broker gets its leadership back by itself | the controller's periodic check re-elected the preferred replica |
| a preferred election moves leadership on demand | replicas reordered, `kafka-leader-election --election-type PREFERRED` |
| a stalled follower leaves the ISR and rejoins after catching up | pause → ISR shrinks → resume → ISR complete |
| RF 3 survives 2 broker losses for reads | all records read from the last broker |
| unclean leader election trades acknowledged records for availability | clean topic offline, unclean topic led by the out-of-sync broker, its leader-only records lost for good |

**Next:** [04 · Producer guarantees](04_producer_guarantees.ipynb).
""")
nb.code("""
predict.summary("03")
""")
nb.code("""
p = None             # the client goes first, so it does not complain about brokers going away
cluster.stop()
""")
