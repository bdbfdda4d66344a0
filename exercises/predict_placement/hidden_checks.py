"""Hidden checks of predict_placement (the grader's only): topics, partition counts, partitioners and keys
chosen now; where the records land is what the grader's own producer is told by the broker."""

from __future__ import annotations

import random

from labkit.grading import GraderFault, check, sibling
from labkit.grading.harness import acknowledged, unique
from labkit.partitioning import librdkafka_partition

checks = sibling(__file__)


def _keys(rng: random.Random, count: int) -> list[bytes]:
    half = count // 2
    return (checks.keys_for(rng, half)
            + [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 30))) for _ in range(count - half)])


@check("predictions_match_the_broker_on_unseen_topics", points=4, hidden=True)
def predictions_match_the_broker_on_unseen_topics(ns):
    """For every supported partitioner, on a new topic with a partition count chosen now, every prediction
    matches the partition the broker stored the record in (text and binary keys, empty keys, and null keys
    where the partitioner is not random)."""
    ns.predict(b"probe", 3, {})  # not attempted yet: say so before producing
    cluster = ns.cluster
    rng = random.Random()
    for partitioner in rng.sample(checks.SUPPORTED, len(checks.SUPPORTED)):
        n = rng.randint(2, 12)
        config = {"partitioner": partitioner}
        topic = cluster.create_topic(unique(f"grade-{partitioner}"), partitions=n)
        keys = _keys(rng, 120)
        if partitioner != "consistent_random":
            keys += [b""] * 3
        if not partitioner.endswith("_random"):
            keys += [None] * 3
        rng.shuffle(keys)
        placed: dict[int, int] = {}
        producer = cluster.producer(partitioner=partitioner)
        for i, key in enumerate(keys):
            producer.produce(topic, key=key, value=str(i).encode(),
                             on_delivery=lambda err, msg: err or placed.__setitem__(int(msg.value()), msg.partition()))  # noqa: B023 - flushed below, in this iteration
            producer.poll(0)
        acknowledged(producer)
        if len(placed) != len(keys):
            raise GraderFault(f"the broker refused {len(keys) - len(placed)} of the grader's own {len(keys)} records")
        got = ns.predict.many([(k, n, config) for k in keys])
        wrong = [(k, g, placed[i]) for i, (k, g) in enumerate(zip(keys, got)) if g != placed[i]]
        assert not wrong, (f"{len(wrong)} of {len(keys)} keys mispredicted for {partitioner} on {n} partitions, "
                           f"e.g. predict({wrong[0][0]!r}) returned {wrong[0][1]!r}, the broker has it in "
                           f"partition {wrong[0][2]}")


@check("random_cases_are_none", points=1, hidden=True)
def random_cases_are_none(ns):
    """predict is None exactly where the client picks at random: a null key under every *_random partitioner
    (the default too), and an empty key under consistent_random."""
    rng = random.Random()
    calls = [(None, rng.randint(1, 50), {"partitioner": p}) for p in ("consistent_random", "murmur2_random",
                                                                      "fnv1a_random")]
    calls += [(None, rng.randint(1, 50), {}), (b"", rng.randint(1, 50), {"partitioner": "consistent_random"}),
              (b"", rng.randint(1, 50), {})]
    for (key, n, config), got in zip(calls, ns.predict.many(calls)):
        assert got is None, f"predict({key!r}, {n}, {config}) returned {got!r}: the client picks at random there"


@check("predict_is_a_model_for_any_partition_count", points=2, hidden=True)
def predict_is_a_model_for_any_partition_count(ns):
    """predict computes the placement (it does not ask a broker): it matches the client's rules for partition
    counts no topic could have (up to a million), with every supported partitioner."""
    rng = random.Random()
    calls = []
    for key in _keys(rng, 300):
        n = rng.randint(20_000, 1_000_000) if rng.random() < 0.8 else rng.randint(1, 500)
        calls.append((key, n, {"partitioner": rng.choice(checks.SUPPORTED)}))
    for (key, n, config), got in zip(calls, ns.predict.many(calls)):
        want = librdkafka_partition(key, n, config["partitioner"])
        assert got == want, f"predict({key!r}, {n}, {config}) returned {got!r}, the client's rule gives {want!r}"


@check("compare_counts_what_predict_placed", points=2, hidden=True)
def compare_counts_what_predict_placed(ns):
    """produce_and_compare on a new topic with a random partitioner and keys that include null ones (placed at
    random, so predict cannot place them): it reports exactly how many stored records are where predict says."""
    rng = random.Random()
    keys = checks.keys_for(rng, rng.randint(30, 60)) + [None] * rng.randint(5, 15)
    rng.shuffle(keys)
    checks.check_compare(ns, keys, partitions=rng.randint(2, 9),
                         partitioner=rng.choice(["consistent_random", "murmur2_random", "fnv1a_random"]))
