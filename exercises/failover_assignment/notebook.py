"""The exercise notebook failover_assignment: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · An active/passive assignment", exercise="failover_assignment")

nb.md("""
# Exercise · An active/passive assignment

Some consumers must not share work: a job that needs all of a topic's partitions in one process
(a single-writer ledger, an in-memory aggregate), with hot standbys ready to take over. That is
an **active/passive** strategy: *all* partitions go to the live member with the **highest
priority**; the others stay idle until it dies.

Kafka's Java client would let you write this as a custom assignor. The Python client
(librdkafka) only runs its built-in assignors, so here the members use **`assign()`**: each one
learns who is alive, computes the assignment itself, and assigns itself its share. You write the
assignment function, then the step each member runs to follow it; the grader kills the active
member of a live group and checks that the standby takes over and no record is lost.

*About 25 minutes. Goes with lesson 05.*
""")
nb.md("""
## Setup
""")
nb.code("""
from confluent_kafka import TopicPartition

import labkit
from labkit import groupviz
from labkit.grading import exercise

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("failover_assignment")
""")
nb.md("""
## Task 1 — `failover_assign(members, partitions)`

`members` maps each **live** member's name to its priority (an `int`, higher wins); `partitions`
is a list of `(topic, partition)`. Return `{member: [(topic, partition), ...]}` with **every**
member as a key: the active member gets all partitions, sorted; the others get `[]`.

* Ties: the member whose **name sorts first** wins. Every member runs this function on its own,
  so all of them must reach the same answer whatever order they list things in.
* No members: return `{}`.
""")
nb.code('''
def failover_assign(members: dict[str, int], partitions: list[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    ### BEGIN SOLUTION
    if not members:
        return {}
    active = min(members, key=lambda name: (-members[name], name))
    return {name: sorted(partitions) if name == active else [] for name in members}
    ### END SOLUTION
''')
nb.code("""
failover_assign({"primary": 10, "standby": 5}, [("payments", 1), ("payments", 0)])
""")
nb.md("""
## Task 2 — `follow(consumer, me, live, partitions)`

Each member runs a loop (written for you, see below) that every half second reads who is alive,
`live = {name: priority}`, and calls `follow(consumer, me, live, partitions)`. Make `consumer`
consume exactly what `failover_assign` gives `me`, and return that list:

* if it differs from what the consumer has now (`consumer.assignment()`), call
  `consumer.assign([TopicPartition(topic, partition), ...])`, or `consumer.unassign()` when `me`
  gets nothing; leave the consumer alone when nothing changed;
* don't set an offset in the `TopicPartition`: then the consumer starts from the group's
  **committed** offset (the loop commits after each batch), which is what makes a takeover
  lose nothing.
""")
nb.code('''
def follow(consumer, me: str, live: dict[str, int], partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
    ### BEGIN SOLUTION
    mine = failover_assign(live, partitions).get(me, [])
    current = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
    if current != mine:
        if mine:
            consumer.assign([TopicPartition(topic, partition) for topic, partition in mine])
        else:
            consumer.unassign()
    return mine
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.md("""
## See it on a live group

The cell below is the lab's harness (you don't need to change it): `Team` runs each member as a
process. For liveness every member also joins a small **lease group** (an ordinary subscribed
consumer whose client id carries its name and priority) and reads the live members back from the
broker with `describe_consumer_groups`; a member that dies drops out of it after
`session.timeout.ms` (6 s here). Every half second a member calls your `follow`, then consumes
what it was assigned, logs each record and commits after each batch. The grader runs its members
the same way.
""")
nb.code("""
import gc
import json
import multiprocessing
import os
import signal
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from labkit.waiting import Wait
from labkit.workloads import read_events, record_event

SESSION_TIMEOUT_MS = 6000


def live_members(admin, lease_group):
    \"\"\"{name: priority} of the lease group's members, as the broker lists them.\"\"\"
    desc = admin.describe_consumer_groups([lease_group], request_timeout=5)[lease_group].result(timeout=5)
    live = {}
    for m in desc.members:
        name, _, priority = m.client_id.rpartition(":")
        if name and priority.lstrip("-").isdigit():
            live[name] = int(priority)
    return live


def run_member(bootstrap, topic, partitions, lease_topic, group, name, priority, workdir, follow):
    \"\"\"One member (in its own process): the lease, then follow() every half second, consume, log, commit.\"\"\"
    gc.freeze()  # clients this process inherited are never finalised here (it has none of their threads)
    lease = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-lease", "client.id": f"{name}:{priority}",
                      "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 500})
    lease.subscribe([lease_topic])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    work = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "client.id": name})
    wanted = [(topic, p) for p in range(partitions)]
    base = Path(workdir)
    log = (base / f"{name}.log").open("a", buffering=1)
    events = base / f"{name}.events.jsonl"
    record_event(events, "start")
    last = 0.0
    while True:
        lease.poll(0.05)
        if time.monotonic() - last > 0.5:
            last = time.monotonic()
            try:
                live = live_members(admin, f"{group}-lease")
            except Exception:  # the coordinator is busy: ask again next time
                continue
            held = {(tp.topic, tp.partition) for tp in work.assignment()}
            follow(work, name, live, wanted)
            now = {(tp.topic, tp.partition) for tp in work.assignment()}
            if held - now:
                record_event(events, "revoke", held - now)
            if now - held:
                record_event(events, "assign", now - held)
            (base / f"{name}.status.json").write_text(json.dumps({"live": live, "mine": sorted(now)}))
        if not work.assignment():
            continue
        batch = [m for m in work.consume(num_messages=20, timeout=0.2) if not m.error()]
        for msg in batch:
            time.sleep(0.005)
            log.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\\n")
        if batch:
            work.commit(asynchronous=False)


class Team:
    \"\"\"Active/passive members as processes, each running your follow().\"\"\"

    def __init__(self, cluster, topic, follow):
        self.cluster, self.topic, self.follow = cluster, topic, follow
        self.partitions = len(cluster.describe_topic(topic))
        tag = uuid.uuid4().hex[:6]
        self.group = f"team-{tag}"
        self.lease_topic = cluster.create_topic(f"lease-{tag}", partitions=1)
        self._files = tempfile.TemporaryDirectory(prefix="team-")  # removed once the team is gone
        self.workdir = Path(self._files.name)
        self.procs = {}

    def start(self, name, priority):
        gc.collect()  # the kernel's own garbage is finalised in the kernel, not in the member process
        proc = multiprocessing.get_context("fork").Process(target=run_member, daemon=True, args=(
            self.cluster.bootstrap_servers, self.topic, self.partitions, self.lease_topic, self.group, name,
            priority, str(self.workdir), self.follow))
        proc.start()
        self.procs[name] = proc

    def kill(self, name):
        proc = self.procs[name]
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(10)
            record_event(self.workdir / f"{name}.events.jsonl", "killed")

    def stop(self):
        for name in list(self.procs):
            self.kill(name)

    def mine(self, name):
        \"\"\"The partitions a running member consumes.\"\"\"
        if not self.procs[name].is_alive():
            return []
        try:
            return [tuple(x) for x in json.loads((self.workdir / f"{name}.status.json").read_text())["mine"]]
        except (OSError, ValueError):
            return []

    def live(self, name):
        \"\"\"The members (name: priority) a member saw alive at its last look.\"\"\"
        try:
            return json.loads((self.workdir / f"{name}.status.json").read_text())["live"]
        except (OSError, ValueError):
            return {}

    def events(self):
        out = [e for name in self.procs for e in read_events(self.workdir / f"{name}.events.jsonl", name)]
        return sorted(out, key=lambda e: e.t)

    def wait(self, condition, what, timeout=40.0):
        \"\"\"Wait until condition(); the seconds it took.\"\"\"
        def members_alive():
            dead = [n for n, p in self.procs.items() if p.exitcode not in (None, -signal.SIGKILL)]
            if dead:
                raise RuntimeError(f"member {dead[0]} exited with code {self.procs[dead[0]].exitcode}: "
                                   "did follow() or failover_assign() raise?")

        def holdings():
            return "; ".join(f"{n} holds {self.mine(n) or 'nothing'} and sees {sorted(self.live(n)) or 'nobody'} alive"
                             for n in self.procs)

        start = time.monotonic()
        Wait(what, timeout=timeout, interval=0.2, check=members_alive, evidence=holdings,
             hint="Below: what each member holds and whom it sees alive. A member that sees who is alive but "
                  "does not hold what failover_assign() gives it points at follow(); one that still sees a "
                  "killed member alive, at a busy machine: run the cell again.").until(condition)
        return time.monotonic() - start

    def logged(self, name):
        \"\"\"How many records a member has processed (lines of its log).\"\"\"
        path = self.workdir / f"{name}.log"
        return len(path.read_text().splitlines()) if path.exists() else 0
""")
nb.md("""
Start a primary and a standby, kill the primary, and watch the standby take over:
""")
nb.code("""
topic = cluster.create_topic("payments-demo", partitions=3, exist_ok=True)
producer = cluster.producer()
for i in range(300):
    producer.produce(topic, key=str(i), value=f"payment-{i:04d}")
producer.flush(10)

team = Team(cluster, topic, follow)
team.start("primary", 10)
try:
    # the standby starts once the primary consumes: alone in the lease group, it would rightly be the active one
    team.wait(lambda: len(team.mine("primary")) == 3, "the primary taking every partition")
    team.start("standby", 5)
    team.wait(lambda: team.logged("primary") >= 50, "the primary processing records")
    team.wait(lambda: len(team.live("standby")) == 2, "the standby seeing the primary alive")
    killed = time.time()
    team.kill("primary")
    took = team.wait(lambda: len(team.mine("standby")) == 3, "the standby taking over", timeout=30)
    print(f"the standby took over {took:.1f} s after the primary died")
finally:
    team.stop()
groupviz.rebalance_timeline(team.events(), t0=killed, marks={"primary killed": killed},
                            title="Active/passive: the standby takes over (seconds after the kill)")
""")
nb.md("""
## Task 3 — what `assign()` gives up

The members above assign themselves with `assign()` instead of letting a group assignor do it.
For each statement below, decide whether it is true of this design: set `ANSWERS` to a dict with
every key of `STATEMENTS` and `True` or `False` for each. The grader scores all six together
(every one right, or no points), and does not say which ones were wrong.
""")
nb.code("""
STATEMENTS = {
    "no_rebalance": "The work partitions move without a rebalance: no on_revoke callback runs for them.",
    "zombie_fenced": "A member that is still running after being replaced is fenced: the broker refuses its commits.",
    "own_detection": "Failover waits for the application's own liveness check (here: the lease group's session).",
    "overlap": "For a moment, two members may consume the same partition.",
    "commits_refused": "The broker refuses commits from consumers that use assign(): offsets must be kept elsewhere.",
    "assignor_protocol": "A custom assignor in the Java client would run inside the group's rebalance, so "
                         "membership and revocation before reassignment would come from the group protocol.",
}
""")
nb.code('''
### BEGIN SOLUTION
ANSWERS = {"no_rebalance": True, "zombie_fenced": False, "own_detection": True, "overlap": True,
           "commits_refused": False, "assignor_protocol": True}
### END SOLUTION
''')
nb.code("""
cluster.stop()
""")
nb.get_graded()
