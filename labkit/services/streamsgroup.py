"""A Kafka Streams application's group on the broker: its tasks, its lag, and Kafka's tools for it.

The ``application.id`` is the group id. Its committed offsets say how far the application got through
each topic it reads (the repartition topics it writes and reads back included); Kafka's own tools
describe the group (``kafka-consumer-groups`` for the classic protocol, ``kafka-streams-groups`` for the
streams protocol of KIP-1071) and reset the application: ``kafka-streams-application-reset`` (classic)
or ``kafka-streams-groups --reset-offsets`` (streams). The functions take an
:class:`~labkit.services.streams.App`; its methods of the same names call them.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any, Optional

from ..errors import LabkitError
from .streamsbuild import StreamsAppError

if TYPE_CHECKING:
    import pandas as pd

#: An :class:`~labkit.services.streams.App` (named by its module, which imports this one).
App = Any


def task_count(app: App) -> int:
    """How many tasks the application has: per subtopology, as many as its source topics have partitions
    (0 before an instance has described the topology)."""
    if not any((i.directory / "topology.json").exists() for i in app.instances):
        return 0
    counts: dict[int, int] = {}
    for node in app.topology.nodes:
        for topic in node.topics if node.kind == "source" else ():
            try:
                n = len(app.cluster.describe_topic(app.topology.broker_name(topic)).partitions)
            except LabkitError:
                n = 0  # a repartition topic not created yet
            counts[node.subtopology] = max(counts.get(node.subtopology, 0), n)
    return sum(counts.values())


def _partitions(app: App, topics: list[str]) -> tuple[list[Any], list[str]]:
    """Every partition the cluster has of the topology's ``topics`` (TopicPartitions under their names on the
    broker, in order), and the names of those it does not have yet."""
    from confluent_kafka import TopicPartition

    names = [app.topology.broker_name(topic) for topic in topics]
    there = app.cluster.admin().list_topics(timeout=10).topics
    wanted = [TopicPartition(name, p) for name in names if name in there for p in sorted(there[name].partitions)]
    return wanted, [name for name in names if name not in there]


def lag(app: App) -> "pd.DataFrame":
    """Per partition of every topic the application reads: end offset, committed offset, the records between
    (end and lag empty where the partition's end offset could not be read)."""
    import pandas as pd
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import OffsetSpec

    from ..admin import list_offsets

    admin = app.cluster.admin()
    wanted, missing = _partitions(app, app.topology.source_topics())
    # The commits first, then the ends: read the other way round, a record the application wrote to its own
    # repartition topic after that topic's end was read, in the same moment as it committed the input record it came
    # from, looked processed (no lag anywhere) while it was not. Read this way, anything written or committed
    # between the two reads shows as lag.
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app.name, wanted)])
    committed = {(tp.topic, tp.partition): tp.offset for tp in found[app.name].result(timeout=20).topic_partitions}
    ends = list_offsets(admin, wanted, OffsetSpec.latest(), timeout=10)  # each partition's high watermark
    rows = [{"topic": tp.topic, "partition": tp.partition, "end": ends[(tp.topic, tp.partition)]} for tp in wanted]
    rows += [{"topic": name, "partition": None, "end": None} for name in missing]  # not there yet
    for row in rows:
        row["committed"] = max(committed.get((row["topic"], row["partition"]), -1), 0)
        row["lag"] = None if row["end"] is None else max(row["end"] - row["committed"], 0)
    return pd.DataFrame(rows, columns=["topic", "partition", "end", "committed", "lag"])


def members(app: App) -> list[str]:
    """The client ids of the group's members as its coordinator sees them (classic protocol). A killed or frozen
    instance stays a member until its session times out; by the time it is dropped, the coordinator has handled
    everything the instance sent before, a commit on its way included."""
    from confluent_kafka import KafkaError, KafkaException

    if app.protocol == "streams":
        raise StreamsAppError(f"{app.name} uses the streams protocol, whose groups the admin client here cannot "
                              "describe.", "app.describe() shows its members (kafka-streams-groups).")
    admin = app.cluster.admin()
    try:
        found = admin.describe_consumer_groups([app.name], request_timeout=10)[app.name].result(timeout=20)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return []
        raise
    return sorted(m.client_id for m in found.members)


def open_transactions(app: App) -> list[tuple[str, int]]:
    """Partitions of the topics the application writes where a read_committed reader stops short of the end
    (its last stable offset is below the high watermark): a transaction is still open there. Partitions whose
    offsets could not be read are listed too; a topic not created yet has had nothing written to it."""
    from confluent_kafka.admin import OffsetSpec

    from ..admin import list_offsets

    admin = app.cluster.admin()
    wanted, _ = _partitions(app, app.topology.sink_topics())
    stable = list_offsets(admin, wanted, OffsetSpec.latest(), timeout=10, committed=True)
    ends = list_offsets(admin, wanted, OffsetSpec.latest(), timeout=10)
    return [key for key, offset in stable.items() if offset is None or offset != ends[key]]


def wait_caught_up(app: App, timeout: float = 120.0) -> "pd.DataFrame":
    """Wait until the group committed every record of every topic it reads; under exactly-once a repartition
    topic ends with the marker of the application's own last transaction, which is not a record to commit.

    Under exactly-once also until no transaction is open on the topics it writes: the last one commits the
    offsets and the output together, but its markers reach the output a moment after the offsets read as
    committed, and a read_committed reader stops before them until then."""
    eos = str(app.config.get("processing.guarantee", "")).startswith("exactly_once")
    internal = {app.topology.broker_name(t) for t in app.topology.repartition_topics()}

    def done() -> bool:
        for instance in app.running:
            assert instance.process is not None
            instance.process.check_alive()
        frame = lag(app)
        slack = frame["topic"].isin(internal) & eos
        known = frame["lag"].notna().all()  # an end offset not read (a slow broker) is not "caught up"
        committed = bool(known and ((frame["lag"] == 0) | (slack & (frame["lag"] <= 1))).all())
        return committed and not (eos and open_transactions(app))

    running = app.running or app.instances
    if not running or running[0].process is None:
        raise StreamsAppError(f"{app.name} has no instance.", "Start one: app.add_instance().")
    try:
        running[0].process.wait_ready(f"{app.name} to process everything", done, timeout=timeout, interval=0.2,
                                      hint="app.lag() shows where it stands.",
                                      stretch=False)  # a grader's verdict on a learner's topology too
    except LabkitError:
        failed = [i for i in app.instances if i.error and not i.running]
        if failed:
            raise app._failed(failed[0]) from None
        raise
    return lag(app)


def describe(app: App) -> str:
    """``kafka-streams-groups --describe --members`` (streams protocol) or ``kafka-consumer-groups`` (classic)."""
    tool = "kafka-streams-groups" if app.protocol == "streams" else "kafka-consumer-groups"
    return str(app.cluster.tool(tool, "--describe", "--group", app.name, "--members", check=False)).strip()


def reset(app: App, input_topics: Optional[list[str]] = None) -> str:
    """Kafka's application reset: offsets of the input topics back to the start, the internal topics deleted,
    and each instance's local state wiped (the tool leaves that to the application: ``KafkaStreams.cleanUp()``).

    Every instance must be stopped first, as Kafka's tools demand. With the streams protocol,
    ``--delete-all-internal-topics`` is needed: in Kafka 4.3.1 ``--reset-offsets --execute`` alone leaves them,
    though its help says otherwise.
    """
    if app.running:
        raise StreamsAppError(f"{app.name} still has running instances.", "app.stop() first: Kafka's reset tools "
                              "refuse a group with active members.")
    inputs = input_topics or [t for t in app.topology.source_topics() if t not in app.topology.repartition_topics()]
    if app.protocol == "streams":
        args = ["kafka-streams-groups", "--reset-offsets", "--group", app.name, "--to-earliest", "--execute",
                "--delete-all-internal-topics", *[a for t in inputs for a in ("--input-topic", t)]]
    else:
        args = ["kafka-streams-application-reset", "--application-id", app.name, "--input-topics", ",".join(inputs),
                "--force"]
    out = app.cluster.tool(*args)
    for instance in app.instances:
        shutil.rmtree(instance.directory / "state", ignore_errors=True)
    return str(out).strip()


__all__ = ["describe", "lag", "members", "open_transactions", "reset", "task_count", "wait_caught_up"]
