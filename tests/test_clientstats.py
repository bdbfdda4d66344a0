"""labkit.clientstats: librdkafka's two consumer lags, read from a statistics document (no broker)."""

from __future__ import annotations

import json

from labkit.clientstats import ClientStats, total_lag


def _report(committed: int, stored: int, high: int) -> str:
    # the fields librdkafka's STATISTICS.md documents for a consumer's partition, plus its "UA" pseudo-partition
    part = {"hi_offset": high, "committed_offset": committed, "stored_offset": stored,
            "consumer_lag": high - committed, "consumer_lag_stored": high - stored}
    return json.dumps({"ts": 1_000_000, "topics": {"clicks": {"partitions": {"0": part, "-1": {"consumer_lag": -1}}}}})


def test_lag_from_the_commit_and_lag_from_the_position_are_kept_apart():
    stats = ClientStats()
    stats(_report(committed=100, stored=4999, high=4999))   # read everything, committed once
    row = stats.partitions().loc[("clicks", 0)]
    assert (row.consumer_lag, row.consumer_lag_stored) == (4899, 0)
    assert (row.committed_offset, row.stored_offset) == (100, 4999)
    history = stats.history()
    assert history.consumer_lag.tolist() == [4899] and history.consumer_lag_stored.tolist() == [0]
    assert total_lag(stats.latest, "consumer_lag_stored") == 0
