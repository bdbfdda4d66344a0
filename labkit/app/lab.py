"""``labkit lab``: JupyterLab opened on the learner's rendered start page, nothing else in the way.

Before JupyterLab starts:

* ``notebooks/START.md`` is written: the start page with the learner's own progress
  (:func:`labkit.app.startpage.write_personal_page`; the server writes it again whenever it is opened);
* this environment's JupyterLab gets its defaults (``<prefix>/share/jupyter/lab/settings/
  overrides.json``, which only this virtualenv's JupyterLab reads): Markdown opens
  rendered, no "get notified about Jupyter news?" pop-up, no update checks;
* a workspace named ``kafka-lab`` is saved with the start page as the only document, so
  the first screen is that page -- no empty Launcher tab beside it.

JupyterLab then runs (:func:`command`, :func:`environment`) with

* the lab's contents manager (:mod:`labkit.app.contents`): the lessons that ship with the lab are
  never written -- a save, the slideshow button's included, goes to the learner's own copy in
  ``.lab/lessons/``; the start page is fresh whenever it is opened; opening a notebook is no change;
* its terminals running the lab's Python environment (``terminal.bashrc``): ``labkit grade`` works there;
* the application reachable from the page (``window.jupyterapp``, JupyterLab's own
  ``expose_app_in_browser``): an exercise's grade cell saves its notebook before grading it
  (:mod:`labkit.grading.selfgrade`), and the browser test drives JupyterLab through it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional

WORKSPACE = "kafka-lab"
#: Settings every Kafka Lab JupyterLab starts with (a learner's own settings still win).
OVERRIDES: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Markdown Preview"}},
}


def overrides_path(prefix: Optional[str] = None) -> Path:
    return Path(prefix or sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def write_overrides(prefix: Optional[str] = None) -> Path:
    """Merge :data:`OVERRIDES` into this environment's JupyterLab ``overrides.json``."""
    path = overrides_path(prefix)
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    for plugin, values in OVERRIDES.items():
        current[plugin] = {**current.get(plugin, {}), **values}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2))
    return path


def workspace(page: str) -> dict[str, Any]:
    """A workspace whose only document is ``page`` (relative to the server's root), rendered."""
    widget = f"markdownviewer-widget:{page}"
    return {
        "data": {
            "layout-restorer:data": {
                "main": {"dock": {"type": "tab-area", "currentIndex": 0, "widgets": [widget]}, "current": widget},
                "left": {"collapsed": False, "visible": True, "current": "filebrowser",
                         "widgets": ["filebrowser", "running-sessions", "table-of-contents"]},
                "right": {"collapsed": True, "visible": True, "widgets": []},
            },
            widget: {"data": {"path": page, "factory": "Markdown Preview"}},
        },
        "metadata": {"id": WORKSPACE},
    }


def save_workspace(workspaces_dir: Path, page: str) -> None:
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    workspaces_dir.mkdir(parents=True, exist_ok=True)
    WorkspacesManager(str(workspaces_dir)).save(WORKSPACE, json.dumps(workspace(page)))


#: JupyterLab's application object as ``window.jupyterapp``: the grade button saves its notebook through it
#: (:mod:`labkit.grading.selfgrade`). Every lab a learner opens has it: ``labkit lab`` and a class's servers.
EXPOSE_APP = "--LabApp.expose_app_in_browser=True"


def command(notebooks: Path, workspaces_dir: Path, port: Optional[int] = None, open_browser: bool = True,
            extra: tuple[str, ...] = (), saved_dir: Optional[Path] = None) -> list[str]:
    """The JupyterLab command line for the lab (root: ``notebooks``; first screen: the start page).

    ``saved_dir``: where saves of the shipped lessons go (default: ``lessons/`` beside ``workspaces_dir``).
    """
    saved_dir = saved_dir or workspaces_dir.parent / "lessons"
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={notebooks}", "--ServerApp.ip=127.0.0.1",
           f"--LabApp.workspaces_dir={workspaces_dir}", f"--LabApp.default_url=/lab/workspaces/{WORKSPACE}",
           "--ServerApp.contents_manager_class=labkit.app.contents.LabContents",
           f"--LabContents.saved_dir={saved_dir}", EXPOSE_APP]
    bash = shutil.which("bash")
    if bash:  # without bash: the default shell, with the environment's bin first on PATH (environment())
        shell = [bash, "--rcfile", str(Path(__file__).with_name("terminal.bashrc")), "-i"]
        cmd.append("--ServerApp.terminado_settings=" + json.dumps({"shell_command": shell}))
    cmd.extend(extra)
    if os.geteuid() == 0:  # a container or a VM: JupyterLab refuses root without this
        cmd.append("--allow-root")
    if not open_browser:
        cmd.append("--no-browser")
    if port:
        cmd.append(f"--ServerApp.port={port}")
    return cmd


def environment(base: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The environment JupyterLab runs in (from ``notebooks/``, where its terminals then open): this Python
    environment's ``bin`` first on PATH (kernels and terminals find ``labkit`` even when ``make lab`` ran it
    without activating the virtualenv)."""
    env = dict(os.environ if base is None else base)
    bin_dir = str(Path(sys.executable).parent)
    env["LABKIT_LAB_BIN"] = bin_dir
    if env.get("PATH", "").split(os.pathsep)[0] != bin_dir:
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")]) if env.get("PATH") else bin_dir
    return env


def prepare(notebooks: Path, workspaces_dir: Path) -> Path:
    """Everything :func:`command` expects: the personal start page, the settings, the workspace."""
    from .startpage import write_personal_page

    page = write_personal_page(notebooks)
    write_overrides()
    save_workspace(workspaces_dir, page.relative_to(notebooks).as_posix())
    return page
