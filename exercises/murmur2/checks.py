"""Checks for the murmur2 exercise: the learner's pure-Python murmur2 against Java's own.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``.
"""

from __future__ import annotations

from labkit.grading import Rules, check
from labkit.partitioning import java_partition, java_reference_murmur2

#: The lab's own murmur2 is the answer; so are hashing libraries and running Java from Python.
RULES = Rules(forbid=["labkit.partitioning", "labkit.assignors", "kafka", "mmh3", "murmurhash", "subprocess",
                      "py4j", "jpype", "os.system", "os.popen"])

KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def _call(fn, *args):
    result = fn(*args)
    assert isinstance(result, int), f"expected an int, got {type(result).__name__}"
    return result


@check("murmur2_kafka_test_vectors", points=2,
       hint="Multiply, then mask with & 0xFFFFFFFF after every step: Python ints never overflow.")
def murmur2_kafka_test_vectors(ns):
    """murmur2 gives the values in Kafka's own unit test (UtilsTest.testMurmur2)."""
    for key, expected in KAFKA_VECTORS.items():
        got = _call(ns.murmur2, key)
        assert got == expected, f"murmur2({key!r}) returned {got}, Java gives {expected}"


@check("murmur2_is_signed", points=1,
       hint="Java's int is signed: convert the final 32 bits with x - 2**32 when bit 31 is set.")
def murmur2_is_signed(ns):
    """murmur2 returns Java's signed 32-bit int (negative when bit 31 is set)."""
    got = _call(ns.murmur2, b"foobar")
    assert got < 0, f"murmur2(b'foobar') should be negative like Java's int, got {got}"


@check("murmur2_empty_key", points=1, hint="With no bytes, only the seed mixing and the final avalanche run.")
def murmur2_empty_key(ns):
    """murmur2 of the empty key matches Java's."""
    expected = java_reference_murmur2([b""])[0]
    got = _call(ns.murmur2, b"")
    assert got == expected, f"murmur2(b'') returned {got}, Java gives {expected}"


@check("java_partition_matches_java", points=2,
       hint="toPositive clears the sign bit (x & 0x7fffffff); it is not abs().")
def java_partition_matches_java(ns):
    """java_partition(key, n) is toPositive(murmur2(key)) % n, as the Java producer computes it."""
    for key in (b"21", b"foobar", b"order-17", "日本".encode()):
        for n in (1, 3, 6, 12):
            got = _call(ns.java_partition, key, n)
            assert got == java_partition(key, n), f"java_partition({key!r}, {n}) returned {got}"


@check("to_positive_of_min_int", points=1, hint="What is -2**31 & 0x7fffffff?")
def to_positive_of_min_int(ns):
    """to_positive(-2**31) is 0 (and to_positive never returns a negative number)."""
    assert _call(ns.to_positive, -(2**31)) == 0
    assert _call(ns.to_positive, -1) == 2**31 - 1
    assert _call(ns.to_positive, 5) == 5
