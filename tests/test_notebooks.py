"""Every lesson notebook: built from its source, opens the house way, and runs top to bottom.

Each lesson runs once per test run: in a real browser (``test_browser.py``, the lessons in
``conftest.BROWSER_LESSONS``) or here, under papermill (the executed copy is kept in
``test-output/notebooks/`` for inspection); then the outputs of the cells marked
``# NBVAL_CHECK_OUTPUT`` in that run are compared with the ones stored in the
notebook by nbval's lax rules (``checked_outputs.py``: after
``tests/nbval_sanitize.cfg`` replaces ports, ids and timings). After each run no
broker JVM of that run may be left.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from checked_outputs import REFERENCE, differences, reference_outputs, sanitize_patterns
from conftest import BROWSER_LESSONS, REPO, assert_no_jvm_left, run_patiently
from labkit.app import startpage
from labkit.authoring import read_source
from labkit.runtime.processes import orphan_proof

NOTEBOOKS = REPO / "notebooks"
LESSON_SOURCES = REPO / "scripts" / "lessons"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def _ids(paths):
    return [p.stem for p in paths]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_every_lesson_has_a_source_and_every_source_a_lesson():
    sources = {p.stem for p in LESSON_SOURCES.glob("[0-9][0-9]_*.py")}
    assert sources == {p.stem for p in LESSONS}


@pytest.mark.parametrize("notebook", LESSONS, ids=_ids(LESSONS))
def test_lesson_is_generated_from_its_source(notebook):
    """The committed notebook's cells are exactly what its script builds (edit the script, not the notebook)."""
    fresh, committed = read_source(LESSON_SOURCES / (notebook.stem + ".py")), _read(notebook)
    assert [(c.cell_type, c.source) for c in fresh.cells] == [(c.cell_type, c.source) for c in committed.cells], (
        f"{notebook.name} is out of date: run `python scripts/build_notebooks.py {notebook.stem[:2]}`")


def test_start_page_is_up_to_date_and_lists_every_lesson_and_exercise():
    assert startpage.main(["--check"]) == 0, "run `python -m labkit.app.startpage`"
    text = startpage.START_PAGE.read_text()
    for lesson in LESSONS:
        assert f"]({lesson.name})" in text
        assert _read(lesson).metadata["kafka_lab"]["minutes"], f"{lesson.name} has no estimated time"
    for ex in startpage.exercises():
        assert f"](exercises/{ex['id']}.ipynb)" in text


def test_the_personal_start_page_shows_the_learners_progress(tmp_path, monkeypatch):
    from labkit.runtime import learner

    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    learner.record_prediction("02.a", "?", 1)
    learner.record_outcome("02.a", 1, True)
    learner.record_prediction("02.b", "?", 1)
    learner.record_outcome("02.b", 2, False)
    learner.record_lesson_done("02")
    learner.record_grade("murmur2", 9, 12)
    text = startpage.render(learner.load())
    row = next(line for line in text.splitlines() if "](02_" in line)
    assert row.endswith("✓ done, predictions 1/2 right |")
    assert next(line for line in text.splitlines() if "](exercises/murmur2.ipynb)" in line).endswith(" 9/12 |")
    assert next(line for line in text.splitlines() if "](00_" in line).endswith(" – |")


@pytest.mark.parametrize("notebook", LESSONS, ids=_ids(LESSONS))
def test_lesson_opens_and_closes_the_house_way(notebook):
    nb = _read(notebook)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "a lesson starts with its title"
    assert any(c.cell_type == "markdown" and c.source.startswith("## Setup") for c in nb.cells[:4])
    code = _code(nb)
    assert "labkit.setup_check(" in code[0], "the first code cell checks the set-up"
    assert any(("start_cluster(" in c or "start_clusters(" in c) for c in code[:3]), "the cluster starts in the first cells"
    assert any("cluster.stop()" in c for c in code[-2:]), "the last cells stop the cluster"
    assert all("slideshow" in c.metadata for c in nb.cells), "every cell carries slide metadata"
    checked = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith(CHECK_MARK)]
    assert checked, "at least one cell's output is checked by nbval"
    reference = reference_outputs(notebook.stem)
    assert sorted(reference) == checked and all(reference.values()), \
        "every checked cell has its reference output in tests/lesson_outputs (scripts/build_notebooks.py)"
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert not any(c.outputs or c.execution_count for c in code_cells), \
        "a lesson opens with no outputs and no execution counts: no answer before its question, no other run's results"


def _env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LABKIT_DATA_DIR"] = str(data_dir)
    env.pop("LABKIT_BOOTSTRAP", None)
    return env


HEADLESS = [p for p in LESSONS if p.stem not in BROWSER_LESSONS]  # the browser test runs the others
#: A headless lesson's bound, in a quiet machine's seconds (a lesson takes 1-4 minutes on a quiet machine): on a busy
#: one it lasts longer, up to pytest's backstop. papermill's own bound on one cell, in wall seconds, catches a hung
#: cell sooner; a lesson's longest cells take about a minute on a busy machine.
LESSON_SECONDS, CELL_SECONDS = 1200, 900


def _papermill(notebook: Path, out: Path, data_dir: str) -> None:
    """Run ``notebook`` under papermill into ``out``, within :data:`LESSON_SECONDS`."""
    # killed with this worker (its kernel follows: ipykernel exits when its parent goes), not left running
    proc = run_patiently(orphan_proof(
        [sys.executable, "-m", "labkit.runtime.kernels", str(notebook), str(out), "--cwd", str(NOTEBOOKS),
         "--execution-timeout", str(CELL_SECONDS)]), LESSON_SECONDS,
        env=_env(Path(data_dir)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 0, f"{notebook.name} failed under papermill:\n{proc.stderr[-3000:]}"


@pytest.mark.notebook
@pytest.mark.timeout(2700)  # a backstop past _papermill's bound, which stretches on a busy machine
@pytest.mark.parametrize("notebook", HEADLESS, ids=_ids(HEADLESS))
def test_lesson_runs_and_its_checked_outputs_match(notebook, output_dir):
    out_dir = output_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / notebook.name
    with tempfile.TemporaryDirectory(prefix="kafka-lab-nb-") as data_dir:
        _papermill(notebook, out, data_dir)
        assert_no_jvm_left(data_dir, "the notebook")
    executed = _read(out)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert all(c.execution_count for c in executed.cells if c.cell_type == "code"), "every cell ran"
    differ = differences(reference_outputs(notebook.stem), executed,
                         sanitize_patterns(REPO / "tests" / "nbval_sanitize.cfg"))
    assert not differ, f"checked outputs of {notebook.name} differ from the stored ones (executed copy: {out}):\n" \
        + "\n".join(differ)


def test_every_stored_reference_belongs_to_a_lesson():
    assert {p.stem for p in REFERENCE.glob("*.json")} == {p.stem for p in LESSONS}


def test_checked_output_comparison_follows_nbval_lax_rules():
    """The comparison the lesson runs use: equal after sanitizing, stderr ignored, any other change reported."""
    import copy

    lesson = _read(LESSONS[0])
    reference = reference_outputs(LESSONS[0].stem)
    patterns = sanitize_patterns(REPO / "tests" / "nbval_sanitize.cfg")
    ran = copy.deepcopy(lesson)
    for index, outputs in reference.items():
        ran.cells[index].outputs = [nbformat.from_dict(o) for o in outputs]
    assert differences(reference, ran, patterns) == []
    checked = min(reference)
    ran.cells[checked].outputs = [nbformat.v4.new_output("stream", name="stderr", text="%7|librdkafka noise\n"),
                                  *ran.cells[checked].outputs]
    assert differences(reference, ran, patterns) == [], "stderr is not compared"
    ref = {**reference, checked: [nbformat.v4.new_output("stream", name="stdout", text="up at 127.0.0.1:4242 in 3.2 s\n")]}
    ran.cells[checked].outputs = [nbformat.v4.new_output("stream", name="stdout", text="up at 127.0.0.1:5151 in 0.9 s\n")]
    assert differences(ref, ran, patterns) == [], "ports and durations are sanitized"
    ran.cells[checked].outputs = [nbformat.v4.new_output("stream", name="stdout", text="up at 127.0.0.1:5151 in 0.9 s, 2 lost\n")]
    found = differences(ref, ran, patterns)
    assert len(found) == 1 and f"cell {checked + 1}" in found[0] and "2 lost" in found[0]
    ran.cells[checked].source = "print('no longer checked')"
    assert any("rebuild the lesson" in line for line in differences(ref, ran, patterns))
