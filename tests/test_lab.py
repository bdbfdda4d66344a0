"""The lab's server side, without a browser (issue 26): how ``labkit lab`` starts JupyterLab, the contents
manager that keeps the shipped lessons as they ship, the lab's log, and the exercise's grade button.

The browser test (``test_browser.py``) drives the same pieces through JupyterLab; these say quickly what each
one does, edge cases included (a lesson updated under a learner's copy, a copy deleted, a missing style sheet).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import nbformat
import pytest
from tornado.web import HTTPError

from labkit.app import lab
from labkit.app.contents import LabContents, kernel_language_info
from labkit.authoring import Notebook, language_info


def _lesson(title: str) -> nbformat.NotebookNode:
    nb = Notebook(title, summary="a lesson", minutes=5)
    nb.md(f"# {title}")
    nb.code("print('hello')")
    return nb.nb


@pytest.fixture
def contents(tmp_path, monkeypatch) -> LabContents:
    root, saved = tmp_path / "notebooks", tmp_path / "lab" / "lessons"
    root.mkdir()
    nbformat.write(_lesson("00 · One"), str(root / "00_one.ipynb"))
    (root / "README.md").write_text("# Kafka Lab\n")
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path / "state"))
    return LabContents(root_dir=str(root), saved_dir=str(saved))


def _run(coroutine):
    return asyncio.run(coroutine)


def _save(contents: LabContents, path: str, nb) -> None:
    _run(contents.save({"type": "notebook", "format": "json", "content": nb}, path))


def test_a_saved_lesson_goes_to_the_learners_copy_and_opens_from_there(contents):
    root, saved = Path(contents.root_dir), Path(contents.saved_dir)
    shipped = (root / "00_one.ipynb").read_bytes()
    nb = _run(contents.get("00_one.ipynb"))["content"]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    _save(contents, "00_one.ipynb", nb)
    assert (root / "00_one.ipynb").read_bytes() == shipped, "the lesson as it ships was written"
    assert (saved / "00_one.ipynb").exists()
    again = _run(contents.get("00_one.ipynb"))
    assert again["content"].cells[1].outputs[0]["text"] == "hello\n", "the learner's copy opens"
    assert again["path"] == "00_one.ipynb" and again["last_modified"] == _run(
        contents.get("00_one.ipynb", content=False))["last_modified"]
    # README.md ships too; a notebook of the learner's own is saved where it is.
    _run(contents.save({"type": "file", "format": "text", "content": "# mine\n"}, "README.md"))
    assert (root / "README.md").read_text() == "# Kafka Lab\n" and (saved / "README.md").read_text() == "# mine\n"
    _save(contents, "scratch.ipynb", nbformat.v4.new_notebook())
    assert (root / "scratch.ipynb").exists() and not (saved / "scratch.ipynb").exists()


def test_an_updated_lesson_opens_as_it_ships_and_the_old_copy_is_kept(contents):
    root, saved = Path(contents.root_dir), Path(contents.saved_dir)
    _save(contents, "00_one.ipynb", _run(contents.get("00_one.ipynb"))["content"])
    nbformat.write(_lesson("00 · One, revised"), str(root / "00_one.ipynb"))  # a `git pull` with a rebuilt lesson
    assert _run(contents.get("00_one.ipynb"))["content"].metadata["title"] == "00 · One, revised"
    _save(contents, "00_one.ipynb", _run(contents.get("00_one.ipynb"))["content"])
    assert [p.name.split(".")[0] for p in (saved / "replaced").iterdir()] == ["00_one"]
    assert nbformat.read(saved / "00_one.ipynb", as_version=4).metadata["title"] == "00 · One, revised"


def test_deleting_a_lesson_deletes_the_copy_only_and_lessons_keep_their_names(contents):
    root = Path(contents.root_dir)
    _save(contents, "00_one.ipynb", _run(contents.get("00_one.ipynb"))["content"])
    _run(contents.delete_file("00_one.ipynb"))
    assert (root / "00_one.ipynb").exists() and not (Path(contents.saved_dir) / "00_one.ipynb").exists()
    with pytest.raises(HTTPError) as refused:
        _run(contents.delete_file("00_one.ipynb"))
    assert refused.value.status_code == 403
    with pytest.raises(HTTPError):
        _run(contents.rename_file("00_one.ipynb", "mine.ipynb"))
    assert (root / "00_one.ipynb").exists()


def test_without_a_place_for_copies_the_lessons_are_read_and_never_written(contents):
    root = Path(contents.root_dir)
    shipped = (root / "00_one.ipynb").read_bytes()
    contents.saved_dir = ""
    nb = _run(contents.get("00_one.ipynb"))["content"]
    with pytest.raises(HTTPError):
        _save(contents, "00_one.ipynb", nb)
    assert (root / "00_one.ipynb").read_bytes() == shipped


def test_restoring_a_checkpoint_writes_the_copy_too(contents):
    root = Path(contents.root_dir)
    shipped = (root / "00_one.ipynb").read_bytes()
    checkpoint = _run(contents.create_checkpoint("00_one.ipynb"))
    _run(contents.restore_checkpoint(checkpoint["id"], "00_one.ipynb"))
    assert (root / "00_one.ipynb").read_bytes() == shipped and (Path(contents.saved_dir) / "00_one.ipynb").exists()


def test_the_start_page_is_written_afresh_each_time_it_is_opened(contents):
    from labkit.runtime import learner

    root = Path(contents.root_dir)
    lab.prepare(root, root.parent / "lab" / "workspaces")
    assert "murmur2" not in _score_rows(_run(contents.get("START.md"))["content"])
    learner.record_grade("murmur2", 9, 12)
    assert _score_rows(_run(contents.get("START.md"))["content"]).get("murmur2") == "9/12"


def _score_rows(page: str) -> dict[str, str]:
    rows = {}
    for line in page.splitlines():
        if line.startswith("| [") and "](exercises/" in line:
            exercise = line.split("](exercises/")[1].split(".ipynb")[0]
            score = line.rstrip(" |").rsplit("|", 1)[1].strip()
            if score != "–":
                rows[exercise] = score
    return rows


def test_notebooks_open_with_the_kernels_language_info(contents):
    nb = _run(contents.get("00_one.ipynb"))["content"]
    assert nb.metadata["language_info"] == kernel_language_info() == language_info()
    assert language_info()["version"] == ".".join(map(str, sys.version_info[:3]))


def test_the_slideshows_style_sheets_are_there(contents):
    sheet = _run(contents.get("rise.css"))
    assert sheet["mimetype"] == "text/css" and ".jp-Notebook-footer" in sheet["content"]
    assert "no slide styles" in _run(contents.get("00_one.css"))["content"]
    with pytest.raises(HTTPError):
        _run(contents.get("nothing.css"))
    (Path(contents.root_dir) / "rise.css").write_text("/* the trainer's own */")
    assert _run(contents.get("rise.css"))["content"] == "/* the trainer's own */"


def test_labkit_lab_runs_jupyterlab_with_the_lab_s_pieces(tmp_path):
    cmd = lab.command(tmp_path / "notebooks", tmp_path / ".lab" / "workspaces", port=8899, open_browser=False)
    assert "--ServerApp.contents_manager_class=labkit.app.contents.LabContents" in cmd
    assert f"--LabContents.saved_dir={tmp_path / '.lab' / 'lessons'}" in cmd
    assert "--LabApp.expose_app_in_browser=True" in cmd
    shell = json.loads(next(a for a in cmd if a.startswith("--ServerApp.terminado_settings="))
                       .split("=", 1)[1])["shell_command"]
    assert Path(shell[2]).name == "terminal.bashrc" and Path(shell[2]).exists()
    env = lab.environment({"PATH": "/usr/bin:/bin"})
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent) == env["LABKIT_LAB_BIN"]


def test_the_lab_terminal_finds_labkit_after_a_login_shells_profile(tmp_path):
    """/etc/profile sets PATH afresh; the lab's terminal puts this environment's bin back in front."""
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("no bash here: the lab's terminals run the default shell with PATH from environment()")
    env = lab.environment({"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TERM": "dumb"})
    rc = Path(lab.__file__).with_name("terminal.bashrc")
    out = subprocess.run(["bash", "--rcfile", str(rc), "-i", "-c", "command -v labkit"], env=env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.stdout.strip() == str(Path(sys.executable).with_name("labkit")), out.stderr


def test_the_lab_log_takes_labkit_s_lines_once_per_process(tmp_path, monkeypatch):
    from labkit.runtime import lablog

    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    logger = logging.getLogger("labkit")
    before = list(logger.handlers), logger.level
    try:
        assert lablog.attach() == lablog.attach() == tmp_path / "lab.log"
        assert sum(isinstance(h, lablog.LabLogHandler) for h in logger.handlers) == 1
        logging.getLogger("labkit.librdkafka").info("FAIL [rdkafka#producer-1] SSL connection closed by peer")
        for handler in logger.handlers:
            handler.flush()
        assert "labkit.librdkafka INFO FAIL [rdkafka#producer-1]" in (tmp_path / "lab.log").read_text()
    finally:
        for handler in logger.handlers[:]:
            if handler not in before[0]:
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(before[1])


def test_the_grade_button_is_for_jupyterlab_only(monkeypatch, tmp_path):
    from labkit.errors import LabkitError
    from labkit.grading.selfgrade import GradeButton, notebook_path

    monkeypatch.setenv("LABKIT_GRADING", "1")  # the grader's kernel shows no button
    assert set(GradeButton("murmur2")._repr_mimebundle_()) == {"text/plain"}
    monkeypatch.delenv("LABKIT_GRADING")
    bundle = GradeButton("murmur2")._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "labkit grade murmur2" in bundle["text/plain"]
    notebook = tmp_path / "murmur2.ipynb"
    notebook.write_text("{}")
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    assert notebook_path("murmur2") == notebook
    monkeypatch.delenv("JPY_SESSION_NAME")
    with pytest.raises(LabkitError, match="labkit grade murmur2"):
        notebook_path("murmur2")


def test_every_exercise_ends_with_its_grade_button():
    from labkit.grading import all_exercise_ids, template
    from labkit.grading.grader import DEMO_TAG

    for ex_id in all_exercise_ids():
        last = template(ex_id).cells[-1]
        assert (last.source, last.metadata.get("tags")) == ("ex.grade()", [DEMO_TAG]), \
            f"{ex_id} does not end with nb.get_graded() (the grade button, a demo cell the grader skips)"
