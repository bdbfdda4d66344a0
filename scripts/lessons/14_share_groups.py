"""Source of notebooks/14_share_groups.ipynb: build it with `python scripts/build_notebooks.py 14`."""

from labkit.authoring import Notebook

nb = Notebook("14 · Share groups: queues on Kafka",
              summary="A consumer group and a share group on the same topic, a share consumer by hand, implicit and "
                      "explicit acknowledgement (accept, release, reject), delivery counts, the record lock and a "
                      "frozen member, a crashed one, poison records archived, per-key order given up, and when to "
                      "choose which.",
              minutes=40)

nb.md("""
# 14 · Share groups: queues on Kafka

Course material says that if you want "a queue with some workers processing the task specified in
the message and ack the message atomically", that is "definitely not meant for Kafka". It was true
when it was written: a consumer group gives each partition to one member, and a member can only say
"I got this far" (an offset), never "this one record is done".

Kafka 4.2 made **share groups** (KIP-932) generally available. Many consumers share one partition;
each record is *acquired* under a time-limited lock and *acknowledged* one by one — accepted,
released for another try, or rejected — with a delivery count and a limit. This lesson puts the old
claim and the new fact side by side on the live cluster. Before each measurement, lock in what you
expect.

*About 40 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json
import os
import random
import time
import uuid

import pandas as pd
from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer, TopicPartition

import labkit
from labkit import admin, predict, sharegroups
from labkit.sharegroups import ShareGroup, produce_jobs, records_timeline
from labkit.waiting import Wait
from labkit.workloads import Group

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster("single-broker")
fresh = lambda name: f"{name}-{uuid.uuid4().hex[:6]}"   # new topics and groups each time a cell runs
cluster
""")
nb.md("""
Share groups are a feature the cluster turns on (`share.version`, finalized like any Kafka feature).
The broker also bounds what a group may set for itself: how long a record stays locked, how often it
may be delivered, how often members heartbeat. This lab lowers the bounds so that things happen
within seconds (`environments/lab-defaults.toml`):
""")
nb.code("""
features = {line.split()[1]: line for line in cluster.tool("kafka-features", "describe").stdout.splitlines()
            if line.startswith("Feature:")}
share_level = int(features["share.version"].split("FinalizedVersionLevel:")[1].split()[0])
bounds = admin.describe_configs(cluster.admin(), "broker", "1")
pd.Series({k: v for k, v in sorted(bounds.items())
           if k.startswith("group.share.") and any(w in k for w in ("lock.duration", "delivery.count", "heartbeat"))},
          name="broker setting")
""")
nb.code("""
print("share groups are on: share.version is finalized:", share_level >= 1)
""", check=True)

nb.md("""
## One topic, two kinds of group

A job topic with 2 partitions. Six members of a **consumer group** (lesson 05's member processes)
and six members of a **share group** (`labkit.sharegroups`: each member a process running a
`ShareConsumer`) read it; every job takes 50 ms of work. Each group gets every job — groups never
share records with each other — and the jobs are sent once both groups have settled, so both start
at the same moment, on the same machine.
""")
nb.code("""
q_busy = predict.ask("14.busy-members", "Both groups have six members on a topic of 2 partitions. How many of the "
                     "share group's six members get jobs?", choices=[1, 2, 3, 6])
q_busy
""")
nb.code("""
jobs_topic = cluster.create_topic(fresh("jobs"), partitions=2)
classic, queue = Group(cluster, jobs_topic, fresh("classic")), ShareGroup(cluster, jobs_topic, fresh("queue"))
names = ["ada", "bob", "cyd", "dan", "eve", "fay"]
try:
    for name in names:
        classic.start_member(name, process_ms=50, batch=1)
        queue.start_member(name, max_records=1)
    classic.wait_settled(6, quiet=1.5)
    queue.wait_joined(6, quiet=1)

    sent, finished = time.time(), {}   # the members start working while the jobs are being sent
    ids = produce_jobs(cluster, jobs_topic, [{"id": f"job-{i:03d}", "ms": 50} for i in range(60)])
    sending = time.time() - sent

    def both_finished():
        done = {"consumer group": {json.loads(v)["id"] for v in classic.processed()},
                "share group": set(queue.processed())}
        for group, jobs_done in done.items():
            if group not in finished and set(ids) <= jobs_done:
                finished[group] = time.time() - sent
        return len(finished) == 2

    Wait(f"both groups to finish {len(ids)} jobs", timeout=120, interval=0.1).until(both_finished)
    # A member counts a job done before its commit reaches the broker: read the broker's view
    # (kafka-share-groups, while the members are still there) once it holds every acknowledgement.
    lags = []
    def acknowledged():
        seen = queue.describe()
        lags.append(seen.total_lag)
        return seen if seen.total_lag == 0 else None
    view = Wait("the broker to count every job acknowledged (lag 0)", timeout=60, interval=0.5,
                evidence=lambda: f"lag seen in each read: {lags}").until(acknowledged)
finally:
    classic.stop()
    queue.stop()
per_member = pd.DataFrame({"consumer group": {n: len(m.processed()) for n, m in classic.members.items()},
                           "share group": queue.per_member()})
per_member.T
""")
nb.code("""
busy = {group: int((per_member[group] > 0).sum()) for group in per_member}
speed = pd.DataFrame({group: {"members with jobs": busy[group], f"seconds for {len(ids)} jobs": round(s, 2),
                              "jobs per second": round(len(ids) / s, 1)} for group, s in finished.items()}).T
print(f"sending the {len(ids)} jobs took {sending:.2f} s (a group cannot finish before that); load average "
      f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
speed
""")
nb.code("""
print("consumer group: only 2 of its 6 members got jobs, one per partition:", busy["consumer group"] == 2)
print("share group: all 6 members got jobs:", busy["share group"] == 6)
print("every job was done by each group:", per_member.sum().tolist() == [len(ids), len(ids)])
""", check=True)
nb.code("""
q_busy.reveal(busy["share group"], "In a share group several members fetch from the same partition; the broker hands "
              "out records one by one, each to one member, locked while it works on it.",
              expected=6)
""")
nb.md("""
A consumer group scales with **partitions**: the four members beyond two partitions wait, idle, for
someone to leave. A share group scales with **members**: the throughput table above is the same jobs
on the same topic, done by more hands. The broker's own view of the share group, from Kafka's
`kafka-share-groups --describe` (labkit has to run the Java tool: librdkafka has no admin API for
share groups yet) — members spread over both partitions, and for each partition a start offset and
the **lag**, the records not yet acknowledged. A member counts a job done before its
acknowledgement reaches the broker (it commits asynchronously, without waiting for the answer), so the cell
above read the view until the broker's lag was 0; the first line below shows the lag of each read:
""")
nb.code("""
print(f"group {view.id}: {view.state}, coordinator broker {view.coordinator}, {len(view.members)} members; "
      f"lag in each read after the last job was done: {lags}")
view.to_frame()
""")
nb.code("""
print("the broker lists all 6 share members:", len(view.members) == 6)
print("every partition has several members:", all(len(r.split(", ")) > 1 for r in view.to_frame()["members"]))
print("nothing left to acknowledge (lag 0):", view.total_lag == 0)
""", check=True)

nb.md("""
## A share consumer by hand

The member processes run a loop you can write yourself. A `ShareConsumer` polls a **batch**; in
`explicit` mode each record must be acknowledged — `ACCEPT` (done), `RELEASE` (give it back for
another try) or `REJECT` (never deliver it again) — and `commit_sync()` sends the acknowledgements
and returns the broker's answer per partition. `delivery_count()` says how often the record has
been handed out. `max.poll.records` asks for at most that many records per poll.

One consumer, `max.poll.records` 5, on a topic holding 20 jobs sent in **one** producer batch,
then 20 sent one per batch:
""")
nb.code("""
q_batch = predict.ask("14.first-poll", "max.poll.records is 5. How many records does the first poll return?",
                      choices=[1, 5, 20, 40])   # the producer's batching decides
q_batch
""")
nb.code("""
by_hand, hand_group = cluster.create_topic(fresh("by-hand"), partitions=1), fresh("by-hand")
batched = cluster.producer(linger_ms=200)
for i in range(20):
    batched.produce(by_hand, value=json.dumps({"id": f"batched-{i:02d}"}))
batched.flush(10)
produce_jobs(cluster, by_hand, [{"id": f"single-{i:02d}"} for i in range(20)])   # one record per batch
sharegroups.configure_group(cluster, hand_group, auto_offset_reset="earliest")  # default latest: new records only

first = sharegroups.share_consumer(cluster, hand_group, client_id="first", share_acknowledgement_mode="explicit",
                                   max_poll_records=5)
second = sharegroups.share_consumer(cluster, hand_group, client_id="second", share_acknowledgement_mode="explicit",
                                    max_poll_records=5)
first.subscribe([by_hand])
second.subscribe([by_hand])
polls, fate, seen = [], {}, []   # each poll of `first`; what `first` did with each offset; what `second` got

def poll_first():
    batch = [m for m in first.poll(1.0) if m.error() is None]
    if batch:
        polls.append([json.loads(m.value())["id"] for m in batch])
    for m in batch:
        first.acknowledge(m, AcknowledgeType.ACCEPT)
        fate[m.offset()] = "ACCEPT"
    first.commit_sync(10)
    return len(polls) >= 2 and any(p[0].startswith("single") for p in polls)

Wait("two polls of the first consumer, one of them from the single jobs", timeout=60, interval=0).until(poll_first)
pd.DataFrame({"records": [len(p) for p in polls], "first": [p[0] for p in polls], "last": [p[-1] for p in polls]},
             index=[f"poll {i + 1}" for i in range(len(polls))])
""")
nb.code("""
print("the first poll returned the whole producer batch, more than max.poll.records:", len(polls[0]) == 20)
print("later polls of jobs sent one per batch returned at most 5:", all(len(p) <= 5 for p in polls[1:]))
""", check=True)
nb.code("""
q_batch.reveal(len(polls[0]), "The broker acquires whole record batches, and librdkafka's max.poll.records is a "
               "soft bound: 20 records the producer sent as one batch went to one consumer at once. A queue's "
               "producer sends jobs one per batch (labkit.sharegroups.produce_jobs: batch.num.messages=1), or "
               "one member grabs a whole batch while the others wait.",
               expected=predict.MEASURED)
""")
nb.md("""
Now the three acknowledgements. Five more jobs arrive; `first` takes its next records and accepts
all but two: one it **releases**, one it **rejects**. Then only `second` polls, until it has seen
everything left.
""")
nb.code("""
q_count = predict.ask("14.delivery-count", "The released record reaches the second consumer. What is its "
                      "delivery_count() there?", choices=[0, 1, 2, 5])
q_count
""")
nb.code("""
produce_jobs(cluster, by_hand, [{"id": fresh("more")} for _ in range(5)])
end = cluster.describe_topic(by_hand)[0].high_watermark
batch = []   # one poll's records: each must be acknowledged before the next poll (explicit mode)
Wait("the first consumer's next records", timeout=30, interval=0).until(
    lambda: batch.extend(m for m in first.poll(1.0) if m.error() is None) or batch)
released, rejected = batch[0], batch[1]
for m in batch:
    kind = "RELEASE" if m is released else "REJECT" if m is rejected else "ACCEPT"
    first.acknowledge(m, getattr(AcknowledgeType, kind))
    fate[m.offset()] = kind
answer = first.commit_sync(10)
print("the broker's answer per partition:", {f"{tp.topic}[{tp.partition}]": err or "ok" for tp, err in answer.items()})

def drain_second():
    for m in second.poll(1.0):
        if m.error() is None:
            seen.append({"offset": m.offset(), "job": json.loads(m.value())["id"], "delivery_count": m.delivery_count(),
                         "first did": fate.get(m.offset(), "")})
            second.acknowledge(m, AcknowledgeType.ACCEPT)
    second.commit_sync(10)
    done_by_first = {o for o, kind in fate.items() if kind != "RELEASE"}
    return done_by_first | {s["offset"] for s in seen} >= set(range(end))   # every record of the topic

Wait("the second consumer to get everything left", timeout=60, interval=0).until(drain_second)
pd.DataFrame(seen)[lambda f: f.offset >= released.offset()].head(6)
""")
nb.code("""
again = [s for s in seen if s["offset"] == released.offset()]
print("the released record came back, to the other consumer:", len(again) == 1)
print("with its delivery count raised to 2:", again[0]["delivery_count"] == 2)
print("the rejected record never came back:", all(s["offset"] != rejected.offset() for s in seen))
""", check=True)
nb.code("""
q_count.reveal(again[0]["delivery_count"], "Every time the broker hands a record out it counts one delivery; the "
               "count travels with the record, whichever member gets it next.",
               expected=2)
""")
nb.md("""
Where does the broker keep all this? Not in the consumer: the **share coordinator** writes each
record's state to the internal topic `__share_group_state` — replicated, like `__consumer_offsets` —
so the state survives a broker restart. Its own records, decoded by Kafka's `kafka-dump-log
--share-group-state-decoder` (`labkit.sharegroups.record_fates`):
""")
nb.code("""
fates = sharegroups.record_fates(cluster, hand_group)
fates[fates.offset.isin([released.offset(), rejected.offset()])].assign(
    first_did=lambda f: f.offset.map(fate))
""")
nb.code("""
states = dict(zip(fates.offset, fates.state))
print("released, then accepted by the other consumer:", states[released.offset()] == "accepted")
print("rejected: archived, never delivered again:", states[rejected.offset()] == "archived")
""", check=True)

nb.md("""
## Implicit acknowledgement: every failure accepted

The default, `share.acknowledgement.mode=implicit`, acknowledges for you: the next `poll()` accepts
every record the last one returned, whatever your code did with it. Two groups of two members on
the same 30 jobs; every fifth job fails at its first attempt (a transient error). In the *implicit*
group nothing can be given back; in the *explicit* group a member releases what failed.
""")
nb.code("""
q_implicit = predict.ask("14.implicit-lost", "30 jobs, 6 of them fail once. How many jobs does the implicit "
                         "group never get done?", choices=[0, 3, 6, 30])
q_implicit
""")
nb.code("""
flaky_topic = cluster.create_topic(fresh("flaky"), partitions=1)
flaky = [{"id": f"flaky-{i:02d}", "ms": 20, "fails": 1 if i % 5 == 0 else 0} for i in range(30)]
groups = {"implicit": ShareGroup(cluster, flaky_topic, fresh("implicit")),            # both read every job
          "explicit (release failures)": ShareGroup(cluster, flaky_topic, fresh("explicit"))}
try:
    for mode, group in groups.items():
        for name in ("ada", "bob"):
            group.start_member(name, ack="implicit" if mode == "implicit" else "release", max_records=3)
    flaky_ids = produce_jobs(cluster, flaky_topic, flaky)
    for group in groups.values():
        group.wait_done([j["id"] for j in flaky if not j["fails"]])
        group.wait_idle(quiet=1.5)   # and whatever comes back after a release
finally:
    for group in groups.values():
        group.stop()
modes = {}
for mode, group in groups.items():
    ds = group.deliveries()
    modes[mode] = {"deliveries": len(ds), "failed attempts": sum(1 for d in ds if d.ok is False),
                   "delivered again": sum(1 for d in ds if d.count > 1),
                   "to the other member": sum(1 for d in ds if d.count > 1 and any(
                       e.offset == d.offset and e.count == d.count - 1 and e.member != d.member for e in ds)),
                   "jobs never done": len(set(flaky_ids) - set(group.processed()))}
pd.DataFrame(modes).T
""")
nb.code("""
implicit, explicit = modes["implicit"], modes["explicit (release failures)"]
print("implicit: the 6 failed jobs were accepted anyway, never done:", implicit["jobs never done"] == 6)
print("explicit: each released job came back and was done:",
      explicit["jobs never done"] == 0 and explicit["delivered again"] == 6)
""", check=True)
nb.code("""
q_implicit.reveal(implicit["jobs never done"], "Implicit mode is auto-commit for share groups: the acknowledgement "
                  "follows the poll, not the work. A crash is still safe (records not yet acknowledged come back), "
                  "but a failure cannot be given back: use explicit mode and RELEASE it.",
                  expected=6)
""")

nb.md("""
## The lock: a frozen member loses its records

A record handed to a member is locked for `share.record.lock.duration.ms` (a group setting; 30 s by
default, 2 s here). If the member does not acknowledge in time, the broker takes the record back and
hands it to someone else. Three members, 30 jobs of 200 ms, four records per poll. The first member
seen holding a few records is frozen (`SIGSTOP`: a long GC pause, a stalled VM), and resumed only
when the others have finished every job; another one, holding records too, is killed outright
(`SIGKILL`).
""")
nb.code("""
q_twice = predict.ask("14.frozen-twice", "A member holds a few unfinished jobs when it freezes (the lock is 2 s). "
                      "When it resumes, all 30 jobs are done. How many of the jobs it held get done twice?",
                      choices=["none", "some", "all of them"])
q_twice
""")
nb.code("""
lock_topic = cluster.create_topic(fresh("lock"), partitions=1)
locked = ShareGroup(cluster, lock_topic, fresh("lock"), record_lock_duration_ms=2000)
try:
    for name in ("ada", "bob", "cyd"):
        locked.start_member(name, max_records=4)
    locked.wait_joined(3, quiet=1)
    lock_ids = produce_jobs(cluster, lock_topic, [{"id": f"lock-{i:02d}", "ms": 200} for i in range(30)])

    def two_holding():   # freeze one member holding a few records and one holding some: then they hold still
        held = locked.held()
        frozen = next((n for n, h in held.items() if len(h) >= 2), None)
        killed = next((n for n, h in held.items() if h and n != frozen), None)
        if not (frozen and killed):
            return None
        for name in (frozen, killed):
            locked.freeze_member(name)
        if locked.held()[frozen] and locked.held()[killed]:
            return frozen, killed, time.time()
        for name in (frozen, killed):
            locked.resume_member(name)     # one of them had just finished its records: look again
        return None

    frozen, killed, frozen_at = Wait("two members holding records", timeout=30, interval=0.02).until(two_holding)
    frozen_held = {o for _, _, o in locked.held()[frozen]}
    crashed_held = {o for _, _, o in locked.held()[killed]}
    locked.crash_member(killed)
    crashed_at = time.time()
    locked.wait_done(lock_ids)   # by the third member, the frozen one's jobs among them once its lock ran out
    locked.resume_member(frozen)
    Wait("the frozen member to finish the jobs it held", timeout=60).until(lambda: all(
        d.done for d in locked.deliveries() if d.member == frozen and d.offset in frozen_held))
    lock_history = locked.fates(history=True)
finally:
    locked.stop()
deliveries = locked.deliveries()
took_over = {o: min(d.got for d in deliveries if d.offset == o and d.member != m)
             for m, held in ((frozen, frozen_held), (killed, crashed_held)) for o in held}
late = [d for d in deliveries if d.member == frozen and d.offset in frozen_held]
done_twice = sum(1 for o in frozen_held if sum(1 for d in deliveries if d.offset == o and d.ok) > 1)
rows = {f"{frozen} (frozen)": (frozen_held, frozen_at), f"{killed} (killed)": (crashed_held, crashed_at)}
print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
pd.DataFrame({who: {"records held": len(held), "taken over after (s)": round(min(took_over[o] for o in held) - at, 2),
                    "delivery count there": max(d.count for d in deliveries if d.offset in held)}
              for who, (held, at) in rows.items()}).T
""")
nb.code("""
records_timeline(deliveries, title=f"Who held which record: {frozen} froze, {killed} was killed (a bar without a "
                 "mark: never acknowledged)")
""")
nb.code("""
outcome = locked.outcome(lock_ids)
print("nothing lost:", outcome.lost == 0)
print("the frozen member's records went to others, delivered a second time:",
      all(any(d.offset == o and d.member != frozen and d.count >= 2 for d in deliveries) for o in frozen_held))
print("the killed member's records too:",
      all(any(d.offset == o and d.member != killed and d.count >= 2 for d in deliveries) for o in crashed_held))
print("after resuming, the frozen member finished the jobs it held, so they were done twice:",
      all(d.done for d in late) and done_twice == len(frozen_held))
""", check=True)
nb.code("""
q_twice.reveal("all of them" if done_twice == len(frozen_held) else "some" if done_twice else "none",
               f"{done_twice} of {len(frozen_held)}: the broker gave {frozen}'s records to others once the lock ran out; "
               f"{frozen} did not know, and finished them on waking up ({outcome.duplicated} jobs were done twice in all). "
               "Share groups deliver at least once, never exactly once.",
               expected="all of them")
""")
nb.md("""
Two different clocks. A **killed** member's connection closes, and the broker releases what it held
at once — well within the lock. A **frozen** member's connection stays open, so its records wait
for the lock to run out. The broker's own record of that moment is in `__share_group_state`: the
state `available` after the first delivery, written when the lock expired (the broker makes the
record available first and writes its state meanwhile):
""")
nb.code("""
lock_released = lock_history[lock_history.offset.isin(frozen_held) & (lock_history.state == "available")]
lock_released.assign(after_freeze_s=lambda f: (f.written - frozen_at).round(2)).drop(columns="written")
""")
nb.code("""
print("the broker recorded each of the frozen member's records as available again after its first delivery:",
      frozen_held <= set(lock_released[lock_released.deliveries == 1].offset))
""", check=True)

nb.md("""
## Poison records

A record that can never be processed — bad data, a bug — is a *poison* record. Lesson 06 sent one
to a retry topic and a dead-letter topic by hand; a consumer that simply retries it in place is
stuck: the partition's offset cannot move past it. A share group counts every delivery of every
record. One poison job at the head of a partition, good jobs behind it; two members that release
every job that fails — and, beside them, lesson 06's consumer retrying in place:
""")
nb.code("""
q_poison = predict.ask("14.poison-blocks", "The poison job comes first and fails every time; the members release "
                       "it each time. How many of the 30 good jobs behind it does the share group get done?",
                       choices=[0, "a few", 30])
q_poison
""")
nb.code("""
poison_topic = cluster.create_topic(fresh("poison"), partitions=1)
poison_ids = produce_jobs(cluster, poison_topic, [{"id": "poison", "ms": 20, "fails": 1000}] +
                          [{"id": f"good-{i:02d}", "ms": 20} for i in range(30)])
patient = ShareGroup(cluster, poison_topic, fresh("patient"), delivery_count_limit=3)
try:
    for name in ("ada", "bob"):
        patient.start_member(name, ack="release")
    patient.wait_done(poison_ids[1:])
    Wait("the poison job's third delivery to end", timeout=30).until(
        lambda: [d for d in patient.deliveries() if d.id == "poison" and d.count == 3 and d.done])
    poison_fates = patient.fates()
finally:
    patient.stop()
work = patient.deliveries()
share_took = max(d.done for d in work if d.done) - min(d.got for d in work)   # from its first job to its last

stuck = cluster.consumer(fresh("stuck"), enable_auto_commit=False)   # lesson 06's consumer
stuck.assign([TopicPartition(poison_topic, 0, 0)])      # the partition, from its first record
stuck_done, stuck_tries, until = 0, 0, time.time() + 60
while time.time() < until:
    msg = stuck.poll(0.2)
    if msg is None or msg.error():
        continue
    if not stuck_tries:
        until = time.time() + share_took      # from its first record on, the time the share group needed
    job = json.loads(msg.value())
    time.sleep(job["ms"] / 1000)
    if job.get("fails"):                      # it failed: try it again, in place
        stuck_tries += 1
        stuck.seek(TopicPartition(msg.topic(), msg.partition(), msg.offset()))
        continue
    stuck_done += 1
    stuck.commit(msg)
stuck.close()
tries = [(d.member, d.count, d.ack) for d in patient.deliveries() if d.id == "poison"]
print(f"in {share_took:.1f} s: the share group did {len(set(patient.processed()))} good jobs, the poison job was "
      f"delivered {len(tries)} times {tries}; the consumer retrying in place did {stuck_done}, after {stuck_tries} tries")
poison_fates.groupby("state").size().rename("records")
""")
nb.code("""
print("the poison job was delivered exactly 3 times:", len(tries) == 3)
print("the broker archived it:", poison_fates.state.iloc[0] == "archived" and poison_fates.deliveries.iloc[0] == 3)
print("all 30 good jobs were done and accepted:", set(poison_fates.state.iloc[1:]) == {"accepted"})
print("the consumer that retried in place did none of them:", stuck_done == 0)
""", check=True)
nb.code("""
q_poison.reveal(len(set(patient.processed())), f"Released records go back to the pool while the others flow on; "
                f"and the poison job was delivered {len(tries)} times: the group's share.delivery.count.limit (5 by "
                "default, 3 here). Released once more at the limit, the broker archived it instead of delivering it "
                "again. A member that knows a record is poison can REJECT it at once (the exercise poison_queue asks "
                "for a bounded number of attempts).",
                expected=30)
""")

nb.md("""
## What you give up: order per key

In a consumer group a key's records all go to one partition and are processed in order by its one
owner. In a share group the records of one partition are spread over members that work at different
speeds. Three keys (accounts), 24 jobs of 10 ms to 1.2 s, one partition, three members:
""")
nb.code("""
q_order = predict.ask("14.order", "Are the jobs of each account still done in the order they were sent?", kind="yes/no")
q_order
""")
nb.code("""
order_topic = cluster.create_topic(fresh("accounts"), partitions=1)
rng = random.Random(14)
keys = [f"acct-{i // 2}" for i in range(6)] + [f"acct-{rng.randrange(3)}" for _ in range(18)]
durations = [1200, 10] * 3 + [rng.choice([10, 60, 150]) for _ in range(18)]  # each account: a slow job, a quick one
ordered = ShareGroup(cluster, order_topic, fresh("accounts"))
try:
    for name in ("ada", "bob", "cyd"):
        ordered.start_member(name)
    ordered.wait_joined(3, quiet=1)
    order_ids = produce_jobs(cluster, order_topic, [{"id": f"{keys[i]}/{i:02d}", "ms": durations[i]}
                                                    for i in range(24)], keys=keys)
    ordered.wait_done(order_ids)
finally:
    ordered.stop()
finished_order = sorted((d for d in ordered.deliveries() if d.ok), key=lambda d: d.done)
per_key = {k: [d.offset for d in finished_order if d.key == k] for k in sorted(set(keys))}
inversions = sum(1 for offsets in per_key.values() for a, b in zip(offsets, offsets[1:]) if b < a)
pd.Series({k: " ".join(map(str, v)) for k, v in per_key.items()}, name="offsets in the order their work finished")
""")
nb.code("""
print("some account's jobs finished out of order:", inversions > 0)
""", check=True)
nb.code("""
q_order.reveal(inversions == 0, f"{inversions} times a job finished before an earlier job of the same account. A "
               "share group keeps no order per key: two jobs of one account run at once on different members.")
""")
nb.md("""
And **exactly-once**: a consumer group can put its offsets into a producer's transaction
(`send_offsets_to_transaction` with the consumer's `consumer_group_metadata()`, lesson 04), so
processing and output commit together. A share consumer's acknowledgements cannot join a
transaction, and — the frozen member above — a record can be worked on twice:
""")
nb.code("""
print("Consumer.consumer_group_metadata (for transactions):", hasattr(Consumer, "consumer_group_metadata"))
print("ShareConsumer.consumer_group_metadata:", hasattr(ShareConsumer, "consumer_group_metadata"))
""", check=True)

nb.md("""
## When to choose which

Every number below comes from this run:
""")
nb.code("""
choice = pd.DataFrame({
    "consumer group": {
        "members working (6 members, 2 partitions)": f"{busy['consumer group']} of 6",
        f"{len(ids)} jobs of 50 ms": f"{finished['consumer group']:.1f} s",
        "a record that always fails": f"partition stuck: {stuck_done} of 30 jobs behind it done",
        "a member freezes": "its partitions wait for the session timeout (lesson 05)",
        "order per key": "kept (one owner per partition)",
        "exactly once with transactions": "yes",
    },
    "share group": {
        "members working (6 members, 2 partitions)": f"{busy['share group']} of 6",
        f"{len(ids)} jobs of 50 ms": f"{finished['share group']:.1f} s",
        "a record that always fails": f"archived after {len(tries)} deliveries, 30 of 30 done",
        "a member freezes": f"its records go to others after the lock ({outcome.duplicated} done twice)",
        "order per key": f"lost ({inversions} jobs finished before an earlier one of their account)",
        "exactly once with transactions": "no: at least once",
    }})
choice
""")
nb.md("""
* Choose a **consumer group** for streams: events whose order per key matters (an account's
  balance), stateful processing, exactly-once pipelines with transactions.
* Choose a **share group** for work queues: independent jobs, more workers than partitions, slow or
  uneven work, per-job retries and poison jobs handled by the broker.

The same topic can have both at once: the groups never take records from each other.

## What you saw

| claim | shown by |
|---|---|
| share groups are part of Kafka 4.2+ (KIP-932), turned on by `share.version` | `kafka-features describe` |
| a consumer group leaves members beyond the partition count idle; a share group keeps them all busy | 6 + 6 members on one 2-partition topic, jobs counted per member, time measured |
| the broker hands out whole producer batches; `max.poll.records` is a soft bound | a first poll holding a whole batch |
| ACCEPT, RELEASE and REJECT; a released record returns to another member with its delivery count raised | two share consumers by hand, `delivery_count()` |
| record states live in `__share_group_state` | `kafka-dump-log --share-group-state-decoder` |
| implicit acknowledgement accepts failures too | failed jobs never done, every one done with RELEASE |
| a frozen member loses its records after the lock; a killed one at once; work can be done twice | freeze, kill, the broker's `available` records, the timeline |
| a poison record is archived at the delivery limit and does not block the rest | its deliveries counted, the good jobs behind it done; a consumer retrying in place did none |
| order per key and transactions are given up | jobs of one account out of order; no group metadata for transactions |

The graded exercise *poison_queue* asks for a worker pool that retries transient failures, rejects
poison jobs after a bounded number of attempts, and never acknowledges a job before its work is done.
""")
nb.code("""
predict.summary("14")
""")
nb.code("""
first.close()
second.close()
cluster.stop()
""")
