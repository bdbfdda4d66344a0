"""labkit's architecture, checked in a second: layers, the teaching API at the root, the map, lint, lesson cells.

* ``lint-imports`` keeps the layers of ``.importlinter`` (imports inside functions and type-checking
  imports count); the imports import-linter cannot see (``python -m labkit.x``, ``importlib`` loads by
  name) are checked here against the same layers, and no import cycle exists at all;
* ``ls labkit/*.py`` is the teaching API: at most 25 modules, each imported by a lesson, an exercise or
  ``labkit/__init__``; every package says which layer it is; no module is over 450 lines;
* ``docs/architecture.md`` names every module;
* ruff (``ruff.toml``, with RUF100: a stale ``noqa`` is an error) passes;
* every cell of every lesson and exercise source compiles, and every labkit name it imports or
  reaches (``labkit.spark.session``) exists — a rename breaks here, not 17 minutes into ``make test``.
"""

from __future__ import annotations

import ast
import configparser
import importlib
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_patiently

PACKAGE = REPO / "labkit"
VENV_BIN = Path(sys.executable).parent
#: Where lessons and exercises are written (their cells are strings inside these scripts).
SOURCES = sorted((REPO / "scripts" / "lessons").glob("[0-9][0-9]_*.py")) + sorted(
    (REPO / "exercises").glob("*/notebook.py"))


# ------------------------------------------------------------------------------------------ the import graph
def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Every labkit module ``path`` imports, wherever the import statement is."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # ``from . import admin`` / ``from .backends import native`` import submodules too
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def string_imports_of(path: Path, modules: set[str], me: str | None = None) -> set[str]:
    """labkit modules ``path`` names as a whole string: ``["-m", "labkit.apps.member"]``, ``import_module("labkit.x")``
    (a module named in prose, a docstring, imports nothing)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                and node.value in modules:
            found.add(node.value)
    return found - {me or module_name(path)}


def import_graph(strings: bool = True) -> dict[str, set[str]]:
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in imports_of(path) if t in modules and t != name}
        if strings:
            targets |= string_imports_of(path, set(modules))
        # importing a package runs its __init__: an edge to the package, never to its parent from inside it
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, ..., a], or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_finder_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_labkit_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


# ------------------------------------------------------------------------------------------ layers
def layers() -> list[tuple[set[str], bool]]:
    """``.importlinter``'s layers, top first: (module tails, independent siblings)."""
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    raw = config["importlinter:contract:layers"]["layers"]
    out = []
    for line in filter(None, (x.strip() for x in raw.splitlines())):
        independent = ":" not in line
        tails = {t.strip().strip("()") for t in re.split(r"[|:]", line)}
        out.append((tails, independent))
    return out


def layer_of(module: str, table: list[tuple[set[str], bool]]) -> tuple[int, str]:
    tail = module.split(".")[1] if "." in module else ""
    for index, (tails, _) in enumerate(table):
        if tail in tails:
            return index, tail
    raise AssertionError(f"{module} is in no layer of .importlinter: add it")


def test_lint_imports_keeps_every_layer():
    """import-linter itself (the maintained tool) on the real package."""
    result = run_patiently([str(VENV_BIN / "lint-imports"), "--config", str(REPO / ".importlinter"), "--no-cache"],
                           120, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_string_imports_point_down_the_layers_too():
    table = layers()
    modules = all_modules()
    wrong = []
    for name, path in modules.items():
        if name == "labkit":
            continue
        mine, my_tail = layer_of(name, table)
        for target in string_imports_of(path, set(modules)):
            theirs, their_tail = layer_of(target, table)
            independent = table[mine][1]
            if theirs < mine or (theirs == mine and my_tail != their_tail and independent):
                wrong.append(f"{name} names {target} in a string, a layer above it")
    assert not wrong, "\n".join(wrong)


def test_the_layer_check_sees_a_string_import_going_up(tmp_path):
    fake = tmp_path / "labkit" / "runtime" / "tools.py"
    fake.parent.mkdir(parents=True)
    fake.write_text('"""Docs may name labkit.grading."""\nCMD = ["python", "-m", "labkit.app.cli"]\n')
    modules = set(all_modules())
    assert string_imports_of(fake, modules, me="labkit.runtime.tools") == {"labkit.app.cli"}
    table = layers()
    assert layer_of("labkit.app.cli", table)[0] < layer_of("labkit.runtime.tools", table)[0]


# ------------------------------------------------------------------------------------------ rooms by audience
def _teaching_imports() -> set[str]:
    """labkit modules the lessons, exercises (sources, checks) and ``labkit/__init__`` import."""
    used: set[str] = set()
    texts = [p.read_text() for p in SOURCES]
    texts += [p.read_text() for p in (REPO / "exercises").glob("*/*checks.py")]
    for text in texts:
        used.update(re.findall(r"\blabkit(?:\.[a-z_]+)+", text))
        used.update(f"labkit.{m}" for group in re.findall(r"from labkit import ([\w, ]+)", text)
                    for m in (x.strip() for x in group.split(",")))
    used |= imports_of(PACKAGE / "__init__.py")
    return used


def test_the_root_is_the_teaching_api():
    root = sorted(p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(root) + 1 <= 25, f"{len(root) + 1} modules at labkit's root: move machinery into a package"
    used = _teaching_imports()
    unused = [m for m in root if not any(u == f"labkit.{m}" or u.startswith(f"labkit.{m}.") for u in used)]
    assert not unused, f"root modules no lesson, exercise or labkit/__init__ imports: {unused}"


def test_every_package_says_which_layer_it_is():
    table = layers()
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "layer" in doc.lower(), f"{init.relative_to(REPO)} has no docstring naming its layer"
        layer_of(f"labkit.{init.parent.name}", table)


def test_no_labkit_module_is_over_450_lines():
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 450}
    assert not long, f"split these (one job per module): {long}"


def test_the_architecture_page_names_every_module():
    page = (REPO / "docs" / "architecture.md").read_text()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        name = "/".join(rel.parts[:-1]) if rel.name == "__init__" else "/".join(rel.parts)
        if name and f"`{name}`" not in page:
            missing.append(name)
    assert not missing, f"docs/architecture.md does not mention: {missing}"
    for package in sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")):
        assert re.search(rf"^\|\s*`{package}/?`", page, re.M), f"no row for the package {package} on the map"


# ------------------------------------------------------------------------------------------ lint
def test_ruff_passes():
    result = run_patiently([str(VENV_BIN / "ruff"), "check", "--no-cache", "labkit", "tests", "scripts",
                            "exercises", "benchmarks"], 120, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:]


# ------------------------------------------------------------------------------------------ lesson cells
def _cells(source: Path) -> list[tuple[int, str]]:
    from labkit.authoring import read_source

    nb = read_source(source)
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _python(cell: str) -> str:
    """A cell as Python (IPython's own transforms: magics and ``!`` lines become calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell)


def _labkit_names(tree: ast.AST) -> list[tuple[str, str | None]]:
    """(module, attribute or None) for every labkit import and every ``labkit.a.b`` chain in a cell."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "labkit"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "labkit":
            found += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Attribute):
            chain = []
            cur: ast.AST = node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "labkit":
                found.append(("labkit", ".".join(reversed(chain))))
    return found


def _resolve(module: str, attr: str | None) -> str | None:
    """None when ``module`` (and ``attr`` on it, a dotted chain or a submodule) exists; else what is missing."""
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        return f"no module {module} ({exc})"
    for part in (attr or "").split(".") if attr else []:
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(f"{getattr(obj, '__name__', module)}.{part}")
        except ImportError:
            return f"{module} has no {attr}"
    return None


@pytest.mark.parametrize("source", SOURCES, ids=[f"{p.parent.name}/{p.stem}" for p in SOURCES])
def test_every_cell_compiles_and_its_labkit_names_exist(source):
    problems = []
    for index, cell in _cells(source):
        code = _python(cell)
        try:
            tree = ast.parse(code, f"{source.name} cell {index}")
            compile(tree, f"{source.name} cell {index}", "exec")
        except SyntaxError as exc:
            problems.append(f"cell {index} does not compile: {exc}")
            continue
        for module, attr in _labkit_names(tree):
            missing = _resolve(module, attr)
            if missing:
                problems.append(f"cell {index}: {missing}")
    assert not problems, "\n".join(problems)


def test_the_cell_check_finds_a_renamed_function():
    tree = ast.parse("import labkit\nfrom labkit.producing import counts_frame\nlabkit.spark.sessionx(c)\n")
    names = _labkit_names(tree)
    assert ("labkit.producing", "counts_frame") in names and ("labkit", "spark.sessionx") in names
    assert _resolve("labkit.producing", "counts_frame") is None
    assert _resolve("labkit", "spark.session") is None
    assert _resolve("labkit", "spark.sessionx") == "labkit has no spark.sessionx"
    assert _resolve("labkit.producing", "no_such_name") is not None
