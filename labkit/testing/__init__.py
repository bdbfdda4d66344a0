"""Kafka Lab for your own tests: real Kafka clusters in pytest, no Docker (issue 30).

``pip install kafka-lab`` registers :mod:`labkit.testing.plugin` with pytest (entry point ``pytest11``), so
plain ``pytest`` in any project finds its fixtures::

    def test_orders_are_keyed_by_customer(kafka_cluster, kafka_topic, kafka_faults):
        kafka_faults.kill_leader(kafka_topic, partition=0)      # a broker dies; your code must not care
        ...

* ``kafka_cluster`` -- a real cluster for the whole session (profile ``--kafka-profile`` or the ini option
  ``kafka_profile``, default three brokers; ``@pytest.mark.parametrize("kafka_cluster", ["secured"],
  indirect=True)`` for another one; ``--kafka-bootstrap`` or ``LABKIT_BOOTSTRAP`` attaches to an existing one);
* ``kafka_topic`` / ``kafka_topic_factory`` -- a fresh topic per test (``@pytest.mark.kafka_topic(...)`` shapes it);
* ``kafka_registry`` -- a schema registry beside the cluster (Confluent's API);
* ``kafka_faults`` -- :class:`~labkit.testing.faults.Faults`: kill a partition's leader, freeze a broker, wait
  for the ISR; whatever a test broke is repaired when it ends, so the session's cluster stays healthy.

:mod:`labkit.testing.topology` runs a Kafka Streams topology through Kafka's own ``TopologyTestDriver``.

Layer: testing, the top layer beside app (nothing in labkit imports it).
"""

from __future__ import annotations

from .faults import Faults

__all__ = ["Faults"]
