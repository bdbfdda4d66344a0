"""Soak run: the whole curriculum, several passes, several at once, with CPU hogs beside it (`make soak`).

    python benchmarks/soak.py                                   # 3 passes, 3 at once, 2 busy CPU hogs
    python benchmarks/soak.py --passes 1 --concurrency 2 --stress 0 --only 03_ --only tune_producer

Every lesson notebook runs headless (papermill, as `make test` runs it) and every exercise's
reference solution is graded for real (`labkit.grading.grade`, the grader outside the kernel),
each in a process of its own with its own data and learner-state directories. A run fails when a
cell raised, papermill failed, a reference did not score full marks, or a JVM outlived it.
``--stress K`` keeps K busy-looping processes running beside the runs, like a laptop compiling
in the background or a class sharing one server.

Prints, per notebook: runs, failures, the first failing cell and its error, the median run time,
and the machine's load average while it ran; the table (Markdown) and every run (JSON) are written
to test-output/soak/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

OUT = REPO / "test-output" / "soak"


@dataclass
class Run:
    kind: str          # "lesson" or "exercise"
    name: str
    passed: bool
    seconds: float
    load_before: float
    load_after: float
    failing_cell: str = ""
    error: str = ""
    jvm_left: bool = False
    detail: dict = field(default_factory=dict)


def lessons() -> list[Path]:
    return sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def exercises() -> list[str]:
    from labkit import grading

    return [e["id"] for e in grading.exercise_index()]


def _load() -> float:
    return os.getloadavg()[0]


def _java_pids(marker: str) -> list[int]:
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except (psutil.Error, TypeError):
            continue
        if "java" in (proc.info["name"] or "") + cmd.split(" ")[0] and marker in cmd:
            found.append(proc.pid)
    return found


def _env(data_dir: Path, state_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LABKIT_DATA_DIR=str(data_dir), LABKIT_STATE_DIR=str(state_dir), PYTHONUNBUFFERED="1")
    env.pop("LABKIT_BOOTSTRAP", None)
    return env


def _first_error(executed: Path) -> tuple[str, str]:
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception as exc:  # noqa: BLE001 - no executed copy at all: papermill failed before the first cell
        return "", f"no executed notebook ({type(exc).__name__})"
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                first = cell.source.splitlines()[0] if cell.source else ""
                return f"cell {index + 1} ({first[:60]})", f"{out.get('ename')}: {str(out.get('evalue'))[:300]}"
    return "", ""


def run_lesson(path: Path, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix=f"soak-{path.stem[:2]}-") as tmp:
        data, state = Path(tmp) / "data", Path(tmp) / "state"
        data.mkdir()
        state.mkdir()
        executed = Path(tmp) / path.name
        load_before, t0 = _load(), time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "labkit.runtime.kernels", str(path), str(executed), "--cwd",
                               str(path.parent), "--execution-timeout", "600"],
                              env=_env(data, state), capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        cell, error = _first_error(executed)
        if proc.returncode != 0 and not error:
            error = (proc.stderr.strip().splitlines() or ["papermill failed"])[-1][:300]
        left = bool(_wait_no_jvm(str(data)))
        return Run("lesson", path.stem, proc.returncode == 0 and not error and not left, seconds, load_before,
                   _load(), cell, error, left)


def run_exercise(ex_id: str, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix=f"soak-{ex_id[:8]}-") as tmp:
        data, state = Path(tmp) / "data", Path(tmp) / "state"
        data.mkdir()
        state.mkdir()
        script = (f"import json, nbformat\nfrom labkit import grading\n"
                  f"nb = {str(Path(tmp) / (ex_id + '.ipynb'))!r}\n"
                  f"nbformat.write(grading.reference_notebook({ex_id!r}), nb)\n"
                  f"r = grading.grade(nb, timeout=600)\n"
                  f"print('REPORT ' + json.dumps({{'status': r.status, 'score': r.score, 'max': r.max_score, "
                  f"'reason': r.reason, 'failed': [(c['id'], c['message'][:200]) for c in r.checks "
                  f"if c['status'] != 'passed']}}))\n")
        load_before, t0 = _load(), time.monotonic()
        proc = subprocess.run([sys.executable, "-c", script], env=_env(data, state), capture_output=True, text=True,
                              timeout=timeout, cwd=str(REPO))
        seconds = time.monotonic() - t0
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")), "")
        report = json.loads(line[7:]) if line else {}
        passed = proc.returncode == 0 and report.get("status") == "graded" and report.get("score") == report.get("max")
        failing, error = "", ""
        if not passed:
            if report.get("failed"):
                failing, error = report["failed"][0][0], report["failed"][0][1]
            else:
                error = report.get("reason") or (proc.stderr.strip().splitlines() or ["the grader failed"])[-1][:300]
        left = bool(_wait_no_jvm(str(data)))
        return Run("exercise", ex_id, passed and not left, seconds, load_before, _load(), failing, error, left,
                   report)


def _wait_no_jvm(marker: str, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := _java_pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def hogs(count: int) -> list[subprocess.Popen]:
    """``count`` processes that keep a core busy each, until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
            for _ in range(count)]


def table(runs: list[Run]) -> str:
    rows = ["| notebook | kind | runs | failures | median s | load (mean) | first failure |", "|---|---|---|---|---|---|---|"]
    names = sorted({(r.kind, r.name) for r in runs}, key=lambda x: (x[0] != "lesson", x[1]))
    for kind, name in names:
        mine = [r for r in runs if r.name == name and r.kind == kind]
        failed = [r for r in mine if not r.passed]
        load = statistics.mean((r.load_before + r.load_after) / 2 for r in mine)
        first = ""
        if failed:
            f = failed[0]
            first = f"{f.failing_cell} {f.error}".strip() + (" (a JVM was left)" if f.jvm_left else "")
        rows.append(f"| {name} | {kind} | {len(mine)} | {len(failed)} | "
                    f"{statistics.median(r.seconds for r in mine):.0f} | {load:.1f} | {first.replace('|', '/')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--concurrency", "-c", type=int, default=3, help="runs at the same time")
    parser.add_argument("--stress", type=int, default=2, help="busy-looping CPU hogs beside the runs")
    parser.add_argument("--only", action="append", default=[], help="notebook or exercise names starting with this")
    parser.add_argument("--no-lessons", action="store_true")
    parser.add_argument("--no-exercises", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    args = parser.parse_args(argv)

    jobs: list[tuple[str, object]] = []
    if not args.no_lessons:
        jobs += [("lesson", p) for p in lessons()]
    if not args.no_exercises:
        jobs += [("exercise", e) for e in exercises()]
    if args.only:
        jobs = [(k, j) for k, j in jobs if any((j.stem if isinstance(j, Path) else j).startswith(o)
                                                for o in args.only)]
    if not jobs:
        parser.error("nothing to run")
    work = [job for _ in range(args.passes) for job in jobs]
    print(f"soak: {len(jobs)} notebooks x {args.passes} passes, {args.concurrency} at once, {args.stress} CPU hogs; "
          f"{os.cpu_count()} cores, load {_load():.1f}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    lock = threading.Lock()
    started = time.monotonic()
    busy = hogs(args.stress)

    def one(job: tuple[str, object]) -> Run:
        kind, what = job
        try:
            run = run_lesson(what, args.timeout) if kind == "lesson" else run_exercise(what, args.timeout)  # type: ignore[arg-type]
        except subprocess.TimeoutExpired:
            name = what.stem if isinstance(what, Path) else str(what)
            run = Run(kind, name, False, args.timeout, _load(), _load(), "", f"took more than {args.timeout:.0f} s")
        with lock:
            runs.append(run)
            mark = "ok  " if run.passed else "FAIL"
            print(f"[{time.monotonic() - started:6.0f} s] {mark} {run.kind:8} {run.name:40} {run.seconds:5.0f} s "
                  f"load {run.load_before:.1f}->{run.load_after:.1f} {run.failing_cell} {run.error}", flush=True)
        return run

    try:
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            list(pool.map(one, work))
    finally:
        for hog in busy:
            hog.kill()
            hog.wait()
    text = table(runs)
    failures = sum(not r.passed for r in runs)
    summary = (f"{len(runs)} runs, {failures} failures, {time.monotonic() - started:.0f} s; passes {args.passes}, "
               f"concurrency {args.concurrency}, stress {args.stress}; {time.strftime('%Y-%m-%d %H:%M')}")
    print("\n" + text + "\n\n" + summary)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (OUT / f"soak-{stamp}.md").write_text(text + "\n\n" + summary + "\n")
    (OUT / f"soak-{stamp}.json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
