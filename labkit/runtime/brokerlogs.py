"""A broker's log files, by the names Kafka gives them, and reading them the way an operator greps them.

``environments/log4j2.xml`` makes every node write Kafka's usual set of files in its
``logs/`` directory (see that file for what goes where); ``cluster.broker_log(id,
file="state-change", grep="Leader", lines=20)`` reads one through :func:`read_log`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Pattern, Union

from ..errors import LabkitError
from .processes import tail

#: Short name (what ``broker_log(file=...)`` takes) -> the file Kafka writes.
LOG_FILES = {
    "server": "server.log",
    "controller": "controller.log",
    "state-change": "state-change.log",
    "request": "kafka-request.log",
    "log-cleaner": "log-cleaner.log",
    "authorizer": "kafka-authorizer.log",
    # what the JVM itself printed (start-up failures, the launcher's own lines)
    "stdout": "stdout.log",
}
#: How far back a grep looks (bytes from the end of the file): a lab broker's log is a few MB at most.
GREP_WINDOW = 8 * 2**20


def log_file(name: str) -> str:
    """``"state-change"`` (or ``"state-change.log"``) -> ``"state-change.log"``; an unknown name lists the valid ones."""
    short = name[:-4] if name.endswith(".log") else name
    short = {"kafka-request": "request", "kafka-authorizer": "authorizer"}.get(short, short)
    if short not in LOG_FILES:
        raise LabkitError(f"Brokers write no log called {name!r}.", f"Valid names: {', '.join(LOG_FILES)}.")
    return LOG_FILES[short]


def read_log(path: Path, lines: int = 50, grep: Union[None, str, Pattern[str]] = None) -> str:
    """The last ``lines`` lines of ``path``; with ``grep`` (a regular expression, as grep takes it) the last
    ``lines`` lines that match it. A file that does not exist (yet) reads as ''."""
    if grep is None:
        return tail(path, lines)
    pattern = re.compile(grep) if isinstance(grep, str) else grep
    found = [line for line in _text(path).splitlines() if pattern.search(line)]
    return "\n".join(found[-lines:]) if lines > 0 else ""


def _text(path: Path, window: int = GREP_WINDOW) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - window))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def count(path: Path, grep: Union[str, Pattern[str]]) -> int:
    """How many lines of ``path`` match ``grep``."""
    pattern = re.compile(grep) if isinstance(grep, str) else grep
    return sum(1 for line in _text(path).splitlines() if pattern.search(line))


__all__ = ["LOG_FILES", "count", "log_file", "read_log"]

