"""Run Kafka Lab's benchmarks: every ``benchmarks/*.py`` module with a ``main(argv)``, or the ones named.

    python benchmarks/run.py                       # all, default runs
    python benchmarks/run.py cluster_start --runs 3
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> dict[str, Path]:
    found = {}
    for path in sorted(HERE.glob("*.py")):
        if path.name.startswith("_") or path.name in ("run.py", "soak.py"):  # a soak run is not a benchmark: make soak
            continue
        if "def main(" in path.read_text():
            found[path.stem] = path
    return found


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    available = discover()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(available)})")
    parser.add_argument("--runs", type=int, default=None, help="repetitions per measurement (default: each one's own)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}")
    results = {}
    for name in args.names or list(available):
        print(f"=== {name}", flush=True)
        t0 = time.monotonic()
        extra = ["--runs", str(args.runs)] if args.runs else []
        results[name] = (load(available[name]).main(extra), time.monotonic() - t0)
    print("\n=== summary")
    for name, (code, seconds) in results.items():
        print(f"  {name:<20} {'ok' if code == 0 else 'TARGET MISSED'}  ({seconds:.0f} s)")
    return max((code for code, _ in results.values()), default=0)


if __name__ == "__main__":
    sys.exit(main())
