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
from .maven import ArtifactSet, ProgressCallback, cached, resolve, tqdm_progress
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


def cached_distribution(spec: KafkaSpec | None = None) -> Distribution | None:
    """The distribution if it is usable without any download, else None."""
    if os.environ.get("KAFKA_HOME"):
        return _kafka_home_distribution(Path(os.environ["KAFKA_HOME"]).expanduser())
    spec = spec or kafka_spec()
    artifacts = kafka_artifacts(spec)
    if cached(artifacts) is not None:
        return Distribution(spec.version, artifacts.folder, "cache", artifacts.root)
    return None


def ensure_distribution(progress: bool | ProgressCallback = True) -> Distribution:
    """The Kafka jars, fetched into the user cache first if needed.

    ``progress=True`` shows a progress bar (terminal or notebook) while fetching;
    a callable receives ``(phase, done, total, bytes_done, current)`` instead.
    """
    find_java()
    found = cached_distribution()
    if found is not None:
        return found
    spec = kafka_spec()
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
    path = dist.state_dir / "broker-configs.txt"
    if not path.exists():
        source = Path(__file__).resolve().parents[1] / "java" / "BrokerConfigNames.java"
        java = find_java()
        proc = subprocess.run([str(java.executable), "-cp", dist.classpath, str(source)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise DistributionError(f"Cannot list Kafka's broker settings from {dist.lib_dir}: {proc.stderr.strip()[-300:]}",
                                    f"Delete {dist.state_dir} and run `make setup` again.")
        dist.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(proc.stdout)
        tmp.replace(path)
    return frozenset(path.read_text().split())


@step("Kafka jars")
def _kafka_jars() -> str:
    dist = ensure_distribution(progress=True)
    dist.broker_config_names()
    return f"Kafka {dist.version}, {len(dist.jars())} jars ({dist.source}: {dist.lib_dir})"
