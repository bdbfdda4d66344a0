"""Checks for dr_failover: MirrorMaker 2 checkpoints decoded, read back, and a group failed over in a real drill.

The learner writes three functions (see the notebook):

* ``decode_checkpoint(key, value)`` -- a checkpoint record's bytes -> (group, topic, partition, upstream, downstream);
* ``translated_offsets(bootstrap, group, source_alias, topic)`` -- the latest checkpoints of a group on dr;
* ``failover_consumer(bootstrap, group, source_alias, topic)`` -- a Consumer on dr at those offsets.

The drill (:func:`run_drill`) happens where the check runs -- the grader's process while grading --
around ``ns.cluster`` as dr: a primary cluster of its own whose ``orders`` has lost its oldest
records (so offsets differ across the clusters), MirrorMaker 2 on dr's Connect worker, a group
consuming on primary (the checks' own consumer, committing after each batch), a crash of that
group at a random moment and, a random moment later, of the whole primary. The learner's
consumer then runs in a child forked from their kernel (the task :func:`run_failover`) and logs
what it delivers; the verdict comes from what the grader reads: dr's copy, the group's work on
primary, the checkpoints, that log.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.grading import GraderFault, Rules, check
from labkit.grading.harness import acknowledged, attempted, kill, lines, make_records, reap, unique
from labkit.errors import WaitTimeout
from labkit.waiting import Deadline, Wait

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: MirrorMaker's decoders and translation (labkit.services.mirror) are the answer.
RULES = Rules(forbid=["labkit.services"])

#: A real checkpoint: billing committed 40 on orders-0 at primary; on dr it resumes at 1 of primary.orders.
SAMPLE_KEY = bytes.fromhex("0007 62696c6c696e67 000e 7072696d6172792e6f7264657273 00000000")
SAMPLE_VALUE = bytes.fromhex("0000 0000000000000028 0000000000000001 0000")


def encode(group: str, topic: str, partition: int, upstream: int, downstream: int, metadata: str = "") -> tuple:
    """A checkpoint record's (key, value), as MirrorMaker 2 writes it."""
    from labkit.services.mirror import Checkpoint, encode_checkpoint

    return encode_checkpoint(Checkpoint(group, topic, partition, upstream, downstream, metadata))


def as_tuple(result: Any) -> tuple:
    assert isinstance(result, (list, tuple)) and len(result) == 5, \
        f"return (group, topic, partition, upstream_offset, downstream_offset), not {result!r}"
    return tuple(result)


def normal(result: Any) -> dict[int, int]:
    assert isinstance(result, dict), f"return a dict of partition -> offset, not {type(result).__name__}"
    return {int(p): int(o) for p, o in result.items()}


def write_checkpoints(cluster: Any, alias: str, records: list[tuple], partitions: int = 1) -> None:
    """A ``<alias>.checkpoints.internal`` topic on ``cluster`` holding ``records`` (encode() arguments), in order."""
    topic = cluster.create_topic(f"{alias}.checkpoints.internal", partitions=partitions)
    producer = cluster.producer(enable_idempotence=True)
    for fields in records:
        key, value = encode(*fields)
        producer.produce(topic, key=key, value=value)  # the key decides the partition: one key, one order
        producer.poll(0)
    acknowledged(producer, "checkpoints")


# ---------------------------------------------------------------- the task (in the learner's kernel)


def run_failover(user, bootstrap, group, alias, topic, log_path):
    """A task: the learner's failover consumer in a child forked from the kernel, logging what it delivers."""
    from labkit.grading.harness import forked

    make = user["failover_consumer"]

    def body():
        consumer = make(bootstrap, group, alias, topic)
        with open(log_path, "a", buffering=1) as log:
            while True:
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                value = msg.value().decode(errors="replace") if msg.value() is not None else ""
                log.write(f"{msg.topic()} {msg.partition()} {msg.offset()} {value}\n")

    return forked(body)


# ---------------------------------------------------------------- the drill (where the check runs)


class _Producer(threading.Thread):
    """Orders ``<tag>-<seq>`` at about 100 a second, keyed by customer, until stopped."""

    def __init__(self, cluster: Any, topic: str, tag: str, first: int) -> None:
        super().__init__(daemon=True)
        self.producer = cluster.producer(enable_idempotence=True, message_timeout_ms=2000, linger_ms=5)
        self.topic, self.tag, self.seq = topic, tag, first
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, key=f"customer-{self.seq % 17}", value=f"{self.tag}-{self.seq:06d}")
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.producer.poll(0)
            self.seq += 1
            time.sleep(0.01)
        self.producer.flush(5)


class _Group(threading.Thread):
    """The group on primary: processes every record, commits synchronously after each batch."""

    def __init__(self, cluster: Any, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = cluster.consumer(group, enable_auto_commit=False, session_timeout_ms=6000)
        self.consumer.subscribe([topic])
        self.processed: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            batch = [m for m in self.consumer.consume(num_messages=20, timeout=0.2) if not m.error()]
            for msg in batch:
                self.processed.append(msg.value().decode())
            if batch and not self.stop.is_set():
                try:
                    self.consumer.commit(asynchronous=False)
                except Exception:  # noqa: BLE001 - a refused commit: those records come again (at least once)
                    pass

    def crash(self) -> None:
        """Stop between two records: what was processed after the last commit stays uncommitted."""
        self.stop.set()
        self.join(10)
        self.consumer.close()  # no commit (auto-commit is off); the cluster dies next anyway


@dataclass
class DrillResult:
    remote: str
    #: value -> (partition, offset) of every order on dr's copy when the learner's consumer started.
    on_dr: dict[str, tuple[int, int]]
    processed_on_primary: set[str]
    #: (topic, partition, offset, value) the learner's consumer delivered.
    delivered: list[tuple[str, int, int, str]]
    translated: dict[int, int]
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def processed_on_dr(self) -> set[str]:
        return {v for t, _, _, v in self.delivered if t == self.remote}

    @property
    def lost(self) -> list[str]:
        return sorted(set(self.on_dr) - self.processed_on_primary - self.processed_on_dr)

    @property
    def twice(self) -> set[str]:
        return self.processed_on_primary & self.processed_on_dr

    @property
    def bound(self) -> set[str]:
        """What failing over at the translated offsets processes again: the group's work at or after them."""
        return {v for v in self.processed_on_primary if v in self.on_dr
                and self.on_dr[v][1] >= self.translated.get(self.on_dr[v][0], 0)}


def run_drill(ns: Any, rng: random.Random) -> DrillResult:
    """The drill described in the module doc; ``ns.cluster`` is dr. Everything it started is gone afterwards."""
    import labkit
    from labkit.services.mirror import mirror, read_checkpoints

    dr = ns.cluster
    tag = uuid.uuid4().hex[:6]
    alias = f"{rng.choice(['east', 'west', 'main', 'site'])}-{uuid.uuid4().hex[:4]}"
    group = unique("billing")
    primary = labkit.start_cluster("single-broker", progress=False)
    flow = pid = None
    threads: list[Any] = []
    workdir = Path(tempfile.mkdtemp(prefix="labkit-dr-failover-"))
    log = workdir / "delivered.log"
    try:
        primary.label = alias
        topic = primary.create_topic(f"orders-{tag}", partitions=3)
        first = rng.randint(240, 360)
        make_records(primary, topic, first, lambda i: f"{tag}-{i:06d}".encode())
        _delete_oldest(primary, topic, rng)          # retention at work: offsets on dr will differ from primary's
        flow = mirror(primary, dr, topics=topic, source_alias=alias, target_alias="dr", groups=group)
        flow.wait_caught_up(topic, timeout=60)
        backlog_end = sum(p.high_watermark for p in primary.describe_topic(topic).partitions)
        consumers = _Group(primary, topic, group)
        feeder = _Producer(primary, topic, tag, first)
        threads = [consumers, feeder]
        consumers.start()
        feeder.start()
        extra = rng.randint(80, 250)
        _until(lambda: len(consumers.processed) >= first // 2 + extra, "the group processing", 60)
        _until(lambda: sum(c.upstream_offset for c in read_checkpoints(dr, alias, group)) > backlog_end,
               "a checkpoint of the group past the backlog", 40)
        time.sleep(rng.uniform(0.0, 1.5))
        consumers.crash()                              # the application dies first ...
        final = _Settled(CHECKPOINT_SETTLED)
        _until(lambda: final(*_checkpointed(primary, dr, alias, group, topic)), "checkpoint of the group's last commits",
               60, evidence=flow.status)
        time.sleep(rng.uniform(0.4, 1.2))              # ... orders keep coming for a moment, and reach dr ...
        feeder.stop.set()
        feeder.join(10)
        flow.wait_caught_up(topic, timeout=60)
        primary.kill_broker(1)                         # ... then the whole primary
        remote = flow.remote_topic(topic)
        before = {cp.partition: cp.downstream_offset for cp in read_checkpoints(dr, alias, group)}
        on_dr = {r.value.decode(): (r.partition, r.offset) for r in dr.read_all(remote) if r.value}
        pid = ns.run(run_failover, dr.bootstrap_servers, group, alias, topic, str(log))
        needed = {v for v, (p, o) in on_dr.items() if o >= before.get(p, 0)}

        def delivered() -> list[tuple[str, int, int, str]]:
            out = []
            for line in lines(log):
                parts = line.split(" ", 3)
                if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                    out.append((parts[0], int(parts[1]), int(parts[2]), parts[3]))
            return out

        # Quiet and overall bounds on the learner's consumer count a quiet machine's seconds: a starved consumer
        # that pauses is not taken for one that stopped.
        seen: dict[str, Any] = {"count": -1, "since": Deadline(15)}
        overall = Deadline(45)
        while True:
            code = ns.run(reap, pid)
            if code is not None:
                pid = None
                raise AssertionError(f"your failover consumer's process ended (exit code {code}): did "
                                     "failover_consumer() raise?")
            now = delivered()
            if len(now) != seen["count"]:
                seen.update(count=len(now), since=Deadline(15))
            got = {v for t, _, _, v in now}
            quiet = seen["since"].elapsed()
            if needed <= got and quiet > 1.5:
                break
            if quiet > (5 if now else 15):
                break                                  # it stopped delivering (or never began): judge what it did
            if overall.expired():
                break
            time.sleep(0.25)
        try:
            after = {cp.partition: cp.downstream_offset for cp in read_checkpoints(dr, alias, group)}
        except Exception:  # noqa: BLE001 - nothing new can have come: primary is dead
            after = before
        translated = {p: min(o, after.get(p, o)) for p, o in before.items()}
        return DrillResult(remote, on_dr, set(consumers.processed), delivered(), translated,
                           {"alias": alias, "group": group, "topic": topic})
    finally:
        if pid is not None:
            kill(ns, pid)
        for thread in threads:
            thread.stop.set()
        if flow is not None:
            flow.stop()
        primary.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _delete_oldest(cluster: Any, topic: str, rng: random.Random) -> None:
    from confluent_kafka import TopicPartition

    ends = {p.partition: p.high_watermark for p in cluster.describe_topic(topic).partitions}
    # At least 40 records of each partition (more than a batch the group may process without committing), so
    # primary's offsets used on dr as they are point at other records.
    cut = [TopicPartition(topic, p, min(end, max(40, int(end * rng.uniform(0.25, 0.6))))) for p, end in ends.items()
           if end]
    for future in cluster.admin().delete_records(cut).values():
        future.result()


#: Quiet-machine seconds a group's checkpoints must stay the same to count as the last MirrorMaker will write.
CHECKPOINT_SETTLED = 10.0


def _checkpointed(primary: Any, dr: Any, alias: str, group: str, topic: str) -> tuple[bool, str, Any]:
    """Whether dr holds the checkpoint of the group's last commit on every partition: its upstream offset is the
    commit, or the same offset sync translates both (MirrorMaker emits a checkpoint only when its downstream
    offset moves). On a busy machine checkpoints lag by seconds of the group's work; a drill judged on a stale
    one cannot tell a consumer that starts at primary's offsets from one that starts at the translated ones.
    Also says what it saw, and returns the checkpoints when every committed partition has one (else None)."""
    from labkit.services.mirror import committed, read_checkpoints, read_offset_syncs, remote_topic

    final = committed(primary, group, topic)
    syncs = [s for s in read_offset_syncs(primary, "dr") if s.topic == topic]
    checkpoints = [cp for cp in read_checkpoints(dr, alias, group) if cp.topic == remote_topic(alias, topic)]
    latest = {cp.partition: cp.upstream_offset for cp in checkpoints}
    behind = []
    for partition, offset in sorted(final.items()):
        base = max((s.upstream_offset for s in syncs if s.partition == partition and s.upstream_offset <= offset),
                   default=None)
        seen = latest.get(partition)
        if seen is None or not (seen == offset or (base is not None and base <= seen <= offset)):
            behind.append(f"partition {partition}: committed {offset}, last offset sync at or before it {base}, "
                          f"checkpointed {seen}")
    every = bool(final) and set(final) <= set(latest)
    return (bool(final) and not behind, "; ".join(behind) or "no commit of the group on primary",
            (sorted(final.items()), sorted((cp.partition, cp.upstream_offset, cp.downstream_offset) for cp in checkpoints))
            if every else None)


class _Settled:
    """A condition that also holds once what it saw (not None) stayed the same for ``seconds`` of a quiet
    machine's time. MirrorMaker may never checkpoint a group's very last commit: its offset-sync store keeps a
    sparse subset of the syncs (buckets by powers of two, and only the latest after a task restarts), so the
    commit can translate to no further than the last checkpoint, or not at all, and no newer one is written
    (``MirrorCheckpointTask.checkpointIsMoreRecent``). Its checkpoints, settled, are what a failover gets."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._seen: Any = None
        self._since: Any = None

    def __call__(self, ok: bool, said: str, seen: Any) -> tuple[bool, str]:
        if ok:
            return True, said
        if seen is None or seen != self._seen:
            self._seen, self._since = seen, Deadline(self.seconds)
            return False, said
        return self._since.expired(), said + f" (unchanged for {self._since.wall:.0f} s)"


def _until(condition: Any, what: str, timeout: float, evidence: Any = None) -> None:
    """Wait for ``condition`` (a bool, or a bool and what it saw) for at most ``timeout`` of a quiet machine's
    seconds; what it saw last and ``evidence()`` go into the message if it runs out."""
    seen = {"last": ""}

    def holds() -> bool:
        got = condition()
        ok, seen["last"] = got if isinstance(got, tuple) else (got, "")
        return bool(ok)

    def said() -> str:
        return "; ".join(str(x) for x in (seen["last"], evidence() if evidence is not None else "") if x)

    try:
        Wait(f"the drill's own {what}", timeout=timeout, stretch=True, evidence=said,
             hint="The grader's drill, not your code, did not get there: grade again.").until(holds)
    except WaitTimeout as exc:
        raise GraderFault(str(exc)) from None


# ---------------------------------------------------------------- visible checks


@check("decodes_a_checkpoint", points=2,
       hint="Key: INT16 length + UTF-8 group, INT16 length + UTF-8 topic, INT32 partition. Value: INT16 version, "
            "INT64 upstream, INT64 downstream, then the metadata STRING.")
def decodes_a_checkpoint(ns):
    """The real record in the notebook, and one with a non-ASCII group, a long topic and offsets beyond 2**32."""
    assert as_tuple(ns.decode_checkpoint(SAMPLE_KEY, SAMPLE_VALUE)) == ("billing", "primary.orders", 0, 40, 1)
    fields = ("zahlungen-éü", "dc-west.orders.eu-central-1", 17, 2**40 + 5, 2**33, "")
    key, value = encode(*fields)
    got = as_tuple(ns.decode_checkpoint(key, value))
    assert got == fields[:5], (f"got {got}, expected {fields[:5]}: a STRING's length counts bytes, not characters; "
                               "offsets are 8-byte signed integers")


@check("latest_checkpoint_wins", points=2,
       hint="Read the topic from the beginning to its end, keep the last checkpoint per partition of your group "
            "on <alias>.<topic>, and return {} when the topic is missing.")
def latest_checkpoint_wins(ns):
    """A checkpoints topic with several checkpoints per partition, other groups and another topic: the latest of
    the group's on the remote topic, per partition; a group without checkpoints and a missing topic give {}."""
    attempted(ns, "decode_checkpoint", "translated_offsets")
    alias = f"lab-{uuid.uuid4().hex[:6]}"
    remote = f"{alias}.orders"
    records = [("billing", remote, 0, 40, 1), ("billing", remote, 1, 12, 12), ("reports", remote, 0, 300, 250),
               ("billing", f"{alias}.payments", 0, 99, 77), ("billing", remote, 0, 140, 100),
               ("billing", remote, 2, 5, 0), ("billing", remote, 0, 180, 131), ("billing", remote, 1, 20, 20)]
    write_checkpoints(ns.cluster, alias, records)
    bootstrap = ns.cluster.bootstrap_servers
    got = normal(ns.translated_offsets(bootstrap, "billing", alias, "orders"))
    assert got == {0: 131, 1: 20, 2: 0}, f"got {got}, expected {{0: 131, 1: 20, 2: 0}} (the latest of each partition)"
    assert normal(ns.translated_offsets(bootstrap, "nobody", alias, "orders")) == {}, "a group without checkpoints: {}"
    missing = normal(ns.translated_offsets(bootstrap, "billing", f"gone-{uuid.uuid4().hex[:6]}", "orders"))
    assert missing == {}, f"no checkpoints topic at all: {{}}, not {missing}"


@check("fails_over_after_a_crash", points=4,
       hint="Start each partition of <alias>.<topic> at its translated offset (from the beginning where there is "
            "no checkpoint): not at the earliest, not at the latest, not at primary's offsets.")
def fails_over_after_a_crash(ns):
    """The drill: primary killed at a random moment; your consumer on dr processes every order the group had not,
    and processes twice no more than failing over at the translated offsets does."""
    attempted(ns, "decode_checkpoint", "translated_offsets", "failover_consumer")
    result = run_drill(ns, random.Random())
    judge(result)


def judge(result: DrillResult) -> None:
    """Nothing on dr left unprocessed; at most the translated offsets' duplicates; only the remote topic read."""
    other = sorted({t for t, _, _, _ in result.delivered if t != result.remote})
    assert not other, f"your consumer read {other}; after a failover the group reads {result.remote!r} on dr"
    lost = result.lost
    if lost:
        where = result.on_dr[lost[0]]
        raise AssertionError(f"{len(lost)} orders on dr were never processed (the first at partition {where[0]} "
                             f"offset {where[1]}): your consumer started after them -- at the translated offset "
                             f"{result.translated.get(where[0], 0)}?")
    twice, bound = result.twice, result.bound
    assert len(twice) <= len(bound), (
        f"{len(twice)} orders were processed twice; failing over at the translated offsets "
        f"{result.translated} re-processes {len(bound)}: your consumer started earlier than them")
