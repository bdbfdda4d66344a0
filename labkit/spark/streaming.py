"""Watching Structured Streaming queries: progress per micro-batch as a table and a live figure,
waits that re-raise the query's own error, and the checkpoint's commit log (to replay a batch).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..errors import LabkitError
from ..waiting import Wait

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from pyspark.sql.streaming import StreamingQuery


def wait_for_progress(query: "StreamingQuery", condition: Callable[[list[dict]], bool], timeout: float = 60.0,
                      what: str = "the streaming query to make progress") -> list[dict]:
    """Poll ``query.recentProgress`` until ``condition(progress)`` holds; re-raises the query's own error."""

    def check() -> None:
        error = query.exception()
        if error is not None:
            raise LabkitError(f"The streaming query failed: {str(error).splitlines()[0][:300]}",
                              "Read the error above, fix the query and start it again.")

    return Wait(what, timeout=timeout, interval=0.25, stretch=True, check=check,
                evidence=lambda: json.dumps(query.lastProgress or {}, indent=1, default=str)[:2000]).until(
        lambda: (lambda p: p if condition(p) else None)(list(query.recentProgress)))


def wait_until_idle(query: "StreamingQuery", timeout: float = 60.0) -> list[dict]:
    """Process everything available, then wait until the query stops running batches (incl. no-data batches)."""
    query.processAllAvailable()
    last_id: list[Optional[int]] = [None]
    stable_since = [time.monotonic()]

    def idle(progress: list[dict]) -> bool:
        status = query.status
        newest = progress[-1]["batchId"] if progress else None
        # isTriggerActive flickers while an idle query polls its sources, so only the batch id counts
        if newest != last_id[0] or status.get("isDataAvailable"):
            last_id[0], stable_since[0] = newest, time.monotonic()
            return False
        return time.monotonic() - stable_since[0] >= 1.5

    return wait_for_progress(query, idle, timeout=timeout, what="the streaming query to become idle")


def progress_table(progress: list[dict]) -> "Any":
    """One row per micro-batch: batch id, rows in, rates, duration, watermark and Kafka offsets read."""
    import pandas as pd

    rows = []
    for p in progress:
        source = p["sources"][0] if p.get("sources") else {}
        rows.append({
            "batch": p["batchId"],
            "input rows": p.get("numInputRows", 0),
            "input rows/s": round(p.get("inputRowsPerSecond") or 0.0, 1),
            "processed rows/s": round(p.get("processedRowsPerSecond") or 0.0, 1),
            "duration ms": p.get("durationMs", {}).get("triggerExecution", 0),
            "watermark": p.get("eventTime", {}).get("watermark"),
            "start offsets": _offsets(source.get("startOffset")),
            "end offsets": _offsets(source.get("endOffset")),
            "output rows": p.get("sink", {}).get("numOutputRows"),
        })
    return pd.DataFrame(rows).set_index("batch") if rows else pd.DataFrame(rows)


def _offsets(value: Any) -> Any:
    """``{"topic": {"0": 10, "1": 7}}`` (or its JSON text) -> ``{0: 10, 1: 7}``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict) and len(value) == 1:
        (parts,) = value.values()
        if isinstance(parts, dict):
            return {int(k): v for k, v in sorted(parts.items(), key=lambda kv: int(kv[0]))}
    return value


def progress_figure(progress: list[dict], title: str = "Streaming query progress") -> "go.Figure":
    """Input rate, processing rate (rows/s) and batch duration (ms) per micro-batch, as a plotly figure."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    batches = [p["batchId"] for p in progress]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=batches, y=[p.get("inputRowsPerSecond") or 0 for p in progress],
                             name="input rows/s", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=batches, y=[p.get("processedRowsPerSecond") or 0 for p in progress],
                             name="processed rows/s", mode="lines+markers"))
    fig.add_trace(go.Bar(x=batches, y=[p.get("durationMs", {}).get("triggerExecution", 0) for p in progress],
                         name="batch duration ms", opacity=0.35), secondary_y=True)
    fig.update_layout(title=title, height=380, margin=dict(l=40, r=40, t=50, b=90), xaxis_title="micro-batch",
                      legend=dict(orientation="h", x=0, y=-0.25, yanchor="top"))
    fig.update_yaxes(title_text="rows/s", secondary_y=False)
    fig.update_yaxes(title_text="ms", secondary_y=True)
    return fig


def watch_progress(query: "StreamingQuery", seconds: float, every: float = 1.0,
                   until: Optional[Callable[[], bool]] = None) -> "go.Figure":
    """Show :func:`progress_figure` live for ``seconds`` (or until ``until()``), redrawn every ``every`` s.

    The figure is a plotly ``FigureWidget`` whose traces are updated in place, so JupyterLab
    redraws one figure smoothly. Returns the last figure as a plain ``go.Figure``.
    """
    import plotly.graph_objects as go
    from IPython.display import display

    live = go.FigureWidget(progress_figure(list(query.recentProgress)))
    display(live)

    def refresh() -> "go.Figure":
        fig = progress_figure(list(query.recentProgress))
        with live.batch_update():
            for shown, new in zip(live.data, fig.data):
                shown.x, shown.y = new.x, new.y
        return fig

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and query.isActive and not (until is not None and until()):
        time.sleep(every)
        refresh()
    return refresh()


def committed_batches(checkpoint: str) -> list[int]:
    """The micro-batch ids a query's checkpoint records as finished (its ``commits/`` log)."""
    commits = Path(checkpoint) / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def forget_last_commit(checkpoint: str) -> int:
    """Leave a stopped query's checkpoint as a crash would between "sink written" and "batch committed".

    Spark runs a micro-batch in three steps: write the batch's offsets to ``offsets/N``, run
    it (the sink writes its output), then write ``commits/N``. Deleting ``commits/N`` is what
    a crash in the last step leaves behind: on restart Spark runs batch ``N`` again. Returns ``N``.
    Only for a stopped query; raises :class:`LabkitError` when no batch has been committed.
    """
    done = committed_batches(checkpoint)
    if not done:
        raise LabkitError(f"The checkpoint {checkpoint} has no committed micro-batch.",
                          "Run the query until it has processed at least one batch, then stop it.")
    last = done[-1]
    commits = Path(checkpoint) / "commits"
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last
