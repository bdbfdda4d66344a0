"""Kafka Lab's helper library: one import for a notebook.

    import labkit
    cluster = labkit.start_cluster()          # a private 3-broker Kafka cluster
    cluster.describe_topic("orders")
    cluster.kill_broker(2); cluster.start_broker(2)
    cluster.stop()
"""

from __future__ import annotations

import logging

from .admin import PartitionState, TopicState
from .backends import BACKENDS, ClusterSet, ExternalCluster, connect, start_cluster, start_clusters
from .cluster import Broker, Cluster
from .distribution import Distribution, ensure_distribution
from .jvm import find_java
from .errors import (
    BackendError,
    BrokerStartError,
    ProcessStartError,
    ClusterStateError,
    DistributionError,
    JavaError,
    LabkitError,
    OfflineError,
    PortInUseError,
    ProfileError,
    SettingError,
    ToolError,
    UnsupportedOperation,
    WaitTimeout,
)
from .doctor import setup_check
from .profiles import list_profiles, load_profile
from .tools import run_tool

__version__ = "0.1.0"

logging.getLogger("labkit").addHandler(logging.NullHandler())


def broker_settings() -> list[str]:
    """Every broker setting name the lab's Kafka version accepts."""
    return sorted(ensure_distribution().broker_config_names())


__all__ = [
    "BACKENDS", "BackendError", "Broker", "BrokerStartError", "Cluster", "ClusterSet", "ClusterStateError",
    "Distribution",
    "DistributionError", "ExternalCluster", "JavaError", "LabkitError", "OfflineError", "PartitionState",
    "PortInUseError", "ProcessStartError", "ProfileError", "SettingError", "ToolError", "TopicState", "UnsupportedOperation",
    "WaitTimeout", "__version__", "broker_settings", "connect", "ensure_distribution", "find_java",
    "list_profiles", "load_profile", "run_tool", "setup_check", "start_cluster", "start_clusters",
]
