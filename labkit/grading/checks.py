"""Checks: what an exercise verifies, the namespaces they read the learner's work through, and results.

A check is a function decorated with :func:`check` (a stable id, points, hidden or not,
a hint, and a docstring saying what it checks). It receives a namespace and passes by
returning; it fails by raising ``AssertionError`` (its message is shown). A
``NotImplementedError`` from the learner's code means "not attempted yet".

The same check runs in two places:

* in the learner's notebook (``exercise(id).check(globals())``), with a
  :class:`LocalNamespace` over the notebook's globals: quick feedback, no authority;
* in the grader's own process, with a :class:`~labkit.grading.kernel.RemoteNamespace`:
  ``ns.murmur2(b"21")`` is answered by the learner's kernel as plain data, the
  verdict is decided here, and ``ns.cluster`` is the grader's own cluster. Nothing a
  notebook cell does to labkit in its kernel can change that verdict.

Code that has to run next to the learner's functions (a consumer loop that gets a
``Consumer``) is a *task*: ``ns.run(task, *args)`` calls ``task(user, *args)`` where
``user`` is the notebook's globals -- in the kernel itself, whichever namespace runs
the check. Tasks import what they need inside and return plain data.
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Optional

from ..errors import LabkitError
from . import wire
from .rules import Rules


class GradingError(LabkitError):
    """Raised when an exercise or a notebook to grade cannot be found or read."""


@dataclass(frozen=True)
class Check:
    id: str
    points: int
    hidden: bool
    hint: str
    doc: str
    fn: Callable[[Any], Any] = field(repr=False, compare=False)


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


class GraderFault(Exception):
    """Raised by a check when the grader's own machinery failed (a drill of its own, a cluster it started), not
    the learner's code: the check earns nothing and its status is ``"grader fault"``, so a broken grader is never
    taken for a wrong answer, or for a cheat caught (the tests fail on it)."""


class LearnerError(Exception):
    """Raised in the grader when the learner's code raised in its kernel: the exception's type name,
    message and line, as plain data (the exception itself never crosses)."""

    def __init__(self, type_name: str, message: str, line: Optional[int] = None) -> None:
        self.type_name, self.message, self.line = type_name, message, line
        super().__init__(f"{type_name}: {message}" + (f" (line {line} of your cell)" if line else ""))


def not_plain(exc: wire.NotPlainData, what: str) -> AssertionError:
    return AssertionError(f"{what} returned something that is not plain data ({exc}): return numbers, text, "
                          "bytes, or lists/tuples/dicts of them")


class LocalNamespace:
    """The learner's notebook globals, by attribute: ``ns.murmur2``; ``ns.cluster`` when there is one.

    Values go through the same plain-data check the grader applies, so the feedback in the
    notebook never says "passed" to something the grader will refuse.
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._values[name]
        except KeyError:
            raise NotDefined(f"`{name}` is not defined: run the cell that defines it.") from None
        if name == "cluster" or callable(value):
            return _Checked(name, value) if callable(value) else value
        return _plain(value, f"`{name}`")

    def has(self, name: str) -> bool:
        return name in self._values

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self._values else default

    def source(self, name: str) -> str:
        """The source of the learner's definition of ``name`` (a function or class), to read their code."""
        import inspect

        value = getattr(self, name)
        return inspect.getsource(value._fn if isinstance(value, _Checked) else value)

    def run(self, task: Callable[..., Any], *args: Any, timeout: float = 600.0) -> Any:
        """Run ``task(user, *args)`` next to the learner's code (here: in this kernel)."""
        return _plain(task(self._values, *wire.decode(wire.encode(list(args)))), f"task {task.__name__}")


class _Checked:
    """A learner's function whose results are checked to be plain data, as in the grader."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.__name__, self._fn = name, fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _plain(self._fn(*args, **kwargs), f"{self.__name__}()")

    def many(self, calls: list[tuple]) -> list[Any]:
        return [self(*call) for call in calls]


def _plain(value: Any, what: str) -> Any:
    try:
        return wire.decode(wire.encode(value))
    except wire.NotPlainData as exc:
        raise not_plain(exc, what) from None


@dataclass
class CheckResult:
    id: str
    points: int
    earned: int
    hidden: bool
    status: str  # "passed", "failed", "not attempted", "error", "grader fault", "not run", "refused"
    message: str = ""
    hint: str = ""
    doc: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def not_run(c: Check, status: str, message: str) -> CheckResult:
    """A check that earned nothing without running (the notebook timed out, a rule was broken, ...)."""
    return CheckResult(c.id, c.points, 0, c.hidden, status, message, c.hint, c.doc)


def run_check(c: Check, ns: Any) -> CheckResult:
    t0 = time.monotonic()
    base = dict(id=c.id, points=c.points, hidden=c.hidden, hint=c.hint, doc=c.doc)
    try:
        c.fn(ns)
        status, earned, message = "passed", c.points, ""
    except NotImplementedError as exc:
        status, earned = "not attempted", 0
        message = str(exc) if isinstance(exc, NotDefined) else "not done yet (the cell still raises NotImplementedError)"
    except LearnerError as exc:
        if exc.type_name == "NotImplementedError":
            status, earned, message = "not attempted", 0, "not done yet (the cell still raises NotImplementedError)"
        else:
            status, earned, message = "error", 0, str(exc)
    except AssertionError as exc:
        status, earned, message = "failed", 0, str(exc) or "the result is not right"
    except GraderFault as exc:
        status, earned, message = "grader fault", 0, str(exc)
    except Exception as exc:  # noqa: BLE001 - the learner's code raised: say what, where, in one line
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


class GradedByTheGrader:
    """What ``ex.check(globals())`` shows while the grader runs the notebook: the grader checks itself."""

    def __repr__(self) -> str:
        return "(checks are run by the grader, outside this kernel)"


@dataclass
class Exercise:
    """One exercise's checks (visible, and hidden ones on the trainer's machine) and what the grader needs."""

    id: str
    checks: list[Check]
    title: str = ""
    rules: Rules = field(default_factory=Rules)
    #: The cluster profile the grader starts for this exercise (None: the exercise needs none).
    cluster: Optional[str] = None
    #: While graded, the notebook attaches to the grader's cluster instead of starting its own.
    share_cluster: bool = True

    def __post_init__(self) -> None:
        ids = [c.id for c in self.checks]
        duplicates = {i for i in ids if ids.count(i) > 1}
        if duplicates:
            raise GradingError(f"Exercise {self.id!r} has duplicate check ids: {sorted(duplicates)}.", "Rename them.")

    def run(self, namespace: Any, hidden: bool) -> Results:
        ns = namespace if not isinstance(namespace, Mapping) else LocalNamespace(namespace)
        chosen = [c for c in self.checks if hidden or not c.hidden]
        return Results(self.id, [run_check(c, ns) for c in chosen], self.title)

    def check(self, namespace: Mapping[str, Any]) -> Any:
        """Run the visible checks against the notebook's globals (pass ``globals()``): feedback only.

        While the grader runs the notebook (``LABKIT_GRADING`` set), it does nothing: the
        grader runs every check itself, outside the kernel.
        """
        import os

        if os.environ.get("LABKIT_GRADING"):
            return GradedByTheGrader()
        return self.run(namespace, hidden=False)

    def grade(self) -> Any:
        """A *Grade my notebook* button: it saves this notebook and grades it as the trainer does, outside this
        kernel (``labkit grade``), the report shown under it -- an exercise's *Get graded* cell
        (:mod:`labkit.grading.selfgrade`)."""
        from .selfgrade import GradeButton

        return GradeButton(self.id)


def load_module(path: Path, name: str) -> ModuleType:
    """Load a checks file as a module (not on ``sys.path``: exercises' files share names)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GradingError(f"Cannot load {path}.", "Check the file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so dataclasses and pickling inside it work
    spec.loader.exec_module(module)
    return module


def sibling(file: str, name: str = "checks") -> ModuleType:
    """The checks module beside ``file`` (hidden checks use the visible module's helpers this way)."""
    path = Path(file).with_name(f"{name}.py")
    key = f"labkit_exercise_{path.parent.name}_{name}"
    return sys.modules.get(key) or load_module(path, key)


def definition_in(notebook: Any, name: str) -> Optional[str]:
    """The source of the last top-level ``def``/``class`` called ``name`` in a notebook's code cells."""
    import ast

    found = None
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = ast.get_source_segment(cell.source, node)
    return found


def checks_in(module: ModuleType) -> list[Check]:
    return [v.__labkit_check__ for v in vars(module).values() if hasattr(v, "__labkit_check__")]
