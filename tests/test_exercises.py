"""Every exercise: generated from its script, its reference solution scores full marks,
and the untouched learner copy scores zero — graded for real, headless."""

from __future__ import annotations

import json
import runpy
import sys

import nbformat
import pytest

from conftest import REPO
from labkit import grading

EXERCISES = [e["id"] for e in grading.exercise_index()]


def test_every_exercise_has_a_script_a_notebook_and_checks():
    assert EXERCISES, "exercises/exercises.toml lists no exercise"
    for ex_id in EXERCISES:
        assert (REPO / "scripts" / "exercises" / f"{ex_id}.py").exists()
        assert (REPO / "exercises" / f"{ex_id}.ipynb").exists()
        ex = grading.exercise(ex_id)
        assert any(c.hidden for c in ex.checks) and any(not c.hidden for c in ex.checks)
        assert all(c.doc for c in ex.checks), "every check says what it checks"


@pytest.mark.parametrize("ex_id", EXERCISES)
def test_exercise_notebook_is_generated_from_its_script(ex_id, monkeypatch):
    sys.path.insert(0, str(REPO / "scripts"))
    import nbbuild

    written = {}
    monkeypatch.setattr(nbbuild.Notebook, "save", lambda self, path: written.update(nb=self.nb))
    runpy.run_path(str(REPO / "scripts" / "exercises" / f"{ex_id}.py"), run_name="__main__")
    committed = nbformat.read(REPO / "exercises" / f"{ex_id}.ipynb", as_version=4)
    assert [c.source for c in written["nb"].cells] == [c.source for c in committed.cells], \
        f"run `python scripts/exercises/{ex_id}.py`"
    assert committed.metadata["kafka_lab"]["exercise"] == ex_id


def _grade(path, output_dir, name):
    report = grading.grade(path, timeout=600)
    out = output_dir / "grading"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(report.to_json())
    return report


@pytest.mark.notebook
@pytest.mark.parametrize("ex_id", EXERCISES)
def test_reference_solution_scores_full_marks(ex_id, output_dir):
    report = _grade(REPO / "exercises" / f"{ex_id}.ipynb", output_dir, f"{ex_id}-solution")
    failed = [(c["id"], c["message"]) for c in report.checks if c["status"] != "passed"]
    assert report.status == "graded", report.reason
    assert report.score == report.max_score > 0, failed


@pytest.mark.notebook
@pytest.mark.parametrize("ex_id", EXERCISES)
def test_untouched_learner_copy_scores_zero(ex_id, tmp_path, output_dir):
    source = nbformat.read(REPO / "exercises" / f"{ex_id}.ipynb", as_version=4)
    copy = tmp_path / f"{ex_id}.ipynb"
    nbformat.write(grading.learner_copy(source), str(copy))
    before = copy.read_bytes()
    report = _grade(copy, output_dir, f"{ex_id}-learner-copy")
    assert report.score == 0
    assert report.status == "not attempted", report.reason
    assert len(report.checks) == len(grading.exercise(ex_id).checks)
    assert copy.read_bytes() == before, "grading must not modify the learner's notebook"
    json.loads(report.to_json())
