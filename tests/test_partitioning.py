"""labkit.partitioning: bit-exact with Java's murmur2 and with where librdkafka really puts records."""

from __future__ import annotations

import os
import random
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit import partitioning as pt
from labkit.errors import LabkitError
from labkit.partitioning import PartitioningError

# Kafka's own test vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


# librdkafka's own vectors (src/rdmurmur2.c unittest_murmur2 and src/rdfnv1a.c unittest_fnv1a): the
# same keys, incl. suffixes of a string so every tail length occurs; "" and NULL hash alike.
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_KEYS = [b"kafka", b"giberish123456789", b"1234", b"234", b"34", b"4",
                   _UNALIGNED, _UNALIGNED[1:], _UNALIGNED[2:], _UNALIGNED[3:], b""]
LIBRDKAFKA_MURMUR2 = [0xD067CF64, 0x8F552B0C, 0x9FC97B14, 0xE7C009CA, 0x873930DA, 0x5A4B5CA1,
                      0x78424F1C, 0x4A62B377, 0xE0E4E09E, 0x62B8B43F, 0x106E08D9]
LIBRDKAFKA_FNV1A = [0x0D33C4E1, 0x77A58295, 0x023BDD03, 0x2DEA3CD2, 0x740FA83E, 0x310CA263,
                    0x65CBD69C, 0x6E49C79A, 0x69EED356, 0x6ABCC023, 0x7EE3623B]


@pytest.mark.parametrize("key, expected", KAFKA_VECTORS.items(), ids=[k.decode() for k in KAFKA_VECTORS])
def test_murmur2_matches_kafkas_test_vectors(key, expected):
    assert pt.murmur2(key) == expected


@pytest.mark.parametrize("key, expected", list(zip(LIBRDKAFKA_KEYS, LIBRDKAFKA_MURMUR2)),
                         ids=[k.decode() or "empty" for k in LIBRDKAFKA_KEYS])
def test_murmur2_matches_librdkafkas_vectors(key, expected):
    assert pt.murmur2(key) & 0xFFFFFFFF == expected


@pytest.mark.parametrize("key, expected", list(zip(LIBRDKAFKA_KEYS, LIBRDKAFKA_FNV1A)),
                         ids=[k.decode() or "empty" for k in LIBRDKAFKA_KEYS])
def test_fnv1a_partition_uses_librdkafkas_absolute_value(key, expected):
    # rd_fnv1a returns |hash as int32|; the partition is that modulo the partition count.
    h = pt.fnv1a(key)
    assert abs(h - 2**32 if h >= 2**31 else h) == expected
    for n in (1, 6, 7, 64):
        assert pt.fnv1a_partition(key, n) == expected % n


def test_murmur2_of_the_empty_key():
    assert pt.murmur2(b"") == 275646681 == 0x106E08D9


def test_str_keys_hash_as_utf8():
    assert pt.murmur2("héllo") == pt.murmur2("héllo".encode("utf-8"))


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(data):
    h = pt.murmur2(data)
    assert -(2**31) <= h < 2**31
    assert pt.murmur2(data) == h


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_to_positive_clears_only_the_sign_bit(x):
    p = pt.to_positive(x)
    assert 0 <= p < 2**31
    assert p == (x if x >= 0 else x + 2**31)


def test_to_positive_of_min_int_is_zero_unlike_abs():
    assert pt.to_positive(-(2**31)) == 0


@given(st.binary(min_size=1, max_size=40), st.integers(min_value=1, max_value=500))
def test_java_partition_is_in_range_and_deterministic(key, n):
    p = pt.java_partition(key, n)
    assert 0 <= p < n
    assert pt.java_partition(key, n) == p


@given(st.binary(min_size=1, max_size=40), st.integers(min_value=1, max_value=64))
def test_murmur2_partitioners_agree_with_java_for_keyed_records(key, n):
    assert pt.librdkafka_partition(key, n, "murmur2_random") == pt.java_partition(key, n)
    assert pt.librdkafka_partition(key, n, "murmur2") == pt.java_partition(key, n)


@given(st.binary(min_size=1, max_size=40), st.integers(min_value=1, max_value=64))
def test_consistent_uses_crc32(key, n):
    assert pt.librdkafka_partition(key, n, "consistent") == zlib.crc32(key) % n
    assert pt.librdkafka_partition(key, n) == zlib.crc32(key) % n  # the default, consistent_random


def test_fnv1a_known_values():
    # FNV-1a 32-bit reference values (offset basis for the empty string; "a" from the FNV test suite).
    assert pt.fnv1a(b"") == 0x811C9DC5
    assert pt.fnv1a(b"a") == 0xE40C292C
    assert pt.fnv1a(b"foobar") == 0xBF9CF968


@pytest.mark.parametrize("partitioner, null, empty", [
    ("consistent", 0, 0),
    ("consistent_random", None, None),
    ("murmur2", pt.to_positive(pt.murmur2(b"")) % 6, pt.to_positive(pt.murmur2(b"")) % 6),
    ("murmur2_random", None, pt.to_positive(pt.murmur2(b"")) % 6),
    ("fnv1a", pt.fnv1a_partition(b"", 6), pt.fnv1a_partition(b"", 6)),
    ("fnv1a_random", None, pt.fnv1a_partition(b"", 6)),
    ("random", None, None),
])
def test_null_and_empty_keys(partitioner, null, empty):
    assert pt.librdkafka_partition(None, 6, partitioner) == null
    assert pt.librdkafka_partition(b"", 6, partitioner) == empty


@given(st.binary(max_size=40), st.integers(min_value=1, max_value=64))
def test_fnv1a_partition_is_sarama_compatible(key, n):
    h = pt.fnv1a(key)
    signed = h - 2**32 if h >= 2**31 else h
    c_remainder = abs(signed) % n * (1 if signed >= 0 else -1)  # C's % truncates toward zero
    assert pt.fnv1a_partition(key, n) == abs(c_remainder)


def test_java_and_default_python_disagree_for_most_keys():
    keys = [f"customer-{i}".encode() for i in range(1000)]
    same = sum(pt.java_partition(k, 6) == pt.librdkafka_partition(k, 6) for k in keys)
    assert same < 300  # about 1 in 6 agree by chance


def test_partition_counts_and_predictions():
    keys = [b"a", b"b", b"a"]
    assert pt.predict_partitions(keys, 4, "java") == [pt.java_partition(k, 4) for k in keys]
    counts = pt.partition_counts(keys, 4, "murmur2_random")
    assert sum(counts.values()) == 3 and counts[pt.java_partition(b"a", 4)] >= 2


@pytest.mark.parametrize("call, match", [
    (lambda: pt.java_partition(b"k", 0), "positive"),
    (lambda: pt.librdkafka_partition(b"k", 3, "crc64"), "consistent_random"),
    (lambda: pt.murmur2(12345), "bytes, str or None"),
    (lambda: pt.java_partition(None, 3), "key"),
    (lambda: pt.java_partition(b"k", True), "positive"),
    (lambda: pt.librdkafka_partition(b"k", -2), "positive"),
    (lambda: pt.predict_partitions([b"k"], 3, "nope"), "Unknown partitioner"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(PartitioningError, match=match) as info:
        call()
    assert "\n" not in info.value.args[0]


@pytest.mark.integration
def test_murmur2_matches_javas_utils_murmur2_on_random_keys():
    rng = random.Random(7)
    keys = [rng.randbytes(n % 21) for n in range(2000)]  # every length 0..20, so every tail length, ~95 times
    keys += [b"", bytes(range(256)), os.urandom(200), b"\xff" * 7, "Zürich→東京".encode()]
    java = pt.java_reference_murmur2(keys)
    assert len(java) == len(keys)
    mismatches = [(k.hex(), mine, theirs) for k, mine, theirs in zip(keys, map(pt.murmur2, keys), java)
                  if mine != theirs]
    assert mismatches == []
    assert pt.java_reference_murmur2(list(KAFKA_VECTORS)) == list(KAFKA_VECTORS.values())
    assert pt.java_reference_murmur2(["héllo"]) == [pt.murmur2("héllo".encode())]


@pytest.mark.integration
def test_java_reference_failure_is_a_one_line_error(tmp_path, monkeypatch):
    broken = tmp_path / "Murmur2.java"
    broken.write_text("public class Murmur2 { this does not compile }\n")
    monkeypatch.setattr(pt, "_JAVA_SOURCE", broken)
    with pytest.raises(LabkitError, match="murmur2 reference failed") as info:
        pt.java_reference_murmur2([b"k"])
    assert "\n" not in str(info.value)


def test_java_reference_of_no_keys_starts_no_jvm(monkeypatch):
    monkeypatch.setattr(pt.subprocess, "run", lambda *a, **k: pytest.fail("started a JVM"))
    assert pt.java_reference_murmur2([]) == []
