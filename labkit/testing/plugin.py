"""The pytest plugin: real Kafka clusters as fixtures (registered as ``kafka_lab`` in the ``pytest11`` entry points).

pytest loads this module in every session of an environment where kafka-lab is installed; nothing
starts until a test asks for a fixture, so a session that uses none pays only the import.

* ``kafka_profile`` (session) -- the profile ``kafka_cluster`` starts: ``--kafka-profile``, else the ini option
  ``kafka_profile``, else three brokers. Override the fixture in a ``conftest.py`` to choose in code.
* ``kafka_cluster`` (session) -- a started :class:`~labkit.cluster.Cluster` (clients:
  ``kafka_cluster.producer()``, ``.consumer(group)``, ``.client_config()``; reads: ``.read_all(topic)``,
  ``.describe_topic(topic)``); stopped when the session ends. Parametrize it indirectly for other profiles --
  ``@pytest.mark.parametrize("kafka_cluster", ["secured", "single-broker"], indirect=True)`` -- pytest then
  keeps one cluster per profile and runs the tests of each together. ``--kafka-bootstrap HOST:PORT`` (or
  ``LABKIT_BOOTSTRAP``) attaches to a cluster that runs already; the fault helpers skip there.
* ``kafka_topic`` -- a topic made for this test alone (its name: the test's, plus a random suffix), shaped by
  ``@pytest.mark.kafka_topic(partitions=..., replication_factor=..., config={...})``; ``kafka_topic_factory``
  makes more (``kafka_topic_factory("invoices", partitions=1)``). Each returns once every broker knows it.
* ``kafka_registry`` (session) -- a schema registry beside the cluster (``.url`` for confluent-kafka's
  ``SchemaRegistryClient``, ``.client()``).
* ``kafka_faults`` -- :class:`~labkit.testing.faults.Faults` on the cluster; it repairs what the test broke.

Under pytest-xdist every worker starts its own session cluster (``--dist loadgroup`` with an
``xdist_group`` mark keeps the Kafka tests in one worker).
"""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import pytest

#: What ``kafka_cluster`` starts unless told otherwise: the lab's default, three brokers (replication factor 3).
DEFAULT_PROFILE = "three-brokers"
_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
#: The test pytest runs after this one (None after the session's last): ``kafka_faults`` repairs nothing for no one.
_NEXT = pytest.StashKey[Optional[pytest.Item]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-lab", "Kafka Lab: real Kafka clusters as fixtures (labkit.testing)")
    group.addoption("--kafka-profile", default=None, metavar="PROFILE",
                    help="the profile kafka_cluster starts (three-brokers, single-broker, secured, ...)")
    group.addoption("--kafka-bootstrap", default=None, metavar="HOST:PORT",
                    help="attach kafka_cluster to a cluster that runs already instead of starting one")
    parser.addini("kafka_profile", "the profile kafka_cluster starts", default=DEFAULT_PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_topic(partitions=3, replication_factor=-1, config=None): "
                                       "how kafka_topic creates this test's topic")


@contextmanager
def started(profile: str = DEFAULT_PROFILE, bootstrap: Optional[str] = None) -> Iterator[Any]:
    """A cluster for tests: started (or attached to ``bootstrap``) now, stopped when the block ends.

    The one way the plugin's fixtures -- and the lab's own test suite -- get a cluster.
    """
    from ..backends import start_cluster

    cluster = start_cluster(profile, progress=False, bootstrap_servers=bootstrap)
    try:
        yield cluster
    finally:
        cluster.stop()


def topic_base(name: str) -> str:
    """A test's name as the start of a topic name: Kafka's characters only, short enough for a suffix."""
    return _TOPIC_CHARS.sub("-", name).strip("-.")[:80] or "topic"


@pytest.fixture(scope="session")
def kafka_profile(pytestconfig: pytest.Config) -> str:
    """The profile ``kafka_cluster`` starts (``--kafka-profile``, ini ``kafka_profile``, or three brokers)."""
    return pytestconfig.getoption("kafka_profile") or pytestconfig.getini("kafka_profile") or DEFAULT_PROFILE


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest, kafka_profile: str) -> Iterator[Any]:
    """A real Kafka cluster for the session (see the module doc); an indirect parameter names its profile."""
    profile = getattr(request, "param", None) or kafka_profile
    with started(profile, request.config.getoption("kafka_bootstrap")) as cluster:
        yield cluster


@pytest.fixture
def kafka_topic_factory(request: pytest.FixtureRequest, kafka_cluster: Any) -> Callable[..., str]:
    """``make(name=None, partitions=3, replication_factor=-1, config=None)`` -> a new topic's name (unique)."""
    def make(name: Optional[str] = None, partitions: int = 3, replication_factor: int = -1,
             config: Optional[dict[str, Any]] = None) -> str:
        base = topic_base(name or request.node.name)
        return kafka_cluster.create_topic(f"{base}-{uuid.uuid4().hex[:8]}", partitions, replication_factor, config)

    return make


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest, kafka_topic_factory: Callable[..., str]) -> str:
    """A topic of this test's own (``@pytest.mark.kafka_topic(partitions=..., config=...)`` shapes it)."""
    marker = request.node.get_closest_marker("kafka_topic")
    return kafka_topic_factory(**(marker.kwargs if marker else {}))


@pytest.fixture(scope="session")
def kafka_registry(kafka_cluster: Any) -> Any:
    """A schema registry beside ``kafka_cluster`` (Apicurio, Confluent's API: ``.url``, ``.client()``)."""
    return kafka_cluster.start_schema_registry()


@pytest.fixture
def kafka_faults(request: pytest.FixtureRequest, kafka_cluster: Any) -> Iterator[Any]:
    """:class:`~labkit.testing.faults.Faults` on ``kafka_cluster``; what the test broke is repaired after it (unless
    it is the session's last test: the cluster stops next anyway)."""
    from .faults import Faults

    if not getattr(kafka_cluster, "owns_brokers", False):
        pytest.skip(f"kafka_faults breaks brokers, and this session's cluster is {kafka_cluster.backend}: "
                    "run without --kafka-bootstrap / LABKIT_BOOTSTRAP to get a cluster of the test's own")
    faults = Faults(kafka_cluster)
    try:
        yield faults
    finally:
        if request.node.stash.get(_NEXT, request.node) is not None:
            faults.heal()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Optional[pytest.Item]) -> None:
    item.stash[_NEXT] = nextitem  # before the fixtures' teardown, which runs in pytest's own hook after this one


def pytest_report_header(config: pytest.Config) -> str:
    import os

    bootstrap = config.getoption("kafka_bootstrap") or os.environ.get("LABKIT_BOOTSTRAP")
    if bootstrap:
        return f"kafka-lab: kafka_cluster attaches to {bootstrap}"
    profile = config.getoption("kafka_profile") or config.getini("kafka_profile") or DEFAULT_PROFILE
    return f"kafka-lab: kafka_cluster starts {profile!r} when a test first asks for it"
