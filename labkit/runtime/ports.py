"""Ports for the servers the lab starts (brokers, Connect, the registry, the exporters).

:func:`free_ports` hands out ports below the kernel's ephemeral range, each free when picked and
reserved for the process that picked it -- a locked file in one registry that every lab process on
the machine, of every user, asks -- until :func:`release_ports` or that process ends. A
:class:`~labkit.runtime.processes.Supervisor` holds its cluster's until the cluster stops.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Optional, Sequence


def _listening_range() -> tuple[int, int]:
    """Ports for servers the lab starts: below the kernel's ephemeral range (``ip_local_port_range``).

    A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range every
    outgoing connection takes its local port from: on a busy machine (many clients connecting) one of
    them took a broker's port before the broker bound it. Below that range only listeners live.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return (0, 0)
    return (max(1024, low - 12000), low) if low - 12000 >= 1024 else (0, 0)


#: Ports :func:`free_ports` handed out in this process, each with its reservation (a locked file).
_RESERVED: dict[int, int] = {}
_RESERVED_LOCK = threading.Lock()


def _reservations() -> Optional[Path]:
    """Where every lab process on this machine, of every user, reserves its ports (None: nowhere writable)."""
    import tempfile

    where = Path(tempfile.gettempdir()) / "labkit-ports"
    try:
        where.mkdir(exist_ok=True)
        if where.stat().st_uid == os.getuid():
            where.chmod(0o1777)  # a classroom's learners are different users: one shared registry
    except OSError:
        return None
    return where


def _reserve(port: int, where: Optional[Path]) -> bool:
    """Reserve ``port`` for this process: an exclusive lock on its file, held until :func:`release_ports` or
    this process ends (the kernel drops the lock of a process that died, however it died). False: another
    lab process holds it (its broker may be down for a minute, or not bound yet: the port is still its)."""
    import fcntl

    if where is None:
        return True
    path = where / str(port)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # another user's file: a lock needs no write access
        except OSError:
            return False
    except OSError:
        return True  # no registry to ask: the bind test alone decides
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    with _RESERVED_LOCK:
        _RESERVED[port] = fd
    return True


def release_ports(ports: Sequence[int]) -> None:
    """Give back ports :func:`free_ports` reserved (their servers stopped for good)."""
    for port in ports:
        with _RESERVED_LOCK:
            fd = _RESERVED.pop(port, None)
        if fd is not None:
            os.close(fd)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports, free now and reserved for this process until :func:`release_ports`.

    Outside the ephemeral range where there is one (see :func:`_listening_range`). A port is free when
    nothing binds it and no other lab process reserved it: a broker binds its client listeners only after
    it registered with the controller -- seconds after start on a busy machine -- and a stopped broker keeps
    its ports for its restart, so a bind test alone would hand a port another worker's broker is about to
    bind (it then dies at start-up, listed in the metadata) or bind again. A program outside the lab can
    still bind one first: the caller retries.
    """
    import random

    low, high = _listening_range()
    where = _reservations()
    socks: list[socket.socket] = []
    picked: list[int] = []
    try:
        tries = 0
        while len(socks) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tries += 1
            try:
                s.bind((host, random.randrange(low, high) if high and tries < 50 * count else 0))
            except OSError:
                s.close()
                continue
            port = s.getsockname()[1]
            if port in _RESERVED or not _reserve(port, where):
                s.close()
                continue
            socks.append(s)
            picked.append(port)
        return picked
    except BaseException:
        release_ports(picked)
        raise
    finally:
        for s in socks:
            s.close()
