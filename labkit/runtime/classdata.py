"""Fast JVM starts: the node launcher and class-data sharing (CDS) archives.

A Kafka node spends most of its start-up loading, verifying and linking some
7,000 classes; with three nodes on two cores that is seconds. Two things cut it:

* :func:`launcher_jar`: ``LabKafka`` (``java/LabKafka.java``, compiled once per
  Java runtime) formats a node's storage with Kafka's own ``StorageTool`` and
  then runs ``kafka.Kafka`` in the same JVM, so a cluster start pays for one JVM
  per node instead of two.
* :func:`build_archives` (a ``labkit setup`` step): a dynamic AppCDS archive of
  the classes a broker loads (``-XX:ArchiveClassesAtExit`` on one broker that
  starts, serves a little traffic and stops cleanly), and one of the classes a
  command-line tool loads. Every later JVM maps them (``-XX:SharedArchiveFile``).
  The JVMs that record them are started by the caller (``setup``), so this module
  stays below the backends and ``tools``, which import it.

An archive is only valid for the exact JVM and classpath it was written with, so
its file name carries a key over the Kafka version, the Java runtime (version,
executable, its default CDS archive), every jar on the classpath (name, size,
modification time) and the JVM options. When any of them changes the key
changes: labkit then starts JVMs without an archive (slower, never broken) until
the next ``labkit setup`` writes a new one. A JVM handed an archive it cannot
use starts without it as well (``-Xshare:auto``; the warning is silenced).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Sequence

from .distribution import Distribution
from .environment import kafka_spec
from .jvm import JavaRuntime, find_java
from .cache import file_lock

log = logging.getLogger(__name__)

LAUNCHER_SOURCE = Path(__file__).resolve().parents[1] / "java" / "LabKafka.java"
#: The launcher's main class (``LabKafka [--format CLUSTER_ID] server.properties``).
LAUNCHER_MAIN = "LabKafka"
#: Keeps the JVM quiet about an archive it cannot use (it then simply runs without one).
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: ``LABKIT_CDS=0`` starts every JVM without archives (and ``labkit setup`` builds none).
ENV_SWITCH = "LABKIT_CDS"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


# ---------------------------------------------------------------- the launcher


def _javac(java: JavaRuntime) -> Optional[str]:
    beside = java.executable.resolve().parent / "javac"
    if beside.exists():
        return str(beside)
    return shutil.which("javac")


def _digest(*parts: object) -> str:
    h = hashlib.sha1()
    for part in parts:
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def launcher_jar(dist: Distribution) -> Optional[Path]:
    """``LabKafka`` compiled into a jar under the distribution's state dir, or None if it cannot be built.

    None (no ``javac``, or it failed) makes the caller format storage with separate ``kafka-storage``
    JVMs as before.
    """
    return compiled_jar(dist, LAUNCHER_SOURCE, "labkit-launcher")


@lru_cache(maxsize=None)
def compiled_jar(dist: Distribution, source: Path, name: str) -> Optional[Path]:
    """The Java ``source`` (classes in the default package) compiled against the Kafka jars into
    ``<state dir>/launcher/<name>-<digest>.jar``, built once per (source, Java runtime); None without
    ``javac``, if it fails (logged), or if the state dir cannot be written (a classroom's shared cache). A JVM launched on a ``.java`` file compiles it in memory each time:
    about a CPU-second per launch."""
    java = find_java()
    text = source.read_text()
    jar = dist.state_dir / "launcher" / f"{name}-{_digest(text, java.version, str(java.executable))}.jar"
    if jar.exists():
        return jar
    javac = _javac(java)
    if javac is None:
        log.info("no javac next to %s: %s is not compiled", java.executable, source.name)
        return None
    try:
        jar.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=jar.parent) as tmp:
            out = Path(tmp) / "classes"
            proc = subprocess.run([javac, "-nowarn", "-cp", dist.classpath, "-d", str(out), str(source)],
                                  capture_output=True, text=True, timeout=120)
            classes = sorted(out.glob("*.class")) if out.exists() else []
            if proc.returncode != 0 or not classes:
                log.warning("compiling %s failed: %s", source.name, (proc.stderr or proc.stdout).strip()[-500:])
                return None
            partial = Path(tmp) / f"{name}.jar"
            with zipfile.ZipFile(partial, "w") as zf:
                for cls in classes:
                    zf.write(cls, cls.name)
            partial.replace(jar)
    except OSError as e:  # a classroom learner's cache is read-only: the caller runs the source as it is
        log.info("%s is not compiled: cannot write %s (%s)", source.name, jar.parent, e)
        return None
    for old in jar.parent.glob(f"{name}-*.jar"):
        if old != jar:
            old.unlink(missing_ok=True)
    return jar


def classpath(dist: Distribution, launcher: Optional[Path]) -> str:
    """The JVM classpath: the launcher (if any), then every Kafka jar by name.

    Listed jar by jar rather than ``lib/*``: a CDS archive is tied to the exact
    classpath it was written with, and ``lib/*`` expands in directory order.
    """
    entries = ([str(launcher)] if launcher else []) + [str(j) for j in dist.jars()]
    return os.pathsep.join(entries)


# ---------------------------------------------------------------- archives


def _default_archive(java: JavaRuntime) -> Optional[Path]:
    home = java.executable.resolve().parent.parent
    for candidate in (home / "lib" / "server" / "classes.jsa", home / "jre" / "lib" / "server" / "classes.jsa"):
        if candidate.exists():
            return candidate
    return None


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_size, st.st_mtime_ns)


def archive_path(dist: Distribution, kind: str, cp: str, options: Sequence[str]) -> Path:
    """Where the ``kind`` ("broker", "tool") archive for this exact JVM set-up lives (it may not exist)."""
    java = find_java()
    base = _default_archive(java)
    key = _digest(dist.version, java.version, str(java.executable.resolve()), _stat(base) if base else None,
                  [_stat(Path(entry)) for entry in cp.split(os.pathsep)], list(options))
    return dist.state_dir / "cds" / f"{kind}-{key}.jsa"


def use_options(archive: Path) -> list[str]:
    """JVM options that map ``archive`` if it exists (none otherwise)."""
    if not enabled() or not archive.exists():
        return []
    return [f"-XX:SharedArchiveFile={archive}", QUIET]


def dump_options(archive: Path) -> list[str]:
    """JVM options that write the classes this JVM loaded to ``archive`` when it exits cleanly."""
    return [f"-XX:ArchiveClassesAtExit={archive}", QUIET]


def broker_setup(dist: Distribution) -> tuple[Optional[Path], str, Path]:
    """(launcher jar or None, classpath, broker archive path) for a broker JVM."""
    launcher = launcher_jar(dist)
    cp = classpath(dist, launcher)
    spec = kafka_spec()
    return launcher, cp, archive_path(dist, "broker", cp, [spec.heap, spec.heap_start, *spec.jvm_options])


def tool_setup(dist: Distribution) -> tuple[str, Path]:
    """(classpath, tool archive path) for a command-line tool JVM (and the stand-alone formatter)."""
    cp = classpath(dist, None)
    spec = kafka_spec()
    return cp, archive_path(dist, "tool", cp, [spec.tool_heap, *spec.tool_options])


def usable(archive: Path, cp: str, options: Sequence[str], main_class: str, *args: str) -> bool:
    """A JVM with ``-Xshare:on`` (which refuses to start rather than silently ignore the archive) maps it."""
    proc = subprocess.run([str(find_java().executable), *options, "-Xshare:on", f"-XX:SharedArchiveFile={archive}",
                           "-cp", cp, main_class, *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        log.warning("the class-data archive %s is not usable: %s", archive, (proc.stdout + proc.stderr).strip()[-300:])
    return proc.returncode == 0


def status(dist: Distribution) -> dict[str, Optional[Path]]:
    """Which archives the next JVMs will map: {"broker": path or None, "tool": path or None}."""
    _, _, broker = broker_setup(dist)
    _, tool = tool_setup(dist)
    return {"broker": broker if use_options(broker) else None, "tool": tool if use_options(tool) else None}


def _remove_others(keep: Path) -> None:
    kind = keep.name.split("-", 1)[0]
    for old in keep.parent.glob(f"{kind}-*.jsa"):
        if old != keep:
            old.unlink(missing_ok=True)


#: ``record(broker_archive, tool_archive)``: run a broker JVM (launched with :func:`dump_options`) and a
#: tool JVM that write those archives as they exit cleanly; None means "that one is not needed".
Recorder = Callable[[Optional[Path], Optional[Path]], None]


def build_archives(dist: Distribution, record: Recorder, force: bool = False) -> str:
    """Write the broker and tool archives for the current set-up unless they exist. Returns what it did.

    ``record`` runs the JVMs that write them (into a temporary directory); each archive is
    checked with ``-Xshare:on`` before it is moved into place, and older ones of its kind go.
    """
    if not enabled():
        return f"skipped ({ENV_SWITCH}=0)"
    launcher, broker_cp, broker_archive = broker_setup(dist)
    if launcher is None:
        return "skipped (no javac to compile the node launcher)"
    tool_cp, tool_archive = tool_setup(dist)
    broker_archive.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(broker_archive.parent / ".lock"):
        todo = [a for a in (broker_archive, tool_archive) if force or not a.exists()]
        if not todo:
            return f"ready ({broker_archive.parent})"
        with tempfile.TemporaryDirectory(prefix="labkit-cds-", dir=broker_archive.parent) as tmp:
            fresh_broker = Path(tmp) / broker_archive.name
            fresh_tool = Path(tmp) / tool_archive.name
            record(fresh_broker if broker_archive in todo else None, fresh_tool if tool_archive in todo else None)
            spec = kafka_spec()
            checks = ((fresh_broker, broker_archive, broker_cp, [f"-Xms{spec.heap_start}", f"-Xmx{spec.heap}", *spec.jvm_options],
                       (LAUNCHER_MAIN, "--check")),
                      (fresh_tool, tool_archive, tool_cp, [f"-Xmx{spec.tool_heap}", *spec.tool_options],
                       ("kafka.tools.StorageTool", "random-uuid")))
            done = []
            for fresh, final, cp, options, (main_class, *args) in checks:
                if final not in todo:
                    continue
                if not fresh.exists() or not usable(fresh, cp, options, main_class, *args):
                    return f"failed: no usable {final.name.split('-')[0]} archive was written (JVMs start without one)"
                fresh.replace(final)
                _remove_others(final)
                done.append(f"{final.name} ({final.stat().st_size / 2**20:.0f} MB)")
    return "built " + ", ".join(done) + f" in {broker_archive.parent}"

