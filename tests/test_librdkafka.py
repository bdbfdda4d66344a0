"""The producer labkit hands out: confluent-kafka's, whose flush(timeout) waits while records are still being
acknowledged (a busy machine is slow, not broken) and returns what is left once nothing moves for `timeout` s."""

from __future__ import annotations

import time

import confluent_kafka

from labkit.runtime.librdkafka import Producer, quiet


class _Queue(confluent_kafka.Producer):
    """confluent-kafka's Producer whose queue is scripted: each flush() call waits up to ``step`` s and then
    ``drain`` records have been acknowledged."""

    def __init__(self, records: int, drain: int, step: float) -> None:
        super().__init__({"bootstrap.servers": "127.0.0.1:9", **quiet()})  # nothing is ever sent
        self.records, self.drain, self.step, self.calls = records, drain, step, 0

    def __len__(self) -> int:
        return self.records

    def flush(self, timeout: float = -1) -> int:
        self.calls += 1
        time.sleep(self.step if timeout < 0 else min(self.step, timeout))
        self.records = max(0, self.records - self.drain)
        return self.records


class _LabQueue(Producer, _Queue):
    """labkit's flush on top of the scripted queue."""


def test_flush_keeps_waiting_while_the_queue_shrinks():
    queue = _LabQueue(records=12, drain=1, step=0.1)  # one record acknowledged per 0.1 s: 1.2 s in all
    assert queue.flush(0.3) == 0
    assert queue.calls == 12


def test_flush_returns_what_is_left_when_nothing_moves():
    queue = _LabQueue(records=5, drain=0, step=0.1)
    t0 = time.monotonic()
    assert queue.flush(0.5) == 5
    assert time.monotonic() - t0 >= 0.5


def test_flush_without_a_timeout_and_on_an_empty_queue():
    assert _LabQueue(records=0, drain=0, step=0.1).flush(5) == 0
    assert _LabQueue(records=3, drain=1, step=0.01).flush() == 2  # no timeout: confluent-kafka's own flush


def test_a_real_producer_with_no_broker_gives_up_after_its_timeout():
    producer = Producer({"bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 1000, **quiet()})
    for i in range(3):
        producer.produce("nowhere", value=str(i))
    assert producer.flush(1.0) == 3
