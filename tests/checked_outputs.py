"""Compare a lesson's checked cells (``# NBVAL_CHECK_OUTPUT``) between two runs, as nbval's lax mode does.

Each lesson is executed once per test run (papermill); its executed copy is then
compared with the reference outputs stored in the committed notebook, cell by
cell, with nbval's own rules: streams are merged per name, every output field and
every MIME type of ``data`` is compared after the sanitizer (``nbval_sanitize.cfg``)
replaced what legitimately differs between runs (ports, ids, durations), and the
fields nbval skips are skipped. One difference from nbval: stderr is left out, because
librdkafka logs broker disconnects from its own threads into whichever cell runs.
"""

from __future__ import annotations

import configparser
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from nbval.plugin import coalesce_streams

CHECK_MARK = "# NBVAL_CHECK_OUTPUT"
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


def differences(reference: Any, executed: Any, patterns: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """One line per checked cell whose outputs differ (empty: they all match)."""
    found = []
    for index, (ref, ran) in enumerate(zip(reference.cells, executed.cells)):
        if ref.cell_type != "code" or not ref.source.startswith(CHECK_MARK):
            continue
        want, got = _flatten(ref.outputs, patterns), _flatten(ran.outputs, patterns)
        if want == got:
            continue
        first = ref.source.splitlines()[1] if "\n" in ref.source else ""
        keys = sorted(set(want) | set(got))
        detail = next((f"{k}: stored {want.get(k)!r:.300} but ran {got.get(k)!r:.300}" for k in keys
                       if want.get(k) != got.get(k)), "")
        found.append(f"cell {index + 1} ({first!r}): {detail}")
    if len(reference.cells) != len(executed.cells):
        found.append(f"the executed notebook has {len(executed.cells)} cells, the stored one {len(reference.cells)}")
    return found
