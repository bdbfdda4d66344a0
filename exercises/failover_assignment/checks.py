"""Checks for failover_assignment: an active/passive assignment, pure and then on live member processes.

The Python client cannot plug a custom assignor into a group's rebalance, so the members use
``Consumer.assign()``. Each member runs in a child forked from the learner's kernel (the task
:func:`start_member`) and gets there what a custom assignor would have had from the group:

* liveness: it also joins a *lease group* (a normal subscribed consumer on a one-partition topic,
  client id ``<name>:<priority>``) and reads the live members back from the broker with
  ``describe_consumer_groups``: a member that dies drops out after ``session.timeout.ms``;
* every half second it calls the learner's ``follow(consumer, me, live, partitions)``, which
  decides with ``failover_assign`` what this member consumes and applies it with ``assign()``;
* it processes what it is assigned, logging each record, and commits after each batch.

The grader starts and kills members itself and reads their logs and status files. The
reference answer is not here: hidden checks compare with it on the trainer's machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from labkit.grading import check, harness, Rules
from labkit.waiting import Deadline

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: The lab's assignors and consumer members are other exercises' answers; nothing here needs them
#: (the notebook's own harness cell uses the event log helpers of labkit.workloads).
RULES = Rules(forbid=["labkit.assignors", "labkit.workloads", "labkit.apps"], allow=["read_events", "record_event"])

SESSION_TIMEOUT_MS = 6000


# ---------------------------------------------------------------- tasks (run in the learner's kernel)


def start_member(user, bootstrap, topic, partitions, lease_topic, group, name, priority, workdir, session_ms):
    """A task: one member in a child forked from the kernel, running the learner's ``follow``; returns its pid."""

    from labkit.grading.harness import forked

    follow = user["follow"]

    def body():
        import json
        import time
        from pathlib import Path

        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        lease_group = f"{group}-lease"
        base = Path(workdir)

        def event(kind, parts=()):
            with (base / f"{name}.events.jsonl").open("a") as fh:
                fh.write(json.dumps({"t": time.time(), "kind": kind, "partitions": sorted(parts)}) + "\n")

        def live_members(admin):
            desc = admin.describe_consumer_groups([lease_group], request_timeout=5)[lease_group].result(timeout=5)
            live = {}
            for m in desc.members:
                who, _, prio = m.client_id.rpartition(":")
                if who and prio.lstrip("-").isdigit():
                    live[who] = int(prio)
            return live

        lease = Consumer({"bootstrap.servers": bootstrap, "group.id": lease_group, "client.id": f"{name}:{priority}",
                          "session.timeout.ms": session_ms, "heartbeat.interval.ms": 500})
        lease.subscribe([lease_topic])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        work = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "client.id": name})
        wanted = [(topic, p) for p in range(partitions)]
        log = (base / f"{name}.log").open("a", buffering=1)
        event("start")
        last, steps = 0.0, 0
        try:
            while True:
                lease.poll(0.05)
                if time.monotonic() - last > 0.5:
                    last = time.monotonic()
                    try:
                        live = live_members(admin)
                    except Exception:  # noqa: BLE001 - the coordinator is busy: ask again next time
                        continue
                    held = {(tp.topic, tp.partition) for tp in work.assignment()}
                    follow(work, name, live, list(wanted))
                    now = {(tp.topic, tp.partition) for tp in work.assignment()}
                    if held - now:
                        event("revoke", held - now)
                    if now - held:
                        event("assign", now - held)
                    steps += 1  # follow() calls made so far: how far this member has got, whatever the load
                    (base / f"{name}.status.json").write_text(json.dumps({"live": live, "mine": sorted(now),
                                                                          "steps": steps}))
                if not work.assignment():
                    continue
                batch = [m for m in work.consume(num_messages=20, timeout=0.2) if not m.error()]
                for msg in batch:
                    time.sleep(0.005)
                    log.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
                if batch:
                    work.commit(asynchronous=False)
        finally:
            log.close()

    return forked(body)


def reap_all(user, pids):
    """A task: ``{pid: exit status}`` of the kernel's children in ``pids`` that have ended."""
    import os

    ended = {}
    for pid in pids:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            ended[pid] = -1
            continue
        if done:
            ended[pid] = os.waitstatus_to_exitcode(status)
    return ended


# ---------------------------------------------------------------- the grader's side


def normal(result: Any) -> dict[str, list[tuple[str, int]]]:
    assert isinstance(result, dict), \
        f"return a dict of member -> list of (topic, partition), not {type(result).__name__}"
    out = {}
    for member, tps in result.items():
        assert isinstance(tps, (list, tuple)), f"{member!r} maps to a {type(tps).__name__}; give it a list"
        out[member] = sorted(tuple(tp) for tp in tps)
    return out


class Members:
    """Member processes of one group, started and killed by the grader; what they did, from their files."""

    def __init__(self, ns: Any, topic: str, partitions: int = 3) -> None:
        self.ns, self.cluster, self.topic, self.partitions = ns, ns.cluster, topic, partitions
        tag = uuid.uuid4().hex[:6]
        self.group = f"team-{tag}"
        self.lease_topic = self.cluster.create_topic(f"lease-{tag}", partitions=1)
        self.workdir = Path(tempfile.mkdtemp(prefix="labkit-failover-"))
        self.pids: dict[str, int] = {}

    def start(self, name: str, priority: int) -> None:
        (self.workdir / f"{name}.status.json").unlink(missing_ok=True)  # a restarted member reports afresh
        self.pids[name] = self.ns.run(start_member, self.cluster.bootstrap_servers, self.topic, self.partitions,
                                      self.lease_topic, self.group, name, priority, str(self.workdir),
                                      SESSION_TIMEOUT_MS)

    def kill(self, name: str) -> None:
        pid = self.pids.pop(name, None)
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = Deadline(15)
        while pid not in self.ns.run(reap_all, [pid]):
            assert not deadline.expired(), f"the grader could not reap the killed member {name}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill every member still running and remove their files."""
        try:
            for name in list(self.pids):
                self.kill(name)
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def status(self, name: str) -> dict[str, Any]:
        try:
            return json.loads((self.workdir / f"{name}.status.json").read_text())
        except (OSError, ValueError):
            return {"live": {}, "mine": []}

    def mine(self, name: str) -> list[tuple[str, int]]:
        """What a running member consumes (assign()ed) at its last step; nothing for a dead one."""
        return [tuple(x) for x in self.status(name)["mine"]] if name in self.pids else []

    def steps(self, name: str) -> int:
        """How many times a member has called follow() (its status counts them)."""
        return int(self.status(name).get("steps", 0))

    def processed(self, name: str) -> list[str]:
        path = self.workdir / f"{name}.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [line.split(" ", 2)[2] for line in lines if line.count(" ") >= 2]

    def assigned_after(self, name: str, t: float) -> bool:
        path = self.workdir / f"{name}.events.jsonl"
        for line in (path.read_text().splitlines() if path.exists() else []):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("kind") == "assign" and e.get("t", 0) > t:
                return True
        return False

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = 40.0,
             refute: Optional[Callable[[], Optional[str]]] = None) -> float:
        """Wait until ``condition()``; the seconds it took. AssertionError naming ``what`` if it never happens,
        as soon as a member process ends by itself (follow() or failover_assign() raised), or as soon as
        ``refute()`` returns what already shows the answer wrong (its text is the message)."""
        start, deadline = time.monotonic(), Deadline(timeout)  # a quiet machine's seconds
        while True:
            ended = self.ns.run(reap_all, list(self.pids.values()))
            for name, pid in list(self.pids.items()):
                if pid in ended:
                    del self.pids[name]
                    error = self.ns.run(harness.child_error, pid)
                    said = f": {error}" if error else ""
                    raise AssertionError(f"member {name} exited with code {ended[pid]}{said} -- did follow() or "
                                         "failover_assign() raise?")
            if condition():
                return time.monotonic() - start
            wrong = refute() if refute is not None else None
            if wrong:
                raise AssertionError(wrong)
            if deadline.expired():
                raise AssertionError(f"{what} did not happen within {deadline}")
            time.sleep(0.3)


class Misassigned:
    """What refutes a team's ``follow()`` long before a wait runs out: a running member whose own status lists it
    among the live members and shows it consuming other than ``expected(live)`` gives it, and still so after
    :data:`SETTLE` quiet seconds (a status that cannot be judged -- the member not among its own live members, a
    file being rewritten -- neither clears nor ends that). A member writes the live members ``follow()`` was given
    and the assignment it left together, so one such status is already a wrong answer; the seconds leave room for
    a ``follow()`` that hands over in a step of its own."""

    #: Quiet seconds a member may show a wrong assignment before the check fails.
    SETTLE = 5.0

    def __init__(self, team: "Members", expected: Callable[[dict[str, int]], dict[str, list]]) -> None:
        self.team, self.expected = team, expected
        self.since: dict[str, Deadline] = {}

    def __call__(self) -> Optional[str]:
        self.since = {name: d for name, d in self.since.items() if name in self.team.pids}  # a restart starts afresh
        for name in list(self.team.pids):
            status = self.team.status(name)  # one read: the live members and the assignment follow() left
            live, mine = status["live"], [tuple(tp) for tp in status["mine"]]
            due = self.expected(live).get(name) if name in live else None
            if due is None:
                continue
            due = sorted(tuple(tp) for tp in due)
            if mine == due:
                self.since.pop(name, None)
                continue
            if self.since.setdefault(name, Deadline(self.SETTLE)).expired():
                return (f"with {live} live (names and priorities), follow() left {name} consuming {mine} for "
                        f"{self.since[name]}; it should consume {due}")
        return None


def produce(cluster, topic: str, start: int, count: int, tag: str) -> list[str]:
    producer = cluster.producer(enable_idempotence=True)
    values = [f"{tag}-{i:05d}" for i in range(start, start + count)]
    for v in values:
        producer.produce(topic, key=v, value=v)
        producer.poll(0)
    harness.acknowledged(producer)
    return values


PARTS = [("orders", 2), ("orders", 0), ("orders", 1), ("refunds", 0)]


# ---------------------------------------------------------------- visible checks


@check("active_gets_everything", points=2,
       hint="Find the member with the highest priority; it gets every partition, everyone else an empty list.")
def active_gets_everything(ns):
    """Three members with priorities 1, 5, 3: the one with 5 gets all partitions (sorted), the others none."""
    got = normal(ns.failover_assign({"a": 1, "b": 5, "c": 3}, list(PARTS)))
    assert got == {"a": [], "b": sorted(PARTS), "c": []}, f"got {got}"


@check("ties_and_no_members", points=1,
       hint="Break ties by member name (the smallest wins) so every member computes the same answer; "
            "no members means an empty dict.")
def ties_and_no_members(ns):
    """Equal priorities are broken by name, the same on every call; no members give {}; no partitions give []."""
    got = normal(ns.failover_assign({"west": 2, "east": 2, "north": 1}, list(PARTS)))
    assert got == {"west": [], "east": sorted(PARTS), "north": []}, f"tie between east and west: got {got}"
    again = normal(ns.failover_assign({"north": 1, "east": 2, "west": 2}, list(reversed(PARTS))))
    assert again == got, "the answer must not depend on the order members or partitions are listed in"
    assert normal(ns.failover_assign({}, list(PARTS))) == {}, "no live members: return {}"
    assert normal(ns.failover_assign({"solo": 0}, [])) == {"solo": []}, "no partitions: the active one gets []"


@check("one_active_member", points=2,
       hint="follow() must assign() the partitions failover_assign gives `me` (and unassign() when it gives none).")
def one_active_member(ns):
    """Two live member processes (priority 10 and 5): the first consumes all 3 partitions, the second none and
    processes nothing -- neither the records there before it started nor those produced once both run.

    The primary starts first and the standby only once the primary is consuming: a standby that starts alone,
    or sees the lease group before the primary has joined it, is rightly the active one for that moment (seen:
    under load the standby processed every record in the 3 s the primary's lease took to appear)."""
    harness.attempted(ns, "failover_assign", "follow")
    cluster = ns.cluster
    tag = uuid.uuid4().hex[:6]
    topic = cluster.create_topic(f"payments-{tag}", partitions=3)
    values = produce(cluster, topic, 0, 150, tag)
    team = Members(ns, topic)
    everything = [(topic, p) for p in range(3)]
    # what this check asks of the two members: the primary (priority 10) consumes everything, the standby nothing
    wrong = Misassigned(team, lambda live: {"primary": everything, "standby": []} if "primary" in live else {})
    try:
        team.start("primary", 10)
        team.wait(lambda: team.mine("primary") == everything, "the primary, alone, consuming", refute=wrong)
        team.start("standby", 5)
        team.wait(lambda: len(team.status("standby")["live"]) == 2 and len(team.status("primary")["live"]) == 2,
                  "both members seeing each other", refute=wrong)
        values += produce(cluster, topic, 150, 150, tag)
        team.wait(lambda: set(values) <= set(team.processed("primary")), "the primary processing every record",
                  refute=wrong)
        # room for a standby that misbehaves late: two more rounds of its own loop (each a follow() call and,
        # had it taken partitions, a consume) -- counted in its steps, not in seconds a busy machine stretches
        seen = team.steps("standby")
        team.wait(lambda: team.steps("standby") >= seen + 2, "the standby going on two more steps", refute=wrong)
        assert team.mine("primary") == everything, f"the primary owns {team.mine('primary')}"
        assert team.mine("standby") == [], f"the standby owns {team.mine('standby')}: it should be idle"
        assert not team.processed("standby"), f"the standby processed {len(team.processed('standby'))} records"
    finally:
        team.stop()
