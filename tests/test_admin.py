"""labkit.admin's own behaviour, on a stand-in AdminClient that fails the way librdkafka does (no broker)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from labkit import admin
from labkit.errors import ClusterStateError


class _Admin:
    """Answers each create_topics() call with the next error (None: created)."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def create_topics(self, topics, **_):
        self.calls += 1
        future: Future = Future()
        code = self.errors.pop(0)
        if code is None:
            future.set_result(None)
        else:
            future.set_exception(KafkaException(KafkaError(code)))
        return {topics[0].topic: future}


def test_a_retired_bootstrap_connection_is_asked_again_and_a_topic_it_created_counts():
    fake = _Admin(KafkaError._DESTROY_BROKER, KafkaError.TOPIC_ALREADY_EXISTS)
    admin.create_topic(fake, "orders")
    assert fake.calls == 2


def test_only_once():
    fake = _Admin(KafkaError._DESTROY_BROKER, KafkaError._DESTROY_BROKER)
    with pytest.raises(ClusterStateError, match="Could not create topic 'orders'"):
        admin.create_topic(fake, "orders")
    assert fake.calls == 2


def test_an_existing_topic_is_an_error_unless_allowed():
    with pytest.raises(ClusterStateError):
        admin.create_topic(_Admin(KafkaError.TOPIC_ALREADY_EXISTS), "orders")
    admin.create_topic(_Admin(KafkaError.TOPIC_ALREADY_EXISTS), "orders", exist_ok=True)
