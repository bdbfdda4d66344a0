"""How a cluster comes to exist: the backend registry and ``start_cluster()``.

    native    Kafka JVMs on this machine, from the cached jars (the default)
    docker    the same cluster from the apache/kafka image (testcontainers)
    external  an existing cluster labkit only talks to

Every backend's factory has one signature,
``start(profile, *, overrides, progress, start_timeout, **options) -> Cluster``
(a started cluster); ``options`` are the backend's own (``image=`` for docker,
``bootstrap_servers=`` for external).

Layer: backends, below the app and grading, above the cluster they subclass.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union, cast

from ..cluster import Cluster
from .clusterset import COLOURS, ClusterSet
from ..errors import BackendError
from ..runtime.profiles import DEFAULT_PROFILE
from . import deferred, docker, external, native
from .external import ExternalCluster, connect

#: Backend name -> factory(profile, *, overrides, progress, start_timeout, **options) -> started Cluster.
BACKENDS: dict[str, Callable[..., Cluster]] = {"native": native.start, "docker": docker.start,
                                               "external": external.start}


def start_cluster(profile: str = DEFAULT_PROFILE, backend: Optional[str] = None,
                  overrides: Optional[Mapping[str, Any]] = None, *, progress: bool = True,
                  start_timeout: Optional[float] = None, bootstrap_servers: Optional[str] = None,
                  schema_registry: bool = False, kafka_version: Optional[str] = None,
                  **broker_settings: Any) -> Cluster:
    """Start a private Kafka cluster for this notebook and wait until it is ready.

    ``profile`` names a file in ``environments/profiles/`` (``single-broker``,
    ``three-brokers``, ``five-brokers``); broker settings go in as keyword
    arguments with underscores for dots (``log_retention_ms=60000``) or as an
    ``overrides`` dict. With ``bootstrap_servers`` (or ``LABKIT_BOOTSTRAP`` set: a
    shared classroom or ``labkit cluster up`` cluster) the notebook attaches to that
    cluster instead. ``progress`` shows a progress bar while starting;
    ``start_timeout`` bounds the wait (default: the backend's own). ``schema_registry=True``
    starts a schema registry beside the brokers (``cluster.schema_registry_url``). ``kafka_version``
    starts the native backend's brokers on another cached Kafka release (the previous one: lesson 13).
    With ``LABKIT_CLUSTER_ON_USE`` set (the grader's kernel) a cluster of the notebook's own starts when
    a cell first uses it (:mod:`labkit.backends.deferred`).
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
    if kafka_version is not None:
        if backend != "native":
            raise BackendError(f"kafka_version= picks the jars of the native backend's brokers, not {backend!r}'s.",
                               "Leave it out, or use backend='native'.")
        options["kafka_version"] = kafka_version
    if backend == "external" and not bootstrap_servers and os.environ.get("LABKIT_BOOTSTRAP"):
        settings = {}  # a notebook written for its own cluster, attached to a shared one: its settings cannot apply

    def start() -> Cluster:
        cluster = BACKENDS[backend](profile, overrides=settings, progress=progress, start_timeout=start_timeout,
                                    **options)
        if schema_registry:
            try:
                cluster.start_schema_registry()
            except BaseException:
                cluster.stop()
                raise
        return cluster

    if backend != "external" and os.environ.get(deferred.ENV, "0") not in ("", "0"):
        return cast(Cluster, deferred.DeferredCluster(start, f"{profile} cluster ({backend})"))
    return start()


def start_clusters(names: Sequence[str], profile: Union[str, Mapping[str, str]] = DEFAULT_PROFILE,
                   backend: Optional[str] = None, **options: Any) -> ClusterSet:
    """Start one cluster per name (a primary and its disaster-recovery copy: ``["primary", "dr"]``).

    Each is what :func:`start_cluster` starts (``profile`` for all, or a name -> profile mapping;
    ``options`` as there), labelled with its name and given its own colour in the live view. They
    start one after the other, each JVM launched from this thread (so it dies with the notebook);
    if one fails, those already started are stopped. Returns a :class:`~labkit.backends.clusterset.ClusterSet`
    (unpack it, or index it by name); ``stop()`` stops them all. These clusters are always the
    notebook's own: ``LABKIT_BOOTSTRAP`` (one shared cluster) cannot stand for several.
    """
    names = list(names)
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise BackendError(f"Cluster names must be distinct, non-empty strings (got {names}).",
                           'Name each cluster once, e.g. ["primary", "dr"].')
    if backend is None:
        backend = os.environ.get("LABKIT_BACKEND", "native")
    if backend == "external":
        raise BackendError("Several clusters cannot attach to one external cluster.",
                           "Use backend='native' (the default) to start clusters of your own.")
    started: list[Cluster] = []
    try:
        for i, name in enumerate(names):
            chosen = profile if isinstance(profile, str) else profile.get(name, DEFAULT_PROFILE)
            cluster = start_cluster(chosen, backend=backend, **options)
            cluster.label, cluster.colour = name, COLOURS[i % len(COLOURS)]
            started.append(cluster)
    except BaseException:
        ClusterSet(started).stop()
        raise
    return ClusterSet(started)


__all__ = ["BACKENDS", "ClusterSet", "ExternalCluster", "connect", "start_cluster", "start_clusters"]
