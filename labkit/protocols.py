"""What labkit's parts need from a cluster, as protocols.

Parts (records, tools, the live view, ...) take "a cluster" but only use a few of
its members. They name those here instead of importing :class:`labkit.cluster.Cluster`,
so imports flow one way: the notebook API (``cluster``, ``backends``) imports the
parts, never the other way round. ``Cluster`` satisfies every protocol here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from pathlib import Path

    from confluent_kafka.admin import AdminClient

    from .admin import TopicState


class BrokerLike(Protocol):
    id: int
    host: str
    port: int
    state: str

    @property
    def address(self) -> str: ...


class ClusterLike(Protocol):
    """A cluster a part can talk to: its address, client settings and shared admin client."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def brokers(self) -> Sequence[BrokerLike]: ...

    def client_config(self, **config: Any) -> dict[str, Any]: ...

    def admin(self) -> "AdminClient": ...

    def admin_for(self, addresses: Optional[str] = None, **config: Any) -> "AdminClient": ...

    def topic_name(self, name: str) -> str: ...

    def describe_topic(self, name: str, timeout: float = 10.0) -> "TopicState": ...

    def on_stop(self, hook: Callable[[], None]) -> None: ...

    def tool_config(self) -> Optional["Path"]: ...
