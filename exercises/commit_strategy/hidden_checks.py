"""Hidden checks of commit_strategy (the grader's only): the loop killed mid-batch twice, on records chosen now."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from labkit.grading import check, harness, sibling

checks = sibling(__file__)


@check("nothing_lost_little_replayed_across_crashes", points=5, hidden=True)
def nothing_lost_little_replayed_across_crashes(ns):
    """Killed with SIGKILL twice, each time while some records are processed but not committed (or committed
    but not processed), and restarted: every record is processed at least once, and each crash makes the loop
    process again at most the batch it was working on (at most 100 records)."""
    harness.attempted(ns, "consume_loop")
    cluster = ns.cluster
    topic, group, values = checks.make_events(cluster, random.randint(560, 640))
    crashes = 2
    with tempfile.TemporaryDirectory(prefix="labkit-commit-") as work:
        log = Path(work) / "processed.log"
        hits = checks.crash_mid_batch(ns, (cluster.bootstrap_servers, topic, group, str(log), 6.0), log, group,
                                      topic, crashes=crashes)
        seen = [v for _, _, v in checks.processed(log)]
    missing = set(values) - set(seen)
    assert not missing, (f"{len(missing)} records were never processed, e.g. {sorted(missing)[:3]} "
                         f"({'; '.join(hits)}): commit only what you have processed")
    twice = len(seen) - len(set(seen))
    allowed = crashes * checks.MAX_REPLAY_PER_CRASH
    assert twice <= allowed, (f"after {crashes} crashes {twice} records were processed twice (at most {allowed}: "
                              f"the batch in progress at each crash; {'; '.join(hits)}): commit after every batch")
