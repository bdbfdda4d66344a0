"""Child processes the lab owns: broker JVMs, the services beside them, workload members.

A :class:`ManagedProcess` is one child: its command, its log file, how to stop,
kill, pause and resume it, and a ready-wait that carries the log's last lines
as evidence when it times out. No process the lab starts may outlive the Python
process (the notebook's kernel) that started it, even one killed with SIGKILL:

* on Linux the child is started through ``setpriv --pdeathsig KILL``, so the
  kernel kills it when the thread that started it ends (only from the main
  thread: a worker thread ending must not take a broker with it);
* a :class:`Supervisor` (one per cluster) also runs a tiny watchdog process
  (``watchdog.py``) that notices its parent's death on a closed pipe, kills
  every process it was told about and removes the cluster's directory.

:meth:`Supervisor.stop_all` ends everything one owner started, newest first.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Optional, Sequence, TypeVar

from ..errors import ProcessStartError
from .ports import release_ports
from ..waiting import Wait

T = TypeVar("T")

#: What a managed process is doing, as labkit last saw it.
STATES = ("new", "running", "paused", "stopped", "killed", "exited")


def supervisor_of(cluster: Any) -> "Supervisor":
    """The supervisor that owns ``cluster``'s processes and directories. A cluster labkit started has its own;
    one it does not own (external) gets one on first use, with a directory in the system temp dir: stopped
    and removed when the cluster stops, and by its watchdog when the kernel dies (even SIGKILLed); a new one
    when it is used again after that stop."""
    found = getattr(cluster, "supervisor", None)
    if found is not None:
        return found
    found = getattr(cluster, "_services_supervisor", None)
    if found is None or found.closed:  # used again after it stopped (a grader's checks after the notebook's stop)
        found = Supervisor(Path(tempfile.mkdtemp(prefix="labkit-services-")))
        cluster._services_supervisor = found
        cluster.on_stop(found.stop_all)
    return found


def scratch_dir(cluster: Any, prefix: str) -> Path:
    """A new directory for files that belong with ``cluster`` (a reassignment plan, a group's member logs):
    inside the cluster's own directory when labkit owns it, else inside its :func:`supervisor_of`'s. Either
    way it goes with the cluster: when it stops, or when the kernel dies (the watchdog removes the directory).
    """
    root = Path(getattr(cluster, "data_dir", None) or supervisor_of(cluster).root) / "scratch"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a text file ('' when it does not exist)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first), or [] where the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rsplit(")", 1)[-1].split()
    except OSError:
        return []


def start_ticks(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, from /proc), or '' where that is unknown.

    Together with the pid it names one process for good: a reused pid starts at another time.
    """
    fields = _stat(pid)
    return fields[19] if fields else ""


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> Optional[float]:
    """The CPU seconds ``pid`` has used and those of the children it reaped (utime, stime, cutime, cstime), or
    None once it is gone (its time then went to whoever reaped it)."""
    fields = _stat(pid)
    return sum(int(x) for x in fields[11:15]) / _TICKS if fields else None


#: /proc states of a stopped thread (SIGSTOP, or a debugger's stop), and of one that is gone.
STOPPED = frozenset("Tt")
GONE = frozenset("ZX")


def thread_states(pid: int) -> set[str]:
    """The scheduler state letter of every thread of ``pid`` (/proc/PID/task/*/stat; empty where unknown)."""
    states = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as fh:
                states.add(fh.read().decode(errors="replace").rsplit(")", 1)[-1].split()[0])
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    return states


def orphan_proof(command: Sequence[str], deathsig: str = "KILL") -> list[str]:
    """``command``, started so the kernel sends it ``deathsig`` when this thread ends (Linux, main thread,
    setpriv): KILL, or TERM for a program that stops its own children when it is told to."""
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread() \
            and shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", deathsig, "--", *command]
    return list(command)


class Watchdog:
    """The parent side of ``watchdog.py``: tell it what to kill and remove if this process dies."""

    def __init__(self) -> None:
        script = Path(__file__).with_name("watchdog.py")
        self._proc = subprocess.Popen([sys.executable, "-S", str(script)], stdin=subprocess.PIPE, text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                      close_fds=True)
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch(self, pid: int) -> None:
        self._send(f"watch {pid} {start_ticks(pid) or '-'}")

    def forget(self, pid: int) -> None:
        self._send(f"forget {pid}")

    def cleanup(self, path: Path) -> None:
        self._send(f"cleanup {path}")

    def _send(self, line: str) -> None:
        with self._lock:
            if self._proc.stdin is None or self._proc.stdin.closed:
                return
            try:
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def close(self) -> None:
        """The owner is done (and cleaned up itself): the watchdog exits without touching anything."""
        self._send("exit")
        with self._lock:
            if self._proc.stdin is not None and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except BrokenPipeError:
                    pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


class ManagedProcess:
    """One child process the lab started; its output goes to ``log_path``.

    ``logs`` are further files the process writes itself (a broker's ``server.log``): their
    last lines join the output's as evidence when it exits early or a wait times out.
    """

    def __init__(self, name: str, command: Sequence[str], log_path: Path, *, cwd: Optional[Path] = None,
                 env: Optional[Mapping[str, str]] = None, logs: Sequence[Path] = (),
                 watchdog: Optional[Watchdog] = None) -> None:
        """Without a ``watchdog`` (a :class:`Supervisor` gives one) only the parent-death signal guards it."""
        self.name = name
        self.command = list(command)
        self.log_path = Path(log_path)
        self.logs = [Path(p) for p in logs]
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self._watchdog = watchdog
        self._proc: Optional[subprocess.Popen] = None
        self._out: Optional[IO[bytes]] = None
        self._state = "new"
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- state
    @property
    def pid(self) -> Optional[int]:
        return self._proc.pid if self._proc is not None and self.running else None

    @property
    def running(self) -> bool:
        """The process exists (running or paused)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> Optional[int]:
        return self._proc.poll() if self._proc is not None else None

    @property
    def state(self) -> str:
        """One of :data:`STATES`; a process that died by itself is ``exited``."""
        if self._state in ("running", "paused") and not self.running:
            self._state = "exited"
        return self._state

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> "ManagedProcess":
        """Start (or start again, after it ended) with the same command and log file (appended)."""
        with self._lock:
            if self.running:
                raise ProcessStartError(f"{self.name} is already running.", "Stop it first.", name=self.name)
            self._close_log()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._out = open(self.log_path, "ab")
            self._proc = subprocess.Popen(orphan_proof(self.command), stdout=self._out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                          cwd=self.cwd, env=self.env)
            self._state = "running"
            if self._watchdog is not None:
                self._watchdog.watch(self._proc.pid)
        return self

    def kill(self) -> None:
        """SIGKILL (after SIGCONT, so a paused process dies too) and reap: no clean shutdown."""
        with self._lock:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGKILL)
            self._reap()
            self._state = "killed"

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait for a clean exit; SIGKILL after ``timeout`` seconds."""
        with self._lock:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._signal(signal.SIGKILL)
            self._reap()
            self._state = "stopped"

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Wait until the process ends by itself; its exit code, or None if it still runs after ``timeout`` s."""
        if self._proc is None:
            return None
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reap()
        return code

    def pause(self, timeout: float = 30.0) -> None:
        """SIGSTOP: the process keeps its sockets and memory but does nothing (a long GC pause).

        Returns once every thread of the process is stopped. ``kill(SIGSTOP)`` returns as soon as the
        signal is pending: the group stop begins only when one of its threads is next scheduled, and on
        a loaded machine the others go on serving requests meanwhile (a single broker once acknowledged a
        produce sent after ``pause()`` had returned).
        """
        with self._lock:
            self._signal(signal.SIGSTOP)
            self._state = "paused"
            if self._proc is not None:
                pid = self._proc.pid
                Wait(f"{self.name} (pid {pid}) to stop", timeout=timeout, interval=0.01, stretch=True).until(
                    lambda: thread_states(pid) <= STOPPED | GONE)

    def resume(self, timeout: float = 30.0) -> None:
        """SIGCONT: a paused process runs again (returns once no thread of it is stopped)."""
        with self._lock:
            self._signal(signal.SIGCONT)
            self._state = "running"
            if self._proc is not None:
                pid = self._proc.pid
                Wait(f"{self.name} (pid {pid}) to run again", timeout=timeout, interval=0.01, stretch=True).until(
                    lambda: not (thread_states(pid) & STOPPED))

    # ---------------------------------------------------------------- waiting and evidence
    def tail(self, lines: int = 20) -> str:
        """The last lines of its own log files, then of its output."""
        parts = [tail(p, lines) for p in [*self.logs, self.log_path]]
        return "\n".join(p for p in parts if p)

    def evidence(self, lines: int = 8) -> str:
        state = self.state if self.state != "exited" else f"exited ({self.returncode})"
        where = self.logs[0] if self.logs else self.log_path
        return f"--- {self.name} ({state}), last lines of {where} ---\n" + self.tail(lines)

    def check_alive(self) -> None:
        """Raise :class:`ProcessStartError` (with its log's tail) when the process has exited."""
        if self._proc is not None and self._proc.poll() is not None and self._state in ("running", "paused"):
            self._state = "exited"
            raise ProcessStartError(f"{self.name} exited (exit code {self._proc.returncode}).",
                                    f"See {self.logs[0] if self.logs else self.log_path} (tail below).",
                                    name=self.name, log_path=self.logs[0] if self.logs else self.log_path,
                                    log_tail=self.tail(30))

    def wait_ready(self, what: str, condition: Callable[[], T], timeout: float = 60.0, interval: float = 0.2,
                   hint: str = "", stretch: bool = True) -> T:
        """Poll ``condition`` until truthy; raise at once if the process exits, with its log on timeout.
        ``timeout`` counts a quiet machine's seconds (:class:`~labkit.waiting.Wait`): this process's own work;
        ``stretch=False`` for a wait whose running out is a grader's verdict."""
        return Wait(what, timeout=timeout, interval=interval, hint=hint or f"The log of {self.name} may say why.",
                    check=self.check_alive, evidence=self.evidence, stretch=stretch).until(condition)

    # ---------------------------------------------------------------- internals
    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.kill(self._proc.pid, sig)
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            if self._watchdog is not None:
                self._watchdog.forget(self._proc.pid)
        self._close_log()

    def _close_log(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.name} {self.state} pid={self.pid}>"


class Supervisor:
    """Everything one owner (a cluster) started: a watchdog, its processes, and a directory.

    If the owner's Python process dies, the watchdog kills the processes and removes
    ``root``; :meth:`stop_all` does the same on a normal stop.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._watchdog = Watchdog()
        self._watchdog.cleanup(self.root)
        self._processes: list[ManagedProcess] = []
        self._ports: list[int] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def processes(self) -> list[ManagedProcess]:
        return list(self._processes)

    @property
    def closed(self) -> bool:
        """:meth:`stop_all` ran: its watchdog is gone, and so is ``root``."""
        return self._closed

    def process(self, name: str, command: Sequence[str], log_path: Path, *, cwd: Optional[Path] = None,
                env: Optional[Mapping[str, str]] = None, logs: Sequence[Path] = ()) -> ManagedProcess:
        """A new (not yet started) process owned by this supervisor."""
        proc = ManagedProcess(name, command, log_path, cwd=cwd, env=env, logs=logs, watchdog=self._watchdog)
        with self._lock:
            self._processes.append(proc)
        return proc

    def hold(self, ports: Sequence[int]) -> None:
        """Keep ``ports`` (from :func:`free_ports`) reserved until :meth:`stop_all`: its servers bind them."""
        with self._lock:
            self._ports.extend(ports)

    def let_go(self, ports: Sequence[int]) -> None:
        """Release ``ports`` before :meth:`stop_all` (a start retried on new ones)."""
        with self._lock:
            self._ports = [p for p in self._ports if p not in ports]
        release_ports(ports)

    def stop_all(self, remove_root: bool = True) -> None:
        """Kill every process (newest first), stop the watchdog and remove ``root``. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            processes = list(reversed(self._processes))
        for proc in processes:
            proc._signal(signal.SIGCONT)
            proc._signal(signal.SIGKILL)
        for proc in processes:
            if proc.state in ("running", "paused"):
                proc.kill()
            else:
                proc._reap()
        self._watchdog.close()
        release_ports(self._ports)  # after the processes that bound them are gone
        if remove_root:
            shutil.rmtree(self.root, ignore_errors=True)
