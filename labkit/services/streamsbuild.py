"""What a Kafka Streams application of the lab is built from: the jars, the launcher, the learner's topology.

* **The jars**: ``org.apache.kafka:kafka-streams`` at the lab's Kafka version (``environments/kafka.toml``:
  4.3.1 today) with its one dependency Kafka's lib dir lacks, ``rocksdbjni`` (73 MB, every platform's native
  library inside), fetched once into ``<cache>/kafka-<version>/streams`` by ``labkit setup``. Its native
  library for this machine is unpacked once beside them: rocksdbjni otherwise writes a 15 MB copy into the
  temp directory at every JVM start and deletes it only on a clean exit, so every killed instance would
  leave one behind.
* **The launcher** (``java/LabStreams.java``, ``LabStreamsJson.java``, and ``Lab.java``, the helpers a
  learner's topology may call): compiled once per Java runtime and Kafka version.
* **The topology**: the learner writes Streams DSL statements that use ``builder`` (a ``StreamsBuilder``);
  :func:`compile_topology` wraps them into a class with the usual imports and one ``final`` Java variable per
  parameter (``input``, ``output`` ... : topic names and numbers from Python), compiles it with the JDK's
  ``javac`` (about a second) and keeps the class in the cache under a hash of the code, so a cell run twice
  compiles once. A compile error is a :class:`StreamsCompileError` that shows the learner's line and
  javac's message, nothing of the generated wrapper.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import JavaError, LabkitError
from ..runtime import classdata
from ..runtime.cache import file_lock
from ..runtime.distribution import Distribution, ensure_distribution
from ..runtime.jvm import find_java
from ..runtime.maven import ArtifactSet, fetch, jar_artifact, keep_missing_jars
from ..runtime.steps import step

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
LAUNCHER_SOURCES = ("LabStreams.java", "LabStreamsJson.java", "Lab.java")
LAUNCHER_MAIN = "LabStreams"
#: What every topology's class imports: the DSL, state stores, serdes, time.
IMPORTS = ("org.apache.kafka.streams.*", "org.apache.kafka.streams.kstream.*", "org.apache.kafka.streams.state.*",
           "org.apache.kafka.streams.processor.api.*", "org.apache.kafka.common.serialization.*",
           "org.apache.kafka.common.utils.Bytes", "java.time.*", "java.util.*")
#: The jars javac needs besides the launcher: the DSL, the clients, RocksDB's options (``LabStreams.SmallRocksDB``)
#: and Jackson (``Lab.json``).
_COMPILE_JARS = ("kafka-streams", "kafka-clients", "rocksdbjni", "jackson-databind", "jackson-core",
                 "jackson-annotations", "slf4j-api")
_JAVA_KEYWORDS = frozenset("""abstract assert boolean break byte case catch char class const continue default do double
    else enum extends final finally float for goto if implements import instanceof int interface long native new
    package private protected public return short static strictfp super switch synchronized this throw throws
    transient try void volatile while true false null var record yield builder""".split())


class StreamsCompileError(LabkitError):
    """Raised when a topology's Java code does not compile; ``errors`` holds (line of the learner's code, that
    line, javac's message) for each error javac reported."""

    def __init__(self, errors: list[tuple[Optional[int], str, str]]) -> None:
        self.errors = errors
        shown = []
        for line, text, message in errors[:3]:
            where = f"line {line}" if line else "at the end of your code"
            shown.append(f"{where}: {text.strip()}\n    {message}" if text.strip() else f"{where}: {message}")
        more = f"\n(and {len(errors) - 3} more)" if len(errors) > 3 else ""
        hint = "Fix the line shown: `builder` is the StreamsBuilder, the parameters are Java variables."
        super().__init__("Your topology does not compile:\n" + "\n".join(shown) + more + "\n" + hint)
        self.hint = hint


class StreamsAppError(LabkitError):
    """Raised when an instance of a Kafka Streams application stopped with an error: ``reason`` is Kafka's
    exception on one line, ``log_path`` the instance's log."""

    def __init__(self, message: str, hint: str = "", reason: str = "", log_path: Optional[Path] = None) -> None:
        self.reason, self.log_path = reason, log_path
        super().__init__(message, hint)


# ---------------------------------------------------------------- the jars


def streams_artifacts(dist: Distribution) -> ArtifactSet:
    """kafka-streams at ``dist``'s version and what it needs beyond Kafka's lib dir (rocksdbjni)."""
    have = {jar_artifact(j.name) for j in dist.jars()}
    return ArtifactSet(
        f"Kafka Streams {dist.version}", f"kafka-{dist.version}",
        (("org.apache.kafka", "kafka-streams", dist.version),), subdir="streams",
        excludes=frozenset(have), required="kafka-streams",
        hint_offline="Connect to the internet and run `make setup` once; after that Kafka Streams works offline.",
        keep=lambda jars: keep_missing_jars(jars, have))


def ensure_streams(progress: bool = True, dist: Optional[Distribution] = None) -> list[Path]:
    """The Kafka Streams jars (kafka-streams, rocksdbjni), fetched into the cache first if needed."""
    dist = dist or ensure_distribution(progress=progress)
    artifacts = streams_artifacts(dist)
    return fetch(artifacts, progress)


def _native_name() -> str:
    """rocksdbjni's name for this platform's library (``librocksdbjni-linux64.so``, ...-musl, ...-aarch64)."""
    system, machine = platform.system(), platform.machine().lower()
    if system == "Darwin":
        return f"librocksdbjni-osx-{'arm64' if machine in ('arm64', 'aarch64') else 'x86_64'}.jnilib"
    arch = {"x86_64": "64", "amd64": "64", "aarch64": "-aarch64", "arm64": "-aarch64", "ppc64le": "-ppc64le",
            "s390x": "-s390x", "riscv64": "-riscv64"}.get(machine, "64")
    musl = "" if platform.libc_ver()[0] == "glibc" else "-musl"
    return f"librocksdbjni-linux{arch}{musl}.so"


def native_dir(jars: list[Path]) -> Optional[Path]:
    """A folder holding rocksdbjni's native library for this machine (unpacked once), or None if it has none:
    rocksdbjni then unpacks it into each instance's temp directory itself."""
    rocks = [j for j in jars if j.name.startswith("rocksdbjni-")]
    if not rocks:
        return None
    folder = rocks[0].parent / "native"
    name = _native_name()
    if (folder / name).exists():
        return folder
    folder.mkdir(exist_ok=True)
    with file_lock(folder.parent / ".native.lock"):
        if not (folder / name).exists():
            with zipfile.ZipFile(rocks[0]) as zf:
                if name not in zf.namelist():
                    return None
                partial = folder / f"{name}.partial"
                with zf.open(name) as src, open(partial, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                partial.replace(folder / name)
    return folder


def _javac() -> str:
    java = find_java()
    beside = java.executable.resolve().parent / "javac"
    found = str(beside) if beside.exists() else shutil.which("javac")
    if not found:
        raise JavaError(f"Kafka Streams topologies are compiled with javac, and there is none beside {java.executable}.",
                        "Install a JDK (not only a JRE), e.g. `apt-get install openjdk-17-jdk-headless`.")
    return found


_JAVAC_OPTIONS = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xshare:auto", "-proc:none",
                  "-encoding", "UTF-8", "-nowarn", "-Xlint:none")


def compile_classpath(dist: Distribution, jars: list[Path]) -> list[Path]:
    return [j for j in [*dist.jars(), *jars] if jar_artifact(j.name) in _COMPILE_JARS]


def _jar(classes: Path) -> Path:
    """``classes``' class files in ``classes/classes.jar`` (made once): a class-data archive takes jars, not folders."""
    jar = classes / "classes.jar"
    if not jar.exists():
        partial = classes / f"classes.jar.{os.getpid()}.partial"
        with zipfile.ZipFile(partial, "w") as zf:
            for path in sorted(classes.rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)
    return jar


def launcher(dist: Distribution, jars: list[Path]) -> Path:
    """The launcher's jar (compiled once per launcher source, Java runtime and Kafka version)."""
    java = find_java()
    sources = "".join((JAVA_DIR / name).read_text() for name in LAUNCHER_SOURCES)
    key = hashlib.sha1(f"{sources}\0{java.version}\0{java.executable}\0{[j.name for j in jars]}".encode()).hexdigest()
    target = jars[0].parent.parent / "streams-launcher" / key[:16]
    if (target / f"{LAUNCHER_MAIN}.class").exists():
        return _jar(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / ".lock"):
        if (target / f"{LAUNCHER_MAIN}.class").exists():
            return _jar(target)
        with tempfile.TemporaryDirectory(prefix="launcher-", dir=target.parent) as tmp:
            cp = ":".join(str(j) for j in compile_classpath(dist, jars))
            proc = subprocess.run([_javac(), *_JAVAC_OPTIONS, "-cp", cp, "-d", tmp,
                                   *(str(JAVA_DIR / name) for name in LAUNCHER_SOURCES)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise LabkitError(f"Compiling labkit's Kafka Streams launcher failed: {proc.stderr.strip()[-600:]}",
                                  "Run `make setup` again; if it persists, report it with this message.")
            Path(tmp).replace(target)
            Path(tmp).mkdir()  # for TemporaryDirectory's cleanup
        for old in target.parent.iterdir():
            if old.is_dir() and old != target and not old.name.startswith("launcher-"):
                shutil.rmtree(old, ignore_errors=True)
    return _jar(target)


def classpath(dist: Distribution, jars: list[Path]) -> list[Path]:
    """An instance's classpath: the launcher, Kafka's jars and Kafka Streams', jar by jar (a class-data archive is
    tied to the exact classpath it was written with; ``libs/*`` expands in directory order). The topology comes
    from its own jar (the launcher's last argument), so every instance has this same classpath."""
    return [launcher(dist, jars), *dist.jars(), *jars]


#: JVM options of every instance that a class-data archive depends on (labkit.services.java_options adds the heap).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k", "-XX:MaxMetaspaceSize=160m")


def archive(dist: Distribution, jars: list[Path]) -> Path:
    """Where the instances' class-data archive is (or would be): keyed to the Java runtime, every classpath jar
    (name, size, time) and the JVM options, like the brokers' (labkit.runtime.classdata)."""
    java = find_java()
    parts = [java.version, str(java.executable), *JVM_OPTIONS]
    for j in classpath(dist, jars):
        st = j.stat()
        parts.append(f"{j}:{st.st_size}:{st.st_mtime_ns}")
    key = hashlib.sha1("\0".join(parts).encode()).hexdigest()[:16]
    return jars[0].parent.parent / "streams-cds" / f"streams-{key}.jsa"


def archive_options(dist: Distribution, jars: list[Path]) -> list[str]:
    """Options that map the instances' archive when ``labkit setup`` wrote one (a missing or stale archive only
    means a slower start; ``LABKIT_CDS=0`` switches them off)."""
    return classdata.use_options(archive(dist, jars))


#: What the archive's recording instance runs: the DSL's usual processors and stores, so their classes are in it.
_SAMPLE = """
    KTable<String, String> table = builder.table(b);
    builder.<String, String>stream(a).selectKey((k, v) -> v).join(table, (v, t) -> v + t)
           .groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofSeconds(30)))
           .count().toStream().map((w, n) -> KeyValue.pair(w.key(), Lab.object("n", n))).to(c);
"""


def build_archive(dist: Distribution, jars: list[Path], timeout: float = 180.0) -> Optional[Path]:
    """Record the classes an instance loads into its class-data archive (about 35 MB), once: a sample topology's
    instance starts without a broker to talk to (it gets as far as its threads and stores), then stops cleanly.
    Cuts an instance's start-up CPU by about 40 %; None when it could not be written."""
    target = archive(dist, jars)
    if not classdata.enabled() or target.exists():
        return target if target.exists() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    topology = compile_topology(_SAMPLE, {"a": "a", "b": "b", "c": "c"})
    with tempfile.TemporaryDirectory(prefix="record-", dir=target.parent) as tmp:
        work = Path(tmp)
        (work / "streams.properties").write_text(
            "application.id=labkit-class-data\nbootstrap.servers=127.0.0.1:9\n"
            f"default.key.serde=org.apache.kafka.common.serialization.Serdes$StringSerde\n"
            f"default.value.serde=org.apache.kafka.common.serialization.Serdes$StringSerde\nstate.dir={work / 'state'}\n")
        native = native_dir(jars)
        cp = ":".join(str(j) for j in classpath(dist, jars))
        partial = work / "streams.jsa"
        cmd = [str(find_java().executable), "-Xmx160m", *JVM_OPTIONS, *classdata.dump_options(partial),
               f"-Djava.io.tmpdir={work}", *([f"-Djava.library.path={native}"] if native else []),
               "-Dlog4j2.level=ERROR", "-cp", cp, LAUNCHER_MAIN, str(work / "streams.properties"), topology.class_name,
               str(work), str(topology.jar)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
        try:
            deadline = time.monotonic() + timeout
            while not (work / "port").exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(3)  # its threads started and asked for metadata
            proc.terminate()
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if not partial.exists():
            return None
        partial.replace(target)
    for old in target.parent.glob("streams-*.jsa"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def test_utils_artifacts(dist: Distribution) -> ArtifactSet:
    """kafka-streams-test-utils at ``dist``'s version, without what Kafka and kafka-streams bring already."""
    have = {jar_artifact(j.name) for j in dist.jars()} | {"kafka-streams", "rocksdbjni"}
    return ArtifactSet(
        f"Kafka Streams test utils {dist.version}", f"kafka-{dist.version}",
        (("org.apache.kafka", "kafka-streams-test-utils", dist.version),), subdir="streams-test-utils",
        excludes=frozenset(have), required="kafka-streams-test-utils",
        hint_offline="Connect to the internet once and run `labkit setup` (make setup fetches it with Kafka Streams).",
        keep=lambda jars: keep_missing_jars(jars, have))


def ensure_test_utils(progress: bool = False, dist: Optional[Distribution] = None) -> list[Path]:
    """The test-utils jar (TopologyTestDriver, lesson 15), fetched by the set-up step; on first use otherwise."""
    dist = dist or ensure_distribution(progress=progress)
    artifacts = test_utils_artifacts(dist)
    return fetch(artifacts, progress)


@step("Kafka Streams")
def _setup_streams() -> str:
    dist = ensure_distribution(progress=True)
    jars = ensure_streams(progress=True, dist=dist)
    native = native_dir(jars)
    launcher(dist, jars)
    recorded = build_archive(dist, jars)
    jars = [*jars, *ensure_test_utils(progress=True, dist=dist)]
    size = sum(j.stat().st_size for j in jars) / 2**20
    return (f"{', '.join(sorted(j.name for j in jars))}: {size:.0f} MB ({jars[0].parent}); launcher compiled; "
            + (f"RocksDB's native library unpacked ({_native_name()})" if native else "no RocksDB native library "
               "for this platform in rocksdbjni")
            + ("; class-data archive recorded" if recorded else "; no class-data archive (LABKIT_CDS=0 or it failed)"))


# ---------------------------------------------------------------- the learner's topology


@dataclass(frozen=True)
class CompiledTopology:
    """A learner's topology compiled into ``directory``/``class_name``.class."""

    class_name: str
    directory: Path
    #: The learner's code, as it is numbered in errors (a leading newline dropped, dedented).
    code: str
    #: The line of the generated file that holds the learner's line 1.
    first_line: int
    #: javac's wall time; 0 when the class came from the cache.
    seconds: float

    def learner_line(self, generated: int) -> Optional[int]:
        """The learner's line number for a line of the generated file, None outside their code."""
        line = generated - self.first_line + 1
        return line if 1 <= line <= len(self.code.splitlines()) else None

    @property
    def jar(self) -> Path:
        """The class in a jar (made on first use): what an instance's classpath ends with."""
        return _jar(self.directory)

    def source_line(self, line: Optional[int]) -> str:
        lines = self.code.splitlines()
        return lines[line - 1] if line and 1 <= line <= len(lines) else ""


def java_literal(name: str, value: Any) -> str:
    """``final String input = "views-1a2b";``: one parameter as a Java variable declaration."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in _JAVA_KEYWORDS:
        raise LabkitError(f"{name!r} cannot be a Java variable of the topology.",
                          "Name parameters like Java variables (letters, digits, _), not Java keywords or `builder`.")
    if isinstance(value, bool):
        return f"final boolean {name} = {'true' if value else 'false'};"
    if isinstance(value, int):
        return f"final int {name} = {value};" if -2**31 <= value < 2**31 else f"final long {name} = {value}L;"
    if isinstance(value, float):
        return f"final double {name} = {value!r};"
    if isinstance(value, str):
        return f"final String {name} = {json.dumps(value)};"
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return f"final List<String> {name} = List.of({', '.join(json.dumps(v) for v in value)});"
    raise LabkitError(f"The parameter {name!r} is a {type(value).__name__}; a topology takes text, numbers, "
                      "booleans and lists of text.", "Pass topic names and numbers; build the rest in Java.")


def wrap(code: str, params: Mapping[str, Any], class_name: str) -> tuple[str, int]:
    """The Java source of the topology's class, and the line holding the learner's first line."""
    head = [f"import {name};" for name in IMPORTS]
    head += [f"public final class {class_name} {{", "  public static void build(StreamsBuilder builder) {"]
    head += [f"    {java_literal(k, v)}" for k, v in params.items()]
    return "\n".join(head) + "\n" + code + "\n  }\n}\n", len(head) + 1


def normalise(code: str) -> str:
    if not isinstance(code, str) or not code.strip():
        raise LabkitError("The topology is empty.", "Write Streams DSL statements using `builder`, e.g. "
                          "builder.stream(input).to(output);")
    return textwrap.dedent(code.removeprefix("\n")).rstrip()


def compile_topology(code: str, params: Optional[Mapping[str, Any]] = None, progress: bool = False) -> CompiledTopology:
    """Compile the learner's topology (see the module doc); the class is cached under a hash of code and params."""
    code, params = normalise(code), dict(params or {})
    dist = ensure_distribution(progress=progress)
    jars = ensure_streams(progress=progress, dist=dist)
    base = launcher(dist, jars).parent
    digest = hashlib.sha1(f"{code}\0{sorted(params.items())!r}\0{base.name}".encode()).hexdigest()[:16]
    class_name = f"Topology_{digest}"
    source, first = wrap(code, params, class_name)
    target = base.parent.parent / "streams-topologies" / digest
    compiled = CompiledTopology(class_name, target, code, first, 0.0)
    if (target / f"{class_name}.class").exists():
        return compiled
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="topology-", dir=target.parent) as tmp:
        java_file = Path(tmp) / f"{class_name}.java"
        java_file.write_text(source)
        cp = ":".join([str(base / "classes.jar"), *(str(j) for j in compile_classpath(dist, jars))])
        t0 = time.monotonic()
        proc = subprocess.run([_javac(), *_JAVAC_OPTIONS, "-cp", cp, "-d", tmp, str(java_file)],
                              capture_output=True, text=True, timeout=300)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            raise StreamsCompileError(javac_errors(proc.stderr + proc.stdout, compiled))
        try:
            Path(tmp).replace(target)
            Path(tmp).mkdir()  # for TemporaryDirectory's cleanup
        except OSError:
            if not (target / f"{class_name}.class").exists():  # else: another kernel compiled the same code first
                raise
    return CompiledTopology(class_name, target, code, first, seconds)


_ERROR = re.compile(r"^(?P<file>.*?\.java):(?P<line>\d+): error: (?P<message>.*)$")
_DETAIL = re.compile(r"^\s+(symbol|location|required|found|reason|where)\b")


def javac_errors(output: str, topology: CompiledTopology) -> list[tuple[Optional[int], str, str]]:
    """javac's errors as (learner's line, that line, message + its symbol/required/found details)."""
    errors: list[tuple[Optional[int], str, str]] = []
    lines = output.splitlines()
    for i, text in enumerate(lines):
        match = _ERROR.match(text)
        if not match:
            continue
        details = [re.sub(r"\s+", " ", d.strip()) for d in lines[i + 1:i + 8] if _DETAIL.match(d)]
        line = topology.learner_line(int(match.group("line")))
        message = "; ".join([match.group("message"), *details])
        errors.append((line, topology.source_line(line), message))
    return errors or [(None, "", output.strip().splitlines()[-1] if output.strip() else "javac failed")]


__all__ = ["CompiledTopology", "StreamsAppError", "StreamsCompileError", "compile_topology", "ensure_streams", "launcher",
           "native_dir", "streams_artifacts"]
