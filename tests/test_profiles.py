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


@pytest.fixture(scope="module")
def definitions():
    """Kafka's own broker config definitions, as the lab reads them from the cached jars (labkit setup made them)."""
    from labkit.runtime.distribution import ensure_distribution

    return ensure_distribution(progress=False).broker_config_definitions()


def test_kafka_s_definitions_give_types_and_ranges(definitions):
    assert definitions["num.partitions"][:3] == ("INT", "range", "1")
    assert definitions["log.retention.ms"][0] == "LONG"
    assert definitions["log.cleanup.policy"] == ("LIST", "choice", "compact,delete")
    assert definitions["auto.create.topics.enable"][0] == "BOOLEAN"


@pytest.mark.parametrize("setting,value,accepts", [
    ("log.retention.ms", "abc", "a whole number (a long) from -9223372036854775808 to 9223372036854775807"),
    ("log.retention.ms", 1.5, "a whole number (a long)"),
    ("num.partitions", -1, "a whole number (an int) of at least 1"),
    ("log.cleanup.policy", "compacted", "a list of: compact, delete"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("log.cleaner.min.cleanable.ratio", 2, "a number from 0 to 1"),
])
def test_a_value_kafka_refuses_is_one_line_naming_what_it_takes(definitions, setting, value, accepts):
    from labkit.runtime.profiles import validate_values

    with pytest.raises(SettingError) as info:
        validate_values({setting: value}, definitions)
    text = str(info.value)
    assert f"{setting}={value!r} is not valid: Kafka takes {accepts}" in text and "\n" not in text


@pytest.mark.parametrize("setting,value", [("log.retention.ms", 60000), ("log.retention.ms", "-1"),
                                           ("num.partitions", 6), ("log.cleanup.policy", ["compact", "delete"]),
                                           ("auto.create.topics.enable", False), ("compression.type", "zstd"),
                                           ("group.consumer.migration.policy", "upgrade")])
def test_values_kafka_takes_pass(definitions, setting, value):
    from labkit.runtime.profiles import validate_values

    validate_values({setting: value}, definitions)


def test_a_bad_value_starts_nothing(tmp_path, monkeypatch, definitions):
    """Refused before any JVM, any directory, any progress bar (issue 26: "Starting Kafka 0/4" stayed above the
    error, and the error quoted a log the failed start had deleted)."""
    import labkit
    from labkit.backends import owned

    bars = []
    monkeypatch.setattr(owned, "Progress", lambda *a, **k: bars.append(a) or pytest.fail("a progress bar appeared"))
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path))
    for bad in ({"log_retention_ms": "abc"}, {"num_partitions": -1}):
        with pytest.raises(SettingError, match="Nothing was started"):
            labkit.start_cluster("three-brokers", **bad)
    assert not bars and list(tmp_path.iterdir()) == []
