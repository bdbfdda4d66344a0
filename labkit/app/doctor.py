"""``labkit doctor``: is this machine ready for the lab?"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import LabkitError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    #: An optional part (Docker): failing it does not make the lab unusable.
    optional: bool = False


def _java() -> Check:
    from ..runtime.jvm import find_java

    try:
        java = find_java()
    except LabkitError as exc:
        return Check("Java", False, str(exc).split(" Install")[0], exc.hint)
    return Check("Java", True, f"{java.version} at {java.executable}")


def _jars() -> Check:
    from ..runtime.distribution import cached_distribution
    from ..runtime.cache import cache_dir
    from ..runtime.environment import kafka_spec

    try:
        dist = cached_distribution()
    except LabkitError as exc:
        return Check("Kafka jars", False, str(exc), exc.hint)
    if dist is None:
        return Check("Kafka jars", False, f"Kafka {kafka_spec().version} is not in the cache ({cache_dir()}).",
                     "Run `make setup` (needs Maven Central once).")
    return Check("Kafka jars", True, f"Kafka {dist.version}: {len(dist.jars())} jars in {dist.lib_dir} ({dist.source})")


def _python() -> Check:
    ok = sys.version_info >= (3, 10)
    return Check("Python", ok, sys.version.split()[0], "" if ok else "Use Python 3.10 or newer.")


def _docker() -> Check:
    if not shutil.which("docker"):
        return Check("Docker (optional backend)", False, "no docker command",
                     "Only needed for backend='docker'.", optional=True)
    try:
        proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is None or proc.returncode != 0:
        return Check("Docker (optional backend)", False, "the docker client answers but no engine is running",
                     "Only needed for backend='docker'; the native backend needs no Docker.", optional=True)
    return Check("Docker (optional backend)", True, f"engine {proc.stdout.strip()}", optional=True)


def _fast_start() -> Check:
    from ..runtime import classdata
    from ..runtime.distribution import cached_distribution

    try:
        dist = cached_distribution()
        found = classdata.status(dist) if dist is not None else None
    except LabkitError as exc:
        return Check("Fast start (optional)", False, str(exc), exc.hint, optional=True)
    if found is None:
        return Check("Fast start (optional)", False, "no Kafka jars yet", "Run `make setup`.", optional=True)
    missing = [kind for kind, path in found.items() if path is None]
    if not missing:
        return Check("Fast start (optional)", True, f"class-data archives in {found['broker'].parent}",  # type: ignore[union-attr]
                     optional=True)
    return Check("Fast start (optional)", False,
                 f"no {' or '.join(missing)} class-data archive for this Java and these jars: JVMs start about 2x slower",
                 "Run `labkit setup` (or `make setup`).", optional=True)


def _disk() -> Check:
    from ..backends.owned import data_root

    free = shutil.disk_usage(data_root()).free / 1e9
    ok = free >= 1.0
    return Check("Free disk", ok, f"{free:.1f} GB free in {data_root()}",
                 "" if ok else "Free some space, or set LABKIT_DATA_DIR to a roomier place.")


def _pyspark(fetch: bool = False) -> Check:
    """PySpark and its Kafka connector; ``fetch`` resolves a missing connector (once, from Maven Central)."""
    from ..runtime.maven import ivy_jar

    if ivy_jar() is None:
        return Check("PySpark", False, "pyspark is not installed", "Run `make setup`.")
    from .. import spark

    try:
        jars = spark.cached_connector() or (spark.ensure_connector(progress=True) if fetch else None)
    except LabkitError as exc:
        return Check("PySpark", False, str(exc).removesuffix(exc.hint).strip(), exc.hint)
    if not jars:
        return Check("PySpark", False, f"{spark.pyspark_version()}, but its Kafka connector is not in the cache",
                     "Run `make setup` (needs Maven Central once).")
    return Check("PySpark", True, f"{spark.pyspark_version()} with the Kafka connector ({len(jars)} jars)")


def run_checks() -> list[Check]:
    return [_python(), _java(), _jars(), _fast_start(), _pyspark(), _docker(), _disk()]


class SetupReport:
    """The Setup cell's checks, rendered as a short list in a notebook."""

    def __init__(self, checks: list[Check]) -> None:
        self.checks = checks

    @property
    def ok(self) -> bool:
        return all(c.ok or c.optional for c in self.checks)

    def __repr__(self) -> str:
        lines = []
        for c in self.checks:
            if c.optional and not c.ok:
                continue
            lines.append(f"{'✓' if c.ok else '✗'} {c.name}: {c.detail}" + (f"\n    fix: {c.fix}" if not c.ok else ""))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        items = []
        for c in self.checks:
            if c.optional and not c.ok:
                continue
            mark = "<span style='color:#27ae60'>✓</span>" if c.ok else "<span style='color:#c0392b'>✗</span>"
            fix = f"<br><b>fix:</b> {html.escape(c.fix)}" if not c.ok else ""
            items.append(f"<li>{mark} <b>{html.escape(c.name)}</b>: {html.escape(c.detail)}{fix}</li>")
        return "<ul style='list-style:none;padding-left:0'>" + "".join(items) + "</ul>"


def setup_check(need_spark: bool = False) -> SetupReport:
    """What a lesson's Setup cell shows: Python, Java, the Kafka jars (and PySpark when asked).

    Raises :class:`LabkitError` with the fix when something essential is missing,
    so the notebook stops at the Setup cell instead of failing later. From here on, labkit's log lines
    (librdkafka's among them) go to the lab's log, never under a cell (:mod:`labkit.runtime.lablog`).
    """
    from ..runtime.lablog import attach

    attach()
    _readable_kafka_errors()
    checks = [_python(), _java(), _jars_or_fetch()]
    if need_spark:
        checks.append(_pyspark(fetch=True))
    report = SetupReport(checks)
    if not report.ok:
        bad = next(c for c in checks if not c.ok)
        raise LabkitError(f"{bad.name}: {bad.detail}", bad.fix)
    return report


def _readable_kafka_errors() -> None:
    """In a notebook, show a confluent-kafka exception as one paragraph (:func:`labkit.errors.kafka_error_paragraph`)
    naming the cell's line, not as a wall of frames from the client library."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import traceback

    from confluent_kafka import KafkaException

    from ..errors import kafka_error_paragraph

    def show(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
        frames = [f for f in traceback.extract_tb(tb) if "ipykernel" in f.filename or f.filename.startswith("<")]
        line = f"line {frames[-1].lineno} of the cell: {frames[-1].line}" if frames else ""
        stb = [f"\x1b[31mKafkaException\x1b[0m: {kafka_error_paragraph(value, line)}"]
        shell._showtraceback(etype, value, stb)  # run_code calls the handler and shows nothing itself
        return stb

    shell.set_custom_exc((KafkaException,), show)


def _jars_or_fetch() -> Check:
    """Like the jar check, but fetches the jars (with progress) when they are missing and the network is there."""
    check = _jars()
    if check.ok:
        return check
    from ..runtime.distribution import ensure_distribution

    try:
        ensure_distribution(progress=True)
    except LabkitError as exc:
        return Check("Kafka jars", False, str(exc).split(" Connect")[0], exc.hint)
    return _jars()
