"""The lab in a real browser: JupyterLab on loopback, driven by Playwright in headless Chromium.

The server is started the way ``labkit lab`` starts it (:mod:`labkit.app.lab`: its settings,
its workspace, the learner's personal start page), on a copy of ``notebooks/``.

* The first screen: the rendered start page (lessons, exercises, the learner's progress),
  alone — no Markdown source, no Launcher tab, no "news" pop-up.
* The browser lessons (``conftest.BROWSER_LESSONS``): each is opened, run with Run All
  Cells, saved; no cell errored or printed to stderr, plotly figures and widgets actually
  rendered (predictions, the live view, the metrics panel), and the saved notebook's
  checked outputs match the stored ones. For these lessons this run in the browser is
  their one execution in ``make test`` (``test_notebooks.py`` runs the others).

Screenshots land in ``test-output/browser/``.

Chromium comes from Debian (``make setup-browser`` installs it); Playwright's
Python package drives it through ``executable_path``, so nothing is downloaded
at test time.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from checked_outputs import differences, reference_outputs, sanitize_patterns
from conftest import BROWSER_LESSONS, REPO, java_pids_of
from labkit.app import lab

pytestmark = [pytest.mark.browser, pytest.mark.notebook]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
LESSONS = [name for name in BROWSER_LESSONS if (REPO / "notebooks" / f"{name}.ipynb").exists()]
#: The notebook on screen (JupyterLab keeps other documents in the DOM, hidden).
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_settings(settings_dir: Path) -> None:
    """The test's own user setting: every cell in the DOM, so the test can see all of them (the rest is the lab's)."""
    tracker = settings_dir / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))


def _save(page, notebook: Path, timeout: float = 60.0) -> None:
    """Save, until the file on disk has every code cell's execution count (a loaded machine saves late)."""
    deadline = time.monotonic() + timeout
    while True:
        page.keyboard.press("Control+s")
        time.sleep(1)
        try:
            saved = nbformat.read(notebook, as_version=4)
            if all(c.execution_count for c in saved.cells if c.cell_type == "code"):
                return
        except Exception:  # noqa: BLE001 - caught mid-write: read again
            pass
        if time.monotonic() > deadline:
            return  # the test's own assertions say what is missing


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server on a copy of notebooks/ (the repository's notebooks are never written)."""
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make setup-browser` (Debian package `chromium`).")
    work = tmp_path_factory.mktemp("lab")
    root = work / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "START.md"))
    _lab_settings(work / "settings")
    data_dir = work / "clusters"
    data_dir.mkdir()
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(work / "settings"), LABKIT_DATA_DIR=str(data_dir),
               JUPYTER_CONFIG_DIR=str(work / "config"), LABKIT_STATE_DIR=str(work / "learner"))
    env.pop("LABKIT_BOOTSTRAP", None)
    saved_state = os.environ.get("LABKIT_STATE_DIR")
    os.environ["LABKIT_STATE_DIR"] = env["LABKIT_STATE_DIR"]  # the personal page reads this learner's record
    try:
        lab.prepare(root, work / "workspaces")
    finally:
        if saved_state is None:
            os.environ.pop("LABKIT_STATE_DIR", None)
        else:
            os.environ["LABKIT_STATE_DIR"] = saved_state
    log = (work / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        lab.command(root, work / "workspaces", port=port, open_browser=False,
                    extra=(f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0")),
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start: {(work / 'jupyterlab.log').read_text()[-2000:]}")
            time.sleep(0.3)
    yield {"base": base, "token": token, "root": root, "data_dir": data_dir}
    server.terminate()
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _prompts(page) -> list[str]:
    return [p.strip() for p in page.locator(f"{PANEL} .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()]


def _accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start; the notebook's own (Python 3) is preselected."""
    try:
        page.wait_for_selector(".jp-Dialog .jp-mod-accept", timeout=5_000)
    except Exception:  # noqa: BLE001 - no dialog came: nothing to dismiss
        return
    page.locator(".jp-Dialog .jp-mod-accept").first.click()


def _run_all(page) -> None:
    """Run > Run All Cells, retried until the kernel visibly starts (the menu can be ready before the kernel)."""
    for _ in range(5):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "[*]:" in _prompts(page):
                return
            time.sleep(0.25)
    raise AssertionError("Run All Cells did not start the kernel")


def _wait_all_cells_ran(page, notebook: Path, timeout: float, stall: float = 180) -> None:
    """Until every code cell shows an execution number and none is queued or running."""
    code_cells = sum(1 for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")
    deadline = time.monotonic() + timeout
    last, last_change = None, time.monotonic()
    while time.monotonic() < deadline:
        prompts = _prompts(page)
        if len(prompts) == code_cells and all(p.strip("[]:").isdigit() for p in prompts):
            return
        if prompts != last:
            last, last_change = prompts, time.monotonic()
        elif time.monotonic() - last_change > stall:
            break
        time.sleep(1)
    raise AssertionError(f"not every cell ran (prompts {last})")


def test_the_first_screen_is_the_rendered_start_page(jupyterlab, browser, output_dir):
    """What `make lab` shows first: the start page rendered, with the learner's progress, and nothing else."""
    shots = output_dir / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{jupyterlab['base']}/?token={jupyterlab['token']}")  # where `labkit lab` points the browser
        page.wait_for_selector(".jp-RenderedMarkdown h1", timeout=60_000)
        time.sleep(2)  # anything that would pop up, pops up now
        page.screenshot(path=str(shots / "first-screen.png"))
        assert page.locator(".jp-RenderedMarkdown h1").first.inner_text() == "Kafka Lab — start here"
        tabs = [t.strip() for t in page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").all_inner_texts()]
        assert tabs == ["START.md"], f"open tabs: {tabs}"
        assert page.locator(".jp-Launcher").count() == 0, "an empty Launcher tab is open"
        assert page.locator(".jp-FileEditor").count() == 0, "the start page opened as Markdown source"
        assert page.locator(".Toastify__toast").count() == 0, "a notification pops up"
        text = page.locator(".jp-RenderedMarkdown").first.inner_text()
        lessons = sorted(p.stem for p in jupyterlab["root"].glob("[0-9][0-9]_*.ipynb"))
        links = page.locator(".jp-RenderedMarkdown table a").all_inner_texts()
        assert len([a for a in links if a[:2].isdigit()]) == len(lessons), "every lesson is listed"
        assert "your progress" in text and "your score" in text, "the learner's own progress is on the page"
    finally:
        page.close()


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_runs_and_renders_in_chromium(lesson, jupyterlab, browser, output_dir):
    expects = BROWSER_LESSONS[lesson]
    notebook = jupyterlab["root"] / f"{lesson}.ipynb"
    shots = output_dir / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    ok = False
    try:
        # A workspace of its own per lesson: JupyterLab would otherwise reopen the previous lesson too.
        page.goto(f"{jupyterlab['base']}/lab/workspaces/{lesson}/tree/{notebook.name}"
                  f"?reset&token={jupyterlab['token']}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
        _accept_kernel_dialog(page)
        page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        rise = page.locator(f'{PANEL} .jp-NotebookPanel-toolbar [data-command="RISE:preview"]')
        assert rise.count() == 1, "the slideshow (jupyterlab-rise) button is missing"
        _run_all(page)
        _wait_all_cells_ran(page, notebook, timeout=600)
        _save(page, notebook)

        # Rendered: plotly figures drew an SVG, widgets mounted, nothing said it could not render.
        plots = page.locator(f"{PANEL} .js-plotly-plot .main-svg")
        widgets = page.locator(f"{PANEL} .jp-OutputArea-output .widget-box, {PANEL} .jp-OutputArea-output .jupyter-widgets")
        assert plots.count() > 0, "no plotly figure rendered"
        plots.last.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / f"{lesson}.png"))
        if expects:
            assert widgets.count() > 0, "no widget rendered"
            widgets.first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{lesson}-widget.png"))
        for text in expects:  # what must be on screen: a prediction's widget, the metrics panel, ...
            found = page.locator(f"{PANEL} .jp-OutputArea-output", has_text=text)
            assert found.count() > 0, f"nothing rendered says {text!r}"
            found.first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{lesson}-{text.split()[0].strip(':').lower()}.png"))
        # Nothing a JVM or a library printed to stderr: the red blocks learners take for errors.
        stderr = page.locator(f"{PANEL} [data-mime-type='application/vnd.jupyter.stderr']")
        assert stderr.count() == 0, f"stderr under a cell: {stderr.first.inner_text()[:300]}"
        body = page.locator(PANEL).inner_text()
        assert "Error displaying widget" not in body
        assert "Traceback (most recent call last)" not in body
        ok = True
    finally:
        if not ok:
            page.screenshot(path=str(shots / f"{lesson}-failed.png"), full_page=True)
        page.close()

    saved = nbformat.read(notebook, as_version=4)
    errors = [(i, o.ename) for i, c in enumerate(saved.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, f"cells raised: {errors}"
    assert all(c.execution_count for c in saved.cells if c.cell_type == "code")
    (output_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    nbformat.write(saved, str(output_dir / "notebooks" / notebook.name))  # this run's executed copy
    differ = differences(reference_outputs(notebook.stem), saved,
                         sanitize_patterns(REPO / "tests" / "nbval_sanitize.cfg"))
    assert not differ, f"checked outputs of {notebook.name} differ from the stored ones:\n" + "\n".join(differ)
    deadline = time.monotonic() + 15
    while java_pids_of(str(jupyterlab["data_dir"])) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not java_pids_of(str(jupyterlab["data_dir"])), "the lesson's cluster outlived its last cell"
