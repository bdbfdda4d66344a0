"""Finding Java and the Kafka jars.

Kafka Lab runs Apache Kafka from its jars, resolved once from Maven Central into
a per-version user cache (see :mod:`labkit.runtime.maven`). ``KAFKA_HOME`` pointing at
an unpacked Apache Kafka release is used instead when set.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .environment import KafkaSpec, kafka_spec
from ..errors import DistributionError
from .jvm import find_java
from .cache import cache_dir
from .maven import ArtifactSet, ProgressCallback, cached, download_jar, resolve, tqdm_progress
from .steps import step

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the jars


@dataclass(frozen=True)
class Distribution:
    """A usable set of Kafka jars."""

    version: str
    lib_dir: Path
    #: "cache" (resolved from Maven Central) or "KAFKA_HOME".
    source: str
    #: Where generated per-distribution files (config names, CDS archive) live.
    state_dir: Path

    @property
    def classpath(self) -> str:
        return str(self.lib_dir / "*")

    def jars(self) -> list[Path]:
        return sorted(self.lib_dir.glob("*.jar"))

    def broker_config_names(self) -> frozenset[str]:
        """Every broker setting this Kafka version accepts (read from its own ConfigDef)."""
        return _broker_config_names(self)

    def broker_config_definitions(self) -> dict[str, tuple[str, ...]]:
        """Every broker setting with its type and the values Kafka's own validator accepts, read from its
        ConfigDef: ``{name: (TYPE, kind, *detail)}`` (``labkit/java/BrokerConfigNames.java --definitions``)."""
        return _broker_config_definitions(self)


def _kafka_home_distribution(home: Path) -> Distribution:
    libs = home / "libs"
    jars = sorted(libs.glob("kafka_2.13-*.jar")) if libs.is_dir() else []
    jars = [j for j in jars if not re.search(r"-(sources|javadoc|test)\.jar$", j.name)]
    if not jars:
        raise DistributionError(f"KAFKA_HOME={home} does not look like an Apache Kafka release (no libs/kafka_2.13-*.jar).",
                                "Point KAFKA_HOME at an unpacked kafka_2.13-4.x release, or unset it to use the lab's own jars.")
    version = jars[0].name[len("kafka_2.13-"):-len(".jar")]
    if not version.startswith("4."):
        raise DistributionError(f"KAFKA_HOME={home} holds Kafka {version}; Kafka Lab needs Kafka 4.x (KRaft only).",
                                "Point KAFKA_HOME at a Kafka 4.x release, or unset it.")
    digest = hashlib.sha1(str(home.resolve()).encode()).hexdigest()[:10]
    return Distribution(version, libs, "KAFKA_HOME", cache_dir() / f"kafka-home-{digest}")


def kafka_artifacts(spec: KafkaSpec | None = None) -> ArtifactSet:
    """The pinned Kafka version's jars as Maven artifacts (``environments/kafka.toml``)."""
    spec = spec or kafka_spec()
    return ArtifactSet(
        f"Kafka {spec.version}", f"kafka-{spec.version}", tuple(spec.coordinates()), subdir="libs", required="kafka_",
        hint_404="Check the version pinned in environments/kafka.toml.",
        hint_offline="Connect to the internet and run `make setup` once, or set KAFKA_HOME to an unpacked "
                     "Apache Kafka 4.x release.")


def lab_versions() -> list[str]:
    """The Kafka versions the lab keeps in its cache: its own, then the one before (``kafka.toml``)."""
    spec = kafka_spec()
    return [v for i, v in enumerate([spec.version, spec.previous]) if v and v not in (spec.version, spec.previous)[:i]]


def _spec_for(version: str | None) -> KafkaSpec:
    spec = kafka_spec()
    return spec if version in (None, spec.version) else spec.at(version)


def cached_distribution(spec: KafkaSpec | None = None, version: str | None = None) -> Distribution | None:
    """The distribution (the lab's version, or ``version``) if it is usable without any download, else None.

    ``KAFKA_HOME`` replaces the lab's own version only: another version still comes from the cache.
    """
    spec = spec or _spec_for(version)
    if os.environ.get("KAFKA_HOME") and spec.version == kafka_spec().version:
        return _kafka_home_distribution(Path(os.environ["KAFKA_HOME"]).expanduser())
    artifacts = kafka_artifacts(spec)
    if cached(artifacts) is not None:
        return Distribution(spec.version, artifacts.folder, "cache", artifacts.root)
    return None


def ensure_distribution(progress: bool | ProgressCallback = True, version: str | None = None) -> Distribution:
    """The Kafka jars (the lab's version, or ``version``), fetched into the user cache first if needed.

    ``progress=True`` shows a progress bar (terminal or notebook) while fetching;
    a callable receives ``(phase, done, total, bytes_done, current)`` instead.
    """
    find_java()
    spec = _spec_for(version)
    found = cached_distribution(spec)
    if found is not None:
        return found
    artifacts = kafka_artifacts(spec)
    callback, close = (progress, lambda: None) if callable(progress) else tqdm_progress(artifacts.name, progress)
    try:
        resolve(artifacts, callback, repo=spec.repository)
    finally:
        close()
    dist = Distribution(spec.version, artifacts.folder, "cache", artifacts.root)
    _broker_config_names(dist)
    return dist


@lru_cache(maxsize=None)
def _broker_config_names(dist: Distribution) -> frozenset[str]:
    return frozenset(_config_listing(dist, "broker-configs.txt").split())


@lru_cache(maxsize=None)
def _broker_config_definitions(dist: Distribution) -> dict[str, tuple[str, ...]]:
    text = _config_listing(dist, "broker-config-definitions.tsv", "--definitions")
    return {fields[0]: tuple(fields[1:]) for fields in (line.split("\t") for line in text.splitlines()) if fields[0]}


def _config_listing(dist: Distribution, name: str, *args: str) -> str:
    """What ``BrokerConfigNames.java`` prints about ``dist``'s broker configs, kept in ``state_dir/name``."""
    path = dist.state_dir / name
    if not path.exists():
        source = Path(__file__).resolve().parents[1] / "java" / "BrokerConfigNames.java"
        java = find_java()
        proc = subprocess.run([str(java.executable), "-cp", dist.classpath, str(source), *args],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise DistributionError(f"Cannot list Kafka's broker settings from {dist.lib_dir}: {proc.stderr.strip()[-300:]}",
                                    f"Delete {dist.state_dir} and run `make setup` again.")
        dist.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(proc.stdout)
        tmp.replace(path)
    return path.read_text()


def tiered_storage_plugin(progress: bool = True) -> Path:
    """Kafka's own ``LocalTieredStorage`` jar (``[tiered_storage]`` in kafka.toml), fetched into the cache once.

    It is a plugin, loaded by the broker from ``remote.log.storage.manager.class.path``; its classes
    run against the broker's own jars, so it must come from the Kafka version the broker runs.
    """
    spec = kafka_spec()
    if not spec.tiered_plugin:
        raise DistributionError("environments/kafka.toml names no tiered-storage plugin ([tiered_storage]).",
                                "Add a [tiered_storage] table with plugin, class and version.")
    group, artifact, version, classifier = spec.tiered_plugin.split(":")
    target = cache_dir() / f"kafka-{version}" / "plugins" / f"{artifact}-{version}-{classifier}.jar"
    return download_jar((group, artifact, version), classifier, target, repo=spec.repository,
                        what=f"Kafka {version}'s tiered-storage plugin")


@step("Kafka jars")
def _kafka_jars() -> str:
    found = []
    for version in lab_versions():
        dist = ensure_distribution(progress=True, version=version)
        dist.broker_config_names()
        dist.broker_config_definitions()
        found.append(f"Kafka {dist.version}, {len(dist.jars())} jars ({dist.source}: {dist.lib_dir})")
    return "; ".join(found)


@step("Tiered-storage plugin")
def _tiered_plugin() -> str:
    jar = tiered_storage_plugin()
    return f"{kafka_spec().tiered_class.rsplit('.', 1)[-1]} from {jar.name} ({jar.stat().st_size / 1e6:.1f} MB)"
