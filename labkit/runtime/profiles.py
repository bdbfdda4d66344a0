"""Cluster profiles: one TOML file each under ``environments/profiles/``.

A profile names how many nodes a cluster has and the broker settings that make
it what it is (replication factor, min ISR, ...). Lab-wide defaults from
``environments/lab-defaults.toml`` come first, the profile's settings next, the
caller's overrides last.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

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
    # a profile's racks give each node its own (lesson 13)
    "broker.rack",
})
#: Setting prefixes Kafka hands to plugins rather than checking itself: the tiered-storage managers'
#: (``remote.log.storage.manager.impl.prefix`` / ``remote.log.metadata.manager.impl.prefix``, KIP-405).
PLUGIN_PREFIXES = ("rsm.config.", "rlmm.config.")
QUORUM_MODES = ("static", "dynamic")


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
    #: ``broker.rack`` per node: node n gets ``racks[(n - 1) % len(racks)]`` (none: no racks).
    racks: tuple[str, ...] = ()
    #: "static" (``controller.quorum.voters``, kraft.version 0) or "dynamic" (KIP-853: formatted with
    #: ``--initial-controllers``, ``controller.quorum.bootstrap.servers``; controllers can be added and removed).
    quorum: str = "static"
    #: Tiered storage on (KIP-405) with Kafka's own LocalTieredStorage (``[tiered_storage]`` in kafka.toml).
    tiered_storage: bool = False

    def rack(self, node_id: int) -> str | None:
        """The rack of node ``node_id`` (None without racks)."""
        return self.racks[(node_id - 1) % len(self.racks)] if self.racks else None


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
    quorum = str(data.get("quorum", "static"))
    if quorum not in QUORUM_MODES:
        raise ProfileError(f"Profile {name!r} asks for quorum {quorum!r}.", f"Use one of: {', '.join(QUORUM_MODES)}.",
                           valid=valid)
    racks = data.get("racks", [])
    if not isinstance(racks, list) or not all(isinstance(r, str) and r for r in racks):
        raise ProfileError(f"Profile {name!r} has racks = {racks!r}.", 'Give a list of rack names, e.g. ["a", "b"].',
                           valid=valid)
    settings = dict(kafka_spec().lab_defaults)
    settings.update(data.get("settings", {}))
    return Profile(name, data.get("description", ""), brokers, controllers, settings, security, tuple(racks), quorum,
                   bool(data.get("tiered_storage", False)))


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
        if name not in valid and not name.startswith(PLUGIN_PREFIXES):
            close = difflib.get_close_matches(name, sorted(valid), n=3, cutoff=0.6)
            maybe = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise SettingError(
                f"Unknown broker setting {name!r}.{maybe}",
                "Valid names are Kafka's broker configs (labkit.broker_settings() lists all "
                f"{len(valid)}); in keyword arguments write dots as underscores.",
                suggestions=close)


#: Kafka's integer types (ConfigDef.Type) and their bounds: Java's short, int and long.
_WHOLE = {"SHORT": 2**15, "INT": 2**31, "LONG": 2**63}
_NAMES = {"SHORT": "a whole number (a short)", "INT": "a whole number (an int)", "LONG": "a whole number (a long)",
          "DOUBLE": "a number", "BOOLEAN": "true or false"}


def validate_values(overrides: Mapping[str, Any], definitions: Mapping[str, Sequence[str]]) -> None:
    """Raise :class:`SettingError` for a value Kafka's own config definition refuses: its type, its range, its
    choices (``definitions``: :meth:`labkit.runtime.distribution.Distribution.broker_config_definitions`).

    What it checks is what the broker would check as it starts (ConfigDef.parseType, then the validator),
    but before any JVM does (issue 26: ``log_retention_ms="abc"`` failed seconds into a start). A value
    whose validator labkit cannot read is left to the broker.
    """
    for name, value in overrides.items():
        definition = definitions.get(name)
        if definition is None or len(definition) < 2:
            continue
        kind, check, *detail = definition
        if not _accepted(value, kind, check, detail):
            raise SettingError(f"Broker setting {name}={value!r} is not valid: Kafka takes "
                               f"{_accepts(kind, check, detail)}.", "Nothing was started: change the value and "
                               "run it again.")


def _accepted(value: Any, kind: str, check: str, detail: Sequence[str]) -> bool:
    try:
        parsed = _parse(kind, value)
    except ValueError:
        return False
    if check == "range":
        low, high = (_number(x) for x in (*detail, "", "")[:2])
        return (low is None or parsed >= low) and (high is None or parsed <= high)
    if check == "choice" and detail:
        allowed = detail[0].split(",")
        if len(detail) > 1 and detail[1] == "ignorecase":
            allowed, parsed = [a.lower() for a in allowed], (
                [x.lower() for x in parsed] if kind == "LIST" else str(parsed).lower())
        return all(item in allowed for item in (parsed if kind == "LIST" else [parsed]))
    return True


def _parse(kind: str, value: Any) -> Any:
    """``value`` as the broker reads it from ``server.properties`` (what :func:`render_value` writes)."""
    text = render_value(value).strip()
    if kind in _WHOLE:
        if isinstance(value, float) or not re.fullmatch(r"[+-]?\d+", text):
            raise ValueError(text)
        number = int(text)
        if not -_WHOLE[kind] <= number < _WHOLE[kind]:
            raise ValueError(text)
        return number
    if kind == "DOUBLE":
        if isinstance(value, bool):
            raise ValueError(text)
        return float(text)
    if kind == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    if kind == "LIST":
        return [item.strip() for item in text.split(",")] if text else []
    return text


def _number(text: str) -> Optional[float]:
    return None if text == "" else float(text)


def _accepts(kind: str, check: str, detail: Sequence[str]) -> str:
    """What Kafka takes, in words: "a whole number (an int) of at least 1", "one of: compact, delete"."""
    if check == "choice":
        return ("a list of: " if kind == "LIST" else "one of: ") + ", ".join(detail[0].split(","))
    words = _NAMES.get(kind, f"a {kind.lower()}")
    if check != "range":
        return words + (f" from {-_WHOLE[kind]} to {_WHOLE[kind] - 1}" if kind in _WHOLE else "")
    low, high = (*detail, "", "")[:2]
    if low and high:
        return f"{words} from {low} to {high}"
    return f"{words} of at least {low}" if low else f"{words} of at most {high}"


def render_value(value: Any) -> str:
    """A Python value as it goes into ``server.properties``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(render_value(v) for v in value)
    return str(value)
