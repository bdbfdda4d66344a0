"""Cheats, one module per exercise: realistic ways to get points without doing the work.

Each module defines ``CHEATS``, a list of :class:`Cheat`: a name, a function that turns the
exercise's reference notebook into the cheating submission (usually by replacing the
solution in one cell), and the ids of the checks the cheat targets ("*" for every check).
``tests/test_cheats.py`` grades each one for real and asserts that it earns nothing on
those checks, while the reference still scores full marks (``tests/test_exercises.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Cheat:
    name: str
    #: reference notebook -> cheating notebook (given a deep copy: change it in place or return a new one)
    make: Callable[[Any], Any]
    #: the checks it must not earn a point on ("*": all of them)
    targets: Sequence[str] | str = "*"
    #: what a learner would be trying (shown in the docs' table of cheats tried)
    why: str = field(default="", compare=False)

    def build(self, reference: Any) -> Any:
        nb = copy.deepcopy(reference)
        out = self.make(nb)
        return nb if out is None else out


def replace_solution(nb: Any, defines: str, source: str) -> Any:
    """Replace the code cell that defines ``defines`` (e.g. "def murmur2") with ``source``."""
    cells = [c for c in nb.cells if c.cell_type == "code" and defines in c.source]
    assert cells, f"no code cell defines {defines!r}"
    cells[0].source = source
    return nb


def add_cell(nb: Any, source: str, before: str = "ex.check(globals())") -> Any:
    """Insert a new code cell before the first cell containing ``before``."""
    import nbformat

    index = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and before in c.source)
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb
