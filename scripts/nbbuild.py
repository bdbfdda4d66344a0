"""Tiny helpers for writing lesson notebooks from Python (used by the authors, not by learners).

    from nbbuild import Notebook
    nb = Notebook("00 · Welcome")
    nb.md("# Title", slide="slide")
    nb.code("import labkit")
    nb.save("notebooks/00_welcome.ipynb")

Markdown cells that start with a level-1 or level-2 heading become new slides,
level-3 headings sub-slides; code cells are fragments of the slide they follow.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

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
        self.nb.cells.append(new_markdown_cell(text, metadata={"slideshow": {"slide_type": slide}}))

    def code(self, source: str, slide: str = "-", tags: tuple[str, ...] = (), check: bool = False) -> None:
        source = textwrap.dedent(source).strip("\n")
        if check:
            source = "# NBVAL_CHECK_OUTPUT\n" + source
        meta: dict = {"slideshow": {"slide_type": slide}}
        if tags:
            meta["tags"] = list(tags)
        self.nb.cells.append(new_code_cell(source, metadata=meta))

    def save(self, path: str | Path) -> None:
        nbformat.validate(self.nb)
        nbformat.write(self.nb, str(path))
