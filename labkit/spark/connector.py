"""Spark's Kafka connector, resolved once into the lab's cache, and the Java Spark runs on.

The connector (``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the installed
pyspark version) is resolved from Maven Central by :mod:`labkit.runtime.maven` -- the same
way Kafka's jars are -- and only the jars pyspark does not already ship are kept
(the connector, its token provider, ``kafka-clients`` and ``commons-pool2``).
``labkit setup`` (``make setup``) pre-fetches them.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Optional

from ..errors import LabkitError
from ..runtime.jvm import find_java
from ..runtime.maven import ArtifactSet, cached, fetch, jar_artifact, keep_missing_jars
from ..runtime.steps import step

log = logging.getLogger(__name__)

SCALA = "2.13"
CONNECTOR_GROUP = "org.apache.spark"
CONNECTOR_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA}"
#: Java versions Spark 4 is built and tested for.
SUPPORTED_JAVA = (17, 21)


def pyspark_version() -> str:
    """The installed pyspark's version (``4.2.0``), without any ``.dev``/``rc`` suffix."""
    try:
        import pyspark
    except ImportError as exc:
        raise LabkitError("PySpark is not installed.", "Run `make setup` (it installs pyspark).") from exc
    match = re.match(r"\d+\.\d+\.\d+", pyspark.__version__)
    return match.group(0) if match else pyspark.__version__


def connector_coordinates(version: Optional[str] = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<version>`` (default: the installed pyspark's)."""
    return f"{CONNECTOR_GROUP}:{CONNECTOR_ARTIFACT}:{version or pyspark_version()}"


def connector_artifacts(version: Optional[str] = None) -> ArtifactSet:
    """The connector at ``version`` (default: the installed pyspark's), without the jars pyspark ships."""
    version = version or pyspark_version()
    shipped = _pyspark_jar_names()
    return ArtifactSet(
        f"Spark Kafka connector {version}", f"spark-kafka-{version}",
        ((CONNECTOR_GROUP, CONNECTOR_ARTIFACT, version),), subdir="jars",
        # Skip what pyspark already ships (Hadoop's client alone is 30 MB): only the rest is downloaded.
        excludes=frozenset(shipped), required=CONNECTOR_ARTIFACT,
        hint_404=f"The installed pyspark {version} may be newer than the newest published connector: install the "
                 "pyspark release the lab pins (`make setup`), or `pip install 'pyspark==<newest connector version>'`.",
        hint_offline="Connect to the internet and run `make setup` once; after that Spark works offline.",
        keep=lambda jars: keep_missing_jars(jars, shipped))


def connector_dir(version: Optional[str] = None) -> Path:
    """Where the connector jars for ``version`` live: ``<cache>/spark-kafka-<version>/jars``."""
    return connector_artifacts(version).folder


def cached_connector(version: Optional[str] = None) -> Optional[list[Path]]:
    """The connector jars if they are already in the cache, else None."""
    return cached(connector_artifacts(version)) or None


def ensure_connector(version: Optional[str] = None, progress: bool = True,
                     repository: Optional[str] = None) -> list[Path]:
    """The connector jars, resolved from Maven Central into the user cache first if needed."""
    artifacts = connector_artifacts(version)
    if not cached(artifacts):
        find_java()  # the resolver runs on it: say so before anything is fetched
    return fetch(artifacts, progress, repo=repository)


def _pyspark_jar_names() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {jar_artifact(j.name) for j in jars.glob("*.jar")}


# ---------------------------------------------------------------- Java


def check_java() -> str:
    """The Java version PySpark will use; raises :class:`JavaError` if Spark cannot run on it."""
    java = find_java()  # 17+ or a one-line JavaError
    if java.major not in SUPPORTED_JAVA:
        log.warning("Java %s is not one Spark %s is tested with (%s)", java.version, pyspark_version(),
                    " or ".join(map(str, SUPPORTED_JAVA)))
    return java.version


@step("Spark Kafka connector")
def _prefetch_connector() -> str:
    jars = ensure_connector(progress=True)
    return f"{connector_coordinates()}: {len(jars)} jars ({connector_dir()})"
