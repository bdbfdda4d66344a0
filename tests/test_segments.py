"""labkit.segments: parsing kafka-dump-log output, and real segments of a real partition."""

from __future__ import annotations

import pytest

from labkit import segments

DUMP = """Dumping /tmp/x/orders-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong[1795408536000] position: 0 CreateTime: 1795408529753 size: 90 magic: 2 compresscodec: lz4 crc: 1 isvalid: true
| offset: 0 CreateTime: 1795408529753 keySize: 2 valueSize: 11 sequence: 0 headerKeys: [] key: k0 payload: hello world
| offset: 1 CreateTime: 1795408529753 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: v1
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 90 CreateTime: 1795408529800 size: 78 magic: 2 compresscodec: none crc: 2 isvalid: true
| offset: 2 CreateTime: 1795408529800 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
"""


def test_parse_dump_reads_batches_records_and_markers():
    batches = segments.parse_dump(DUMP)
    assert [(b.base_offset, b.last_offset, b.count) for b in batches] == [(0, 1, 2), (2, 2, 1)]
    first, marker = batches
    assert (first.producer_id, first.base_sequence, first.last_sequence) == (7, 0, 1)
    assert first.transactional and not first.control and first.compression == "lz4"
    assert first.records[0].key == "k0" and first.records[0].payload == "hello world"
    assert first.records[1].key is None and first.records[1].payload == "v1"
    assert marker.control and marker.records[0].marker == "COMMIT"
    assert (first.delete_horizon_ms, marker.delete_horizon_ms) == (1795408536000, None), "set by a cleaning, or not"
    frame = segments.batches_frame(batches)
    assert list(frame.base_offset) == [0, 2] and list(frame.control) == [False, True]


@pytest.mark.integration
def test_idempotent_batches_on_disk_carry_producer_id_and_sequences(cluster, unique):
    topic = cluster.create_topic(unique("segments"), partitions=1)
    producer = cluster.producer(enable_idempotence=True, linger_ms=50)
    for i in range(10):
        producer.produce(topic, key=f"k{i}", value=f"v{i}")
    assert producer.flush(10) == 0
    files = segments.list_segments(cluster, topic)
    assert "00000000000000000000.log" in set(files.file)
    batches = segments.dump_partition(cluster, topic)
    records = [r for b in batches for r in b.records]
    assert [r.offset for r in records] == list(range(10))
    assert [r.payload for r in records] == [f"v{i}" for i in range(10)]
    assert all(b.producer_id >= 0 for b in batches)
    assert [r.sequence for r in records] == list(range(10))


INDEX_DUMP = """Dumping /tmp/x/readings-0/00000000000000000000.index
offset: 19 position: 1000
offset: 39 position: 3000
Dumping /tmp/x/readings-0/00000000000000000000.timeindex
timestamp: 1190 offset: 19
timestamp: 1390 offset: 39
The following indexed offsets are not found in the log.
Indexed offset: 39, found log offset: 40
"""


def _segment() -> segments.IndexedSegment:
    """Five batches of ten records at bytes 0, 1000, ...; record i has timestamp 1000 + 10 * i."""
    batches = []
    for b in range(5):
        records = [segments.StoredRecord(offset=i, create_time=1000 + 10 * i, key=None, payload=str(i), sequence=-1)
                   for i in range(10 * b, 10 * b + 10)]
        batches.append(segments.Batch(base_offset=10 * b, last_offset=10 * b + 9, count=10, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, last_sequence=-1, transactional=False,
                                      control=False, position=1000 * b, create_time=records[-1].create_time,
                                      size=1000, compression="none", records=records))
    offsets, times = segments.parse_index_dump(INDEX_DUMP)
    return segments.IndexedSegment(0, offsets, times, batches)


def test_parse_index_dump_reads_both_indexes_and_ignores_everything_else():
    offsets, times = segments.parse_index_dump(DUMP + INDEX_DUMP)
    assert offsets == [segments.OffsetIndexEntry(19, 1000), segments.OffsetIndexEntry(39, 3000)]
    assert times == [segments.TimeIndexEntry(1190, 19), segments.TimeIndexEntry(1390, 39)]
    assert [b.base_offset for b in segments.parse_dump(DUMP + INDEX_DUMP)] == [0, 2], "index lines are not batches"


def test_lookup_by_offset_starts_at_the_last_entry_at_or_below_and_scans_batches():
    seg = _segment()
    hit = seg.lookup_offset(25)
    assert (hit.entry, hit.start_position, hit.offset) == (segments.OffsetIndexEntry(19, 1000), 1000, 25)
    assert [b.base_offset for b in hit.scanned] == [10, 20]
    assert "byte 1,000" in hit.explain() and "offset 25" in hit.explain()
    first = seg.lookup_offset(5)
    assert (first.entry, first.start_position, first.offset, len(first.scanned)) == (None, 0, 5, 1)
    assert seg.lookup_offset(45).entry == segments.OffsetIndexEntry(39, 3000)
    assert seg.lookup_offset(99).offset is None and "not in it" in seg.lookup_offset(99).explain()


def test_lookup_by_time_goes_timeindex_then_index_then_log():
    seg = _segment()
    hit = seg.lookup_time(1255)
    assert hit.time_entry == segments.TimeIndexEntry(1190, 19)
    assert (hit.from_offset, hit.entry, hit.offset) == (19, segments.OffsetIndexEntry(19, 1000), 26)
    assert [b.base_offset for b in hit.scanned] == [10, 20]
    assert ".timeindex" in hit.explain() and "offset 26" in hit.explain()
    assert seg.lookup_time(1260).offset == 26, "a record exactly at the timestamp is the answer"
    assert (seg.lookup_time(0).time_entry, seg.lookup_time(0).offset) == (None, 0)
    assert seg.lookup_time(10**6).offset is None


@pytest.mark.integration
def test_the_index_model_finds_what_the_broker_finds(cluster, unique):
    """Sparse indexes on a real segment; lookups by offset and by time agree with a fetch and offsets_for_times."""
    import time

    from confluent_kafka import TopicPartition

    topic = cluster.create_topic(unique("indexed"), partitions=1)
    producer = cluster.producer(batch_num_messages=10, linger_ms=5)
    start_ms = int(time.time() * 1000) - 600_000
    for i in range(300):
        producer.produce(topic, value=f"{i:04d}" + "x" * 200, timestamp=start_ms + 1000 * i)
    assert producer.flush(10) == 0
    seg = segments.dump_indexed_segment(cluster, segments.segment_files(cluster, topic)[0])
    assert seg.records == 300
    assert 0 < len(seg.offsets) < len(seg.batches), "the offset index is sparse"
    starts = {b.last_offset: b.position for b in seg.batches}
    assert all(starts.get(e.offset) == e.position for e in seg.offsets), "each entry points at its batch's start"
    assert [e.offset for e in seg.times] == [e.offset for e in seg.offsets]
    consumer = cluster.consumer(unique("lookup"), enable_auto_commit=False)
    try:
        for target in (0, 7, 151, 299):
            assert seg.lookup_offset(target).offset == target
            consumer.assign([TopicPartition(topic, 0, target)])
            msg = consumer.poll(10)
            assert msg is not None and not msg.error() and msg.offset() == target
        for ts in (start_ms - 5, start_ms + 1000 * 151 + 500, start_ms + 1000 * 299):
            [found] = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert seg.lookup_time(ts).offset == found.offset
    finally:
        consumer.close()


@pytest.mark.integration
def test_a_compacted_tombstone_carries_the_delete_horizon_its_cleaning_stamped(cluster, unique):
    """The first cleaning that keeps a tombstone stamps its batch with that cleaning's start plus the topic's
    delete.retention.ms (KIP-534); the cleaner's lines are in the broker's log-cleaner.log."""
    import time

    from labkit.waiting import Wait

    topic = cluster.create_topic(unique("horizon"), partitions=1, replication_factor=1, config={
        "cleanup.policy": "compact", "segment.ms": 100, "min.cleanable.dirty.ratio": 0.01,
        "delete.retention.ms": 60_000})
    leader = cluster.describe_topic(topic)[0].leader
    cluster.alter_configs("broker", str(leader), {"log.cleaner.backoff.ms": 500})
    try:
        producer = cluster.producer()
        delivered = []
        written = time.time() * 1000
        for value in (b"v1", b"v2", None):
            producer.produce(topic, key=b"k", value=value, on_delivery=lambda err, msg: delivered.append(msg.offset()))
        assert producer.flush(10) == 0
        tombstone = delivered[-1]

        def compacted() -> bool:  # a record more rolls the segment holding the tombstone: the cleaner may take it
            producer.produce(topic, key=b"filler", value=b"x")
            producer.flush(10)
            return [r.value for r in cluster.read_all(topic) if r.key == b"k"] == [None]

        Wait("the cleaner to remove k's values", timeout=60, interval=0.3).until(compacted)
        [batch] = [b for b in segments.dump_partition(cluster, topic) if b.base_offset <= tombstone <= b.last_offset]
        assert batch.delete_horizon_ms is not None
        assert written + 60_000 <= batch.delete_horizon_ms <= time.time() * 1000 + 60_000, \
            "a cleaning between the write and now, plus delete.retention.ms"
        assert cluster.broker_log(leader, file="log-cleaner", grep=f"Beginning cleaning of log {topic}-0")
    finally:
        cluster.alter_configs("broker", str(leader), {"log.cleaner.backoff.ms": 15_000})  # Kafka's default
