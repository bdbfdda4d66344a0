"""A cluster's state read back, and changed so that every broker agrees.

Reading (an ``AdminClient`` is enough): :func:`describe_topic` returns small dataclasses
(leaders, replicas, ISR, offsets) with a pandas view and a notebook rendering;
:func:`list_topics`, :func:`broker_ids`, :func:`describe_configs`.

Changing (these take the cluster: they ask every broker): :func:`create_topic`,
:func:`delete_topic`, :func:`add_partitions`, :func:`alter_configs`, :func:`create_acls`,
:func:`delete_acls`. Each returns only when every live broker answers with the new state
(:mod:`labkit.runtime.agreement`), not when the controller acknowledged it — so the next
cell can ask any broker.
"""

from __future__ import annotations

import html
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from .errors import ClusterStateError
from .runtime import agreement
from .runtime.librdkafka import HANDSHAKE_MS, quiet
from .runtime.protocols import ClusterLike
from .waiting import Wait

log = logging.getLogger(__name__)

#: Client config that routes librdkafka's log lines to Python logging (quiet in notebooks).
client_logging = quiet


def make_admin(bootstrap_servers: str, warm: bool = True, **config: Any) -> AdminClient:
    """An AdminClient with the lab's client settings; ``warm`` (the default): ready for any request (see
    :func:`warm_up`). Every AdminClient labkit uses is made here."""
    conf = {
        "bootstrap.servers": bootstrap_servers,
        "socket.connection.setup.timeout.ms": 3000,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        # An AdminClient is a librdkafka producer underneath, whose default is true: its metadata refresh of a
        # topic it once looked up recreated that topic right after it was deleted (the brokers auto-create).
        "allow.auto.create.topics": False,
        **client_logging(),
    }
    conf.update(config)
    if str(conf.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT" and \
            "socket.connection.setup.timeout.ms" not in config:
        conf["socket.connection.setup.timeout.ms"] = HANDSHAKE_MS  # TLS and SCRAM handshakes take seconds under load
    client = AdminClient(conf)
    if warm:
        warm_up(client)
    return client


def warm_up(client: Any, timeout: float = 5.0) -> None:
    """Ask for metadata until a broker the client learned answers (not the bootstrap connection).

    librdkafka (2.10+) removes the bootstrap connection once the first metadata answer has listed
    the brokers; a request queued on it at that moment fails with ``_DESTROY_BROKER`` (a fresh
    client's ``create_topics`` did, under load). An answer from a learned broker means the
    bootstrap connection is gone from the choice, so every later request goes to a learned
    broker. With no broker answering, the caller's own request will say so.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if client.list_topics(timeout=max(0.2, deadline - time.monotonic())).orig_broker_id != -1:
                return
        except KafkaException:
            return


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
    found = list_offsets(admin, [TopicPartition(topic, p) for p in partitions], spec, timeout)
    return {p: offset for (_, p), offset in found.items()}


def list_offsets(admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec,
                 timeout: float, committed: bool = False) -> dict[tuple[str, int], Optional[int]]:
    """``{(topic, partition): offset}`` for ``spec`` (earliest, latest), None where it could not be read.
    ``committed``: as a read_committed reader sees it (latest: the last stable offset, before any open
    transaction)."""
    if not partitions:
        return {}
    request = {TopicPartition(tp.topic, tp.partition): spec for tp in partitions}
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    out: dict[tuple[str, int], Optional[int]] = {}
    try:
        # the whole timeout: under load a led partition's offsets can take seconds, and None means "no offsets"
        futures = admin.list_offsets(request, request_timeout=timeout, isolation_level=isolation)
    except KafkaException:
        return {(tp.topic, tp.partition): None for tp in partitions}
    deadline = time.monotonic() + timeout
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(timeout=max(deadline - time.monotonic(), 0.01)).offset
        except Exception:  # noqa: BLE001 - an offline partition has no offsets to show
            out[(tp.topic, tp.partition)] = None
    return out


#: Errors of the way to the cluster, not answers from it: librdkafka fails a request with _DESTROY_BROKER when it
#: retires the broker handle the request was queued on (the bootstrap connection once brokers are learned; a
#: broker that left the metadata and came back after a restart), with _TRANSPORT when the connection broke, and
#: with _TIMED_OUT when no answer came (a controller paused or gone: a new one is elected in seconds, and the
#: client learns it from its next metadata). The change may or may not have been made, so it is sent again: each
#: call below is safe to repeat (an existing topic, a count already reached, a config already set are answered
#: as such).
_LOST_REQUEST = (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
#: How long one attempt waits for its answer before it is sent again (the caller's timeout bounds them all).
ATTEMPT_S = 15.0


def _submitted(cluster: ClusterLike, send: Callable[[AdminClient, float], dict[Any, Any]],
               timeout: float) -> dict[Any, Any]:
    """Run ``send(admin, request_timeout)`` (an AdminClient call returning futures) and wait for every future,
    sending again while the request was lost on its way (:data:`_LOST_REQUEST`) and ``timeout`` allows; the
    cluster's own errors are raised. Returns the answered attempt's results, by the futures' keys.

    The first attempt goes through the cluster's shared client, every later one through a new client: librdkafka
    sends a change to the broker its last metadata named controller (in KRaft, any live broker, which forwards
    it), and a broker that stopped answering keeps its connection up -- the old client asks it for metadata too,
    so it would stay named and every attempt would go to it (seen: a create with a broker paused timed out four
    times in a row). A new client's metadata comes from a broker that answers."""
    import concurrent.futures

    deadline = time.monotonic() + timeout
    client = cluster.admin()
    while True:
        attempt = max(min(ATTEMPT_S, deadline - time.monotonic()), 1.0)
        try:
            return {key: future.result(timeout=attempt + 5) for key, future in send(client, attempt).items()}
        except KafkaException as exc:
            if exc.args[0].code() not in _LOST_REQUEST or time.monotonic() + 1 >= deadline:
                raise
        except concurrent.futures.TimeoutError:
            if time.monotonic() + 1 >= deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer within {timeout:.0f} s")) from None
        client = cluster.admin_for()


def create_topic(cluster: ClusterLike, name: str, partitions: int = 3, replication_factor: int = -1,
                 config: Optional[Mapping[str, Any]] = None, timeout: float = 60.0, exist_ok: bool = False) -> None:
    """Create a topic; return when every live broker knows it, each partition led.

    A topic that exists already is returned as it is when it has the partitions (and the replication
    factor, when one is given) asked for — so a cell that creates its topic can run twice — and is an
    error otherwise; ``exist_ok=True`` accepts it whatever its shape.
    """
    cfg = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=cfg)
    existed = False
    try:
        _submitted(cluster, lambda admin, t: admin.create_topics([new], operation_timeout=t, request_timeout=t), timeout)
    except KafkaException as exc:
        err = exc.args[0]
        if err.name() != "TOPIC_ALREADY_EXISTS":
            raise ClusterStateError(f"Could not create topic {name!r}: {err.str()}",
                                    "Check the partition count, replication factor (<= live brokers) and "
                                    "configs.") from exc
        existed = True
    agreement.agree(cluster, f"topic {name!r} created", agreement.topic_known(cluster, name), timeout=timeout)
    if existed and not exist_ok:
        # compared once every broker knows it: "already exists" may answer a resend of this very create, whose
        # topic a broker that has not applied it yet would show with no partitions (seen: lesson 03 at load 25)
        _same_shape(cluster, name, partitions, replication_factor)
    agreement.agree(cluster, f"topic {name!r} led", agreement.topic_partitions(cluster, name), timeout=timeout)


def _same_shape(cluster: ClusterLike, name: str, partitions: int, replication_factor: int) -> None:
    found = cluster.admin().list_topics(topic=name, timeout=10).topics[name]
    have = len(found.partitions)
    factor = len(next(iter(found.partitions.values())).replicas) if found.partitions else 0
    if have != partitions or (replication_factor != -1 and factor != replication_factor):
        raise ClusterStateError(
            f"Topic {name!r} already exists with {have} partitions and replication factor {factor} "
            f"(asked: {partitions} and {'the default' if replication_factor == -1 else replication_factor}).",
            "Delete it first (cluster.delete_topic) or pick another name.")


def delete_topic(cluster: ClusterLike, name: str, timeout: float = 60.0) -> None:
    """Delete a topic; return when no live broker knows it any more."""
    try:
        _submitted(cluster, lambda admin, t: admin.delete_topics([name], operation_timeout=t, request_timeout=t), timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise ClusterStateError(f"Could not delete topic {name!r}: {exc.args[0].str()}",
                                    "Check the name (cluster.topics()).") from exc
    agreement.agree(cluster, f"topic {name!r} deleted", agreement.topic_known(cluster, name, known=False),
                    timeout=timeout)


def add_partitions(cluster: ClusterLike, name: str, total: int, timeout: float = 60.0) -> None:
    """Grow ``name`` to ``total`` partitions (never fewer: partitions cannot be removed); return when every
    live broker's metadata has them, each led — so the next producer sees the new count wherever it asks."""
    try:
        _submitted(cluster, lambda admin, t: admin.create_partitions([NewPartitions(name, total)],
                                                                     operation_timeout=t, request_timeout=t), timeout)
    except KafkaException as exc:
        def grown() -> bool:  # a send that was lost on its way did it
            found = cluster.admin().list_topics(timeout=10).topics.get(name)
            return found is not None and len(found.partitions) == total

        if exc.args[0].code() != KafkaError.INVALID_PARTITIONS or not grown():
            raise ClusterStateError(f"Could not grow {name!r} to {total} partitions: {exc.args[0].str()}",
                                    "A topic can only gain partitions: give a total above its count now.") from exc
    agreement.agree(cluster, f"{name!r} with {total} partitions",
                    agreement.topic_partitions(cluster, name, count=total), timeout=timeout)


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


def alter_configs(cluster: ClusterLike, kind: str, name: str, settings: Mapping[str, Any],
                  timeout: float = 60.0) -> None:
    """Set dynamic configs of a ``"topic"`` or a ``"broker"`` (named by its id: librdkafka cannot address the
    cluster-wide default); return when every live broker (for a broker's config: that broker) reports them."""
    resource = _resource(kind, name, settings)
    _submitted(cluster, lambda admin, t: admin.incremental_alter_configs([resource], request_timeout=t), timeout)
    wanted = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in settings.items()}
    if kind == "topic":
        agreement.agree(cluster, f"{name!r} configured", agreement.topic_configs(cluster, name, dict(wanted)),
                        timeout=timeout)
        return

    def applied() -> bool:
        have = describe_configs(cluster.admin(), "broker", name, timeout=5)
        return all(have.get(k) == v for k, v in wanted.items())

    Wait(f"broker {name} to report {wanted}", timeout=timeout, interval=0.05, stretch=True).until(applied)


def describe_configs(admin: AdminClient, kind: str, name: str, timeout: float = 15.0) -> dict[str, str]:
    """Every config of a ``"topic"`` or a ``"broker"`` as the broker reports it (defaults included)."""
    futures = admin.describe_configs([_resource(kind, name)], request_timeout=timeout)
    entries = next(iter(futures.values())).result(timeout=timeout)
    return {key: entry.value for key, entry in entries.items()}


def create_acls(cluster: ClusterLike, bindings: list[Any], timeout: float = 60.0) -> None:
    """Add ACL bindings (``confluent_kafka.admin.AclBinding``); return when every live broker's authorizer has them."""
    _submitted(cluster, lambda admin, t: admin.create_acls(list(bindings), request_timeout=t), timeout)
    filters = [exact_filter(b) for b in bindings]
    agreement.agree(cluster, f"{len(filters)} ACL(s) granted", agreement.acls_present(cluster, filters),
                    timeout=timeout)


def delete_acls(cluster: ClusterLike, filters: list[Any], timeout: float = 60.0) -> list[Any]:
    """Remove the ACL bindings matching ``filters`` (``AclBindingFilter``); return the removed bindings once no
    live broker's authorizer has them.

    The bindings returned are the ones the filters matched just before the delete: a delete sent again after
    its first attempt was lost on the way finds nothing left to remove, so its own answer would be empty."""
    found = _submitted(cluster, lambda admin, t: {i: admin.describe_acls(f, request_timeout=t)
                                                  for i, f in enumerate(filters)}, timeout)
    matched = dict.fromkeys(binding for bindings in found.values() for binding in bindings)
    _submitted(cluster, lambda admin, t: admin.delete_acls(list(filters), request_timeout=t), timeout)
    removed = list(matched)
    agreement.agree(cluster, f"{len(removed)} ACL(s) removed",
                    agreement.acls_present(cluster, [exact_filter(b) for b in removed], present=False),
                    timeout=timeout)
    return removed


def exact_filter(binding: Any) -> Any:
    """The filter that matches exactly ``binding`` (an ``AclBinding``)."""
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)
