"""Build lesson notebooks from their sources in ``scripts/lessons/`` (for authors, not learners).

    python scripts/build_notebooks.py                 # every lesson: generate, execute, store checked outputs
    python scripts/build_notebooks.py 00 02           # only lessons whose file name starts with these
    python scripts/build_notebooks.py --no-execute    # generate only (outputs left empty)

A lesson's ``.py`` source builds its notebook (``labkit.authoring``), written to
``notebooks/<name>.ipynb`` with no outputs at all: a learner opens a clean notebook, with no
answer on the page before its question and no other run's results. Then the notebook is
executed headless with papermill and the outputs of the cells marked
``# NBVAL_CHECK_OUTPUT`` (stderr dropped) are stored with the tests, in
``tests/lesson_outputs/<name>.json``: the reference outputs ``make test`` compares each run
with (``tests/checked_outputs.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from labkit.authoring import read_source

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "scripts" / "lessons"
NOTEBOOKS = ROOT / "notebooks"
REFERENCE = ROOT / "tests" / "lesson_outputs"
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def lesson_sources(prefixes: list[str]) -> list[Path]:
    sources = sorted(p for p in LESSONS.glob("[0-9]*.py"))
    if prefixes:
        sources = [p for p in sources if any(p.name.startswith(x) for x in prefixes)]
    return sources


def notebook_for(source: Path) -> Path:
    return NOTEBOOKS / (source.stem + ".ipynb")


def generate(source: Path) -> Path:
    path = notebook_for(source)
    nbformat.write(read_source(source), str(path))
    return path


def store_checked_outputs(notebook: Path, executed: Path) -> int:
    """Store the outputs of ``executed``'s check-marked cells as ``notebook``'s reference; returns how many."""
    nb = nbformat.read(notebook, as_version=4)
    done = nbformat.read(executed, as_version=4)
    cells = []
    for index, (cell, ran) in enumerate(zip(nb.cells, done.cells)):
        if cell.cell_type == "code" and cell.source.startswith(CHECK_MARK):
            outputs = [o for o in ran.outputs if not (o.output_type == "stream" and o.name == "stderr")]
            cells.append({"index": index, "id": cell.get("id"), "outputs": outputs})
    REFERENCE.mkdir(exist_ok=True)
    path = REFERENCE / (notebook.stem + ".json")
    path.write_text(json.dumps({"notebook": notebook.name, "cells": cells}, indent=1, sort_keys=True) + "\n")
    return len(cells)


def execute(notebook: Path) -> Path:
    from labkit.runtime.kernels import run_notebook

    out = Path(tempfile.mkdtemp(prefix="kafka-lab-build-")) / notebook.name
    run_notebook(notebook, out, NOTEBOOKS, execution_timeout=600)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="file-name prefixes of lessons to build (default: all)")
    parser.add_argument("--no-execute", action="store_true", help="only generate the notebooks")
    args = parser.parse_args(argv)
    # The headless run answers no prediction; keep its reveals out of this machine's learner record.
    os.environ.setdefault("LABKIT_STATE_DIR", tempfile.mkdtemp(prefix="kafka-lab-build-state-"))
    sources = lesson_sources(args.lessons)
    if not sources:
        parser.error(f"no lesson source in {LESSONS} matches {args.lessons}")
    for source in sources:
        notebook = generate(source)
        if args.no_execute:
            print(f"generated {notebook.relative_to(ROOT)}")
            continue
        start = time.monotonic()
        executed = execute(notebook)
        stored = store_checked_outputs(notebook, executed)
        print(f"built {notebook.relative_to(ROOT)}: ran in {time.monotonic() - start:.0f} s, "
              f"{stored} checked output(s) stored")
    from labkit.app import startpage

    startpage.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
