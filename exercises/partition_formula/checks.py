"""Checks for the partition_formula exercise: the slide's two bugs, and the correct formula."""

from __future__ import annotations

import random

from labkit.grading import check
from labkit.partitioning import java_partition, murmur2

MIN_INT = -(2**31)


def _java_abs(x: int) -> int:
    return x if x == MIN_INT else abs(x)


def _java_rem(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("/ by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def reference_slide_partition(key: bytes, n: int) -> int:
    return _java_rem(_java_abs(murmur2(key)), n - 1)


def _keys(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [f"order-{rng.randint(0, 10**9)}".encode() for _ in range(count)]


@check("java_abs_of_min_int", points=1,
       hint="Java's Math.abs(Integer.MIN_VALUE) overflows: the positive value does not fit in an int.")
def java_abs_of_min_int(ns):
    """java_abs behaves like Java's Math.abs on an int, including for Integer.MIN_VALUE."""
    assert ns.java_abs(-5) == 5 and ns.java_abs(7) == 7
    got = ns.java_abs(MIN_INT)
    assert got == MIN_INT, f"java_abs(-2**31) returned {got}; Java's Math.abs returns -2**31 itself"


@check("java_remainder_truncates", points=1,
       hint="Java's % keeps the sign of the left operand (it truncates toward zero); Python's % does not.")
def java_remainder_truncates(ns):
    """java_rem(a, b) is Java's int remainder: -7 % 3 == -1 in Java."""
    assert ns.java_rem(7, 3) == 1
    got = ns.java_rem(-7, 3)
    assert got == -1, f"java_rem(-7, 3) returned {got}; Java gives -1"


@check("slide_partition_reproduces_the_slide", points=2,
       hint="Math.abs(murmur2(key)) % (numPartitions - 1), with Java's abs and Java's %.")
def slide_partition_reproduces_the_slide(ns):
    """slide_partition(key, n) computes exactly what the slide's formula computes in Java."""
    for key in _keys(300, 1):
        for n in (2, 6, 10):
            got = ns.slide_partition(key, n)
            assert got == reference_slide_partition(key, n), f"slide_partition({key!r}, {n}) returned {got}"


@check("slide_fails_for_one_partition", points=1,
       hint="What is numPartitions - 1 when the topic has one partition?")
def slide_fails_for_one_partition(ns):
    """With one partition the slide divides by zero (Java throws ArithmeticException)."""
    try:
        got = ns.slide_partition(b"any-key", 1)
    except ZeroDivisionError:
        return
    raise AssertionError(f"slide_partition(key, 1) returned {got}; the slide's formula divides by zero there")


@check("slide_min_hash_is_negative", points=1,
       hint="Feed the hash -2**31 through your java_abs and java_rem.")
def slide_min_hash_is_negative(ns):
    """slide_partition_of_hash(-2**31, 6) is the negative 'partition' the slide would produce."""
    got = ns.slide_partition_of_hash(MIN_INT, 6)
    assert got == -3, f"slide_partition_of_hash(-2**31, 6) returned {got}"
    assert got < 0


@check("last_partition_never_used", points=1, hint="x % (n - 1) is always below n - 1.")
def last_partition_never_used(ns):
    """never_used is the partition of a 6-partition topic that the slide never picks."""
    assert ns.never_used == 5, f"never_used is {ns.never_used!r}"


@check("partition_for_is_javas_default", points=2,
       hint="toPositive(murmur2(key)) % numPartitions: clear the sign bit, divide by all partitions.")
def partition_for_is_javas_default(ns):
    """partition_for(key, n) is what the Java producer really does."""
    for key in _keys(200, 2):
        for n in (1, 3, 6):
            got = ns.partition_for(key, n)
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


@check("partition_for_unseen_keys_and_counts", points=3, hidden=True)
def partition_for_unseen_keys_and_counts(ns):
    """partition_for matches Java on unseen keys (bytes and text) and partition counts up to 1000."""
    rng = random.Random()
    for _ in range(500):
        key = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        n = rng.randint(1, 1000)
        assert ns.partition_for(key, n) == java_partition(key, n), f"differs for a {len(key)}-byte key, n={n}"


@check("slide_partition_unseen", points=2, hidden=True)
def slide_partition_unseen(ns):
    """slide_partition matches the slide's Java semantics on unseen keys and partition counts."""
    rng = random.Random()
    for _ in range(500):
        key = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        n = rng.randint(2, 1000)
        assert ns.slide_partition(key, n) == reference_slide_partition(key, n)
