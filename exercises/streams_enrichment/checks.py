"""Checks for streams_enrichment: the learner's Kafka Streams topology, run by the grader on orders chosen now.

The learner hands in two values (see the notebook):

* ``TOPOLOGY`` -- Java DSL statements reading ``orders`` (keyed by order id, JSON with ``customer``, ``amount``
  and ``time``) and the compacted ``customers`` topic (customer id -> region), writing ``revenue``: per region, the
  sum of the amounts of its customers' orders in 1-minute tumbling windows of the orders' ``time``, with a grace of
  30 seconds; each update a JSON ``{"region", "window_start", "revenue"}`` keyed by region;
* ``SETTINGS`` -- the Kafka Streams settings the application runs with.

Both are plain data. The grader compiles and runs them itself (:mod:`labkit.services.streams`) on its own
cluster, on topics and orders made at grade time, in rounds: customers first, then each round of orders once the
application has processed the one before. The answer comes from how the scenario was built (which orders are late
but inside the grace, which too late, which customer moved or was deleted before which round), never from a
model of Kafka Streams; the application's output is read back with a ``read_committed`` consumer. Hidden checks
are in ``hidden_checks.py``.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from labkit.grading import Rules, check
from labkit.grading.harness import unique
from labkit.waiting import Deadline

CLUSTER = "single-broker"
SHARE_CLUSTER = True
#: Nothing of labkit's is the answer here: the topology is the learner's Java, graded by what it writes.
RULES = Rules()

WINDOW_MS, GRACE_MS, ROUND_MS = 60_000, 30_000, 30_000
FIELDS = {"region", "window_start", "revenue"}
REGION_NAMES = ["north", "south", "east", "west", "central", "coast", "alps", "delta", "islands", "valley"]


@check("settings_for_exactly_once", points=1, hint='SETTINGS = {"processing.guarantee": "exactly_once_v2"}')
def settings_for_exactly_once(ns):
    """SETTINGS asks Kafka Streams for exactly-once processing (the v2 protocol of Kafka 3+)."""
    settings = ns.SETTINGS
    assert isinstance(settings, dict), f"SETTINGS must be a dict of Kafka Streams settings, not {type(settings).__name__}"
    guarantee = {k.replace("_", "."): v for k, v in settings.items()}.get("processing.guarantee", "at_least_once")
    assert guarantee == "exactly_once_v2", f"processing.guarantee is {guarantee!r}: a crash would count some orders twice"


@check("joins_and_repartitions", points=1,
       hint="builder.table(customers) for the regions; selectKey the orders by their customer before join(...)")
def joins_and_repartitions(ns):
    """The topology reads orders and the customers table, re-keys the orders by customer (a repartition topic) and
    writes revenue."""
    scenario = Scenario.make(random.Random(), rounds=1, per_round=4)
    with Run(ns, scenario) as run:
        topology = run.app.topology
        sources = set(topology.source_topics())
        assert {run.orders, run.customers} <= sources, (
            f"the topology must read {run.orders!r} and {run.customers!r}; it reads {sorted(sources)}")
        assert run.revenue in topology.sink_topics(), f"nothing in the topology writes to {run.revenue!r}"
        assert topology.repartition_topics(), ("the orders are keyed by order id: re-key them by customer "
                                               "(selectKey) so that Kafka Streams repartitions them before the join")


@check("revenue_per_region_and_window", points=3,
       hint="join the orders with builder.table(customers), groupBy the region, windowedBy a 1-minute TimeWindows "
            "with 30 s grace, aggregate the amounts, and write each update as JSON keyed by region")
def revenue_per_region_and_window(ns):
    """Orders of customers in regions chosen now, in three rounds, none late: every region's revenue in every
    1-minute window, exact."""
    scenario = Scenario.make(random.Random(), rounds=3, per_round=12)
    with Run(ns, scenario) as run:
        run.play()
        run.compare()


# ---------------------------------------------------------------- the scenario (what the grader sends, and its answer)


@dataclass
class Order:
    id: str
    customer: str
    amount: int
    time_ms: int
    #: "on_time", "late" (its window ended before orders already processed, but less than the grace before) or
    #: "too_late" (its window closed more than the grace before).
    kind: str = "on_time"

    def value(self) -> str:
        moment = datetime.fromtimestamp(self.time_ms / 1000, tz=timezone.utc)
        return json.dumps({"order": self.id, "customer": self.customer, "amount": self.amount,
                           "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.time_ms % 1000:03d}Z"})


@dataclass
class Round:
    #: Customer changes sent (and processed) before the round's orders: {customer: region, or None to delete}.
    changes: dict[str, Optional[str]] = field(default_factory=dict)
    orders: list[Order] = field(default_factory=list)
    #: Late orders, sent once the round's orders have been processed.
    late: list[Order] = field(default_factory=list)


@dataclass
class Scenario:
    customers: dict[str, str]
    rounds: list[Round]
    base_ms: int

    @classmethod
    def make(cls, rng: random.Random, rounds: int, per_round: int, late: int = 0, too_late: int = 0,
             moves: int = 0, deletions: int = 0) -> "Scenario":
        """Rounds of 30 s of event time from ten minutes ago (a topic's retention would delete older records),
        starting 15 s past a minute.

        Every region gets an order in the last 2 s of every round, so that each partition's stream time
        reaches the round's end. In the rounds that end 15 s past a minute W, late orders of the window ending
        at W follow once the round is processed: that window ended 13-15 s of stream time before (without
        grace, closed), and the 30 s grace keeps it open past the round's end. A too-late order's window
        closed at least 4 s plus the grace before the previous round's last orders, so it is dropped whatever
        its partition saw. Before round 2, ``moves`` customers change region and ``deletions`` are deleted.
        """
        now = int(time.time() * 1000)
        base = now - now % WINDOW_MS - 10 * WINDOW_MS + 15_000
        names = rng.sample(REGION_NAMES, 4)
        customers = {f"c{n:03d}": names[i % len(names)] for i, n in enumerate(rng.sample(range(1000), 14))}
        current, made, seq = dict(customers), [], 0
        for r in range(1, rounds + 1):
            start, end = base + (r - 1) * ROUND_MS, base + r * ROUND_MS
            step = Round()
            if r == 2 and (moves or deletions):
                picked = rng.sample(sorted(current), moves + deletions)
                for c in picked[:moves]:
                    step.changes[c] = rng.choice([n for n in names if n != current[c]])
                for c in picked[moves:]:
                    step.changes[c] = None
                for c, region in step.changes.items():
                    if region is None:
                        current.pop(c)
                    else:
                        current[c] = region

            def order(customer: str, t: int, kind: str = "on_time") -> Order:
                nonlocal seq
                seq += 1
                return Order(f"o-{rng.randrange(16**6):06x}-{seq}", customer, rng.randint(1, 99), t, kind)

            by_region = {n: [c for c in sorted(current) if current[c] == n] for n in names}
            everyone = sorted(set(customers))  # deleted customers keep ordering: those orders find no region
            step.orders += [order(rng.choice(by_region[n]), end - rng.randint(1, 2000)) for n in names if by_region[n]]
            step.orders += [order(rng.choice(everyone), start + rng.randrange(ROUND_MS)) for _ in range(per_round)]
            if late and end % WINDOW_MS == 15_000:
                closed = end - 15_000
                step.late = [order(rng.choice(everyone), closed - rng.randint(1, WINDOW_MS), "late")
                             for _ in range(late)]
            closed_before = start - 4_000 - GRACE_MS  # a window ending by then is closed for every partition
            if too_late and closed_before - closed_before % WINDOW_MS > base:
                last_closed = closed_before - closed_before % WINDOW_MS
                step.orders += [order(rng.choice(everyone), rng.randrange(base, last_closed), "too_late")
                                for _ in range(too_late)]
            rng.shuffle(step.orders)
            made.append(step)
        return cls(customers, made, base)

    def expected(self) -> dict[tuple[str, int], int]:
        """{(region, window start ms): revenue}: the orders counted, at the region their customer had."""
        current, totals = dict(self.customers), {}
        for step in self.rounds:
            for customer, region in step.changes.items():
                if region is None:
                    current.pop(customer, None)
                else:
                    current[customer] = region
            for o in step.orders + step.late:
                if o.kind == "too_late" or o.customer not in current:
                    continue
                key = (current[o.customer], o.time_ms - o.time_ms % WINDOW_MS)
                totals[key] = totals.get(key, 0) + o.amount
        return totals


# ---------------------------------------------------------------- running the learner's topology


class Run:
    """The learner's application on fresh topics of the grader's cluster; stopped (and its topics kept) on exit."""

    def __init__(self, ns: Any, scenario: Scenario, partitions: int = 3,
                 overrides: Optional[dict[str, Any]] = None) -> None:
        from labkit.services import streams

        self.ns, self.scenario, self.cluster = ns, scenario, ns.cluster
        tag = uuid.uuid4().hex[:6]
        self.orders = self.cluster.create_topic(f"orders-{tag}", partitions=partitions)
        self.customers = self.cluster.create_topic(f"customers-{tag}", partitions=partitions,
                                                   config={"cleanup.policy": "compact"})
        self.revenue = self.cluster.create_topic(f"revenue-{tag}", partitions=1)
        # murmur2, as Kafka's Java clients and Kafka Streams' repartition topics: a customer's row must sit in the
        # partition its re-keyed orders go to (librdkafka's default, CRC32, would put many elsewhere)
        self.producer = self.cluster.producer(partitioner="murmur2_random", enable_idempotence=True, linger_ms=5)
        self.send_customers(scenario.customers)
        code, settings = ns.TOPOLOGY, ns.SETTINGS
        assert isinstance(code, str) and code.strip(), "TOPOLOGY must be the Java code of your topology, as a string"
        assert isinstance(settings, dict), "SETTINGS must be a dict of Kafka Streams settings"
        try:
            # overrides: the grader's own settings for one check, over the learner's (a correct application is
            # correct with any of them)
            self.app = streams.app(self.cluster, code, name=unique("revenue-app"),
                                   config={**settings, **(overrides or {})}, params={"orders": self.orders, "customers": self.customers, "revenue": self.revenue})
        except streams.StreamsCompileError as error:
            raise AssertionError(str(error).split("\n", 1)[1].rsplit("\n", 1)[0]) from None
        except streams.StreamsAppError as error:
            raise AssertionError(f"the application stopped: {error.reason[:400]}") from None

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
        for instance in self.app.instances:
            instance.kill()

    def send_customers(self, rows: dict[str, Optional[str]]) -> None:
        for customer, region in rows.items():
            self.producer.produce(self.customers, key=customer, value=region)
        assert self.producer.flush(30) == 0, "the grader's customers were not all acknowledged"

    def send_orders(self, orders: list[Order]) -> None:
        for o in orders:
            self.producer.produce(self.orders, key=o.id, value=o.value())
            self.producer.poll(0)
        assert self.producer.flush(30) == 0, "the grader's orders were not all acknowledged"

    def caught_up(self, timeout: float = 90.0) -> None:
        from labkit.services import streams
        from labkit.waiting import WaitTimeout

        try:
            self.app.wait_caught_up(timeout)
        except streams.StreamsAppError as error:
            raise AssertionError(f"the application stopped: {error.reason[:400]}") from None
        except WaitTimeout:
            raise AssertionError(f"the application did not process the orders within {timeout:.0f} s") from None

    def play(self) -> None:
        """Every round: its customer changes, then its orders, each processed before the next is sent."""
        self.caught_up()
        for step in self.scenario.rounds:
            if step.changes:
                self.send_customers(step.changes)
                self.caught_up()
            self.send_orders(step.orders)
            self.caught_up()
            if step.late:
                self.send_orders(step.late)
                self.caught_up()

    def results(self) -> dict[tuple[str, int], list[float]]:
        """Every update the application wrote that a read_committed reader sees, per (region, window start)."""
        updates: dict[tuple[str, int], list[float]] = {}
        for record in self.cluster.read_all(self.revenue, isolation_level="read_committed"):
            key = record.key.decode(errors="replace") if record.key is not None else None
            region, start, revenue = parse(key, record.value)
            updates.setdefault((region, start), []).append(revenue)
        return updates

    def compare(self, expected: Optional[dict[tuple[str, int], int]] = None) -> dict[tuple[str, int], list[float]]:
        """AssertionError naming what differs unless each window's last update is the expected revenue."""
        expected = self.scenario.expected() if expected is None else expected
        updates = self.results()  # after caught_up(): under exactly-once, no transaction left open on revenue
        latest = {k: v[-1] for k, v in updates.items()}
        missing = sorted(set(expected) - set(latest))
        extra = sorted(set(latest) - set(expected))
        wrong = sorted(k for k in set(expected) & set(latest) if abs(latest[k] - expected[k]) > 1e-6)
        problems = []
        if missing:
            problems.append(f"{len(missing)} of {len(expected)} region windows missing, e.g. {label(missing[0])}")
        if extra:
            problems.append(f"{len(extra)} region windows that should not exist, e.g. {label(extra[0])}: "
                            f"{latest[extra[0]]:g}")
        if wrong:
            problems.append(f"{len(wrong)} windows with a wrong revenue, e.g. {label(wrong[0])}: {latest[wrong[0]]:g} "
                            f"instead of {expected[wrong[0]]}")
        assert not problems, "; ".join(problems)
        return updates


def label(key: tuple[str, int]) -> str:
    return f"{key[0]} at {datetime.fromtimestamp(key[1] / 1000, tz=timezone.utc):%H:%M}"


def parse(key: Optional[str], value: Optional[bytes]) -> tuple[str, int, float]:
    """One revenue record -> (region, window start ms, revenue); AssertionError saying what is wrong with it."""
    text = value.decode(errors="replace") if value is not None else None
    assert text is not None, "a revenue record has no value (write each update, not tombstones)"
    try:
        doc = json.loads(text)
    except ValueError:
        raise AssertionError(f"a revenue value is not JSON: {text[:120]!r}") from None
    assert isinstance(doc, dict) and set(doc) == FIELDS, (
        f"a revenue value must be a JSON object with exactly {sorted(FIELDS)}, got {text[:160]}")
    assert key == doc["region"], f"a revenue record's key must be its region ({doc['region']!r}), got {key!r}"
    try:
        start = datetime.fromisoformat(str(doc["window_start"]).replace("Z", "+00:00"))
    except ValueError:
        raise AssertionError(f"window_start must be an ISO-8601 time like 2025-01-01T12:03:00Z: {text[:160]}") from None
    start = start if start.tzinfo else start.replace(tzinfo=timezone.utc)
    assert isinstance(doc["revenue"], (int, float)) and not isinstance(doc["revenue"], bool), \
        f"revenue must be a JSON number: {text[:160]}"
    return doc["region"], int(start.timestamp() * 1000), float(doc["revenue"])


def committed(run: Run) -> tuple:
    """The application's committed offsets on every topic it reads (its commits, seen from outside)."""
    from labkit.services import streamsgroup

    return tuple(streamsgroup.lag(run.app)["committed"])


def kill_between_commits(run: Run, quiet: float = 30.0, limit: float = 180.0) -> None:
    """SIGKILL the application's instance right after it wrote an update that no commit has covered yet.

    With a long ``commit.interval.ms`` (the caller's), an update that a read_uncommitted reader has just seen,
    with the committed offsets the same before and after it, comes from records processed since the last
    commit: the restarted instance processes them again. Under exactly-once the update was in the open
    transaction, aborted by the crash; written any other way it is written twice. A random moment instead
    often fell between a commit and the next order on a busy machine, and a cheat went unseen.

    Under exactly-once an order reaches the revenue topic only after a commit per repartition topic on its way
    (a read_committed hop each): two commit intervals at least, more on a busy machine. So the wait is for as
    long as the application keeps committing (its progress), and gives up ``quiet`` seconds after its last
    commit with no update seen, or after ``limit`` in all.
    """
    from confluent_kafka import OFFSET_END, TopicPartition

    watcher = run.cluster.consumer(unique("crash-watch"), isolation_level="read_uncommitted")
    watcher.assign([TopicPartition(run.revenue, 0, OFFSET_END)])
    overall, progressed = Deadline(limit), Deadline(quiet)  # a quiet machine's seconds
    try:
        before = committed(run)
        while not progressed.expired() and not overall.expired():
            message = watcher.poll(1.0)
            after = committed(run)  # read once per update: it is the next update's "before"
            if message is not None and message.error() is None and after == before:
                run.app.instances[0].kill()
                return
            if after != before:
                progressed = Deadline(quiet)
            before = after
        raise AssertionError(f"the application wrote no update between two commits while orders kept coming (its "
                             f"last commit {progressed.wall:.0f} s ago, {overall.wall:.0f} s of watching)")
    finally:
        watcher.close()


def feed(run: Run, orders: list[Order], seconds: float) -> threading.Thread:
    """Send ``orders`` in the background, spread over about ``seconds``."""
    def send() -> None:
        pause = seconds / max(1, len(orders) / 20)
        for i in range(0, len(orders), 20):
            run.send_orders(orders[i:i + 20])
            time.sleep(pause)

    thread = threading.Thread(target=send, name="grader-orders", daemon=True)
    thread.start()
    return thread


__all__ = ["Order", "Round", "Run", "Scenario", "committed", "feed", "kill_between_commits"]
