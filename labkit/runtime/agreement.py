"""Asking each broker itself, and waiting until every live broker agrees.

A controller acknowledges a change (a topic created, a config set, an ACL added) once
it is committed to the metadata log; each broker applies it when it has fetched that
far, a moment later — longer on a loaded machine. A client that asks "any broker"
right after the acknowledgement can meet one that has not caught up
(``UNKNOWN_TOPIC_OR_PART`` from ``describe_configs`` right after ``create_topics``).
So every labkit call that changes cluster state waits here until each live broker
answers with the new state, and a timeout names the brokers that did not and what
they said.

How one broker is asked, with librdkafka:

* :func:`routed_configs` — ``DescribeConfigs`` with a ``BROKER`` resource is sent to
  that broker, with every other resource of the request (librdkafka's
  single-broker-id rule), whichever client sends it: one probe client per cluster
  asks a topic's configs as broker N has them, or gets ``UNKNOWN_TOPIC_OR_PART``
  while N does not know the topic.
* :func:`pinned_admin` — a client whose "any broker" requests (Metadata,
  DescribeAcls, ...) all go to broker N: librdkafka keeps one connection for them
  (sparse connections), so a fresh client first sends a request routed to N (its
  own ``BROKER`` configs), which makes N's the only connection up; the pin is
  checked (``orig_broker_id``) when made and again before each use.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable, Iterable, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from ..waiting import Wait
from .librdkafka import HANDSHAKE_MS, quiet
from .protocols import BrokerLike, ClusterLike

#: Client settings for probes: fail fast, never back off for long.
PROBE = {"socket.connection.setup.timeout.ms": HANDSHAKE_MS, "reconnect.backoff.ms": 50,
         "reconnect.backoff.max.ms": 500}
#: (ok, what this broker showed) for one broker.
Verdict = tuple[bool, str]

_PINNED: "weakref.WeakKeyDictionary[Any, dict[int, AdminClient]]" = weakref.WeakKeyDictionary()


def live_brokers(cluster: ClusterLike) -> list[BrokerLike]:
    """The brokers that can answer now: running (labkit's own) or external. A paused broker is alive but
    answers nothing; it catches up when it resumes."""
    return [b for b in cluster.brokers if b.state in ("running", "external")]


def origin(metadata: Any, brokers: Iterable[BrokerLike]) -> Optional[int]:
    """Which broker a Metadata answer came from (a bootstrap connection reports -1 and its address)."""
    if metadata.orig_broker_id != -1:
        return int(metadata.orig_broker_id)
    address = str(metadata.orig_broker_name).split("/")[0]
    return next((b.id for b in brokers if b.address == address), None)


def pinned_admin(cluster: ClusterLike, broker: BrokerLike, attempts: int = 4) -> Optional[AdminClient]:
    """A client whose any-broker requests go to ``broker`` (None when no fresh client landed there).

    librdkafka drops a fresh client's bootstrap connection once the first metadata answer has listed the
    brokers, and then sends an any-broker request over a connection it has *up*, opening one to a random
    learned broker when it has none (sparse connections). So a fresh client first sends a request that is
    routed to ``broker`` (``DescribeConfigs`` of its own ``BROKER`` resource): that opens the connection
    to it, the only one up, which every later any-broker request then uses. Bootstrapped at ``broker``
    alone and asked straight away, a client answered from a random broker on a secured cluster, whose TLS
    and SCRAM handshake outlasts the bootstrap metadata (two brokers in three). Setting up a connection is
    given :data:`HANDSHAKE_MS`; a client that already holds one answers in milliseconds.
    """
    pins = _PINNED.setdefault(cluster, {})
    client = pins.get(broker.id)
    if client is not None and _answers_from(client, cluster, broker, timeout=5.0):
        return client
    pins.pop(broker.id, None)
    deadline = time.monotonic() + HANDSHAKE_MS / 1000 + 4  # all attempts together: a paused broker never answers
    for _ in range(attempts):
        setup = deadline - time.monotonic()
        if setup <= 0.5:
            break
        client = cluster.admin_for(broker.address, warm=False, **PROBE)
        try:
            own = ConfigResource(ConfigResource.Type.BROKER, str(broker.id))
            client.describe_configs([own], request_timeout=setup)[own].result(timeout=setup + 1)
        except KafkaException:
            continue
        if _answers_from(client, cluster, broker, timeout=max(deadline - time.monotonic(), 2.0)):
            pins[broker.id] = client
            return client
    return None


_PROBES: "weakref.WeakKeyDictionary[Any, AdminClient]" = weakref.WeakKeyDictionary()


def _probe_client(cluster: ClusterLike) -> AdminClient:
    """One client per cluster for requests librdkafka routes by themselves, with the probes' settings."""
    client = _PROBES.get(cluster)
    if client is None:
        client = _PROBES[cluster] = cluster.admin_for(warm=False, **PROBE)
    return client


def _answers_from(client: AdminClient, cluster: ClusterLike, broker: BrokerLike, timeout: float = 5.0) -> bool:
    try:
        return origin(client.list_topics(timeout=timeout), cluster.brokers) == broker.id
    except KafkaException:
        return False


def broker_metadata(cluster: ClusterLike, broker: BrokerLike, topic: Optional[str] = None) -> Optional[Any]:
    """Metadata (``ClusterMetadata``) as ``broker`` itself reports it, or None when it did not answer."""
    client = pinned_admin(cluster, broker)
    if client is None:
        return None
    try:
        found = client.list_topics(topic=topic, timeout=2.0)
    except KafkaException:
        return None
    return found if origin(found, cluster.brokers) == broker.id else None


def routed_configs(cluster: ClusterLike, broker: BrokerLike, resources: list[ConfigResource],
                   timeout: float = 3.0) -> dict[str, Any]:
    """``resources`` (topics) described by ``broker`` itself: name -> {config: value}, or the KafkaError it gave.

    librdkafka sends the request to ``broker`` whatever client sends it (the BROKER resource decides), so one
    probe client per cluster serves every broker; a paused broker costs this call its ``timeout``, no more.
    """
    client = _probe_client(cluster)
    request = [ConfigResource(ConfigResource.Type.BROKER, str(broker.id)), *resources]
    out: dict[str, Any] = {}
    try:
        futures = client.describe_configs(request, request_timeout=timeout)
    except KafkaException as exc:
        return {r.name: exc.args[0] for r in resources}
    for resource, future in futures.items():
        if resource.restype == ConfigResource.Type.BROKER:
            continue
        try:
            out[resource.name] = {k: e.value for k, e in future.result(timeout=timeout + 1).items()}
        except KafkaException as exc:
            out[resource.name] = exc.args[0]
    return out


def agree(cluster: ClusterLike, what: str, holds: Callable[[BrokerLike], Verdict], timeout: float = 60.0,
          brokers: Optional[list[BrokerLike]] = None, hint: str = "", together: bool = False,
          stretch: bool = True) -> None:
    """Return once ``holds(broker)`` is true for every live broker (each asked until it is, then left alone).

    ``together``: true for all of them in one round of asking. For a state that a broker behind the others can
    show from *before* a change and lose as it catches up (an ISR whole before a broker died, shrunk while it was
    away, whole again once it is back): a restarted or thawed broker answers from its old metadata at first.
    ``stretch``: ``timeout`` counts a quiet machine's seconds (applying a change is this machine's CPU work, slower
    when it is busy); False for a state a wrong answer never reaches, where running out is the verdict. On timeout, :class:`~labkit.errors.WaitTimeout` says which brokers disagree and what each showed last.
    """
    everybody = {b.id: b for b in (brokers if brokers is not None else live_brokers(cluster))}
    pending = dict(everybody)
    seen: dict[int, str] = {}

    def everyone() -> bool:
        if together:  # every round asks every broker still alive again
            pending.update({i: b for i, b in everybody.items() if b.state in ("running", "external")})
        for broker_id, broker in list(pending.items()):
            try:
                ok, seen[broker_id] = holds(broker)
            except KafkaException as exc:
                ok, seen[broker_id] = False, exc.args[0].name()
            if ok:
                del pending[broker_id]
            elif broker.state not in ("running", "external"):
                del pending[broker_id]  # killed or paused meanwhile: it learns when it comes back
        return not pending

    Wait(f"every live broker to agree: {what}", timeout=timeout, interval=0.05, stretch=stretch,
         hint=hint or "The brokers apply the metadata log in turn; on a very busy machine that takes a while.",
         evidence=lambda: "; ".join(f"broker {b}: {seen.get(b, 'no answer yet')}" for b in sorted(pending))
         ).until(everyone)


def topic_known(cluster: ClusterLike, topic: str, known: bool = True) -> Callable[[BrokerLike], Verdict]:
    """``holds`` for :func:`agree`: the broker knows ``topic`` (or, with ``known=False``, no longer does)."""
    def holds(broker: BrokerLike) -> Verdict:
        answer = routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)])[topic]
        missing = isinstance(answer, KafkaError) and answer.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        if isinstance(answer, KafkaError) and not missing:
            return False, answer.name()
        return (not missing) == known, "does not know it" if missing else "knows it"
    return holds


def topic_configs(cluster: ClusterLike, topic: str, wanted: dict[str, Optional[str]]) -> Callable[[BrokerLike], Verdict]:
    """``holds``: the broker reports ``topic``'s configs as ``wanted`` (None: back to the default, unset)."""
    def holds(broker: BrokerLike) -> Verdict:
        answer = routed_configs(cluster, broker, [ConfigResource(ConfigResource.Type.TOPIC, topic)])[topic]
        if isinstance(answer, KafkaError):
            return False, answer.name()
        differ = {k: answer.get(k) for k, v in wanted.items() if v is not None and answer.get(k) != v}
        return not differ, f"has {differ}" if differ else "has them"
    return holds


def topic_partitions(cluster: ClusterLike, topic: str, count: Optional[int] = None,
                     replicas: Optional[dict[int, list[int]]] = None) -> Callable[[BrokerLike], Verdict]:
    """``holds``: the broker's metadata has ``topic`` with ``count`` partitions (each led), and ``replicas``."""
    def holds(broker: BrokerLike) -> Verdict:
        md = broker_metadata(cluster, broker, topic)
        found = md.topics.get(topic) if md is not None else None
        if found is None or found.error is not None:
            return False, "no answer from it" if md is None else "does not list it"
        parts = found.partitions
        if count is not None and len(parts) != count:
            return False, f"{len(parts)} partitions"
        if any(p.leader < 0 for p in parts.values()):
            return False, "a partition without a leader"
        for pid, wanted in (replicas or {}).items():
            if pid in parts and list(parts[pid].replicas) != list(wanted):
                return False, f"partition {pid} on {list(parts[pid].replicas)}"
        return True, f"{len(parts)} partitions"
    return holds


def isr_reached(cluster: ClusterLike, topic: str, partition: Optional[int] = None,
                size: Optional[int] = None) -> Callable[[BrokerLike], Verdict]:
    """``holds``: in the broker's metadata, the ISR of ``partition`` of ``topic`` (every partition when None)
    has ``size`` replicas (default: all its replicas, i.e. whole)."""
    def holds(broker: BrokerLike) -> Verdict:
        md = broker_metadata(cluster, broker, topic)
        found = md.topics.get(topic) if md is not None else None
        if found is None or found.error is not None:
            return False, "no answer from it" if md is None else "does not list it"
        chosen = [p for pid, p in sorted(found.partitions.items()) if partition is None or pid == partition]
        off = {p.id: sorted(p.isrs) for p in chosen if len(p.isrs) != (len(p.replicas) if size is None else size)}
        if not chosen or off:
            return False, f"ISR {dict(list(off.items())[:4])}" if chosen else f"no partition {partition}"
        return True, f"ISR {sorted(chosen[-1].isrs)}"
    return holds


def broker_listed(cluster: ClusterLike, broker_id: int, listed: bool = True) -> Callable[[BrokerLike], Verdict]:
    """``holds``: the broker's metadata lists broker ``broker_id`` (a restarted broker registered again)."""
    def holds(broker: BrokerLike) -> Verdict:
        md = broker_metadata(cluster, broker)
        if md is None:
            return False, "no answer from it"
        return (broker_id in md.brokers) == listed, f"lists {sorted(md.brokers)}"
    return holds


def acls_present(cluster: ClusterLike, filters: list[Any], present: bool = True) -> Callable[[BrokerLike], Verdict]:
    """``holds``: the broker's authorizer has a binding for every filter (or, ``present=False``, none)."""
    def holds(broker: BrokerLike) -> Verdict:
        client = pinned_admin(cluster, broker)
        if client is None:
            return False, "no answer from it"
        found = [bool(client.describe_acls(f, request_timeout=5).result(timeout=6)) for f in filters]
        if not _answers_from(client, cluster, broker):  # the answer must have come from this broker
            return False, "its client moved to another broker"
        ok = all(found) if present else not any(found)
        return ok, f"{sum(found)} of {len(found)} present"
    return holds


def user_accepted(cluster: ClusterLike, settings: dict[str, Any], accepted: bool = True
                  ) -> Callable[[BrokerLike], Verdict]:
    """``holds``: the broker authenticates a client with ``settings`` (a SCRAM user and password) — or refuses it.

    A client authenticates on its bootstrap connection before it learns other brokers, so one
    bootstrapped at this broker alone is answered by this broker. A refusal is read from the client's
    error callback (``_AUTHENTICATION``): the request itself then often fails with ``_TRANSPORT`` only,
    the broker having closed the connection.
    """
    def holds(broker: BrokerLike) -> Verdict:
        errors: list[KafkaError] = []
        conf = {**settings, "bootstrap.servers": broker.address, **PROBE, **quiet(), "error_cb": errors.append,
                "allow.auto.create.topics": False}
        client = AdminClient(conf)
        auth = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
        try:
            client.list_topics(timeout=HANDSHAKE_MS / 1000 + 2)
            ok = not any(e.code() in auth for e in errors)
        except KafkaException as exc:
            client.poll(0.1)
            if not any(e.code() in auth for e in [*errors, exc.args[0]]):
                return False, exc.args[0].name()
            ok = False
        return ok == accepted, "authenticates it" if ok else "refuses it"
    return holds


def acl_barrier(cluster: ClusterLike, timeout: float = 60.0) -> None:
    """Return once every live broker's authorizer has applied every ACL change committed before this call.

    For changes someone else made with a plain ``AdminClient`` (a learner's ``create_acls``): a binding for a
    principal nobody has is added after them, and since each broker applies the metadata log in order, a
    broker that has this marker has every earlier ACL too. The marker is removed again. Needs a cluster with
    an authorizer (the secured profile).
    """
    import uuid

    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    tag = uuid.uuid4().hex[:12]
    marker = AclBinding(ResourceType.TOPIC, f"labkit-barrier-{tag}", ResourcePatternType.LITERAL,
                        f"User:labkit-barrier-{tag}", "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
    exact = AclBindingFilter(marker.restype, marker.name, marker.resource_pattern_type, marker.principal,
                             marker.host, marker.operation, marker.permission_type)
    for future in cluster.admin().create_acls([marker], request_timeout=15).values():
        future.result(timeout=timeout)
    try:
        agree(cluster, "every ACL change so far applied", acls_present(cluster, [exact]), timeout=timeout)
    finally:
        for future in cluster.admin().delete_acls([exact], request_timeout=15).values():
            future.result(timeout=timeout)


__all__ = ["PROBE", "acl_barrier", "acls_present", "agree", "broker_listed", "broker_metadata", "live_brokers",
           "origin", "pinned_admin", "routed_configs", "topic_configs", "topic_known",
           "topic_partitions", "user_accepted"]
