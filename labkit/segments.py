"""A partition on disk: its segment files, and the batches inside them as Kafka's dump tool reports them.

``list_segments`` lists the files of one partition on one broker (``.log``,
``.index``, ``.timeindex``, named by base offset). ``dump_segment`` runs Kafka's
own ``kafka-dump-log`` on a ``.log`` file and parses each record batch (base and
last offset, producer id, epoch, sequence numbers, transactional and control
flags, compression) and, with ``records=True``, each record in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .errors import ClusterStateError

if TYPE_CHECKING:
    import pandas as pd

    from .cluster import Cluster

_FIELD = re.compile(r"(\w+): (\S*)")


@dataclass
class StoredRecord:
    offset: int
    create_time: int
    key: Optional[str]
    payload: Optional[str]
    sequence: int
    #: For control records (transaction markers): "COMMIT" or "ABORT".
    marker: Optional[str] = None


@dataclass
class Batch:
    """One record batch of a segment, as ``kafka-dump-log`` prints it."""

    base_offset: int
    last_offset: int
    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    transactional: bool
    control: bool
    position: int
    create_time: int
    size: int
    compression: str
    records: list[StoredRecord] = field(default_factory=list)


def partition_dir(cluster: "Cluster", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> Path:
    """The directory of ``topic``-``partition`` on ``broker_id`` (default: the partition's leader)."""
    topic = cluster.topic_name(topic)
    if broker_id is None:
        broker_id = cluster.describe_topic(topic)[partition].leader
        if broker_id is None:
            raise ClusterStateError(f"Partition {partition} of {topic!r} has no leader right now.",
                                    "Pass broker_id= to read a follower's copy.")
    path = cluster.log_dir(broker_id) / f"{topic}-{partition}"
    if not path.is_dir():
        raise ClusterStateError(f"Broker {broker_id} has no copy of {topic}-{partition}.",
                                "cluster.describe_topic(topic) lists each partition's replicas.")
    return path


def list_segments(cluster: "Cluster", topic: str, partition: int = 0,
                  broker_id: Optional[int] = None) -> "pd.DataFrame":
    """The files of one partition: one row per file with its base offset, kind and size in bytes."""
    import pandas as pd

    rows = []
    for f in sorted(partition_dir(cluster, topic, partition, broker_id).iterdir()):
        base = int(f.stem) if f.stem.isdigit() else None
        rows.append({"file": f.name, "base_offset": base, "kind": f.suffix.lstrip(".") or f.name,
                     "bytes": f.stat().st_size})
    frame = pd.DataFrame(rows, columns=["file", "base_offset", "kind", "bytes"])
    frame["base_offset"] = frame["base_offset"].astype("Int64")
    return frame


def segment_files(cluster: "Cluster", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> list[Path]:
    """The ``.log`` files of a partition, oldest first (the last one is the active segment)."""
    return sorted(partition_dir(cluster, topic, partition, broker_id).glob("*.log"))


def parse_dump(text: str) -> list[Batch]:
    """Parse ``kafka-dump-log --print-data-log`` output into batches (and their records)."""
    batches: list[Batch] = []
    for line in text.splitlines():
        if line.startswith("baseOffset:"):
            f = dict(_FIELD.findall(line))
            batches.append(Batch(
                base_offset=int(f["baseOffset"]), last_offset=int(f["lastOffset"]), count=int(f["count"]),
                producer_id=int(f["producerId"]), producer_epoch=int(f["producerEpoch"]),
                base_sequence=int(f["baseSequence"]), last_sequence=int(f["lastSequence"]),
                transactional=f["isTransactional"] == "true", control=f["isControl"] == "true",
                position=int(f["position"]), create_time=int(f["CreateTime"]), size=int(f["size"]),
                compression=f.get("compresscodec", "none")))
        elif line.startswith("| offset:") and batches:
            head, _, payload = line.partition(" payload: ")
            head, _, key = head.partition(" key: ")
            f = dict(_FIELD.findall(line))
            marker = f.get("endTxnMarker")
            batches[-1].records.append(StoredRecord(
                offset=int(f["offset"]), create_time=int(f.get("CreateTime", -1)),
                key=key if "key: " in line else None,
                payload=payload if " payload: " in line else None,
                sequence=int(f.get("sequence", -1)), marker=marker))
    return batches


def dump_segment(cluster: "Cluster", path: Path | str) -> list[Batch]:
    """Run Kafka's ``kafka-dump-log`` on a segment file and return its batches with their records."""
    result = cluster.tool("kafka-dump-log", "--files", str(path), "--print-data-log")
    return parse_dump(result.stdout)


def dump_partition(cluster: "Cluster", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> list[Batch]:
    """Every batch of every segment of a partition, oldest first."""
    files = segment_files(cluster, topic, partition, broker_id)
    if not files:
        return []
    result = cluster.tool("kafka-dump-log", "--files", ",".join(str(f) for f in files), "--print-data-log")
    return parse_dump(result.stdout)


def batches_frame(batches: list[Batch]) -> "pd.DataFrame":
    """Batches as a table: offsets, count, producer id/epoch, sequences, flags, compression, size."""
    import pandas as pd

    return pd.DataFrame([{
        "base_offset": b.base_offset, "last_offset": b.last_offset, "count": b.count,
        "producer_id": b.producer_id, "epoch": b.producer_epoch, "base_seq": b.base_sequence,
        "last_seq": b.last_sequence, "transactional": b.transactional, "control": b.control,
        "compression": b.compression, "bytes": b.size,
    } for b in batches])


def records_frame(batches: list[Batch]) -> "pd.DataFrame":
    """Every record of the batches as a table (offset, key, payload, sequence, transaction marker)."""
    import pandas as pd

    return pd.DataFrame([{"offset": r.offset, "key": r.key, "payload": r.payload, "sequence": r.sequence,
                          "producer_id": b.producer_id, "marker": r.marker}
                         for b in batches for r in b.records])
