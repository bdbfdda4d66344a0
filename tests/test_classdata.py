"""The fast-start machinery: node launcher, class-data archives keyed to their JVM set-up, and the fallbacks."""

import os
import shutil
from pathlib import Path

import pytest

import labkit
from labkit.runtime import classdata
from labkit.runtime.distribution import Distribution, ensure_distribution


@pytest.fixture
def dist(tmp_path) -> Distribution:
    """The real jars with a private state dir (launcher jar, archives)."""
    real = ensure_distribution(progress=False)
    _forget_jars()
    yield Distribution(real.version, real.lib_dir, real.source, tmp_path / "state")
    _forget_jars()


def _forget_jars():
    classdata.compiled_jar.cache_clear()


def test_archive_key_follows_classpath_and_options(dist, tmp_path):
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    cp = os.pathsep.join([str(jar), *map(str, dist.jars()[:3])])
    first = classdata.archive_path(dist, "broker", cp, ["-Xmx320m"])
    assert first == classdata.archive_path(dist, "broker", cp, ["-Xmx320m"])
    assert first.parent == dist.state_dir / "cds" and first.name.startswith("broker-")
    assert classdata.archive_path(dist, "broker", cp, ["-Xmx256m"]) != first
    jar.write_bytes(b"two, longer")
    assert classdata.archive_path(dist, "broker", cp, ["-Xmx320m"]) != first


def test_no_archive_means_no_sharing_options(dist, tmp_path, monkeypatch):
    missing = tmp_path / "broker-0.jsa"
    assert classdata.use_options(missing) == []
    missing.write_bytes(b"x")
    assert classdata.use_options(missing)[0] == f"-XX:SharedArchiveFile={missing}"
    monkeypatch.setenv("LABKIT_CDS", "0")
    assert classdata.use_options(missing) == []


@pytest.mark.skipif(not shutil.which("javac"), reason="needs a JDK's javac")
def test_launcher_is_compiled_once_and_checks(dist):
    jar = classdata.launcher_jar(dist)
    assert jar is not None and jar.exists()
    built = jar.stat().st_mtime_ns
    _forget_jars()
    assert classdata.launcher_jar(dist) == jar and jar.stat().st_mtime_ns == built  # cached on disk, not rebuilt
    cp = classdata.classpath(dist, jar)
    assert cp.split(os.pathsep)[0] == str(jar)


def test_a_source_is_not_compiled_where_the_cache_cannot_be_written(tmp_path):
    """A classroom learner's jar cache is read-only: no jar, and the caller launches the source as it is."""
    real = ensure_distribution(progress=False)
    (tmp_path / "file").write_text("a file where the state dir's parent should be")
    blocked = Distribution(real.version, real.lib_dir, real.source, tmp_path / "file" / "state")
    _forget_jars()
    try:
        assert classdata.compiled_jar(blocked, classdata.LAUNCHER_SOURCE, "labkit-launcher") is None
    finally:
        _forget_jars()


@pytest.mark.integration
def test_unusable_archive_still_starts(tmp_path, monkeypatch, jvm_pids):
    """A corrupt (or stale) archive at the keyed path: the JVMs start without it."""
    junk = tmp_path / "broker-junk.jsa"
    junk.write_bytes(b"not an archive" * 100)
    real = classdata.broker_setup
    monkeypatch.setattr(classdata, "broker_setup", lambda d: real(d)[:2] + (junk,))
    c = labkit.start_cluster("single-broker", progress=False)
    try:
        assert c.live_broker_ids() == {1}
        assert any(f"-XX:SharedArchiveFile={junk}" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
                   for pid in jvm_pids(str(c.data_dir)))
    finally:
        c.stop()
