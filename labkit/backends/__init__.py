"""How a cluster comes to exist: the backend registry and ``start_cluster()``.

    native    Kafka JVMs on this machine, from the cached jars (the default)
    docker    the same cluster from the apache/kafka image (testcontainers)
    external  an existing cluster labkit only talks to

Every backend's factory has one signature,
``start(profile, *, overrides, progress, start_timeout, **options) -> Cluster``
(a started cluster); ``options`` are the backend's own (``image=`` for docker,
``bootstrap_servers=`` for external).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional

from ..cluster import Cluster
from ..errors import BackendError
from ..profiles import DEFAULT_PROFILE
from . import docker, external, native
from .external import ExternalCluster, connect

#: Backend name -> factory(profile, *, overrides, progress, start_timeout, **options) -> started Cluster.
BACKENDS: dict[str, Callable[..., Cluster]] = {"native": native.start, "docker": docker.start,
                                               "external": external.start}


def start_cluster(profile: str = DEFAULT_PROFILE, backend: Optional[str] = None,
                  overrides: Optional[Mapping[str, Any]] = None, *, progress: bool = True,
                  start_timeout: Optional[float] = None, bootstrap_servers: Optional[str] = None,
                  schema_registry: bool = False, **broker_settings: Any) -> Cluster:
    """Start a private Kafka cluster for this notebook and wait until it is ready.

    ``profile`` names a file in ``environments/profiles/`` (``single-broker``,
    ``three-brokers``, ``five-brokers``); broker settings go in as keyword
    arguments with underscores for dots (``log_retention_ms=60000``) or as an
    ``overrides`` dict. With ``bootstrap_servers`` (or ``LABKIT_BOOTSTRAP`` set: a
    shared classroom or ``labkit cluster up`` cluster) the notebook attaches to that
    cluster instead. ``progress`` shows a progress bar while starting;
    ``start_timeout`` bounds the wait (default: the backend's own). ``schema_registry=True``
    starts a schema registry beside the brokers (``cluster.schema_registry_url``).
    """
    if backend is None:
        attach = bootstrap_servers or os.environ.get("LABKIT_BOOTSTRAP")
        backend = "external" if attach else os.environ.get("LABKIT_BACKEND", "native")
    if backend not in BACKENDS:
        raise BackendError(f"Unknown backend {backend!r}.", f"Valid backends: {', '.join(BACKENDS)}.")
    settings = dict(overrides or {})
    settings.update(broker_settings)
    options: dict[str, Any] = {}
    if bootstrap_servers is not None:
        if backend != "external":
            raise BackendError(f"bootstrap_servers= attaches to an existing cluster; backend={backend!r} starts "
                               "its own.", "Use backend='external' (or leave backend out) to attach.")
        options["bootstrap_servers"] = bootstrap_servers
    if backend == "external" and not bootstrap_servers and os.environ.get("LABKIT_BOOTSTRAP"):
        settings = {}  # a notebook written for its own cluster, attached to a shared one: its settings cannot apply
    cluster = BACKENDS[backend](profile, overrides=settings, progress=progress, start_timeout=start_timeout,
                                **options)
    if schema_registry:
        try:
            cluster.start_schema_registry()
        except BaseException:
            cluster.stop()
            raise
    return cluster


__all__ = ["BACKENDS", "ExternalCluster", "connect", "start_cluster"]
