"""Source of notebooks/03_replication_and_failover.ipynb: build it with `python scripts/build_notebooks.py 03`."""

from labkit.authoring import Notebook

nb = Notebook("03 · Replication and failover",
              summary="Leaders, followers, ISR and the high watermark; kill and pause brokers and watch "
                      "elections, ISR shrink and catch-up, preferred leaders, N−1 failures.",
              minutes=30)

nb.md("""
# 03 · Replication and failover

Every partition is stored on several brokers: one **leader** takes the writes, **followers**
copy it. This lesson breaks brokers on purpose — kill, pause, restart — and counts what happens
to leadership, to the in-sync replica set, and to the records.

*About 30 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup

Followers that stop fetching leave the ISR after `replica.lag.time.max.ms`; this cluster uses
3 seconds instead of 30 so you don't wait.
""")
nb.code("""
import time
import uuid

import labkit
from labkit.producing import counts_frame, produce_and_count
from labkit.viz import compare_partition_maps, partition_map

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster(replica_lag_time_max_ms=3000)
brokers = [b.id for b in cluster.brokers]
run = uuid.uuid4().hex[:6]
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
partition 0. The controller elects a new leader **from the ISR**; the producer's next metadata
refresh finds it and carries on.
""")
nb.code("""
before = cluster.describe_topic(payments)
victim = before[0].leader
failover = produce_and_count(cluster, payments, count=400, pace=0.005, acks="all",
                             actions={200: lambda: cluster.kill_broker(victim)})
after = cluster.wait_for_new_leader(payments, 0, victim)
print(f"killed broker {victim}; partition 0 is now led by broker {after[0].leader}")
counts_frame({"acks=all, leader killed": failover})
""")
nb.code("""
print("new leader came from the old ISR:", after[0].leader in before[0].isr)
print("no acknowledged record lost:", failover.lost == 0)
print("every record acknowledged in the end:", failover.acked == failover.sent)
""", check=True)
nb.code("""
compare_partition_maps({"before": (before, []), f"after killing broker {victim}": (after, [victim])}, brokers)
""")
nb.md("""
Look at the *duplicates* column too. When the leader dies, requests it had already written (and
replicated) may never be acknowledged; the producer retries them against the new leader, which
stores them again. Nothing acknowledged was lost — but a record may be stored twice. Lesson 04
shows how the **idempotent producer** prevents exactly that.
""")

nb.md("""
### The killed broker comes back

Restarted, it rejoins as a follower of every partition, fetches what it missed, and re-enters
the ISR. It does **not** get its leadership back by itself.
""")
nb.code("""
cluster.start_broker(victim)
back = cluster.wait_for_isr(payments)
print("ISR complete again:", all(set(p.isr) == set(p.replicas) for p in back.partitions))
print("leaders now:", {p.partition: p.leader for p in back.partitions})
""")

nb.md("""
## Preferred leader election

Each partition's first replica is its *preferred* leader; spreading preferred leaders evenly is
how Kafka balances load. After the failover one broker leads more than its share. Kafka's
`kafka-leader-election` tool (or the broker itself, every `leader.imbalance.check.interval.seconds`)
moves leadership back:
""")
nb.code("""
print("leaders on their preferred broker:",
      sum(p.leader == p.replicas[0] for p in cluster.describe_topic(payments).partitions), "of 3")
print(cluster.tool("kafka-leader-election", "--election-type", "PREFERRED", "--topic", payments,
                   "--partition", "0"))
""")
nb.code("""
balanced = cluster.describe_topic(payments)
print("partition 0 led by its preferred replica again:", balanced[0].leader == balanced[0].replicas[0])
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
deadline = time.monotonic() + 30
lagging = cluster.describe_topic(payments)
while follower in lagging[1].isr and time.monotonic() < deadline:
    time.sleep(0.5)
    lagging = cluster.describe_topic(payments)
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
for b in others:
    cluster.stop_broker(b)
deadline = time.monotonic() + 30
while any(p.leader != survivor for p in cluster.describe_topic(payments).partitions) and time.monotonic() < deadline:
    time.sleep(0.5)
readable = cluster.read_all(payments)
print(f"brokers {others} stopped; all partitions led by broker {survivor}")
print("records readable:", len(readable))
""")
nb.code("""
print("every record written so far is still readable from one broker:",
      len(readable) == first.stored + failover.stored + paused.stored)
""", check=True)
nb.code("""
for b in others:
    cluster.start_broker(b)
cluster.wait_for_isr(payments)
""")
nb.md("""
**Unclean leader election.** If the *only* in-sync replica dies, Kafka waits for it to come back
rather than electing an out-of-sync follower (which would silently drop the records it lacks).
`unclean.leader.election.enable=true` chooses availability over those records instead.
""")

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| each partition has a leader and followers; the ISR and high watermark bound what is readable | the partition map and `describe_topic` |
| a new leader is elected from the ISR and clients follow it | 400 records, leader killed at 200, none lost |
| leadership does not return by itself; preferred election restores it | `kafka-leader-election --election-type PREFERRED` |
| a stalled follower leaves the ISR and rejoins after catching up | pause → ISR shrinks → resume → ISR complete |
| RF 3 survives 2 broker losses for reads | all records read from the last broker |

**Next:** [04 · Producer guarantees](04_producer_guarantees.ipynb).
""")
nb.code("""
cluster.stop()
""")

