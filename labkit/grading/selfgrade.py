"""Grade me: a button at the end of every exercise grades it the way the trainer does (issue 26).

``ex.grade()`` (the last cell of an exercise, written by :meth:`labkit.authoring.Notebook.get_graded`)
shows a *Grade my notebook* button. A click

1. saves the notebook: a line of JavaScript asks JupyterLab (``window.jupyterapp``, which ``labkit lab``
   exposes) to save the document this kernel runs, and the click waits until the file on disk is newer.
   Where nothing saves it (another frontend) the grade is of the file as last saved, and it says when
   that was;
2. runs ``labkit grade <this notebook>`` -- the very command of the terminal, the same grader outside
   this kernel against a cluster of its own -- as a child process the lab owns (it goes when this kernel
   goes, even a killed one: :class:`labkit.runtime.processes.Supervisor`);
3. shows what the command prints, as it prints it, under the button: its progress line, then the report.

Running the cell grades nothing (*Run All* does not start a grading); nor does the grader, which never
runs this cell (the *demo* tag) and whose kernel shows no button (``LABKIT_GRADING``).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from ..errors import LabkitError, WaitTimeout
from ..waiting import Wait

#: Seconds to wait for JupyterLab to save the notebook before grading the file as it is.
SAVE_TIMEOUT = 20.0
#: Saves the document whose path ends like this kernel's notebook; ``element`` is the output's node.
#: A saved copy of this output shown again later does nothing (it was issued more than a minute before).
SAVE_SCRIPT = """(async () => {
  const app = window.jupyterapp, target = %s, issued = %d;
  if (!app || Math.abs(Date.now() - issued) > 60000) { return; }
  for (const widget of app.shell.widgets('main')) {
    const context = widget.context;
    if (context && (target === context.path || target.endsWith('/' + context.path))) {
      await context.save();
      element.textContent = 'saved';
      return;
    }
  }
})();"""


def notebook_path(exercise_id: str) -> Path:
    """The notebook this kernel runs: ``JPY_SESSION_NAME``, which Jupyter's server gives the kernels it starts."""
    session = os.environ.get("JPY_SESSION_NAME", "")
    path = Path(session) if Path(session).is_absolute() else Path.cwd() / Path(session).name
    if not session.endswith(".ipynb") or not path.exists():
        raise LabkitError("This kernel does not know which notebook it runs, so it cannot save and grade it.",
                          f"Save the notebook, then in a terminal: labkit grade {exercise_id}")
    return path


def labkit_command() -> list[str]:
    """The ``labkit`` command of this Python environment."""
    script = Path(sys.executable).with_name("labkit")
    if script.exists():
        return [str(script)]
    found = shutil.which("labkit")
    if found is None:
        raise LabkitError("The `labkit` command is not installed in this Python environment.",
                           "Run `make setup` in the lab's folder, then run this cell again.")
    return [found]


def save_first(path: Path, out: Any = None, timeout: float = SAVE_TIMEOUT) -> Optional[str]:
    """Ask JupyterLab to save ``path`` and wait until it did: None when saved, else a note on what is graded.

    The script is displayed in the output being captured (``out``, the button's output widget), which is
    cleared once the file is saved: a saved notebook carries no script to run again.
    """
    from IPython.display import Javascript, display

    before = path.stat().st_mtime_ns
    display(Javascript(SAVE_SCRIPT % (json.dumps(str(path)), time.time() * 1000)))
    try:
        Wait(f"JupyterLab to save {path.name}", timeout=timeout, interval=0.1).until(
            lambda: path.stat().st_mtime_ns > before)
    except WaitTimeout:
        when = time.strftime("%H:%M:%S", time.localtime(before / 1e9))
        return (f"This notebook could not be saved from here: it is graded as last saved, at {when} (save it "
                "with Ctrl+S and grade again if you changed it since).")
    finally:
        if out is not None:
            out.clear_output()
    return None


class GradeButton:
    """The *Grade my notebook* button of exercise ``exercise_id`` (display it: the cell's last expression)."""

    def __init__(self, exercise_id: str) -> None:
        self.exercise_id = exercise_id
        self._parts: Optional[tuple[Any, Any]] = None

    def widget(self) -> Any:
        import ipywidgets as w

        if self._parts is None:
            button = w.Button(description="Grade my notebook", button_style="primary", icon="check",
                              tooltip=f"Save this notebook, then: labkit grade {self.exercise_id}",
                              layout=w.Layout(width="auto", align_self="flex-start"))
            out = w.Output()

            def click(_: Any) -> None:
                button.disabled = True
                out.clear_output()
                try:
                    with out:
                        grade_this_notebook(self.exercise_id, out)
                finally:
                    button.disabled = False

            button.on_click(click)
            self._parts = (w.VBox([button, out]), out)
        return self._parts[0]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        text = (f"Grade this exercise: run this cell in JupyterLab for the button, or in a terminal: "
                f"labkit grade {self.exercise_id}")
        if os.environ.get("LABKIT_GRADING"):
            return {"text/plain": text}
        bundle = dict(self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/plain": text, "text/html": f"<p><i>{html.escape(text)}</i></p>"})
        return bundle

    def __repr__(self) -> str:
        return f"<GradeButton {self.exercise_id}>"


def grade_this_notebook(exercise_id: str, out: Any = None) -> None:
    """Save this exercise's notebook, grade it with ``labkit grade`` in a child process, print what it prints
    (while ``out``, the button's output widget, captures the output)."""
    path = notebook_path(exercise_id)
    note = save_first(path, out)
    if note:
        print(note)
    from ..runtime.processes import Supervisor

    work = Path(tempfile.mkdtemp(prefix=f"labkit-grade-me-{exercise_id}-"))
    supervisor = Supervisor(work)
    log = work / "grade.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = supervisor.process("labkit grade", [*labkit_command(), "grade", str(path)], log, cwd=path.parent,
                                 env=env)
    try:
        process.start()
        shown = 0
        while True:
            code = process.wait(timeout=0.5)
            shown = _show_new(log, shown)
            if code is not None:
                break
    except KeyboardInterrupt:
        print("\nGrading interrupted: nothing was recorded.")
        return
    finally:
        supervisor.stop_all()


    if code:
        print(f"\n`labkit grade` stopped with exit code {code}: the lines above say why.")


def _show_new(log: Path, shown: int) -> int:
    """Print what the log gained since byte ``shown``, whole lines only; the new position."""
    try:
        with open(log, "rb") as fh:
            fh.seek(shown)
            data = fh.read()
    except OSError:
        return shown
    end = data.rfind(b"\n") + 1
    if end:
        print(data[:end].decode(errors="replace"), end="", flush=True)
    return shown + end
