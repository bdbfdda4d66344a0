"""Consumer groups as the broker reports them: plain data, and the child process that reads them.

:class:`GroupView` (members, their partitions, committed and log-end offsets) is
what the live view draws and what :mod:`labkit.groupviz` plots. The groups are
read by :class:`GroupReader`, the parent's end of ``groupreader.py`` (a child
process, because librdkafka's group admin requests can crash the process that
sends them while coordinators die: see that file). :func:`shared_reader` gives
one reader per cluster for one-off reads, stopped with the cluster.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from ..errors import LabkitError

if TYPE_CHECKING:
    from ..runtime.protocols import ClusterLike

#: The child process's script (a plain file, run with this Python).
READER_SCRIPT = Path(__file__).with_name("groupreader.py")
#: Consumer groups labkit itself creates (``Cluster.read_all``): not shown unless asked for.
INTERNAL_GROUP_PREFIX = "labkit-"


@dataclass(frozen=True)
class MemberView:
    """One member of a consumer group and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition: committed offset, log-end offset and the lag between them."""

    committed: Optional[int]
    end: Optional[int]

    @property
    def lag(self) -> Optional[int]:
        if self.committed is None or self.end is None:
            return None
        return max(self.end - self.committed, 0)


@dataclass(frozen=True)
class GroupView:
    """One consumer group as the broker reports it."""

    id: str
    #: "stable", "empty", "preparing_rebalancing", "completing_rebalancing", "dead", "not found" or "unknown".
    state: str
    members: tuple[MemberView, ...] = ()
    #: (topic, partition) -> committed / log-end offsets, for every partition committed to or assigned.
    offsets: Mapping[tuple[str, int], PartitionLag] = field(default_factory=dict)
    #: The broker that coordinates the group (None when unknown).
    coordinator: Optional[int] = None
    #: Part of it went unread because its coordinator was moving (a broker died or restarted, leaders were
    #: rebalanced) or did not answer in time: read it again for the whole (``groupviz.read_group`` does).
    incomplete: bool = False

    @property
    def total_lag(self) -> int:
        return sum(x.lag or 0 for x in self.offsets.values())

    def owner(self, topic: str, partition: int) -> Optional[MemberView]:
        """The member that has ``partition`` of ``topic`` assigned, if any."""
        return next((m for m in self.members if (topic, partition) in m.partitions), None)

    def lag(self, topic: str, partition: int) -> Optional[int]:
        x = self.offsets.get((topic, partition))
        return None if x is None else x.lag

    def key(self) -> tuple:
        return (self.id, self.state, self.members, tuple(sorted(self.offsets.items())))


class GroupReaderCrashed(LabkitError):
    """Raised when the child process reading consumer groups died or stopped answering."""


class GroupReader:
    """The parent's end of the group reader process: started on first use, restarted after a crash.

    One request at a time: :meth:`send` it, then :meth:`receive` the answer, waiting as
    long as the caller can afford (the view waits a moment, then looks again next refresh).
    """

    def __init__(self, client_config: Mapping[str, Any]) -> None:
        self.config = {k: v for k, v in client_config.items() if isinstance(v, (str, int, float, bool))}
        self.proc: Optional[subprocess.Popen] = None
        self.crashes = 0
        self._sent_at: Optional[float] = None
        self._patience = 0.0

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def pending(self) -> bool:
        """A request was sent and its answer not read yet."""
        return self._sent_at is not None

    def send(self, groups: Optional[Sequence[str]], timeout: float, known: Sequence[str] = ()) -> None:
        """Ask for ``groups`` (None: list them all, or describe ``known`` if listing fails).

        Raises :class:`GroupReaderCrashed` if the reader died."""
        if self.proc is not None and self.proc.poll() is not None:
            self._crashed()  # died since the last answer
        if self.proc is None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        request = {"groups": None if groups is None else list(groups), "timeout": timeout,
                   "known": list(known), "ignore": INTERNAL_GROUP_PREFIX}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._crashed()
        self._sent_at, self._patience = time.monotonic(), 2 * timeout + 5  # listing, then describing

    def receive(self, wait: float) -> Optional[dict[str, Any]]:
        """The answer, waiting up to ``wait`` seconds for it; None while it is still being worked out."""
        if self.proc is None or self._sent_at is None or self.proc.stdout is None:
            return None
        try:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(wait, 0.0))
            line = self.proc.stdout.readline() if ready else None
        except (OSError, ValueError):
            line = ""
        if line is None:
            if time.monotonic() - self._sent_at > self._patience:
                self._crashed()  # hung
            return None
        if not line:
            self._crashed()
        self._sent_at = None
        answer = json.loads(line)
        if answer.get("timed_out") or any(group.get("passing") for group in answer.get("groups") or ()):
            self._retire()  # the next request gets a new client (a coordinator moved): see groupreader.py
        return answer

    def read(self, groups: Optional[Sequence[str]], timeout: float) -> dict[str, Any]:
        """:meth:`send` and wait for the answer."""
        self.send(groups, timeout)
        answer = self.receive(2 * timeout + 5)
        if answer is None:
            self._crashed()
        assert answer is not None
        return answer

    def _crashed(self) -> None:
        assert self.proc is not None
        try:
            code: Optional[int] = self.proc.wait(timeout=1)  # its output ended: it is exiting, or hung
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        self.crashes += 1
        what = f"exited with {code}" if code is not None else "stopped answering"
        raise GroupReaderCrashed(f"the group reader {what} (librdkafka); it restarts on the next refresh")

    def _start(self) -> None:
        # A pipe-speaking helper, not a ManagedProcess: it has no log and ends by itself when its stdin closes.
        self.proc = subprocess.Popen(
            [sys.executable, str(READER_SCRIPT), json.dumps(self.config)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)

    def _retire(self) -> None:
        """End the reader at once (it holds no state); the next :meth:`send` starts a new one."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=5)
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def close(self) -> None:
        proc, self.proc, self._sent_at = self.proc, None, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - busy or hung: it must go anyway
            proc.kill()
            proc.wait(timeout=5)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


def parse_group(group: Mapping[str, Any], errors: Optional[list[str]] = None) -> tuple:
    """One group of the reader's answer as (id, state, members, {(topic, partition): committed or None},
    coordinator, incomplete)."""
    if group.get("error") and errors is not None:
        errors.append(f"group {group['id']}: {group['error']}")
    members = tuple(sorted((MemberView(mid, cid, host, tuple(sorted((t, p) for t, p in tps)))
                            for mid, cid, host, tps in group["members"]), key=lambda m: (m.client_id, m.member_id)))
    offsets: dict[tuple[str, int], Optional[int]] = {tp: None for m in members for tp in m.partitions}
    offsets.update({(t, p): o for t, p, o in group["committed"]})
    return group["id"], group["state"], members, offsets, group.get("coordinator"), bool(group.get("passing"))


#: One reader per cluster for one-off reads (``take_snapshot``, ``groupviz.read_group``), with its lock.
_SHARED: "weakref.WeakKeyDictionary[Any, tuple[GroupReader, threading.Lock]]" = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def reader_settings(cluster: "ClusterLike") -> dict[str, Any]:
    """The client settings a group reader of ``cluster`` uses: quick to give up on a dead broker."""
    return {"socket.connection.setup.timeout.ms": 3000, "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 2000, **cluster.client_config()}


def shared_reader(cluster: "ClusterLike") -> tuple[GroupReader, threading.Lock]:
    """The cluster's reader for one-off reads and the lock to hold while using it (one request at a time).

    Started on first use and kept, so reading a group costs one request, not a new process;
    it ends when the cluster stops (or with the kernel: its stdin closes).
    """
    with _SHARED_LOCK:
        found = _SHARED.get(cluster)
        if found is None:
            found = _SHARED[cluster] = (GroupReader(reader_settings(cluster)), threading.Lock())
            cluster.on_stop(found[0].close)
        return found
