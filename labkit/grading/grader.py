"""The headless grader: one submission, graded outside the learner's kernel.

1. The notebook file is checked against the exercise's static rules (``rules.py``):
   a solution that uses the lab's reference answer scores 0 on the checks that rule
   protects, with the reason.
2. The grader starts the exercise's cluster itself (fresh, one per submission).
3. The notebook runs top to bottom in a fresh kernel (attached to that cluster when the
   exercise shares it); its own check cells stay silent (``LABKIT_GRADING``), and a cluster it starts
   itself starts when a cell first uses it (``backends.deferred``).
4. Every check, visible and hidden, runs in the grader's process: it asks the kernel for
   plain values and watches the broker itself. The learner's notebook file is not modified.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from ..backends.deferred import ENV as CLUSTER_ON_USE
from .checks import GradingError, not_run, run_check
from .exercises import exercise, exercise_id_of, template
from .kernel import KernelSession, RemoteNamespace
from .rules import check_notebook

#: Report statuses, from best to worst.
STATUSES = ("graded", "not attempted", "errors", "timeout", "failed to run")


@dataclass
class Report:
    exercise: str
    notebook: str
    status: str  # one of STATUSES
    reason: str
    score: int
    max_score: int
    seconds: float
    checks: list[dict[str, Any]]
    #: Rules the solution broke ("cell 3, line 2: ..."), each costing the checks it protects.
    violations: list[str] = field(default_factory=list)

    def table(self) -> str:
        lines = [f"{'':1} {'check':<46} {'points':>6}  feedback"]
        for c in self.checks:
            mark = "✓" if c["status"] == "passed" else "✗"
            hidden = " (hidden)" if c["hidden"] else ""
            lines.append(f"{mark} {c['id'] + hidden:<46} {c['earned']:>2}/{c['points']:<3}  {c['message']}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def read_submission(path: Path) -> Any:
    import nbformat

    if not path.exists():
        raise GradingError(f"No such notebook: {path}.", "Give the path of an exercise notebook (.ipynb).")
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:
        raise GradingError(f"{path.name} is not a readable notebook ({type(exc).__name__}).",
                           "Give the path of an exercise notebook (.ipynb).") from exc


@contextmanager
def _grader_cluster(profile: Optional[str], data_dir: Path) -> Iterator[Any]:
    """The exercise's cluster, owned by the grader, in ``data_dir``; None when the exercise needs none."""
    if profile is None:
        yield None
        return
    from ..backends.native import NativeCluster

    # In data_dir, and without the metrics exporter agent: no check reads broker metrics, and grading a
    # class starts one cluster per submission.
    overrides = {"LABKIT_DATA_DIR": str(data_dir), "LABKIT_METRICS": "0"}
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        cluster = NativeCluster(profile, progress=False).start()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield cluster
    finally:
        cluster.stop()


#: The tag of an exercise cell that only shows the learner something (a measurement, a failure replayed):
#: the grader does not run it while it is as the exercise wrote it (checks never rely on it).
DEMO_TAG = "demo"


def demo_cells(nb: Any) -> dict[str, str]:
    """``{cell id: source}`` of the demo cells of an exercise's learner copy."""
    return {c["id"]: c.source for c in nb.cells
            if c.cell_type == "code" and "id" in c and DEMO_TAG in c.metadata.get("tags", [])}


def grade(path: str | Path, timeout: float = 600.0, executed: Optional[Path] = None,
          rules: bool = True, only: Optional[Sequence[str]] = None) -> Report:
    """Grade the notebook at ``path`` (see the module doc); ``executed`` keeps the executed copy there.

    ``only``: the ids of the checks to run (a trainer re-checking one thing; the report and its score
    cover those alone). ``rules=False`` skips the static rules (only to test that the kernel boundary
    holds on its own).
    """
    import copy

    path = Path(path)
    nb = read_submission(path)
    submitted = copy.deepcopy(nb)
    ex_id = exercise_id_of(nb, path)
    ex = exercise(ex_id, hidden=True)
    if only is not None:
        unknown = sorted(set(only) - {c.id for c in ex.checks})
        if unknown:
            raise GradingError(f"{ex_id} has no check {', '.join(map(repr, unknown))}.",
                               f"Its checks: {', '.join(c.id for c in ex.checks)}.")
        ex = replace(ex, checks=[c for c in ex.checks if c.id in only])
    t0 = time.monotonic()
    violations = check_notebook(nb, template(ex_id), ex.rules) if rules else []
    refused = {}
    for c in ex.checks:
        broken = [v for v in violations if v.generic or ex.rules.protects(c.id)]
        if broken:
            refused[c.id] = f"refused: {broken[0]}" + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else "")
    status, reason = "graded", ""
    if len(refused) == len(ex.checks):  # nothing left to run: the rules decided every check
        results = [not_run(c, "refused", refused[c.id]) for c in ex.checks]
        return Report(ex_id, str(path), status, f"{len(violations)} rule(s) broken: {violations[0]}", 0,
                      sum(c.points for c in ex.checks), round(time.monotonic() - t0, 1), [asdict(r) for r in results],
                      [str(v) for v in violations])
    work = Path(tempfile.mkdtemp(prefix=f"labkit-grade-{ex_id}-"))
    try:
        with _grader_cluster(ex.cluster, work) as cluster:
            # A cluster the notebook starts itself (SHARE_CLUSTER = False) serves only its demo cells, which
            # are not run while untouched: it starts when a cell first uses it (backends.deferred).
            env = {**os.environ, "LABKIT_DATA_DIR": str(work), "LABKIT_GRADING": "1", "LABKIT_METRICS": "0",
                   CLUSTER_ON_USE: "1"}
            env.pop("LABKIT_BOOTSTRAP", None)
            env.pop("LABKIT_CLIENT_CONFIG", None)
            if cluster is not None and ex.share_cluster:
                env["LABKIT_BOOTSTRAP"] = cluster.bootstrap_servers
                login = cluster.security_settings()
                if login:  # a secured cluster: the notebook attaches as its admin (backends.external)
                    env["LABKIT_CLIENT_CONFIG"] = json.dumps(login)
            with KernelSession(nb, cwd=path.parent.resolve(), env=env, timeout=timeout,
                               skip=demo_cells(template(ex_id))) as kernel:
                outcome = kernel.run_cells()
                if outcome.timed_out or outcome.died:
                    status = "timeout" if outcome.timed_out else "failed to run"
                    reason = (f"{outcome.timed_out} did not finish within {outcome.limit}" if outcome.timed_out
                              else outcome.died or "")
                    results = [not_run(c, "not run", reason) for c in ex.checks]
                else:
                    ns = RemoteNamespace(kernel, cluster, submitted)
                    results = [not_run(c, "refused", refused[c.id]) if c.id in refused else run_check(c, ns)
                               for c in ex.checks]
                    if all(r.status in ("not attempted", "refused") for r in results) and not violations:
                        status, reason = "not attempted", "no task has been done yet"
                    elif outcome.first_error:
                        status, reason = "errors", outcome.first_error
                    elif violations:
                        reason = f"{len(violations)} rule(s) broken: {violations[0]}"
            if executed is not None:
                import nbformat

                executed.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, str(executed))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    checks = [asdict(r) for r in results]
    return Report(ex_id, str(path), status, reason, sum(r.earned for r in results), sum(c.points for c in ex.checks),
                  round(time.monotonic() - t0, 1), checks, [str(v) for v in violations])
