"""Hidden checks of partition_formula (the grader's only): Java's arithmetic and both formulas on inputs chosen now."""

from __future__ import annotations

import random

from labkit.grading import check, sibling
from labkit.partitioning import java_partition

checks = sibling(__file__)


def _int32(rng: random.Random) -> int:
    return rng.randint(checks.MIN_INT, checks.MAX_INT)


def _random_keys(rng: random.Random, count: int) -> list[bytes]:
    found = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40))) for _ in range(count - count // 4)]
    found += [f"customer-{rng.randint(0, 10**9)}-ünï-東京".encode() for _ in range(count // 4)]
    return found


@check("java_arithmetic_unseen", points=2, hidden=True)
def java_arithmetic_unseen(ns):
    """java_abs and java_rem match Java on random 32-bit ints of both signs (divisors of both signs too),
    and java_rem(a, 0) raises ZeroDivisionError."""
    rng = random.Random()
    xs = [_int32(rng) for _ in range(200)] + [checks.MIN_INT, checks.MAX_INT, -1, 0, 1]
    rng.shuffle(xs)
    for x, got in zip(xs, checks.ints(ns.java_abs.many([(x,) for x in xs]), "java_abs")):
        assert got == checks.java_abs(x), f"java_abs({x}) returned {got}, Java gives {checks.java_abs(x)}"
    pairs = [(_int32(rng), rng.choice([1, -1]) * rng.randint(1, 1000)) for _ in range(200)]
    pairs += [(_int32(rng), _int32(rng) or 7) for _ in range(100)] + [(checks.MIN_INT, -1), (checks.MIN_INT, 3)]
    rng.shuffle(pairs)
    for (a, b), got in zip(pairs, checks.ints(ns.java_rem.many(pairs), "java_rem")):
        assert got == checks.java_rem(a, b), f"java_rem({a}, {b}) returned {got}, Java gives {checks.java_rem(a, b)}"
    a = _int32(rng)
    assert checks.raises_zero_division(lambda: ns.java_rem(a, 0)), f"java_rem({a}, 0) should raise ZeroDivisionError"


@check("slide_of_hash_unseen", points=1, hidden=True)
def slide_of_hash_unseen(ns):
    """slide_partition_of_hash(h, n) matches the slide's Java semantics for random hashes (Integer.MIN_VALUE
    among them) and partition counts."""
    rng = random.Random()
    calls = [(_int32(rng), rng.randint(2, 1000)) for _ in range(300)]
    calls += [(checks.MIN_INT, n) for n in rng.sample(range(2, 1000), 20)]
    rng.shuffle(calls)
    for (h, n), got in zip(calls, checks.ints(ns.slide_partition_of_hash.many(calls), "slide_partition_of_hash")):
        want = checks.slide_of_hash(h, n)
        assert got == want, f"slide_partition_of_hash({h}, {n}) returned {got}, the slide gives {want} in Java"


@check("partition_for_unseen_keys_and_counts", points=3, hidden=True)
def partition_for_unseen_keys_and_counts(ns):
    """partition_for matches Java on unseen keys (bytes and text) and partition counts up to 1000."""
    rng = random.Random()
    calls = [(key, rng.randint(1, 1000)) for key in _random_keys(rng, 500)]
    for (key, n), got in zip(calls, checks.ints(ns.partition_for.many(calls), "partition_for")):
        assert got == java_partition(key, n), f"differs for a {len(key)}-byte key ({key.hex()}), n={n}: got {got}"


@check("slide_partition_unseen", points=2, hidden=True)
def slide_partition_unseen(ns):
    """slide_partition matches the slide's Java semantics on unseen keys and partition counts."""
    rng = random.Random()
    calls = [(key, rng.randint(2, 1000)) for key in _random_keys(rng, 500)]
    for (key, n), got in zip(calls, checks.ints(ns.slide_partition.many(calls), "slide_partition")):
        want = checks.reference_slide_partition(key, n)
        assert got == want, f"slide_partition({key.hex()}, {n}) returned {got}, the slide gives {want}"
