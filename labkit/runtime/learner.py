"""The learner's own record, on this machine: predictions made and how they came out, lessons
finished, exercise scores. It feeds a lesson's closing line ("your predictions: 5 of 7 right")
and the start page.

One small JSON file, ``$LABKIT_STATE_DIR/learner.json`` (default: the lab's user cache,
``state/learner.json``), written whole under a lock so two notebooks never lose each other's
entries. Nothing here is used for grading.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional

from .cache import cache_dir, file_lock


def state_file() -> Path:
    root = Path(os.environ["LABKIT_STATE_DIR"]) if os.environ.get("LABKIT_STATE_DIR") else cache_dir() / "state"
    return root / "learner.json"


def load() -> dict[str, Any]:
    """The whole record: ``{"predictions": {id: {...}}, "lessons": {id: {...}}, "exercises": {id: {...}}}``."""
    path = state_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    for key in ("predictions", "lessons", "exercises"):
        data.setdefault(key, {})
    return data


def _update(section: str, key: str, values: dict[str, Any]) -> dict[str, Any]:
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):
        data = load()
        entry = {**data[section].get(key, {}), **values, "at": time.time()}
        data[section][key] = entry
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    return entry


def lesson_of(prediction_id: str) -> str:
    """``"02.java-partition"`` -> ``"02"``."""
    return prediction_id.split(".", 1)[0]


def record_prediction(prediction_id: str, question: str, value: Any) -> dict[str, Any]:
    """The learner locked in ``value`` (an earlier outcome of this prediction is forgotten)."""
    return _update("predictions", prediction_id, {"lesson": lesson_of(prediction_id), "question": question,
                                                  "value": value, "actual": None, "right": None})


def record_outcome(prediction_id: str, actual: Any, right: Optional[bool]) -> None:
    """What the cluster did, and whether the learner's prediction (if any) was right."""
    _update("predictions", prediction_id, {"lesson": lesson_of(prediction_id), "actual": actual, "right": right})


def prediction(prediction_id: str) -> Optional[dict[str, Any]]:
    entry = load()["predictions"].get(prediction_id)
    return entry if entry and "value" in entry and entry.get("value") is not None else None


def record_lesson_done(lesson: str) -> None:
    _update("lessons", lesson, {"done": True})


def record_grade(exercise: str, score: int, max_score: int) -> None:
    """A full ``labkit grade`` of ``exercise``; in a classroom the trainer's view of the class sees it too."""
    from .classlink import publish

    _update("exercises", exercise, {"score": score, "max_score": max_score})
    publish("grade", exercise, score=score, max_score=max_score)


def predictions_of(lesson: str, data: Optional[dict[str, Any]] = None) -> tuple[int, int]:
    """(right, judged) for ``lesson``: predictions made and revealed, and how many were right."""
    entries = [e for e in (data or load())["predictions"].values() if e.get("lesson") == lesson]
    judged = [e for e in entries if e.get("value") is not None and e.get("right") is not None]
    return sum(1 for e in judged if e["right"]), len(judged)
