"""The lab in a real browser: JupyterLab on loopback, driven by Playwright in headless Chromium.

The server is started the way ``labkit lab`` starts it (:mod:`labkit.app.lab`: its command line and
environment, its settings, its workspace, its contents manager, the learner's personal start page) on a
copy of the checkout's ``notebooks/`` that is a git repository of its own, with the checkout's
``.gitignore``: "the lessons are unchanged" is ``git status`` saying so. The test drives JupyterLab
through its own application object (``window.jupyterapp``, which ``labkit lab`` exposes) and waits on
what it reports -- a document ready, a kernel's info applied, a save done, a cell run -- never on the clock.

* The first screen: the rendered start page (lessons, exercises, the learner's progress), alone --
  no Markdown source, no Launcher tab, no "news" pop-up.
* The browser lessons (``conftest.BROWSER_LESSONS``): each opens with no output at all (nothing below
  its first prediction, no other run's results) and is not modified once its kernel is connected; runs
  with Run All Cells -- :data:`RERUN_LESSON` instead runs every cell twice in place, and the second run
  may not fail either; is saved, into the learner's copy (``git status`` clean); no cell errored or
  printed to stderr, the kernel's shutdown included; plotly figures and widgets rendered (predictions,
  the live view, the metrics panel); the checked outputs match the stored ones. For these lessons this
  is their one execution in ``make test`` (``test_notebooks.py`` runs the others).
* Presenting: a lesson presented with its slideshow button (which saves the notebook) and walked
  through to its last slide leaves ``git status`` clean, with autosave off; no slide shows "Click to
  add a cell."; the style sheets jupyterlab-rise asks for are there.
* Grading: an exercise solved but not saved is graded with its *Grade my notebook* button (which saves
  first: full marks) and from the lab's terminal with ``labkit grade <id>`` -- the same report; the start
  page, opened again, shows the score.

Screenshots land in ``test-output/browser/``. Chromium comes from Debian (``make setup-browser``
installs it); Playwright's Python package drives it through ``executable_path``, so nothing is
downloaded at test time.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import nbformat
import pytest

from checked_outputs import differences, reference_outputs, sanitize_patterns
from conftest import BROWSER_LESSONS, BROWSER_TIMEOUT, CHROMIUM, PANEL, REPO, assert_no_jvm_left, goto, patiently
from labkit.app import lab
from labkit.grading.exercises import reference_notebook, template
from labkit.runtime.processes import orphan_proof
from labkit.waiting import Wait

pytestmark = [pytest.mark.browser, pytest.mark.notebook]

LESSONS = [name for name in BROWSER_LESSONS if (REPO / "notebooks" / f"{name}.ipynb").exists()]
#: The browser lesson whose cells each run twice in place (every lesson cell is safe to run twice: issue 26).
RERUN_LESSON = "02_keys_and_murmur2"
#: The exercise graded from the browser: no cluster of its own, the quickest to grade.
EXERCISE = "murmur2"
#: JavaScript: the document open at ``path`` in JupyterLab's main area.
FIND = "(path => [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path))"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab_settings(settings_dir: Path) -> None:
    """The test's own user settings (the rest is the lab's): every cell in the DOM, so the test sees all of them;
    autosave off, so a save is one the test or the lab asked for; the terminal's screen as text in the DOM."""
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "docmanager-extension/plugin": {"autosave": False},
                           "terminal-extension/plugin": {"screenReaderMode": True}}.items():
        folder, name = plugin.split("/")
        (settings_dir / "@jupyterlab" / folder).mkdir(parents=True, exist_ok=True)
        (settings_dir / "@jupyterlab" / folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=lab", "-c", "user.email=lab@localhost", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """JupyterLab as ``labkit lab`` runs it, on a copy of the checkout's notebooks (a git repository of its own)."""
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make setup-browser` (Debian package `chromium`).")
    work = tmp_path_factory.mktemp("lab")
    checkout = work / "checkout"
    root = checkout / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "START.md",
                                                                           "exercises"))
    shutil.copy(REPO / ".gitignore", checkout / ".gitignore")
    (root / "exercises").mkdir()
    nbformat.write(template(EXERCISE), str(root / "exercises" / f"{EXERCISE}.ipynb"))  # the learner's copy
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-q", "-m", "the lab as it ships")
    _lab_settings(work / "settings")
    state, data_dir = checkout / ".lab", work / "clusters"
    data_dir.mkdir()
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(work / "settings"), LABKIT_DATA_DIR=str(data_dir),
               JUPYTER_CONFIG_DIR=str(work / "config"), LABKIT_STATE_DIR=str(work / "learner"),
               LABKIT_LEARNER_DIR=str(root / "exercises"))
    env.pop("LABKIT_BOOTSTRAP", None)
    # Not the test's PATH: the lab must give its terminals `labkit` even when started without the virtualenv on it.
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p) != Path(sys.executable).parent)
    saved_state = os.environ.get("LABKIT_STATE_DIR")
    os.environ["LABKIT_STATE_DIR"] = env["LABKIT_STATE_DIR"]  # the personal page reads this learner's record
    try:
        lab.prepare(root, state / "workspaces")
    finally:
        if saved_state is None:
            os.environ.pop("LABKIT_STATE_DIR", None)
        else:
            os.environ["LABKIT_STATE_DIR"] = saved_state
    log_path = work / "jupyterlab.log"
    log = log_path.open("w")
    server = subprocess.Popen(  # told to stop (TERM: it shuts its kernels down) if this worker dies
        orphan_proof(lab.command(root, state / "workspaces", port=port, open_browser=False,
                                 extra=(f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0")),
                     deathsig="TERM"),
        stdout=log, stderr=subprocess.STDOUT, env=lab.environment(env), cwd=root, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def alive() -> None:
        if server.poll() is not None:
            raise AssertionError(f"JupyterLab exited: {log_path.read_text()[-2000:]}")

    def answers() -> bool:
        with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
            return True

    try:
        Wait("JupyterLab to answer", timeout=120, interval=0.3, check=alive, stretch=True).until(answers)
    except BaseException:
        server.kill()
        raise
    yield {"base": base, "token": token, "root": root, "checkout": checkout, "saved": state / "lessons",
           "data_dir": data_dir, "log": log_path}
    server.terminate()
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


@pytest.fixture
def shots(output_dir) -> Path:
    folder = output_dir / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ------------------------------------------------------------------------------------------ driving JupyterLab
# Every wait on a page is one of conftest.patiently's, in a quiet machine's seconds.
def _page(browser, height: int):
    """A page of its own; what Playwright does without a bound of ours (a click, a fill) may take two minutes."""
    page = browser.new_page(viewport={"width": 1400, "height": height})
    page.set_default_timeout(120_000)
    return page


def _open(page, jl, path: str, workspace: str) -> None:
    """Open ``path`` in a workspace of its own (JupyterLab would reopen the previous documents too), until its
    document is loaded."""
    goto(page, f"{jl['base']}/lab/workspaces/{workspace}/tree/{path}?reset&token={jl['token']}")
    patiently(page.wait_for_function, 180,
              f"path => {{ const w = window.jupyterapp && {FIND}(path); return w && w.context.isReady; }}", arg=path)


def _kernel_connected(page, path: str) -> dict:
    """Wait until the notebook's kernel is connected and JupyterLab has written into the notebook what the kernel
    reports (``language_info``, the kernelspec: what marked every lesson modified on open). Then: is it modified?"""
    patiently(page.wait_for_function, 180, f"path => {{ const s = {FIND}(path).sessionContext; "
              "return (s.session && s.session.kernel) || document.querySelector('.jp-Dialog'); }", arg=path)
    if page.locator(".jp-Dialog .jp-mod-accept").count():  # JupyterLab asked which kernel: the notebook's own
        page.locator(".jp-Dialog .jp-mod-accept").first.click()
    return page.evaluate(f"""async path => {{
        const w = {FIND}(path);
        await w.sessionContext.ready;
        const kernel = w.sessionContext.session.kernel;
        const info = await kernel.info;  // JupyterLab's handler of this promise, registered first, has run
        await kernel.spec;
        await new Promise(resolve => setTimeout(resolve, 0));
        return {{dirty: w.context.model.dirty, stored: w.context.model.getMetadata('language_info'),
                 reported: info.language_info}};
    }}""", path)


def _cells(page, path: str) -> list[dict]:
    return page.evaluate(f"""path => {FIND}(path).content.widgets.map(cell => ({{
        type: cell.model.type, source: cell.model.sharedModel.getSource(),
        outputs: cell.model.type === 'code' ? cell.model.outputs.toJSON() : [],
        count: cell.model.type === 'code' ? cell.model.executionCount : null}}))""", path)


def _run_all(page, path: str, timeout: float) -> None:
    """Run > Run All Cells on ``path``, until JupyterLab says every cell ran (or one failed and stopped the run)."""
    page.evaluate(f"""path => {{
        const app = window.jupyterapp, w = {FIND}(path);
        app.shell.activateById(w.id);
        window.labkitRanAll = undefined;
        app.commands.execute('notebook:run-all-cells').then(ok => {{ window.labkitRanAll = String(ok); }},
                                                            e => {{ window.labkitRanAll = 'error: ' + e; }});
    }}""", path)
    patiently(page.wait_for_function, timeout, "() => window.labkitRanAll !== undefined", polling=1000)


def _last_run(cells: list[dict]) -> str:
    """The last cell that ran and what it showed last: why Run All stopped there."""
    ran = [(i, c) for i, c in enumerate(cells) if c["type"] == "code" and c["count"]]
    if not ran:
        return "no cell ran"
    index, cell = ran[-1]
    shown = []
    for o in cell["outputs"]:
        if o.get("output_type") == "error":
            shown.append(f"{o.get('ename')}: {o.get('evalue')}\n" + "\n".join(o.get("traceback", [])[-3:]))
        elif o.get("output_type") == "stream":
            shown.append(str(o.get("text", ""))[-500:])
        else:
            shown.append(str(o.get("data", {}).get("text/plain", ""))[-500:])
    return f"the last that ran, cell {index + 1}, shows:\n" + ("\n".join(shown)[-2500:] or "nothing")


def _run_each_cell_twice(page, path: str, timeout: float) -> dict[int, list]:
    """Every code cell run, then run again at once, in order (a learner re-running a cell), the two runs within
    ``timeout`` of a quiet machine's seconds. The first run's outputs, per cell index; a second run that raised
    fails the test here."""
    first: dict[int, list] = {}
    for index, cell in enumerate(_cells(page, path)):
        if cell["type"] != "code":
            continue
        page.evaluate(f"""([path, index]) => {{
            const app = window.jupyterapp, w = {FIND}(path), notebook = w.content, cell = notebook.widgets[index];
            app.shell.activateById(w.id);
            window.labkitRuns = undefined;
            (async () => {{
                const outputs = [];
                for (const run of [1, 2]) {{
                    notebook.deselectAll();
                    notebook.activeCellIndex = index;
                    await app.commands.execute('notebook:run-cell');
                    outputs.push(cell.model.outputs.toJSON());
                }}
                return outputs;
            }})().then(outputs => {{ window.labkitRuns = outputs; }}, e => {{ window.labkitRuns = 'error: ' + e; }});
        }}""", [path, index])
        patiently(page.wait_for_function, timeout, "() => window.labkitRuns !== undefined", polling=500)
        runs = page.evaluate("() => window.labkitRuns")
        assert isinstance(runs, list), f"cell {index + 1} could not be run: {runs}"
        errors = [f"{o['ename']}: {o['evalue']}"[:300] for o in runs[1] if o.get("output_type") == "error"]
        assert not errors, f"cell {index + 1} failed when run a second time: {errors[0]}\n{cell['source'][:300]}"
        first[index] = runs[0]
    return first


def _save(page, path: str) -> None:
    page.evaluate(f"async path => {{ await {FIND}(path).context.save(); }}", path)


def _read(jl, path: str):
    """The notebook at ``path`` as the lab serves it (the learner's copy of a lesson, once saved)."""
    url = f"{jl['base']}/api/contents/{path}?type=notebook&content=1&token={jl['token']}"
    with urllib.request.urlopen(url, timeout=60) as reply:
        return nbformat.from_dict(json.loads(reply.read())["content"])


def _assert_lessons_unchanged(jl) -> None:
    status = _git(jl["checkout"], "status", "--porcelain")
    assert status == "", f"the lab changed files it ships (git status):\n{status}"


# ------------------------------------------------------------------------------------------ the tests
@pytest.mark.timeout(BROWSER_TIMEOUT)
def test_the_first_screen_is_the_rendered_start_page(jupyterlab, browser, shots):
    """What `make lab` shows first: the start page rendered, with the learner's progress, and nothing else."""
    page = _page(browser, 900)
    try:
        goto(page, f"{jupyterlab['base']}/?token={jupyterlab['token']}")  # where `labkit lab` points the browser
        patiently(page.wait_for_selector, 120, ".jp-RenderedMarkdown h1")
        # Restored and settled: every plugin has started, and nothing is loading any more (a pop-up would be up).
        patiently(page.wait_for_function, 120, "() => window.jupyterapp && window.jupyterapp.restored")
        page.evaluate("async () => { await window.jupyterapp.restored; }")
        patiently(page.wait_for_load_state, 120, "networkidle")
        page.screenshot(path=str(shots / "first-screen.png"))
        assert page.locator(".jp-RenderedMarkdown h1").first.inner_text() == "Kafka Lab — start here"
        tabs = [t.strip() for t in page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").all_inner_texts()]
        assert tabs == ["START.md"], f"open tabs: {tabs}"
        assert page.locator(".jp-Launcher").count() == 0, "an empty Launcher tab is open"
        assert page.locator(".jp-FileEditor").count() == 0, "the start page opened as Markdown source"
        assert page.locator(".Toastify__toast").count() == 0, "a notification pops up"
        assert page.locator(".jp-Dialog").count() == 0, "a dialog pops up"
        text = page.locator(".jp-RenderedMarkdown").first.inner_text()
        lessons = sorted(p.stem for p in jupyterlab["root"].glob("[0-9][0-9]_*.ipynb"))
        links = page.locator(".jp-RenderedMarkdown table a").all_inner_texts()
        assert len([a for a in links if a[:2].isdigit()]) == len(lessons), "every lesson is listed"
        assert "your progress" in text and "your score" in text, "the learner's own progress is on the page"
    finally:
        page.close()


@pytest.mark.timeout(BROWSER_TIMEOUT)
@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_runs_and_renders_in_chromium(lesson, jupyterlab, browser, shots, output_dir):
    expects = BROWSER_LESSONS[lesson]
    path = f"{lesson}.ipynb"
    shipped = (jupyterlab["root"] / path).read_bytes()
    page = _page(browser, 1200)
    ok = False
    try:
        # Opened fresh: no output anywhere -- no answer below the first prediction, no other run's results.
        _open(page, jupyterlab, path, workspace=lesson)
        cells = _cells(page, path)
        first_ask = next((i for i, c in enumerate(cells) if "predict.ask(" in c["source"]), None)
        shown = [i + 1 for i, c in enumerate(cells) if c["outputs"] or c["count"]]
        assert not shown, (f"{path} opens with outputs or execution counts in cells {shown} (its first prediction "
                           f"is cell {None if first_ask is None else first_ask + 1})")
        assert page.locator(f"{PANEL} .jp-OutputArea-output").count() == 0
        # Opening is no change, the kernel connected.
        opened = _kernel_connected(page, path)
        assert opened["stored"] == opened["reported"], "the notebook is served with the kernel's language_info"
        assert not opened["dirty"] and page.locator(".lm-TabBar-tab.jp-mod-dirty").count() == 0, \
            f"{path} shows as modified the moment it opens"
        rise = page.locator(f'{PANEL} .jp-NotebookPanel-toolbar [data-command="RISE:preview"]')
        assert rise.count() == 1, "the slideshow (jupyterlab-rise) button is missing"

        first_runs = None
        if lesson == RERUN_LESSON:
            first_runs = _run_each_cell_twice(page, path, timeout=600)
        else:
            _run_all(page, path, timeout=900)
        ran = _cells(page, path)
        pending = [i + 1 for i, c in enumerate(ran) if c["type"] == "code" and not c["count"]]
        assert not pending, f"cells {pending} did not run; Run All said {page.evaluate('window.labkitRanAll')}; " \
            + _last_run(ran)
        _save(page, path)

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
        body = page.locator(PANEL).inner_text()
        assert "Error displaying widget" not in body
        assert "Traceback (most recent call last)" not in body
        # The kernel shut down: librdkafka's goodbyes go to the lab's log, not under the last cell.
        page.evaluate(f"async path => {{ await {FIND}(path).sessionContext.shutdown(); }}", path)
        stderr = page.locator(f"{PANEL} [data-mime-type='application/vnd.jupyter.stderr']")
        assert stderr.count() == 0, f"stderr under a cell: {stderr.first.inner_text()[:300]}"
        ok = True
    finally:
        if not ok:
            page.screenshot(path=str(shots / f"{lesson}-failed.png"), full_page=True)
        page.close()

    # Saved into the learner's copy: the lesson as it ships is untouched.
    assert (jupyterlab["root"] / path).read_bytes() == shipped, f"saving {path} overwrote the lesson"
    assert (jupyterlab["saved"] / path).exists(), "the save went nowhere"
    _assert_lessons_unchanged(jupyterlab)
    saved = _read(jupyterlab, path)
    errors = [(i, o.ename) for i, c in enumerate(saved.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, f"cells raised: {errors}"
    assert all(c.execution_count for c in saved.cells if c.cell_type == "code")
    (output_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    nbformat.write(saved, str(output_dir / "notebooks" / path))  # this run's executed copy
    if first_runs is not None:  # compared: what each cell showed the first time it ran
        for index, outputs in first_runs.items():
            saved.cells[index].outputs = [nbformat.from_dict(o) for o in outputs]
    differ = differences(reference_outputs(lesson), saved, sanitize_patterns(REPO / "tests" / "nbval_sanitize.cfg"))
    assert not differ, f"checked outputs of {path} differ from the stored ones:\n" + "\n".join(differ)
    assert_no_jvm_left(str(jupyterlab["data_dir"]), "the lesson")


@pytest.mark.timeout(BROWSER_TIMEOUT)
def test_presenting_a_lesson_changes_no_lesson(jupyterlab, browser, shots):
    """A trainer presents a lesson (this run's, with its outputs) through the slideshow button, which saves it
    first, autosave off: the save goes to their copy, every slide shows without "Click to add a cell.", the style
    sheets jupyterlab-rise asks for are served, and `git status` is clean."""
    lesson = LESSONS[0]
    path, copy = f"{lesson}.ipynb", jupyterlab["saved"] / f"{lesson}.ipynb"
    before = copy.stat().st_mtime_ns if copy.exists() else 0
    page = _page(browser, 900)
    ok = False
    try:
        _open(page, jupyterlab, path, workspace="presenting")
        _kernel_connected(page, path)
        page.locator(f'{PANEL} .jp-NotebookPanel-toolbar [data-command="RISE:preview"]').click()
        patiently(page.frame_locator("iframe[src*='/rise/']").locator(".reveal .slides section.present").first.wait_for,
                  180)
        slides = next(f for f in page.frames if "/rise/" in f.url)
        assert copy.exists() and copy.stat().st_mtime_ns > before, "the slideshow button did not save (into the copy)"
        loaded = ("() => performance.getEntriesByType('resource').filter(e => /\\/files\\/.*\\.css/.test(e.name))"
                  ".map(e => [e.name.split('/').pop(), e.responseStatus])")
        patiently(slides.wait_for_function, 60, f"() => ({loaded})().length >= 2")
        sheets = slides.evaluate(loaded)
        assert sorted(sheets) == sorted([["rise.css", 200], [f"{lesson}.css", 200]]), \
            f"the slideshow's style sheets: {sheets}"
        slides.locator(".reveal").focus()
        position = "() => [...document.querySelectorAll('.reveal .slides section')]" \
                   ".map((s, i) => s.classList.contains('present') ? i : -1).filter(i => i >= 0).join()"
        seen = []
        while True:
            seen.append(slides.evaluate(position))
            assert not slides.get_by_text("Click to add a cell.").is_visible(), f"slide {len(seen)} offers to add a cell"
            if len(seen) == 3:
                page.screenshot(path=str(shots / "slides.png"))
            if not slides.locator(".reveal .controls .navigate-right.enabled, "
                                  ".reveal .controls .navigate-down.enabled").count():
                break
            slides.locator(".reveal").press("Space")
            patiently(slides.wait_for_function, 30, f"before => ({position})() !== before", arg=seen[-1])
            assert len(seen) < 500, "the slideshow never ends"
        assert len(seen) > 5, f"only {len(seen)} slides"
        ok = True
    finally:
        if not ok:
            page.screenshot(path=str(shots / "slides-failed.png"), full_page=True)
        page.close()
    _assert_lessons_unchanged(jupyterlab)


def _report(text: str) -> list[str]:
    """The report ``labkit grade`` prints: its table and the score (the time it took left out)."""
    lines = [line.rstrip() for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("check "))
    end = next(i for i, line in enumerate(lines) if line.startswith("score "))
    return [*(line for line in lines[start:end] if line.strip()), lines[end].split("(")[0].rstrip()]


@pytest.mark.timeout(BROWSER_TIMEOUT)
def test_an_exercise_is_graded_from_its_button_and_from_the_terminal(jupyterlab, browser, shots):
    path = f"exercises/{EXERCISE}.ipynb"
    notebook = jupyterlab["root"] / path
    reference, learner = reference_notebook(EXERCISE), nbformat.read(notebook, as_version=4)
    answers = {i: ref.source for i, (ref, mine) in enumerate(zip(reference.cells, learner.cells))
               if ref.source != mine.source}
    assert answers, f"the learner copy of {EXERCISE} has nothing to solve"
    page = _page(browser, 1200)
    ok = False
    try:
        _open(page, jupyterlab, path, workspace="grading")
        assert not _kernel_connected(page, path)["dirty"], f"{path} shows as modified the moment it opens"
        # The learner's answers, typed and run but not saved: the button saves them before it grades.
        page.evaluate(f"""([path, answers]) => {{
            const cells = {FIND}(path).content.widgets;
            for (const [index, source] of Object.entries(answers)) cells[index].model.sharedModel.setSource(source);
        }}""", [path, {str(i): s for i, s in answers.items()}])
        _run_all(page, path, timeout=300)
        button = page.locator(f"{PANEL} .jp-OutputArea-output button", has_text="Grade my notebook")
        patiently(button.click, 60)
        Wait("the button to save the notebook", timeout=120, interval=0.2, stretch=True).until(
            lambda: all(nbformat.read(notebook, as_version=4).cells[i].source == s for i, s in answers.items()))

        # Meanwhile, the lab's own terminal: `labkit` is there, and grades by the exercise's name.
        page.evaluate("async () => { await window.jupyterapp.commands.execute('terminal:create-new'); }")
        screen = page.locator(".jp-Terminal .xterm-accessibility-tree").last
        patiently(screen.wait_for, 60)
        patiently(page.wait_for_function, 60, "() => { const s = [...document.querySelectorAll('.jp-Terminal "
                  ".xterm-accessibility-tree')].pop(); return s && /[$#] *$/m.test(s.innerText); }")  # the prompt
        page.locator(".jp-Terminal").last.click()
        page.keyboard.type(f"labkit grade {EXERCISE}\n")
        patiently(page.wait_for_function, 900, "() => { const t = [...document.querySelectorAll('.jp-Terminal "
                  ".xterm-accessibility-tree')].pop().innerText; return /^score \\d+\\/\\d+/m.test(t) || "
                  "/command not found|^labkit: /m.test(t); }", polling=1000)
        terminal = screen.inner_text()
        page.screenshot(path=str(shots / "graded-in-the-terminal.png"))
        assert "command not found" not in terminal, f"the lab's terminal has no labkit:\n{terminal[-1500:]}"

        page.evaluate(f"path => window.jupyterapp.shell.activateById({FIND}(path).id)", path)  # back to the notebook
        out = page.locator(f"{PANEL} .jp-OutputArea-output", has=page.locator("button", has_text="Grade my notebook"))
        patiently(page.wait_for_function, 900, "el => /^score \\d+\\/\\d+/m.test(el.innerText)",
                  arg=out.element_handle(), polling=1000)
        in_notebook = out.inner_text()
        out.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "graded-in-the-notebook.png"))
        assert _report(in_notebook) == _report(terminal), (f"the notebook's report:\n{in_notebook}\n"
                                                           f"the terminal's:\n{terminal[-2500:]}")
        score = _report(in_notebook)[-1]
        assert re.fullmatch(r"score (\d+)/\1", score), f"the saved answers scored {score}:\n{in_notebook}"

        # The start page, opened again, shows the grade.
        goto(page, f"{jupyterlab['base']}/lab/workspaces/start-again/tree/START.md?reset&token={jupyterlab['token']}")
        row = page.locator(".jp-RenderedMarkdown tr", has=page.locator(f"a[href*='exercises/{EXERCISE}.ipynb']"))
        patiently(row.first.wait_for, 120)
        assert row.first.locator("td").last.inner_text().strip() == score.split()[1], "the start page shows no grade"
        ok = True
    finally:
        if not ok:
            page.screenshot(path=str(shots / "grading-failed.png"), full_page=True)
        page.close()
    _assert_lessons_unchanged(jupyterlab)
