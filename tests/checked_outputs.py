"""Compare a lesson's checked cells (``# NBVAL_CHECK_OUTPUT``) between two runs, as nbval's lax mode does.

Each lesson is executed once per test run (papermill, or Chromium for the browser lessons); its
executed copy is then compared with the reference outputs ``scripts/build_notebooks.py`` stored in
``tests/lesson_outputs/<lesson>.json`` (the committed notebooks carry no outputs), cell by
cell, with nbval's own rules: streams are merged per name, every output field and
every MIME type of ``data`` is compared after the sanitizer (``nbval_sanitize.cfg``)
replaced what legitimately differs between runs (ports, ids, durations), and the
fields nbval skips are skipped. One difference from nbval: stderr is left out, because
librdkafka logs broker disconnects from its own threads into whichever cell runs.
"""

from __future__ import annotations

import configparser
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

import nbformat
from nbval.plugin import coalesce_streams

CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
REFERENCE = Path(__file__).resolve().parent / "lesson_outputs"
#: What nbval does not compare (its IPyNbFile.skip_compare, images included since nbdime is off).
SKIP = frozenset({"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                  "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"})


def sanitize_patterns(path: Path) -> list[tuple[re.Pattern[str], str]]:
    """The regex/replacement pairs of an nbval sanitize file, in order."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


def _flatten(outputs: Iterable[Any], patterns: list[tuple[re.Pattern[str], str]]) -> dict[str, list[Any]]:
    def clean(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        for regex, replace in patterns:
            value = regex.sub(replace, value)
        return value

    kept = [o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    flat: dict[str, list[Any]] = defaultdict(list)
    for out in coalesce_streams([o.copy() for o in kept]):
        for key, value in out.items():
            if key in SKIP:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIP:
                        flat[mime].append(clean(data))
            elif out.get("output_type") == "stream" and key == "text":
                flat[f"stream:{out['name']}"].append(clean(value))
            else:
                flat[key].append(clean(value))
    return flat


def reference_outputs(stem: str) -> dict[int, list[Any]]:
    """The stored outputs of lesson ``stem``'s checked cells: cell index -> outputs."""
    data = json.loads((REFERENCE / f"{stem}.json").read_text())
    return {int(cell["index"]): [nbformat.from_dict(o) for o in cell["outputs"]] for cell in data["cells"]}


def differences(reference: dict[int, list[Any]], executed: Any, patterns: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """One line per checked cell whose outputs differ from ``reference`` (empty: they all match)."""
    found = []
    checked = {i for i, c in enumerate(executed.cells) if c.cell_type == "code" and c.source.startswith(CHECK_MARK)}
    if checked != set(reference):
        found.append(f"the checked cells are {sorted(checked)} but references are stored for {sorted(reference)}: "
                     "rebuild the lesson (scripts/build_notebooks.py)")
    for index in sorted(checked & set(reference)):
        ran = executed.cells[index]
        want, got = _flatten(reference[index], patterns), _flatten(ran.outputs, patterns)
        if want == got:
            continue
        first = ran.source.splitlines()[1] if "\n" in ran.source else ""
        keys = sorted(set(want) | set(got))
        detail = next((f"{k}: stored {want.get(k)!r:.300} but ran {got.get(k)!r:.300}" for k in keys
                       if want.get(k) != got.get(k)), "")
        found.append(f"cell {index + 1} ({first!r}): {detail}")
    return found
