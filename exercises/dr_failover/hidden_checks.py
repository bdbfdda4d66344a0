"""Hidden checks of dr_failover (the grader's only): checkpoints chosen now, decoded and read back."""

from __future__ import annotations

import random
import uuid

from labkit.grading import check, sibling
from labkit.grading.harness import attempted

checks = sibling(__file__)

_WORDS = ["billing", "reports", "fraud", "zahlungen", "commandes", "注文", "grupa-ł", "x"]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}{rng.choice(['', '-', '.', '_'])}{rng.randint(0, 10**rng.randint(0, 6))}"


@check("decodes_random_checkpoints", points=2, hidden=True)
def decodes_random_checkpoints(ns):
    """300 checkpoints made now: any UTF-8 names, partitions up to 2**31 - 1, offsets up to 2**62, metadata."""
    rng = random.Random()
    cases = []
    for _ in range(300):
        fields = (_name(rng), f"{_name(rng)}.{_name(rng)}", rng.randint(0, 2**31 - 1), rng.randint(0, 2**62),
                  rng.randint(0, 2**rng.choice([8, 31, 62])), rng.choice(["", "", "meta", "ünïcode " * 3]))
        cases.append((fields, checks.encode(*fields)))
    got = ns.decode_checkpoint.many([kv for _, kv in cases])
    for (fields, _), answer in zip(cases, got):
        assert checks.as_tuple(answer) == fields[:5], f"for {fields[:5]} got {answer}"


@check("translates_from_a_busy_topic", points=2, hidden=True)
def translates_from_a_busy_topic(ns):
    """A checkpoints topic of 3 partitions written now: several groups and remote topics, many updates per key,
    partitions without a checkpoint of the group; the latest per partition of the group's remote topic."""
    attempted(ns, "decode_checkpoint", "translated_offsets")
    rng = random.Random()
    alias = f"{rng.choice(['east', 'west', 'dc1'])}-{uuid.uuid4().hex[:6]}"
    group, other = f"team-{uuid.uuid4().hex[:4]}", f"other-{uuid.uuid4().hex[:4]}"
    topics = [f"{alias}.orders", f"{alias}.payments", f"{alias}.orders-archive"]
    partitions = rng.randint(4, 9)
    records, expected = [], {}
    position = {}
    for _ in range(rng.randint(120, 220)):
        g, t, p = rng.choice([group, group, other]), rng.choice(topics), rng.randrange(partitions)
        if p == partitions - 1 and g == group and t == topics[0]:
            continue  # the group never committed on the last partition
        downstream = position.get((g, t, p), 0) + rng.randint(0, 150)
        position[(g, t, p)] = downstream
        records.append((g, t, p, downstream + rng.randint(0, 400), downstream, ""))
        if g == group and t == topics[0]:
            expected[p] = downstream
    checks.write_checkpoints(ns.cluster, alias, records, partitions=3)
    got = checks.normal(ns.translated_offsets(ns.cluster.bootstrap_servers, group, alias, "orders"))
    assert got == expected, f"got {got}, expected {expected}"


#: The questions' right letters live here, on the trainer's side only (hidden checks are not in the learner bundle).
ANSWERS = {"WHY_TWICE": "b", "UPSTREAM_ON_DR": "c"}


def _letter(ns, name: str) -> str:
    answer = getattr(ns, name)          # not set yet: NotImplementedError, "not attempted"
    assert isinstance(answer, str) and answer.strip().lower() in ("a", "b", "c", "d"), \
        f"{name} must be one letter (a, b, c or d), not {answer!r}"
    return answer.strip().lower()


@check("why_some_records_twice", points=1, hidden=True)
def why_some_records_twice(ns):
    """WHY_TWICE: the duplicates of a failover at translated offsets are the group's own at-least-once window
    plus the gap to the last offset sync."""
    assert _letter(ns, "WHY_TWICE") == ANSWERS["WHY_TWICE"], "not the source of the duplicates the drill counts"


@check("upstream_offset_on_dr", points=1, hidden=True)
def upstream_offset_on_dr(ns):
    """UPSTREAM_ON_DR: a checkpoint's upstream offset is in primary's numbering, not dr's."""
    assert _letter(ns, "UPSTREAM_ON_DR") == ANSWERS["UPSTREAM_ON_DR"], \
        "compare the two offset columns of a checkpoint with where the same record sits on dr"

