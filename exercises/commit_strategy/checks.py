"""Checks for commit_strategy: the learner's consumer loop, killed mid-batch and restarted, loses nothing and
replays little.

The loop runs in a child of the learner's kernel (the task :func:`start_loop`), on a consumer the
task builds with ``enable.auto.commit=false`` (noting each commit and the broker's answer in a
log of its own) and a ``process`` that appends ``partition offset value`` to a log. The grader
decides from what it reads itself: those logs, and the offsets the group committed on the broker.
Visible checks here; the crash test is in ``hidden_checks.py``.
"""

from __future__ import annotations

import ast
import os
import random
import signal
import tempfile
import textwrap
import time
from pathlib import Path

from labkit.grading import Rules, check
from labkit.grading import harness
from labkit.waiting import Deadline

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: The lab's consumer members (labkit.workloads, running labkit.apps.member) implement every commit style: they are the answer here.
RULES = Rules(forbid=["labkit.workloads", "labkit.apps"])

#: Records a crash may make the loop process a second time: the batch it was working on. The notebook asks
#: for batches of at most this many records, committed once processed (the reference's are 50).
MAX_REPLAY_PER_CRASH = 100
#: How long the loop may take for a few hundred records before the grader gives up on it.
RUN_TIMEOUT = 90.0


# ---------------------------------------------------------------- the task: the learner's loop in a child


def start_loop(user, bootstrap, topic, group, log, idle):
    """A task: ``consume_loop`` in a child forked from the kernel, on a fresh consumer; returns the child's pid."""

    from labkit.grading.harness import forked

    consume_loop = user["consume_loop"]

    def body():
        import time

        from confluent_kafka import Consumer

        commits = open(f"{log}.commits", "a", buffering=1)  # commit_log(log): this task runs as source alone

        def note(event):
            commits.write(event + "\n")
            commits.flush()

        class Watched(Consumer):
            """The consumer the loop gets: each commit it asks for goes to the commit log, and so does the
            broker's answer: when a synchronous commit returns, or (asynchronous) when a later poll serves it."""

            def commit(self, *args, **kwargs):
                note("asked")
                if kwargs.get("asynchronous", args[2] if len(args) > 2 else True):
                    return super().commit(*args, **kwargs)
                try:
                    return super().commit(*args, **kwargs)
                finally:
                    note("answered")

        def answered(err, partitions):
            note("answered")

        consumer = Watched({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000, "enable.auto.commit": False, "on_commit": answered})
        consumer.subscribe([topic])
        out = open(log, "a", buffering=1)

        def process(msg):
            time.sleep(0.002)
            out.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")
            out.flush()

        try:
            consume_loop(consumer, process, idle_seconds=idle)
        finally:
            consumer.close()
            out.close()
            commits.close()

    return forked(body)


# ---------------------------------------------------------------- what the grader reads itself


def make_events(cluster, count: int) -> tuple[str, str, list[str]]:
    """A fresh 3-partition topic with ``count`` records whose values are chosen now; (topic, group, values)."""
    tag = harness.unique("run").split("-")[1]
    topic = cluster.create_topic(f"events-{tag}", partitions=3)
    values = [f"{tag}-{i:05d}" for i in range(count)]
    harness.make_records(cluster, topic, count, lambda i: values[i].encode())
    return topic, f"loop-{tag}", values


def processed(log: Path) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every ``process`` call, in order (a half-written last line is skipped)."""
    out = []
    for line in harness.lines(log):
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            out.append((int(parts[0]), int(parts[1]), parts[2]))
    return out


def commit_log(log) -> Path:
    """Beside the loop's log: a line per commit the loop asked for, and one per answer from the broker."""
    return Path(f"{log}.commits")


def commits_settled(log: Path) -> bool:
    """Whether the loop's last commit has been answered (or it made none). A coordinator answers one group's
    commits in order, so an answer means the ones before it were handled too; an asynchronous commit with
    nothing to commit is never answered, and is settled by the next one."""
    lines = harness.lines(commit_log(log))
    return not lines or lines[-1] == "answered"


def committed(cluster, group: str, topic: str, partitions: int = 3) -> dict[int, int]:
    """The offsets ``group`` has committed on ``topic``, read from the broker (0 where nothing is committed)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = cluster.admin().list_consumer_group_offsets(request, request_timeout=10)[group].result(timeout=15)
    return {tp.partition: max(tp.offset, 0) for tp in result.topic_partitions}


def end_offsets(cluster, topic: str) -> dict[int, int]:
    return {p.partition: p.high_watermark or 0 for p in cluster.describe_topic(topic).partitions}


# ---------------------------------------------------------------- crashes at moments that matter


def crash_mid_batch(ns, args: tuple, log: Path, group: str, topic: str, crashes: int = 2,
                    rng: random.Random | None = None) -> list[str]:
    """Start the loop (task :func:`start_loop` with ``args``), let it process 150-220 records, then SIGKILL it at
    a moment when what it processed and what its group committed differ (records processed but not committed,
    or committed but not processed); ``crashes`` times. Then one run to the end. Returns what each crash hit.

    The child is frozen (SIGSTOP) while the grader compares its log with the broker, so the moment it is
    killed at is the moment the grader looked at; a moment with a commit on its way is not judged.
    """
    rng = rng or random.Random()
    cluster = ns.cluster
    hits = []
    for crash in range(crashes):
        pid = ns.run(start_loop, *args)
        try:
            begun = len(processed(log))
            goal = begun + rng.randint(150, 220)
            deadline = Deadline(60)
            while len(processed(log)) < goal:
                if ns.run(harness.reap, pid) is not None:
                    raise AssertionError(f"the loop returned (or failed) after {len(processed(log)) - begun} "
                                         "records, before the crash: keep consuming while records arrive")
                if deadline.expired():
                    raise AssertionError(f"the loop processed only {len(processed(log)) - begun} records in "
                                         f"{deadline}")
                time.sleep(0.02)
            hit = "a quiet moment"
            for _ in range(40):
                os.kill(pid, signal.SIGSTOP)
                # Judged only with no commit on its way: then what the broker holds is every commit the loop made
                # (one still travelling would land after this read, and the moment would be misjudged).
                if commits_settled(log):
                    done = {(p, o) for p, o, _ in processed(log)}
                    offsets = committed(cluster, group, topic)
                    unprocessed = sum(1 for p, c in offsets.items() for o in range(c) if (p, o) not in done)
                    uncommitted = sum(1 for p, o in done if o >= offsets.get(p, 0))
                    if unprocessed or uncommitted:
                        hit = (f"{uncommitted} records processed but not committed" if uncommitted else
                               f"{unprocessed} records committed but never processed")
                        break
                os.kill(pid, signal.SIGCONT)
                time.sleep(rng.uniform(0.01, 0.08))
            hits.append(f"crash {crash + 1}: {hit}")
        finally:
            harness.kill(ns, pid)
    pid = ns.run(start_loop, *args)
    harness.wait_for_exit(ns, pid, RUN_TIMEOUT, "the restarted loop")
    return hits


# ---------------------------------------------------------------- visible checks


@check("processes_everything_once_without_crashes", points=2,
       hint="Poll, process every record of the batch, then commit what you processed; stop when idle.")
def processes_everything_once_without_crashes(ns):
    """Run to the end without crashes: every record processed exactly once, and the group's lag is zero
    afterwards (everything processed is committed)."""
    harness.attempted(ns, "consume_loop")
    cluster = ns.cluster
    topic, group, values = make_events(cluster, random.randint(180, 240))
    with tempfile.TemporaryDirectory(prefix="labkit-commit-") as work:
        log = Path(work) / "processed.log"
        pid = ns.run(start_loop, cluster.bootstrap_servers, topic, group, str(log), 5.0)
        harness.wait_for_exit(ns, pid, RUN_TIMEOUT, "consume_loop")
        seen = [v for _, _, v in processed(log)]
    missing = set(values) - set(seen)
    assert not missing, f"{len(missing)} of {len(values)} records were never processed"
    twice = len(seen) - len(set(seen))
    assert not twice, f"{twice} records were processed twice without any crash"
    lag = {p: end - committed(cluster, group, topic).get(p, 0) for p, end in end_offsets(cluster, topic).items()}
    assert not any(lag.values()), (f"after the loop the group still has lag {sum(lag.values())} "
                                   f"(per partition {lag}): commit what you processed")


@check("commits_explicitly", points=1, hint="Auto-commit commits what poll returned, processed or not.")
def commits_explicitly(ns):
    """The loop commits itself: consume_loop calls the consumer's commit() (the consumer it gets has
    enable.auto.commit=false)."""
    harness.attempted(ns, "consume_loop")
    tree = ast.parse(textwrap.dedent(ns.source("consume_loop")))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "commit"]
    assert calls, "consume_loop never calls consumer.commit(...)"
