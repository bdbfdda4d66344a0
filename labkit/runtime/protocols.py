"""What labkit's parts need from a cluster, as protocols.

Parts (records, tools, the live view, the teaching helpers, services ...) take "a
cluster" but only use a few of its members. They name those here instead of importing
:class:`labkit.cluster.Cluster`, so imports flow one way (the layers of
``.importlinter``): the cluster and the backends import the parts, never the other way
round. ``Cluster`` satisfies :class:`ClusterLike`; clusters labkit started themselves
(``OwnedCluster``) satisfy :class:`OwnedClusterLike` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from pathlib import Path

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient


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

    def admin_for(self, addresses: Optional[str] = None, warm: bool = True, **config: Any) -> "AdminClient": ...

    def topic_name(self, name: str) -> str: ...

    def describe_topic(self, name: str, timeout: float = 10.0) -> Any: ...  # labkit.admin.TopicState

    def on_stop(self, hook: Callable[[], None], first: bool = False) -> None: ...

    def tool_config(self) -> Optional["Path"]: ...

    def producer(self, user: Optional[str] = None, mtls: bool = False, **config: Any) -> "Producer": ...

    def read_all(self, topic: str, timeout: float = 30.0, isolation_level: str = "read_uncommitted") -> list[Any]: ...

    def wait_for_isr(self, topic: str, timeout: float = 60.0) -> Any: ...

    def tool(self, tool: str, *args: str, check: bool = True, timeout: float = 120.0,
             input: Optional[str] = None) -> Any: ...

    def stop(self) -> None: ...


class OwnedClusterLike(ClusterLike, Protocol):
    """A cluster whose brokers labkit started on this machine: their files, and breaking them on purpose."""

    @property
    def data_dir(self) -> "Path": ...

    def log_dir(self, broker_id: int) -> "Path": ...

    def kill_broker(self, broker_id: int) -> None: ...

    def stop_broker(self, broker_id: int) -> None: ...

    def start_broker(self, broker_id: int) -> None: ...

    def pause_broker(self, broker_id: int) -> None: ...

    def resume_broker(self, broker_id: int) -> None: ...
