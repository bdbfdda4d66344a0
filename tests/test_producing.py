"""labkit.producing without a broker: what counts as a record stored out of order."""

from __future__ import annotations

import pytest

from labkit.errors import LabkitError
from labkit.producing import ProduceCount, out_of_order, produce_through_refusals, record_id


def _stored(*numbers, partition=0):
    return [(partition, record_id(n, "t")) for n in numbers]


def test_records_in_the_order_sent_are_in_order():
    assert out_of_order(_stored(0, 1, 2, 3)) == 0
    assert out_of_order([]) == 0


def test_a_batch_stored_behind_a_later_one_counts_each_of_its_records():
    # 5-9 refused, 10-14 (already in flight) stored, then 5-9's retry
    assert out_of_order(_stored(*range(5), *range(10, 15), *range(5, 10), 15)) == 5


def test_a_duplicate_copy_is_not_counted_as_out_of_order():
    # 3-4 timed out but were written, then written again by the retry: duplicates, not reordering
    assert out_of_order(_stored(0, 1, 2, 3, 4, 3, 4, 5)) == 0


def test_order_is_per_partition():
    stored = _stored(5, 6, partition=0) + _stored(1, 2, partition=1) + _stored(7, partition=0)
    assert out_of_order(stored) == 0
    assert out_of_order(_stored(5, 6, partition=0) + _stored(2, 1, partition=1)) == 1


def test_the_count_is_a_column_of_the_table():
    row = ProduceCount(sent=3, acked=3, failed=0, stored=3, duplicates=0, lost=0, missing=0, reordered=2).as_row()
    assert row["out of order"] == 2


class _OneReplica:
    def describe_topic(self, topic):
        from types import SimpleNamespace

        return [SimpleNamespace(replicas=(1,), leader=1)]


def test_refusals_need_three_replicas():
    with pytest.raises(LabkitError, match="replicas"):
        produce_through_refusals(_OneReplica(), "orders", {"plain": {}})
