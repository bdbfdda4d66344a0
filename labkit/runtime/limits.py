"""A learner's limits in a classroom: clusters at once and memory, checked before a cluster starts.

On one server every learner's brokers share the same memory and cores, so a class sets how much
each learner may run at once (``environments/classroom/classroom.toml``, ``[learner]``; the hub puts
the file's path in ``LABKIT_CLASSROOM``). A notebook that would go past a limit gets a
:class:`~labkit.errors.LimitError` saying which limit, what is running and what to stop -- before
anything starts. Outside a classroom there are no limits.

What counts: the learner's own processes on this machine (their Jupyter server, kernels, broker
and service JVMs: everything running under their user id). Memory is their proportional share
(PSS, from ``/proc/PID/smaps_rollup``: pages shared with other processes, like the brokers'
class-data archive, count once across them), and a new cluster is expected to add
``broker_mb`` per broker (the sizing table in the README).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import LimitError
from .environment import load_toml

ENV = "LABKIT_CLASSROOM"
#: What a lab broker adds to a learner's memory when nothing says otherwise (MB, PSS; see the README's sizing).
DEFAULT_BROKER_MB = 160


@dataclass(frozen=True)
class Limits:
    """``[learner]`` of the class's configuration."""

    clusters: int
    memory_mb: int
    broker_mb: int = DEFAULT_BROKER_MB
    source: str = ""


def current() -> Optional[Limits]:
    """The class's limits (None outside a classroom)."""
    path = os.environ.get(ENV, "").strip()
    if not path:
        return None
    return from_config(Path(path))


def from_config(path: Path) -> Limits:
    learner = load_toml(path).get("learner", {})
    return Limits(clusters=int(learner.get("clusters", 2)), memory_mb=int(learner.get("memory_mb", 4096)),
                  broker_mb=int(learner.get("broker_mb", DEFAULT_BROKER_MB)), source=str(path))


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def pids_of(uid: Optional[int] = None) -> list[str]:
    """The pids of the processes user ``uid`` (default: this one) runs."""
    uid = os.getuid() if uid is None else uid
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(entry)
            except OSError:
                continue
    return pids


def running_clusters(under: Optional[Path] = None) -> set[str]:
    """The cluster directories of this user's live broker JVMs (``-Dlabkit.cluster=DIR`` on their command line),
    only those in ``under`` when given (a learner's clusters live in their own data directory)."""
    from .classdata import LAUNCHER_MAIN

    found = set()
    for pid in pids_of():
        args = _cmdline(pid)
        is_broker = bool(args) and os.path.basename(args[0]) == "java" and (LAUNCHER_MAIN in args or "kafka.Kafka" in args)
        if is_broker:
            found.update(a.split("=", 1)[1] for a in args if a.startswith("-Dlabkit.cluster="))
    if under is not None:
        found = {d for d in found if Path(d).is_relative_to(under)}
    return found


def pss_kb(pid: int) -> Optional[int]:
    """A process's proportional set size in kB (``/proc/PID/smaps_rollup``; its RSS where PSS is not given),
    None when the process is gone or not ours to read."""
    pss = rss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        return None
    return pss if pss is not None else rss


def memory_mb() -> float:
    """This user's memory: the PSS of every process they run (RSS where PSS cannot be read), in MB."""
    return sum(pss_kb(pid) or 0 for pid in pids_of()) / 1024


def check_start(brokers: int, limits: Optional[Limits] = None, under: Optional[Path] = None) -> None:
    """Raise :class:`LimitError` when a new cluster of ``brokers`` nodes would go past the class's limits
    (``under``: the learner's data directory, where their clusters live)."""
    limits = limits or current()
    if limits is None:
        return
    stop_one = ("Stop a cluster you no longer need (cluster.stop() in its notebook, or Kernel > Shut Down Kernel "
                "there: its brokers go with the kernel), then run this cell again.")
    clusters = running_clusters(under)
    if len(clusters) >= limits.clusters:
        raise LimitError(f"You already have {len(clusters)} cluster{'s' if len(clusters) != 1 else ''} running, the "
                         f"most this class allows at once ({limits.clusters} per learner).", stop_one,
                         limit="clusters", used=len(clusters), allowed=limits.clusters)
    used = memory_mb()
    needed = used + brokers * limits.broker_mb
    if needed > limits.memory_mb:
        raise LimitError(f"Starting {brokers} more broker{'s' if brokers != 1 else ''} would bring your lab to about "
                         f"{needed:,.0f} MB, over this class's {limits.memory_mb:,} MB per learner (you use "
                         f"{used:,.0f} MB now).", stop_one + " Idle kernels count too: shut down those you are "
                         "done with (Running Terminals and Kernels, in the left bar).",
                         limit="memory", used=round(used), allowed=limits.memory_mb)
