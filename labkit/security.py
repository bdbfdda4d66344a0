"""Security made visible for lessons: why a client was refused, ACLs as tables, SCRAM records, Java client names.

* :func:`try_connect` connects with a client's settings and explains a refusal in one
  line (wrong CA, wrong password, plaintext on a TLS port);
* :func:`acl_table`, :func:`describe_acls` and :func:`wait_for_acls`: ACL bindings as a
  table, and waiting until every broker's authorizer has them;
* :func:`scram_credentials`: the SCRAM records the controllers keep in the metadata log;
* :func:`java_client_settings`: librdkafka's security settings under the Java client's
  names (Kafka's tools, Spark's Kafka source, Connect).

How a secured cluster is built (its CA, listeners, JAAS) is :mod:`labkit.backends.secured`.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Protocol

from .errors import SecurityError
from .runtime.librdkafka import HANDSHAKE_MS

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import ClusterLike

def java_properties(conf: Mapping[str, Any]) -> str:
    """librdkafka security settings as a Java client's properties (Kafka's tools, Spark's Kafka source)."""
    return "".join(f"{k}={v}\n" for k, v in java_client_settings(conf).items())


def java_client_settings(conf: Mapping[str, Any]) -> dict[str, str]:
    """The Java client's names for librdkafka's security settings (passwords become a JAAS line)."""
    out: dict[str, str] = {}
    if "security.protocol" in conf:
        out["security.protocol"] = str(conf["security.protocol"])
    if "sasl.mechanism" in conf:
        out["sasl.mechanism"] = str(conf["sasl.mechanism"])
        out["sasl.jaas.config"] = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                   f'username="{conf["sasl.username"]}" password="{conf["sasl.password"]}";')
    if "ssl.ca.location" in conf:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(conf["ssl.ca.location"])
    if "ssl.key.location" in conf:
        keystore = Path(str(conf["ssl.key.location"]).replace("-key.pem", "-keystore.pem"))
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.location"] = str(keystore)
    return out


# ---------------------------------------------------------------------------------------------- trying a connection
#: Client settings that make a failing connection say so within seconds instead of retrying for minutes.
FAST_FAILURE = {"socket.connection.setup.timeout.ms": HANDSHAKE_MS, "reconnect.backoff.max.ms": 1000,
                "message.timeout.ms": 10000}


@dataclass
class Attempt:
    """What a client with some settings got when it tried to talk to a cluster."""

    ok: bool
    #: librdkafka's error name (``_AUTHENTICATION``, ``_SSL``, ...) or "" when it worked.
    error: str = ""
    message: str = ""
    #: One line saying what it means.
    explanation: str = ""
    seconds: float = 0.0

    def __repr__(self) -> str:
        if self.ok:
            return f"connected ({self.seconds:.1f} s)"
        return f"refused: {self.error} — {self.explanation}"

    def _repr_html_(self) -> str:
        colour = "#27ae60" if self.ok else "#c0392b"
        import html

        text = html.escape(repr(self))
        detail = f"<br><small><code>{html.escape(self.message[:240])}</code></small>" if self.message else ""
        return f"<div style='color:{colour}'><b>{text}</b>{detail}</div>"


def explain(error: str, message: str, logs: list[str]) -> str:
    """What a failed connection means, from librdkafka's error (and its log when the error says nothing)."""
    text = message.lower()
    if error == "_AUTHENTICATION":
        if "unsupported sasl mechanism" in text:
            return "the broker does not offer this SASL mechanism on that listener"
        return "wrong user name or password (the broker says the same for both, so names cannot be guessed)"
    if "certificate verify failed" in text:
        return ("the client does not trust the broker's certificate: give ssl.ca.location the cluster's CA "
                "(or the address is not in the certificate)")
    if "alert bad certificate" in text or "alert number 42" in text:
        return "this listener wants a client certificate (mutual TLS) and got none"
    if "certificate unknown" in text or "alert number 46" in text:
        return "the client's certificate is not signed by a CA the broker trusts"
    if "/bootstrap" not in message and ("refused" in text or error == "_RESOLVE"):
        return ("bootstrap worked, then the address the broker advertises could not be reached: check "
                "advertised.listeners")
    if error == "_ALL_BROKERS_DOWN" and any("APIVERSION_QUERY" in line for line in logs):
        return "the broker hung up at once: a plaintext client on a TLS listener (check security.protocol)"
    return "the client could not talk to the cluster"


def try_connect(settings: Mapping[str, Any], timeout: float = 6.0) -> Attempt:
    """Connect with ``settings`` and list topics; the first error librdkafka reports, explained, when it fails.

    librdkafka never gives up by itself on these errors (it reconnects forever); its error
    callback is the quick signal, so that is what this waits for.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    logs: list[str] = []
    logger = logging.getLogger(f"labkit.security.try.{secrets.token_hex(4)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logs.append(record.getMessage())

    logger.addHandler(_Keep())
    client = AdminClient({**settings, **FAST_FAILURE, "error_cb": errors.append, "logger": logger})
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            client.list_topics(timeout=0.5)
            if not errors:
                return Attempt(True, seconds=time.monotonic() - t0)
        except KafkaException:
            pass
        client.poll(0.05)
        if errors:
            break
    seconds = time.monotonic() - t0
    if not errors:
        return Attempt(False, "_TIMED_OUT", "no answer", "nothing answered within the time limit", seconds)
    err = errors[0]
    name, message = err.name(), err.str()
    return Attempt(False, name, message, explain(name, message, logs), seconds)


def with_credentials(settings: Mapping[str, Any], username: str, password: str) -> dict[str, Any]:
    """``settings`` (a SCRAM client's, e.g. ``cluster.client_config()``) with another user's name and password."""
    if settings.get("security.protocol") != "SASL_SSL":
        raise SecurityError("These settings do not log in with a password (security.protocol is not SASL_SSL).",
                            "Start from cluster.client_config() on a secured cluster.")
    return {**settings, "sasl.username": username, "sasl.password": password}


# ---------------------------------------------------------------------------------------------- ACLs
#: confluent-kafka calls the cluster resource BROKER (librdkafka's name); Kafka's tools say CLUSTER.
_RESOURCE_NAMES = {"BROKER": "CLUSTER"}
ACL_COLUMNS = ["principal", "permission", "operation", "resource", "pattern", "name", "host"]


def acl_table(bindings: Iterable[Any]) -> "pd.DataFrame":
    """ACL bindings (what ``AdminClient.describe_acls`` returns) as a table, one row each, sorted."""
    import pandas as pd

    rows = [{"principal": b.principal, "permission": b.permission_type.name, "operation": b.operation.name,
             "resource": _RESOURCE_NAMES.get(b.restype.name, b.restype.name),
             "pattern": b.resource_pattern_type.name, "name": b.name, "host": b.host} for b in bindings]
    frame = pd.DataFrame(rows, columns=ACL_COLUMNS)
    return frame.sort_values(ACL_COLUMNS, ignore_index=True)


def describe_acls(cluster: "ClusterLike", principal: Optional[str] = None, timeout: float = 15.0) -> "pd.DataFrame":
    """Every ACL of the cluster (or only ``principal``'s, e.g. ``"User:alice"``), read as the admin, as a table."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    return acl_table(cluster.admin().describe_acls(every, request_timeout=timeout).result())


def wait_for_acls(cluster: "ClusterLike", bindings: Iterable[Any], timeout: float = 60.0) -> None:
    """Wait until every live broker's authorizer has every one of ``bindings`` (``AclBinding``s just created).

    ``create_acls`` returns once the controller committed the ACLs to the metadata log; each broker's
    authorizer applies them when it has read that far -- within milliseconds usually, seconds on a loaded
    machine, and until then that broker still refuses. Each broker is asked itself
    (:func:`labkit.runtime.agreement.acls_present`). ``cluster.create_acls`` grants and waits in one call.
    """
    from .admin import exact_filter
    from .runtime import agreement

    wanted = [exact_filter(b) for b in bindings]
    agreement.agree(cluster, f"{len(wanted)} ACL(s) granted", agreement.acls_present(cluster, wanted), timeout=timeout)


# ---------------------------------------------------------------------------------------------- stored credentials
#: The mechanism numbers of the metadata records.
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
SCRAM_RECORDS = {"USER_SCRAM_CREDENTIAL_RECORD": "set", "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": "removed"}


class _NativeLike(Protocol):
    def log_dir(self, broker_id: int) -> Path: ...

    def tool(self, tool: str, *args: str, check: bool = True, timeout: float = 120.0) -> Any: ...


def scram_credentials(cluster: "_NativeLike", broker_id: int = 1) -> "pd.DataFrame":
    """What the cluster stores for its SCRAM users: the credential records of the metadata log.

    Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` reads ``__cluster_metadata`` on
    ``broker_id`` (a controller); one row per record, oldest first: the user, ``set`` or
    ``removed``, the mechanism, the iteration count, and the salt, ``storedKey`` and
    ``serverKey`` (base64). A password is not among them: the broker never has it.
    """
    import json

    import pandas as pd

    from .segments import parse_dump

    files = sorted((cluster.log_dir(broker_id) / "__cluster_metadata-0").glob("*.log"))
    if not files:
        raise SecurityError(f"Node {broker_id} has no metadata log.", "Ask a controller node (1 in every profile).")
    dump = cluster.tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", ",".join(map(str, files)))
    rows = []
    for batch in parse_dump(dump.stdout):
        for record in batch.records:
            payload = json.loads(record.payload) if record.payload and record.payload.startswith("{") else {}
            change = SCRAM_RECORDS.get(payload.get("type", ""))
            if change is None:
                continue
            data = payload["data"]
            rows.append({"offset": record.offset, "name": data["name"], "change": change,
                         "mechanism": MECHANISMS.get(data["mechanism"], str(data["mechanism"])),
                         "iterations": data.get("iterations"), "salt": data.get("salt"),
                         "stored_key": data.get("storedKey"), "server_key": data.get("serverKey")})
    return pd.DataFrame(rows, columns=["offset", "name", "change", "mechanism", "iterations", "salt", "stored_key",
                                       "server_key"])
