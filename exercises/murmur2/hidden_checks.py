"""Hidden checks of murmur2 (the grader's only): every tail length, and hundreds of unseen keys, against Java."""

from __future__ import annotations

import random

from labkit.grading import check
from labkit.partitioning import java_reference_murmur2

@check("murmur2_every_tail_length", points=2, hidden=True)
def murmur2_every_tail_length(ns):
    """Keys of every length 0–19 (so 0, 1, 2 and 3 leftover bytes) match Java."""
    rng = random.Random(20261123)
    keys = [bytes(rng.getrandbits(8) for _ in range(n)) for n in range(20) for _ in range(5)]
    java = java_reference_murmur2(keys)
    for key, expected, got in zip(keys, java, ns.murmur2.many([(k,) for k in keys])):
        assert isinstance(got, int), f"expected an int, got {type(got).__name__}"
        assert got == expected, f"a {len(key)}-byte key ({key.hex()}) gives {got}, Java gives {expected}"


@check("murmur2_matches_java_on_unseen_keys", points=3, hidden=True)
def murmur2_matches_java_on_unseen_keys(ns):
    """500 keys the learner has not seen (random bytes, UTF-8 text, long keys) match Java's Utils.murmur2."""
    rng = random.Random()
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))) for _ in range(400)]
    keys += [f"customer-{rng.randint(0, 10**9)}-ünïcødé-東京".encode() for _ in range(90)]
    keys += [bytes(rng.getrandbits(8) for _ in range(rng.randint(500, 3000))) for _ in range(10)]
    java = java_reference_murmur2(keys)
    wrong = [(k, e) for k, e, got in zip(keys, java, ns.murmur2.many([(k,) for k in keys])) if got != e]
    assert not wrong, f"{len(wrong)} of {len(keys)} keys differ from Java, e.g. {wrong[0][0][:16].hex()}…"
