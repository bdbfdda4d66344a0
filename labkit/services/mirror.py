"""MirrorMaker 2 between two lab clusters, run the way its users run it on Kafka Connect, and what it writes.

    primary, dr = labkit.start_clusters(["primary", "dr"], profile="single-broker")
    flow = mirror(primary, dr, topics="orders")    # primary -> dr: three connectors on dr's Connect worker
    flow.remote_topic("orders")                     # "primary.orders", the topic on dr
    flow.checkpoints("billing")                     # the group's commits on primary, translated for dr
    translated_offsets(dr, "billing", "primary", "orders")   # {partition: offset on dr's primary.orders}

**How it runs.** MirrorMaker 2 is three Kafka Connect connectors (``connect-mirror``):
``MirrorSourceConnector`` copies the records, topic configs and new partitions,
``MirrorCheckpointConnector`` translates the consumer groups' committed offsets, and
``MirrorHeartbeatConnector`` writes a heartbeat a second. Kafka ships two ways to run them:
the dedicated ``connect-mirror-maker`` driver (its own embedded Connect workers, no REST
API) or as ordinary connectors on a Connect cluster. The lab uses the second, with **one
Connect worker per target cluster** (``target.connect_worker()``, the worker the Connect part of a
lesson already uses), created through the REST API: the same status, pause/resume,
restart and offsets calls as any connector; each flow starts within seconds of its
``PUT`` (no JVM to start); and a worker that outlives its source cluster simply resumes
when the cluster comes back -- the driver run for both directions in one process exits
when either cluster is down at start, which is exactly the disaster drill. The worker must
run against the *target* cluster: MirrorSourceConnector's records are written by the
worker's own producer. Its records are raw bytes, so every connector overrides the
worker's converters with ``ByteArrayConverter`` (without it the String converter writes
``[B@77587cf6``).

**What it writes** -- checkpoints, offset syncs and heartbeats -- and how offsets are translated:
:mod:`labkit.services.mm2records` (its names are importable from here too).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Union

from ..errors import LabkitError
from ..runtime.librdkafka import quiet
from ..waiting import Deadline, Wait
from . import replication_factor
from .connect import BYTES_CONVERTER, ConnectWorker
from .mm2records import (SEPARATOR, Checkpoint, Heartbeat, OffsetSync, checkpoints_topic, decode_checkpoint,
                         decode_heartbeat, decode_offset_sync, encode_checkpoint, offset_syncs_topic,
                         read_checkpoints, read_heartbeats, read_offset_syncs, remote_topic, translate,
                         translated_offsets)

if TYPE_CHECKING:
    import pandas as pd

    from ..runtime.protocols import ClusterLike

__all__ = [
    "LAB_SETTINGS", "Mirror", "mirror", "connector_configs", "alias_of", "replication_latency", "committed", "commit_offsets",
    # what MirrorMaker 2 writes (labkit.services.mm2records), importable from here
    "SEPARATOR", "Checkpoint", "Heartbeat", "OffsetSync", "checkpoints_topic", "decode_checkpoint", "decode_heartbeat",
    "decode_offset_sync", "encode_checkpoint", "offset_syncs_topic", "read_checkpoints", "read_heartbeats",
    "read_offset_syncs", "remote_topic", "translate", "translated_offsets",
]

log = logging.getLogger(__name__)

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
HEARTBEAT = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"

#: Lab-sized intervals (MirrorMaker 2's defaults in the comments): things follow within seconds.
LAB_SETTINGS: dict[str, Any] = {
    "refresh.topics.interval.seconds": 2,        # new topics and partitions on the source    [600]
    "sync.topic.configs.interval.seconds": 2,    # topic config changes                       [600]
    "refresh.groups.interval.seconds": 2,        # new consumer groups to checkpoint          [600]
    "emit.checkpoints.interval.seconds": 1,      # [60]
    "emit.heartbeats.interval.seconds": 1,       # [1]
    "sync.topic.acls.enabled": False,            # lab clusters have no authorizer            [true]
    "tasks.max": 1,
}


# ---------------------------------------------------------------- a flow


def alias_of(cluster: Any, default: str) -> str:
    return getattr(cluster, "label", None) or default


def _pattern(topics: Union[str, Iterable[str]]) -> str:
    return topics if isinstance(topics, str) else ",".join(topics)


def connector_configs(source: "ClusterLike", target: "ClusterLike", source_alias: str, target_alias: str,
                      topics: str, groups: str = ".*", sync_group_offsets: bool = False,
                      **settings: Any) -> dict[str, dict[str, Any]]:
    """The three connectors of one flow ``source_alias -> target_alias`` (names ``mirror-<src>-<tgt>-*``).

    ``settings`` (dots or underscores) go to all three; each ignores what is not its own.
    """
    common: dict[str, Any] = {
        "source.cluster.alias": source_alias, "target.cluster.alias": target_alias,
        "source.cluster.bootstrap.servers": source.bootstrap_servers,
        "target.cluster.bootstrap.servers": target.bootstrap_servers,
        # MirrorMaker copies bytes: the worker's converters must not touch them.
        "key.converter": BYTES_CONVERTER, "value.converter": BYTES_CONVERTER, "header.converter": BYTES_CONVERTER,
        # Its topics get the replication factor their cluster can give (MirrorMaker's defaults: 3, or the broker's).
        "replication.factor": replication_factor(target),
        "offset-syncs.topic.replication.factor": replication_factor(source),
        "checkpoints.topic.replication.factor": replication_factor(target),
        "heartbeats.topic.replication.factor": replication_factor(target),
        **LAB_SETTINGS,
    }
    common.update({(k if "." in k or "-" in k else k.replace("_", ".")): v for k, v in settings.items()})
    prefix = f"mirror-{source_alias}-{target_alias}"
    return {
        f"{prefix}-source": {**common, "connector.class": SOURCE, "topics": topics},
        f"{prefix}-checkpoint": {**common, "connector.class": CHECKPOINT, "groups": groups,
                                 "sync.group.offsets.enabled": sync_group_offsets,
                                 "sync.group.offsets.interval.seconds": 1},
        f"{prefix}-heartbeat": {**common, "connector.class": HEARTBEAT},
    }


@dataclass
class Mirror:
    """One MirrorMaker 2 flow, ``source -> target``: its connectors on the target's Connect worker."""

    source: Any
    target: Any
    source_alias: str
    target_alias: str
    worker: ConnectWorker
    topics: str
    connectors: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ---- names
    def remote_topic(self, topic: str) -> str:
        """``orders`` as the target calls it: ``primary.orders``."""
        return remote_topic(self.source_alias, topic)

    @property
    def checkpoints_topic(self) -> str:
        return checkpoints_topic(self.source_alias)

    @property
    def offset_syncs_topic(self) -> str:
        return offset_syncs_topic(self.target_alias)

    def connector(self, kind: str) -> str:
        """The name of the ``source``, ``checkpoint`` or ``heartbeat`` connector."""
        return f"mirror-{self.source_alias}-{self.target_alias}-{kind}"

    # ---- reading what it wrote
    def checkpoints(self, group: Optional[str] = None) -> list[Checkpoint]:
        return read_checkpoints(self.target, self.source_alias, group)

    def checkpoints_frame(self, group: Optional[str] = None) -> "pd.DataFrame":
        """The latest checkpoints as a table (one row per group and partition)."""
        import pandas as pd

        rows = [{"group": c.group, "topic on target": c.topic, "partition": c.partition,
                 "committed on source": c.upstream_offset, "resume on target at": c.downstream_offset}
                for c in self.checkpoints(group)]
        return pd.DataFrame(rows, columns=["group", "topic on target", "partition", "committed on source",
                                           "resume on target at"])

    def translated_offsets(self, group: str, topic: str) -> dict[int, int]:
        return translated_offsets(self.target, group, self.source_alias, topic)

    def offset_syncs(self) -> list[OffsetSync]:
        return read_offset_syncs(self.source, self.target_alias)

    def heartbeats(self) -> list[Heartbeat]:
        return read_heartbeats(self.target)

    # ---- lifecycle
    def status(self) -> dict[str, str]:
        """Connector name -> ``STATE (task states)``."""
        out = {}
        for name in self.connectors:
            status = self.worker.status(name)
            tasks = ",".join(t["state"] for t in status["tasks"]) or "no tasks"
            out[name] = f"{status['connector']['state']} ({tasks})"
        return out

    def wait_running(self, timeout: float = 60.0) -> "Mirror":
        """Every connector RUNNING with its tasks (the checkpoint connector may have none: no group yet)."""
        for name in self.connectors:
            self.worker.wait_for(name, timeout=timeout, any_tasks=name.endswith("-checkpoint"))
        return self

    def wait_for_topic(self, topic: str, timeout: float = 60.0) -> str:
        """Wait until the remote copy of ``topic`` exists on the target with as many partitions; its name."""
        remote = self.remote_topic(topic)
        want = len(self.source.describe_topic(topic))

        def there() -> bool:
            return remote in self.target.topics() and len(self.target.describe_topic(remote)) >= want

        Wait(f"{remote!r} on the target with {want} partitions", timeout=timeout, interval=0.25, stretch=True,
             hint="mirror.status() shows the connectors; worker.log() says more.").until(there)
        return remote

    def behind(self, topic: str) -> dict[int, int]:
        """Records of ``topic`` not replicated yet, per partition (empty: caught up), from where the source
        connector says it is (its offsets, flushed every second) and the source's end offsets.

        Not by counting records on both sides: a log start moved by ``delete_records`` and not yet
        checkpointed by the broker moves back when the broker is killed and restarted."""
        done: dict[int, int] = {}
        for entry in self.worker.offsets(self.connector("source")):
            if entry["partition"].get("topic") == topic:
                done[int(entry["partition"]["partition"])] = int(entry["offset"]["offset"]) + 1
        out = {}
        for p in self.source.describe_topic(topic).partitions:
            start = done.get(p.partition, p.log_start_offset)
            if p.high_watermark > start:
                out[p.partition] = p.high_watermark - start
        return out

    def wait_caught_up(self, topic: str, timeout: float = 60.0) -> None:
        """Wait until every record ``topic`` has now on the source is on the target (see :meth:`behind`)."""
        remote = self.remote_topic(topic)
        Wait(f"{remote!r} to hold every record of {topic!r}", timeout=timeout, interval=0.25, stretch=True,
             evidence=lambda: f"records not replicated yet, per partition: {self.behind(topic)}").until(
            lambda: remote in self.target.topics() and not self.behind(topic))

    def pause(self) -> None:
        """Pause replication (all three connectors, back once each is PAUSED): the target falls behind, as with a
        slow link."""
        for name in self.connectors:
            self.worker.pause(name)

    def resume(self) -> None:
        """Resume replication: back once every connector is RUNNING (the checkpoint connector may have no task)."""
        for name in self.connectors:
            self.worker.resume(name, any_tasks=name.endswith("-checkpoint"))

    def stop(self) -> None:
        """Delete the flow's connectors (what they replicated stays on the target)."""
        for name in self.connectors:
            try:
                self.worker.delete(name)
            except LabkitError:
                log.debug("deleting %s failed", name, exc_info=True)

    def __repr__(self) -> str:
        return f"<Mirror {self.source_alias} -> {self.target_alias} topics={self.topics!r} on {self.worker.url}>"


def mirror(source: "ClusterLike", target: "ClusterLike", topics: Union[str, Iterable[str]] = ".*", *,
           source_alias: Optional[str] = None, target_alias: Optional[str] = None, groups: str = ".*",
           sync_group_offsets: bool = False, worker: Optional[ConnectWorker] = None, wait: bool = True,
           timeout: float = 60.0, **settings: Any) -> Mirror:
    """Replicate ``topics`` (a regex, or names) from ``source`` to ``target`` with MirrorMaker 2 (module doc).

    Aliases default to the clusters' labels (``start_clusters(["primary", "dr"])``). ``groups``: the
    consumer groups to checkpoint; ``sync_group_offsets``: also write their translated offsets into the
    target's groups (MirrorMaker's default: off). ``settings`` are MirrorMaker settings for the three
    connectors, e.g. ``offset_lag_max=10``. Runs on ``worker`` (default: ``target.connect_worker()``) and, with
    ``wait``, returns once the connectors run. Call again with other settings to update the flow.
    """
    source_alias = source_alias or alias_of(source, "source")
    target_alias = target_alias or alias_of(target, "target")
    if source_alias == target_alias:
        raise LabkitError(f"Both clusters are called {source_alias!r}.",
                          "Give them different aliases (source_alias=, target_alias=), or start them with "
                          "labkit.start_clusters([...]).")
    worker = worker or target.connect_worker()  # type: ignore[attr-defined]
    if worker.cluster is not target and worker.properties.get("bootstrap.servers") != target.bootstrap_servers:
        raise LabkitError("MirrorMaker 2's connectors must run on a Connect worker of the target cluster "
                          "(its producer writes the replicated records).", "Leave worker= out: target.connect_worker().")
    configs = connector_configs(source, target, source_alias, target_alias, _pattern(topics), groups,
                                sync_group_offsets, **settings)
    for name, config in configs.items():
        worker.create(name, config)
    flow = Mirror(source, target, source_alias, target_alias, worker, _pattern(topics), configs)
    if wait:
        flow.wait_running(timeout)
    return flow


def replication_latency(source: "ClusterLike", target: "ClusterLike", topic: str, remote: str,
                        count: int = 100, pace: float = 0.01, timeout: float = 30.0) -> list[float]:
    """Produce ``count`` records to ``topic`` on ``source`` and time each until it can be read from ``remote``
    on ``target``: the seconds each took, in order (what "replication lag" means record by record)."""
    from confluent_kafka import Consumer, TopicPartition

    tag = uuid.uuid4().hex[:8]
    consumer = Consumer({**target.client_config(**{"group.id": f"labkit-latency-{tag}", "enable.auto.commit": False}),
                         **quiet()})
    parts = target.describe_topic(remote).partitions
    consumer.assign([TopicPartition(remote, p.partition, p.high_watermark) for p in parts])
    producer = source.producer(linger_ms=0)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    try:
        for i in range(count):
            key = f"{tag}-{i}"
            sent[key] = time.monotonic()
            producer.produce(topic, key=key, value=f"latency probe {key}")
            producer.poll(0)
            msg = consumer.poll(pace)
            while msg is not None:
                if not msg.error() and msg.key() and msg.key().decode().startswith(tag):
                    seen.setdefault(msg.key().decode(), time.monotonic())
                msg = consumer.poll(0)
        producer.flush(10)
        deadline = Deadline(timeout)  # a quiet machine's seconds: a starved flow is slow, not stopped
        while len(seen) < count and not deadline.expired():
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error() and msg.key() and msg.key().decode().startswith(tag):
                seen.setdefault(msg.key().decode(), time.monotonic())
    finally:
        consumer.close()
    if len(seen) < count:
        raise LabkitError(f"Only {len(seen)} of {count} records reached {remote!r} within {deadline}.",
                          "Is the flow running? mirror.status()")
    return [seen[k] - sent[k] for k in sent]


def committed(cluster: "ClusterLike", group: str, topic: str) -> dict[int, int]:
    """``group``'s committed offsets on ``topic`` (partitions with a commit only)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    parts = [TopicPartition(topic, p.partition) for p in cluster.describe_topic(topic).partitions]
    future = cluster.admin().list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, parts)])[group]
    return {tp.partition: tp.offset for tp in future.result(timeout=10).topic_partitions if tp.offset >= 0}


def commit_offsets(cluster: "ClusterLike", group: str, topic: str, offsets: Mapping[int, int],
                   timeout: float = 30.0) -> None:
    """Set ``group``'s committed offsets on ``topic``, like ``kafka-consumer-groups --reset-offsets --to-offset``
    -- or MirrorMaker's ``sync.group.offsets``. The broker refuses while the group has members: a member that
    died stays one until its session times out (also after a restart of the cluster), so this waits for that."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())])

    def accepted() -> bool:
        done = cluster.admin().alter_consumer_group_offsets([request])[group].result(timeout=10)
        refused = [tp.error for tp in done.topic_partitions if tp.error is not None]
        if refused:  # per partition, not raised by the future
            raise KafkaException(refused[0])
        return True

    Wait(f"group {group!r} on {topic!r} to take its new offsets", timeout=timeout, interval=0.5, stretch=True,
         hint="A group's offsets can only be set while it has no members (a dead one counts until its session "
              "times out).").until(accepted)
