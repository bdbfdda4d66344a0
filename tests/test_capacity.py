"""labkit.capacity's rules, without a broker (what a cluster really stores is lesson 11's checked output)."""

from __future__ import annotations

import pytest

from labkit import capacity


def test_the_deck_rule_is_computed_as_the_deck_states_it():
    # (message size × 3) × daily quantity × 1.4 = volume per replicated broker; × retention days
    rule = capacity.deck_rule(message_bytes=512, messages_per_day=20_000, retention_days=7)
    assert rule.per_day == pytest.approx(512 * 3 * 20_000 * 1.4)
    assert rule.per_replicated_broker == pytest.approx(512 * 3 * 20_000 * 1.4 * 7)
    assert "per replicated broker" in rule._repr_html_()


def test_each_brokers_share_follows_the_replication_factor_and_the_broker_count():
    one_copy = capacity.per_broker(522, 20_000, 1, replication=1, brokers=1)
    assert one_copy == 522 * 20_000
    assert capacity.per_broker(522, 20_000, 1, replication=2, brokers=3) == pytest.approx(one_copy * 2 / 3)
    assert capacity.per_broker(522, 20_000, 1, replication=3, brokers=3, headroom=1.4) == pytest.approx(one_copy * 1.4)


def test_partitions_cover_the_target_at_the_slower_per_partition_rate():
    assert capacity.partitions_for(100_000, produce_per_partition=30_000, consume_per_partition=12_000) == 9
    assert capacity.partitions_for(10, 30_000, 12_000) == 1
    with pytest.raises(ValueError, match="measured"):
        capacity.partitions_for(100, 0, 10)
