"""The exercise notebook murmur2: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · murmur2 from scratch", exercise="murmur2")

nb.md("""
# Exercise · murmur2 from scratch

Every keyed record a Java producer sends goes to partition `toPositive(murmur2(key)) % numPartitions`.
In this exercise you write **murmur2** yourself, in pure Python, so that it returns *exactly* what
Java's `org.apache.kafka.common.utils.Utils.murmur2` returns — the grader compares your function
with Java's, run from the lab's Kafka jars, on keys you have never seen.

*About 25 minutes. Goes with lesson 02.*
""")

nb.md("""
## Setup

The first cell checks the machine and loads this exercise's checks. This exercise needs no cluster.
""")
nb.code("""
import labkit
from labkit.grading import exercise

labkit.setup_check()
ex = exercise("murmur2")
""")

nb.md("""
## The algorithm

Kafka's murmur2 (MurmurHash2 by Austin Appleby, 32-bit, with Kafka's seed) works on the key's bytes:

```text
m = 0x5bd1e995,  r = 24,  seed = 0x9747b28c
h = seed ^ length
for each full 4-byte block (little-endian: k = b0 | b1<<8 | b2<<16 | b3<<24):
    k *= m;  k ^= k >>> r;  k *= m
    h *= m;  h ^= k
tail (1–3 leftover bytes, falling through like a C switch):
    3 left: h ^= b2 << 16
    2 left: h ^= b1 << 8
    1 left: h ^= b0;  h *= m
finally:
    h ^= h >>> 13;  h *= m;  h ^= h >>> 15
```

Java does all of this in a 32-bit `int`: every multiplication wraps around, `>>>` is an *unsigned*
shift, and the result is **signed** (between −2³¹ and 2³¹−1). Python integers never wrap, so:

* keep `h` and `k` in 32 bits by masking with `& 0xFFFFFFFF` after each multiplication;
* with the values kept non-negative, Python's `>>` behaves like Java's `>>>`;
* at the very end, turn the 32 bits into Java's signed value: subtract `2**32` when bit 31 is set.
""")

nb.md("""
## Task 1 — `murmur2(data: bytes) -> int`

Write it below. Test it on a few keys as you go; Kafka's own unit test says
`murmur2(b"21") == -973932308`.
""")
nb.code('''
def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data``, as Java's signed 32-bit int."""
    ### BEGIN SOLUTION
    mask = 0xFFFFFFFF
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    left = length % 4
    if left == 3:
        h ^= data[full + 2] << 16
    if left >= 2:
        h ^= data[full + 1] << 8
    if left >= 1:
        h ^= data[full]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
    ### END SOLUTION
''')
nb.code("""
print(murmur2(b"21"), murmur2(b"foobar"))
""")
nb.md("""
### Check your work

This runs the visible checks. The grader also runs hidden ones: every tail length, and hundreds
of keys you have not seen, compared with Java.
""")
nb.code("""
ex.check(globals())
""")

nb.md("""
## Task 2 — from hash to partition

Write `to_positive(x)` exactly as Java's `Utils.toPositive` (it clears the sign bit — it is **not**
`abs()`), and `java_partition(key, num_partitions)`, the partition the Java producer picks for a
keyed record.
""")
nb.code('''
def to_positive(x: int) -> int:
    ### BEGIN SOLUTION
    return x & 0x7FFFFFFF
    ### END SOLUTION


def java_partition(key: bytes, num_partitions: int) -> int:
    ### BEGIN SOLUTION
    return to_positive(murmur2(key)) % num_partitions
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.get_graded()
