"""Cheats tried on range_assignor."""

from . import Cheat, replace_solution

CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def range_assign", '''
from labkit.assignors import range_assign as _reference


def range_assign(members, subscriptions, partitions):
    return {m: [(tp.topic, tp.partition) for tp in tps]
            for m, tps in _reference(members, subscriptions, partitions).items()}
'''),
          why="wrap labkit's own range assignor"),
    Cheat("hard_coded_examples_then_lazy",
          lambda nb: replace_solution(nb, "def range_assign", '''
def range_assign(members, subscriptions, partitions):
    if set(members) == {"C0", "C1"}:     # the documentation's example, as the visible check asks it
        return {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}
    # the rest: members in the order given, everyone reading every topic
    result = {m: [] for m in members}
    for topic, n in partitions.items():
        per, extra = divmod(n, len(members))
        start = 0
        for i, member in enumerate(members):
            count = per + (1 if i < extra else 0)
            result[member] += [(topic, p) for p in range(start, start + count)]
            start += count
    return result
'''),
          targets=["hidden_layouts", "matches_real_consumers"],
          why="hard-code the visible example, and skip sorting members and per-topic subscriptions"),
]
