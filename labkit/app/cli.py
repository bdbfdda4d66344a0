"""The ``labkit`` command: gathers arguments and calls the library.

    labkit lab                     open JupyterLab on the lessons
    labkit cluster up|down|status  a shared lab cluster in the background
    labkit kafka TOOL ARGS...      Kafka's own tools against the lab cluster
    labkit doctor                  check this machine
    labkit grade ID|NOTEBOOK|DIR   grade an exercise (your copy of it, or a notebook), or a whole class
    labkit release OUT             write the learner bundle
    labkit classroom ACTION        a class on one server (JupyterHub): bundle, setup, serve, grade
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from ..errors import LabkitError

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ cluster


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from . import daemon

    state = daemon.read_state()
    if state:
        print(f"A lab cluster is already running ({state['profile']}): {state['bootstrap_servers']}")
        return 0
    overrides = daemon.parse_sets(args.set)
    from ..backends.native import NativeCluster

    NativeCluster(args.profile, overrides=overrides, progress=False).check_settings()  # a bad value: one line, no bar
    if args.foreground:
        return daemon.serve(args.profile, overrides, announce=print)
    from tqdm import tqdm

    with tqdm(desc=f"Starting a shared {args.profile} cluster", bar_format="{desc} [{elapsed}]") as bar:
        state = daemon.start_background(args.profile, args.set, progress=bar.refresh)
    print(f"Lab cluster up ({args.profile}): {state['bootstrap_servers']}")
    print(f"Notebooks attach to it with:  export LABKIT_BOOTSTRAP={state['bootstrap_servers']}")
    print("Stop it with:  labkit cluster down")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from . import daemon

    print("Lab cluster stopped." if daemon.stop_background() else "No lab cluster is running.")
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from . import daemon
    from ..backends import connect

    state = daemon.read_state()
    if not state:
        print("No lab cluster is running. Start one with: labkit cluster up")
        return 1
    cluster = connect(state["bootstrap_servers"])
    live = cluster.live_broker_ids()
    print(f"Lab cluster ({state['profile']}), up {time.time() - state['started']:.0f}s, "
          f"data in {state['data_dir']}")
    print(f"bootstrap servers: {state['bootstrap_servers']}")
    for b in state["brokers"]:
        print(f"  broker {b['id']}: 127.0.0.1:{b['port']}  pid {b['pid']}  {'up' if b['id'] in live else 'DOWN'}")
    topics = cluster.topics()
    print(f"topics ({len(topics)}): {', '.join(topics) if topics else '-'}")
    return 0


# ------------------------------------------------------------------ kafka tools


def cmd_kafka(args: argparse.Namespace) -> int:
    from .daemon import lab_bootstrap
    from ..runtime.tools import tool_command, tool_names

    if not args.tool or args.tool in ("-h", "--help"):
        print("usage: labkit kafka TOOL [ARGS...]\n\ntools:\n  " + "\n  ".join(tool_names()))
        return 0
    cmd = tool_command(args.tool, args.args, lab_bootstrap())
    return subprocess.call(cmd)


# ------------------------------------------------------------------ doctor


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    ok = True
    for check in run_checks():
        mark = "✓" if check.ok else ("!" if check.optional else "✗")
        print(f"{mark} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"    fix: {check.fix}")
        ok = ok and (check.ok or check.optional)
    return 0 if ok else 1


# ------------------------------------------------------------------ lab


def cmd_lab(args: argparse.Namespace) -> int:
    from . import lab
    from ..runtime.distribution import ensure_distribution

    ensure_distribution()
    notebooks, workspaces = REPO / "notebooks", REPO / ".lab" / "workspaces"
    lab.prepare(notebooks, workspaces)
    # Run from notebooks/: the lab's terminals open there (and a relative path a terminal is asked for is read there).
    return subprocess.call(lab.command(notebooks, workspaces, port=args.port, open_browser=not args.no_browser),
                           env=lab.environment(), cwd=notebooks)


# ------------------------------------------------------------------ setup


def cmd_setup(args: argparse.Namespace) -> int:
    """What `make setup` runs after installing the package: everything a lesson needs offline later."""
    from .setup import run_setup

    for name, result in run_setup():
        print(f"[setup] {name}: {result}", flush=True)
    return 0


# ------------------------------------------------------------------ main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description="Kafka Lab: real Kafka clusters for learning.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    lab = sub.add_parser("lab", help="open JupyterLab on the lessons")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument("--port", type=int, default=None)
    lab.set_defaults(func=cmd_lab)

    cluster = sub.add_parser("cluster", help="a shared lab cluster: up, down, status")
    csub = cluster.add_subparsers(dest="action", metavar="ACTION")
    up = csub.add_parser("up", help="start a cluster in the background and print its bootstrap servers")
    up.add_argument("--profile", default="three-brokers", help="cluster profile (default: three-brokers)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting override")
    up.add_argument("--foreground", action="store_true", help="stay in the foreground until Ctrl-C")
    up.set_defaults(func=cmd_cluster_up)
    csub.add_parser("down", help="stop the shared cluster").set_defaults(func=cmd_cluster_down)
    csub.add_parser("status", help="show the shared cluster").set_defaults(func=cmd_cluster_status)
    cluster.set_defaults(func=lambda a: (cluster.print_help(), 2)[1])

    kafka = sub.add_parser("kafka", help="run a Kafka command-line tool (kafka-topics, kafka-dump-log, ...)",
                           add_help=False)
    kafka.add_argument("tool", nargs="?")
    kafka.add_argument("args", nargs=argparse.REMAINDER)
    kafka.set_defaults(func=cmd_kafka)

    sub.add_parser("setup", help="fetch the Kafka jars and prepare the lab (make setup runs this)"
                   ).set_defaults(func=cmd_setup)
    sub.add_parser("doctor", help="check Java, the Kafka jars, Docker and disk").set_defaults(func=cmd_doctor)

    grade = sub.add_parser("grade", help="grade an exercise notebook, or a class folder DIR/<learner>/<exercise>.ipynb")
    grade.add_argument("path", metavar="NOTEBOOK_OR_DIR", help="a notebook, a class folder, or an exercise's id "
                       "(its copy in notebooks/exercises/)")
    grade.add_argument("--json", dest="json_out", default=None, help="one notebook: write the report here")
    grade.add_argument("--out", default=None, help="a folder: where the gradebook goes (default DIR/gradebook)")
    grade.add_argument("--timeout", type=float, default=600, help="seconds any one cell may run (default 600)")
    grade.add_argument("--check", dest="checks", action="append", metavar="ID", default=None,
                       help="one notebook: run only this check (repeatable); the score covers those alone")
    grade.set_defaults(func=cmd_grade)

    release = sub.add_parser("release", help="write the learner bundle (no reference solutions, no hidden checks)")
    release.add_argument("out", metavar="OUT")
    release.set_defaults(func=cmd_release)

    classroom = sub.add_parser("classroom", help="a class on one server: JupyterHub for the learners (make classroom)")
    classroom.add_argument("action", choices=["bundle", "setup", "serve", "grade", "where"],
                           help="bundle | setup | serve: what make classroom runs; grade: the class's edited "
                                "exercises into the gradebook; where: the class's folder")
    classroom.add_argument("--config", default=None, help="the class's classroom.toml (default: "
                           "$LABKIT_CLASSROOM_CONFIG, else environments/classroom/classroom.toml)")
    classroom.add_argument("--out", default="gradebook-class", help="grade: where submissions and the gradebook go")
    classroom.set_defaults(func=cmd_classroom)
    return parser


def cmd_classroom(args: argparse.Namespace) -> int:
    from . import classroom

    cfg = classroom.load_config(Path(args.config) if args.config else None)
    if args.action == "where":
        print(cfg.root)
    elif args.action == "bundle":
        print(f"[classroom] learner bundle: {classroom.make_bundle(cfg)}")
    elif args.action == "setup":
        for name, result in classroom.setup(cfg):
            print(f"[classroom] {name}: {result}", flush=True)
    elif args.action == "serve":
        return classroom.serve(cfg)
    else:
        out = classroom.grade(cfg, Path(args.out))
        print(f"gradebook: {out / 'gradebook.csv'} and {out / 'gradebook.html'}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from ..grading import grade
    from ..grading.classroom import grade_class
    from ..grading.exercises import submission_path

    path = submission_path(args.path)
    if path.is_dir() and args.checks:
        raise LabkitError("--check re-grades one notebook, not a class.",
                          "Give the notebook's path, e.g. labkit grade DIR/ana/murmur2.ipynb --check ID.")
    if path.is_dir():
        def show(sub, report, resumed):  # one line per submission, above the progress bar
            from tqdm import tqdm

            tqdm.write(f"{sub.learner}/{sub.exercise}: {report.score}/{report.max_score} {report.status}"
                       + (" (kept from the last run)" if resumed else "")
                       + (f" — {report.reason[:100]}" if report.reason else ""))

        out = grade_class(path, Path(args.out) if args.out else None, timeout=args.timeout, on_report=show)
        print(f"gradebook: {out / 'gradebook.csv'} and {out / 'gradebook.html'}")
        return 0
    print(f"grading {path} (runs the whole notebook headless; a minute or two)...", flush=True)
    report = grade(path, timeout=args.timeout, only=args.checks)
    if not args.checks:  # the start page shows the learner's last full grade
        from ..runtime.learner import record_grade

        record_grade(report.exercise, report.score, report.max_score)
    print(report.table())
    for violation in report.violations:
        print(f"rule broken: {violation}")
    if report.reason:
        print(f"\n{report.status}: {report.reason}")
    print(f"\nscore {report.score}/{report.max_score}   ({report.seconds:.0f} s)")
    out_path = Path(args.json_out) if args.json_out else path.with_suffix(".report.json")
    out_path.write_text(report.to_json())
    print(f"report: {out_path}")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from ..grading.classroom import release

    out = release(args.out)
    print(f"learner bundle: {out} (lessons, learner copies of the exercises and their visible checks; "
          "no reference solutions, no hidden checks). Learners run `make lab` in it.")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except LabkitError as exc:
        print(f"labkit: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
