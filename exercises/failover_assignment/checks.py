"""Checks for failover_assignment: an active/passive assignment, pure and then on live member processes.

The Python client cannot plug a custom assignor into a group's rebalance, so the members here
use ``Consumer.assign()``. The harness below (``Team``) gives each member what a custom
assignor would have had from the group:

* liveness: every member also joins a *lease group* (a normal subscribed consumer on a
  one-partition topic, client id ``<name>:<priority>``), and reads the live members back from
  the broker with ``describe_consumer_groups``: a member that dies drops out after
  ``session.timeout.ms``;
* every half second it calls the learner's ``follow(consumer, me, live, partitions)``, which
  decides with ``failover_assign`` what this member consumes and applies it with ``assign()``;
* it processes what it is assigned, logging each record durably, and commits after each batch.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from labkit.grading import check
from labkit.workloads import read_events, record_event

SESSION_TIMEOUT_MS = 6000


def _attempted(*fns) -> None:
    for fn in fns:
        if "raise NotImplementedError" in inspect.getsource(fn):
            raise NotImplementedError("not done yet")


def _live_members(admin, group: str) -> dict[str, int]:
    desc = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=5)
    live = {}
    for m in desc.members:
        name, _, priority = m.client_id.rpartition(":")
        if name and priority.lstrip("-").isdigit():
            live[name] = int(priority)
    return live


def _member(bootstrap: str, topic: str, partitions: int, lease_topic: str, group: str, name: str, priority: int,
            workdir: str, follow: Callable) -> None:  # pragma: no cover - runs in a forked process
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

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
    try:
        while True:
            lease.poll(0.05)
            if time.monotonic() - last > 0.5:
                last = time.monotonic()
                try:
                    live = _live_members(admin, f"{group}-lease")
                except Exception:  # noqa: BLE001 - the coordinator is busy: ask again next time
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
                log.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
            if batch:
                work.commit(asynchronous=False)
    finally:
        log.close()


class Team:
    """Active/passive members as forked processes, each running the learner's ``follow``."""

    def __init__(self, cluster: Any, topic: str, follow: Callable, partitions: Optional[int] = None) -> None:
        self.cluster, self.topic, self.follow = cluster, topic, follow
        self.partitions = partitions or len(cluster.describe_topic(topic))
        tag = uuid.uuid4().hex[:6]
        self.group = f"team-{tag}"
        self.lease_topic = cluster.create_topic(f"lease-{tag}", partitions=1)
        self.workdir = Path(tempfile.mkdtemp(prefix="labkit-failover-"))
        self.procs: dict[str, Any] = {}
        self.priorities: dict[str, int] = {}

    def start(self, name: str, priority: int) -> None:
        ctx = multiprocessing.get_context("fork")
        proc = ctx.Process(target=_member, daemon=True, args=(
            self.cluster.bootstrap_servers, self.topic, self.partitions, self.lease_topic, self.group, name,
            priority, str(self.workdir), self.follow))
        proc.start()
        self.procs[name], self.priorities[name] = proc, priority

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(10)
            record_event(self.workdir / f"{name}.events.jsonl", "killed")

    def stop(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def status(self, name: str) -> dict[str, Any]:
        try:
            return json.loads((self.workdir / f"{name}.status.json").read_text())
        except (OSError, ValueError):
            return {"live": {}, "mine": []}

    def mine(self, name: str) -> list[tuple[str, int]]:
        return [tuple(x) for x in self.status(name)["mine"]] if self.procs[name].is_alive() else []

    def processed(self, name: str) -> list[str]:
        path = self.workdir / f"{name}.log"
        return [line.split(" ", 2)[2] for line in path.read_text().splitlines()] if path.exists() else []

    def events(self) -> list:
        out = [e for name in self.procs for e in read_events(self.workdir / f"{name}.events.jsonl", name)]
        return sorted(out, key=lambda e: e.t)

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = 40.0) -> float:
        """Wait until ``condition()``; returns the seconds it took, AssertionError naming ``what`` if it never did."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            dead = [n for n, p in self.procs.items() if p.exitcode not in (None, -signal.SIGKILL)]
            if dead:
                raise AssertionError(f"member {dead[0]} exited with code {self.procs[dead[0]].exitcode}: "
                                     "did follow() or failover_assign() raise?")
            if condition():
                return time.monotonic() - start
            time.sleep(0.2)
        raise AssertionError(f"{what} did not happen within {timeout:.0f} s")


def _produce(cluster, topic: str, start: int, count: int) -> list[str]:
    producer = cluster.producer(enable_idempotence=True)
    values = [f"r{i:05d}" for i in range(start, start + count)]
    for v in values:
        producer.produce(topic, key=v, value=v)
        producer.poll(0)
    producer.flush(30)
    return values


def _reference(members: dict[str, int], partitions: list) -> dict[str, list]:
    if not members:
        return {}
    active = sorted(members, key=lambda m: (-members[m], m))[0]
    return {m: sorted(partitions) if m == active else [] for m in members}


def _normal(result) -> dict[str, list[tuple[str, int]]]:
    assert isinstance(result, dict), f"return a dict of member -> list of (topic, partition), not {type(result).__name__}"
    return {m: sorted(tuple(tp) for tp in tps) for m, tps in result.items()}


PARTS = [("orders", 2), ("orders", 0), ("orders", 1), ("refunds", 0)]


@check("active_gets_everything", points=2,
       hint="Find the member with the highest priority; it gets every partition, everyone else an empty list.")
def active_gets_everything(ns):
    """Three members with priorities 1, 5, 3: the one with 5 gets all partitions (sorted), the others none."""
    got = _normal(ns.failover_assign({"a": 1, "b": 5, "c": 3}, list(PARTS)))
    assert got == {"a": [], "b": sorted(PARTS), "c": []}, f"got {got}"


@check("ties_and_no_members", points=1,
       hint="Break ties by member name (the smallest wins) so every member computes the same answer; "
            "no members means an empty dict.")
def ties_and_no_members(ns):
    """Equal priorities are broken by name, the same on every call; no members give {}; no partitions give []."""
    got = _normal(ns.failover_assign({"west": 2, "east": 2, "north": 1}, list(PARTS)))
    assert got == {"west": [], "east": sorted(PARTS), "north": []}, f"tie between east and west: got {got}"
    again = _normal(ns.failover_assign({"north": 1, "east": 2, "west": 2}, list(reversed(PARTS))))
    assert again == got, "the answer must not depend on the order members or partitions are listed in"
    assert _normal(ns.failover_assign({}, list(PARTS))) == {}, "no live members: return {}"
    assert _normal(ns.failover_assign({"solo": 0}, [])) == {"solo": []}, "no partitions: the active one gets []"


@check("hidden_cases", points=2, hidden=True)
def hidden_cases(ns):
    """300 random member/priority/partition layouts (negative priorities and ties included) match the reference."""
    rng = random.Random()
    for _ in range(300):
        members = {f"m{rng.randint(0, 99):02d}": rng.randint(-3, 3) for _ in range(rng.randint(0, 6))}
        parts = [(rng.choice("xyz"), rng.randint(0, 9)) for _ in range(rng.randint(0, 8))]
        parts = list(dict.fromkeys(parts))
        got = _normal(ns.failover_assign(dict(members), list(parts)))
        assert got == _reference(members, parts), f"members {members}, partitions {parts}: got {got}"


def _team(ns, records: int) -> tuple[Team, list[str]]:
    cluster = ns.cluster
    topic = cluster.create_topic(f"payments-{uuid.uuid4().hex[:6]}", partitions=3)
    values = _produce(cluster, topic, 0, records)
    return Team(cluster, topic, ns.follow), values


@check("one_active_member", points=2,
       hint="follow() must assign() the partitions failover_assign gives `me` (and unassign() when it gives none).")
def one_active_member(ns):
    """Two live members (priority 10 and 5): the first consumes all 3 partitions, the second none and processes nothing."""
    _attempted(ns.failover_assign, ns.follow)
    team, values = _team(ns, 150)
    try:
        team.start("primary", 10)
        team.start("standby", 5)
        team.wait(lambda: len(team.status("standby")["live"]) == 2 and len(team.status("primary")["live"]) == 2,
                  "both members seeing each other")
        team.wait(lambda: len(set(team.processed("primary"))) == len(values), "the primary processing every record")
        time.sleep(1.0)
        assert team.mine("primary") == [(team.topic, p) for p in range(3)], f"primary owns {team.mine('primary')}"
        assert team.mine("standby") == [], f"the standby owns {team.mine('standby')}: it should be idle"
        assert not team.processed("standby"), f"the standby processed {len(team.processed('standby'))} records"
    finally:
        team.stop()


@check("failover_and_back_loses_nothing", points=4, hidden=True)
def failover_and_back_loses_nothing(ns):
    """Kill the active member mid-stream: the standby takes all partitions; bring it back: it takes them back;
    every record is processed at least once, and the standby processed nothing before the failover."""
    _attempted(ns.failover_assign, ns.follow)
    team, first = _team(ns, 400)
    cluster = ns.cluster
    try:
        team.start("primary", 10)
        team.start("standby", 5)
        team.wait(lambda: len(team.status("standby")["live"]) == 2, "the standby seeing the primary")
        crash_at = random.randint(60, 200)
        team.wait(lambda: len(team.processed("primary")) >= crash_at, "the primary processing")
        assert not team.processed("standby"), "the standby processed records while the primary was alive"
        team.kill("primary")
        killed = time.time()
        second = _produce(cluster, team.topic, 400, 200)
        team.wait(lambda: len(team.mine("standby")) == 3, "the standby taking over all 3 partitions",
                  timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        team.wait(lambda: set(first + second) <= set(team.processed("standby")) | set(team.processed("primary")),
                  "every record processed after the failover")
        team.start("primary", 10)
        third = _produce(cluster, team.topic, 600, 200)
        team.wait(lambda: len(team.mine("primary")) == 3 and team.mine("standby") == [],
                  "the primary taking its partitions back")
        everything = set(first + second + third)
        team.wait(lambda: everything <= set(team.processed("primary")) | set(team.processed("standby")),
                  "every record processed after the failback")
        missing = everything - set(team.processed("primary")) - set(team.processed("standby"))
        assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
        took_over = [e for e in team.events() if e.member == "standby" and e.kind == "assign" and e.t > killed]
        assert took_over, "the standby never recorded taking partitions over"
    finally:
        team.stop()
