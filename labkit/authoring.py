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
            "language_info": {"name": "python"},
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

    def _next_id(self) -> str:
        """Cell ids by position, so building the same source twice gives the same file."""
        return f"cell-{len(self.nb.cells):03d}"



def read_source(path: Path) -> Any:
    """Run a lesson or exercise source script and return the notebook it built (validated, not saved)."""
    built = runpy.run_path(str(path), run_name="__labkit_source__").get("nb")
    if not isinstance(built, Notebook):
        raise ValueError(f"{path} builds no notebook: it must assign a labkit.authoring.Notebook to `nb`.")
    nbformat.validate(built.nb)
    return built.nb

