"""One node of a :class:`~labkit.backends.native.NativeCluster`: its directory, its JVM, and whether that JVM serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..runtime.processes import ManagedProcess
from .owned import Node

#: What a broker logs once its listeners are bound and it serves (Kafka 3.x and 4.x).
_STARTED = b"Transition from STARTING to STARTED"


@dataclass
class NativeNode(Node):
    dir: Path = Path()
    process: Optional[ManagedProcess] = None
    #: Where the node's Prometheus JMX exporter serves (None: started without it).
    metrics_port: Optional[int] = None
    #: Listener name -> the ``host:port`` this node advertises instead of its own (``NativeCluster.advertise``).
    advertised: dict[str, str] = field(default_factory=dict)
    #: The Kafka release this node runs (a rolling upgrade changes it node by node) and its ``broker.rack``.
    version: str = ""
    rack: Optional[str] = None
    #: Where :meth:`serving` reads server.log from: where it ended when the JVM was last launched, moved on
    #: past what was read since (a broker logs ~200 KB while it starts); and whether that JVM has said it serves.
    log_start: int = 0
    started: bool = False

    @property
    def log_path(self) -> Path:
        return self.dir / "logs" / "server.log"

    def serving(self) -> bool:
        """Its JVM (the last one launched) bound every listener: it logged the end of its start-up.

        A broker registers with the controller -- and is listed in the metadata -- before it binds its
        client listeners; one that cannot bind them then dies, seconds after the metadata listed it."""
        if not self.started:
            try:
                with open(self.log_path, "rb") as fh:
                    fh.seek(self.log_start)
                    read = fh.read()
            except OSError:
                return False
            self.started = _STARTED in read
            # the next read starts a line's worth before this one ended: the line may have been half written
            self.log_start += max(len(read) - len(_STARTED), 0)
        return self.started

    @property
    def stdout_path(self) -> Path:
        return self.dir / "logs" / "stdout.log"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    def running(self) -> bool:
        return self.process is not None and self.process.running
