"""Write ``notebooks/README.md``, the lab's start page, from the lessons and ``exercises/exercises.toml``.

    python scripts/start_page.py           # rewrite the start page
    python scripts/start_page.py --check   # exit 1 if it is out of date (the tests do this)

Lessons contribute their title, one-line summary and estimated minutes (the
``kafka_lab`` metadata written by ``labkit.authoring``); exercises come from the
index in ``exercises/exercises.toml``, in its order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
START_PAGE = NOTEBOOKS / "README.md"
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
full grade, including checks you don't see, run in a terminal:

```sh
labkit grade notebooks/exercises/<exercise>.ipynb
```
"""

OUTRO = """\
## Presenting (trainers)

Every lesson carries slide metadata. Click the **slideshow** button in a notebook's toolbar
(or press `Alt + R`) to present it as slides with live cells. For a fast live demo, start one
shared cluster in a terminal and attach notebooks to it:

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


def lesson_rows() -> list[str]:
    rows = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        meta = nb.metadata.get("kafka_lab", {})
        title = nb.metadata.get("title", path.stem)
        rows.append(f"| [{title}]({path.name}) | {meta.get('summary', '')} | {_minutes(meta.get('minutes'))} |")
    return rows


def exercise_rows() -> list[str]:
    if not EXERCISE_INDEX.exists():
        return []
    with EXERCISE_INDEX.open("rb") as fh:
        index = tomllib.load(fh)
    rows = []
    for ex in index.get("exercise", []):
        rows.append(f"| [{ex['title']}](exercises/{ex['id']}.ipynb) | {ex.get('lesson', '')} | "
                    f"{ex.get('summary', '')} | {_minutes(ex.get('minutes'))} |")
    return rows


def render() -> str:
    parts = [INTRO, "## Lessons\n", "| lesson | what you will see | time |", "|---|---|---|", *lesson_rows(), ""]
    exercises = exercise_rows()
    if exercises:
        parts += ["## Exercises\n", EXERCISE_HELP, "| exercise | after lesson | task | time |", "|---|---|---|---|",
                  *exercises, ""]
    parts.append(OUTRO)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the start page is up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = START_PAGE.read_text() if START_PAGE.exists() else ""
        if current != text:
            print(f"{START_PAGE.relative_to(ROOT)} is out of date: run `python scripts/start_page.py`")
            return 1
        return 0
    START_PAGE.write_text(text)
    print(f"wrote {START_PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
