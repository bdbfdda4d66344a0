"""Finding Java and the Kafka jars, and every way that can fail (no broker needed)."""

import os
import stat
from pathlib import Path

import pytest

from labkit.runtime import distribution, jvm, maven
from labkit.runtime.distribution import cached_distribution, ensure_distribution
from labkit.runtime.jvm import _parse_java_version, find_java
from labkit.errors import DistributionError, JavaError, OfflineError


@pytest.fixture(autouse=True)
def _fresh_java_cache():
    jvm._java_at.cache_clear()
    yield
    jvm._java_at.cache_clear()


@pytest.mark.parametrize("text,major", [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_402"', 8),
    ('openjdk version "11.0.2-ea" 2019-01-15', 11),
])
def test_parse_java_version(text, major):
    assert _parse_java_version(text)[1] == major


def _fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2020-01-01\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


def test_java_too_old_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, "11.0.2")))
    with pytest.raises(JavaError) as info:
        find_java()
    assert "too old" in str(info.value) and "17" in str(info.value)
    assert "JAVA_HOME" in info.value.hint


def test_no_java_at_all(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaError, match="Java was not found"):
        find_java()


def test_current_java_is_fine():
    assert find_java().major >= 17


def test_offline_with_empty_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LABKIT_MAVEN_REPOSITORY", "http://127.0.0.1:9/maven2/")
    distribution.kafka_spec.cache_clear()
    try:
        with pytest.raises(OfflineError) as info:
            ensure_distribution(progress=False)
    finally:
        distribution.kafka_spec.cache_clear()
    assert "cannot be reached" in str(info.value)
    assert "KAFKA_HOME" in info.value.hint
    assert not list((tmp_path / "cache").glob("kafka-*/libs"))


def test_kafka_home_that_is_not_kafka(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    with pytest.raises(DistributionError, match="does not look like an Apache Kafka release"):
        cached_distribution()


def test_kafka_home_is_honoured(tmp_path, monkeypatch):
    real = ensure_distribution(progress=False)
    home = tmp_path / "kafka_2.13-4.3.1"
    (home / "libs").mkdir(parents=True)
    for jar in real.jars():
        os.symlink(jar, home / "libs" / jar.name)
    monkeypatch.setenv("KAFKA_HOME", str(home))
    dist = cached_distribution()
    assert dist is not None and dist.source == "KAFKA_HOME"
    assert dist.version == real.version and dist.lib_dir == home / "libs"


def test_cached_distribution_knows_broker_settings():
    names = ensure_distribution(progress=False).broker_config_names()
    assert {"log.retention.ms", "min.insync.replicas", "group.initial.rebalance.delay.ms"} <= names
    assert len(names) > 200


def test_ivy_comes_from_the_pyspark_wheel():
    jar = maven.ivy_jar()
    assert jar is not None and jar.name.startswith("ivy-") and "pyspark" in str(jar)
