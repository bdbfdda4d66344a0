"""Where the lab's environment files live, and reading them.

``environments/`` (next to the package in a checkout) holds the pinned Kafka
version, JVM options, lab-wide broker defaults and one TOML file per cluster
profile. ``LABKIT_ENVIRONMENTS`` points elsewhere if set.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from ..errors import LabkitError


def environments_dir() -> Path:
    """The directory holding ``kafka.toml`` and ``profiles/``."""
    env = os.environ.get("LABKIT_ENVIRONMENTS")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]  # labkit/
    candidates += [here.parent / "environments", here / "environments"]
    for candidate in candidates:
        if (candidate / "kafka.toml").is_file():
            return candidate
    raise LabkitError(
        "Cannot find the lab's environments/ directory (kafka.toml).",
        "Run from a Kafka Lab checkout installed with `make setup`, or set LABKIT_ENVIRONMENTS.",
    )


def load_toml(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        try:
            return tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise LabkitError(f"{path} is not valid TOML: {exc}.", "Fix the file and try again.") from exc


@dataclass(frozen=True)
class KafkaSpec:
    """The pinned Kafka distribution and how to run it (from ``kafka.toml``)."""

    version: str
    scala: str
    artifacts: tuple[str, ...]
    repository: str
    heap: str
    jvm_options: tuple[str, ...]
    tool_heap: str
    tool_options: tuple[str, ...]
    log4j_config: Path
    tools_log4j_config: Path
    lab_defaults: dict[str, Any] = field(default_factory=dict)
    #: The release before ``version``, fetched too: a cluster can start on it and be upgraded (lesson 13).
    previous: str = ""
    #: Kafka's own tiered-storage plugin (``LocalTieredStorage``, in kafka-storage's test jar) as
    #: group:artifact:version:classifier, its class, and the Kafka version a tiered cluster runs on.
    tiered_plugin: str = ""
    tiered_class: str = ""
    tiered_version: str = ""
    #: What a broker's heap starts at (``-Xms``; it grows to ``heap`` as the broker needs it).
    heap_start: str = ""

    def at(self, version: str) -> "KafkaSpec":
        """The same spec for another Kafka ``version`` (its jars, same JVM options)."""
        return replace(self, version=version)

    def coordinates(self) -> list[tuple[str, str, str]]:
        """Maven (group, artifact, version) triples to resolve."""
        out = []
        for pattern in self.artifacts:
            text = pattern.format(version=self.version, scala=self.scala)
            group, artifact, version = text.split(":")
            out.append((group, artifact, version))
        return out


@lru_cache(maxsize=None)
def kafka_spec() -> KafkaSpec:
    root = environments_dir()
    data = load_toml(root / "kafka.toml")
    kafka, jvm, tiered = data["kafka"], data["jvm"], data.get("tiered_storage", {})
    defaults = load_toml(root / "lab-defaults.toml").get("settings", {})
    return KafkaSpec(
        version=os.environ.get("LABKIT_KAFKA_VERSION", kafka["version"]),
        scala=kafka["scala"],
        artifacts=tuple(kafka["artifacts"]),
        repository=os.environ.get("LABKIT_MAVEN_REPOSITORY", kafka["repository"]),
        heap=jvm["heap"],
        heap_start=jvm.get("heap_start", jvm["heap"]),
        jvm_options=tuple(jvm["options"]),
        tool_heap=jvm["tool_heap"],
        tool_options=tuple(jvm["tool_options"]),
        log4j_config=root / "log4j2.xml",
        tools_log4j_config=root / "log4j2-tools.xml",
        lab_defaults=dict(defaults),
        previous=kafka.get("previous", ""),
        tiered_plugin=tiered.get("plugin", "").format(version=tiered.get("version", kafka["version"])),
        tiered_class=tiered.get("class", ""),
        tiered_version=tiered.get("version", kafka["version"]),
    )
