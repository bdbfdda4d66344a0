"""What every benchmark reports the same way: the machine it ran on, its targets met or missed, its JSON file.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so they import this module as a sibling.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import psutil


def machine(**extra: Any) -> dict[str, Any]:
    """CPUs, memory and the load average (1, 5, 15 min) now, plus ``extra``."""
    return {"cpus": psutil.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average": psutil.getloadavg(), **extra}


def load_text() -> str:
    """The load average as printed: ``1.62, 3.10, 4.00``."""
    return ", ".join(f"{x:.2f}" for x in psutil.getloadavg())


def meets(label: str, value: float, limit: float, at_most: bool = True, digits: int = 1) -> bool:
    """Print ``PASS``/``FAIL`` for ``value`` against its target (at most, or at least, ``limit``); True if met."""
    ok = value <= limit if at_most else value >= limit
    print(f"  {'PASS' if ok else 'FAIL'}: {label} {value:.{digits}f} (target {'<=' if at_most else '>='} {limit:g})")
    return ok


def write(path: str | Path, report: Mapping[str, Any]) -> Path:
    """Write ``report`` as JSON to ``path`` (folders made) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {path}")
    return path
