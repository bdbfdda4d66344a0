"""The one notebook builder: lessons and exercises are written as Python scripts, built into notebooks here.

A source script builds one notebook into a module-level ``nb``::

    from labkit.authoring import Notebook
    nb = Notebook("00 · Welcome", summary="...", minutes=15)
    nb.md("# 00 · Welcome ...")
    nb.code("import labkit")

:func:`read_source` runs a script and returns its notebook; where it goes is the
caller's business. Lessons (``scripts/lessons/NN_name.py``) are built, executed
and committed by ``scripts/build_notebooks.py``; exercises
(``exercises/<id>/notebook.py``, the reference solution inside) are built on
demand -- the learner copy by ``labkit setup``, the reference by the tests and
the grader -- and never committed.

Markdown cells that start with a level-1 or level-2 heading become new slides,
level-3 headings sub-slides; code cells are fragments of the slide they follow.
"""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path
from typing import Any, Optional

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


class Notebook:
    """A lesson being written. ``summary`` (one line) and ``minutes`` feed the start page."""

    def __init__(self, title: str, summary: str = "", minutes: Optional[int] = None,
                 exercise: Optional[str] = None) -> None:
        self.nb = new_notebook()
        self.nb.metadata.update({
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": language_info(),
            "title": title,
            "kafka_lab": {"summary": summary, "minutes": minutes},
        })
        if exercise:
            self.nb.metadata["kafka_lab"] = {"exercise": exercise}

    def md(self, text: str, slide: Optional[str] = None) -> None:
        text = textwrap.dedent(text).strip("\n")
        if slide is None:
            first = text.lstrip().split("\n", 1)[0]
            slide = "slide" if first.startswith(("# ", "## ")) else ("subslide" if first.startswith("### ") else "-")
        self.nb.cells.append(new_markdown_cell(text, metadata={"slideshow": {"slide_type": slide}},
                                               id=self._next_id()))

    def code(self, source: str, slide: str = "-", tags: tuple[str, ...] = (), check: bool = False) -> None:
        source = textwrap.dedent(source).strip("\n")
        if check:
            source = "# NBVAL_CHECK_OUTPUT\n" + source
        meta: dict = {"slideshow": {"slide_type": slide}}
        if tags:
            meta["tags"] = list(tags)
        self.nb.cells.append(new_code_cell(source, metadata=meta, id=self._next_id()))

    def get_graded(self, note: str = "") -> None:
        """An exercise's closing section: how it is graded, and the cell showing the *Grade my notebook* button
        (:mod:`labkit.grading.selfgrade`; the grader never runs that cell: it is a demo cell). ``note``: what
        the hidden checks of this exercise do besides."""
        exercise = self.nb.metadata.get("kafka_lab", {}).get("exercise")
        if not exercise:
            raise ValueError("get_graded() closes an exercise: build it with Notebook(..., exercise='<id>').")
        self.md("\n\n".join(part for part in [
            "## Get graded",
            "Run the next cell for a **Grade my notebook** button. A click saves this notebook and grades it the "
            "way your trainer does, outside this kernel: your notebook runs from top to bottom in a fresh one "
            "(on a fresh cluster, where the exercise needs one), then every check runs, the hidden ones too. The "
            "report appears under the button and your score on the start page; your notebook is not changed.",
            textwrap.dedent(note).strip(),
            f"The same grade from a terminal (*File → New → Terminal*): `labkit grade {exercise}`.",
        ] if part))
        self.code("ex.grade()", tags=("demo",))

    def _next_id(self) -> str:
        """Cell ids by position, so building the same source twice gives the same file."""
        return f"cell-{len(self.nb.cells):03d}"



def language_info() -> dict[str, Any]:
    """What a Python kernel (ipykernel) reports as ``language_info``, the Python version included.

    JupyterLab writes the kernel's ``language_info`` into a notebook when the kernel connects and marks
    the notebook modified when it differs from the stored one (issue 26: every lesson showed as modified
    the moment it opened, with only the name stored). ``labkit lab`` serves notebooks with the version
    of the kernel it runs (:mod:`labkit.app.contents`), so a learner on another Python sees no change either.
    """
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def read_source(path: Path) -> Any:
    """Run a lesson or exercise source script and return the notebook it built (validated, not saved)."""
    built = runpy.run_path(str(path), run_name="__labkit_source__").get("nb")
    if not isinstance(built, Notebook):
        raise ValueError(f"{path} builds no notebook: it must assign a labkit.authoring.Notebook to `nb`.")
    nbformat.validate(built.nb)
    return built.nb

