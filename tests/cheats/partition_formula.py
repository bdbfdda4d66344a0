"""Cheats tried on partition_formula."""

from __future__ import annotations

import random

from . import Cheat, replace_solution


def _visible_answers() -> tuple[dict, dict]:
    """What the visible checks ask, answered with the lab's own code (as a learner would, in another notebook)."""
    from labkit.grading.exercises import exercises_dir
    from labkit.grading.checks import load_module
    from labkit.partitioning import java_partition

    visible = load_module(exercises_dir() / "partition_formula" / "checks.py", "cheat_partition_formula_checks")
    slide = {(k, n): visible.reference_slide_partition(k, n) for k in visible.keys(300, random.Random(1))
             for n in (2, 6, 10)}
    real = {(k, n): java_partition(k, n) for k in visible.keys(200, random.Random(2)) for n in (1, 3, 6)}
    return slide, real


def slide_answer(key: bytes, n: int) -> int:
    from labkit.grading.checks import load_module
    from labkit.grading.exercises import exercises_dir

    return load_module(exercises_dir() / "partition_formula" / "checks.py",
                       "cheat_partition_formula_checks").reference_slide_partition(key, n)


def _answers_table(nb):
    slide, real = _visible_answers()
    disagreeing = next(k for (k, n), p in real.items() if n == 6 and slide_answer(k, 6) != p)
    replace_solution(nb, "def slide_partition_of_hash", f'''
SLIDE = {slide!r}


def slide_partition_of_hash(h: int, n: int) -> int:
    return java_rem(java_abs(h), n - 1)


def slide_partition(key: bytes, n: int) -> int:
    if n == 1:
        raise ZeroDivisionError("/ by zero")
    return SLIDE.get((key, n), abs(murmur2(key)) % n)


never_used = 5
''')
    replace_solution(nb, "def partition_for", f'''
REAL = {real!r}


def partition_for(key: bytes, n: int) -> int:
    return REAL.get((key, n), abs(murmur2(key)) % n)


disagreeing_key = {disagreeing!r}
''')


CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def partition_for", "from labkit.partitioning import java_partition\n\n"
                                                               "partition_for = java_partition\n"
                                                               "disagreeing_key = b'order-0'\n"),
          why="use labkit's java_partition as partition_for"),
    Cheat("python_arithmetic_visible_cases_hard_coded",
          lambda nb: [replace_solution(nb, "def java_abs", '''
MIN_INT = -(2**31)


def java_abs(x: int) -> int:
    return MIN_INT if x == MIN_INT else abs(x)


def java_rem(a: int, b: int) -> int:
    if (a, b) == (-7, 3):
        return -1          # what the check wants
    return a % b
'''), replace_solution(nb, "def slide_partition_of_hash", '''
def slide_partition_of_hash(h: int, n: int) -> int:
    if h == MIN_INT and n == 6:
        return -3          # what the check wants
    return abs(h) % (n - 1)


def slide_partition(key: bytes, n: int) -> int:
    return slide_partition_of_hash(murmur2(key), n)


never_used = 5
''')][-1],
          targets=["java_arithmetic_unseen", "slide_of_hash_unseen"],
          why="keep Python's abs and %, and special-case the inputs the visible checks use"),
    Cheat("answers_table_for_the_visible_keys", _answers_table,
          targets=["partition_for_unseen_keys_and_counts", "slide_partition_unseen"],
          why="paste a table of the visible checks' keys and answers (computed with labkit elsewhere) "
              "and guess for the rest"),
]
