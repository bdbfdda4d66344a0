"""Reading a cluster's state back: topics, partitions, leaders, ISR, offsets.

Thin, typed wrappers over confluent-kafka's AdminClient that return small
dataclasses with a pandas view and a notebook rendering.
"""

from __future__ import annotations

import html
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from .errors import ClusterStateError

log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger("labkit.librdkafka")


def client_logging() -> dict[str, Any]:
    """Client config that routes librdkafka's log lines to Python logging (quiet in notebooks)."""
    return {"logger": _rdkafka_log, "error_cb": lambda err: _rdkafka_log.debug("client error: %s", err)}


def make_admin(bootstrap_servers: str, **config: Any) -> AdminClient:
    conf = {
        "bootstrap.servers": bootstrap_servers,
        "socket.connection.setup.timeout.ms": 3000,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        **client_logging(),
    }
    conf.update(config)
    return AdminClient(conf)


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster reports it right now."""

    topic: str
    partition: int
    #: Node id of the leader, or None while the partition has no leader (offline).
    leader: Optional[int]
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: First offset still stored (moves forward with retention), None if unreadable.
    log_start_offset: Optional[int]
    #: High watermark: the offset after the last record every in-sync replica has.
    high_watermark: Optional[int]

    @property
    def out_of_sync(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.isr)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    @property
    def records(self) -> Optional[int]:
        if self.log_start_offset is None or self.high_watermark is None:
            return None
        return self.high_watermark - self.log_start_offset


@dataclass(frozen=True)
class TopicState:
    """A topic's partitions with leaders, replicas, ISR and offsets."""

    name: str
    partitions: tuple[PartitionState, ...]
    config: Mapping[str, str] = field(default_factory=dict)

    def __getitem__(self, partition: int) -> PartitionState:
        return self.partitions[partition]

    def __len__(self) -> int:
        return len(self.partitions)

    def leaders(self) -> dict[int, Optional[int]]:
        return {p.partition: p.leader for p in self.partitions}

    def to_frame(self):  # -> pandas.DataFrame (imported lazily)
        import pandas as pd

        rows = [{
            "partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
            "out_of_sync": list(p.out_of_sync), "log_start_offset": p.log_start_offset,
            "high_watermark": p.high_watermark,
        } for p in self.partitions]
        return pd.DataFrame(rows).set_index("partition")

    def _repr_html_(self) -> str:
        head = ("<tr><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th>"
                "<th>log start</th><th>high watermark</th></tr>")
        body = []
        for p in self.partitions:
            leader = "<b style='color:#c0392b'>none</b>" if p.leader is None else str(p.leader)
            isr = ", ".join(str(r) for r in p.isr)
            if p.out_of_sync:
                isr += f" <span style='color:#c0392b'>(out: {', '.join(map(str, p.out_of_sync))})</span>"
            body.append(f"<tr><td>{p.partition}</td><td>{leader}</td><td>{', '.join(map(str, p.replicas))}</td>"
                        f"<td>{isr}</td><td>{_dash(p.log_start_offset)}</td><td>{_dash(p.high_watermark)}</td></tr>")
        return (f"<div><b>topic {html.escape(self.name)}</b> — {len(self.partitions)} partitions"
                f"<table>{head}{''.join(body)}</table></div>")

    def __repr__(self) -> str:
        lines = [f"TopicState({self.name!r}, {len(self.partitions)} partitions)"]
        for p in self.partitions:
            lines.append(f"  p{p.partition}: leader={p.leader} replicas={list(p.replicas)} isr={list(p.isr)} "
                         f"offsets=[{_dash(p.log_start_offset)}, {_dash(p.high_watermark)})")
        return "\n".join(lines)


def _dash(value: Optional[int]) -> str:
    return "–" if value is None else str(value)


def describe_topic(admin: AdminClient, name: str, timeout: float = 10.0) -> TopicState:
    """Leaders, replicas, ISR and offsets of every partition of ``name``.

    Reads a Metadata response (any live broker answers it, so this keeps working
    while brokers are down) rather than DescribeTopics, which librdkafka sends to
    one broker it believes is the controller.
    """
    md = admin.list_topics(timeout=timeout)
    topic = md.topics.get(name)
    if topic is None or (topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise ClusterStateError(f"Topic {name!r} does not exist.",
                                "Create it first (cluster.create_topic) or check the name.")
    ids = sorted(topic.partitions)
    starts = _offsets(admin, name, ids, OffsetSpec.earliest(), timeout)
    ends = _offsets(admin, name, ids, OffsetSpec.latest(), timeout)
    parts = []
    for pid in ids:
        p = topic.partitions[pid]
        leader = p.leader if p.leader is not None and p.leader >= 0 else None
        parts.append(PartitionState(topic=name, partition=pid, leader=leader, replicas=tuple(p.replicas),
                                    isr=tuple(p.isrs), log_start_offset=starts.get(pid) if leader else None,
                                    high_watermark=ends.get(pid) if leader else None))
    return TopicState(name, tuple(parts))


def _offsets(admin: AdminClient, topic: str, partitions: list[int], spec: OffsetSpec,
             timeout: float) -> dict[int, Optional[int]]:
    if not partitions:
        return {}
    request = {TopicPartition(topic, p): spec for p in partitions}
    out: dict[int, Optional[int]] = {}
    try:
        futures = admin.list_offsets(request, request_timeout=min(timeout, 5.0))
    except KafkaException:
        return {p: None for p in partitions}
    deadline = time.monotonic() + timeout
    for tp, fut in futures.items():
        try:
            out[tp.partition] = fut.result(timeout=max(deadline - time.monotonic(), 0.01)).offset
        except Exception:  # noqa: BLE001 - an offline partition has no offsets to show
            out[tp.partition] = None
    return out


def create_topic(admin: AdminClient, name: str, partitions: int = 3, replication_factor: int = -1,
                 config: Optional[Mapping[str, Any]] = None, timeout: float = 15.0,
                 exist_ok: bool = False) -> None:
    """Create a topic and wait until the controller has accepted it."""
    cfg = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=cfg)
    for attempt in (1, 2):
        futures = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)
        try:
            futures[name].result(timeout=timeout)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError._DESTROY_BROKER and attempt == 1:
                # A fresh client's first request can go out on a bootstrap connection that librdkafka retires
                # once it has learned the brokers; the request may have reached the controller: ask again.
                exist_ok = True
                continue
            if exist_ok and err.name() == "TOPIC_ALREADY_EXISTS":
                return
            raise ClusterStateError(f"Could not create topic {name!r}: {err.str()}",
                                    "Check the partition count, replication factor (<= live brokers) and configs.") from exc


def delete_topic(admin: AdminClient, name: str, timeout: float = 15.0) -> None:
    futures = admin.delete_topics([name], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)


def list_topics(admin: AdminClient, internal: bool = False, timeout: float = 10.0) -> list[str]:
    md = admin.list_topics(timeout=timeout)
    return sorted(t for t in md.topics if internal or not t.startswith("__"))


def broker_ids(admin: AdminClient, timeout: float = 5.0) -> set[int]:
    """Node ids of the brokers the cluster's metadata currently lists."""
    return set(admin.list_topics(timeout=timeout).brokers)



def _resource(kind: str, name: str, settings: Optional[Mapping[str, Any]] = None) -> Any:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    types = {"topic": ConfigResource.Type.TOPIC, "broker": ConfigResource.Type.BROKER}
    if kind not in types:
        raise ClusterStateError(f"Unknown config resource {kind!r}.", f"Use one of: {', '.join(types)}.")
    entries = [ConfigEntry(k, str(v).lower() if isinstance(v, bool) else str(v),
                           incremental_operation=AlterConfigOpType.SET) for k, v in (settings or {}).items()]
    return ConfigResource(types[kind], name, incremental_configs=entries or None)


def alter_configs(admin: AdminClient, kind: str, name: str, settings: Mapping[str, Any],
                  timeout: float = 15.0) -> None:
    """Set dynamic configs of a ``"topic"`` or a ``"broker"`` (named by its id: librdkafka cannot address the
    cluster-wide default)."""
    futures = admin.incremental_alter_configs([_resource(kind, name, settings)], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout=timeout)


def describe_configs(admin: AdminClient, kind: str, name: str, timeout: float = 15.0) -> dict[str, str]:
    """Every config of a ``"topic"`` or a ``"broker"`` as the broker reports it (defaults included)."""
    futures = admin.describe_configs([_resource(kind, name)], request_timeout=timeout)
    entries = next(iter(futures.values())).result(timeout=timeout)
    return {key: entry.value for key, entry in entries.items()}
