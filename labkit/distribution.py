"""Finding Java and the Kafka jars.

Kafka Lab runs Apache Kafka from its jars, resolved once from Maven Central into
a per-version user cache with the Apache Ivy jar that ships inside the pyspark
wheel (Maven's ``mvn`` is used when Ivy is not there). ``KAFKA_HOME`` pointing at
an unpacked Apache Kafka release is used instead when set.
"""

from __future__ import annotations

import contextlib
import fcntl
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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator
from xml.sax.saxutils import quoteattr

from .environment import KafkaSpec, kafka_spec
from .errors import DistributionError, JavaError, OfflineError

log = logging.getLogger(__name__)

MIN_JAVA = 17

#: Called while fetching with (phase, done, total, bytes_done, current_name); phase is
#: "resolving" (reading POMs: done = modules found, total unknown = 0) or "downloading".
ProgressCallback = Callable[[str, int, int, int, str], None]


# ---------------------------------------------------------------- Java


@dataclass(frozen=True)
class JavaRuntime:
    """A Java runtime found on this machine."""

    executable: Path
    version: str
    major: int


def _parse_java_version(text: str) -> tuple[str, int]:
    match = re.search(r'version "([^"]+)"', text)
    if not match:
        raise JavaError(f"Cannot read the Java version from: {text.strip()[:200]!r}.",
                        f"Install a JDK {MIN_JAVA} or newer and set JAVA_HOME.")
    version = match.group(1)
    head = version.split(".")[0].split("-")[0].split("+")[0]
    major = int(version.split(".")[1]) if head == "1" else int(head)
    return version, major


@lru_cache(maxsize=None)
def _java_at(executable: str) -> JavaRuntime:
    try:
        proc = subprocess.run([executable, "-version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise JavaError(f"Cannot run {executable}: {exc}.",
                        f"Install a JDK {MIN_JAVA} or newer and set JAVA_HOME.") from exc
    version, major = _parse_java_version(proc.stderr + proc.stdout)
    return JavaRuntime(Path(executable), version, major)


def find_java() -> JavaRuntime:
    """The Java runtime to use: ``$JAVA_HOME/bin/java``, else ``java`` on PATH (17+ required)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        executable = str(Path(java_home) / "bin" / "java")
    else:
        executable = shutil.which("java") or ""
    if not executable:
        raise JavaError("Java was not found (no JAVA_HOME, no `java` on PATH).",
                        f"Install a JDK {MIN_JAVA} or newer (e.g. `apt-get install openjdk-17-jdk-headless`) "
                        "and open a new terminal.")
    runtime = _java_at(executable)
    if runtime.major < MIN_JAVA:
        raise JavaError(f"Java {runtime.version} at {executable} is too old: Kafka 4 needs Java {MIN_JAVA}+.",
                        f"Install a JDK {MIN_JAVA} or newer and point JAVA_HOME at it.")
    return runtime


# ---------------------------------------------------------------- the jars


def cache_dir() -> Path:
    """Kafka Lab's user cache: ``$LABKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/kafka-lab``."""
    if os.environ.get("LABKIT_CACHE_DIR"):
        return Path(os.environ["LABKIT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "kafka-lab"


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


def cached_distribution(spec: KafkaSpec | None = None) -> Distribution | None:
    """The distribution if it is usable without any download, else None."""
    if os.environ.get("KAFKA_HOME"):
        return _kafka_home_distribution(Path(os.environ["KAFKA_HOME"]).expanduser())
    spec = spec or kafka_spec()
    root = cache_dir() / f"kafka-{spec.version}"
    if (root / "libs" / ".complete").exists():
        return Distribution(spec.version, root / "libs", "cache", root)
    return None


def ensure_distribution(progress: bool | ProgressCallback = True) -> Distribution:
    """The Kafka jars, fetched into the user cache first if needed.

    ``progress=True`` shows a progress bar (terminal or notebook) while fetching;
    a callable receives ``(jars_done, bytes_done, artifact)`` instead.
    """
    find_java()
    found = cached_distribution()
    if found is not None:
        return found
    spec = kafka_spec()
    root = cache_dir() / f"kafka-{spec.version}"
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / ".lock"):
        found = cached_distribution(spec)  # another process may have finished meanwhile
        if found is not None:
            return found
        _check_reachable(spec)
        callback, close = _progress_callback(progress, spec.version)
        try:
            _resolve_into(spec, root / "libs", callback)
        finally:
            close()
    dist = Distribution(spec.version, root / "libs", "cache", root)
    _broker_config_names(dist)
    return dist


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def head_pom(repository: str, group: str, artifact: str, version: str, timeout: float = 15.0) -> str:
    """HEAD the artifact's POM in a Maven repository; returns its URL, raises urllib's HTTPError/URLError."""
    url = f"{repository.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
        return url


def _check_reachable(spec: KafkaSpec) -> None:
    group, artifact, version = spec.coordinates()[0]
    try:
        head_pom(spec.repository, group, artifact, version)
        return
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise DistributionError(f"Kafka {version} is not on {spec.repository} ({exc.url} answered 404).",
                                    "Check the version pinned in environments/kafka.toml.") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OfflineError(
            f"The Kafka {spec.version} jars are not in the cache ({cache_dir()}) and Maven Central "
            f"cannot be reached ({reason}).",
            "Connect to the internet and run `make setup` once, or set KAFKA_HOME to an unpacked "
            "Apache Kafka 4.x release.") from exc


def _progress_callback(progress: bool | ProgressCallback, version: str) -> tuple[ProgressCallback, Callable[[], None]]:
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda *args: None), lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(desc=f"Kafka {version}: resolving", unit=" modules", leave=True)

    def update(phase: str, done: int, total: int, size: int, name: str) -> None:
        if phase == "downloading" and bar.total != total:
            bar.reset(total=total)
            bar.set_description(f"Kafka {version}: downloading jars", refresh=False)
            bar.unit = " jars"
        bar.n = done
        detail = f"{size / 1e6:.1f} MB, {name}" if phase == "downloading" else name
        bar.set_postfix_str(detail, refresh=False)
        bar.refresh()

    return update, bar.close


def ivy_jar() -> Path | None:
    """The Apache Ivy jar shipped inside the pyspark wheel, if pyspark is installed."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jars = sorted(Path(location, "jars").glob("ivy-*.jar"))
        if jars:
            return jars[-1]
    return None


def _resolve_into(spec: KafkaSpec, lib_dir: Path, progress: ProgressCallback) -> None:
    java = find_java()
    with tempfile.TemporaryDirectory(prefix="labkit-resolve-", dir=lib_dir.parent) as tmp:
        work = Path(tmp)
        target = work / "libs"
        target.mkdir()
        ivy = ivy_jar()
        if ivy is not None:
            cmd = _ivy_command(java, ivy, spec, work, target)
        elif shutil.which("mvn"):
            cmd = _mvn_command(spec, work, target)
        else:
            raise DistributionError("Neither Apache Ivy (inside the pyspark package) nor Maven (`mvn`) is available "
                                    "to fetch the Kafka jars.",
                                    "Run `make setup` (it installs pyspark), or install Maven.")
        run_resolver(cmd, work, progress)
        jars = list(target.glob("*.jar"))
        if not any(j.name.startswith("kafka_") for j in jars):
            raise DistributionError(f"Resolution finished but no Kafka server jar arrived in {target}.",
                                    f"Delete {lib_dir.parent} and run `make setup` again.")
        (target / ".complete").write_text(f"{spec.version}\n{len(jars)} jars\n")
        if lib_dir.exists():
            shutil.rmtree(lib_dir)
        target.rename(lib_dir)


def _ivy_command(java: JavaRuntime, ivy: Path, spec: KafkaSpec, work: Path, target: Path) -> list[str]:
    return ivy_command(java.executable, ivy, spec.coordinates(), spec.repository, work, target, module="kafka-broker")


def ivy_command(java: Path, ivy: Path, coordinates: Iterable[tuple[str, str, str]], repository: str, work: Path,
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
        f"  <resolvers><ibiblio name=\"central\" m2compatible=\"true\" root={quoteattr(repository)}/></resolvers>\n"
        "</ivysettings>\n")
    return [str(java), "-jar", str(ivy), "-settings", str(work / "ivysettings.xml"),
            "-ivy", str(work / "ivy.xml"), "-confs", "default", "-types", "jar", "bundle",
            "-retrieve", str(target) + "/[artifact]-[revision](-[classifier]).[ext]"]


def _mvn_command(spec: KafkaSpec, work: Path, target: Path) -> list[str]:
    deps = "\n".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in spec.coordinates())
    (work / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kafka-lab</groupId><artifactId>kafka-broker</artifactId><version>0</version>"
        f"<dependencies>{deps}</dependencies></project>\n")
    return ["mvn", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={target}"]


_FOUND = re.compile(r"^\s*found (\S+?);(\S+) in ")
_DOWNLOAD = re.compile(r"(?:downloading|Downloaded from \S+:) (\S+?\.jar)")
_SIZE = re.compile(r"\((\d+)kB\)")


def run_resolver(cmd: list[str], work: Path, progress: ProgressCallback, what: str = "the Kafka jars") -> None:
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


@lru_cache(maxsize=None)
def _broker_config_names(dist: Distribution) -> frozenset[str]:
    path = dist.state_dir / "broker-configs.txt"
    if not path.exists():
        source = Path(__file__).parent / "java" / "BrokerConfigNames.java"
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
