"""What MirrorMaker 2 writes in its internal topics, decoded, and offsets translated as it translates them.

    read_checkpoints(dr, "primary", group="billing")        # the group's commits, translated for dr
    translated_offsets(dr, "billing", "primary", "orders")   # {partition: offset on dr's primary.orders}
    remote_topic("primary", "orders")                        # "primary.orders" (DefaultReplicationPolicy)

**What it writes** (Kafka protocol types, big-endian; ``STRING`` = int16 length + UTF-8):

========================  ==============================  ============================  ===========================
record                    topic (cluster)                 key                           value
========================  ==============================  ============================  ===========================
checkpoint                ``<src>.checkpoints.internal``  group, topic (the *remote*    version=0 (int16), upstream
                          (target)                        name), partition (int32)      offset, downstream offset
                                                                                        (int64 each), metadata
offset sync               ``mm2-offset-syncs.<tgt>.       topic, partition (upstream)   upstream, downstream offset
                          internal`` (source)
heartbeat                 ``heartbeats`` (target)         source alias, target alias    version=0, timestamp ms
========================  ==============================  ============================  ===========================

**Offset translation** (``OffsetSyncStore.translateDownstream`` in 4.3.1): a committed upstream
offset U maps through the latest offset sync S with S.upstream <= U to S.downstream, plus 1
when U is past S.upstream. A sync is written for the first record, then when
``offset.lag.max`` (100) records went by, or at the next offset flush (every second here).
So a translated offset is never ahead of what the group processed on the source: a group
that fails over re-reads up to about ``offset.lag.max`` records, and never skips one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Optional

from ..records import read_all

if TYPE_CHECKING:
    from ..runtime.protocols import ClusterLike

#: DefaultReplicationPolicy's separator: ``orders`` from ``primary`` is ``primary.orders`` on the target.
SEPARATOR = "."


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def string(self) -> str:
        n = self.int16()
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("a STRING longer than its record")
        text = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return text

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} bytes left over")


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


@dataclass(frozen=True)
class Checkpoint:
    """A group's committed offset on the source (``upstream_offset``), translated for the target."""

    group: str
    #: The topic on the *target* cluster ("primary.orders"): the one to consume there.
    topic: str
    partition: int
    upstream_offset: int
    #: Where the group resumes on the target: never ahead of what it processed on the source.
    downstream_offset: int
    metadata: str = ""


@dataclass(frozen=True)
class OffsetSync:
    """Record ``upstream_offset`` of ``topic`` (source) is record ``downstream_offset`` of its copy (target)."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp_ms: int


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    k, v = _Reader(key), _Reader(value)
    group, topic, partition = k.string(), k.string(), k.int32()
    k.done()
    version = v.int16()
    if version != 0:
        raise ValueError(f"unknown checkpoint version {version}")
    upstream, downstream, metadata = v.int64(), v.int64(), v.string()
    v.done()
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    """The (key, value) MirrorMaker 2 writes for ``cp``: the inverse of :func:`decode_checkpoint`."""
    key = _string(cp.group) + _string(cp.topic) + struct.pack(">i", cp.partition)
    value = struct.pack(">hqq", 0, cp.upstream_offset, cp.downstream_offset) + _string(cp.metadata)
    return key, value


def decode_offset_sync(key: bytes, value: bytes) -> OffsetSync:
    k, v = _Reader(key), _Reader(value)
    topic, partition = k.string(), k.int32()
    k.done()
    upstream, downstream = v.int64(), v.int64()
    v.done()
    return OffsetSync(topic, partition, upstream, downstream)


def decode_heartbeat(key: bytes, value: bytes) -> Heartbeat:
    k, v = _Reader(key), _Reader(value)
    source, target = k.string(), k.string()
    k.done()
    version = v.int16()
    if version != 0:
        raise ValueError(f"unknown heartbeat version {version}")
    stamp = v.int64()
    v.done()
    return Heartbeat(source, target, stamp)


def translate(syncs: Iterable[OffsetSync], topic: str, partition: int, upstream: int) -> int:
    """MirrorMaker 2's translation of a committed ``upstream`` offset with the ``syncs`` at hand (module doc);
    -1 when no sync is old enough."""
    older = [s for s in syncs if s.topic == topic and s.partition == partition and s.upstream_offset <= upstream]
    if not older:
        return -1
    best = max(older, key=lambda s: s.upstream_offset)
    return best.downstream_offset + (0 if best.upstream_offset == upstream else 1)


# ---------------------------------------------------------------- reading them back


def remote_topic(source_alias: str, topic: str) -> str:
    """The name ``topic`` of cluster ``source_alias`` has on the target: ``primary.orders``."""
    return f"{source_alias}{SEPARATOR}{topic}"


def checkpoints_topic(source_alias: str) -> str:
    return f"{source_alias}{SEPARATOR}checkpoints.internal"


def offset_syncs_topic(target_alias: str) -> str:
    return f"mm2-offset-syncs{SEPARATOR}{target_alias}{SEPARATOR}internal"


def read_checkpoints(target: "ClusterLike", source_alias: str, group: Optional[str] = None) -> list[Checkpoint]:
    """The latest checkpoint per (group, topic, partition) in ``<source_alias>.checkpoints.internal`` on
    ``target`` (only ``group``'s when given), sorted; [] when the topic does not exist yet."""
    name = checkpoints_topic(source_alias)
    if name not in target.topics(internal=True):
        return []
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for record in read_all(target, name):
        if record.key is None or record.value is None:
            continue
        cp = decode_checkpoint(record.key, record.value)
        if group is None or cp.group == group:
            latest[(cp.group, cp.topic, cp.partition)] = cp
    return [latest[k] for k in sorted(latest)]


def translated_offsets(target: "ClusterLike", group: str, source_alias: str, topic: str) -> dict[int, int]:
    """Where ``group`` resumes on ``target`` after a failover: ``{partition: offset}`` of the remote topic
    (``<source_alias>.<topic>``), from MirrorMaker 2's latest checkpoints. What Java's
    ``RemoteClusterUtils.translateOffsets`` returns; partitions the group never committed are left out."""
    remote = remote_topic(source_alias, topic)
    return {cp.partition: cp.downstream_offset for cp in read_checkpoints(target, source_alias, group)
            if cp.topic == remote}


def read_offset_syncs(source: "ClusterLike", target_alias: str) -> list[OffsetSync]:
    """Every offset sync MirrorMaker 2 wrote on ``source`` for the flow to ``target_alias``, oldest first."""
    name = offset_syncs_topic(target_alias)
    if name not in source.topics(internal=True):
        return []
    return [decode_offset_sync(r.key, r.value) for r in read_all(source, name) if r.key and r.value]


def read_heartbeats(target: "ClusterLike", topic: str = "heartbeats") -> list[Heartbeat]:
    """The heartbeats in ``topic`` on ``target`` (``heartbeats``, or a replicated ``primary.heartbeats``)."""
    if topic not in target.topics(internal=True):
        return []
    return [decode_heartbeat(r.key, r.value) for r in read_all(target, topic) if r.key and r.value]
