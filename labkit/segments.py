"""A partition on disk: its segment files, and the batches inside them as Kafka's dump tool reports them.

``list_segments`` lists the files of one partition on one broker (``.log``,
``.index``, ``.timeindex``, named by base offset). ``dump_segment`` runs Kafka's
own ``kafka-dump-log`` on a ``.log`` file and parses each record batch (base and
last offset, producer id, epoch, sequence numbers, transactional and control
flags, compression) and each record in it.

``dump_indexed_segment`` reads a segment together with its two sparse indexes
(``.index``: offset -> byte position of the batch holding it; ``.timeindex``:
timestamp -> offset), and its ``lookup_offset`` / ``lookup_time`` replay how the
broker finds a record in it (Kafka's ``LogSegment.translateOffset`` and
``findOffsetByTimestamp``): the last index entry at or below the target, then a
scan of the ``.log`` from that byte position, batch by batch.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from .errors import ClusterStateError, ToolError

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import OwnedClusterLike

_FIELD = re.compile(r"(\w+): (\S*)")
_OFFSET_ENTRY = re.compile(r"^offset: (\d+) position: (\d+)$")
_TIME_ENTRY = re.compile(r"^timestamp: (-?\d+) offset: (\d+)$")


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
    #: When the log cleaner may remove this batch's tombstones (epoch ms): set by the first cleaning that kept
    #: them, to its start plus the topic's ``delete.retention.ms`` (KIP-534); None until then.
    delete_horizon_ms: Optional[int] = None


def partition_dir(cluster: "OwnedClusterLike", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> Path:
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


def list_segments(cluster: "OwnedClusterLike", topic: str, partition: int = 0,
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


def segment_files(cluster: "OwnedClusterLike", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> list[Path]:
    """The ``.log`` files of a partition, oldest first (the last one is the active segment)."""
    return _logs(partition_dir(cluster, topic, partition, broker_id))


def _logs(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


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
                compression=f.get("compresscodec", "none"), delete_horizon_ms=_optional_long(f.get("deleteHorizonMs"))))
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


def _optional_long(text: Optional[str]) -> Optional[int]:
    """``OptionalLong[1795408529753]`` -> 1795408529753; ``OptionalLong.empty`` (or nothing) -> None."""
    found = re.fullmatch(r"OptionalLong\[(-?\d+)\]", text or "")
    return int(found.group(1)) if found else None


def dump_segment(cluster: "OwnedClusterLike", path: Path | str) -> list[Batch]:
    """Run Kafka's ``kafka-dump-log`` on a segment file and return its batches with their records."""
    result = cluster.tool("kafka-dump-log", "--files", str(path), "--print-data-log")
    return parse_dump(result.stdout)


def dump_partition(cluster: "OwnedClusterLike", topic: str, partition: int = 0, broker_id: Optional[int] = None) -> list[Batch]:
    """Every batch of every segment of a partition, oldest first. The log cleaner may swap a segment out while
    the tool reads it (a ``NoSuchFileException``): then the files are listed and read again."""
    directory = partition_dir(cluster, topic, partition, broker_id)
    tries = 0
    while True:
        files = _logs(directory)  # listed again on each try: the cleaner renames segments
        if not files:
            return []
        try:
            return parse_dump(cluster.tool("kafka-dump-log", "--files", ",".join(str(f) for f in files),
                                           "--print-data-log").stdout)
        except ToolError as exc:
            tries += 1
            if "NoSuchFileException" not in str(exc) or tries == 5:
                raise


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


# ---------------------------------------------------------------- the sparse indexes of a segment
@dataclass(frozen=True)
class OffsetIndexEntry:
    """An ``.index`` entry: the batch holding ``offset`` starts at byte ``position`` of the ``.log``."""

    offset: int
    position: int


@dataclass(frozen=True)
class TimeIndexEntry:
    """A ``.timeindex`` entry: ``timestamp`` is the largest timestamp of the records up to ``offset``
    (so a record with a later timestamp lies after it)."""

    timestamp: int
    offset: int


@dataclass
class Lookup:
    """How the broker finds ``target`` (an offset, or a timestamp in ms) in one segment."""

    by: str
    target: int
    #: The ``.timeindex`` entry used (time lookups only; None: no entry at or below the target).
    time_entry: Optional[TimeIndexEntry]
    #: The offset looked up in ``.index`` (the target, or for a time lookup the time entry's offset).
    from_offset: int
    #: The ``.index`` entry used; None: no entry at or below, so the scan starts at byte 0.
    entry: Optional[OffsetIndexEntry]
    start_position: int
    #: The batches read from ``start_position`` on, the last one holding the answer.
    scanned: list[Batch]
    #: The answer: the offset found (None: the target is beyond this segment).
    offset: Optional[int]

    def explain(self) -> str:
        """The lookup step by step, in a few lines of text."""
        what = f"offset {self.target}" if self.by == "offset" else f"timestamp {self.target} (first record at or after it)"
        lines = [f"looking up {what}:"]
        step = 1
        if self.by == "time":
            lines.append(f"  {step}. .timeindex: " + (
                f"last entry at or below it: timestamp {self.time_entry.timestamp} at offset {self.time_entry.offset}"
                if self.time_entry else "no entry at or below it: start from the segment's first offset"))
            step += 1
        lines.append(f"  {step}. .index: " + (f"last entry at or below offset {self.from_offset}: "
                                               f"offset {self.entry.offset} -> byte {self.entry.position:,} of the .log"
                                               if self.entry else f"no entry at or below offset {self.from_offset}: "
                                                                  "start at byte 0 of the .log"))
        if self.offset is None:
            lines.append(f"  {step + 1}. .log: read to the end of the segment: not in it")
        else:
            last = self.scanned[-1]
            lines.append(f"  {step + 1}. .log: read {len(self.scanned)} batch(es) from byte {self.start_position:,}; "
                         f"the one at byte {last.position:,} (offsets {last.base_offset}-{last.last_offset}) "
                         f"holds the answer: offset {self.offset}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


@dataclass
class IndexedSegment:
    """A segment's batches with its offset and time indexes, as ``kafka-dump-log`` prints them."""

    base_offset: int
    offsets: list[OffsetIndexEntry]
    times: list[TimeIndexEntry]
    batches: list[Batch]

    @property
    def records(self) -> int:
        return sum(b.count for b in self.batches)

    def _offset_entry(self, offset: int) -> Optional[OffsetIndexEntry]:
        i = bisect_right([e.offset for e in self.offsets], offset)
        return self.offsets[i - 1] if i else None

    def _scan(self, position: int, found: Callable[[Batch], bool]) -> list[Batch]:
        scanned = []
        for batch in sorted(self.batches, key=lambda b: b.position):
            if batch.position < position:
                continue
            scanned.append(batch)
            if found(batch):
                return scanned
        return scanned

    def lookup_offset(self, offset: int) -> Lookup:
        """Kafka's ``translateOffset``: the last index entry at or below ``offset``, then the first batch
        from its position whose last offset reaches ``offset``."""
        entry = self._offset_entry(offset)
        start = entry.position if entry else 0
        scanned = self._scan(start, lambda b: b.last_offset >= offset)
        if not scanned or scanned[-1].last_offset < offset:
            return Lookup("offset", offset, None, offset, entry, start, [], None)
        batch = scanned[-1]  # the first record at or after ``offset`` (compaction can leave gaps)
        found = next((r.offset for r in batch.records if r.offset >= offset), max(offset, batch.base_offset))
        return Lookup("offset", offset, None, offset, entry, start, scanned, found)

    def lookup_time(self, timestamp: int) -> Lookup:
        """Kafka's ``findOffsetByTimestamp``: the last time index entry at or below ``timestamp`` gives an
        offset, the offset index its position; from there, the first record with a timestamp >= it."""
        i = bisect_right([e.timestamp for e in self.times], timestamp)
        time_entry = self.times[i - 1] if i else None
        start_offset = time_entry.offset if time_entry else self.base_offset
        entry = self._offset_entry(start_offset)
        start = entry.position if entry else 0

        def answer(batch: Batch) -> Optional[int]:
            if batch.create_time < timestamp:  # a v2 batch's CreateTime is its largest timestamp
                return None
            return next((r.offset for r in batch.records if r.create_time >= timestamp and r.offset >= start_offset),
                        None)

        scanned = self._scan(start, lambda b: answer(b) is not None)
        offset = answer(scanned[-1]) if scanned else None
        return Lookup("time", timestamp, time_entry, start_offset, entry, start, scanned if offset is not None else [],
                      offset)


def index_files(log_file: Path | str) -> tuple[Path, Path]:
    """The ``.index`` and ``.timeindex`` beside a segment's ``.log``."""
    log_file = Path(log_file)
    return log_file.with_suffix(".index"), log_file.with_suffix(".timeindex")


def parse_index_dump(text: str) -> tuple[list[OffsetIndexEntry], list[TimeIndexEntry]]:
    """The entries of ``.index`` and ``.timeindex`` files in ``kafka-dump-log`` output (other lines ignored)."""
    offsets: list[OffsetIndexEntry] = []
    times: list[TimeIndexEntry] = []
    for line in text.splitlines():
        if m := _OFFSET_ENTRY.match(line):
            offsets.append(OffsetIndexEntry(int(m[1]), int(m[2])))
        elif m := _TIME_ENTRY.match(line):
            times.append(TimeIndexEntry(int(m[1]), int(m[2])))
    return offsets, times


def dump_indexed_segment(cluster: "OwnedClusterLike", log_file: Path | str) -> IndexedSegment:
    """Run ``kafka-dump-log`` once on a segment's ``.log``, ``.index`` and ``.timeindex``; parse all three."""
    log_file = Path(log_file)
    index, timeindex = index_files(log_file)
    result = cluster.tool("kafka-dump-log", "--files", f"{log_file},{index},{timeindex}", "--print-data-log")
    offsets, times = parse_index_dump(result.stdout)
    return IndexedSegment(int(log_file.stem), offsets, times, parse_dump(result.stdout))
