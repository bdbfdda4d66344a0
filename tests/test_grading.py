"""labkit.grading: learner copies, checks and their feedback, static rules, plain data across the kernel
boundary, the headless grader's outcomes, and a trainer's class workflow (gradebook, learner bundle)."""

from __future__ import annotations

import csv
import json
import shutil
import socket
import subprocess
import sys

import nbformat
import pytest

from conftest import GRADING_TIMEOUT, REPO, run_patiently
from labkit import grading
from labkit.grading import GradingError, Rules, check, classroom, rules, wire

FIXTURES = REPO / "tests" / "fixtures" / "grading"


@pytest.fixture
def fixture_exercises(monkeypatch, tmp_path):
    monkeypatch.setenv("LABKIT_EXERCISES", str(FIXTURES))
    monkeypatch.setenv("LABKIT_LEARNER_DIR", str(tmp_path / "learner"))
    return tmp_path / "learner"


# ------------------------------------------------------------ learner copies


def test_solution_regions_become_stubs_with_the_markers_indentation():
    source = "def f():\n    x = 1\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert grading.exercises._strip_solution(source, grading.CODE_STUB) == (
        "def f():\n    x = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")


def test_unclosed_solution_region_is_an_error():
    with pytest.raises(GradingError, match="END SOLUTION"):
        grading.exercises._strip_solution("### BEGIN SOLUTION\nx = 1\n", grading.CODE_STUB)


def test_learner_copy_strips_code_and_markdown_answers_and_clears_outputs(fixture_exercises):
    nb = grading.reference_notebook("adder")
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

    result = grading.exercise("adder", hidden=True).run({"add": broken, "double": lambda x: 2 * x}, hidden=True)
    failing = [r for r in result.results if r.status == "error"]
    assert failing and failing[0].message.startswith("KeyError")
    assert result.score == 1


def test_a_fault_of_the_graders_own_is_told_apart_from_the_learners_error():
    @check("drill", points=3)
    def drill(ns):
        raise grading.GraderFault("the drill's own checkpoint did not happen within 60 s")

    result = grading.run_check(drill.__labkit_check__, {})
    assert (result.status, result.earned) == ("grader fault", 0)
    assert result.message == "the drill's own checkpoint did not happen within 60 s"


def test_records_the_grader_writes_itself_and_no_broker_acknowledges_are_a_grader_fault():
    """A real producer with no broker behind its bootstrap address: nothing is acknowledged, and that is the
    grader's fault, not a check the learner failed."""
    from labkit.grading import harness
    from labkit.runtime.librdkafka import Producer, quiet

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **quiet()})  # what cluster.producer() makes
    producer.produce("t", value=b"x")
    unacknowledged = r"grader's own records were not all acknowledged within 1 s.* \(1 still waiting\)"
    with pytest.raises(grading.GraderFault, match=unacknowledged):
        harness.acknowledged(producer, seconds=1)


def test_checks_in_the_notebook_see_plain_data_as_the_grader_does(fixture_exercises):
    """A learner's function returning an object the grader cannot take is told so in the notebook already."""
    result = grading.exercise("adder").check({"add": lambda a, b: object(), "double": lambda x: 2 * x})
    by_id = {r.id: r for r in result.results}
    assert by_id["add_small_numbers"].status == "failed" and "not plain data" in by_id["add_small_numbers"].message


def test_while_graded_the_notebook_check_cells_stay_silent(fixture_exercises, monkeypatch):
    monkeypatch.setenv("LABKIT_GRADING", "1")
    assert "run by the grader" in repr(grading.exercise("adder").check({}))


def test_hidden_checks_only_on_the_trainers_side(fixture_exercises):
    assert [c.id for c in grading.exercise("adder").checks] == ["add_small_numbers", "double_works"]
    assert [c.id for c in grading.exercise("adder", hidden=True).checks][-1] == "add_negative_numbers"


# ------------------------------------------------------------ plain data and static rules


@pytest.mark.parametrize("value", [None, True, 3, -2**63, 2**70, 1.5, float("inf"), "tökyö", b"\x00\xff",
                                   [1, [2]], (1, (2, b"x")), {1, 2}, {"a": 1, (1, 2): [b"k"]}])
def test_plain_data_round_trips(value):
    encoded = json.loads(json.dumps(wire.encode(value)))
    assert wire.decode(encoded) == value and type(wire.decode(encoded)) is type(value)


@pytest.mark.parametrize("value", [object(), len, print, {1: object()}, [1, lambda: 0]])
def test_anything_else_is_refused(value):
    with pytest.raises(wire.NotPlainData):
        wire.encode(value)


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


SETUP = "import labkit\nfrom labkit.grading import exercise\nfrom labkit.partitioning import murmur2\nex = exercise('x')"
TEMPLATE = _nb(SETUP, "def f(k):\n    # YOUR CODE HERE\n    raise NotImplementedError()", "ex.check(globals())")
RULES = Rules(forbid=["labkit.partitioning"], allow=["murmur2"])


@pytest.mark.parametrize("solution,broken", [
    ("def f(k):\n    return murmur2(k) & 0x7fffffff", []),
    ("def f(k):\n    return labkit.partitioning.murmur2(k)", []),
    ("import labkit.partitioning as pt\ndef f(k):\n    return pt.murmur2(k)", []),
    ("from labkit.partitioning import java_partition\ndef f(k):\n    return java_partition(k, 6)", ["java_partition"]),
    ("import labkit.partitioning as pt\ndef f(k):\n    return pt.java_partition(k, 6)", ["java_partition"]),
    ("def f(k):\n    return labkit.partitioning.PARTITIONERS['murmur2_random'](k, 6)", ["PARTITIONERS"]),
    ("from labkit import partitioning as p\nq = p\ndef f(k):\n    return q.java_partition(k, 6)", ["`p`"]),
    ("from labkit.partitioning import *", ["labkit.partitioning.*"]),
    ("def f(k):\n    return getattr(labkit, 'partit' + 'ioning').java_partition(k, 6)", ["getattr"]),
    ("def f(k):\n    return __import__('labkit.partitioning').partitioning.java_partition(k, 6)", ["__import__"]),
    ("import importlib\nm = importlib.import_module('labkit.partitioning')", ["importlib"]),
    ("exec('def f(k): return 0')", ["exec"]),
    ("def f(k):\n    return eval('1')", ["eval"]),
    ("def f(k):\n    return harness._reference(k)", ["harness"]),
    ("def f(k):\n    return ex.checks[0].fn", ["ex.checks"]),
    ("f = ex.check.__globals__['_reference']", ["__globals__"]),
    ("import sys\nf = sys.modules['labkit.partitioning'].java_partition", ["modules"]),
    ("import labkit.grading.checks as g\ng.run_check = None", ["labkit.grading"]),
    ("%time x = 1\ndef f(k):\n    return 1", []),
])
def test_static_rules_see_through_aliases_and_dynamic_tricks(solution, broken):
    found = rules.check_notebook(_nb(SETUP, solution, "ex.check(globals())"), TEMPLATE, RULES)
    text = " | ".join(str(v) for v in found)
    if not broken:
        assert not found, text
    for word in broken:
        assert word in text, text


def test_only_cells_the_learner_wrote_are_judged():
    lab = _nb(SETUP, "from labkit.partitioning import java_partition  # the lab's own cell", "ex.check(globals())")
    template = _nb(*[c.source for c in lab.cells])
    assert rules.check_notebook(lab, template, RULES) == []
    assert rules.solution_cells(lab, template) == []
    added = _nb(SETUP, "x = 1", "ex.check(globals())")
    assert rules.solution_cells(added, template) == [1]


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
def test_a_trainer_can_run_only_some_checks(fixture_exercises):
    report = _grade("partly_done.ipynb", only=["add_small_numbers"])
    assert [c["id"] for c in report.checks] == ["add_small_numbers"] and (report.score, report.max_score) == (0, 2)
    with pytest.raises(grading.GradingError, match="no check 'nope'"):
        _grade("partly_done.ipynb", only=["nope"])


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


PATCHES = """
import labkit.grading, labkit.grading.checks as g
full = lambda c, ns: g.CheckResult(c.id, c.points, c.points, c.hidden, "passed")
g.run_check = labkit.grading.run_check = full
g.Exercise.run = lambda self, namespace, hidden: g.Results(self.id, [full(c, None) for c in self.checks])
def add(a, b):
    return 0
def double(x):
    return 0
"""


@pytest.mark.notebook
def test_nothing_a_cell_does_to_labkit_in_its_kernel_changes_the_score(fixture_exercises, tmp_path):
    """Even with the static rules off, patching labkit's grading in the kernel earns nothing: the verdicts are
    decided in the grader's process."""
    nb = _nb(PATCHES)
    nb.metadata["kafka_lab"] = {"exercise": "adder"}
    path = tmp_path / "adder.ipynb"
    nbformat.write(nb, str(path))
    report = grading.grade(path, rules=False)
    assert report.score == 0, report.table()
    with_rules = grading.grade(path)
    assert with_rules.score == 0 and any("labkit.grading" in v for v in with_rules.violations)


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
@pytest.mark.timeout(GRADING_TIMEOUT)  # above run_patiently's bound, which stretches on a busy machine
def test_labkit_grade_prints_a_table_and_writes_a_json_report(fixture_exercises, tmp_path):
    notebook = tmp_path / "partly_done.ipynb"
    shutil.copy(FIXTURES / "partly_done.ipynb", notebook)
    out = tmp_path / "report.json"
    proc = run_patiently([sys.executable, "-m", "labkit.app.cli", "grade", str(notebook), "--json", str(out)], 300,
                         capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "score 1/6" in proc.stdout and "add_small_numbers" in proc.stdout
    report = json.loads(out.read_text())
    assert report["score"] == 1 and report["exercise"] == "adder"
    assert {c["id"] for c in report["checks"]} == {"add_small_numbers", "double_works", "add_negative_numbers"}


def test_labkit_grade_on_a_missing_file_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "labkit.app.cli", "grade", str(tmp_path / "nope.ipynb")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "No such notebook" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------ a class


def _class(root):
    """Six learners: good, partial, cheating, broken, hanging, empty."""
    def put(learner, source=None, text=None):
        (root / learner).mkdir(parents=True)
        target = root / learner / "adder.ipynb"
        if text is not None:
            target.write_text(text)
        else:
            shutil.copy(FIXTURES / source, target)

    put("ada", "adder.ipynb")
    put("bob", "partly_done.ipynb")
    cheat = _nb("from labkit.grading import exercise\nimport labkit.grading.checks as g\n"
                "def add(a, b):\n    return a + b\ndef double(x):\n    return 2 * x")
    cheat.metadata["kafka_lab"] = {"exercise": "adder"}
    (root / "cy").mkdir()
    nbformat.write(cheat, str(root / "cy" / "adder.ipynb"))
    put("dee", "broken_cell.ipynb")
    put("eve", "hangs.ipynb")
    put("fay", text="")
    return {"ada": 6, "bob": 1, "cy": 0, "dee": 6, "eve": 0, "fay": 0}


@pytest.mark.notebook
@pytest.mark.timeout(GRADING_TIMEOUT)  # above the two run_patiently bounds, which stretch on a busy machine
def test_a_class_is_graded_into_a_gradebook_and_a_rerun_resumes(fixture_exercises, tmp_path):
    root = tmp_path / "class"
    expected = _class(root)
    proc = run_patiently([sys.executable, "-m", "labkit.app.cli", "grade", str(root), "--timeout", "8"], 600,
                         capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with open(root / "gradebook" / "gradebook.csv") as fh:
        rows = list(csv.DictReader(fh))
    scores = {}
    for row in rows:
        scores[row["learner"]] = scores.get(row["learner"], 0) + int(row["earned"])
    assert scores == expected
    status = {r["learner"]: r["submission status"] for r in rows}
    assert status["eve"] == "timeout" and status["fay"] == "failed to run" and status["dee"] == "errors"
    reason = {r["learner"]: r["submission reason"] for r in rows}
    assert "not a readable notebook" in reason["fay"] and "labkit.grading" in reason["cy"]
    assert len({(r["learner"], r["check"]) for r in rows}) == 6 * 3
    page = (root / "gradebook" / "gradebook.html").read_text()
    assert "Pass rate per check" in page and "ada" in page and "add_negative_numbers" in page
    assert (root / "gradebook" / "executed" / "ada" / "adder.ipynb").exists()
    again = run_patiently([sys.executable, "-m", "labkit.app.cli", "grade", str(root), "--timeout", "8"], 600,
                          capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.count("kept from the last run") == 6


def test_an_interrupted_class_run_keeps_what_it_graded(fixture_exercises, tmp_path, monkeypatch):
    root = tmp_path / "class"
    _class(root)
    graded = []

    def fake(sub, out, timeout):
        if len(graded) == 2:
            raise KeyboardInterrupt
        graded.append(sub.learner)
        return classroom._failed(sub, "graded", "fake")

    monkeypatch.setattr(classroom, "grade_one", fake)
    with pytest.raises(KeyboardInterrupt):
        classroom.grade_class(root, progress=False)
    kept = sorted(p.stem.split("__")[0] for p in (root / "gradebook" / "reports").glob("*.json"))
    assert kept == ["ada", "bob"]
    again = []
    monkeypatch.setattr(classroom, "grade_one", lambda sub, out, timeout: again.append(sub.learner)
                        or classroom._failed(sub, "graded", "fake"))
    classroom.grade_class(root, progress=False)
    assert again == ["cy", "dee", "eve", "fay"], "the second run grades only what the first did not"


def test_the_learner_bundle_has_no_solutions_and_no_hidden_checks(tmp_path):
    out = classroom.release(tmp_path / "bundle")
    assert (out / "labkit" / "__init__.py").exists() and (out / "Makefile").exists()
    assert sorted((out / "notebooks").glob("0*.ipynb")), "the lessons are in it"
    for ex_id in grading.all_exercise_ids():
        folder = out / "exercises" / ex_id
        assert sorted(p.name for p in folder.iterdir()) == ["checks.py", "template.ipynb"]
        assert grading.BEGIN not in (folder / "template.ipynb").read_text()
    assert not list(out.rglob("hidden_checks.py")) and not list(out.rglob("notebook.py"))
    assert not (out / "tests").exists()
    with pytest.raises(GradingError, match="already exists"):
        classroom.release(out)


def test_learner_copies_are_generated_from_a_bundle(tmp_path, monkeypatch):
    out = classroom.release(tmp_path / "bundle")
    monkeypatch.setenv("LABKIT_EXERCISES", str(out / "exercises"))
    monkeypatch.setenv("LABKIT_LEARNER_DIR", str(tmp_path / "copies"))
    made = grading.build_learner_copies()
    assert {a for _, _, a in made} == {"created"} and len(made) == len(grading.all_exercise_ids())
    with pytest.raises(GradingError, match="trainer"):
        grading.exercise(made[0][0], hidden=True)


@pytest.mark.notebook
def test_demo_cells_are_not_run_while_graded_unless_the_learner_changed_them(tmp_path):
    from nbformat.v4 import new_code_cell, new_notebook

    from labkit.grading.grader import demo_cells
    from labkit.grading.kernel import KernelSession

    demo = new_code_cell("raise RuntimeError('a long demo')", id="cell-001", metadata={"tags": ["demo"]})
    template = new_notebook(cells=[new_code_cell("x = 1", id="cell-000"), demo])
    assert demo_cells(template) == {"cell-001": demo.source}

    def run(cells):
        with KernelSession(new_notebook(cells=cells), cwd=tmp_path, env={}, timeout=60,
                           skip=demo_cells(template)) as kernel:
            return kernel.run_cells()

    assert run([new_code_cell("x = 1", id="cell-000"), nbformat.from_dict(dict(demo))]).first_error is None
    edited = new_code_cell("raise RuntimeError('mine now')", id="cell-001", metadata={"tags": ["demo"]})
    assert "mine now" in run([new_code_cell("x = 1", id="cell-000"), edited]).first_error


@pytest.mark.notebook
def test_a_learner_call_that_hangs_is_interrupted_and_the_kernel_answers_the_next(tmp_path):
    """A call past its deadline is interrupted in the kernel (as Jupyter's stop button does), not waited out to
    nbclient's backstop, and the learner's other functions still answer."""
    import time

    from nbformat.v4 import new_code_cell, new_notebook

    from labkit.grading.checks import LearnerError
    from labkit.grading import wire
    from labkit.grading.kernel import KernelSession, RemoteNamespace

    cells = [new_code_cell("import time\ndef hang():\n    time.sleep(3600)\ndef add(a, b):\n    return a + b")]
    with KernelSession(new_notebook(cells=cells), cwd=tmp_path, env={}, timeout=60) as kernel:
        assert kernel.run_cells().first_error is None
        ns = RemoteNamespace(kernel)
        started = time.monotonic()
        with pytest.raises(LearnerError, match="no answer within 2 s"):
            kernel.request({"op": "call", "name": "hang", "args": wire.encode([]), "kwargs": wire.encode({})},
                           timeout=2)
        assert time.monotonic() - started < 2 * 10 + 25, "interrupted by the deadline, not by the backstop"
        assert ns.add(2, 3) == 5
