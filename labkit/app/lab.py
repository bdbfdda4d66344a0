"""``labkit lab``: JupyterLab opened on the learner's rendered start page, nothing else in the way.

Before JupyterLab starts:

* ``notebooks/START.md`` is written: the start page with the learner's own progress
  (:func:`labkit.app.startpage.write_personal_page`);
* this environment's JupyterLab gets its defaults (``<prefix>/share/jupyter/lab/settings/
  overrides.json``, which only this virtualenv's JupyterLab reads): Markdown opens
  rendered, no "get notified about Jupyter news?" pop-up, no update checks;
* a workspace named ``kafka-lab`` is saved with the start page as the only document, so
  the first screen is that page -- no empty Launcher tab beside it.
"""

from __future__ import annotations

import json
import os
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


def command(notebooks: Path, workspaces_dir: Path, port: Optional[int] = None, open_browser: bool = True,
            extra: tuple[str, ...] = ()) -> list[str]:
    """The JupyterLab command line for the lab (root: ``notebooks``; first screen: the start page)."""
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={notebooks}", "--ServerApp.ip=127.0.0.1",
           f"--LabApp.workspaces_dir={workspaces_dir}", f"--LabApp.default_url=/lab/workspaces/{WORKSPACE}", *extra]
    if os.geteuid() == 0:  # a container or a VM: JupyterLab refuses root without this
        cmd.append("--allow-root")
    if not open_browser:
        cmd.append("--no-browser")
    if port:
        cmd.append(f"--ServerApp.port={port}")
    return cmd


def prepare(notebooks: Path, workspaces_dir: Path) -> Path:
    """Everything :func:`command` expects: the personal start page, the settings, the workspace."""
    from .startpage import write_personal_page

    page = write_personal_page(notebooks)
    write_overrides()
    save_workspace(workspaces_dir, page.relative_to(notebooks).as_posix())
    return page
