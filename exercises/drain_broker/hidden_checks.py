"""Hidden checks of drain_broker (the grader's only): layouts, racks and throttles chosen at grade time."""

from __future__ import annotations

import random
from collections import Counter

from labkit.grading import check, sibling

checks = sibling(__file__)


def reference_plan(layout: list, racks: dict, broker: int) -> dict:
    """The grader's own plan (a rack-first, least-loaded swap; preferred leaders by fewest choices first): how
    even the preferred leaders can be made for a layout."""
    others = sorted(b for b in racks if b != broker)
    load = Counter(r for _, _, replicas in layout for r in replicas if r != broker)
    new = {}
    for topic, partition, replicas in layout:
        replicas = list(replicas)
        if broker in replicas:
            keep = [r for r in replicas if r != broker]
            used = {racks[r] for r in keep}
            spare = min((b for b in others if b not in keep), key=lambda b: (racks[b] in used, load[b], b))
            load[spare] += 1
            replicas = [spare if r == broker else r for r in replicas]
        new[(topic, partition)] = replicas
    leads: Counter = Counter()
    for key in sorted(new, key=lambda k: (len(new[k]), k)):
        first = min(new[key], key=lambda r: (leads[r], new[key].index(r)))
        leads[first] += 1
        new[key] = [first] + [r for r in new[key] if r != first]
    return new


def random_layout(rng: random.Random) -> tuple[list, dict, int]:
    """A cluster of 4-6 brokers in 2-3 racks, 1-4 topics of 1-8 partitions with replication factor 1-3."""
    brokers = list(range(1, rng.randint(4, 6) + 1))
    names = ["rack-a", "rack-b", "rack-c"][: rng.randint(2, 3)]
    racks = {b: names[(b - 1) % len(names)] for b in brokers}
    broker = rng.choice(brokers)
    layout = []
    for t in range(rng.randint(1, 4)):
        rf = rng.randint(1, 3)
        for p in range(rng.randint(1, 8)):
            layout.append([f"topic-{t}", p, rng.sample(brokers, rf)])
    return layout, racks, broker


@check("plan_on_layouts_chosen_now", points=3, hidden=True)
def plan_on_layouts_chosen_now(ns):
    """On 150 layouts chosen now (4-6 brokers, 2-3 racks, replication factors 1-3, any broker to drain), the plan
    moves only the drained broker's replicas, keeps replication factors and rack spread, and spreads preferred
    leaders as evenly as the grader's own plan does."""
    rng = random.Random()
    cases = [random_layout(rng) for _ in range(150)]
    answers = ns.drain_plan.many([(layout, racks, broker) for layout, racks, broker in cases])
    for (layout, racks, broker), answer in zip(cases, answers):
        new = {(t, p): list(r) for t, p, r in layout}
        for row in answer:
            new[(row["topic"], int(row["partition"]))] = [int(r) for r in row["replicas"]]
        problems = checks.minimal_problems(layout, new, broker) + checks.shape_problems(layout, new, racks, broker)
        assert not problems, f"draining broker {broker} of {layout}: " + "; ".join(problems[:3])
        best = checks.leader_spread(reference_plan(layout, racks, broker), racks, broker)
        spread = checks.leader_spread(new, racks, broker)
        assert spread <= best + 1, (f"draining broker {broker} of {layout}: preferred leaders {spread} apart, "
                                    f"{best} is possible")


@check("drains_a_layout_chosen_now", points=3, hidden=True)
def drains_a_layout_chosen_now(ns):
    """A second drain on the live cluster, with topics, partition counts, replication factors and a throttle
    (1.5-4 MB/s) chosen now: broker 4 empty, every partition in sync with its replication factor and racks,
    nothing lost, the throttle respected and removed, leaders rebalanced."""
    rng = random.Random()
    topics = [(f"t{i}", rng.randint(2, 6), rng.randint(2, 3)) for i in range(rng.randint(2, 3))]
    d = checks.drill(_Again(ns), rng, topics, throttle=rng.randint(1_500_000, 4_000_000))
    checks.assert_drained(d)
    checks.assert_throttled(d)
    checks.assert_leaders(d)


class _Again:
    """``ns`` under another identity, so this drill is not the visible checks' (drills are kept per namespace)."""

    def __init__(self, ns):
        self._ns = ns

    def __getattr__(self, name):
        return getattr(self._ns, name)
