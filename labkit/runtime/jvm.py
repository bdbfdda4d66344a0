"""Finding the Java runtime every lab process runs on (a JDK 17 or newer).

``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH; anything older or
missing is a :class:`~labkit.errors.JavaError` that says what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import JavaError

MIN_JAVA = 17


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
