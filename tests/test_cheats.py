"""Cheats must not pay: every exercise's cheats (``tests/cheats/<id>.py``) are graded for real and earn
nothing on the checks they target."""

from __future__ import annotations

import importlib

import nbformat
import pytest

from conftest import GRADING_TIMEOUT
from labkit import grading

EXERCISES = grading.all_exercise_ids()


def _module(ex_id):
    try:
        return importlib.import_module(f"cheats.{ex_id}")
    except ModuleNotFoundError:
        return None


def _cheats():
    found = []
    for ex_id in EXERCISES:
        module = _module(ex_id)
        found += [pytest.param(ex_id, cheat, id=f"{ex_id}-{cheat.name}") for cheat in getattr(module, "CHEATS", [])]
    return found


def test_every_exercise_has_a_cheat():
    for ex_id in EXERCISES:
        module = _module(ex_id)
        assert module is not None and module.CHEATS, f"tests/cheats/{ex_id}.py lists no cheat"


@pytest.mark.notebook
@pytest.mark.timeout(GRADING_TIMEOUT)
@pytest.mark.parametrize("ex_id,cheat", _cheats())
def test_a_cheat_earns_nothing_on_what_it_targets(ex_id, cheat, tmp_path, output_dir):
    path = tmp_path / f"{ex_id}.ipynb"
    nbformat.write(cheat.build(grading.reference_notebook(ex_id)), str(path))
    # only the checks the cheat targets run (the others are not its business, and cost minutes in all)
    only = None if cheat.targets == "*" else list(cheat.targets)
    report = grading.grade(path, timeout=600, only=only)
    (output_dir / "grading").mkdir(parents=True, exist_ok=True)
    (output_dir / "grading" / f"{ex_id}-cheat-{cheat.name}.json").write_text(report.to_json())
    targets = [c for c in report.checks if cheat.targets == "*" or c["id"] in cheat.targets]
    assert targets, f"the cheat targets no check of {ex_id}"
    faults = [(c["id"], c["message"]) for c in report.checks if c["status"] == "grader fault"]
    assert not faults, f"the grader's own machinery failed, so the cheat {cheat.name!r} was not judged: {faults}"
    paid = [(c["id"], c["message"]) for c in targets if c["earned"]]
    assert not paid, f"the cheat {cheat.name!r} earned points: {paid}"
