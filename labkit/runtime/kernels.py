"""Jupyter kernels the lab starts itself (the grader, headless lessons), reached through Unix sockets.

A kernel started the usual way listens on five TCP ports that ``jupyter_client`` picks by binding
port 0 and letting go; the kernel binds them a moment later. On a busy machine where clusters,
Connect workers and other kernels pick ports too, one of the five is sometimes taken in between,
and the kernel dies before it answers ("Kernel died before replying to kernel_info": a cheat's
grading in ``make test`` once failed so). :class:`SocketFileKernelManager` uses ZeroMQ's ``ipc``
transport instead: socket files in a private directory, which nobody else can take.

    python -m labkit.runtime.kernels LESSON.ipynb EXECUTED.ipynb --cwd notebooks --execution-timeout 600

runs a notebook with papermill on such a kernel (``tests/test_notebooks.py``, ``benchmarks/soak.py``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from jupyter_client.manager import AsyncKernelManager


class SocketFileKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel listens on socket files in a directory of its own (removed with it)."""

    def __init__(self, **kwargs: Any) -> None:
        self._sockets = tempfile.mkdtemp(prefix="labkit-kernel-")
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("ip", str(Path(self._sockets) / "kernel"))  # absolute: the kernel runs in another cwd
        super().__init__(**kwargs)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:  # what shutdown_kernel awaits
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._sockets, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


#: Seconds nbclient waits, once a cell's reply has come, for the output the kernel sent before it (nbclient's
#: default is 4, and papermill fails the cell when it runs out): on a busy machine that output arrives later, and
#: a kernel that died is noticed separately, so this only bounds a wait for messages already on their way.
IOPUB_TIMEOUT = 120.0


def run_notebook(source: Path, output: Path, cwd: Path, execution_timeout: Optional[float] = 600) -> None:
    """Execute ``source`` top to bottom with papermill on a :class:`SocketFileKernelManager` kernel into ``output``."""
    import papermill

    papermill.execute_notebook(str(source), str(output), cwd=str(cwd), kernel_name="python3", progress_bar=False,
                               execution_timeout=execution_timeout, kernel_manager_class=SocketFileKernelManager,
                               iopub_timeout=IOPUB_TIMEOUT)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Run a notebook with papermill on a kernel reached through "
                                                 "socket files.")
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--cwd", type=Path, default=Path.cwd())
    parser.add_argument("--execution-timeout", type=float, default=600)
    args = parser.parse_args(argv)
    run_notebook(args.source, args.output, args.cwd, args.execution_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
