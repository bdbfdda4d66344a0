"""A cluster started on its first use: what ``start_cluster()`` returns while ``LABKIT_CLUSTER_ON_USE`` is set.

The grader sets it in the kernel of an exercise whose notebook starts a cluster of its own
(``SHARE_CLUSTER = False``: the notebook breaks brokers in its demo cells, and the checks run
on the grader's cluster). While the demo cells are as the exercise wrote them the grader does not
run them, and nothing else in the notebook touches that cluster: starting its JVMs cost three
brokers' start and idle for nothing in every grading. A learner who edited a demo cell, or whose
own cell uses ``cluster``, gets the cluster on that first use, the same one ``start_cluster()``
would have started in the Setup cell.

Layer: backends.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from ..cluster import Cluster

#: Set (to anything but "" or "0") in a kernel's environment: notebook-owned clusters start on first use.
ENV = "LABKIT_CLUSTER_ON_USE"

_OWN = ("_start", "_cluster", "_lock", "_what")


class DeferredCluster:
    """Stands for the cluster ``start()`` returns, and calls it the first time anything is asked of it.

    Attribute reads and writes, ``with``, ``repr`` after the start and every method go to that cluster;
    ``stop()`` before the first use starts nothing.
    """

    def __init__(self, start: Callable[[], Cluster], what: str) -> None:
        object.__setattr__(self, "_start", start)
        object.__setattr__(self, "_cluster", None)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_what", what)

    def _get(self) -> Cluster:
        with self._lock:
            if self._cluster is None:
                object.__setattr__(self, "_cluster", self._start())
            return self._cluster

    def __getattr__(self, name: str) -> Any:  # only for names this class does not have
        if name.startswith("__") or name in _OWN:
            raise AttributeError(name)
        return getattr(self._get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._get(), name, value)

    def stop(self) -> None:
        cluster: Optional[Cluster] = self._cluster
        if cluster is not None:
            cluster.stop()

    def __enter__(self) -> Cluster:
        return self._get()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        if self._cluster is not None:
            return repr(self._cluster)
        return f"<{self._what}: starts when a cell first uses it ({ENV} is set)>"
