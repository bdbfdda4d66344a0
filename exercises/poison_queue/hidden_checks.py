"""Hidden checks of poison_queue (the grader's only): a worker killed in the middle of a job, on jobs, a poison
count and an attempt limit chosen at grading time."""

from __future__ import annotations

import os
import random
import signal
import time

from labkit.grading import check, harness, sibling
from labkit.waiting import Deadline

checks = sibling(__file__)


@check("nothing_lost_when_a_worker_is_killed", points=4, hidden=True)
def nothing_lost_when_a_worker_is_killed(ns):
    """Three workers, jobs chosen now (some failing once, one or two poison, max_attempts 2 to 4); one worker is
    killed with SIGKILL in the middle of a job. Every job that can succeed is done -- the one in progress at the
    kill too -- and accepted; every poison job is archived within max_attempts deliveries."""
    harness.attempted(ns, "run_worker")
    rng = random.Random()
    jobs = checks.make_jobs(rng, good=rng.randint(30, 40), transient=rng.randint(3, 6), poison=rng.randint(1, 2))
    for job in jobs:
        job["ms"] += 60  # long enough to be caught in the middle of one
    pool = checks.Pool(ns, jobs, max_attempts=rng.randint(2, 4))
    try:
        pool.start(3)
        pool.wait_joined(3)
        pool.send()
        victim, in_progress, killed_attempt = kill_mid_job(ns, pool, after=rng.randint(6, 14))
        pool.pids.remove(victim)
        pool.finish()
        done, tries, fates = pool.done(), pool.tries(), pool.fates()
    finally:
        pool.close()
    lost = [j["id"] for j in jobs if j["fails"] < 1000 and j["id"] not in done]
    assert in_progress not in lost, (f"job {in_progress} was in progress when its worker was killed, and was never "
                                     "done: acknowledge a job only after do_job returned")
    assert not lost, f"{len(lost)} jobs were never done, e.g. {lost[:3]}"
    for i, job in enumerate(jobs):
        state, deliveries = fates.get(i, ("never acknowledged", 0))
        if job["fails"] >= 1000:
            # A kill during a poison job's last attempt takes the worker's decision away: the broker hands the job
            # out once more, and that delivery is the one to reject (right solutions lost 4 points to it).
            most = pool.max_attempts + (job["id"] == in_progress and killed_attempt >= pool.max_attempts)
            assert state == "archived" and deliveries <= most and tries[job["id"]] <= most, (
                f"poison job {job['id']} ended {state} after {deliveries} deliveries and {tries[job['id']]} attempts "
                f"(max_attempts {pool.max_attempts}" + (", and a kill during its last one)" if most > pool.max_attempts
                                                        else ")"))
        else:
            assert state == "accepted", f"job {job['id']} ended {state} on the broker, not accepted"


def kill_mid_job(ns, pool, after: int) -> tuple[int, str, int]:
    """Once ``after`` jobs are done, SIGKILL a worker in the middle of a job (frozen first, so the grader sees the
    job still open in the log at the moment it kills); returns (its pid, the job, which attempt at it was cut short)."""
    deadline = Deadline(60)
    while sum(pool.done().values()) < after:
        if deadline.expired():
            raise AssertionError(f"only {sum(pool.done().values())} jobs were done in {deadline}")
        time.sleep(0.05)
    while not deadline.expired():
        opened = open_jobs(pool)
        for pid in [p for p in pool.pids if p in opened]:
            os.kill(pid, signal.SIGSTOP)
            job = open_jobs(pool).get(pid)
            if job is not None:
                attempt = pool.tries()[job]  # counted while the worker is frozen: no other has taken the job yet
                harness.kill(ns, pid)
                return pid, job, attempt
            os.kill(pid, signal.SIGCONT)  # it finished that job meanwhile
        time.sleep(0.01)
    raise AssertionError("no worker was ever seen in the middle of a job")


def open_jobs(pool) -> dict[int, str]:
    """pid -> the job it started and has not finished (per the grader's log)."""
    out: dict[int, str] = {}
    for kind, job, pid, _ in pool.lines():
        if kind == "start":
            out[int(pid)] = job
        elif out.get(int(pid)) == job:
            del out[int(pid)]
    return out
