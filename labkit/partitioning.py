"""Which partition a record goes to: the Java client's rule and the Python client's rules, as pure functions.

These are *models*, to be compared with where the broker actually stored records
(see lesson 02). Two families matter:

* **Java** (``org.apache.kafka.clients.producer``): a keyed record goes to
  ``toPositive(murmur2(keyBytes)) % numPartitions`` — :func:`java_partition`.
  A keyless record is placed by the *sticky* partitioner: a whole batch goes to
  one partition, then the next batch to another.
* **librdkafka**, which confluent-kafka (the Python client) wraps, chooses with
  its ``partitioner`` setting; the default is ``consistent_random`` — CRC32 of
  the key, *not* murmur2 — so the same key lands in a different partition than
  from a Java producer unless the Python producer sets
  ``partitioner="murmur2_random"``. :func:`librdkafka_partition` models each one.

Null and empty keys (librdkafka ``src/rdkafka_msg.c`` and ``src/rdkafka_topic.c``).
Two places decide. The partitioner functions: ``consistent`` hashes whatever
it gets (``rd_crc32(NULL, 0)`` is 0); ``consistent_random`` goes random when
``keylen == 0``; ``murmur2_random`` and ``fnv1a_random`` go random only when the
key pointer is NULL, so an empty key is hashed. And the dispatcher,
``rd_kafka_msg_partitioner``: for a NULL key (and, with ``consistent_random``, an
empty one) it calls the *sticky* partitioner instead, unless the topic's
``random_partitioner`` flag is set, which it is for ``consistent``, ``murmur2``
and ``fnv1a`` (and for every partitioner when ``sticky.partitioning.linger.ms``
is 0). confluent-kafka passes ``key=None`` as NULL and ``key=b""`` as a
zero-length, non-NULL key.

=================  =========================  ===========================
partitioner        null key (``None``)        empty key (``b""``)
=================  =========================  ===========================
consistent         crc32(b"") % n = 0         crc32(b"") % n = 0
consistent_random  random (sticky)            random (sticky)
murmur2            murmur2(b"") rule          murmur2(b"") rule
murmur2_random     random (sticky)            murmur2(b"") rule (Java-like)
fnv1a              fnv1a(b"") rule            fnv1a(b"") rule
fnv1a_random       random (sticky)            fnv1a(b"") rule
random             random (sticky)            random (each record)
=================  =========================  ===========================

"random (sticky)": with ``sticky.partitioning.linger.ms`` > 0 (default 10 ms)
librdkafka keeps sending keyless records to one random partition for that long,
like Java's sticky partitioner. :func:`librdkafka_partition` returns ``None``
where there is no deterministic answer. The Java producer hashes an empty
``byte[]`` key too (only a null key is sticky), so :func:`java_partition` accepts
``b""``.
"""

from __future__ import annotations

import subprocess
import zlib
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

from .errors import LabkitError

Key = Union[bytes, str, None]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


class PartitioningError(LabkitError):
    """Raised when a partitioning function gets input it cannot place (bad key type, no partitions)."""


def _key_bytes(key: Key) -> Optional[bytes]:
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    raise PartitioningError(f"A key must be bytes, str or None, not {type(key).__name__}.",
                            "Encode it first, e.g. str(key).encode().")


def _check_partitions(num_partitions: int) -> None:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise PartitioningError(f"num_partitions must be a positive int, not {num_partitions!r}.",
                                "A topic has at least one partition.")


def _signed32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def murmur2(data: Union[bytes, str]) -> int:
    """Kafka's murmur2 hash, bit-exact with Java's ``Utils.murmur2``: a signed 32-bit int.

    MurmurHash2 with seed 0x9747b28c, m = 0x5bd1e995, r = 24: the key is read as
    little-endian 4-byte words; the 1 to 3 bytes left over are folded in last
    (``h ^= b[2] << 16; h ^= b[1] << 8; h ^= b[0]; h *= m``, falling through like
    Java's ``switch``). All arithmetic wraps at 32 bits; the result is returned
    the way Java's ``int`` holds it, so it can be negative. ``str`` keys are
    hashed as their UTF-8 bytes, as Kafka's ``StringSerializer`` sends them.
    """
    data = _key_bytes(data)
    if data is None:
        raise PartitioningError("murmur2 needs bytes, not None.", "A null key is not hashed: see the module docs.")
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[full + 2] << 16
    if tail >= 2:
        h ^= data[full + 1] << 8
    if tail >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _signed32(h)


def to_positive(x: int) -> int:
    """Java's ``Utils.toPositive``: clears the sign bit (``x & 0x7fffffff``) — not ``abs()``."""
    return x & 0x7FFFFFFF


def java_partition(key: Union[bytes, str], num_partitions: int) -> int:
    """The partition a Java producer picks for a keyed record: ``toPositive(murmur2(key)) % numPartitions``."""
    _check_partitions(num_partitions)
    data = _key_bytes(key)
    if data is None:
        raise PartitioningError("java_partition needs a key; the Java producer spreads keyless records "
                                "with its sticky partitioner.", "Pass the key's bytes.")
    return to_positive(murmur2(data)) % num_partitions


def fnv1a(data: bytes) -> int:
    """The 32-bit FNV-1a hash (offset basis 0x811c9dc5, prime 0x01000193), as an unsigned int.

    librdkafka's ``rd_fnv1a`` (``src/rdfnv1a.c``) computes this same hash in an
    ``int32_t`` and then returns its absolute value (see :func:`fnv1a_partition`).
    """
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & _MASK32
    return h


def crc32(data: bytes) -> int:
    """CRC-32 as librdkafka's ``rd_crc32`` (the same as zlib's), unsigned."""
    return zlib.crc32(data) & _MASK32


def _consistent(key: Optional[bytes], n: int) -> Optional[int]:
    return crc32(key or b"") % n


def _consistent_random(key: Optional[bytes], n: int) -> Optional[int]:
    return None if not key else crc32(key) % n


def _murmur2(key: Optional[bytes], n: int) -> Optional[int]:
    return to_positive(murmur2(key or b"")) % n


def _murmur2_random(key: Optional[bytes], n: int) -> Optional[int]:
    return None if key is None else to_positive(murmur2(key)) % n


def fnv1a_partition(key: bytes, n: int) -> int:
    """librdkafka's fnv1a rule: ``rd_fnv1a(key) % n``.

    ``rd_fnv1a`` reads the hash as a *signed* int32 and returns its absolute value
    (to match Sarama's, the Go client's, ``NewHashPartitioner``); the ``%`` is then
    done on the unsigned result. ``abs(INT32_MIN)`` overflows back to 0x80000000,
    i.e. 2**31 unsigned, which Python's ``abs`` gives as well.
    """
    return abs(_signed32(fnv1a(key))) % n


def _fnv1a(key: Optional[bytes], n: int) -> Optional[int]:
    return fnv1a_partition(key or b"", n)


def _fnv1a_random(key: Optional[bytes], n: int) -> Optional[int]:
    return None if key is None else fnv1a_partition(key, n)


def _random(key: Optional[bytes], n: int) -> Optional[int]:
    return None


#: librdkafka's ``partitioner`` values -> model. ``None`` from a model means "random, no single answer".
PARTITIONERS: dict[str, Callable[[Optional[bytes], int], Optional[int]]] = {
    "consistent_random": _consistent_random,
    "consistent": _consistent,
    "murmur2_random": _murmur2_random,
    "murmur2": _murmur2,
    "fnv1a_random": _fnv1a_random,
    "fnv1a": _fnv1a,
    "random": _random,
}

#: What confluent-kafka uses when ``partitioner`` is not set.
DEFAULT_PARTITIONER = "consistent_random"


def librdkafka_partition(key: Key, num_partitions: int, partitioner: str = DEFAULT_PARTITIONER) -> Optional[int]:
    """The partition confluent-kafka's producer picks for ``key`` with the given ``partitioner`` setting.

    Returns ``None`` when librdkafka picks at random (see the table in the module docs).
    """
    _check_partitions(num_partitions)
    if partitioner not in PARTITIONERS:
        raise PartitioningError(f"Unknown partitioner {partitioner!r}.",
                                f"librdkafka's partitioners: {', '.join(PARTITIONERS)}.")
    return PARTITIONERS[partitioner](_key_bytes(key), num_partitions)


def predict_partitions(keys: Iterable[Key], num_partitions: int,
                       partitioner: str = DEFAULT_PARTITIONER) -> list[Optional[int]]:
    """:func:`librdkafka_partition` for many keys (``partitioner="java"`` for :func:`java_partition`)."""
    if partitioner == "java":
        return [java_partition(k, num_partitions) for k in keys]  # type: ignore[arg-type]
    return [librdkafka_partition(k, num_partitions, partitioner) for k in keys]


def partition_counts(keys: Iterable[Key], num_partitions: int, partitioner: str = DEFAULT_PARTITIONER) -> Counter:
    """How many of ``keys`` each partition receives under ``partitioner``."""
    return Counter(predict_partitions(keys, num_partitions, partitioner))


_JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "Murmur2.java"


def java_reference_murmur2(keys: Iterable[Union[bytes, str]]) -> list[int]:
    """Run Java's real ``org.apache.kafka.common.utils.Utils.murmur2`` on ``keys`` (the ground truth).

    Runs the small ``labkit/java/Murmur2.java`` (compiled once, then started like Kafka's own tools,
    on their class-data archive) with the cached Kafka jars on its class path; one JVM for all keys
    (about half a second).
    """
    from .runtime import classdata
    from .runtime.distribution import ensure_distribution
    from .runtime.jvm import find_java
    from .runtime.tools import java_tool_command

    data = [_key_bytes(k) for k in keys]
    if any(d is None for d in data):
        raise PartitioningError("java_reference_murmur2 needs bytes keys, not None.", "Drop null keys.")
    if not data:
        return []
    dist = ensure_distribution(progress=False)
    jar = classdata.compiled_jar(dist, _JAVA_SOURCE, "labkit-murmur2")
    if jar is None:  # no javac: the JVM compiles the source in memory (a CPU-second more)
        command = [str(find_java().executable), "-cp", dist.classpath, str(_JAVA_SOURCE)]
    else:
        command = java_tool_command(dist, "Murmur2", extra_jars=[jar])
    try:
        proc = subprocess.run(command, input="\n".join(d.hex() for d in data) + "\n",  # type: ignore[union-attr]
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise LabkitError("Java's murmur2 reference did not answer within 120 s.",
                          "The machine may be overloaded; try again, or run `labkit doctor`.") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        first = next((line.strip() for line in lines if "error" in line or "Exception" in line), lines[-1])
        first = first.rstrip(".")
        raise LabkitError(f"Java's murmur2 reference failed (exit {proc.returncode}): {first}.",
                          "Run `labkit doctor` to check Java and the Kafka jars.")
    values = [int(line) for line in proc.stdout.split()]
    if len(values) != len(data):
        raise LabkitError(f"Java's murmur2 reference returned {len(values)} values for {len(data)} keys.",
                          "Run `labkit doctor`.")
    return values
