"""The lab's user cache on this machine, and the lock two processes sharing it take.

Jars, class-data archives, the schema registry build, the learner's record and the
shared cluster's state all live under one directory: ``$LABKIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/kafka-lab`` (``~/.cache/kafka-lab``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator


def cache_dir() -> Path:
    """Kafka Lab's user cache: ``$LABKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/kafka-lab``."""
    if os.environ.get("LABKIT_CACHE_DIR"):
        return Path(os.environ["LABKIT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "kafka-lab"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two notebooks fetching at once wait for each other)."""
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
