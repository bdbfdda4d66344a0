"""pytest run the way CI runs it -- a process of its own in the project's folder -- and its outcomes read back.

    result = run_pytest(project, "test_unit.py")
    print(result)                  # pytest's own summary: failures, then "5 passed, 1 failed in 0.31s"
    result.outcomes                # {"test_key_is_normalised": "passed", "test_limit[100001]": "failed", ...}

Only the lab's plugin is loaded (``--disable-plugin-autoload -p kafka_lab``): this environment holds other pytest
plugins (nbval, hypothesis, ...) whose import alone costs seconds; a project of your own runs plain ``pytest``.
The outcomes come from pytest's JUnit XML report, test by test, not from its console text.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from ..runtime.processes import orphan_proof

#: What pytest prints from here on is its summary: what failed and why, then the counts.
_SUMMARY_MARKS = ("= FAILURES =", "= ERRORS =", "short test summary info")


@dataclass
class PytestRun:
    """One pytest run: its exit code, its console output, and each test's outcome and failure message."""

    code: int
    output: str
    seconds: float
    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    #: What each test recorded with pytest's ``record_property(name, value)`` (values as text).
    properties: dict[str, dict[str, str]] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def summary(self) -> str:
        """pytest's last line ("3 passed, 1 failed in 2.10s")."""
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1].strip("= ") if lines else f"pytest exited with code {self.code}"

    def __repr__(self) -> str:
        lines = self.output.splitlines()
        start = next((i for i, line in enumerate(lines) if any(m in line for m in _SUMMARY_MARKS)), None)
        shown = lines[start:] if start is not None else lines[-1:]
        return "\n".join(shown[-60:])


def read_junit(report: Path, properties: Optional[dict[str, dict[str, str]]] = None,
               ) -> tuple[dict[str, str], dict[str, str]]:
    """(outcome per test, first line of each failure's message) from a JUnit XML report; empty if there is none.
    ``properties``, when given, receives what each test recorded with ``record_property``."""
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    if not report.exists():
        return outcomes, messages
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name") or "?"
        if properties is not None:
            properties[name] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                text = (found.get("message") or found.text or "").strip().splitlines()
                messages[name] = text[0][:300] if text else tag
                break
        outcomes[name] = outcome
    return outcomes, messages


def pytest_command(*args: str, report: Optional[Path] = None) -> list[str]:
    """``python -m pytest`` with only the lab's plugin (see the module doc), no cache folder and no colours; the
    report in JUnit's xunit1 flavour, the one that keeps ``record_property``."""
    junit = [f"--junitxml={report}", "-o", "junit_family=xunit1"] if report is not None else []
    return [sys.executable, "-m", "pytest", "--disable-plugin-autoload", "-p", "kafka_lab", "-p", "no:cacheprovider",
            "--color=no", *junit, *args]


def run_pytest(folder: Path | str, *args: str, env: Optional[Mapping[str, str]] = None,
               timeout: float = 900.0) -> PytestRun:
    """Run pytest in ``folder`` with ``args`` (test files, ``-k``, ``--kafka-bootstrap`` ...); ``env`` is added to
    this process's environment (without its ``PYTEST_*`` variables). The run dies with this process."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with tempfile.TemporaryDirectory(prefix="labkit-pytest-") as tmp:
        report = Path(tmp) / "report.xml"
        t0 = time.monotonic()
        proc = subprocess.run(orphan_proof(pytest_command("-q", *args, report=report)), cwd=str(folder),
                              env={**clean, **(env or {})}, capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        properties: dict[str, dict[str, str]] = {}
        outcomes, messages = read_junit(report, properties)
    return PytestRun(proc.returncode, proc.stdout + proc.stderr, seconds, outcomes, messages, properties)


__all__ = ["PytestRun", "pytest_command", "read_junit", "run_pytest"]
