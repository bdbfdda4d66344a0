"""How ``labkit lab``'s JupyterLab reads and writes files: the lab's own files never change (issue 26).

JupyterLab's server reads and saves every file through a contents manager; the lab runs with
this one (``--ServerApp.contents_manager_class``, :func:`labkit.app.lab.command`). It is Jupyter's
own file manager, with four differences:

* **The lessons and the start page that ship with the lab are never written.** A save of one
  (Ctrl+S, autosave, the slideshow button, which saves before it presents) goes to the learner's
  own copy in ``saved_dir`` (``.lab/lessons/`` for ``labkit lab``), and from then on that file is
  the one opened -- as long as it is a copy of the lesson as it ships: after an update of the
  lesson the new one opens, and the old copy is kept in ``saved_dir/replaced/`` at the next save.
  Deleting a lesson in the file browser deletes the learner's copy: the lesson opens as it ships.
* **The personal start page is written when it is opened**, so it always shows the learner's
  current record (predictions, lessons done, grades), not the one ``labkit lab`` saw when it started.
* **Opening a notebook is not a change.** JupyterLab writes the kernel's ``language_info`` into
  the notebook when the kernel connects, and marks the notebook modified when that differs from the
  stored one -- the Python version included. The notebook is served with what this environment's
  kernel will report.
* **The slideshow's style sheets exist.** jupyterlab-rise asks for ``rise.css`` and ``<notebook>.css``
  beside every notebook it presents (RISE's way to style a deck) and 404s without them; the lab
  answers a missing ``rise.css`` with its own (``rise.css`` beside this module) and a missing
  ``<notebook>.css`` with an empty sheet. A file of that name beside the notebooks still wins.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web
from traitlets import List, Unicode

HERE = Path(__file__).resolve().parent
#: Which record of the copies says what shipped file each was made from (sha-256 of its bytes).
INDEX = "copies.json"


@lru_cache(maxsize=None)
def kernel_language_info() -> dict[str, Any]:
    """What this environment's Python kernel reports as ``language_info`` (and JupyterLab stores on connect)."""
    from ..authoring import language_info

    return language_info()


class LabContents(AsyncLargeFileManager):
    """Jupyter's file manager, with the lab's shipped files kept as they ship (see the module doc)."""

    saved_dir = Unicode("", config=True, help="Where the learner's copies of the shipped files are saved.")
    shipped = List(Unicode(), ["[0-9][0-9]_*.ipynb", "README.md"], config=True,
                   help="Files at the root that ship with the lab (glob patterns): saved to saved_dir instead.")
    start_page = Unicode("START.md", config=True, help="The personal start page, written afresh when opened.")
    #: While set, a shipped file's path is its own, not its copy's (Jupyter's hidden-file check of the root).
    _as_shipped = False

    # ------------------------------------------------------------ the learner's copies of shipped files
    def _is_shipped(self, path: str) -> bool:
        path = path.strip("/")
        return "/" not in path and any(fnmatch.fnmatchcase(path, pattern) for pattern in self.shipped)

    def _copies(self) -> Path:
        if not self.saved_dir:
            raise web.HTTPError(500, "LabContents.saved_dir is not set: the lab's lessons would be overwritten.")
        return Path(self.saved_dir)

    def _index(self) -> dict[str, str]:
        try:
            return json.loads((self._copies() / INDEX).read_text())
        except (OSError, ValueError):
            return {}

    def _shipped_path(self, path: str) -> Path:
        return Path(super()._get_os_path(path))

    def _copy_of(self, path: str) -> Optional[Path]:
        """The learner's copy of shipped file ``path`` while it is a copy of that file as it ships, else None."""
        if not self.saved_dir:  # nowhere to save copies: the shipped files are read, and refused a save
            return None
        copy = self._copies() / path.strip("/")
        if not copy.exists():
            return None
        shipped = self._shipped_path(path)
        return copy if not shipped.exists() or self._index().get(copy.name) == _digest(shipped) else None

    def _get_os_path(self, path: str) -> str:
        if self._is_shipped(path) and not self._as_shipped:
            copy = self._copy_of(path)
            if copy is not None:
                return str(copy)
        return super()._get_os_path(path)

    def _base_model(self, path: str) -> dict[str, Any]:
        """Jupyter's model of the file, its size and times the learner's copy's: Jupyter checks that a file is
        not hidden by its place under the root, which the copy (outside it) has not."""
        copy = self._copy_of(path) if self._is_shipped(path) else None
        if copy is None:
            return super()._base_model(path)
        self._as_shipped = True
        try:
            model = super()._base_model(path)
        finally:
            self._as_shipped = False
        info = copy.stat()
        model.update(size=info.st_size, last_modified=_utc(info.st_mtime), writable=os.access(copy, os.W_OK))
        return model

    async def is_hidden(self, path: str) -> bool:
        if self._is_shipped(path):
            self._as_shipped = True
            try:
                return await super().is_hidden(path)
            finally:
                self._as_shipped = False
        return await super().is_hidden(path)

    def _make_copy(self, path: str) -> None:
        """Before a shipped file is written: the learner's copy of it (the old one, of an older lesson, kept aside)."""
        if self._copy_of(path) is not None:
            return
        copies, shipped = self._copies(), self._shipped_path(path)
        copy = copies / path.strip("/")
        if copy.exists():
            replaced = copies / "replaced"
            replaced.mkdir(parents=True, exist_ok=True)
            copy.replace(replaced / f"{copy.stem}.{time.strftime('%Y%m%d-%H%M%S')}{copy.suffix}")
            self.log.info("%s changed since the learner's copy was made: the old copy is in %s", path, replaced)
        copies.mkdir(parents=True, exist_ok=True)
        if shipped.exists():
            shutil.copy2(shipped, copy)
        index = self._index()
        index[copy.name] = _digest(shipped) if shipped.exists() else ""
        tmp = copies / f".{INDEX}.{os.getpid()}"
        tmp.write_text(json.dumps(index, indent=1, sort_keys=True))
        tmp.replace(copies / INDEX)

    async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
        if self._is_shipped(path):
            self._make_copy(path)
        return await super().save(model, path)

    async def restore_checkpoint(self, checkpoint_id: str, path: str) -> None:
        if self._is_shipped(path):
            self._make_copy(path)
        await super().restore_checkpoint(checkpoint_id, path)

    async def delete_file(self, path: str) -> None:
        if self._is_shipped(path):
            copy = self._copy_of(path)
            if copy is None:
                raise web.HTTPError(403, f"{path} ships with the lab and is kept as it is; there is no copy of "
                                         "yours to delete.")
            copy.unlink()
            self.log.info("deleted the learner's copy of %s: it opens as it ships", path)
            return
        await super().delete_file(path)

    async def rename_file(self, old_path: str, new_path: str) -> None:
        if self._is_shipped(old_path) or self._is_shipped(new_path):
            raise web.HTTPError(403, "The lab's lessons keep their names: copy one (File → Save As) to make "
                                     "your own notebook from it.")
        await super().rename_file(old_path, new_path)

    # ------------------------------------------------------------ reading
    async def get(self, path: str, content: bool = True, type: Optional[str] = None, format: Optional[str] = None,
                  require_hash: bool = False) -> dict[str, Any]:
        path = path.strip("/")
        if content and path == self.start_page and self.start_page:
            self._write_start_page()
        if path.endswith(".css") and not await self.file_exists(path):
            sheet = self._slide_sheet(path)
            if sheet is not None:
                return _file_model(path, sheet)
        model = await super().get(path, content=content, type=type, format=format, require_hash=require_hash)
        if content and model.get("type") == "notebook":
            _with_kernel_language(model["content"])
        return model

    def _write_start_page(self) -> None:
        from .startpage import write_personal_page

        try:
            write_personal_page(Path(self.root_dir))
        except OSError as exc:  # a read-only lab: the page as it was written last
            self.log.warning("could not refresh the start page: %s", exc)

    def _slide_sheet(self, path: str) -> Optional[str]:
        """A missing style sheet jupyterlab-rise asks for beside a notebook: the lab's ``rise.css``, an empty
        ``<notebook>.css``; None for any other missing file."""
        folder, _, name = path.rpartition("/")
        if name == "rise.css":
            return (HERE / "rise.css").read_text()
        notebook = f"{folder}/{name[:-4]}.ipynb" if folder else f"{name[:-4]}.ipynb"
        if Path(super()._get_os_path(notebook)).exists():
            return f"/* {name[:-4]}: no slide styles of its own (the lab's are in rise.css) */\n"
        return None

    def get_extra_handlers(self) -> list[tuple[Any, ...]]:
        """Style sheets under ``/files/`` through this manager (the rest straight from disk, as Jupyter does)."""
        from jupyter_server.files.handlers import FilesHandler

        # FilesHandler is a StaticFileHandler whose get() asks this manager; it still takes a root to initialize.
        return [(r"/files/(.+\.css)", FilesHandler, {"path": self.root_dir}), *super().get_extra_handlers()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _utc(timestamp: float) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(timestamp, timezone.utc)


def _file_model(path: str, text: str) -> dict[str, Any]:
    now = _utc(time.time())
    return {"name": path.rpartition("/")[2], "path": path, "type": "file", "format": "text", "mimetype": "text/css",
            "content": text, "size": len(text.encode()), "writable": False, "created": now, "last_modified": now,
            "hash": None, "hash_algorithm": None}


def _with_kernel_language(nb: Any) -> None:
    """The ``language_info`` this environment's kernel reports, in a notebook run by a Python kernel."""
    metadata = nb.setdefault("metadata", {})
    spec, info = metadata.get("kernelspec", {}), metadata.get("language_info", {})
    if spec.get("language", "python") == "python" and info.get("name", "python") == "python":
        metadata["language_info"] = dict(kernel_language_info())
