"""Exercises: checks with friendly feedback in the notebook, and the headless grader.

An exercise is written once, in ``exercises/<id>/``: ``notebook.py`` builds its
notebook (see :mod:`labkit.authoring`) with the reference solution between
``### BEGIN SOLUTION`` and ``### END SOLUTION``, and ``checks.py`` holds its
checks. The learner's copy is generated from it (:func:`learner_copy`) into
``notebooks/exercises/``, where a learner's edits are never overwritten
(:func:`build_learner_copies`).

Checks are functions decorated with :func:`check`: a stable id, points, whether
it is hidden (run only when grading), a hint, and a docstring saying what it
checks. A check receives the learner's notebook namespace and passes by
returning; it fails by raising ``AssertionError`` (its message is shown). A
``NotImplementedError`` means "not attempted yet".

In the notebook::

    from labkit.grading import exercise
    ex = exercise("murmur2")
    ex.check(globals())            # visible checks: a short ✓/✗ table with hints

From a terminal, ``labkit grade notebooks/exercises/murmur2.ipynb`` runs the
notebook headless with papermill (its Setup cell starts a fresh cluster when
the exercise needs one), then every check, visible and hidden, and writes a JSON report.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from .errors import LabkitError
from .setup import step

REPO = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
ANSWER_STUB = "YOUR ANSWER HERE"
GENERATED_INDEX = ".generated.json"


class GradingError(LabkitError):
    """Raised when an exercise or a notebook to grade cannot be found or read."""


def exercises_dir() -> Path:
    """Exercise sources: ``$LABKIT_EXERCISES`` or ``exercises/`` in the checkout."""
    return Path(os.environ.get("LABKIT_EXERCISES") or REPO / "exercises")


def learner_dir() -> Path:
    """Where learner copies go: ``$LABKIT_LEARNER_DIR`` or ``notebooks/exercises/``."""
    return Path(os.environ.get("LABKIT_LEARNER_DIR") or REPO / "notebooks" / "exercises")


# ---------------------------------------------------------------- checks


@dataclass(frozen=True)
class Check:
    id: str
    points: int
    hidden: bool
    hint: str
    doc: str
    fn: Callable[["Namespace"], Any] = field(repr=False, compare=False)


def check(id: str, points: int = 1, hidden: bool = False, hint: str = "") -> Callable:
    """Mark a function as one check of an exercise."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", id):
        raise ValueError(f"check id {id!r} must be snake_case")

    def mark(fn: Callable) -> Callable:
        fn.__labkit_check__ = Check(id, points, hidden, hint, (fn.__doc__ or "").strip(), fn)
        return fn

    return mark


class NotDefined(NotImplementedError):
    """The learner has not defined a name the check needs (yet)."""


class Namespace:
    """The learner's notebook globals, by attribute: ``ns.murmur2``; ``ns.cluster`` when there is one."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise NotDefined(f"`{name}` is not defined: run the cell that defines it.") from None

    def has(self, name: str) -> bool:
        return name in self._values

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)


@dataclass
class CheckResult:
    id: str
    points: int
    earned: int
    hidden: bool
    status: str  # "passed", "failed", "not attempted", "error", "not run"
    message: str = ""
    hint: str = ""
    doc: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def run_check(c: Check, ns: Namespace) -> CheckResult:
    t0 = time.monotonic()
    base = dict(id=c.id, points=c.points, hidden=c.hidden, hint=c.hint, doc=c.doc)
    try:
        c.fn(ns)
        status, earned, message = "passed", c.points, ""
    except NotImplementedError as exc:
        status, earned = "not attempted", 0
        message = str(exc) if isinstance(exc, NotDefined) else "not done yet (the cell still raises NotImplementedError)"
    except AssertionError as exc:
        status, earned, message = "failed", 0, str(exc) or "the result is not right"
    except Exception as exc:  # the learner's code raised: say what, where, in one line
        where = traceback.extract_tb(exc.__traceback__)[-1]
        status, earned = "error", 0
        message = f"{type(exc).__name__}: {exc} (line {where.lineno} of {Path(where.filename).name})"
    return CheckResult(**base, status=status, earned=earned, message=message, seconds=time.monotonic() - t0)


@dataclass
class Results:
    """Check results, shown as a table in a notebook and as text in a terminal."""

    exercise: str
    results: list[CheckResult]
    title: str = ""

    @property
    def score(self) -> int:
        return sum(r.earned for r in self.results)

    @property
    def max_score(self) -> int:
        return sum(r.points for r in self.results)

    def table(self) -> str:
        width = max((len(r.id) for r in self.results), default=10)
        lines = []
        for r in self.results:
            mark = "✓" if r.passed else "✗"
            hidden = " (hidden)" if r.hidden else ""
            lines.append(f"{mark} {r.id:<{width}}  {r.earned}/{r.points}{hidden}"
                         + (f"  {r.message}" if r.message else ""))
            if not r.passed and r.hint and not r.hidden:
                lines.append(f"  {'':<{width}}  hint: {r.hint}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"{self.table()}\nscore {self.score}/{self.max_score}"

    def _repr_html_(self) -> str:
        rows = []
        for r in self.results:
            colour = "#27ae60" if r.passed else ("#7f8c8d" if r.status == "not attempted" else "#c0392b")
            mark = "✓" if r.passed else "✗"
            detail = html.escape(r.message)
            if not r.passed and r.hint and not r.hidden:
                detail += f"<br><i>hint: {html.escape(r.hint)}</i>"
            rows.append(f"<tr><td style='color:{colour};font-weight:bold'>{mark}</td>"
                        f"<td><code>{html.escape(r.id)}</code><br><small>{html.escape(r.doc)}</small></td>"
                        f"<td>{r.earned}/{r.points}</td><td style='text-align:left'>{detail}</td></tr>")
        return (f"<table><thead><tr><th></th><th>check</th><th>points</th><th>feedback</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table><p><b>{self.score}/{self.max_score} points</b></p>")


class Exercise:
    """One exercise's checks, loaded from ``exercises/<id>.py``."""

    def __init__(self, id: str, checks: list[Check], title: str = "") -> None:
        ids = [c.id for c in checks]
        duplicates = {i for i in ids if ids.count(i) > 1}
        if duplicates:
            raise GradingError(f"Exercise {id!r} has duplicate check ids: {sorted(duplicates)}.", "Rename them.")
        self.id, self.checks, self.title = id, checks, title

    def run(self, namespace: Mapping[str, Any], hidden: bool) -> Results:
        ns = Namespace(namespace)
        chosen = [c for c in self.checks if hidden or not c.hidden]
        return Results(self.id, [run_check(c, ns) for c in chosen], self.title)

    def check(self, namespace: Mapping[str, Any]) -> Results:
        """Run the visible checks against the notebook's globals (pass ``globals()``)."""
        return self.run(namespace, hidden=False)

    def grade(self, namespace: Mapping[str, Any]) -> Results:
        """Run every check, hidden ones too."""
        return self.run(namespace, hidden=True)


def exercise_source(id: str) -> Path:
    """``exercises/<id>/notebook.py``: the script that builds the exercise's reference notebook."""
    return exercises_dir() / id / "notebook.py"


def reference_notebook(id: str) -> Any:
    """The exercise's notebook with the reference solution, built from its source."""
    from .authoring import read_source

    path = exercise_source(id)
    if not path.exists():
        known = ", ".join(e["id"] for e in exercise_index()) or "none"
        raise GradingError(f"No exercise {id!r} (looked for {path}).", f"Known exercises: {known}.")
    return read_source(path)


def load_checks_module(id: str):
    path = exercises_dir() / id / "checks.py"
    if not path.exists():
        known = ", ".join(e["id"] for e in exercise_index()) or "none"
        raise GradingError(f"No exercise {id!r} (looked for {path}).", f"Known exercises: {known}.")
    spec = importlib.util.spec_from_file_location(f"labkit_exercise_{id}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def exercise(id: str) -> Exercise:
    """The exercise ``id`` with its checks (in the order they are defined)."""
    module = load_checks_module(id)
    checks = [v.__labkit_check__ for v in vars(module).values() if hasattr(v, "__labkit_check__")]
    title = next((e.get("title", "") for e in exercise_index() if e["id"] == id), "")
    return Exercise(id, checks, title)


def exercise_index() -> list[dict[str, Any]]:
    """``exercises/exercises.toml``: the exercises in teaching order."""
    path = exercises_dir() / "exercises.toml"
    if not path.exists():
        return []
    from .environment import tomllib

    with path.open("rb") as fh:
        return list(tomllib.load(fh).get("exercise", []))


# ---------------------------------------------------------------- learner copies


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
    import copy

    nb = copy.deepcopy(source_nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _strip_solution(cell.source, CODE_STUB)
            cell.outputs, cell.execution_count = [], None
        elif cell.cell_type == "markdown" and BEGIN in cell.source:
            cell.source = _strip_solution(cell.source, ANSWER_STUB)
    nb.metadata.setdefault("kafka_lab", {})["learner_copy"] = True
    return nb


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build_learner_copies(force: bool = False) -> list[tuple[str, Path, str]]:
    """Write each exercise's learner copy unless the learner has edited it. Returns (id, path, action)."""
    import nbformat

    target = learner_dir()
    target.mkdir(parents=True, exist_ok=True)
    index_path = target / GENERATED_INDEX
    generated = json.loads(index_path.read_text()) if index_path.exists() else {}
    actions = []
    for entry in exercise_index():
        ex_id = entry["id"]
        text = nbformat.writes(learner_copy(reference_notebook(ex_id)))
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


# ---------------------------------------------------------------- the grader


@dataclass
class Report:
    exercise: str
    notebook: str
    status: str  # "graded", "not attempted", "errors", "timeout", "failed to run"
    reason: str
    score: int
    max_score: int
    seconds: float
    checks: list[dict[str, Any]]

    def table(self) -> str:
        lines = [f"{'':1} {'check':<46} {'points':>6}  feedback"]
        for c in self.checks:
            mark = "✓" if c["status"] == "passed" else "✗"
            hidden = " (hidden)" if c["hidden"] else ""
            lines.append(f"{mark} {c['id'] + hidden:<46} {c['earned']:>2}/{c['points']:<3}  {c['message']}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _grading_cell(ex_id: str, report_path: Path) -> str:
    return ("# Added by labkit grade: runs every check in this kernel.\n"
            "from labkit.grading import _grade_in_kernel\n"
            f"_grade_in_kernel({ex_id!r}, globals(), {str(report_path)!r})\n")


def _grade_in_kernel(ex_id: str, namespace: Mapping[str, Any], report_path: str) -> None:
    results = exercise(ex_id).grade(namespace)
    Path(report_path).write_text(json.dumps([asdict(r) for r in results.results]))


def _exercise_id_of(nb: Any, path: Path) -> str:
    ex_id = nb.metadata.get("kafka_lab", {}).get("exercise")
    if ex_id:
        return ex_id
    known = {e["id"] for e in exercise_index()}
    if path.stem in known:
        return path.stem
    raise GradingError(f"{path.name} is not a Kafka Lab exercise (no exercise id in its metadata).",
                       "Grade one of the notebooks in notebooks/exercises/.")


def _cell_label(original: Any, source: str) -> str:
    """'cell 3 ("first line")', numbered as in the learner's notebook (papermill adds cells of its own)."""
    index = next((i for i, c in enumerate(original.cells) if c.source == source), None)
    first = source.strip().split("\n")[0][:60]
    return f"cell {index + 1} ({first!r})" if index is not None else f"the cell {first!r}"


def _first_error(original: Any, ran: Any) -> Optional[str]:
    for cell in ran.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                return f"{_cell_label(original, cell.source)} raised {out.ename}: {out.evalue[:200]}"
    return None


def grade(path: str | Path, timeout: float = 600.0, progress: bool = False) -> Report:
    """Run the notebook at ``path`` headless, then all of its exercise's checks; the file is not modified."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    path = Path(path)
    if not path.exists():
        raise GradingError(f"No such notebook: {path}.", "Give the path of an exercise notebook (.ipynb).")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:
        raise GradingError(f"{path.name} is not a readable notebook ({type(exc).__name__}).",
                           "Give the path of an exercise notebook (.ipynb).") from exc
    ex_id = _exercise_id_of(nb, path)
    original = nbformat.read(path, as_version=4)
    checks = exercise(ex_id).checks
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f"labkit-grade-{ex_id}-"))
    report_path = work / "checks.json"
    status, reason = "graded", ""
    try:
        grading_cell = nbformat.v4.new_code_cell(_grading_cell(ex_id, report_path))
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        if code and ".stop()" in nb.cells[code[-1]].source:  # checks run before the notebook's cluster stops
            nb.cells.insert(code[-1], grading_cell)
        else:
            nb.cells.append(grading_cell)
        to_run, ran = work / path.name, work / f"graded-{path.name}"
        nbformat.write(nb, str(to_run))
        env_backup = os.environ.get("LABKIT_DATA_DIR")
        os.environ["LABKIT_DATA_DIR"] = str(work)
        try:
            papermill.execute_notebook(str(to_run), str(ran), cwd=str(path.parent.resolve()),
                                       kernel_name="python3", progress_bar=progress, execution_timeout=timeout,
                                       allow_errors=True)
        except PapermillExecutionError:
            pass  # errors are read from the executed notebook below
        except Exception as exc:
            if "timed out" in str(exc).lower() or type(exc).__name__ == "CellTimeoutError":
                status, reason = "timeout", f"a cell did not finish within {timeout:.0f} s"
            else:
                status, reason = "failed to run", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        finally:
            if env_backup is None:
                os.environ.pop("LABKIT_DATA_DIR", None)
            else:
                os.environ["LABKIT_DATA_DIR"] = env_backup
        if ran.exists() and status == "timeout":
            done = nbformat.read(ran, as_version=4)
            started = [i for i, c in enumerate(done.cells) if c.cell_type == "code"
                       and c.get("metadata", {}).get("papermill", {}).get("start_time")]
            running = started[-1] if started else None
            if running is not None:
                reason = f"{_cell_label(original, done.cells[running].source)} did not finish within {timeout:.0f} s"
        results: list[dict[str, Any]]
        if report_path.exists():
            results = json.loads(report_path.read_text())
            if status == "graded" and ran.exists():
                error = _first_error(original, nbformat.read(ran, as_version=4))
                if all(r["status"] == "not attempted" for r in results):
                    status, reason = "not attempted", "no task has been done yet"
                elif error:
                    status, reason = "errors", error
        else:
            if status == "graded":
                status, reason = "failed to run", "the checks did not run"
            results = [dict(id=c.id, points=c.points, earned=0, hidden=c.hidden, status="not run",
                            message=reason, hint=c.hint, doc=c.doc, seconds=0.0) for c in checks]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    score = sum(r["earned"] for r in results)
    return Report(ex_id, str(path), status, reason, score, sum(r["points"] for r in results),
                  round(time.monotonic() - t0, 1), results)


def cli_grade(args: Any) -> int:
    """``labkit grade NOTEBOOK [--json OUT] [--timeout S]``."""
    print(f"grading {args.notebook} (runs the whole notebook headless; a minute or two)...", flush=True)
    report = grade(args.notebook, timeout=args.timeout, progress=sys.stderr.isatty())
    print(report.table())
    if report.reason:
        print(f"\n{report.status}: {report.reason}")
    print(f"\nscore {report.score}/{report.max_score}   ({report.seconds:.0f} s)")
    out = Path(args.json_out) if args.json_out else Path(args.notebook).with_suffix(".report.json")
    out.write_text(report.to_json())
    print(f"report: {out}")
    return 0


def visible_ids(ex: Exercise) -> list[str]:
    return [c.id for c in ex.checks if not c.hidden]


def all_exercise_ids() -> Iterable[str]:
    return [e["id"] for e in exercise_index()]
