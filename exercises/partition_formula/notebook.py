"""The exercise notebook partition_formula: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · The slide with two bugs", exercise="partition_formula")

nb.md("""
# Exercise · The slide with two bugs

A slide copied through many Kafka trainings explains the default partitioner like this:

> partition = `Math.abs(murmur2(key)) % (numPartitions - 1)`

It has **two bugs**. In this exercise you reproduce the slide's formula exactly as Java would run
it, use it to show each bug, and write the formula Kafka really uses.

*About 20 minutes. Goes with lesson 02. No cluster needed.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit.grading import exercise
from labkit.partitioning import murmur2   # Kafka's murmur2, bit-exact with Java (see the murmur2 exercise)

labkit.setup_check()
ex = exercise("partition_formula")
""")

nb.md("""
## Task 1 — Java's arithmetic in Python

Python's integers are not Java's `int`. Write two helpers that behave like Java on 32-bit ints:

* `java_abs(x)` — Java's `Math.abs(int)`. Careful: the positive version of `Integer.MIN_VALUE`
  (−2³¹) does not fit in an `int`.
* `java_rem(a, b)` — Java's `a % b`: the result has the sign of `a` (Python's `%` has the sign of
  `b`), and dividing by zero fails (raise `ZeroDivisionError`).
""")
nb.code('''
MIN_INT = -(2**31)


def java_abs(x: int) -> int:
    ### BEGIN SOLUTION
    return x if x == MIN_INT else abs(x)
    ### END SOLUTION


def java_rem(a: int, b: int) -> int:
    ### BEGIN SOLUTION
    if b == 0:
        raise ZeroDivisionError("/ by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r
    ### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")

nb.md("""
## Task 2 — the slide, exactly

Write `slide_partition(key, n)`, the slide's formula with Java's semantics, and
`slide_partition_of_hash(h, n)`, the same formula starting from a hash value `h` (so you can feed
it the one hash that breaks `Math.abs`). Then answer: on a 6-partition topic, which partition does
the slide **never** use? Put it in `never_used`.
""")
nb.code('''
def slide_partition_of_hash(h: int, n: int) -> int:
    ### BEGIN SOLUTION
    return java_rem(java_abs(h), n - 1)
    ### END SOLUTION


def slide_partition(key: bytes, n: int) -> int:
    ### BEGIN SOLUTION
    return slide_partition_of_hash(murmur2(key), n)
    ### END SOLUTION


### BEGIN SOLUTION
never_used = 5
### END SOLUTION
''')
nb.code("""
print("a hash of -2**31 gives 'partition'", slide_partition_of_hash(MIN_INT, 6))
print("partitions the slide uses on 6:", sorted({slide_partition(f"k{i}".encode(), 6) for i in range(1000)}))
""")
nb.md("""
So the slide (1) never writes to the last partition — and divides by zero on a one-partition
topic — and (2) can produce a **negative** partition when a key's hash is −2³¹, because
`Math.abs` overflows. Kafka avoids both: it divides by `numPartitions`, and clears the sign bit
instead of taking `abs`.

And `Math.abs` is wrong far more often than for that one hash. For **every** negative hash `h`,
Kafka's `toPositive(h)` is `h + 2³¹`, while `Math.abs(h)` is `−h`: two different numbers, which
agree modulo 6 only when their difference `2h + 2³¹` is a multiple of 6 — for one negative hash
in three. Half of all hashes are negative, so even with the modulus fixed to `% numPartitions`,
`Math.abs` sends about **a third of all keys** to a different partition on a 6-partition topic.
Lesson 02 measures that share on the keys a real Java producer wrote, and shows one of them.
""")

nb.md("""
## Task 3 — the real formula

Write `partition_for(key, n)` as Kafka's Java producer computes it for a keyed record, and find a
`disagreeing_key` that a 6-partition topic stores in different partitions under the slide and
under the real formula.
""")
nb.code('''
def partition_for(key: bytes, n: int) -> int:
    ### BEGIN SOLUTION
    return (murmur2(key) & 0x7FFFFFFF) % n
    ### END SOLUTION


### BEGIN SOLUTION
disagreeing_key = next(k for k in (f"order-{i}".encode() for i in range(100))
                       if slide_partition(k, 6) != partition_for(k, 6))
### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.get_graded()
