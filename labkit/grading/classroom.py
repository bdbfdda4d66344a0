"""A trainer's side: grade a whole class at once, and release the learners' bundle.

``grade_class(DIR)`` grades every submission ``DIR/<learner>/<exercise>.ipynb``, each
against a fresh cluster, one after the other with a progress bar. Every report is saved
as soon as it is made (``DIR/gradebook/reports/``), so an interrupted run resumes where
it stopped (a submission changed since is graded again). A broken, hanging or empty
submission gets its row with the reason; one learner's failure never stops the others.
The gradebook is ``gradebook.csv`` (learner × exercise × check) and ``gradebook.html``
(scores per learner and exercise, and a pass-rate chart per check to show the class).

``release(OUT)`` writes what learners get: the lab, the lessons, and per exercise its
visible checks and the untouched learner copy -- no reference solution, no hidden check.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from .checks import GradingError
from .exercises import BEGIN, all_exercise_ids, exercise, exercises_dir, template
from .grader import Report, grade

GRADEBOOK = "gradebook"


@dataclass(frozen=True)
class Submission:
    learner: str
    exercise: str
    path: Path

    @property
    def key(self) -> str:
        return f"{self.learner}__{self.exercise}"

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def submissions(root: Path) -> list[Submission]:
    """Every ``<learner>/<exercise>.ipynb`` under ``root`` (the gradebook folder and hidden folders left out)."""
    found = []
    for learner in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
                          and p.name != GRADEBOOK):
        for nb in sorted(learner.glob("*.ipynb")):
            found.append(Submission(learner.name, nb.stem, nb))
    return found


def _failed(sub: Submission, status: str, reason: str) -> Report:
    """A report for a submission that could not be graded at all (empty, unreadable, unknown exercise)."""
    try:
        checks = exercise(sub.exercise, hidden=True).checks
    except GradingError:
        checks = []
    rows = [dict(id=c.id, points=c.points, earned=0, hidden=c.hidden, status="not run", message=reason, hint=c.hint,
                 doc=c.doc, seconds=0.0) for c in checks]
    return Report(sub.exercise, str(sub.path), status, reason, 0, sum(c.points for c in checks), 0.0, rows)


def grade_one(sub: Submission, out: Path, timeout: float) -> Report:
    try:
        return grade(sub.path, timeout=timeout, executed=out / "executed" / sub.learner / sub.path.name)
    except GradingError as exc:
        return _failed(sub, "failed to run", str(exc))
    except Exception as exc:  # noqa: BLE001 - one learner's submission must never stop the others
        return _failed(sub, "failed to run", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")


def grade_class(root: str | Path, out: Optional[Path] = None, timeout: float = 600.0, progress: bool = True,
                on_report: Callable[[Submission, Report, bool], None] = lambda s, r, resumed: None) -> Path:
    """Grade every submission under ``root``; returns the gradebook folder (see the module doc)."""
    root = Path(root)
    if not root.is_dir():
        raise GradingError(f"No such folder: {root}.", "Give a folder with one sub-folder per learner.")
    out = out or root / GRADEBOOK
    reports_dir = out / "reports"
    reports_dir.mkdir(parents=True, exist_ok=True)
    subs = submissions(root)
    if not subs:
        raise GradingError(f"No submissions in {root}.", "Expected <learner>/<exercise>.ipynb files.")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(subs), desc="Grading", unit=" notebooks")
    try:
        for sub in subs:
            saved = reports_dir / f"{sub.key}.json"
            digest = sub.digest()
            report, resumed = None, False
            if saved.exists():
                data = json.loads(saved.read_text())
                if data.get("digest") == digest:
                    report, resumed = Report(**data["report"]), True
            if report is None:
                if bar is not None:
                    bar.set_postfix_str(f"{sub.learner}/{sub.exercise}")
                report = grade_one(sub, out, timeout)
                tmp = saved.with_suffix(".tmp")
                tmp.write_text(json.dumps({"digest": digest, "graded_at": time.time(), "report": asdict(report)}))
                tmp.replace(saved)  # written whole or not at all: a resumed run never reads half a report
            on_report(sub, report, resumed)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    reports = [(s, Report(**json.loads((reports_dir / f"{s.key}.json").read_text())["report"])) for s in subs]
    write_gradebook(out, reports)
    return out


def write_gradebook(out: Path, reports: Iterable[tuple[Submission, Report]]) -> None:
    reports = list(reports)
    with open(out / "gradebook.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["learner", "exercise", "check", "hidden", "points", "earned", "status", "message",
                         "submission status", "submission reason"])
        for sub, rep in reports:
            for c in rep.checks:
                writer.writerow([sub.learner, sub.exercise, c["id"], c["hidden"], c["points"], c["earned"],
                                 c["status"], c["message"], rep.status, rep.reason])
            if not rep.checks:
                writer.writerow([sub.learner, sub.exercise, "", "", 0, 0, "", "", rep.status, rep.reason])
    (out / "gradebook.html").write_text(summary_html(reports))


def summary_html(reports: list[tuple[Submission, Report]]) -> str:
    """Scores per learner and exercise, then the pass rate of every check (a chart to show the class)."""
    import plotly.graph_objects as go

    learners = sorted({s.learner for s, _ in reports})
    exercises = [e for e in all_exercise_ids() if any(s.exercise == e for s, _ in reports)]
    exercises += sorted({s.exercise for s, _ in reports} - set(exercises))
    cell = {(s.learner, s.exercise): r for s, r in reports}
    head = "".join(f"<th>{html.escape(e)}</th>" for e in exercises)
    rows = []
    for learner in learners:
        tds = []
        for e in exercises:
            r = cell.get((learner, e))
            if r is None:
                tds.append("<td style='color:#aaa'>–</td>")
                continue
            colour = "#27ae60" if r.score == r.max_score and r.max_score else ("#c0392b" if r.status != "graded"
                                                                                 else "#e67e22")
            note = f"<br><small>{html.escape(r.status)}: {html.escape(r.reason[:80])}</small>" if r.reason else ""
            tds.append(f"<td style='color:{colour}'><b>{r.score}/{r.max_score}</b>{note}</td>")
        rows.append(f"<tr><th>{html.escape(learner)}</th>{''.join(tds)}</tr>")
    rates: dict[tuple[str, str], list[int]] = {}
    for sub, rep in reports:
        for c in rep.checks:
            rates.setdefault((sub.exercise, c["id"]), []).append(1 if c["status"] == "passed" else 0)
    labels = [f"{e} · {c}" for (e, c) in rates]
    values = [100 * sum(v) / len(v) for v in rates.values()]
    fig = go.Figure(go.Bar(x=values, y=labels, orientation="h", marker_color="#2e86de",
                           text=[f"{v:.0f} %" for v in values], textposition="auto"))
    fig.update_layout(title="Pass rate per check", xaxis_title="% of submissions", xaxis_range=[0, 100],
                      height=200 + 24 * len(labels), margin=dict(l=320, r=20, t=50, b=40),
                      yaxis_autorange="reversed", plot_bgcolor="white")
    chart = fig.to_html(full_html=False, include_plotlyjs=True)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Kafka Lab gradebook</title>"
            "<style>body{font-family:sans-serif;margin:2em} td,th{padding:4px 10px;border-bottom:1px solid #eee;"
            "text-align:center}</style></head><body>"
            f"<h1>Kafka Lab gradebook</h1><p>{len(learners)} learners, {len(reports)} submissions, graded "
            f"{time.strftime('%Y-%m-%d %H:%M')}.</p>"
            f"<table><tr><th>learner</th>{head}</tr>{''.join(rows)}</table>{chart}</body></html>")


# ---------------------------------------------------------------- the learner bundle

#: What a learner bundle holds from the trainer's checkout (exercises are added one by one).
BUNDLE = ("README.md", "Makefile", "pyproject.toml", "labkit", "environments", "notebooks")


def release(out: str | Path, repo: Optional[Path] = None) -> Path:
    """Write the learner bundle into ``out`` (which must not exist yet); returns it."""
    import nbformat

    repo = repo or Path(__file__).resolve().parents[2]
    out = Path(out)
    if out.exists():
        raise GradingError(f"{out} already exists.", "Give a new folder for the bundle.")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "exercises", "*.egg-info")
    for name in BUNDLE:
        src = repo / name
        if src.is_dir():
            shutil.copytree(src, out / name, ignore=ignore)
        elif src.exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out / name)
    target = out / "exercises"
    target.mkdir(parents=True)
    shutil.copy2(exercises_dir() / "exercises.toml", target / "exercises.toml")
    for ex_id in all_exercise_ids():
        (target / ex_id).mkdir()
        shutil.copy2(exercises_dir() / ex_id / "checks.py", target / ex_id / "checks.py")
        nbformat.write(template(ex_id), str(target / ex_id / "template.ipynb"))
    leaked = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".py", ".ipynb")
              and (BEGIN in p.read_text(errors="replace") and p.parent.parent.name == "exercises"
                   or p.name in ("hidden_checks.py", "notebook.py") and p.parent.parent.name == "exercises")]
    if leaked:
        shutil.rmtree(out)
        raise GradingError(f"The bundle would contain solutions or hidden checks: {leaked[0]}.",
                           "Check the exercise's files.")
    return out
