"""labkit.grading: learner copies, checks and their feedback, and the headless grader's outcomes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from conftest import REPO
from labkit import grading
from labkit.grading import GradingError, check

FIXTURES = REPO / "tests" / "fixtures" / "grading"


@pytest.fixture
def fixture_exercises(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_EXERCISES", str(FIXTURES))
    monkeypatch.setenv("LABKIT_LEARNER_DIR", str(tmp_path / "learner"))
    return tmp_path / "learner"


# ------------------------------------------------------------ learner copies


def test_solution_regions_become_stubs_with_the_markers_indentation():
    source = "def f():\n    x = 1\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert grading._strip_solution(source, grading.CODE_STUB) == (
        "def f():\n    x = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")


def test_unclosed_solution_region_is_an_error():
    with pytest.raises(GradingError, match="END SOLUTION"):
        grading._strip_solution("### BEGIN SOLUTION\nx = 1\n", grading.CODE_STUB)


def test_learner_copy_strips_code_and_markdown_answers_and_clears_outputs():
    nb = nbformat.read(FIXTURES / "adder.ipynb", as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    copy = grading.learner_copy(nb)
    assert "return a + b" not in copy.cells[1].source
    assert copy.cells[1].source.count("raise NotImplementedError()") == 2
    assert copy.cells[1].outputs == []
    assert "Because." not in copy.cells[2].source and grading.ANSWER_STUB in copy.cells[2].source
    assert "return a + b" in nb.cells[1].source, "the source notebook is not changed"


def test_learner_copies_are_created_then_never_overwrite_edits(fixture_exercises):
    first = grading.build_learner_copies()
    assert [(i, a) for i, _, a in first] == [("adder", "created")]
    path = first[0][1]
    assert [a for _, _, a in grading.build_learner_copies()] == ["up to date"]
    edited = path.read_text().replace("# YOUR CODE HERE", "# my attempt")
    path.write_text(edited)
    assert [a for _, _, a in grading.build_learner_copies()] == ["kept your edited copy"]
    assert path.read_text() == edited


# ------------------------------------------------------------ checks


def test_check_ids_must_be_snake_case():
    with pytest.raises(ValueError):
        check("Bad Id")


def test_duplicate_check_ids_are_rejected():
    @check("same")
    def a(ns):
        """a"""

    with pytest.raises(GradingError, match="same"):
        grading.Exercise("x", [a.__labkit_check__, a.__labkit_check__])


def test_visible_checks_give_feedback_and_hints(fixture_exercises):
    ex = grading.exercise("adder")
    results = ex.check({"add": lambda a, b: a * b})
    by_id = {r.id: r for r in results.results}
    assert set(by_id) == {"add_small_numbers", "double_works"}, "hidden checks do not run in the notebook"
    assert by_id["add_small_numbers"].status == "failed" and "returned 6" in by_id["add_small_numbers"].message
    assert by_id["double_works"].status == "not attempted" and "`double`" in by_id["double_works"].message
    text = repr(results)
    assert "hint: Use +." in text and "score 0/3" in text
    assert "✗" in results._repr_html_()


def test_a_check_that_meets_an_exception_reports_it_in_one_line(fixture_exercises):
    def broken(a, b):
        return {}[a]

    result = grading.exercise("adder").grade({"add": broken, "double": lambda x: 2 * x})
    failing = [r for r in result.results if r.status == "error"]
    assert failing and failing[0].message.startswith("KeyError")
    assert result.score == 1


# ------------------------------------------------------------ the grader


def _grade(name, **kw):
    return grading.grade(FIXTURES / name, **kw)


@pytest.mark.notebook
def test_grading_a_solution_gives_full_marks_and_leaves_the_file_alone(fixture_exercises):
    before = (FIXTURES / "adder.ipynb").read_bytes()
    report = _grade("adder.ipynb")
    assert (report.status, report.score, report.max_score) == ("graded", 6, 6)
    assert (FIXTURES / "adder.ipynb").read_bytes() == before


@pytest.mark.notebook
def test_a_partly_done_notebook_gets_partial_credit(fixture_exercises):
    report = _grade("partly_done.ipynb")
    assert report.status == "graded"
    assert report.score == 1
    assert {c["id"]: c["status"] for c in report.checks}["add_small_numbers"] == "failed"


@pytest.mark.notebook
def test_a_cell_that_raises_is_reported_and_later_cells_still_count(fixture_exercises):
    report = _grade("broken_cell.ipynb")
    assert report.status == "errors"
    assert "cell 2" in report.reason and "ValueError" in report.reason
    assert report.score == 6, "add and double were defined around the broken cell"


@pytest.mark.notebook
def test_a_hanging_notebook_times_out_with_the_cell_named(fixture_exercises):
    report = _grade("hangs.ipynb", timeout=5)
    assert report.status == "timeout"
    assert "cell 2" in report.reason and "5 s" in report.reason
    assert report.score == 0 and all(c["status"] == "not run" for c in report.checks)


def test_bad_paths_are_one_line_errors(fixture_exercises, tmp_path):
    with pytest.raises(GradingError, match="No such notebook"):
        grading.grade(tmp_path / "missing.ipynb")
    junk = tmp_path / "junk.ipynb"
    junk.write_text("not json")
    with pytest.raises(GradingError, match="not a readable notebook"):
        grading.grade(junk)
    with pytest.raises(GradingError, match="not a Kafka Lab exercise"):
        grading.grade(FIXTURES / "not_an_exercise.ipynb")


@pytest.mark.notebook
def test_labkit_grade_prints_a_table_and_writes_a_json_report(fixture_exercises, tmp_path):
    notebook = tmp_path / "partly_done.ipynb"
    shutil.copy(FIXTURES / "partly_done.ipynb", notebook)
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "labkit.cli", "grade", str(notebook), "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "score 1/6" in proc.stdout and "add_small_numbers" in proc.stdout
    report = json.loads(out.read_text())
    assert report["score"] == 1 and report["exercise"] == "adder"
    assert {c["id"] for c in report["checks"]} == {"add_small_numbers", "double_works", "add_negative_numbers"}


def test_labkit_grade_on_a_missing_file_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "labkit.cli", "grade", str(tmp_path / "nope.ipynb")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "No such notebook" in proc.stderr and "Traceback" not in proc.stderr
