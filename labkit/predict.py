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
else. The question's cell shows the question and its choices, never the answer: the reveal, a later
cell, says what the lesson expects of a choice question, known before the run
(``expected="per partition"``: fixed by how Kafka works) or only measured
(``expected=predict.MEASURED``); ``tests/test_predictions.py`` fails when a known answer's text
is in the lesson's markdown before the question is asked, and a reveal that comes out otherwise
says so. Predictions and outcomes are kept per learner on this machine (:mod:`labkit.runtime.learner`);
re-running the cell shows the prediction already locked in. Headless runs (papermill, nbval,
the grader) never wait: a question nobody answered counts as skipped.

In a classroom (``labkit classroom``) a locked-in answer, a reveal and a lesson's summary also go to
the class poll (:mod:`labkit.runtime.classlink`: each learner may write only their own answers), and
the trainer shows the class's answers live::

    predict.class_results("02.moved")      # a histogram that fills as learners lock in, then the outcome

With no class cluster (one learner on their own machine) nothing is sent.
"""

from __future__ import annotations

import html
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

from .runtime import classlink, learner

#: Prediction ids asked in this kernel, per lesson, in order (the summary's "of N").
_ASKED: dict[str, list[str]] = {}
#: The questions asked in this kernel, by id (the class poll draws their choices in order).
_QUESTIONS: dict[str, "Prediction"] = {}


class _Measured:
    """The ``expected=`` of a choice question whose right answer the run measures (none is known before)."""

    def __repr__(self) -> str:
        return "predict.MEASURED"


#: ``question.reveal(actual, expected=MEASURED)``: the right choice depends on the run.
MEASURED = _Measured()


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
        _QUESTIONS[id] = self
        classlink.connect_early()  # in a classroom: the TLS + SCRAM handshake happens before the first answer

    # ---------------------------------------------------------------- the answer
    @property
    def value(self) -> Any:
        """The prediction the learner locked in, or None."""
        entry = learner.prediction(self.id)
        return None if entry is None else entry["value"]

    def lock_in(self, value: Any) -> Optional[str]:
        """Record ``value`` as the learner's prediction (what the widget's button does).

        In a classroom it also goes to the class poll: returns None when sent (or when there is no
        class), else why it could not be sent.
        """
        learner.record_prediction(self.id, self.question, value)
        choices = [_fmt(c) for c in self.choices] if self.choices is not None else None
        return classlink.publish("prediction", self.id, question=self.question, answer_kind=self.kind, choices=choices,
                                 unit=self.unit, value=value)

    def is_right(self, predicted: Any, actual: Any) -> bool:
        if self._judge is not None:
            return bool(self._judge(predicted, actual))
        if self.kind == "number":
            slack = max(self.tolerance, abs(actual) * self.within if self.within is not None else 0.0)
            return abs(float(predicted) - float(actual)) <= slack
        return str(predicted) == str(actual)

    def reveal(self, actual: Any, explain: str = "", expected: Any = None) -> Outcome:
        """Compare the prediction with ``actual`` (what the cluster did), record it, and show both.

        ``expected``: the right choice when the lesson knows it before the run (it is said here, after the
        question, not where it is asked), or :data:`MEASURED`; a run that came out otherwise says so.
        """
        known = None if expected is MEASURED else expected
        if known is not None and (self.choices is None or str(known) not in [str(c) for c in self.choices]):
            raise ValueError(f"expected {expected!r} of {self.id!r} must be one of its choices (or predict.MEASURED)")
        if hasattr(actual, "item") and not isinstance(actual, (str, bytes)):
            actual = actual.item()  # a numpy/pandas scalar (a count from a DataFrame): plain Python for the record
        predicted = self.value
        right = None if predicted is None else self.is_right(predicted, actual)
        learner.record_outcome(self.id, actual, right)
        classlink.publish("outcome", self.id, actual=actual, right=right)
        if known is not None and str(actual) != str(known):
            explain = (f"(This run did not do what the lesson expects, {_fmt(known)}: the cells above "
                       f"show why.) {explain}").strip()
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
            # Each button as wide as its words (ipywidgets' default, 148 px, cut "an authorization error" to
            # "an authorization …": issue 26); the row wraps below.
            field = w.ToggleButtons(options=[(_fmt(c), c) for c in self.choices], value=None,
                                    style={"button_width": "auto"})
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
                unsent = self.lock_in(value)
                show(value)
                if unsent is not None:
                    status.value += (f"<br><small style='color:#c0392b'>not sent to the class poll: "
                                     f"{html.escape(unsent)}</small>")
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
        row = w.HBox([field, *unit, button], layout=w.Layout(flex_flow="row wrap"))
        return w.VBox([w.HTML(f"<b>Predict:</b> {html.escape(self.question)}"), row, status],
                      layout=w.Layout(border="1px solid #2e86de", padding="4px 8px", margin="4px 0"))

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
    result = Summary(lesson, right, judged, len(asked) if asked is not None else len(_ASKED.get(lesson, [])))
    classlink.publish("lesson", lesson, right=right, judged=judged, asked=result.asked)
    return result


# ---------------------------------------------------------------------------------------------- the class poll
class ClassResults:
    """The class's answers to one prediction, live (see :func:`class_results`)."""

    def __init__(self, prediction_id: str, seconds: float = 900.0, refresh: float = 1.0) -> None:
        self.id, self.seconds, self.refresh = prediction_id, seconds, refresh
        self.login = classlink.link()
        self._reader = classlink.EventReader(self.login) if self.login is not None else None
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._parts: Any = None
        if self._reader is not None:
            self._reader.poll(2.0)  # what the class already sent

    # ------------------------------------------------------------ the data
    @property
    def answers(self) -> dict[str, Any]:
        """Learner -> the answer they locked in (their last one; trainers left out)."""
        if self._reader is None:
            return {}
        with self._lock:
            events = list(self._reader.events)
        return classlink.answers(events, self.id, exclude={*self.login.trainers, self.login.user})

    @property
    def outcomes(self) -> dict[str, dict[str, Any]]:
        """Learner -> what their cluster measured when they revealed (``actual``, ``right``)."""
        if self._reader is None:
            return {}
        with self._lock:
            events = list(self._reader.events)
        return classlink.outcomes(events, self.id)

    def _asked(self) -> dict[str, Any]:
        """The question as asked: in this kernel, else as the newest learner's answer carried it."""
        asked = _QUESTIONS.get(self.id)
        if asked is not None:
            return {"question": asked.question, "answer_kind": asked.kind,
                    "choices": [_fmt(c) for c in asked.choices] if asked.choices is not None else None}
        if self._reader is None:
            return {}
        with self._lock:
            sent = [e.data for e in self._reader.events if e.kind == "prediction" and e.key == self.id]
        return sent[-1] if sent else {}

    def counts(self) -> list[tuple[str, int]]:
        """(answer, how many learners gave it), in the question's order (every choice, even with no votes)."""
        given = Counter(_fmt(v) for v in self.answers.values())
        asked = self._asked()
        order = list(asked.get("choices") or [])
        if asked.get("answer_kind") == "yes/no":
            order = ["yes", "no"]
        order += sorted((a for a in given if a not in order), key=lambda a: (len(a), a))
        return [(a, given.get(a, 0)) for a in order]

    def measured(self) -> Optional[str]:
        """The outcome most of the class's clusters measured (None before anyone revealed)."""
        seen = Counter(_fmt(o["actual"]) for o in self.outcomes.values() if o["actual"] is not None)
        return seen.most_common(1)[0][0] if seen else None

    def status(self) -> str:
        if self._reader is None:
            mine = learner.prediction(self.id)
            return ("No class poll here: this notebook does not run in a Kafka Lab classroom (make classroom), so "
                    "nothing was sent or read." + (f" Your own answer: {_fmt(mine['value'])}." if mine else ""))
        n = len(self.answers)
        text = f"{n} learner{'s' if n != 1 else ''} answered"
        measured = self.measured()
        if measured is not None:
            right = sum(1 for a in self.answers.values() if _fmt(a) == measured)
            text += f"; the cluster measured {measured} — {right} of {n} predicted it"
        if self._reader.error:
            text += f" (class cluster: {self._reader.error})"
        return text + "."

    # ------------------------------------------------------------ display
    def _title(self) -> str:
        question = self._asked().get("question")
        return f"Class poll {self.id}" + (f": {question}" if question else "")

    def _bars_html(self) -> str:
        counts, measured = self.counts(), self.measured()
        top = max([c for _, c in counts] + [1])
        rows = "".join(f"<tr><td style='padding-right:8px'>{html.escape(a)}</td><td><div style='background:"
                       f"{'#27ae60' if a == measured else '#2e86de'};height:14px;width:{240 * c // top}px'></div></td>"
                       f"<td>{c}</td></tr>" for a, c in counts)
        return f"<table>{rows}</table>"

    def _repr_html_(self) -> str:
        return (f"<div style='border:1px solid #2e86de;border-radius:4px;padding:6px 10px'><b>"
                f"{html.escape(self._title())}</b>{self._bars_html() if self._reader else ''}"
                f"<small>{html.escape(self.status())}</small></div>")

    def __repr__(self) -> str:
        return f"{self._title()} — {self.status()}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self._reader is None:
            return {"text/html": self._repr_html_(), "text/plain": repr(self)}
        bundle = dict(self._widget()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update({"text/html": self._repr_html_(), "text/plain": repr(self)})
        return bundle

    def _widget(self) -> Any:
        import ipywidgets as w
        import plotly.graph_objects as go

        if self._parts is None:
            fig = go.FigureWidget(go.Bar(x=[], y=[], marker_color=[]))
            # the choices as categories in the question's order; whole learners only on the count axis
            fig.update_layout(height=300, margin=dict(l=40, r=10, t=10, b=40), yaxis_title="learners",
                              yaxis_rangemode="tozero", yaxis_tickformat="d", xaxis_type="category",
                              plot_bgcolor="white")
            status = w.HTML()
            self._parts = (w.VBox([w.HTML(f"<b>{html.escape(self._title())}</b>"), fig, status]), fig, status)
            self._draw()
            self._thread = threading.Thread(target=self._follow, name=f"labkit-class-poll-{self.id}", daemon=True)
            self._thread.start()
        return self._parts[0]

    def _draw(self) -> None:
        _, fig, status = self._parts
        counts, measured = self.counts(), self.measured()
        with fig.batch_update():
            fig.data[0].x = [a for a, _ in counts]
            fig.data[0].y = [c for _, c in counts]
            fig.data[0].marker.color = ["#27ae60" if a == measured else "#2e86de" for a, _ in counts]
            fig.layout.yaxis.dtick = max(1, -(-max((c for _, c in counts), default=0) // 5))  # ~5 ticks, 1 apart at least
        status.value = f"<small>{html.escape(self.status())}</small>"

    def _follow(self) -> None:
        assert self._reader is not None
        deadline = time.monotonic() + self.seconds
        while not self._halt.is_set() and time.monotonic() < deadline:
            with self._lock:
                new = self._reader.poll(self.refresh)
            if new or self._reader.error:
                self._draw()
        self._reader.close()

    def stop(self) -> None:
        """Stop following the class (the figure keeps what it shows)."""
        self._halt.set()


def class_results(prediction_id: str, seconds: float = 900.0) -> ClassResults:
    """The class's answers to ``prediction_id``, live: a histogram that fills as learners lock in their answers,
    and once learners reveal, the outcome their clusters measured (highlighted) and how many predicted it.

    For the trainer, in a classroom (their login may read every learner's answers). It follows the class for
    ``seconds``; ``.answers`` and ``.counts()`` give the numbers. Outside a classroom it says so.
    """
    return ClassResults(prediction_id, seconds=seconds)
