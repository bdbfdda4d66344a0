"""Predict, then reveal: before a cell shows what the cluster does, the learner commits to an expectation.

    from labkit import predict
    guess = predict.ask("02.java-partition", "Which partition does the Java producer pick for 'order-17'?",
                        choices=range(6))
    guess                                   # a small widget: pick, then "Lock in"
    ...                                     # the cell that measures it on the broker
    guess.reveal(actual, "murmur2 of the key's bytes, sign bit cleared, modulo 6.")
    predict.summary("02")                   # "Your predictions in this lesson: 5 of 7 right."

A prediction is a number (right within ``tolerance``, or ``within`` a fraction of the
outcome), a choice, or a yes/no; a ``judge(prediction, outcome)`` function decides anything
else. Predictions and outcomes are kept per learner on this machine (:mod:`labkit.runtime.learner`);
re-running the cell shows the prediction already locked in. Headless runs (papermill, nbval,
the grader) never wait: a question nobody answered counts as skipped.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from .runtime import learner

#: Prediction ids asked in this kernel, per lesson, in order (the summary's "of N").
_ASKED: dict[str, list[str]] = {}


def _fmt(value: Any, unit: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value}{' ' + unit if unit else ''}"


@dataclass
class Outcome:
    """A revealed prediction: what the learner said, what the cluster did, right or not, and why."""

    question: str
    predicted: Any
    actual: Any
    right: Optional[bool]
    explain: str = ""
    unit: str = ""

    @property
    def verdict(self) -> str:
        if self.predicted is None:
            return "no prediction (skipped)"
        return "right" if self.right else "not this time"

    def __repr__(self) -> str:
        said = "You made no prediction" if self.predicted is None else f"You predicted {_fmt(self.predicted, self.unit)}"
        return f"{said}; the cluster: {_fmt(self.actual, self.unit)} — {self.verdict}." + (
            f"\n{self.explain}" if self.explain else "")

    def _repr_html_(self) -> str:
        colour = "#7f8c8d" if self.predicted is None else ("#27ae60" if self.right else "#c0392b")
        mark = "–" if self.predicted is None else ("✓" if self.right else "✗")
        said = ("<i>no prediction</i>" if self.predicted is None
                else f"<b>{html.escape(_fmt(self.predicted, self.unit))}</b>")
        return (f"<div style='border-left:4px solid {colour};padding:4px 10px;margin:4px 0'>"
                f"<span style='color:{colour};font-weight:bold'>{mark} {html.escape(self.verdict)}</span> · "
                f"you predicted {said}, the cluster: <b>{html.escape(_fmt(self.actual, self.unit))}</b>"
                + (f"<br><small>{html.escape(self.explain)}</small>" if self.explain else "") + "</div>")


class Prediction:
    """One question asked before its answer is measured (see the module doc)."""

    def __init__(self, id: str, question: str, *, choices: Optional[Iterable[Any]] = None, kind: str = "number",
                 tolerance: float = 0.0, within: Optional[float] = None, unit: str = "",
                 judge: Optional[Callable[[Any, Any], bool]] = None) -> None:
        if "." not in id:
            raise ValueError(f"prediction id {id!r} must start with its lesson, like '02.java-partition'")
        self.id, self.question, self.unit = id, question, unit
        self.choices: Optional[list[Any]] = list(choices) if choices is not None else None
        self.kind = "choice" if self.choices is not None else kind
        if self.kind not in ("number", "choice", "yes/no"):
            raise ValueError(f"kind must be 'number', 'choice' or 'yes/no', not {kind!r}")
        self.tolerance, self.within, self._judge = tolerance, within, judge
        asked = _ASKED.setdefault(learner.lesson_of(id), [])
        if id not in asked:
            asked.append(id)

    # ---------------------------------------------------------------- the answer
    @property
    def value(self) -> Any:
        """The prediction the learner locked in, or None."""
        entry = learner.prediction(self.id)
        return None if entry is None else entry["value"]

    def lock_in(self, value: Any) -> None:
        """Record ``value`` as the learner's prediction (what the widget's button does)."""
        learner.record_prediction(self.id, self.question, value)

    def is_right(self, predicted: Any, actual: Any) -> bool:
        if self._judge is not None:
            return bool(self._judge(predicted, actual))
        if self.kind == "number":
            slack = max(self.tolerance, abs(actual) * self.within if self.within is not None else 0.0)
            return abs(float(predicted) - float(actual)) <= slack
        return str(predicted) == str(actual)

    def reveal(self, actual: Any, explain: str = "") -> Outcome:
        """Compare the prediction with ``actual`` (what the cluster did), record it, and show both."""
        if hasattr(actual, "item") and not isinstance(actual, (str, bytes)):
            actual = actual.item()  # a numpy/pandas scalar (a count from a DataFrame): plain Python for the record
        predicted = self.value
        right = None if predicted is None else self.is_right(predicted, actual)
        learner.record_outcome(self.id, actual, right)
        return Outcome(self.question, predicted, actual, right, explain, self.unit)

    # ---------------------------------------------------------------- display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(self._widget()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = self._static_html()
        bundle["text/plain"] = f"Prediction {self.id}: {self.question}"
        return bundle

    def _static_html(self) -> str:
        """What a saved notebook or a non-widget frontend shows: the question, and the answer if one was given."""
        value = self.value
        answer = (f"locked in: <b>{html.escape(_fmt(value, self.unit))}</b>" if value is not None
                  else "<i>open this notebook in JupyterLab to answer</i>")
        return (f"<div style='border:1px solid #2e86de;border-radius:4px;padding:6px 10px'>"
                f"<b>Predict:</b> {html.escape(self.question)}<br><small>{answer}</small></div>")

    def _widget(self) -> Any:
        import ipywidgets as w

        if self.kind == "choice":
            assert self.choices is not None
            field = w.ToggleButtons(options=[(_fmt(c), c) for c in self.choices], value=None)
        elif self.kind == "yes/no":
            field = w.ToggleButtons(options=[("yes", True), ("no", False)], value=None)
        else:
            field = w.FloatText(value=0, layout=w.Layout(width="10em"))
        button = w.Button(description="Lock in", button_style="primary", icon="lock")
        status = w.HTML()

        def show(value: Any) -> None:
            locked = value is not None
            field.disabled = locked
            button.description, button.icon = ("Change", "unlock") if locked else ("Lock in", "lock")
            status.value = (f"<small>locked in: <b>{html.escape(_fmt(value, self.unit))}</b> — now run the next "
                            "cells</small>" if locked else "<small>make your guess, then lock it in</small>")

        def press(_: Any) -> None:
            if not field.disabled:
                if field.value is None:
                    status.value = "<small style='color:#c0392b'>pick an answer first</small>"
                    return
                value = field.value
                if self.kind == "number" and float(value).is_integer():
                    value = int(value)
                self.lock_in(value)
                show(value)
            else:
                show(None)

        saved = self.value
        if saved is not None:
            try:
                field.value = saved
            except Exception:  # noqa: BLE001 - a saved answer no longer among the choices
                pass
        show(saved)
        button.on_click(press)
        unit = [w.HTML(html.escape(self.unit))] if self.unit and self.kind == "number" else []
        return w.VBox([w.HTML(f"<b>Predict:</b> {html.escape(self.question)}"), w.HBox([field, *unit, button]),
                       status], layout=w.Layout(border="1px solid #2e86de", padding="4px 8px", margin="4px 0"))

    def __repr__(self) -> str:
        value = self.value
        return f"Prediction {self.id}: {self.question}" + (f" (locked in: {_fmt(value, self.unit)})"
                                                             if value is not None else "")


def ask(id: str, question: str, **options: Any) -> Prediction:
    """A prediction question (display it as the cell's last expression); options as :class:`Prediction`."""
    return Prediction(id, question, **options)


@dataclass
class Summary:
    lesson: str
    right: int
    judged: int
    asked: int

    @property
    def skipped(self) -> int:
        return max(self.asked - self.judged, 0)

    def __repr__(self) -> str:
        if not self.judged:
            return (f"Your predictions in this lesson: none made ({self.asked} asked). Run the lesson in JupyterLab "
                    "and lock in your guesses before the reveals.")
        skipped = f" ({self.skipped} skipped)" if self.skipped else ""
        return f"Your predictions in this lesson: {self.right} of {self.judged} right{skipped}."

    def _repr_html_(self) -> str:
        return f"<p style='font-size:110%'><b>{html.escape(repr(self))}</b></p>"


def summary(lesson: str, asked: Optional[Sequence[str]] = None) -> Summary:
    """How the learner's predictions in ``lesson`` came out; also marks the lesson as finished."""
    right, judged = learner.predictions_of(lesson)
    learner.record_lesson_done(lesson)
    return Summary(lesson, right, judged, len(asked) if asked is not None else len(_ASKED.get(lesson, [])))
