"""Checks for poison_queue: the learner's share-group worker, several at once, on jobs chosen at grading time.

Each worker is the learner's ``run_worker`` in a child forked from the kernel (the task :func:`start_worker`),
given the grader's ``do_job``: it appends every attempt (``start``, then ``done`` or ``fail``, with the job id and
the worker's pid) to a log the grader reads, and fails a job while the attempt is at most the job's ``fails``
(``fails`` 1: a transient error; 1000: a poison job). The grader decides from that log and from the broker's own
record of every acknowledgement, the share coordinator's ``__share_group_state``
(:func:`labkit.sharegroups.record_fates`): accepted, or archived -- rejected by a worker, or past the group's
delivery limit, which the grader sets far above ``max_attempts`` -- and after how many deliveries.
The crash test is in ``hidden_checks.py``.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

from labkit.grading import Rules, check, harness

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: The lab's share-group members (labkit.sharegroups, labkit.apps.sharemember) implement these policies.
RULES = Rules(forbid=["labkit.sharegroups", "labkit.apps"])
#: The group's own share.delivery.count.limit: above any max_attempts, so archived by the broker is not rejected.
GROUP_LIMIT = 10
#: How long a worker pool may take for a few dozen jobs before the grader gives up on it.
RUN_TIMEOUT = 90.0
#: What a worker is told: return once this many seconds passed since its last job.
IDLE = 4.0


# ---------------------------------------------------------------- visible checks


@check("every_job_done_and_accepted", points=2,
       hint="ACCEPT a job once do_job returned; RELEASE one that failed (while its delivery count is below max_attempts).")
def every_job_done_and_accepted(ns):
    """One worker, jobs chosen now, a few of them failing at their first attempt: every job is done, none twice,
    and the broker records every one as accepted (a failed attempt released and tried again, not accepted or
    rejected); the worker returns once idle."""
    harness.attempted(ns, "run_worker")
    rng = random.Random()
    pool = Pool(ns, make_jobs(rng, good=rng.randint(12, 18), transient=rng.randint(2, 4)), max_attempts=3)
    try:
        pool.start(1)
        pool.send()
        pool.finish()
        done, fates = pool.done(), pool.fates()
    finally:
        pool.close()
    never = [j["id"] for j in pool.jobs if j["id"] not in done]
    assert not never, (f"{len(never)} of {len(pool.jobs)} jobs were never done, e.g. {never[:3]} (each failed once): "
                       "RELEASE a failed job so that it is delivered again")
    twice = sorted(i for i, n in done.items() if n > 1)
    assert not twice, f"{len(twice)} jobs were done twice without any crash, e.g. {twice[:3]}"
    wrong = {j["id"]: fates.get(i, "never acknowledged") for i, j in enumerate(pool.jobs)
             if fates.get(i, (None,))[0] != "accepted"}
    assert not wrong, f"the broker did not record every job as accepted: {dict(list(wrong.items())[:3])}"


@check("poison_rejected_within_max_attempts", points=2,
       hint="When do_job fails and msg.delivery_count() >= max_attempts, REJECT the job: it is poison.")
def poison_rejected_within_max_attempts(ns):
    """Jobs chosen now, two of them poison (they fail every time): each poison job is worked on at most
    max_attempts times and the broker records it as archived by then (rejected by the worker: the group's own
    delivery limit is 10); every other job is done and accepted, those failing once included."""
    harness.attempted(ns, "run_worker")
    rng = random.Random()
    jobs = make_jobs(rng, good=rng.randint(8, 12), transient=2, poison=2)
    pool = Pool(ns, jobs, max_attempts=3)
    try:
        pool.start(1)
        pool.send()
        pool.finish()
        tries, done, fates = pool.tries(), pool.done(), pool.fates()
    finally:
        pool.close()
    for i, job in enumerate(jobs):
        state, deliveries = fates.get(i, ("never acknowledged", 0))
        if job["fails"] >= 1000:
            assert tries[job["id"]] <= pool.max_attempts, \
                f"poison job {job['id']} was worked on {tries[job['id']]} times (max_attempts {pool.max_attempts})"
            assert state == "archived", (f"poison job {job['id']} ended {state} on the broker: REJECT it once it "
                                         "failed max_attempts times")
            assert deliveries <= pool.max_attempts, (
                f"poison job {job['id']} was archived after {deliveries} deliveries, by the broker's own limit: reject "
                f"it yourself at max_attempts ({pool.max_attempts})")
        else:
            assert job["id"] in done, (f"job {job['id']} (failing {job['fails']} time(s) first) was never done: it "
                                       f"ended {state} on the broker")


@check("workers_share_one_partition", points=2,
       hint="A ShareConsumer (not a Consumer): a share group lets several workers read one partition. "
            "Take few records per poll (max.poll.records).")
def workers_share_one_partition(ns):
    """Three workers on a topic of one partition, 30 jobs of 150 ms: the broker lists all three as members of
    the share group, each of them does part of the work, and they work at the same time."""
    harness.attempted(ns, "run_worker")
    pool = Pool(ns, [{"id": f"{tag()}-{i:02d}", "ms": 150, "fails": 0} for i in range(30)], max_attempts=3)
    try:
        pool.start(3)
        pool.wait_joined(3)
        pool.send()
        pool.finish()
        spans, done = pool.spans(), pool.done()
    finally:
        pool.close()
    assert len(done) == len(pool.jobs), f"only {len(done)} of {len(pool.jobs)} jobs were done"
    counts = {pid: len(s) for pid, s in spans.items()}
    idle = len(pool.pids) - len(counts)
    assert not idle and min(counts.values()) >= 3, (
        f"jobs per worker: {sorted(counts.values()) + [0] * idle}: a worker holding many jobs keeps them from the others")
    every = [span for worker in spans.values() for span in worker]
    at_once = max(sum(1 for a, b in every if a <= start < b) for start, _ in every)
    assert at_once >= 2, "the workers never worked at the same time"


# ---------------------------------------------------------------- the task: the learner's worker in a child


def start_worker(user, bootstrap, topic, group, log, max_attempts, idle):
    """A task: ``run_worker`` in a child forked from the kernel, with the grader's ``do_job``; returns its pid."""
    from labkit.grading.harness import forked

    run_worker = user["run_worker"]

    def body():
        import json
        import os
        import time

        def do_job(value):
            if not isinstance(value, (bytes, str)):
                raise TypeError("do_job takes the record's value: do_job(msg.value())")
            job = json.loads(value)
            with open(log) as earlier:
                attempt = 1 + sum(1 for line in earlier if line.split(" ")[:2] == ["start", job["id"]])
            with open(log, "a") as out:
                out.write(f"start {job['id']} {os.getpid()} {time.time():.3f}\n")
            time.sleep(job["ms"] / 1000)
            failed = attempt <= job["fails"]
            with open(log, "a") as out:
                out.write(f"{'fail' if failed else 'done'} {job['id']} {os.getpid()} {time.time():.3f}\n")
            if failed:
                raise RuntimeError(f"job {job['id']} failed (attempt {attempt})")

        run_worker(bootstrap, topic, group, do_job, max_attempts, idle)

    return forked(body)


# ---------------------------------------------------------------- what the grader reads itself


def tag() -> str:
    return harness.unique("q").split("-")[1]


def make_jobs(rng: random.Random, good: int, transient: int = 0, poison: int = 0) -> list[dict]:
    """Jobs in random order: ``good`` ones, ``transient`` ones failing at their first attempt, ``poison`` ones."""
    run = tag()
    jobs = [{"id": f"{run}-ok-{i:02d}", "ms": rng.randint(20, 60), "fails": 0} for i in range(good)]
    jobs += [{"id": f"{run}-flaky-{i:02d}", "ms": rng.randint(20, 60), "fails": 1} for i in range(transient)]
    jobs += [{"id": f"{run}-poison-{i:02d}", "ms": rng.randint(5, 20), "fails": 1000} for i in range(poison)]
    rng.shuffle(jobs)
    return jobs


class Pool:
    """Workers (the learner's, in children of the kernel) on a fresh one-partition topic and share group."""

    def __init__(self, ns, jobs: list[dict], max_attempts: int) -> None:
        from labkit import sharegroups

        self.ns, self.cluster, self.jobs, self.max_attempts = ns, ns.cluster, jobs, max_attempts
        run = tag()
        self.topic, self.group = self.cluster.create_topic(f"jobs-{run}", partitions=1), f"workers-{run}"
        sharegroups.configure_group(self.cluster, self.group, auto_offset_reset="earliest",
                                    delivery_count_limit=GROUP_LIMIT)
        self.work = Path(tempfile.mkdtemp(prefix="labkit-queue-"))
        self.log = self.work / "attempts.log"
        self.log.touch()
        self.pids: list[int] = []

    def start(self, workers: int, idle: float = IDLE) -> None:
        for _ in range(workers):
            self.pids.append(self.ns.run(start_worker, self.cluster.bootstrap_servers, self.topic, self.group,
                                         str(self.log), self.max_attempts, idle))

    def wait_joined(self, workers: int, timeout: float = 45.0) -> None:
        """Until the broker lists ``workers`` members of the share group."""
        from labkit.errors import LabkitError
        from labkit.sharegroups import read_share_group
        from labkit.waiting import WaitTimeout, Wait

        elsewhere: list[str] = []

        def members() -> bool:
            try:
                return len(read_share_group(self.cluster, self.group).members) >= workers
            except LabkitError:
                # no member yet -- or the workers joined a consumer group of that name: no need to wait then
                elsewhere[:] = self._consumer_group_members()
                return bool(elsewhere)

        try:
            Wait(f"{workers} workers in share group {self.group}", timeout=timeout, interval=0.5).until(members)
        except WaitTimeout:
            raise AssertionError(f"{workers} workers were started, but the broker never listed {workers} members of "
                                 f"the share group {self.group!r}: use a ShareConsumer in that group") from None
        if elsewhere:
            raise AssertionError(f"the workers joined {self.group!r} as a consumer group ({len(elsewhere)} members), "
                                 "not a share group: use a ShareConsumer in that group")

    def _consumer_group_members(self) -> list[str]:
        """Members of a consumer group (classic or consumer protocol) named like the share group, if there is one."""
        try:
            found = self.cluster.admin().describe_consumer_groups([self.group])[self.group].result(timeout=10)
        except Exception:  # noqa: BLE001 - no such consumer group (or a share group: not a consumer group)
            return []
        if "SHARE" in str(getattr(found, "type", "")).upper():
            return []
        return [m.member_id for m in found.members or []]

    def send(self) -> None:
        from labkit.sharegroups import produce_jobs

        produce_jobs(self.cluster, self.topic, self.jobs)

    def finish(self, timeout: float = RUN_TIMEOUT) -> None:
        """Every worker returns by itself (the grader kills the ones still running after ``timeout``)."""
        deadline = time.monotonic() + timeout
        for pid in self.pids:
            status = self.ns.run(harness.reap, pid)
            if status is None:
                harness.wait_for_exit(self.ns, pid, max(deadline - time.monotonic(), 1), "a worker")

    def kill_all(self) -> None:
        for pid in self.pids:
            if self.ns.run(harness.reap, pid) is None:
                harness.kill(self.ns, pid)

    def lines(self) -> list[list[str]]:
        return [line.split(" ") for line in harness.lines(self.log) if line.count(" ") == 3]

    def tries(self) -> dict[str, int]:
        """How many times each job was started."""
        out = {j["id"]: 0 for j in self.jobs}
        for kind, job, _, _ in self.lines():
            out[job] += kind == "start"
        return out

    def done(self) -> dict[str, int]:
        """How many times each job was done (its work succeeded)."""
        out: dict[str, int] = {}
        for kind, job, _, _ in self.lines():
            if kind == "done":
                out[job] = out.get(job, 0) + 1
        return out

    def spans(self) -> dict[int, list[tuple[float, float]]]:
        """Per worker pid: (start, end) of each job it did."""
        started: dict[tuple[str, str], float] = {}
        out: dict[int, list[tuple[float, float]]] = {}
        for kind, job, pid, t in self.lines():
            if kind == "start":
                started[(job, pid)] = float(t)
            elif kind == "done" and (job, pid) in started:
                out.setdefault(int(pid), []).append((started.pop((job, pid)), float(t)))
        return out

    def fates(self) -> dict[int, tuple[str, int]]:
        """offset (= the job's index: one partition, sent in order) -> (state, deliveries), as the broker wrote it."""
        from labkit.sharegroups import record_fates

        found = record_fates(self.cluster, self.group)
        return {int(r.offset): (r.state, int(r.deliveries)) for r in found.itertuples() if r.topic == self.topic}

    def close(self) -> None:
        self.kill_all()
        shutil.rmtree(self.work, ignore_errors=True)
