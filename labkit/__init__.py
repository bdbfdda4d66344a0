"""Kafka Lab's helper library: one import for a notebook.

    import labkit
    cluster = labkit.start_cluster()          # a private 3-broker Kafka cluster
    cluster.describe_topic("orders")
    cluster.kill_broker(2); cluster.start_broker(2)
    cluster.stop()

``ls labkit/`` is the teaching API: the modules lessons and exercises import
(``admin``, ``records``, ``producing``, ``partitioning``, ``predict``, ``viz`` ...). The
machinery sits in packages, one layer each (``.importlinter``, docs/architecture.md):
``app`` (the ``labkit`` command), ``grading``, ``backends``, ``services``, ``view``,
``apps`` (programs run as child processes) and ``runtime`` (jars, Java, processes).
"""

from __future__ import annotations

import logging

from . import predict
from .admin import PartitionState, TopicState
from .app.doctor import setup_check
from .backends import BACKENDS as BACKENDS
from .backends import ClusterSet, ExternalCluster, connect, start_cluster, start_clusters
from .cluster import Broker, Cluster
from .errors import (BackendError, BrokerStartError, ClusterStateError, DistributionError, JavaError, LabkitError,
                     OfflineError, PortInUseError, ProcessStartError, ProfileError, SecurityError, SettingError,
                     ToolError, UnsupportedOperation, WaitTimeout)
from .runtime.distribution import Distribution as Distribution
from .runtime.distribution import ensure_distribution
from .runtime.jvm import find_java as find_java
from .runtime.profiles import list_profiles
from .runtime.profiles import load_profile as load_profile
from .runtime.tools import run_tool
from .waiting import Wait

__version__ = "0.1.0"

logging.getLogger("labkit").addHandler(logging.NullHandler())


def broker_settings() -> list[str]:
    """Every broker setting name the lab's Kafka version accepts."""
    return sorted(ensure_distribution().broker_config_names())


#: What lessons and exercises use. The machinery imported above (``BACKENDS``, ``Distribution``,
#: ``ensure_distribution``, ``find_java``, ``load_profile``) stays reachable for tests and benchmarks.
__all__ = [
    "BackendError", "Broker", "BrokerStartError", "Cluster", "ClusterSet", "ClusterStateError", "DistributionError",
    "ExternalCluster", "JavaError", "LabkitError", "OfflineError", "PartitionState", "PortInUseError",
    "ProcessStartError", "ProfileError", "SecurityError", "SettingError", "ToolError", "TopicState",
    "UnsupportedOperation", "Wait", "WaitTimeout", "__version__", "broker_settings", "connect", "list_profiles",
    "predict", "run_tool", "setup_check", "start_cluster", "start_clusters",
]
