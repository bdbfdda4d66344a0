"""The grader's line to a learner's kernel: run the notebook, then ask it for plain values.

:class:`KernelSession` runs a submission cell by cell in a fresh kernel the grader owns
(errors in cells do not stop it; a cell running past its time limit ends the run),
then installs the agent (``agent.py``) and sends it requests. :class:`RemoteNamespace`
is what checks see while grading: ``ns.murmur2(b"21")`` becomes a request, the answer
comes back as plain data, and the check decides in the grader's process.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import secrets
import signal
import subprocess
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from ..waiting import MAX_STRETCH, Deadline
from . import agent, wire
from .checks import LearnerError, NotDefined, definition_in, not_plain

#: Seconds one call of a learner's function may take before the grader gives up on it, as a quiet machine counts
#: them (a :class:`~labkit.waiting.Deadline`).
CALL_TIMEOUT = 60.0


@dataclass
class RunOutcome:
    """How running the notebook's cells went."""

    #: '<cell label> raised <Error>: <message>' for the first cell that raised, if any.
    first_error: Optional[str] = None
    #: The label of the cell that ran past the time limit (the run stopped there), if any ...
    timed_out: Optional[str] = None
    #: ... and that limit: '600 s', with the wall time it took on a busy machine.
    limit: Optional[str] = None
    #: Why the kernel died, if it did.
    died: Optional[str] = None


def cell_label(nb: Any, index: int) -> str:
    """'cell 3 ("first line")', numbered as the learner sees the notebook."""
    first = nb.cells[index].source.strip().split("\n")[0][:60]
    return f"cell {index + 1} ({first!r})"


class KernelSession:
    """A submission run in a fresh kernel (in ``cwd``, with ``env``), kept alive for the grader's questions."""

    def __init__(self, nb: Any, cwd: Path, env: Mapping[str, str], timeout: float,
                 skip: Mapping[str, str] = {}) -> None:
        """``skip``: cells not to run, ``{cell id: source}``, each skipped only while its source is exactly that."""
        from nbclient import NotebookClient

        from ..runtime.kernels import IOPUB_TIMEOUT, SocketFileKernelManager

        self.nb = nb
        self.timeout = timeout
        self.skip = dict(skip)
        self._client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                      iopub_timeout=IOPUB_TIMEOUT,  # the agent's answer may come late, not never
                                      resources={"metadata": {"path": str(cwd)}},
                                      kernel_manager_class=SocketFileKernelManager)  # no TCP port to lose
        # The kernel's own stdout/stderr (warnings, tracebacks of its message loop) are not the learner's
        # output: that arrives through the cells. Keep them out of the grader's terminal.
        self._context = self._client.setup_kernel(env=dict(env), cwd=str(cwd), stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL)
        self._token = secrets.token_hex(16)
        self._agent_ready = False

    def __enter__(self) -> "KernelSession":
        self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)

    def run_cells(self) -> RunOutcome:
        """Run every code cell in order, as the learner would with Run All."""
        from nbclient.exceptions import DeadKernelError

        outcome = RunOutcome()
        for index, cell in enumerate(list(self.nb.cells)):
            if cell.cell_type != "code":
                continue
            if cell.get("id") in self.skip and cell.source == self.skip[cell["id"]]:
                continue
            try:
                finished, deadline = self._execute(cell, index, self.timeout)
                if not finished:
                    outcome.timed_out = cell_label(self.nb, index)
                    outcome.limit = str(deadline)
                    return outcome
            except DeadKernelError as exc:
                outcome.died = f"the kernel died in {cell_label(self.nb, index)} ({str(exc).splitlines()[0][:120]})"
                return outcome
            error = next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)
            if error is not None and outcome.first_error is None:
                outcome.first_error = f"{cell_label(self.nb, index)} raised {error.ename}: {error.evalue[:200]}"
        return outcome

    def request(self, payload: dict[str, Any], timeout: float = CALL_TIMEOUT) -> dict[str, Any]:
        """Send one request to the agent; its answer (checked to carry this session's token)."""
        from nbformat.v4 import new_code_cell

        if not self._agent_ready:
            self._install_agent()
        code = f"__labkit_grader__['answer']({self._token!r}, {json.dumps(payload)!r}, globals())"
        reply, deadline = self._run_hidden(new_code_cell(code), timeout)
        if deadline is not None:
            raise LearnerError("TimeoutError", f"no answer within {deadline}")
        if reply is None:
            raise LearnerError("ProtocolError", "the kernel ran the request but gave no answer")
        if reply.get("token") != self._token:
            raise LearnerError("ProtocolError", "the kernel's answer did not come from the grader's agent")
        return reply

    # -- internals
    def _install_agent(self) -> None:
        from nbformat.v4 import new_code_cell

        source = Path(wire.__file__).read_text() + "\n" + Path(agent.__file__).read_text()
        code = (f"__labkit_grader__ = {{'__name__': 'labkit_agent'}}\n"
                f"exec(compile({source!r}, '<labkit-agent>', 'exec'), __labkit_grader__)")
        _, deadline = self._run_hidden(new_code_cell(code), 30.0)
        if deadline is not None:
            raise LearnerError("TimeoutError", f"the grader's agent did not start within {deadline}")
        self._agent_ready = True

    def _run_hidden(self, cell: Any, timeout: float) -> tuple[Optional[dict[str, Any]], Optional[Deadline]]:
        """Run a cell of the grader's own (not kept in the notebook): the agent's answer in it, if any, and the
        deadline it outlived, if it did (then it was interrupted and its answer does not count)."""
        self.nb.cells.append(cell)
        try:
            finished, deadline = self._execute(cell, len(self.nb.cells) - 1, timeout, store_history=False)
        finally:
            self.nb.cells.pop()
        if not finished:
            return None, deadline
        for out in cell.get("outputs", []):
            data = out.get("data", {}) if out.output_type == "display_data" else {}
            if agent.MIME in data:
                return dict(data[agent.MIME]), None
        error = next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)
        if error is not None:
            raise LearnerError(error.ename, error.evalue[:300])
        return None, None

    def _execute(self, cell: Any, index: int, seconds: float, **kwargs: Any) -> tuple[bool, Deadline]:
        """Run one cell within ``seconds`` as a quiet machine counts them (a :class:`~labkit.waiting.Deadline`: a
        busy machine does not make correct work look hung). False when it ran out: the kernel is interrupted.

        A watcher thread interrupts the kernel when the deadline runs out; nbclient's own timeout, the deadline's
        longest stretch, is the backstop for a kernel that ignores the interrupt."""
        from nbclient.exceptions import CellTimeoutError

        deadline = Deadline(seconds)
        done, ran_out = threading.Event(), threading.Event()

        def watch() -> None:
            while not done.wait(deadline.wait_time(1.0)):
                if deadline.expired():
                    ran_out.set()
                    self._interrupt_kernel()
                    return

        watcher = threading.Thread(target=watch, name="labkit-grader-deadline", daemon=True)
        watcher.start()
        try:
            self._client.timeout = seconds * MAX_STRETCH + 30
            self._client.execute_cell(cell, index, **kwargs)
        except CellTimeoutError:
            ran_out.set()
            self._interrupt()
        finally:
            done.set()
            watcher.join()
        return not ran_out.is_set(), deadline

    def _interrupt_kernel(self) -> None:
        """SIGINT to the kernel process alone (from any thread), as Jupyter's interrupt button sends: the running
        cell raises KeyboardInterrupt."""
        process = getattr(getattr(self._client.km, "provisioner", None), "process", None)
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)

    def _interrupt(self) -> None:
        try:
            km = self._client.km
            if km is not None:
                from nbclient.util import run_sync

                run_sync(km.interrupt_kernel)()
        except Exception:  # noqa: BLE001 - the kernel is being torn down anyway
            pass


def _raise_failure(reply: dict[str, Any], what: str, calls: Optional[list[tuple]] = None) -> None:
    if calls is not None and reply.get("index") is not None:  # which of many calls failed
        args = ", ".join(repr(a)[:40] for a in calls[reply["index"]])
        what = f"{what.rstrip('()')}({args})"
    if reply.get("type") == "NotPlainData":
        raise not_plain(wire.NotPlainData(reply.get("message", "")), what)
    message = reply.get("message", "")
    raise LearnerError(reply.get("type", "Error"), f"{message} (in {what})" if calls is not None else message,
                       reply.get("line"))


class RemoteFunction:
    """A function of the learner's notebook, called in its kernel with arguments the grader chose."""

    def __init__(self, session: KernelSession, name: str) -> None:
        self._session, self.__name__ = session, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._session.request({"op": "call", "name": self.__name__, "args": wire.encode(list(args)),
                                       "kwargs": wire.encode(kwargs)})
        if not reply.get("ok"):
            _raise_failure(reply, f"{self.__name__}()")
        return wire.decode(reply["value"])

    def many(self, calls: list[tuple]) -> list[Any]:
        """Call it once per argument tuple in one round trip (hundreds of keys, say)."""
        reply = self._session.request({"op": "many", "name": self.__name__,
                                       "calls": wire.encode([[list(c), {}] for c in calls])})
        if not reply.get("ok"):
            _raise_failure(reply, f"{self.__name__}()", list(calls))
        return [wire.decode(v) for v in reply["values"]]


class RemoteNamespace:
    """What checks see while grading: the learner's names through the kernel, the grader's own cluster."""

    def __init__(self, session: KernelSession, cluster: Any = None, submission: Any = None) -> None:
        self._session = session
        self._cluster = cluster
        #: the notebook as the learner submitted it (read from the file, before it ran)
        self._submission = submission

    @property
    def cluster(self) -> Any:
        if self._cluster is None:
            raise NotDefined("this exercise runs without a cluster")
        return self._cluster

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        reply = self._session.request({"op": "get", "name": name})
        if not reply.get("ok"):
            if reply.get("missing"):
                raise NotDefined(f"`{name}` is not defined: run the cell that defines it.")
            _raise_failure(reply, f"`{name}`")
        if reply["callable"]:
            return RemoteFunction(self._session, name)
        return wire.decode(reply["value"])

    def has(self, name: str) -> bool:
        reply = self._session.request({"op": "get", "name": name})
        return bool(reply.get("ok"))

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if self.has(name) else default

    def source(self, name: str) -> str:
        """The source of the learner's definition of ``name``, read from the submitted notebook file."""
        found = definition_in(self._submission, name) if self._submission is not None else None
        if found is None:
            raise NotDefined(f"`{name}` is not defined in the notebook.")
        return found

    def run(self, task: Callable[..., Any], *args: Any, timeout: float = 600.0) -> Any:
        """Run ``task(user, *args)`` in the learner's kernel, beside their functions; its plain-data result."""
        source = textwrap.dedent(inspect.getsource(task))
        reply = self._session.request({"op": "task", "source": source, "name": task.__name__,
                                       "args": wire.encode(list(args))}, timeout=timeout)
        if not reply.get("ok"):
            _raise_failure(reply, f"task {task.__name__}")
        return wire.decode(reply["value"])
