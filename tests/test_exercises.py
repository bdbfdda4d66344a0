"""Every exercise: built from its one source, its reference solution scores full marks,
and the untouched learner copy scores zero — graded for real, headless."""

from __future__ import annotations

import json

import nbformat
import pytest

from conftest import GRADING_TIMEOUT, REPO
from labkit import grading

EXERCISES = [e["id"] for e in grading.exercise_index()]


def test_every_exercise_is_one_source_with_its_checks_beside_it():
    assert EXERCISES, "exercises/exercises.toml lists no exercise"
    folders = {p.name for p in (REPO / "exercises").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == set(EXERCISES), "every exercise folder is listed in exercises.toml, and only those"
    for ex_id in EXERCISES:
        assert sorted(p.name for p in (REPO / "exercises" / ex_id).glob("*.py")) == \
            ["checks.py", "hidden_checks.py", "notebook.py"]
        assert not list((REPO / "exercises").glob(f"{ex_id}*.ipynb")), "built notebooks are not committed"
        assert grading.reference_notebook(ex_id).metadata["kafka_lab"]["exercise"] == ex_id
        visible, every = grading.exercise(ex_id), grading.exercise(ex_id, hidden=True)
        assert visible.checks and not any(c.hidden for c in visible.checks), \
            f"{ex_id}/checks.py holds the visible checks only (hidden ones go in hidden_checks.py)"
        assert any(c.hidden for c in every.checks), f"{ex_id} has hidden checks"
        assert all(c.doc for c in every.checks), "every check says what it checks"


def _grade(path, output_dir, name):
    report = grading.grade(path, timeout=600)
    out = output_dir / "grading"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(report.to_json())
    return report


@pytest.mark.notebook
@pytest.mark.timeout(GRADING_TIMEOUT)
@pytest.mark.parametrize("ex_id", EXERCISES)
def test_reference_solution_scores_full_marks(ex_id, tmp_path, output_dir):
    reference = tmp_path / f"{ex_id}.ipynb"
    nbformat.write(grading.reference_notebook(ex_id), str(reference))
    report = _grade(reference, output_dir, f"{ex_id}-solution")
    failed = [(c["id"], c["message"]) for c in report.checks if c["status"] != "passed"]
    assert report.status == "graded", report.reason
    assert report.score == report.max_score > 0, failed


@pytest.mark.notebook
@pytest.mark.timeout(GRADING_TIMEOUT)
@pytest.mark.parametrize("ex_id", EXERCISES)
def test_untouched_learner_copy_scores_zero(ex_id, tmp_path, output_dir):
    copy = tmp_path / f"{ex_id}.ipynb"
    nbformat.write(grading.learner_copy(grading.reference_notebook(ex_id)), str(copy))
    before = copy.read_bytes()
    report = _grade(copy, output_dir, f"{ex_id}-learner-copy")
    assert report.score == 0
    assert report.status == "not attempted", report.reason
    assert len(report.checks) == len(grading.exercise(ex_id, hidden=True).checks)
    assert copy.read_bytes() == before, "grading must not modify the learner's notebook"
    json.loads(report.to_json())
