"""Checks for range_assignor: the learner's range assignor vs the reference and vs real consumers.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``.
"""

from __future__ import annotations

from labkit.assignors import range_assign
from labkit.grading import Rules, check

#: The lab's assignors module is the answer.
RULES = Rules(forbid=["labkit.assignors"])
#: The grader's cluster, for the hidden check with real consumers (the notebook attaches to it while graded).
CLUSTER = "single-broker"
SHARE_CLUSTER = True


def as_tuples(result) -> dict[str, list[tuple[str, int]]]:
    """The learner's result as member -> sorted (topic, partition) tuples (lists or tuples both accepted)."""
    assert isinstance(result, dict), f"return a dict of member -> list of (topic, partition), not {type(result).__name__}"
    out = {}
    for member, tps in result.items():
        assert isinstance(tps, (list, tuple)), f"the value for {member!r} should be a list, not {type(tps).__name__}"
        pairs = []
        for tp in tps:
            assert isinstance(tp, (list, tuple)) and len(tp) == 2, \
                f"{member!r} got {tp!r}: each entry should be a (topic, partition) tuple"
            pairs.append((tp[0], tp[1]))
        out[member] = sorted(pairs)
    return out


def reference(members, subscriptions, partitions) -> dict[str, list[tuple[str, int]]]:
    return {m: sorted((tp.topic, tp.partition) for tp in tps)
            for m, tps in range_assign(members, subscriptions, partitions).items()}


@check("docs_example", points=2, hint="Per topic: sort the subscribed members; n // m each, the first n % m get one more.")
def docs_example(ns):
    """Two members (given in any order), two topics of three partitions: the example from the Java client's
    documentation."""
    got = as_tuples(ns.range_assign(["C1", "C0"], {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3}))
    assert got == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}, f"got {got}"


@check("idle_members_get_nothing", points=1, hint="Every member must appear in the result, even with no partitions.")
def idle_members_get_nothing(ns):
    """With more members than partitions, the extra members are in the result with an empty list."""
    got = as_tuples(ns.range_assign(["a", "b", "c"], {m: ["t"] for m in "abc"}, {"t": 2}))
    assert got == {"a": [("t", 0)], "b": [("t", 1)], "c": []}, f"got {got}"
