"""A real schema registry beside the cluster: Apicurio Registry, speaking Confluent's REST API.

    cluster = labkit.start_cluster(schema_registry=True)
    cluster.schema_registry_url           # http://127.0.0.1:PORT/apis/ccompat/v7 (what Confluent clients want)
    client = cluster.schema_registry()    # confluent_kafka.schema_registry.SchemaRegistryClient

Confluent's own registry is not on Maven Central and Karapace is not on PyPI, so the lab
runs Apicurio Registry 2.4.2.Final, which serves the Confluent Schema Registry API under
``/apis/ccompat/v7``. ``labkit setup`` builds it once, with Maven, into a Quarkus
"fast-jar" in the lab's cache (``environments/registry/pom.xml`` says how and why; a
machine without ``mvn`` gets Apache Maven's own distribution from Maven Central). It
stores schemas in memory: a registry lives and dies with its cluster.

Two differences from Confluent are papered over at start: the global compatibility is
set to BACKWARD (Confluent's default; Apicurio's is NONE), and JSON schemas should carry
``$schema`` (Apicurio guesses a schema's type from its content).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..runtime.environment import environments_dir
from ..errors import DistributionError, LabkitError
from ..runtime.jvm import find_java
from ..runtime.cache import cache_dir, file_lock
from ..runtime.maven import repository
from ..runtime.ports import free_ports
from ..runtime.processes import ManagedProcess, supervisor_of
from ..runtime.progress import Progress
from ..runtime.steps import step
from . import answers, http, java_options, service_dir

log = logging.getLogger(__name__)

APICURIO_VERSION = "2.4.2.Final"
#: Apache Maven's own distribution, for a machine without ``mvn`` (org.apache.maven:apache-maven:<v>:bin:tar.gz).
MAVEN_VERSION = "3.9.16"
#: Confluent's default global compatibility, set on every lab registry (Apicurio's own is NONE).
DEFAULT_COMPATIBILITY = "BACKWARD"
CCOMPAT = "/apis/ccompat/v7"


def app_dir() -> Path:
    """Where the built registry lives: ``<cache>/apicurio-<version>/quarkus-app``."""
    return cache_dir() / f"apicurio-{APICURIO_VERSION}" / "quarkus-app"


def built() -> Optional[Path]:
    jar = app_dir() / "quarkus-run.jar"
    return jar if jar.exists() and (app_dir() / ".complete").exists() else None


def _maven(bar: Progress) -> str:
    """``mvn`` on the PATH, else Apache Maven's binary distribution fetched from Maven Central into the cache."""
    found = shutil.which("mvn")
    if found:
        return found
    home = cache_dir() / f"apache-maven-{MAVEN_VERSION}"
    mvn = home / "bin" / "mvn"
    if mvn.exists():
        return str(mvn)
    base = f"{repository().rstrip('/')}/org/apache/maven/apache-maven/{MAVEN_VERSION}/apache-maven-{MAVEN_VERSION}-bin.tar.gz"
    bar.describe(f"fetching Apache Maven {MAVEN_VERSION}")
    try:
        with urllib.request.urlopen(base, timeout=60) as response:
            data = response.read()
        with urllib.request.urlopen(base + ".sha512", timeout=60) as response:
            expected = response.read().decode().split()[0]
    except OSError as exc:
        raise DistributionError(f"There is no `mvn` here and Apache Maven {MAVEN_VERSION} cannot be fetched from "
                                f"{base} ({exc}).", "Install Maven, or connect to the internet and run "
                                "`make setup` again.") from exc
    if hashlib.sha512(data).hexdigest() != expected:
        raise DistributionError(f"Apache Maven {MAVEN_VERSION} from {base} does not match its SHA-512.",
                                "Run `make setup` again (or check LABKIT_MAVEN_REPOSITORY).")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        archive = Path(tmp) / "maven.tar.gz"
        archive.write_bytes(data)
        with tarfile.open(archive) as tar:
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # a Python without extraction filters (before 3.10.12 / 3.11.4)
                tar.extractall(tmp)
        Path(tmp, f"apache-maven-{MAVEN_VERSION}").rename(home)
    return str(mvn)


def ensure_registry(progress: bool = True) -> Path:
    """The registry's ``quarkus-run.jar``, built into the cache first if needed (about a minute, once)."""
    jar = built()
    if jar is not None:
        return jar
    find_java()
    root = app_dir().parent
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        jar = built()
        if jar is not None:
            return jar
        bar = Progress(progress, f"Schema registry (Apicurio {APICURIO_VERSION}): building", total=None)
        try:
            _build(root, bar)
        finally:
            bar.close()
    jar = built()
    assert jar is not None
    return jar


def _build(root: Path, bar: Progress) -> None:
    mvn = _maven(bar)
    with tempfile.TemporaryDirectory(prefix="labkit-registry-", dir=root) as tmp:
        work = Path(tmp)
        shutil.copy(environments_dir() / "registry" / "pom.xml", work / "pom.xml")
        # Every download goes to the lab's repository (Maven Central, or LABKIT_MAVEN_REPOSITORY's mirror).
        (work / "settings.xml").write_text(
            "<settings><mirrors><mirror><id>labkit</id><mirrorOf>*</mirrorOf>"
            f"<url>{repository()}</url></mirror></mirrors></settings>\n")
        cmd = [mvn, "-B", "-ntp", "-Dstyle.color=never", "-s", str(work / "settings.xml"),
               f"-Dmaven.repo.local={cache_dir() / 'm2'}", "package"]
        logfile = work / "build.log"
        with open(logfile, "w") as out:
            proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    out.write(line)
                    if line.startswith("[INFO] --- "):  # one line per plugin execution: the build's phases
                        bar.step(line[len("[INFO] --- "):].split(" ")[0])
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        target = work / "target" / "quarkus-app"
        if proc.returncode != 0 or not (target / "quarkus-run.jar").exists():
            tail = "\n".join(logfile.read_text().splitlines()[-15:])
            raise DistributionError(f"Building the schema registry failed (exit {proc.returncode}):\n{tail}\n",
                                    "Check your network and run `make setup` again.")
        (target / ".complete").write_text(f"Apicurio Registry {APICURIO_VERSION}\n")
        if app_dir().exists():
            shutil.rmtree(app_dir())
        target.rename(app_dir())


@step("Schema registry")
def _setup_registry() -> str:
    jar = ensure_registry(progress=True)
    size = sum(p.stat().st_size for p in jar.parent.rglob("*") if p.is_file())
    return f"Apicurio Registry {APICURIO_VERSION}, {size / 2**20:.0f} MB ({jar.parent})"


@dataclass
class SchemaRegistry:
    """A running registry: its process, its port, and the URL Confluent's clients take."""

    process: ManagedProcess
    port: int

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what ``SchemaRegistryClient({"url": ...})`` wants."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A raw REST call to the Confluent API (``path`` like ``/subjects``): (status, JSON)."""
        return http(method, self.url + path, body, content_type="application/vnd.schemaregistry.v1+json")

    def client(self) -> Any:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url})


def start(cluster: Any, timeout: float = 120.0) -> SchemaRegistry:
    """Start a schema registry for ``cluster`` and wait until it answers; it stops with the cluster."""
    jar = ensure_registry(progress=True)
    where = service_dir(cluster, "schema-registry")
    port = free_ports(1)[0]
    supervisor_of(cluster).hold([port])
    log_file = where / "registry.log"
    cmd = [str(find_java().executable), *java_options("128m"),
           f"-Dlabkit.cluster={getattr(cluster, 'data_dir', where)}", f"-Djava.io.tmpdir={where}",
           "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}", "-Dquarkus.banner.enabled=false",
           "-Dquarkus.log.level=WARN", '-Dquarkus.log.category."io.apicurio".level=WARN',
           '-Dquarkus.log.category."io.sentry".level=ERROR', "-Dquarkus.log.console.enable=false",
           "-Dquarkus.log.file.enable=true", f"-Dquarkus.log.file.path={log_file}",
           "-Dquarkus.datasource.jdbc.initial-size=2", "-Dquarkus.datasource.jdbc.min-size=2",
           "-Dquarkus.datasource.jdbc.max-size=20",
           # Narayana would open a listener of its own on a random port just to learn a process id
           "-DCoreEnvironmentBean.processImplementationClassName=com.arjuna.ats.internal.arjuna.utils.UuidProcessId",
           "-Dregistry.disable.apis=/apis/ibmcompat/.*", "-jar", str(jar)]
    process = supervisor_of(cluster).process("schema registry", cmd, where / "stdout.log", cwd=jar.parent,
                                             logs=[log_file]).start()
    registry = SchemaRegistry(process, port)
    t0 = time.monotonic()
    process.wait_ready("the schema registry to answer", lambda: answers(f"http://127.0.0.1:{port}/health/ready"),
                       timeout=timeout, interval=0.1, stretch=True)
    log.info("schema registry ready on port %d in %.1f s", port, time.monotonic() - t0)
    status, body = registry.request("PUT", "/config", {"compatibility": DEFAULT_COMPATIBILITY})
    if status != 200:
        raise LabkitError(f"The schema registry refused its default compatibility ({status}: {body}).",
                          f"See {log_file}.")
    return registry


__all__ = ["APICURIO_VERSION", "CCOMPAT", "SchemaRegistry", "app_dir", "ensure_registry", "start"]
