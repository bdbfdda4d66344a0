"""The shared lab cluster behind ``labkit cluster up / status / down``.

``up`` starts a background Python process (``python -m labkit.app.daemon --profile P``)
that owns a native cluster and records it in a small state file; notebooks and
``labkit kafka`` find its bootstrap servers there. ``down`` asks that process to
stop (SIGTERM) and waits, with a deadline, until it has removed the state file.
The cluster's brokers are the serving process's managed processes, so they go
when it goes, however it goes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import LabkitError, WaitTimeout
from ..waiting import Wait


def state_file() -> Path:
    """Where the shared cluster is recorded (``$LABKIT_STATE_DIR`` or the user cache)."""
    from ..runtime.cache import cache_dir

    root = Path(os.environ["LABKIT_STATE_DIR"]) if os.environ.get("LABKIT_STATE_DIR") else cache_dir() / "run"
    return root / "cluster.json"


def log_file() -> Path:
    """The serving process's output (its errors, if the cluster did not start)."""
    return state_file().with_name("cluster.log")


def read_state() -> Optional[dict[str, Any]]:
    """The shared cluster's record, or None when none is running (a stale record is removed)."""
    path = state_file()
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError):
        path.unlink(missing_ok=True)  # unreadable, or its server died without cleaning up
        return None
    return state


def lab_bootstrap() -> Optional[str]:
    """Bootstrap servers of the cluster tools should talk to: ``$LABKIT_BOOTSTRAP``, else the shared one."""
    env = os.environ.get("LABKIT_BOOTSTRAP")
    if env:
        return env
    state = read_state()
    return state["bootstrap_servers"] if state else None


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise LabkitError(f"--set expects KEY=VALUE, got {item!r}.", "Example: --set log.retention.ms=60000")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def start_background(profile: str, sets: list[str], timeout: float = 180.0,
                     progress: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Start the shared cluster in a background process; returns its record once it serves.

    ``sets`` are ``KEY=VALUE`` broker settings. Raises :class:`LabkitError` with the
    server's output when it exits first, :class:`WaitTimeout` when it takes longer than
    ``timeout`` seconds (the half-started server is stopped).
    """
    cmd = [sys.executable, "-m", "labkit.app.daemon", "--profile", profile]
    for item in sets:
        cmd += ["--set", item]
    log_path = log_file()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def exited() -> None:
        progress()
        if proc.poll() is not None:
            raise LabkitError(f"The lab cluster did not start:\n{log_path.read_text()[-2000:]}", f"See {log_path}.")

    try:
        return Wait(f"the shared {profile} cluster to start", timeout=timeout, interval=0.2, stretch=True, check=exited,
                    hint=f"See {log_path}.").until(read_state)
    except WaitTimeout:
        proc.terminate()
        raise


def serve(profile: str, overrides: Mapping[str, Any], announce: Callable[[str], None] = lambda text: None) -> int:
    """Run the shared cluster in this process until SIGTERM or Ctrl-C; record it while it serves."""
    from ..backends.native import NativeCluster

    cluster = NativeCluster(profile, overrides=overrides, progress=False).start()
    state = {"pid": os.getpid(), "profile": profile, "bootstrap_servers": cluster.bootstrap_servers,
             "brokers": [{"id": b.id, "port": b.port, "pid": b.pid} for b in cluster.brokers],
             "data_dir": str(cluster.data_dir), "started": time.time()}
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)
    announce(f"Lab cluster up ({profile}): {cluster.bootstrap_servers}  (Ctrl-C stops it)")
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        path.unlink(missing_ok=True)
    return 0


def stop_background(timeout: float = 30.0) -> bool:
    """Stop the shared cluster; False when none was running. Raises :class:`WaitTimeout` if it outlives ``timeout``."""
    state = read_state()
    if not state:
        return False
    os.kill(int(state["pid"]), signal.SIGTERM)
    Wait("the shared lab cluster to stop", timeout=timeout, interval=0.2,
         hint=f"Its server (pid {state['pid']}) did not stop; kill it and remove {state_file()}.").until(
        lambda: read_state() is None)
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The background process ``start_background`` runs: serve one shared cluster until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m labkit.app.daemon", description="serve the shared lab cluster")
    parser.add_argument("--profile", default="three-brokers")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    return serve(args.profile, parse_sets(args.set))


if __name__ == "__main__":
    sys.exit(main())
