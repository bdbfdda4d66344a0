"""The lab's start page: every lesson and exercise in order, and -- for the learner -- their progress.

``notebooks/README.md`` is the committed index (``python -m labkit.app.startpage`` rewrites it,
``--check`` says whether it is up to date; the tests do that). ``notebooks/START.md`` is the
same page with the learner's own progress on top -- lessons finished, predictions right,
exercise scores (:mod:`labkit.runtime.learner`) -- written by ``labkit lab``, which opens it rendered,
and again by the lab's server each time it is opened (:mod:`labkit.app.contents`).

Lessons contribute their title, one-line summary and estimated minutes (the ``kafka_lab``
metadata written by :mod:`labkit.authoring`); exercises come from ``exercises/exercises.toml``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

import nbformat

from ..runtime.environment import tomllib

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
START_PAGE = NOTEBOOKS / "README.md"
#: The page ``labkit lab`` opens: the start page with the learner's progress (not committed).
PERSONAL_PAGE = NOTEBOOKS / "START.md"
EXERCISE_INDEX = ROOT / "exercises" / "exercises.toml"

INTRO = """\
# Kafka Lab — start here

Welcome! Every lesson below is a notebook that starts its **own real Kafka cluster** on this
machine in its first cells, shows each idea on that live cluster, and stops it at the end.
Open a lesson, then run its cells one by one with **Shift + Enter** (or *Run → Run All Cells*).
Nothing you do can break anything outside the notebook: each cluster has its own ports and
data, and disappears when the notebook's kernel stops.
"""

EXERCISE_HELP = """\
Your copies of the exercises are in [`exercises/`](exercises/) (created by `make setup`; the lab
never overwrites a copy you have edited). Each one states its task, gives you a place to write
your code, and has check cells that tell you right away what works and what doesn't. To get the
full grade, including checks you don't see, click **Grade my notebook** at the end of the exercise:
it saves your notebook, grades it the way your trainer does, and shows the report. The same from a
terminal (*File → New → Terminal*), by the exercise's name:

```sh
labkit grade murmur2
```
"""

OUTRO = """\
## Presenting (trainers)

Every lesson carries slide metadata. Click the **slideshow** button in a notebook's toolbar
(or press `Alt + R`) to present it as slides with live cells. Presenting never changes the lessons:
a save of a lesson (the slideshow button saves before it presents) goes to your own copy of it,
in `.lab/lessons/`, which opens from then on; delete the lesson in the file browser to have it as
it ships again. For a fast live demo, start one shared cluster in a terminal and attach notebooks to it:

```sh
labkit cluster up                                  # prints its bootstrap servers
export LABKIT_BOOTSTRAP=127.0.0.1:...              # then start JupyterLab from this shell
export LABKIT_TOPIC_PREFIX=alice-                  # per learner, so topics never collide
```

## When something is missing

Each lesson's *Setup* cell checks Python, Java and the Kafka jars and prints the fix when
something is missing. `labkit doctor` in a terminal runs the same checks.
"""


def _minutes(value) -> str:
    return f"{value} min" if value else ""


def lessons(notebooks: Path = NOTEBOOKS) -> list[tuple[str, Path, dict[str, Any]]]:
    """(lesson number, notebook, its kafka_lab metadata + title), in order."""
    found = []
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        meta = {**nb.metadata.get("kafka_lab", {}), "title": nb.metadata.get("title", path.stem)}
        found.append((path.name[:2], path, meta))
    return found


def exercises() -> list[dict[str, Any]]:
    if not EXERCISE_INDEX.exists():
        return []
    with EXERCISE_INDEX.open("rb") as fh:
        return list(tomllib.load(fh).get("exercise", []))


def lesson_rows(record: Optional[dict[str, Any]] = None, notebooks: Path = NOTEBOOKS) -> list[str]:
    rows = []
    for number, path, meta in lessons(notebooks):
        row = f"| [{meta['title']}]({path.name}) | {meta.get('summary', '')} | {_minutes(meta.get('minutes'))} |"
        if record is not None:
            row += f" {_lesson_progress(number, record)} |"
        rows.append(row)
    return rows


def exercise_rows(record: Optional[dict[str, Any]] = None) -> list[str]:
    rows = []
    for ex in exercises():
        row = (f"| [{ex['title']}](exercises/{ex['id']}.ipynb) | {ex.get('lesson', '')} | "
               f"{ex.get('summary', '')} | {_minutes(ex.get('minutes'))} |")
        if record is not None:
            got = record["exercises"].get(ex["id"])
            row += f" {got['score']}/{got['max_score']} |" if got else " – |"
        rows.append(row)
    return rows


def _lesson_progress(number: str, record: dict[str, Any]) -> str:
    from ..runtime.learner import predictions_of

    done = "✓ done" if record["lessons"].get(number, {}).get("done") else "–"
    right, judged = predictions_of(number, record)
    return done + (f", predictions {right}/{judged} right" if judged else "")


def render(record: Optional[dict[str, Any]] = None, notebooks: Path = NOTEBOOKS) -> str:
    """The start page; with the learner's ``record``, a column of their progress per lesson and exercise."""
    mine = record is not None
    lesson_head = "| lesson | what you will see | time |" + (" your progress |" if mine else "")
    exercise_head = "| exercise | after lesson | task | time |" + (" your score |" if mine else "")
    parts = [INTRO]
    if mine:
        parts += [f"*Your progress as of {time.strftime('%d %b %H:%M')}: this page is brought up to date each time "
                  "you open it.*\n"]
    parts += ["## Lessons\n", lesson_head, "|---|---|---|" + ("---|" if mine else ""), *lesson_rows(record, notebooks), ""]
    rows = exercise_rows(record)
    if rows:
        parts += ["## Exercises\n", EXERCISE_HELP, exercise_head, "|---|---|---|---|" + ("---|" if mine else ""),
                  *rows, ""]
    parts.append(OUTRO)
    return "\n".join(parts)


def write_personal_page(notebooks: Path = NOTEBOOKS) -> Path:
    """Write ``START.md`` in ``notebooks``: the start page with the learner's progress."""
    from ..runtime.learner import load

    page = notebooks / PERSONAL_PAGE.name
    page.write_text(render(load(), notebooks))
    return page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.app.startpage", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the start page is up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = START_PAGE.read_text() if START_PAGE.exists() else ""
        if current != text:
            print(f"{START_PAGE.relative_to(ROOT)} is out of date: run `python -m labkit.app.startpage`")
            return 1
        return 0
    START_PAGE.write_text(text)
    print(f"wrote {START_PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
