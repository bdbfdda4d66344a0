"""Kafka Lab's watchdog: no broker outlives the Python process that started it.

Started by labkit as a separate, tiny process (``python watchdog.py``) in its
own session, with a pipe from its parent on stdin. The parent sends lines:

    watch PID TICKS    kill PID if the parent dies (only if it still started at TICKS, from
                       /proc/PID/stat: a pid reused by another process is left alone; '-': unknown)
    forget PID         the parent handled PID itself
    cleanup PATH       remove PATH if the parent dies
    release PATH       the parent handled PATH itself
    exit               the parent is done; exit without doing anything

End of file without ``exit`` means the parent died (even by SIGKILL): every
watched process is killed (SIGCONT first, so paused brokers die too) and every
cleanup path is removed. This file imports nothing from labkit so it starts fast.
"""

import os
import shutil
import signal
import sys
import time


def _ticks(pid: int) -> str:
    """When ``pid`` started, in clock ticks since boot ('' when it is gone or unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ours(pid: int, ticks: str) -> bool:
    """Still the process we were told about (a reaped pid may already belong to someone else)?"""
    return ticks == "-" or not os.path.exists("/proc/self/stat") or _ticks(pid) == ticks


def _kill(pid: int, ticks: str) -> bool:
    """SIGKILL ``pid``; returns whether it was ours to kill."""
    if not _ours(pid, ticks):
        return False
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
    return True


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the parent's terminal is not our business
    watched: dict = {}
    paths: set = set()
    for line in sys.stdin:
        parts = line.rstrip("\n").split(" ", 2)
        cmd = parts[0]
        if cmd == "watch" and len(parts) == 3:
            watched[int(parts[1])] = parts[2]
        elif cmd == "forget" and len(parts) >= 2:
            watched.pop(int(parts[1]), None)
        elif cmd == "cleanup" and len(parts) >= 2:
            paths.add(line.rstrip("\n").split(" ", 1)[1])
        elif cmd == "release" and len(parts) >= 2:
            paths.discard(line.rstrip("\n").split(" ", 1)[1])
        elif cmd == "exit":
            return
    # The parent is gone.
    killed = [pid for pid, ticks in watched.items() if _kill(pid, ticks)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) and _ours(p, watched[p]) for p in killed):
        time.sleep(0.05)
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
