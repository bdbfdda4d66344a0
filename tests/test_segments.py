"""labkit.segments: parsing kafka-dump-log output, and real segments of a real partition."""

from __future__ import annotations

import pytest

from labkit import segments

DUMP = """Dumping /tmp/x/orders-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795408529753 size: 90 magic: 2 compresscodec: lz4 crc: 1 isvalid: true
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
