"""Checks for the partition_formula exercise: the slide's two bugs, and the correct formula.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``.
"""

from __future__ import annotations

import random

from labkit.grading import LearnerError, Rules, check
from labkit.partitioning import java_partition, murmur2

#: The lab's partitioning module holds the answer (java_partition); murmur2 is given in the setup cell.
RULES = Rules(forbid=["labkit.partitioning", "kafka", "mmh3", "murmurhash"], allow=["murmur2"])
CLUSTER = None
SHARE_CLUSTER = True

MIN_INT = -(2**31)
MAX_INT = 2**31 - 1


def java_abs(x: int) -> int:
    """Java's Math.abs(int)."""
    return x if x == MIN_INT else abs(x)


def java_rem(a: int, b: int) -> int:
    """Java's int remainder a % b (the sign of a; / by zero raises)."""
    if b == 0:
        raise ZeroDivisionError("/ by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def slide_of_hash(h: int, n: int) -> int:
    return java_rem(java_abs(h), n - 1)


def reference_slide_partition(key: bytes, n: int) -> int:
    return slide_of_hash(murmur2(key), n)


def keys(count: int, rng: random.Random) -> list[bytes]:
    return [f"order-{rng.randint(0, 10**9)}".encode() for _ in range(count)]


def ints(values: list, what: str) -> list[int]:
    for v in values:
        assert isinstance(v, int) and not isinstance(v, bool), f"{what} returned {v!r}: return an int"
    return values


def raises_zero_division(call) -> bool:
    """Whether ``call()`` raised ZeroDivisionError (in the notebook, or reported from the learner's kernel)."""
    try:
        call()
    except ZeroDivisionError:
        return True
    except LearnerError as exc:
        if exc.type_name == "ZeroDivisionError":
            return True
        raise
    return False


@check("java_abs_of_min_int", points=1,
       hint="Java's Math.abs(Integer.MIN_VALUE) overflows: the positive value does not fit in an int.")
def java_abs_of_min_int(ns):
    """java_abs behaves like Java's Math.abs on an int, including for Integer.MIN_VALUE."""
    got = ints(ns.java_abs.many([(-5,), (7,), (0,), (MIN_INT,)]), "java_abs")
    assert got[:3] == [5, 7, 0], f"java_abs(-5), java_abs(7), java_abs(0) returned {got[:3]}"
    assert got[3] == MIN_INT, f"java_abs(-2**31) returned {got[3]}; Java's Math.abs returns -2**31 itself"


@check("java_remainder_truncates", points=1,
       hint="Java's % keeps the sign of the left operand (it truncates toward zero); Python's % does not.")
def java_remainder_truncates(ns):
    """java_rem(a, b) is Java's int remainder: -7 % 3 == -1 in Java."""
    got = ints(ns.java_rem.many([(7, 3), (-7, 3)]), "java_rem")
    assert got[0] == 1, f"java_rem(7, 3) returned {got[0]}"
    assert got[1] == -1, f"java_rem(-7, 3) returned {got[1]}; Java gives -1"


@check("slide_partition_reproduces_the_slide", points=2,
       hint="Math.abs(murmur2(key)) % (numPartitions - 1), with Java's abs and Java's %.")
def slide_partition_reproduces_the_slide(ns):
    """slide_partition(key, n) computes exactly what the slide's formula computes in Java."""
    calls = [(key, n) for key in keys(300, random.Random(1)) for n in (2, 6, 10)]
    for (key, n), got in zip(calls, ints(ns.slide_partition.many(calls), "slide_partition")):
        assert got == reference_slide_partition(key, n), f"slide_partition({key!r}, {n}) returned {got}"


@check("slide_fails_for_one_partition", points=1,
       hint="What is numPartitions - 1 when the topic has one partition?")
def slide_fails_for_one_partition(ns):
    """With one partition the slide divides by zero (Java throws ArithmeticException)."""
    got = []
    if not raises_zero_division(lambda: got.append(ns.slide_partition(b"any-key", 1))):
        raise AssertionError(f"slide_partition(key, 1) returned {got[0]!r}; the slide's formula divides by zero there")


@check("slide_min_hash_is_negative", points=1,
       hint="Feed the hash -2**31 through your java_abs and java_rem.")
def slide_min_hash_is_negative(ns):
    """slide_partition_of_hash(-2**31, 6) is the negative 'partition' the slide would produce."""
    got = ns.slide_partition_of_hash(MIN_INT, 6)
    assert got == slide_of_hash(MIN_INT, 6), f"slide_partition_of_hash(-2**31, 6) returned {got!r}"


@check("last_partition_never_used", points=1, hint="x % (n - 1) is always below n - 1.")
def last_partition_never_used(ns):
    """never_used is the partition of a 6-partition topic that the slide never picks."""
    never_used = ns.never_used
    assert never_used == 5 and not isinstance(never_used, bool), f"never_used is {never_used!r}"


@check("partition_for_is_javas_default", points=2,
       hint="toPositive(murmur2(key)) % numPartitions: clear the sign bit, divide by all partitions.")
def partition_for_is_javas_default(ns):
    """partition_for(key, n) is what the Java producer really does."""
    calls = [(key, n) for key in keys(200, random.Random(2)) for n in (1, 3, 6)]
    for (key, n), got in zip(calls, ints(ns.partition_for.many(calls), "partition_for")):
        assert got == java_partition(key, n), f"partition_for({key!r}, {n}) returned {got}"


@check("disagreeing_key_disagrees", points=1,
       hint="Try a few keys: for about 5 in 6 of them the two formulas differ on 6 partitions.")
def disagreeing_key_disagrees(ns):
    """disagreeing_key lands in different partitions of a 6-partition topic under the slide and under Java."""
    key = ns.disagreeing_key
    if isinstance(key, str):
        key = key.encode()
    assert isinstance(key, bytes), "disagreeing_key should be bytes (or str)"
    assert reference_slide_partition(key, 6) != java_partition(key, 6), \
        f"{key!r} goes to partition {java_partition(key, 6)} under both formulas"
