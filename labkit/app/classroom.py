"""``labkit classroom``: one server, a room of learners, each in a JupyterLab of their own (issue 31).

A trainer runs ``make classroom`` (as root) and hands out the hub's address. What it does:

1. ``labkit classroom bundle`` (the trainer's checkout): the learner bundle (``labkit release``: the lab,
   the lessons, the learner copies and visible checks -- no reference solutions, no hidden checks, no git
   history) into ``[paths].root/bundle``, readable by every learner;
2. the Makefile installs a Python environment learners can run from that bundle, with JupyterHub, the
   idle culler and the first-use authenticator (the ``classroom`` extra), and configurable-http-proxy;
3. ``labkit classroom setup`` (that environment, as root): the Kafka jars and class-data archives in a
   shared read-only cache, JupyterLab's lab settings, the learners' group, and a check that a user
   with no rights can run all of it;
4. ``labkit classroom serve``: JupyterHub with :mod:`labkit.app.hub`'s configuration.

A learner logs in (their first password becomes theirs), gets a system user of the class group and a
JupyterLab started by ``labkit classroom singleuser`` as that user: the lessons copied into
``~/kafka-lab`` (never overwritten once there), their learner copies of the exercises, their record
and their clusters under their own 0700 home. The trainer's view of the class is :func:`class_view`
in the trainer's notebook (``CLASS.ipynb`` in their home); ``labkit classroom grade`` grades every
learner's edited exercises into the gradebook (:mod:`labkit.grading.classroom`).
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import ClassroomError
from ..runtime.environment import environments_dir, load_toml

CONFIG_ENV = "LABKIT_CLASSROOM_CONFIG"
#: Where a learner's lab lives in their home, and labkit's state for them (record, clusters, workspaces).
LAB_DIR, STATE_DIR = "kafka-lab", ".kafka-lab"


@dataclass(frozen=True)
class Config:
    """``environments/classroom/classroom.toml`` (or the file ``LABKIT_CLASSROOM_CONFIG`` names)."""

    path: Path
    trainers: tuple[str, ...] = ("trainer",)
    group: str = "kafka-lab"
    min_password_length: int = 7
    ip: str = "0.0.0.0"
    port: int = 8000
    root: Path = Path("/srv/kafka-lab")
    state: Path = Path("/srv/kafka-lab/hub")
    idle_minutes: int = 60
    memory_mb: int = 3000
    poll: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def bundle(self) -> Path:
        return self.root / "bundle"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def proxy(self) -> Path:
        return self.root / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"

    @property
    def learner_config(self) -> Path:
        """The copy learners' notebooks read their limits from (no secrets in it)."""
        return self.root / "classroom.toml"


def load_config(path: Optional[Path] = None) -> Config:
    path = Path(path or os.environ.get(CONFIG_ENV) or environments_dir() / "classroom" / "classroom.toml")
    if not path.is_file():
        raise ClassroomError(f"No classroom configuration at {path}.",
                             "Copy environments/classroom/classroom.toml and set LABKIT_CLASSROOM_CONFIG to it.")
    data = load_toml(path)
    cls, hub, paths = data.get("class", {}), data.get("hub", {}), data.get("paths", {})
    learner, poll = data.get("learner", {}), data.get("poll", {})
    root = Path(paths.get("root", "/srv/kafka-lab"))
    return Config(path=path.resolve(), trainers=tuple(cls.get("trainers", ["trainer"])),
                  group=str(cls.get("group", "kafka-lab")), min_password_length=int(cls.get("min_password_length", 7)),
                  ip=str(hub.get("ip", "0.0.0.0")), port=int(hub.get("port", 8000)), root=root,
                  state=Path(paths.get("state", root / "hub")), idle_minutes=int(learner.get("idle_minutes", 60)),
                  memory_mb=int(learner.get("memory_mb", 3000)), poll=bool(poll.get("enabled", True)),
                  extra={k: v for k, v in data.items() if k not in ("class", "hub", "paths", "learner", "poll")})


# ---------------------------------------------------------------------------------------------- the trainer's side
def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ClassroomError(f"{what} needs root: it creates a system user per learner and serves their files.",
                             "Run it as root (sudo make classroom).")


def _tree_digest(repo: Path) -> str:
    """What the bundle is made of, as one digest (file names, sizes and times): rebuilt only when it changed."""
    h = hashlib.sha1()
    for part in ("labkit", "environments", "notebooks", "exercises", "pyproject.toml", "Makefile", "README.md"):
        base = repo / part
        for p in sorted([base] if base.is_file() else base.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts:
                st = p.stat()
                h.update(f"{p.relative_to(repo)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def make_bundle(cfg: Config, repo: Optional[Path] = None) -> str:
    """``[paths].root/bundle``: the learner bundle from the trainer's checkout (rebuilt when the checkout changed)."""
    from ..grading.classroom import release

    _need_root("labkit classroom bundle")
    repo = repo or Path(__file__).resolve().parents[2]
    digest = _tree_digest(repo)
    stamp = cfg.bundle / ".kafka-lab-bundle"
    if stamp.is_file() and stamp.read_text() == digest:
        return f"up to date ({cfg.bundle})"
    cfg.root.mkdir(parents=True, exist_ok=True)
    os.chmod(cfg.root, 0o755)
    fresh, old = cfg.root / "bundle.new", cfg.root / "bundle.old"
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    release(fresh, repo=repo)
    (fresh / ".kafka-lab-bundle").write_text(digest)
    if cfg.bundle.exists():
        cfg.bundle.rename(old)
    fresh.rename(cfg.bundle)
    shutil.rmtree(old, ignore_errors=True)
    subprocess.run(["chmod", "-R", "a+rX", str(cfg.bundle)], check=True)
    return f"written ({cfg.bundle})"


def _copy_tree(src: Path, dest: Path) -> None:
    """Hard links where the file system allows (the jars are read-only), copies elsewhere."""
    for path in src.rglob("*"):
        relative = path.relative_to(src)
        target = dest / relative
        if relative.parts[0] in ("state", "run") or path.is_dir() or target.exists() or path.is_symlink() \
                or path.name.endswith((".lock", ".jsa")):  # the trainer's record and cluster; archives are per path
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def as_nobody(*command: str) -> subprocess.CompletedProcess:
    """Run ``command`` as a user with no rights at all: what a learner can reach, they can reach."""
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})


def setup(cfg: Config, user_cache: Optional[Path] = None) -> list[tuple[str, str]]:
    """What ``make classroom`` runs in the class environment, as root (see the module doc). Returns what it did."""
    from ..runtime.cache import cache_dir
    from .lab import write_overrides
    from .setup import run_setup

    _need_root("labkit classroom setup")
    done = []
    if Path(sys.prefix).resolve() != cfg.venv.resolve():
        raise ClassroomError(f"labkit classroom setup runs in the class environment ({cfg.venv}), not {sys.prefix}.",
                             "Run it through make classroom.")
    try:
        grp.getgrnam(cfg.group)
    except KeyError:
        subprocess.run(["groupadd", "--system", cfg.group], check=True)
        done.append(("learners' group", f"{cfg.group} created"))
    cfg.cache.mkdir(parents=True, exist_ok=True)
    user_cache = user_cache or cache_dir()
    if user_cache.is_dir() and user_cache.resolve() != cfg.cache.resolve():
        _copy_tree(user_cache, cfg.cache)  # nothing fetched twice: the trainer's jars, the registry's build
        done.append(("shared cache", f"from {user_cache}"))
    os.environ["LABKIT_CACHE_DIR"] = str(cfg.cache)
    os.environ["LABKIT_STATE_DIR"] = str(cfg.state / "setup")  # root's own record, never the learners'
    for name, result in run_setup():
        done.append((name, result))
    done.append(("JupyterLab settings", str(write_overrides(str(cfg.venv)))))
    shutil.copy2(cfg.path, cfg.learner_config)
    cfg.state.mkdir(parents=True, exist_ok=True)
    os.chmod(cfg.state, 0o700)
    subprocess.run(["chmod", "-R", "a+rX", str(cfg.cache), str(cfg.learner_config), str(cfg.proxy.parents[2])],
                   check=True)
    probe = as_nobody(str(cfg.venv / "bin" / "python"), "-c", "import labkit, jupyterhub, jupyterlab")
    if probe.returncode != 0:
        raise ClassroomError(f"A learner could not run the class environment ({cfg.venv}): "
                             f"{(probe.stderr or probe.stdout).strip().splitlines()[-1:]}",
                             "Give make classroom a Python every user can run (CLASSROOM_PYTHON=/usr/bin/python3) "
                             f"and a root folder every user can read ([paths].root in {cfg.path}).")
    done.append(("learners can run it", "checked as user nobody"))
    return done


def serve(cfg: Config) -> int:
    """JupyterHub with this class's configuration (in the foreground; Ctrl-C stops it and every learner's server)."""
    _need_root("labkit classroom serve")
    hub_config = environments_dir() / "classroom" / "jupyterhub_config.py"
    cfg.state.mkdir(parents=True, exist_ok=True)
    os.chmod(cfg.state, 0o700)
    env = dict(os.environ, **{CONFIG_ENV: str(cfg.path)})
    command = [str(cfg.venv / "bin" / "jupyterhub"), "-f", str(hub_config)]
    print(f"Kafka Lab classroom: http://{cfg.ip if cfg.ip != '0.0.0.0' else '<this server>'}:{cfg.port}/ "
          f"(trainers: {', '.join(cfg.trainers)}; Ctrl-C stops the class)", flush=True)
    # JupyterHub stops servers and services with SIGINT first: a hub started in the background by a shell
    # inherits SIGINT ignored (and so would every server), and each stop would wait out its timeouts.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.chdir(cfg.state)
    os.execve(command[0], command, env)  # the hub itself gets the signals that stop the class
    return 0  # not reached


# ---------------------------------------------------------------------------------------------- a learner's server
TRAINER_NOTEBOOK = "CLASS.ipynb"


def _trainer_notebook() -> Any:
    import nbformat

    nb = nbformat.v4.new_notebook()
    # the lab's kernel, named: JupyterLab would otherwise ask which kernel to start
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(
        "# The class\n\nWho is here, the lesson each is on, their predictions and graded exercises; below it, the "
        "class's answers to one prediction, live (put the id from the lesson's `predict.ask(...)`)."),
        nbformat.v4.new_code_cell("from labkit import predict\nfrom labkit.app.classroom import class_view\n\n"
                                  "class_view()"),
        nbformat.v4.new_code_cell('predict.class_results("00.discovery")')]
    return nb


def prepare_home(home: Path, bundle: Path, trainer: bool = False) -> Path:
    """A learner's lab in ``home``: lessons (copied once, never overwritten), exercises, start page, workspace."""
    import nbformat

    from ..grading.exercises import build_learner_copies
    from .lab import save_workspace
    from .startpage import write_personal_page

    lab, state = home / LAB_DIR, home / STATE_DIR
    for folder in (lab, state / "clusters", state / "record", state / "workspaces"):
        folder.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    for lesson in [*sorted((bundle / "notebooks").glob("[0-9][0-9]_*.ipynb")), bundle / "notebooks" / "README.md"]:
        if lesson.is_file() and not (lab / lesson.name).exists():
            shutil.copy2(lesson, lab / lesson.name)
    if trainer and not (lab / TRAINER_NOTEBOOK).exists():
        nbformat.write(_trainer_notebook(), str(lab / TRAINER_NOTEBOOK))
    os.environ.update(LABKIT_STATE_DIR=str(state / "record"), LABKIT_DATA_DIR=str(state / "clusters"),
                      LABKIT_LEARNER_DIR=str(lab / "exercises"), LABKIT_EXERCISES=str(bundle / "exercises"))
    build_learner_copies(target=lab / "exercises")
    page = write_personal_page(lab)
    save_workspace(state / "workspaces", page.relative_to(lab).as_posix())
    return lab


def singleuser(argv: list[str]) -> int:
    """The spawner's command, run as the learner: prepare their home, then become ``jupyterhub-singleuser``."""
    from .lab import EXPOSE_APP

    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    bundle = Path(__file__).resolve().parents[2]
    trainers = os.environ.get("LABKIT_CLASS_TRAINERS", "").split(",")
    lab = prepare_home(home, bundle, trainer=os.environ.get("JUPYTERHUB_USER", "") in trainers)
    os.chdir(lab)
    command = [str(Path(sys.executable).with_name("jupyterhub-singleuser")), f"--ServerApp.root_dir={lab}",
               f"--LabApp.workspaces_dir={home / STATE_DIR / 'workspaces'}", EXPOSE_APP, *argv]
    os.execv(command[0], command)
    return 0  # not reached


# ---------------------------------------------------------------------------------------------- the class
def class_view(seconds: float = 3.0) -> "Any":
    """The class as the trainer sees it: one row per learner -- the lesson they are on, when they were last
    heard of, their predictions right so far, lessons finished and exercises graded (``labkit grade``)."""
    import pandas as pd

    from ..runtime import classlink

    login = classlink.link()
    columns = ["learner", "lesson", "last seen", "predictions right", "lessons finished", "exercises graded"]
    if login is None:
        raise ClassroomError("No class poll here: this notebook does not run in a Kafka Lab classroom.",
                             "Open it in the trainer's JupyterLab of a `make classroom` hub.")
    import time

    rows = []
    for name, row in sorted(classlink.progress(classlink.read_events(login, seconds),
                                               exclude={*login.trainers, login.user}).items()):
        ago = time.time() - row["last_seen"]
        rows.append([name, row["lesson"], f"{ago / 60:.0f} min ago" if ago >= 60 else f"{ago:.0f} s ago",
                     f"{row['right']}/{row['judged']}", ", ".join(row["lessons_done"]) or "–",
                     ", ".join(f"{k} {v}" for k, v in sorted(row["grades"].items())) or "–"])
    return pd.DataFrame(rows, columns=columns)


def learners(cfg: Config) -> list[pwd.struct_passwd]:
    """The class's learners on this server: members of its group (trainers left out)."""
    try:
        group = grp.getgrnam(cfg.group)
    except KeyError:
        return []
    return sorted((p for p in pwd.getpwall() if (p.pw_gid == group.gr_gid or p.pw_name in group.gr_mem)
                   and p.pw_name not in cfg.trainers), key=lambda p: p.pw_name)


def collect(cfg: Config, out: Path) -> list[tuple[str, str]]:
    """Copy every learner's edited exercise copies into ``out/<learner>/<exercise>.ipynb``: what was submitted."""
    import json

    _need_root("labkit classroom grade")
    found = []
    for user in learners(cfg):
        folder = Path(user.pw_dir) / LAB_DIR / "exercises"
        index = folder / ".generated.json"
        generated = json.loads(index.read_text()) if index.is_file() else {}
        for nb in sorted(folder.glob("*.ipynb")):
            if generated.get(nb.stem) == hashlib.sha256(nb.read_bytes()).hexdigest():
                continue  # the untouched learner copy: nothing submitted
            target = out / user.pw_name / nb.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(nb, target)
            found.append((user.pw_name, nb.stem))
    return found


def grade(cfg: Config, out: Path, timeout: float = 600.0) -> Path:
    """Collect the class's edited exercises (:func:`collect`) and grade them into the gradebook."""
    from ..grading.classroom import grade_class

    submissions = out / "submissions"
    if not collect(cfg, submissions):
        raise ClassroomError(f"No learner of group {cfg.group!r} has edited an exercise yet.",
                             "Grade once learners have worked on their copies in kafka-lab/exercises/.")
    return grade_class(submissions, out=out / "gradebook", timeout=timeout)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m labkit.app.classroom singleuser ...`` (the spawner's command) and ``where``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["singleuser"]:
        return singleuser(argv[1:])
    if argv[:1] == ["where"]:
        print(load_config().root)
        return 0
    print("usage: python -m labkit.app.classroom singleuser|where", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
