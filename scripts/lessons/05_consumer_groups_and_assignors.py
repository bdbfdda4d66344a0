"""Source of notebooks/05_consumer_groups_and_assignors.ipynb: build it with `python scripts/build_notebooks.py 05`."""

from labkit.authoring import Notebook

nb = Notebook("05 · Consumer groups and assignors",
              summary="A group splitting a topic, its coordinator killed, heartbeats vs max.poll.interval.ms, idle "
                      "members, two groups, rebalances on a timeline, range vs round robin predicted and compared, "
                      "eager, sticky and cooperative rebalancing, static membership and the broker-side group "
                      "protocol.",
              minutes=50)

nb.md("""
# 05 · Consumer groups and assignors

Consumers that share a `group.id` share the work: each partition goes to exactly one member of
the group. This lesson runs group members as separate processes, watches the group rebalance as
members come and go, kills the broker that coordinates it, lets members stop heartbeating or stop
polling, checks the assignors' rules against what the group really handed out, and measures who
stops consuming during a rebalance under each protocol. Before each measurement, lock in what you
expect.

*About 50 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup
""")
nb.code("""
import inspect
import os
import re
import textwrap
import time
import uuid

import pandas as pd
from IPython.display import Code

import labkit
from labkit import assignors, groupviz, predict, workloads
from labkit.waiting import Wait
from labkit.workloads import Group

labkit.setup_check()
""")
nb.code("""
if "cluster" in globals():
    cluster.stop()                 # running this cell again starts afresh
cluster = labkit.start_cluster()
run = uuid.uuid4().hex[:6]
events = cluster.create_topic(f"events-{run}", partitions=6)
ids = [f"event-{i:05d}" for i in range(3000)]
producer = cluster.producer(enable_idempotence=True, linger_ms=10)
for e in ids:
    producer.produce(events, key=e, value=e)
producer.flush(30)
cluster
""")

nb.md("""
## A group splits a topic

Start three members of one group (three processes). Once the group has settled, each member owns
some partitions and no partition has two owners:
""")
nb.code("""
if "workers" in globals():
    workers.stop()                 # run again: a new group, the old members stopped
workers = Group(cluster, events, f"workers-{uuid.uuid4().hex[:6]}")
for name in ("alpha", "beta", "gamma"):
    workers.start_member(name, process_ms=5)
split = workers.wait_settled(3, quiet=2.0)   # every partition owned once, unchanged for 2 s
{name: sorted(p for _, p in parts) for name, parts in split.items()}
""")
nb.md("""
That is each member's own view (its rebalance callback). The group coordinator, a broker, has the
same picture, and also stores each partition's **committed offset**: how far the group got. Read
back from the broker:
""")
nb.code("""
view = groupviz.read_group(cluster, workers.group_id)
groupviz.assignment_heatmap(view, partitions=[(events, p) for p in range(6)]).show()
groupviz.lag_bars(view)
""")
nb.code("""
owned = [p for parts in split.values() for p in parts]
print("6 partitions, each owned by exactly one member:", sorted(p for _, p in owned) == list(range(6)))
""", check=True)

nb.md("""
## A rebalance, on a timeline

Now add a fourth member, then stop one gracefully. Each change of membership makes the group
**rebalance**: the coordinator (a broker) collects the members, the leader member runs the
assignor, and everyone gets a new assignment. A member learns about it through the **rebalance
callbacks** it passed to `subscribe()`: `on_assign` with the partitions it gets, `on_revoke` with
those taken away (`on_lost` when it was thrown out). This is the loop every member process of this
lesson runs (`labkit.workloads.run_member`): the callbacks write down, with the time, what they were
handed, and they only ever run inside `consume()`:
""")
nb.code("""
source = inspect.getsource(workloads.run_member)
Code(textwrap.dedent(source[source.index("    def changed"):source.index("    finally:")]), language="python")
""")
nb.md("""
Add a fourth member, then stop one gracefully, and draw what the callbacks wrote down as bars:
""")
nb.code("""
if workers.members.get("delta") and workers.members["delta"].alive:   # run again: back to alpha, beta, gamma
    workers.stop_member("delta")
    workers.start_member("alpha", process_ms=5)
    workers.wait_settled(3, quiet=2.0)
joins = time.time()
workers.start_member("delta", process_ms=5)
workers.wait_settled(4, quiet=2.0)
leaves = time.time()
workers.stop_member("alpha")
workers.wait_settled(3, quiet=2.0)
groupviz.rebalance_timeline(workers.events(), t0=joins, marks={"delta joins": joins, "alpha leaves": leaves},
                            title="Who owned which partition, when (seconds after delta joined)")
""")
nb.code("""
final = workers.assignment()
print("members now:", sorted(final))
print("all 6 partitions owned after the changes:", sorted(p for parts in final.values() for _, p in parts) == list(range(6)))
""", check=True)

nb.md("""
## The group coordinator

One broker runs the group: its **coordinator**. It tracks the members, runs the join and sync of a
rebalance, and stores the group's commits. Which broker? The group id picks a partition of the
internal topic `__consumer_offsets` — `abs(hashCode(group.id)) % offsets.topic.num.partitions`, with
Java's `String.hashCode` — and the leader of that partition is the coordinator. Compute it, and ask
the cluster:
""")
nb.code("""
def java_hash(text):                       # java.lang.String.hashCode: over UTF-16 code units, 32-bit signed
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h

offsets_topic = cluster.describe_topic("__consumer_offsets")
slot = abs(java_hash(workers.group_id)) % len(offsets_topic)
coordinator = groupviz.read_group(cluster, workers.group_id).coordinator
print(f"group {workers.group_id!r} -> __consumer_offsets partition {slot} of {len(offsets_topic)}, led by broker "
      f"{offsets_topic[slot].leader}; the cluster says the coordinator is broker {coordinator}")
""")
nb.code("""
print("the coordinator is the leader of the group's __consumer_offsets partition:",
      coordinator == offsets_topic[slot].leader)
""", check=True)
nb.md("""
Kill that broker while the three members consume. `__consumer_offsets` is replicated like any
topic, so another broker becomes the leader of that partition and takes over as coordinator; the
members find it with their next request.
""")
nb.code("""
coordinator_dies = predict.ask("05.coordinator-dies", "The coordinator's broker is killed while the members "
                               "consume. What happens to their partitions: all revoked (a full rebalance), none "
                               "revoked (they carry on), or the group is gone until the broker returns?",
                               choices=["all revoked", "none revoked", "group gone"])
coordinator_dies
""")
nb.code("""
coordinator = groupviz.read_group(cluster, workers.group_id).coordinator   # now: run again, it may have moved
killed_at = time.time()
cluster.kill_broker(coordinator)

def moved_on():                 # the group as the broker now coordinating it reports it
    group = groupviz.read_group(cluster, workers.group_id)
    return group if group.coordinator not in (None, coordinator) and len(group.members) == 3 else None

Wait("another broker to coordinate the group", timeout=60, interval=0.5).until(moved_on)
took = time.time() - killed_at
workers.wait_settled(3, quiet=2.0)
after_kill = groupviz.read_group(cluster, workers.group_id)
revoked_by_kill = groupviz.revocations(workers.events(), since=killed_at)
print(f"broker {after_kill.coordinator} coordinates the group {took:.1f} s after broker {coordinator} died; "
      f"state {after_kill.state}, {len(after_kill.members)} members; partitions revoked since: "
      f"{sum(revoked_by_kill.values())}")
cluster.start_broker(coordinator)
""")
nb.code("""
print("another broker coordinates the group:", after_kill.coordinator != coordinator)
print("the group still has its 3 members, each with partitions:",
      len(after_kill.members) == 3 and all(m.partitions for m in after_kill.members))
""", check=True)
nb.code("""
revoked_total = sum(revoked_by_kill.values())
coordinator_dies.reveal(
    "all revoked" if revoked_total >= 6 else "none revoked" if not revoked_total else f"{revoked_total} revoked",
    "The group lives in a replicated __consumer_offsets partition, so another broker took it over. Meanwhile the "
    "members had no coordinator to heartbeat to, and their 6 s session timeout ran out before the move was done: "
    "they had to join again, a rebalance. (With a session timeout longer than the move, they carry on.)"
    if revoked_total else
    "The group lives in a replicated __consumer_offsets partition: another broker took it over, and the members' "
    "heartbeats reached it within their session timeout.",
    expected=predict.MEASURED)
""")
nb.code("""
workers.wait_processed(len(ids), timeout=90)
print("every event processed at least once by the group:", workers.outcome(ids).lost == 0)
workers.stop()
""", check=True)

nb.md("""
## Heartbeats and max.poll.interval.ms

How does the coordinator know a member is still there? Two clocks:

* a background thread of the client sends a **heartbeat** every `heartbeat.interval.ms`; after
  `session.timeout.ms` without one, the coordinator removes the member;
* the application must call `poll()`/`consume()` at least every `max.poll.interval.ms`; if it does
  not, the client itself leaves the group — although its heartbeat thread is fine.

Two groups of two members on the same topic, `session.timeout.ms` = 3 s and
`max.poll.interval.ms` = 12 s. In one, member `frozen` stops entirely (`SIGSTOP`: no heartbeats, no
polls). In the other, member `stuck` takes one record and spends a minute on it: its heartbeat
thread runs on, its loop never comes back to `consume()`. We watch when the other member, `a`, gets
their partitions.
""")
nb.code("""
stuck_removed = predict.ask("05.stuck-removed", "The stuck member heartbeats but does not poll. How many seconds "
                            "after it stopped polling does `a` get its partitions?", tolerance=2, unit="s")
stuck_removed
""")
nb.code("""
TIMEOUTS = dict(session_timeout_ms=3000, heartbeat_interval_ms=500, max_poll_interval_ms=12000)
tag = uuid.uuid4().hex[:6]         # new groups each time the cell runs
frozen_group, stuck_group = Group(cluster, events, f"frozen-{tag}"), Group(cluster, events, f"stuck-{tag}")
for group in (frozen_group, stuck_group):
    group.start_member("a", process_ms=5, **TIMEOUTS)
frozen_group.start_member("frozen", process_ms=5, **TIMEOUTS)
frozen_group.wait_settled(2, quiet=1.0)
stuck_group.wait_settled(1, quiet=1.0)
stuck_group.start_member("stuck", batch=1, process_ms=60_000, **TIMEOUTS)   # one record, then a minute of work
stuck_group.wait_settled(2, quiet=0)
stopped_polling = max(e.t for e in stuck_group.events() if e.member == "stuck" and e.kind == "assign")
frozen_at = time.time()
frozen_group.pause_member("frozen")
frozen_group.wait_owned(["a"], timeout=30)                 # the coordinator removed `frozen`: a has it all
stuck_group_then = sorted(m.client_id for m in groupviz.read_group(cluster, stuck_group.group_id).members)
stuck_group.wait_owned(["a"], timeout=40)                  # and now `stuck` is gone too
for group in (frozen_group, stuck_group):
    group.stop()

def taken_over(group, member, since):   # seconds until a's on_assign had every partition `member` owned
    theirs = groupviz.owned_at(group.events(), since)[member]
    got = {(h.topic, h.partition): h.start for h in groupviz.holdings(group.events())
           if h.member == "a" and h.start >= since and (h.topic, h.partition) in theirs}
    return max(got.values()) - since

frozen_after = taken_over(frozen_group, "frozen", frozen_at)
stuck_after = taken_over(stuck_group, "stuck", stopped_polling)

# the coordinators' own log lines (server.log) taking each member out of its group, and how they did it
frozen_out = groupviz.member_removed(cluster, frozen_group.group_id, "frozen")
stuck_out = groupviz.member_removed(cluster, stuck_group.group_id, "stuck")
# the stuck member's own client (librdkafka) says when it gave up on the application: %4|<its clock>|MAXPOLL|...
maxpoll = stuck_group.members["stuck"].client_log(grep=r"\\|MAXPOLL\\|")
gave_up = float(maxpoll[0].split("|")[1]) if maxpoll else None
def after(t, since):
    return "?? (no log line)" if t is None else f"{t - since:.1f} s"
frozen_t, frozen_why = (frozen_out.t, frozen_out.why) if frozen_out else (None, "??")
stuck_t, stuck_why = (stuck_out.t, stuck_out.why) if stuck_out else (None, "??")

print("the coordinator's log:", *(r and r.line for r in (frozen_out, stuck_out)), sep="\\n  ")
for group, removal in ((frozen_group, frozen_out), (stuck_group, stuck_out)):
    if removal is None:         # no such line: the brokers' last three lines about that group instead
        print(f"  no removal line for {group.group_id}; the brokers' last lines about it:",
              *(cluster.broker_log(b.id, grep=re.escape(group.group_id), lines=3) for b in cluster.brokers if b.alive),
              sep="\\n")
print("the stuck member's client:", maxpoll[0] if maxpoll else None, sep="\\n  ")
print(f"frozen (no heartbeats, session.timeout.ms = 3 s): out of its group {after(frozen_t, frozen_at)} after it "
      f"froze: {frozen_why}; its partitions went to a after {frozen_after:.1f} s")
print(f"stuck (heartbeats, no polls, max.poll.interval.ms = 12 s): its client gave up "
      f"{after(gave_up, stopped_polling)} after it stopped polling; out of its group {after(stuck_t, stopped_polling)} "
      f"after: {stuck_why}; its partitions went to a after {stuck_after:.1f} s")
print(f"this machine's load average meanwhile: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
""")
nb.code("""
print("frozen: the coordinator removed it when its session expired:", frozen_out is not None and frozen_out.expired)
print("stuck: its own client gave up on the application, and it went out of its group:",
      gave_up is not None and stuck_out is not None)
print("when frozen was removed, stuck (not polling for longer) was still in its group:", "stuck" in stuck_group_then)
print("frozen was out of its group before stuck went out of its own:",
      None not in (frozen_t, stuck_t) and frozen_t < stuck_t)
""", check=True)
nb.code("""
stuck_removed.reveal(round(stuck_after, 1), "Its heartbeats kept it in the group past the 3 s session timeout; at "
                     "max.poll.interval.ms (12 s) its client gave up on the application (its MAXPOLL line above), "
                     "and the member went out of the group.")
""")
nb.md("""
A member that is alive but busy is not thrown out by its session timeout: heartbeats come from a
thread of their own. What ends it is `max.poll.interval.ms` (librdkafka's default: 5 minutes).
Keep the work per `consume()` call short, or raise that setting; a low `session.timeout.ms` only
speeds up noticing members that are really gone.
""")

nb.md("""
## More members than partitions; several groups

Three members join one group on a topic of two partitions; two other groups, with a member
each, read the same topic.
""")
nb.code("""
idle = predict.ask("05.idle", "Three members in one group on a topic of 2 partitions: how many members get no "
                   "partition?", choices=[0, 1, 2])
idle
""")
nb.code("""
small = cluster.create_topic(f"small-{uuid.uuid4().hex[:6]}", partitions=2)     # new each time the cell runs
p = cluster.producer()
for i in range(200):
    p.produce(small, key=str(i), value=f"s{i:04d}")
p.flush(10)

crowd = Group(cluster, small, f"crowd-{small}")
for name in ("m1", "m2", "m3"):
    crowd.start_member(name)
crowded = crowd.wait_settled(3, quiet=2.0)
billing, audit = Group(cluster, small, f"billing-{small}"), Group(cluster, small, f"audit-{small}")
billing.start_member("b1")
audit.start_member("a1")
for g in (crowd, billing, audit):
    g.wait_processed(200, timeout=60)
print("assignment in the crowded group:", {m: [p for _, p in parts] for m, parts in crowded.items()})
""")
nb.code("""
idle_members = sum(1 for parts in crowded.values() if not parts)
print("members with no partition:", idle_members)
print("billing and audit each processed all 200:", len(billing.processed()) == len(audit.processed()) == 200)
for g in (crowd, billing, audit):
    g.stop()
""", check=True)
nb.code("""
idle.reveal(idle_members, "A partition has one owner per group; the third member waits as a hot spare.", expected=1)
""")
nb.md("""
A partition has one owner per group, so a group can't use more members than the topic has
partitions: the extra ones sit idle (useful only as hot spares). Different groups are
independent: each gets **every** record.
""")

nb.md("""
## Assignors: predicted vs handed out

The assignment is computed by an **assignor** chosen with `partition.assignment.strategy`.
`labkit.assignors` implements the documented rules; let's see whether three real consumers get
exactly what it predicts, for `range` and `roundrobin`, on two topics of 5 and 3 partitions:
""")
nb.code("""
topic_a = cluster.create_topic(f"orders-{run}", partitions=5)
topic_b = cluster.create_topic(f"refunds-{run}", partitions=3)
layout = {topic_a: 5, topic_b: 3}

def received(strategy):
    consumers = [cluster.consumer(f"{strategy}-{run}", partition_assignment_strategy=strategy, session_timeout_ms=6000)
                 for _ in range(3)]
    for c in consumers:
        c.subscribe(list(layout))
    seen = {"last": None, "since": 0.0}

    def settled():                   # every member has partitions, 8 in all, unchanged for 3 s
        for c in consumers:
            c.poll(0.05)             # rebalance callbacks and heartbeats run inside poll()
        now = {c.memberid(): sorted(assignors.TopicPartition(tp.topic, tp.partition) for tp in c.assignment())
               for c in consumers}
        if now != seen["last"] or len(now) != 3 or not all(now.values()) or sum(map(len, now.values())) != 8:
            seen.update(last=now, since=time.monotonic())
            return None
        return now if time.monotonic() - seen["since"] > 3 else None

    try:
        return Wait(f"the {strategy} group to settle", timeout=90, interval=0).until(settled)
    finally:
        for c in consumers:
            c.close()

rows, matches = [], {}
for strategy in ("range", "roundrobin"):
    got = received(strategy)
    members = sorted(got)
    predicted = assignors.assign(strategy, members, {m: list(layout) for m in members}, layout)
    matches[strategy] = predicted == got
    for i, m in enumerate(members):
        rows.append({"strategy": strategy, "member": f"member {i + 1}",
                     "received": ", ".join(f"{tp.topic.split('-')[0]}-{tp.partition}" for tp in got[m]),
                     "partitions": len(got[m])})
pd.DataFrame(rows)
""")
nb.code("""
print("range: prediction == what the group handed out:", matches["range"])
print("roundrobin: prediction == what the group handed out:", matches["roundrobin"])
""", check=True)
nb.md("""
**Range** works per topic, members sorted by id: the first members get the extra partition of
*every* topic whose count doesn't divide evenly (here `orders-0,1` and `refunds-0` to member 1);
with many such topics the first member collects more and more. **Round robin** deals all
partitions of all topics in turn, so counts never differ by more than one.
The **sticky** assignors keep that balance *and* leave partitions where they were on a rebalance.

## Eager vs cooperative rebalancing: who stops?

A rebalance hands partitions from some members to others. A member learns what it gives up in its
`on_revoke` callback. Two groups of three members read the same topic, one with `range`, one with
`cooperative-sticky`, slowly (100 ms a record) so they are still busy when a fourth member joins
each group:
""")
nb.code("""
eager_revokes = predict.ask("05.eager-revoked", "A fourth member joins the range group of a, b and c (6 partitions, 2 "
                            "each). How many partitions do a, b and c give up in their on_revoke callbacks?",
                            choices=[0, 1, 2, 6])
eager_revokes
""")
nb.code("""
tag = uuid.uuid4().hex[:6]         # new groups each time the cell runs

def busy_group(strategy):
    group = Group(cluster, events, f"{strategy}-{tag}")
    for name in ("a", "b", "c"):
        group.start_member(name, batch=10, process_ms=100, partition_assignment_strategy=strategy)
    return group

eager, cooperative = busy_group("range"), busy_group("cooperative-sticky")
eager.wait_settled(3, quiet=2.0), cooperative.wait_settled(3, quiet=2.0)
joined = time.time()
eager.start_member("d", batch=10, process_ms=100, partition_assignment_strategy="range")
cooperative.start_member("d", batch=10, process_ms=100, partition_assignment_strategy="cooperative-sticky")
eager.wait_settled(4, quiet=2.0), cooperative.wait_settled(4, quiet=2.0)
until = time.time()
eager.stop(), cooperative.stop()
runs = {"eager (range)": eager.events(), "cooperative-sticky": cooperative.events()}
pd.concat({name: groupviz.rebalance_table(evs, joined, until) for name, evs in runs.items()}, names=["protocol"])
""")
nb.md("""
Per member: partitions before and after `d` joined, how many its `on_revoke` callback took away,
and for how many seconds it owned **nothing** (the time from its revoke to its next assignment).
The timeline shows the same (the dashed line is `d` joining):
""")
nb.code("""
groupviz.rebalance_timeline(runs, t0=joined, marks={"d joins": joined},
                            title="A fourth member joins: eager vs cooperative (seconds after the join)")
""")
nb.code("""
revoked = {name: groupviz.revocations(evs, since=joined) for name, evs in runs.items()}
before = groupviz.owned_at(runs["cooperative-sticky"], joined)
after = groupviz.owned_at(runs["cooperative-sticky"], until - 0.01)
kept_all = [m for m in before if set(before[m]) <= set(after.get(m, []))]
print("eager: partitions revoked from a, b and c:", sum(revoked["eager (range)"][m] for m in "abc"), "of 6")
print("cooperative: fewer partitions revoked than eager:",
      sum(revoked["cooperative-sticky"].values()) < sum(revoked["eager (range)"].values()))
print("cooperative: members that kept their partitions revoked none:",
      bool(kept_all) and all(revoked["cooperative-sticky"][m] == 0 for m in kept_all))
""", check=True)
nb.code("""
eager_revokes.reveal(sum(revoked["eager (range)"][m] for m in "abc"),
                     "Eager protocols start every rebalance by revoking everything, even what comes straight back.",
                     expected=6)
""")
nb.md("""
`range` and `roundrobin` are **eager**: at every rebalance each member first gives up (*revokes*)
**all** its partitions, then waits until every member has rejoined, then gets its new assignment.
`cooperative-sticky` is **incremental**: a member revokes only the partitions that move, and keeps
consuming the others during the rebalance.
""")
nb.code("""
for name, evs in runs.items():
    gaps = groupviz.unowned_seconds(evs, joined, until)
    print(f"{name}: partitions left without an owner: {sum(1 for s in gaps.values() if s > 0)}, "
          f"longest gap {max(gaps.values()):.1f} s")
""")
nb.md("""
Eager: every member gave up every partition, even the ones it got straight back, so every
partition paused and was fetched again from its committed offset. Cooperative: the members
that kept their partitions never stopped; only the partition that moved paused, and because it
moves in two rounds (revoked, then assigned to `d`) *its* gap is the longer one.

### The plain sticky assignor

`sticky` (Java's `StickyAssignor`) computes the same kind of assignment as `cooperative-sticky`:
balanced, and moving as few partitions as possible. But it runs on the **eager** protocol. librdkafka
has no plain sticky assignor, so here three members run Kafka's own Java consumer
(`kafka-verifiable-consumer`, which prints what its rebalance callbacks get), and a fourth joins:
""")
nb.code("""
java_sticky = Group(cluster, events, f"sticky-java-{uuid.uuid4().hex[:6]}")
for name in ("a", "b", "c"):
    java_sticky.start_java_member(name, assignment_strategy="org.apache.kafka.clients.consumer.StickyAssignor")
sticky_before = java_sticky.wait_settled(3, quiet=2.0, timeout=90)
sticky_joined = time.time()
java_sticky.start_java_member("d", assignment_strategy="org.apache.kafka.clients.consumer.StickyAssignor")
sticky_after = java_sticky.wait_settled(4, quiet=2.0, timeout=90)
java_sticky.stop()

def changed_owner(before, after):
    owners = [{tp: m for m, parts in assignment.items() for tp in parts} for assignment in (before, after)]
    return sum(1 for tp, m in owners[1].items() if owners[0].get(tp) != m)

sticky_revoked = groupviz.revocations(java_sticky.events(), since=sticky_joined)
compare = pd.DataFrame({
    "partitions revoked from a, b, c": {
        "range (eager)": sum(revoked["eager (range)"][m] for m in "abc"),
        "sticky (eager, Java)": sum(sticky_revoked.get(m, 0) for m in "abc"),
        "cooperative-sticky": sum(revoked["cooperative-sticky"][m] for m in "abc")},
    "partitions that changed owner": {
        "range (eager)": changed_owner(groupviz.owned_at(runs["eager (range)"], joined),
                                       groupviz.owned_at(runs["eager (range)"], until - 0.01)),
        "sticky (eager, Java)": changed_owner(sticky_before, sticky_after),
        "cooperative-sticky": changed_owner(before, after)},
})
compare
""")
nb.code("""
print("sticky: a, b and c revoked all 6 partitions (eager):", compare.loc["sticky (eager, Java)"].iloc[0] == 6)
print("sticky: only one partition changed owner:", compare.loc["sticky (eager, Java)"].iloc[1] == 1)
print("cooperative-sticky: revoked only the partitions that changed owner:",
      compare.loc["cooperative-sticky"].iloc[0] == compare.loc["cooperative-sticky"].iloc[1])
""", check=True)
nb.md("""
Sticky hands every member its partitions back, but only after taking them all away and waiting
for everyone to rejoin: it spares rebuilding state for partitions that did not move, not the
stop. Only the cooperative protocol (and the broker-side protocol at the end of this lesson)
avoids the stop.

In this quick group the eager stop is short, because every member calls `consume()` again within
a second. But a member takes part in a rebalance only from inside `poll()`/`consume()`: that is
where its rebalance callbacks run and where it rejoins. And an eager rebalance ends only when
**every** member has rejoined.

### Optional deep dive: one slow member stops an eager group

*You may skip to "Static membership": this part measures why eager rebalances hurt in production.*

Members are rarely that even: one takes a big batch, or calls a slow service per record. Here `c`
takes 8 records per `consume()` call at 1 s each, so it calls `consume()` only every 8 s; `a` and
`b` are fast (10 records per call, 20 ms each). Start `a` and `b`, then `c`, and as soon as `c` has
its partitions (it is starting an 8-second batch) a fourth member `d` joins. Again an eager group
and a cooperative one, side by side:
""")
nb.code("""
stall_guess = predict.ask("05.eager-stall", "Eager group: for how many seconds do the fast members a and b own "
                          "nothing while c finishes its 8-second batch?", tolerance=2, unit="s")
stall_guess
""")
nb.code("""
FAST = dict(batch=10, process_ms=20)
SLOW = dict(batch=8, process_ms=1000)     # 8 records x 1 s: back in consume() only after 8 s
strategies = {"eager (range)": "range", "cooperative-sticky": "cooperative-sticky"}
tag = uuid.uuid4().hex[:6]         # new groups each time the cell runs
uneven = {name: Group(cluster, events, f"uneven-{s}-{tag}") for name, s in strategies.items()}
for name, group in uneven.items():
    for member in ("a", "b"):
        group.start_member(member, partition_assignment_strategy=strategies[name], **FAST)
for group in uneven.values():
    group.wait_settled(2, quiet=1.0)
for name in ("cooperative-sticky", "eager (range)"):  # a cooperative join takes two rounds: start it first
    uneven[name].start_member("c", partition_assignment_strategy=strategies[name], **SLOW)
    uneven[name].wait_settled(3, quiet=0)   # c has its partitions: its first batch has begun
slow_join = time.time()
for name, group in uneven.items():
    group.start_member("d", partition_assignment_strategy=strategies[name], **FAST)
for group in uneven.values():
    group.wait_settled(4, quiet=1.0)
slow_until = time.time()
for group in uneven.values():
    group.stop()
uneven_runs = {name: group.events() for name, group in uneven.items()}
pd.concat({name: groupviz.rebalance_table(evs, slow_join, slow_until) for name, evs in uneven_runs.items()},
          names=["protocol"])
""")
nb.code("""
groupviz.rebalance_timeline(uneven_runs, t0=slow_join, marks={"d joins": slow_join},
                            title="d joins while c is in an 8-second batch (seconds after the join)")
""")
nb.md("""
When was `c` back in `consume()` (its first revoke after the join: the callback runs in there),
and how long did `a` and `b` own nothing?
""")
nb.code("""
def first_event(evs, member, kind, after):
    # the first `kind` event of `member` at or after `after` (an assign that hands over nothing doesn't count)
    times = [e.t for e in evs if e.member == member and e.kind == kind and e.t >= after
             and (e.partitions or kind != "assign")]
    return min(times) if times else None

stalls = {}
for name, evs in uneven_runs.items():
    c_back = first_event(evs, "c", "revoke", slow_join)
    idle = {m: groupviz.idle_seconds(evs, m, slow_join, slow_until) for m in "ab"}
    again = {m: first_event(evs, m, "assign", slow_join) for m in "ab"}
    stalls[name] = {"c back": c_back, "idle": idle, "again": again}
    back = "gave up nothing" if c_back is None else f"back in consume() {c_back - slow_join:.1f} s after d joined"
    print(f"{name}: c {back}; a owned nothing for {idle['a']:.1f} s, b for {idle['b']:.1f} s")
""")
nb.code("""
eager_stall, coop_stall = stalls["eager (range)"], stalls["cooperative-sticky"]
print("eager: a and b gave up everything and owned nothing for a while:",
      all(s > 0 for s in eager_stall["idle"].values()))
print("eager: a and b got partitions again only once c was back in consume():",
      all(t is not None and t >= eager_stall["c back"] for t in eager_stall["again"].values()))
print("cooperative: a and b never stopped (each owned a partition all along):",
      all(s == 0 for s in coop_stall["idle"].values()))
""", check=True)
nb.code("""
stall_guess.reveal(round(sum(stalls["eager (range)"]["idle"].values()) / 2, 1),
                   "The rest of c's batch: the coordinator holds an eager rebalance open until every member has "
                   "rejoined, and c rejoins only from consume().")
""")
nb.md("""
Eager: `a` and `b` gave up everything at once (their next `consume()`, shortly after `d` joined,
ran the revoke callback and rejoined), then owned nothing for the seconds printed above: the
coordinator held the rebalance open until `c` rejoined, and `c` rejoined only when its batch was
done and it called `consume()` again. The fast members' stop is the rest of the slow member's batch. The
coordinator waits for that up to the group's rebalance timeout, which librdkafka sends as
`max.poll.interval.ms` (5 minutes by default); a member that stays away longer is dropped from the
group, and the others get its partitions.

Cooperative: `a` and `b` kept their partitions and went on consuming throughout. Only the
partition that moved to `d` paused, and if it was `c`'s, it waited for `c`'s batch too, because a
member gives up a partition only inside `consume()` (the timeline shows whose it was).

## Static membership: restarting without a rebalance

A rolling restart of an application would normally cost two rebalances per instance (leave, then
join). A member can also be given a fixed identity, `group.instance.id`: it is then **static**.
Three static members, 6-second session timeout; kill `s3` (`SIGKILL`) and restart it at once, as a
supervisor (systemd, Kubernetes) would. `restart_member` starts the new process first and lets it create
its consumer the moment the old one is dead, so `s3` is away only while it rejoins, not while Python starts:
""")
nb.code("""
quick_restart = predict.ask("05.static-quick", "s3 (static) is killed and restarted within the session timeout. How "
                            "many partitions do s1 and s2 have revoked?", tolerance=0)
quick_restart
""")
nb.code("""
if "static" in globals():
    static.stop()                        # run again: a new group, the old members stopped
static = Group(cluster, events, f"static-{uuid.uuid4().hex[:6]}")

def start_static(name, restart=False):
    start = static.restart_member if restart else static.start_member
    start(name, process_ms=20, group_instance_id=f"{name}-{static.group_id}", session_timeout_ms=6000)

for name in ("s1", "s2", "s3"):
    start_static(name)
first = static.wait_settled(3)
quick = time.time()
start_static("s3", restart=True)         # SIGKILL, and back at once: within the session timeout
after_quick = static.wait_settled(3)
quick_end = time.time()
""")
nb.md("""
Now the slow case: kill `s3` and leave it down. After `session.timeout.ms` without a heartbeat the
coordinator removes it and the others rebalance to take its partitions; when `s3` comes back it is
a new join, and a second rebalance:
""")
nb.code("""
down = [name for name in ("s1", "s2", "s3") if not static.members[name].alive]
for name in down:                        # run again: the three members first
    start_static(name)
if down:
    static.wait_settled(3)
slow = time.time()
static.crash_member("s3")
static.wait_owned(["s1", "s2"], timeout=30)          # the others took over s3's partitions
noticed = time.time() - slow
start_static("s3")
after_slow = static.wait_settled(3)
done = time.time()
static.stop()
print(f"the group took s3's partitions away {noticed:.1f} s after it died (session.timeout.ms = 6 s)")
groupviz.rebalance_timeline(static.events(), t0=quick, marks={"quick restart": quick, "s3 killed": slow},
                            title="Static members: a quick restart, then a slow one (seconds)")
""")
nb.code("""
quick_revokes = groupviz.revocations([e for e in static.events() if quick <= e.t < quick_end])
slow_revokes = groupviz.revocations([e for e in static.events() if e.t >= slow])
print("quick restart: partitions revoked from s1 and s2:", quick_revokes.get("s1", 0) + quick_revokes.get("s2", 0))
print("quick restart: s3 got its own partitions back:", after_quick["s3"] == first["s3"])
print("slow restart: s1 and s2 had partitions revoked:", slow_revokes.get("s1", 0) > 0 and slow_revokes.get("s2", 0) > 0)
""", check=True)
nb.code("""
quick_restart.reveal(quick_revokes.get("s1", 0) + quick_revokes.get("s2", 0),
                     "The coordinator still held s3's static membership: the returning s3 got its old partitions, "
                     "and nobody else was asked to rejoin.")
""")
nb.md("""
With `group.instance.id` set, a member that comes back with the same id within
`session.timeout.ms` gets its old partitions from the coordinator, and nobody else notices.
Static membership trades fast failure detection for calm restarts: a member that really died
keeps its partitions unread for the whole session timeout. Choose `session.timeout.ms` longer
than a restart takes, and no longer.

## The broker-side group protocol (KIP-848)

Everything so far used the **classic** protocol: the broker only keeps the membership, and one
member (the group leader) runs the assignor in the client. Kafka 4 brokers also speak a new
protocol, `group.protocol=consumer`: the **broker** computes the assignment (assignors `uniform`
or `range`, picked with `group.remote.assignor`), members learn about changes in their regular
heartbeats, and every change is incremental, with no global stop. The client no longer owns the
timing settings or the assignor; librdkafka refuses them:
""")
nb.code("""
from confluent_kafka import KafkaException

refused = "accepted (not refused)"
try:
    cluster.consumer(f"kip848-{run}", group_protocol="consumer", session_timeout_ms=6000)
except KafkaException as exc:
    refused = exc.args[0].str()
print(refused)
""")
nb.md("""
(The broker's `group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms` take
their place.) Three members on the new protocol, then a fourth joins, as before:
""")
nb.code("""
modern = Group(cluster, events, f"kip848-{uuid.uuid4().hex[:6]}")   # a new group each time the cell runs
for name in ("k1", "k2", "k3"):
    modern.start_member(name, batch=10, process_ms=100, group_protocol="consumer", group_remote_assignor="uniform")
modern.wait_settled(3, quiet=2.0)
joined_848 = time.time()
modern.start_member("k4", batch=10, process_ms=100, group_protocol="consumer", group_remote_assignor="uniform")
final_848 = modern.wait_settled(4, quiet=2.0)
until_848 = time.time()
print(cluster.tool("kafka-consumer-groups", "--describe", "--group", modern.group_id, "--state"))
print(cluster.tool("kafka-consumer-groups", "--describe", "--group", modern.group_id, "--members", "--verbose"))
modern.stop()
groupviz.rebalance_timeline(modern.events(), t0=joined_848, marks={"k4 joins": joined_848},
                            title="group.protocol=consumer: a fourth member joins (seconds after the join)")
""")
nb.code("""
owned = sorted(tp for parts in final_848.values() for tp in parts)
revoked_848 = groupviz.revocations(modern.events(), since=joined_848)
print("every partition assigned exactly once:", owned == [(events, p) for p in range(6)])
print("fewer partitions revoked than with eager rebalancing:", sum(revoked_848.values()) < 6)
""", check=True)
nb.md("""
`kafka-consumer-groups` lists each member with its assignment and the group's
`ASSIGNMENT-STRATEGY` (`uniform`): no member computed it. Only the partition that moved to `k4`
paused. Static membership works on the new protocol too (`group.instance.id`).

## What you saw

| claim | shown by |
|---|---|
| a group gives each partition to exactly one member | 6 partitions over 3 member processes, read back from the broker |
| membership changes trigger rebalances | the ownership timeline as a member joins and one leaves |
| one broker coordinates a group: the leader of its `__consumer_offsets` partition | the coordinator computed from `hashCode(group.id)`; killed, another broker took over the group |
| heartbeats keep a busy member in the group; not polling ends it | frozen: out after `session.timeout.ms`; stuck: still in then, out after `max.poll.interval.ms` |
| extra members are idle; each group gets every record | 3 members on 2 partitions; billing and audit both read 200 |
| assignors follow documented rules | range and roundrobin predictions equal what real consumers received |
| eager rebalancing stops everyone; cooperative only what moves | revoke counts and the timelines of two groups |
| plain sticky is eager too, though it moves as little as cooperative-sticky | Java members: all 6 revoked, 1 moved |
| one slow member stops an eager group until its batch ends; cooperatively the others go on | `a` and `b` owned nothing while `c` finished an 8 s batch; with cooperative-sticky, never |
| a static member restarted in time causes no rebalance; a slow one does | revokes of the others: none, then some |
| `group.protocol=consumer`: the broker assigns, incrementally | the group's assignment strategy; one partition moved |

**Exercises:** [The range assignor](exercises/range_assignor.ipynb),
[An active/passive assignment](exercises/failover_assignment.ipynb). **Next:**
[06 · Commits and delivery semantics](06_commits_and_delivery_semantics.ipynb).
""")
nb.code("""
predict.summary("05")
""")
nb.code("""
producer = p = None  # the clients go first, so they do not complain about brokers going away
cluster.stop()
""")

