"""Profiles and broker settings: names, merging, validation (no broker needed)."""

import pytest

from labkit.errors import ProfileError, SettingError
from labkit.runtime.profiles import (MANAGED_SETTINGS, list_profiles, load_profile, normalize_overrides, render_value,
                                     validate_settings)


def test_the_three_profiles_exist():
    assert {"single-broker", "three-brokers", "five-brokers"} <= set(list_profiles())


def test_three_brokers_is_rf3_with_min_isr_2():
    p = load_profile("three-brokers")
    assert p.brokers == 3 and p.controllers == 3
    assert p.settings["default.replication.factor"] == 3
    assert p.settings["offsets.topic.replication.factor"] == 3
    assert p.settings["min.insync.replicas"] == 2


def test_lab_defaults_are_under_the_profile():
    p = load_profile("single-broker")
    assert p.settings["group.initial.rebalance.delay.ms"] == 0
    assert p.settings["log.cleaner.dedupe.buffer.size"] < 128 * 1024 * 1024
    assert p.settings["offsets.topic.replication.factor"] == 1


def test_five_brokers_has_a_three_node_quorum():
    p = load_profile("five-brokers")
    assert (p.brokers, p.controllers) == (5, 3)


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(ProfileError) as info:
        load_profile("three-broker")
    message = str(info.value)
    assert "Did you mean 'three-brokers'" in message
    for name in list_profiles():
        assert name in message
    assert info.value.valid == list_profiles()


def test_keyword_overrides_use_underscores_for_dots():
    assert normalize_overrides({"log_retention_ms": 1, "segment.bytes": 2}) == {
        "log.retention.ms": 1, "segment.bytes": 2}


def test_unknown_setting_suggests_close_names():
    valid = {"log.retention.ms", "log.retention.bytes", "num.partitions"}
    with pytest.raises(SettingError) as info:
        validate_settings(["log.retension.ms"], valid)
    assert "log.retention.ms" in info.value.suggestions
    assert "Did you mean" in str(info.value)


def test_managed_settings_cannot_be_overridden():
    assert "listeners" in MANAGED_SETTINGS
    with pytest.raises(SettingError, match="managed by labkit"):
        validate_settings(["node.id"], {"node.id"})


@pytest.mark.parametrize("value,text", [(True, "true"), (False, "false"), (3, "3"), (["a", "b"], "a,b")])
def test_render_value(value, text):
    assert render_value(value) == text
