"""Cluster profiles: one TOML file each under ``environments/profiles/``.

A profile names how many nodes a cluster has and the broker settings that make
it what it is (replication factor, min ISR, ...). Lab-wide defaults from
``environments/lab-defaults.toml`` come first, the profile's settings next, the
caller's overrides last.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .environment import environments_dir, kafka_spec, load_toml
from ..errors import ProfileError, SettingError

DEFAULT_PROFILE = "three-brokers"
SECURITY_MODES = ("plaintext", "secured", "plaintext+tls")

#: Settings labkit writes itself for every node; overriding them would break the cluster.
MANAGED_SETTINGS = frozenset({
    "process.roles", "node.id", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "listeners", "advertised.listeners", "listener.security.protocol.map", "controller.listener.names",
    "inter.broker.listener.name", "log.dirs", "log.dir", "metadata.log.dir",
    # a secured cluster's TLS and authorization (labkit.security)
    "ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.principal.mapping.rules", "authorizer.class.name", "super.users",
})


@dataclass(frozen=True)
class Profile:
    """A named cluster shape."""

    name: str
    description: str
    brokers: int
    #: How many of the nodes (ids 1..controllers) are also KRaft controllers.
    controllers: int
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: "plaintext" (one PLAINTEXT listener), "secured" (TLS, SCRAM, mutual TLS, ACLs: labkit.security), or
    #: "plaintext+tls" (PLAINTEXT, and a second client listener, TLS, with the cluster's own CA; no authentication).
    security: str = "plaintext"


def list_profiles() -> list[str]:
    """Names of the profiles in ``environments/profiles/``."""
    return sorted(p.stem for p in (environments_dir() / "profiles").glob("*.toml"))


def load_profile(name: str) -> Profile:
    """The profile called ``name``; an unknown name raises :class:`ProfileError` listing the valid ones."""
    valid = list_profiles()
    if name not in valid:
        close = difflib.get_close_matches(name, valid, n=1)
        maybe = f" Did you mean {close[0]!r}?" if close else ""
        raise ProfileError(f"Unknown cluster profile {name!r}.{maybe}",
                           f"Valid profiles: {', '.join(valid)}.", valid=valid)
    data = load_toml(environments_dir() / "profiles" / f"{name}.toml")
    brokers = int(data.get("brokers", 1))
    controllers = int(data.get("controllers", brokers))
    if not 1 <= controllers <= brokers:
        raise ProfileError(f"Profile {name!r} asks for {controllers} controllers among {brokers} brokers.",
                           "Use 1 <= controllers <= brokers in its TOML file.", valid=valid)
    security = str(data.get("security", "plaintext"))
    if security not in SECURITY_MODES:
        raise ProfileError(f"Profile {name!r} asks for security {security!r}.",
                           f"Use one of: {', '.join(SECURITY_MODES)}.", valid=valid)
    settings = dict(kafka_spec().lab_defaults)
    settings.update(data.get("settings", {}))
    return Profile(name, data.get("description", ""), brokers, controllers, settings, security)


def setting_name(key: str) -> str:
    """``log_retention_ms`` -> ``log.retention.ms`` (keyword arguments cannot contain dots)."""
    return key.replace("_", ".")


def normalize_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    return {setting_name(k) if "." not in k else k: v for k, v in overrides.items()}


def validate_settings(settings: Iterable[str], valid_names: Iterable[str]) -> None:
    """Raise :class:`SettingError` for a name Kafka does not know or labkit manages itself."""
    valid = set(valid_names)
    for name in settings:
        if name in MANAGED_SETTINGS:
            raise SettingError(f"The broker setting {name!r} is managed by labkit and cannot be overridden.",
                               "Leave it out; labkit sets listeners, ids and directories for every node.")
        if name not in valid:
            close = difflib.get_close_matches(name, sorted(valid), n=3, cutoff=0.6)
            maybe = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise SettingError(
                f"Unknown broker setting {name!r}.{maybe}",
                "Valid names are Kafka's broker configs (labkit.broker_settings() lists all "
                f"{len(valid)}); in keyword arguments write dots as underscores.",
                suggestions=close)


def render_value(value: Any) -> str:
    """A Python value as it goes into ``server.properties``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(render_value(v) for v in value)
    return str(value)
