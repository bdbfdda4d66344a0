"""The ``external`` backend: a cluster that already exists, which labkit only talks to.

A classroom cluster, ``labkit cluster up``, or any Kafka reachable from here.
Reading works as on a lab cluster; breaking brokers on purpose raises
:class:`~labkit.errors.UnsupportedOperation` (labkit does not own them).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional

from ..cluster import Broker, Cluster
from ..errors import BackendError
from ..waiting import Wait


class ExternalCluster(Cluster):
    """An existing cluster labkit only talks to (a classroom cluster, ``labkit cluster up``)."""

    backend = "external"

    def __init__(self, bootstrap_servers: str, **client_config: Any) -> None:
        super().__init__()
        self._bootstrap = bootstrap_servers
        self._extra = client_config

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def client_config(self, user: Optional[str] = None, mtls: bool = False, **config: Any) -> dict[str, Any]:
        return super().client_config(user, mtls, **{**self._extra, **config})

    @property
    def brokers(self) -> list[Broker]:
        md = self.admin().list_topics(timeout=10)
        return [Broker(b.id, b.host, b.port, state="external") for b in sorted(md.brokers.values(), key=lambda b: b.id)]

    def stop(self) -> None:
        """Forget the connection; the cluster itself keeps running (labkit does not own it)."""
        self._run_stop_hooks()
        self._close_admin()

    def _summary(self) -> str:
        return "external (not owned by this notebook)"


def connect(bootstrap_servers: str, **client_config: Any) -> ExternalCluster:
    """Wrap an existing cluster with labkit's read API (fault injection raises)."""
    cluster = ExternalCluster(bootstrap_servers, **client_config)
    Wait(f"a metadata round-trip with {bootstrap_servers}", timeout=15,
         hint="Check the address and that the cluster is running.").until(cluster.live_broker_ids)
    return cluster


def start(profile: str, overrides: Mapping[str, Any], progress: bool, start_timeout: Optional[float],
          bootstrap_servers: Optional[str] = None, **client_config: Any) -> ExternalCluster:
    """The ``external`` backend's factory: attach to ``bootstrap_servers`` (or ``$LABKIT_BOOTSTRAP``).

    The cluster exists already, so ``profile`` and ``overrides`` cannot change it: broker settings are refused.
    Attached through ``$LABKIT_BOOTSTRAP``, the client settings in ``$LABKIT_CLIENT_CONFIG`` (JSON, e.g. a
    secured cluster's login and CA: what the grader hands a notebook that shares its secured cluster) apply.
    """
    bootstrap = bootstrap_servers or os.environ.get("LABKIT_BOOTSTRAP")
    if not bootstrap_servers and os.environ.get("LABKIT_CLIENT_CONFIG"):
        client_config = {**json.loads(os.environ["LABKIT_CLIENT_CONFIG"]), **client_config}
    if not bootstrap:
        raise BackendError("backend='external' needs bootstrap_servers=... (or LABKIT_BOOTSTRAP).",
                           "Pass the address of the cluster to attach to.")
    if overrides:
        raise BackendError(f"An external cluster's broker settings cannot be changed from here "
                           f"({', '.join(sorted(overrides))}).",
                           "Leave them out, or start a lab cluster of your own with backend='native'.")
    return connect(bootstrap, **client_config)
