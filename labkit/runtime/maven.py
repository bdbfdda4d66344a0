"""Jars from Maven Central, resolved once into the lab's user cache.

Everything the lab runs on the JVM comes from here: Kafka's own jars, Spark's
Kafka connector, Kafka Connect plugins, the Prometheus JMX agent. An
:class:`ArtifactSet` names Maven coordinates and where they go in the cache;
:func:`resolve` fetches them with their runtime dependencies (with the Apache Ivy
jar that ships inside the pyspark wheel, or Maven's ``mvn`` when Ivy is not there)
into ``<cache>/<key>/<subdir>`` behind a file lock, with a progress callback, and
marks the folder complete. A missing version (HTTP 404) and an unreachable
repository are one-line errors that say what to do; a failed fetch leaves no
half-made folder behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional
from xml.sax.saxutils import quoteattr

from ..errors import DistributionError, OfflineError
from .cache import cache_dir, file_lock
from .jvm import find_java

log = logging.getLogger(__name__)

#: Called while fetching with (phase, done, total, bytes_done, current_name); phase is
#: "resolving" (reading POMs: done = modules found, total unknown = 0) or "downloading".
ProgressCallback = Callable[[str, int, int, int, str], None]

Coordinate = tuple[str, str, str]


def repository() -> str:
    """The Maven repository: ``$LABKIT_MAVEN_REPOSITORY`` or the one pinned in ``environments/kafka.toml``."""
    from .environment import kafka_spec

    return os.environ.get("LABKIT_MAVEN_REPOSITORY") or kafka_spec().repository


@dataclass(frozen=True)
class ArtifactSet:
    """Maven artifacts fetched together, with their runtime dependencies, into one cached folder."""

    #: What the learner reads in progress bars and errors: "Kafka 4.3.1", "Spark Kafka connector 4.2.0".
    name: str
    #: The cache folder: ``<cache>/<key>/<subdir>``.
    key: str
    coordinates: tuple[Coordinate, ...]
    subdir: str = "libs"
    #: Module names left out of every dependency's tree (jars the caller already has).
    excludes: frozenset[str] = frozenset()
    #: A jar name prefix that must be among the results, or the fetch failed.
    required: str = ""
    #: What to do when the first coordinate is not in the repository (HTTP 404).
    hint_404: str = "Check the version pinned in environments/."
    #: What to do when the repository cannot be reached and nothing is cached.
    hint_offline: str = "Connect to the internet and run `make setup` once; after that the lab works offline."
    #: Resolved jars -> the ones to keep (default: all).
    keep: Optional[Callable[[list[Path]], list[Path]]] = field(default=None, compare=False)

    @property
    def root(self) -> Path:
        return cache_dir() / self.key

    @property
    def folder(self) -> Path:
        return self.root / self.subdir


_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-(?P<version>\d+(?:\.\d+)*(?:[-.][A-Za-z0-9.]+)?)\.jar$")


def jar_artifact(filename: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``; ``zstd-jni-1.5.7-7.jar`` -> ``zstd-jni``."""
    match = _VERSIONED_JAR.match(filename)
    return match.group("name") if match else filename.removesuffix(".jar")


def keep_missing_jars(resolved: list[Path], shipped: set[str]) -> list[Path]:
    """The resolved jars whose artifact is not among ``shipped`` (jars the caller already has, in any version)."""
    return [j for j in resolved if jar_artifact(j.name) not in shipped]


def cached(artifacts: ArtifactSet) -> Optional[list[Path]]:
    """The set's jars when a complete fetch is in the cache, else None (nothing is downloaded)."""
    if not (artifacts.folder / ".complete").exists():
        return None
    return sorted(artifacts.folder.glob("*.jar"))


def resolve(artifacts: ArtifactSet, progress: ProgressCallback = lambda *a: None,
            repo: Optional[str] = None) -> list[Path]:
    """The set's jars, fetched into the cache first when they are not there yet."""
    found = cached(artifacts)
    if found is not None:
        return found
    repo = repo or repository()
    check_reachable(artifacts, repo)  # before creating anything in the cache
    artifacts.root.mkdir(parents=True, exist_ok=True)
    with file_lock(artifacts.root / ".lock"):
        found = cached(artifacts)  # another process may have finished meanwhile
        if found is not None:
            return found
        _fetch(artifacts, repo, progress)
    return cached(artifacts) or []


def fetch(artifacts: ArtifactSet, progress: bool = True, repo: Optional[str] = None) -> list[Path]:
    """:func:`resolve` with a progress bar of the modules found, drawn only when something must be fetched."""
    found = cached(artifacts)
    if found:
        return found
    from .progress import Progress

    bar = Progress(progress, artifacts.name, total=None)
    try:
        return resolve(artifacts, lambda phase, n, total, size, name: bar.step(name) if phase == "resolving" else None,
                       repo=repo)
    finally:
        bar.close()


def download_jar(coordinate: Coordinate, classifier: str, target: Path, repo: Optional[str] = None,
                 what: str = "a jar", timeout: float = 60.0) -> Path:
    """One jar with a classifier (``kafka-storage-4.3.1-test.jar``), no dependencies, checked against the
    repository's SHA-1, into ``target`` (kept there: a second call downloads nothing).

    Ivy and ``mvn dependency:copy-dependencies`` resolve dependency trees; a test jar is one file whose
    dependencies the caller already has (Kafka's own jars), so it is fetched as a file.
    """
    if target.exists():
        return target
    group, artifact, version = coordinate
    base = (f"{(repo or repository()).rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/"
            f"{artifact}-{version}-{classifier}.jar")
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / ".lock"):
        if target.exists():
            return target
        try:
            with urllib.request.urlopen(base, timeout=timeout) as resp:
                data = resp.read()
            with urllib.request.urlopen(base + ".sha1", timeout=timeout) as resp:
                expected = resp.read().decode().split()[0].strip().lower()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise DistributionError(f"{what} is not on Maven Central (404): {base}",
                                        "Check the version pinned in environments/kafka.toml.") from exc
            raise OfflineError(f"Cannot fetch {what} (HTTP {exc.code}).", "Check your network and run `make setup` again.") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise OfflineError(f"{what} is not in the cache and cannot be fetched ({getattr(exc, 'reason', exc)}).",
                               "Connect to the internet and run `make setup` once.") from exc
        if hashlib.sha1(data).hexdigest() != expected:
            raise DistributionError(f"{what} from {base} does not match its SHA-1 checksum.",
                                    "Run `make setup` again; if it persists, the repository is serving a broken file.")
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(target)
    return target


def check_reachable(artifacts: ArtifactSet, repo: str, timeout: float = 15.0) -> None:
    """Raise a one-line error when the set's first artifact cannot be fetched (no such version, or offline)."""
    group, artifact, version = artifacts.coordinates[0]
    try:
        head_pom(repo, group, artifact, version, timeout=timeout)
        return
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise DistributionError(f"{artifacts.name} is not on {repo} (404): {group}:{artifact}:{version} is not "
                                    "published there.", artifacts.hint_404) from exc
        raise OfflineError(f"Cannot fetch {artifacts.name} from {repo} (HTTP {exc.code}).",
                           "Check your network and run `make setup` again.") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OfflineError(f"{artifacts.name} is not in the cache ({cache_dir()}) and {repo} cannot be "
                           f"reached ({reason}).", artifacts.hint_offline) from exc


def head_pom(repo: str, group: str, artifact: str, version: str, timeout: float = 15.0) -> str:
    """HEAD the artifact's POM in a Maven repository; returns its URL, raises urllib's HTTPError/URLError."""
    url = f"{repo.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
        return url


def ivy_jar() -> Optional[Path]:
    """The Apache Ivy jar shipped inside the pyspark wheel, if pyspark is installed."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jars = sorted(Path(location, "jars").glob("ivy-*.jar"))
        if jars:
            return jars[-1]
    return None


def _fetch(artifacts: ArtifactSet, repo: str, progress: ProgressCallback) -> None:
    with tempfile.TemporaryDirectory(prefix="labkit-resolve-", dir=artifacts.root) as tmp:
        work = Path(tmp)
        target = work / artifacts.subdir
        target.mkdir()
        ivy = ivy_jar()
        if ivy is not None:
            cmd = ivy_command(find_java().executable, ivy, artifacts.coordinates, repo, work, target,
                              module=artifacts.key, excludes=artifacts.excludes)
        elif shutil.which("mvn"):
            cmd = mvn_command(artifacts.coordinates, work, target)
        else:
            raise DistributionError(f"Neither Apache Ivy (inside the pyspark package) nor Maven (`mvn`) is available "
                                    f"to fetch {artifacts.name}.", "Run `make setup` (it installs pyspark), "
                                    "or install Maven.")
        run_resolver(cmd, work, progress, what=artifacts.name)
        jars = sorted(target.glob("*.jar"))
        kept = artifacts.keep(jars) if artifacts.keep else jars
        for jar in jars:
            if jar not in kept:
                jar.unlink()
        if artifacts.required and not any(j.name.startswith(artifacts.required) for j in kept):
            raise DistributionError(f"Resolution finished but no {artifacts.required} jar arrived in {target}.",
                                    f"Delete {artifacts.root} and run `make setup` again.")
        coordinates = "".join(f"{g}:{a}:{v}\n" for g, a, v in artifacts.coordinates)
        (target / ".complete").write_text(f"{coordinates}{len(kept)} jars\n" + "".join(f"{j.name}\n" for j in kept))
        if artifacts.folder.exists():
            shutil.rmtree(artifacts.folder)
        target.rename(artifacts.folder)


def ivy_command(java: Path, ivy: Path, coordinates: Iterable[Coordinate], repo: str, work: Path,
                target: Path, module: str, excludes: Iterable[str] = ()) -> list[str]:
    """Write ``ivy.xml`` and ``ivysettings.xml`` into ``work``; the command that retrieves every jar into ``target``.

    ``excludes`` are module names left out of every dependency's tree (jars the caller already has).
    Downloads are cached in the lab's user cache (``<cache>/ivy``).
    """
    skip = "".join(f"\n      <exclude module={quoteattr(name)}/>" for name in sorted(excludes))
    close = f">{skip}\n    </dependency>" if skip else "/>"
    deps = "\n".join(f"    <dependency org={quoteattr(g)} name={quoteattr(a)} rev={quoteattr(v)} conf=\"default\"{close}"
                     for g, a, v in coordinates)
    (work / "ivy.xml").write_text(
        f'<ivy-module version="2.0">\n  <info organisation="kafka-lab" module={quoteattr(module)}/>\n'
        f"  <dependencies>\n{deps}\n  </dependencies>\n</ivy-module>\n")
    ivy_cache = cache_dir() / "ivy"
    (work / "ivysettings.xml").write_text(
        "<ivysettings>\n  <settings defaultResolver=\"central\"/>\n"
        f"  <caches defaultCacheDir={quoteattr(str(ivy_cache))}/>\n"
        f"  <resolvers><ibiblio name=\"central\" m2compatible=\"true\" root={quoteattr(repo)}/></resolvers>\n"
        "</ivysettings>\n")
    return [str(java), "-jar", str(ivy), "-settings", str(work / "ivysettings.xml"),
            "-ivy", str(work / "ivy.xml"), "-confs", "default", "-types", "jar", "bundle",
            "-retrieve", str(target) + "/[artifact]-[revision](-[classifier]).[ext]"]


def mvn_command(coordinates: Iterable[Coordinate], work: Path, target: Path) -> list[str]:
    """Write a ``pom.xml`` depending on ``coordinates``; the command that copies their runtime jars to ``target``."""
    deps = "\n".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in coordinates)
    (work / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kafka-lab</groupId><artifactId>resolve</artifactId><version>0</version>"
        f"<dependencies>{deps}</dependencies></project>\n")
    return ["mvn", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={target}"]


_FOUND = re.compile(r"^\s*found (\S+?);(\S+) in ")
_DOWNLOAD = re.compile(r"(?:downloading|Downloaded from \S+:) (\S+?\.jar)")
_SIZE = re.compile(r"\((\d+)kB\)")


def run_resolver(cmd: list[str], work: Path, progress: ProgressCallback, what: str = "the jars") -> None:
    """Run an Ivy or Maven resolution, reporting modules found and jars downloaded to ``progress``;
    a failure raises :class:`DistributionError` with the tail of the resolver's log."""
    log.info("resolving %s: %s", what, " ".join(cmd))
    logfile = work / "resolve.log"
    modules = jars = size = 0
    with open(logfile, "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                out.write(line)
                module = _FOUND.search(line)
                if module:
                    modules += 1
                    progress("resolving", modules, 0, 0, module.group(1).split("#")[-1])
                found = _DOWNLOAD.search(line)
                if found:
                    jars += 1
                    progress("downloading", jars, max(modules, jars), size, found.group(1).rsplit("/", 1)[-1])
                kb = _SIZE.search(line)
                if kb:
                    size += int(kb.group(1)) * 1000
            proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode != 0:
        tail = "\n".join(logfile.read_text().splitlines()[-15:])
        raise DistributionError(f"Fetching {what} failed (exit {proc.returncode}):\n{tail}\n",
                                "Check your network and run `make setup` again.")


def tqdm_progress(name: str, enabled: bool = True) -> tuple[ProgressCallback, Callable[[], None]]:
    """A progress callback drawing one bar (modules found, then jars downloaded), and its close function."""
    if not enabled:
        return (lambda *args: None), lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(desc=f"{name}: resolving", unit=" modules", leave=True)

    def update(phase: str, done: int, total: int, size: int, current: str) -> None:
        if phase == "downloading" and bar.total != total:
            bar.reset(total=total)
            bar.set_description(f"{name}: downloading jars", refresh=False)
            bar.unit = " jars"
        bar.n = done
        detail = f"{size / 1e6:.1f} MB, {current}" if phase == "downloading" else current
        bar.set_postfix_str(detail, refresh=False)
        bar.refresh()

    return update, bar.close
