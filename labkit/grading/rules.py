"""Static rules: what a solution may not do, checked by the grader on the notebook file itself.

The lab ships its own reference code (``labkit.partitioning`` is Kafka's murmur2 and
partitioners, ``labkit.assignors`` the assignors, ...) because lessons compare the broker
with it. An exercise that asks for the same thing declares it forbidden in its checks
module (``RULES = Rules(forbid=["labkit.partitioning"], allow=["murmur2"])``), and the
grader refuses a solution that reaches it -- by ``import``, ``from ... import``, an alias,
an attribute chain from ``labkit`` -- with 0 points for the checks the rule protects and a
message that says why. Whatever the exercise, solution cells may also not import or
evaluate code dynamically (``importlib``, ``__import__``, ``exec``, ``eval``, ``compile``),
reach into interpreter internals (``sys.modules``, ``__dict__``, ``__globals__``, ...),
or use the checks (``load_checks_module``, the checks of ``exercise(...)``).

Solution cells are the code cells of the submission that are not, letter for letter, one
of the exercise's own cells (the template's cells without ``# YOUR CODE HERE``): the cells
the learner wrote or filled in, and any they added.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

#: Calls a solution never needs and a cheat does: dynamic imports and evaluation of built strings.
DYNAMIC = frozenset({"__import__", "exec", "eval", "compile", "globals", "vars", "breakpoint"})
#: Modules a solution may not import, whatever the exercise.
ALWAYS_FORBIDDEN = ("importlib", "labkit.grading", "ctypes")
#: Attributes that reach into the interpreter's internals (and through them, anything).
INTERNALS = frozenset({"__dict__", "__globals__", "__code__", "__closure__", "__builtins__", "__loader__",
                       "__spec__", "__getattribute__", "__subclasses__", "__bases__", "__mro__", "f_globals",
                       "f_locals", "gi_frame", "modules"})
#: Names of the grading machinery a solution may not touch (the notebook's own `ex.check(globals())` is a lab cell).
GRADING_NAMES = frozenset({"load_checks_module", "harness", "_grade_in_kernel"})
STUB = "# YOUR CODE HERE"


@dataclass(frozen=True)
class Rules:
    """What one exercise's solutions may not use.

    ``forbid``: module names (the lab's reference for this exercise); ``allow``: names of
    those modules that stay allowed (given to the learner, e.g. ``murmur2`` when the task is
    the partition formula); ``checks``: ids of the checks a violation zeroes, or ``"*"`` for all.
    """

    forbid: Sequence[str] = ()
    allow: Sequence[str] = ()
    checks: Sequence[str] | str = "*"

    def protects(self, check_id: str) -> bool:
        return self.checks == "*" or check_id in self.checks


@dataclass(frozen=True)
class Violation:
    cell: int
    line: int
    what: str
    #: True for the generic rules (they zero every check), False for the exercise's own ``forbid``.
    generic: bool = False

    def __str__(self) -> str:
        return f"cell {self.cell + 1}, line {self.line}: {self.what}"


@dataclass
class _Aliases:
    """Names bound to modules (``import labkit as lk`` -> lk: labkit), from every code cell."""

    #: ``from labkit.partitioning import murmur2`` binds murmur2 to "labkit.partitioning.murmur2" here too.
    modules: dict[str, str] = field(default_factory=dict)


def solution_cells(submission: Any, template: Optional[Any]) -> list[int]:
    """Indexes of the submission's code cells that the learner wrote (see the module doc)."""
    given = set()
    if template is not None:
        given = {c.source for c in template.cells if c.cell_type == "code" and STUB not in c.source}
    return [i for i, c in enumerate(submission.cells) if c.cell_type == "code" and c.source not in given]


def check_notebook(submission: Any, template: Optional[Any], rules: Rules) -> list[Violation]:
    """Every rule the submission's solution cells break."""
    trees: dict[int, ast.AST] = {}
    for i, cell in enumerate(submission.cells):
        if cell.cell_type == "code":
            try:
                trees[i] = ast.parse(_without_magics(cell.source))
            except SyntaxError:
                continue  # a cell that does not parse raises when it runs; that is the run's business
    aliases = _Aliases()
    for tree in trees.values():
        _collect_aliases(tree, aliases)
    found: list[Violation] = []
    for i in solution_cells(submission, template):
        if i in trees:
            found += _violations(i, trees[i], aliases, rules)
    return found


def _without_magics(source: str) -> str:
    """IPython's ``%magic`` and ``!shell`` lines commented out, so the rest parses as Python."""
    return "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))


def _collect_aliases(tree: ast.AST, aliases: _Aliases) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases.modules[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    aliases.modules[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                # `from labkit import partitioning` binds a module; `from labkit.partitioning import murmur2` a name
                aliases.modules[a.asname or a.name] = f"{node.module}.{a.name}"


def _dotted(node: ast.AST, aliases: _Aliases) -> Optional[str]:
    """``lk.partitioning.murmur2`` -> ``labkit.partitioning.murmur2`` when ``lk`` names a module, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases.modules:
        return ".".join([aliases.modules[node.id], *reversed(parts)])
    return None


def _reaches(dotted: str, modules: Iterable[str]) -> Optional[str]:
    return next((m for m in modules if dotted == m or dotted.startswith(m + ".")), None)


def _violations(index: int, tree: ast.AST, aliases: _Aliases, rules: Rules) -> list[Violation]:
    found: list[Violation] = []

    def add(node: ast.AST, what: str, generic: bool) -> None:
        found.append(Violation(index, getattr(node, "lineno", 0), what, generic))

    def forbidden_use(dotted: str, node: ast.AST, importing: bool = False) -> None:
        generic = _reaches(dotted, ALWAYS_FORBIDDEN)
        if generic:
            add(node, f"`{dotted}` is the grading machinery or a dynamic import: not allowed in a solution", True)
            return
        module = _reaches(dotted, rules.forbid)
        if module and importing and dotted == module:
            return  # importing the module itself is judged by what is then used from it
        if module and dotted[len(module) + 1:].split(".")[0] not in rules.allow:
            add(node, f"`{dotted}` is the lab's own answer ({module}); write it yourself", False)

    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # judged with their chain
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                forbidden_use(a.name, node, importing=True)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name == "*":
                    forbidden_use(node.module + ".*", node)
                else:
                    forbidden_use(f"{node.module}.{a.name}", node, importing=True)
        elif isinstance(node, ast.Attribute):
            if node.attr in INTERNALS:
                add(node, f"`.{node.attr}` reaches into the interpreter's internals: not allowed in a solution", True)
            dotted = _dotted(node, aliases) if id(node) not in inner else None
            if dotted is not None and isinstance(node.ctx, ast.Load):
                forbidden_use(dotted, node)
            if isinstance(node.value, ast.Name) and node.value.id == "ex" and node.attr != "check":
                add(node, f"`ex.{node.attr}` reads the exercise's checks: not allowed in a solution", True)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in DYNAMIC:
                add(node, f"`{node.id}` builds or reaches code at run time: not allowed in a solution", True)
            elif node.id in GRADING_NAMES:
                add(node, f"`{node.id}` is the grading machinery: not allowed in a solution", True)
            elif node.id in aliases.modules and id(node) not in inner:
                # a module, or a name imported from one, used on its own (called, passed, aliased)
                target = aliases.modules[node.id]
                module = _reaches(target, rules.forbid)
                if module and target[len(module) + 1:].split(".")[0] not in rules.allow:
                    add(node, f"`{node.id}` is the lab's own answer ({target}); write it yourself", False)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "getattr", "setattr", "delattr") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in aliases.modules:
                add(node, f"`{node.func.id}` on the module `{first.id}`: use its names directly", True)
    return _unique(found)


def _unique(found: list[Violation]) -> list[Violation]:
    seen, out = set(), []
    for v in found:
        if (v.cell, v.line, v.what) not in seen:
            seen.add((v.cell, v.line, v.what))
            out.append(v)
    return out
