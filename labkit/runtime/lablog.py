"""The lab's log: where labkit's own log lines go on this machine, librdkafka's among them (issue 26).

A notebook's clients send librdkafka's log lines -- a broker connection closed, a reconnect -- to the
``labkit.librdkafka`` logger (:func:`labkit.runtime.librdkafka.quiet`), never under a cell. This is where
they end up: ``lab.log`` beside the learner's record (``$LABKIT_STATE_DIR``, by default the lab's user
cache ``state/``), one line each with the time and the kernel's pid. A lesson's Setup cell
(:func:`labkit.setup_check`) attaches it; a log past 5 MB is moved to ``lab.log.1`` first.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .learner import state_file

#: Bytes past which the log is moved aside (to ``lab.log.1``) when the next kernel attaches to it.
MAX_BYTES = 5_000_000
FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


class LabLogHandler(logging.FileHandler):
    """The handler :func:`attach` adds (a type of its own, so a second call finds it)."""


def log_file() -> Path:
    return state_file().parent / "lab.log"


def attach(level: int = logging.INFO) -> Path:
    """Send the ``labkit`` loggers' lines (``level`` and up) to the lab's log; once per process. Its path."""
    path = log_file()
    logger = logging.getLogger("labkit")
    for handler in logger.handlers:
        if isinstance(handler, LabLogHandler) and Path(handler.baseFilename) == path:
            return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > MAX_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    except OSError:  # no log yet, or another kernel moved it a moment ago
        pass
    handler = LabLogHandler(path, encoding="utf-8", delay=True)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    return path
