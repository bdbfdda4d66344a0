"""Where exercises live and what they are made of: sources, checks, templates, learner copies.

An exercise is a folder ``exercises/<id>/``:

* ``notebook.py`` -- builds the notebook (:mod:`labkit.authoring`) with the reference
  solution between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (trainer side only);
* ``checks.py`` -- the visible checks (feedback in the notebook), what the grader needs
  (``CLUSTER``, ``SHARE_CLUSTER``, ``RULES``) and helpers;
* ``hidden_checks.py`` -- checks only the grader runs (trainer side only);
* ``template.ipynb`` -- in a learner bundle (``labkit release``) instead of ``notebook.py``:
  the learner copy as generated.

The learner's copy (:func:`learner_copy`: solutions replaced by stubs, outputs cleared) is
generated into ``notebooks/exercises/``, where a learner's edits are never overwritten.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from ..runtime.steps import step
from .checks import Exercise, GradingError, checks_in, load_module
from .rules import Rules

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
ANSWER_STUB = "YOUR ANSWER HERE"
GENERATED_INDEX = ".generated.json"


def exercises_dir() -> Path:
    """Exercise sources: ``$LABKIT_EXERCISES`` or ``exercises/`` in the checkout."""
    return Path(os.environ.get("LABKIT_EXERCISES") or REPO / "exercises")


def learner_dir() -> Path:
    """Where learner copies go: ``$LABKIT_LEARNER_DIR`` or ``notebooks/exercises/``."""
    return Path(os.environ.get("LABKIT_LEARNER_DIR") or REPO / "notebooks" / "exercises")


def exercise_index() -> list[dict[str, Any]]:
    """``exercises/exercises.toml``: the exercises in teaching order."""
    path = exercises_dir() / "exercises.toml"
    if not path.exists():
        return []
    from ..runtime.environment import tomllib

    with path.open("rb") as fh:
        return list(tomllib.load(fh).get("exercise", []))


def all_exercise_ids() -> list[str]:
    return [e["id"] for e in exercise_index()]


def folder(id: str) -> Path:
    path = exercises_dir() / id
    if not (path / "checks.py").exists():
        known = ", ".join(all_exercise_ids()) or "none"
        raise GradingError(f"No exercise {id!r} (looked for {path / 'checks.py'}).", f"Known exercises: {known}.")
    return path


def exercise(id: str, hidden: bool = False) -> Exercise:
    """The exercise ``id`` with its visible checks (and its hidden ones with ``hidden=True``), in order."""
    where = folder(id)
    visible = load_module(where / "checks.py", f"labkit_exercise_{id}_checks")
    checks = checks_in(visible)
    if hidden:
        path = where / "hidden_checks.py"
        if not path.exists():
            raise GradingError(f"The hidden checks of {id!r} are not here ({path}).",
                               "Grade on the trainer's machine, where the exercise sources are.")
        checks += checks_in(load_module(path, f"labkit_exercise_{id}_hidden_checks"))
    title = next((e.get("title", "") for e in exercise_index() if e["id"] == id), "")
    return Exercise(id, checks, title, rules=getattr(visible, "RULES", Rules()),
                    cluster=getattr(visible, "CLUSTER", None), share_cluster=getattr(visible, "SHARE_CLUSTER", True))


def reference_notebook(id: str) -> Any:
    """The exercise's notebook with the reference solution, built from its source."""
    from ..authoring import read_source

    path = folder(id) / "notebook.py"
    if not path.exists():
        raise GradingError(f"The source of {id!r} is not here ({path}).",
                           "Reference solutions live on the trainer's machine only.")
    return read_source(path)


def template(id: str) -> Any:
    """The untouched learner copy: generated from the source, or the bundle's ``template.ipynb``."""
    import nbformat

    where = folder(id)
    if (where / "notebook.py").exists():
        return learner_copy(reference_notebook(id))
    if (where / "template.ipynb").exists():
        return nbformat.read(where / "template.ipynb", as_version=4)
    raise GradingError(f"Exercise {id!r} has neither a source nor a template in {where}.", "Reinstall the lab.")


def _strip_solution(source: str, stub: str) -> str:
    out: list[str] = []
    lines = source.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            j = i + 1
            while j < len(lines) and lines[j].strip() != END:
                j += 1
            if j == len(lines):
                raise GradingError(f"{BEGIN} without {END}.", "Close every solution region.")
            out.extend(indent + s for s in stub.split("\n"))
            i = j + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def learner_copy(source_nb: Any) -> Any:
    """The learner's version of an exercise notebook: solutions replaced by stubs, outputs cleared."""
    nb = copy.deepcopy(source_nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _strip_solution(cell.source, CODE_STUB)
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown" and BEGIN in cell.source:
            cell.source = _strip_solution(cell.source, ANSWER_STUB)
    nb.metadata.setdefault("kafka_lab", {})["learner_copy"] = True
    return nb


def exercise_id_of(nb: Any, path: Path) -> str:
    """The exercise a notebook is a copy of (its metadata, or its file name)."""
    ex_id = nb.metadata.get("kafka_lab", {}).get("exercise")
    if ex_id:
        return str(ex_id)
    if path.stem in all_exercise_ids():
        return path.stem
    raise GradingError(f"{path.name} is not a Kafka Lab exercise (no exercise id in its metadata).",
                       "Grade one of the notebooks in notebooks/exercises/.")


def submission_path(name: str) -> Path:
    """What ``labkit grade NAME`` grades: the notebook or class folder at ``NAME``, or -- given an exercise's id
    (``labkit grade murmur2``) -- the learner's copy of it, wherever the command runs (the lab's terminal opens
    in ``notebooks/``, a shell in the checkout)."""
    path = Path(name)
    if not path.exists() and name in all_exercise_ids():
        return learner_dir() / f"{name}.ipynb"
    return path


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build_learner_copies(force: bool = False, target: Optional[Path] = None) -> list[tuple[str, Path, str]]:
    """Write each exercise's learner copy unless the learner has edited it. Returns (id, path, action)."""
    import nbformat

    target = target or learner_dir()
    target.mkdir(parents=True, exist_ok=True)
    index_path = target / GENERATED_INDEX
    generated = json.loads(index_path.read_text()) if index_path.exists() else {}
    actions = []
    for ex_id in all_exercise_ids():
        text = nbformat.writes(template(ex_id))
        path = target / f"{ex_id}.ipynb"
        if path.exists() and not force:
            current = path.read_text()
            if _digest(current) == _digest(text):
                actions.append((ex_id, path, "up to date"))
                continue
            if generated.get(ex_id) != _digest(current):
                actions.append((ex_id, path, "kept your edited copy"))
                continue
            action = "updated"
        else:
            action = "created"
        path.write_text(text)
        generated[ex_id] = _digest(text)
        actions.append((ex_id, path, action))
    index_path.write_text(json.dumps(generated, indent=1, sort_keys=True))
    return actions


@step("Exercises")
def _setup_exercises() -> str:
    actions = build_learner_copies()
    if not actions:
        return "no exercises"
    counts: dict[str, int] = {}
    for _, _, action in actions:
        counts[action] = counts.get(action, 0) + 1
    return f"{len(actions)} learner copies in {learner_dir()} (" + ", ".join(f"{n} {a}" for a, n in counts.items()) + ")"
