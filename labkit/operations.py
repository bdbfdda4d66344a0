"""Running a cluster over time: the operator's jobs on a live cluster (lesson 13, exercise drain_broker).

Each helper does the job the way operators do it, with Kafka's own tools and admin API, and returns
only when every live broker agrees (each broker is asked through its own address):

* where replicas are: :func:`partitions`, :func:`placement` (per broker and rack), :func:`replicas_on`;
* moving them: a :class:`Plan` (Kafka's JSON; :func:`generate_plan` asks ``kafka-reassign-partitions
  --generate``), :func:`reassign` with a replication throttle, a :class:`Reassignment` to watch
  (:meth:`~Reassignment.progress`, :meth:`~Reassignment.wait`) and finish (throttles removed),
  :func:`throttles` as each broker reports them;
* leadership: :func:`elect_preferred` (the admin API's preferred election);
* one broker at a time: :func:`rolling_restart` (on another Kafka release: a rolling upgrade), then
  :func:`features` and :func:`finalize` (``kafka-features``);
* the controller quorum: :func:`quorum` (``kafka-metadata-quorum describe``).

Adding, removing and upgrading brokers and controllers are the cluster's own calls
(``cluster.add_broker()``, ``remove_broker``, ``restart_broker``, ``add_controller``: native backend,
:mod:`labkit.backends.topology`). Records written meanwhile are counted by :class:`labkit.traffic.Traffic`.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Sequence

from .errors import ClusterStateError
from .runtime import agreement
from .runtime.processes import scratch_dir
from .waiting import Wait

if TYPE_CHECKING:
    import pandas as pd

    from .runtime.protocols import BrokerLike, ClusterLike

#: The dynamic configs ``kafka-reassign-partitions --throttle`` sets: a rate per broker, replicas per topic.
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def releases() -> dict[str, str]:
    """The Kafka releases in the lab's cache (``environments/kafka.toml``): ``lab`` (what clusters start on),
    ``previous`` (the one before: a cluster can start on it and be upgraded) and ``tiered storage`` (the release
    whose LocalTieredStorage plugin is published)."""
    from .runtime.environment import kafka_spec

    spec = kafka_spec()
    return {"lab": spec.version, "previous": spec.previous, "tiered storage": spec.tiered_version}


# ---------------------------------------------------------------- where replicas are
@dataclass(frozen=True)
class Placement:
    """One partition as the metadata shows it: leader, replicas (the first is the preferred leader), ISR."""

    topic: str
    partition: int
    leader: Optional[int]
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partitions(cluster: "ClusterLike", topics: Optional[Iterable[str]] = None, internal: bool = False,
               via: Optional["BrokerLike"] = None) -> list[Placement]:
    """Every partition of ``topics`` (default: all, internal ones too with ``internal``), from the metadata of
    broker ``via`` itself (default: any broker)."""
    md = agreement.broker_metadata(cluster, via) if via is not None else cluster.admin().list_topics(timeout=10)
    if md is None:
        raise ClusterStateError(f"Broker {via.id} did not answer a metadata request.", "Is it running?")  # type: ignore[union-attr]
    wanted = set(topics) if topics is not None else None
    out = []
    for name, t in sorted(md.topics.items()):
        if (wanted is not None and name not in wanted) or (wanted is None and name.startswith("__") and not internal):
            continue
        for pid, p in sorted(t.partitions.items()):
            leader = p.leader if p.leader is not None and p.leader >= 0 else None
            out.append(Placement(name, pid, leader, tuple(p.replicas), tuple(p.isrs)))
    return out


def replicas_on(cluster: "ClusterLike", broker_id: int, internal: bool = True) -> list[tuple[str, int]]:
    """(topic, partition) of every replica broker ``broker_id`` holds, internal topics included by default."""
    return [(p.topic, p.partition) for p in partitions(cluster, internal=internal) if broker_id in p.replicas]


def racks(cluster: "ClusterLike") -> dict[int, Optional[str]]:
    """Broker id -> its ``broker.rack`` (None: no rack), as each broker's configs say."""
    from .admin import describe_configs

    return {b.id: describe_configs(cluster.admin(), "broker", str(b.id)).get("broker.rack") or None
            for b in cluster.brokers if b.state in ("running", "external")}


def placement(cluster: "ClusterLike", topics: Optional[Iterable[str]] = None, internal: bool = False) -> "pd.DataFrame":
    """Per broker (and its rack): replicas held, partitions led, partitions it is the preferred leader of."""
    import pandas as pd

    parts = partitions(cluster, topics, internal)
    rack_of = racks(cluster)
    rows = [{"broker": b, "rack": rack_of.get(b), "replicas": sum(b in p.replicas for p in parts),
             "leaders": sum(p.leader == b for p in parts), "preferred leader of": sum(p.replicas[:1] == (b,) for p in parts)}
            for b in sorted(set(rack_of) | {r for p in parts for r in p.replicas})]
    return pd.DataFrame(rows).set_index("broker")


# ---------------------------------------------------------------- plans and reassignments
@dataclass
class Plan:
    """A reassignment plan: for each partition the replica list it should have (first = preferred leader)."""

    targets: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """A plan in Kafka's JSON (``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``)."""
        data = json.loads(text)
        return cls({(p["topic"], int(p["partition"])): tuple(int(r) for r in p["replicas"]) for p in data["partitions"]})

    def to_json(self) -> str:
        return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                        for (t, p), r in sorted(self.targets.items())]})

    def changes(self, cluster: "ClusterLike") -> "pd.DataFrame":
        """Per partition the plan changes: replicas now and after, which brokers gain and lose a replica."""
        import pandas as pd

        now = {(p.topic, p.partition): p.replicas for p in partitions(cluster, {t for t, _ in self.targets}, True)}
        rows = [{"topic": t, "partition": p, "replicas now": list(now.get((t, p), ())), "replicas after": list(r),
                 "gains": sorted(set(r) - set(now.get((t, p), ()))), "loses": sorted(set(now.get((t, p), ())) - set(r))}
                for (t, p), r in sorted(self.targets.items()) if tuple(now.get((t, p), ())) != r]
        return pd.DataFrame(rows)

    def __len__(self) -> int:
        return len(self.targets)


def generate_plan(cluster: "ClusterLike", topics: Sequence[str], brokers: Sequence[int]) -> Plan:
    """Kafka's own proposal (``kafka-reassign-partitions --generate``) spreading ``topics`` over ``brokers``
    (rack-aware when brokers have racks). It spreads from scratch: it may move far more than needed."""
    with tempfile.TemporaryDirectory(prefix="labkit-plan-") as work:
        (Path(work) / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
        out = cluster.tool("kafka-reassign-partitions", "--topics-to-move-json-file", str(Path(work) / "topics.json"),
                           "--broker-list", ",".join(map(str, brokers)), "--generate").stdout
    proposed = out.split("Proposed partition reassignment configuration", 1)[-1].strip().splitlines()
    return Plan.from_json(proposed[0])


@dataclass
class Reassignment:
    """A reassignment started by :func:`reassign`: watch it, wait for it, finish it."""

    cluster: Any
    plan: Plan
    throttle: Optional[int]
    file: Path
    started: float = field(default_factory=time.monotonic)
    #: Seconds from the start until every broker saw the target replicas in sync (set by :meth:`wait`).
    seconds: Optional[float] = None

    def progress(self) -> "pd.DataFrame":
        """Per partition: target replicas, the ISR now, the replicas still joining and the bytes they hold."""
        import pandas as pd

        now = {(p.topic, p.partition): p for p in partitions(self.cluster, {t for t, _ in self.plan.targets}, True)}
        sizes = replica_bytes(self.cluster)
        rows = []
        for (t, p), target in sorted(self.plan.targets.items()):
            state = now.get((t, p))
            joining = [r for r in target if state is None or r not in state.isr]
            rows.append({"topic": t, "partition": p, "target": list(target), "isr": list(state.isr) if state else [],
                         "joining": joining, "bytes on joining replicas": sum(sizes.get((r, t, p), 0) for r in joining),
                         "done": state is not None and state.replicas == target and set(state.isr) == set(target)})
        return pd.DataFrame(rows)

    def done(self) -> bool:
        """Every live broker's metadata shows each partition on exactly its target replicas, all in sync."""
        return all(_settled(self.cluster, b, self.plan.targets) for b in agreement.live_brokers(self.cluster))

    def wait(self, timeout: float = 300.0, on_progress: Optional[Callable[["pd.DataFrame"], None]] = None,
             interval: float = 0.5) -> float:
        """Wait until :meth:`done`; ``on_progress(frame)`` gets :meth:`progress` at every look. Returns seconds."""
        def finished() -> bool:
            if on_progress is not None:
                on_progress(self.progress())
            return self.done()

        Wait(f"the reassignment of {len(self.plan)} partitions", timeout=timeout, interval=interval, stretch=True,
             hint="A low throttle makes it slow; progress() shows the bytes each joining replica has.").until(finished)
        self.seconds = time.monotonic() - self.started
        return self.seconds

    def finish(self, timeout: float = 60.0) -> None:
        """``kafka-reassign-partitions --verify`` (which removes the throttles once it is complete); returns
        when no live broker reports a replication throttle any more."""
        self.cluster.tool("kafka-reassign-partitions", "--reassignment-json-file", str(self.file), "--verify")
        Wait("every broker to drop its replication throttle", timeout=timeout, interval=0.3, stretch=True).until(
            lambda: not any(throttles(self.cluster).values()))


def reassign(cluster: "ClusterLike", plan: Plan, throttle: Optional[int] = None) -> Reassignment:
    """Start ``plan`` with ``kafka-reassign-partitions --execute`` (``--throttle`` bytes/s: replication of the
    moving replicas is capped at that rate on every broker involved). Returns at once: wait on the result."""
    if not plan.targets:
        raise ClusterStateError("The plan moves nothing.", "Give it at least one partition with its new replicas.")
    work = scratch_dir(cluster, "reassign-")  # finish() reads the plan again
    (work / "plan.json").write_text(plan.to_json())
    args = ["--reassignment-json-file", str(work / "plan.json"), "--execute"]
    if throttle is not None:
        args += ["--throttle", str(int(throttle))]
    started = time.monotonic()
    cluster.tool("kafka-reassign-partitions", *args)
    return Reassignment(cluster, plan, throttle, work / "plan.json", started)


def throttles(cluster: "ClusterLike") -> dict[str, dict[str, str]]:
    """The replication throttles in force: ``"broker N"`` -> its throttled rates (each broker asked itself),
    ``"topic T"`` -> its throttled replicas. Empty dicts where none is set."""
    from .admin import describe_configs

    out: dict[str, dict[str, str]] = {}
    for b in cluster.brokers:
        if b.state not in ("running", "external"):
            continue
        found = describe_configs(cluster.admin_for(b.address), "broker", str(b.id))
        out[f"broker {b.id}"] = {k: found[k] for k in BROKER_THROTTLES if found.get(k) not in (None, "", "9223372036854775807")}
    for name in cluster.admin().list_topics(timeout=10).topics:
        found = describe_configs(cluster.admin(), "topic", name)
        out[f"topic {name}"] = {k: found[k] for k in TOPIC_THROTTLES if found.get(k)}
    return out


def replica_bytes(cluster: "ClusterLike") -> dict[tuple[int, str, int], int]:
    """(broker, topic, partition) -> bytes of its segment files: from the brokers' directories when labkit
    owns them, else from ``kafka-log-dirs --describe``."""
    sizes: dict[tuple[int, str, int], int] = {}
    if hasattr(cluster, "log_dir"):
        for b in cluster.brokers:
            try:
                root = cluster.log_dir(b.id)
            except ClusterStateError:
                continue
            for d in root.iterdir() if root.exists() else ():
                topic, _, pid = d.name.rpartition("-")
                if d.is_dir() and pid.isdigit() and not topic.startswith("__cluster_metadata"):
                    sizes[(b.id, topic, int(pid))] = sum(f.stat().st_size for f in d.glob("*.log") if f.exists())
        return sizes
    out = cluster.tool("kafka-log-dirs", "--describe").stdout
    report = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    for broker in report["brokers"]:
        for log_dir in broker["logDirs"]:
            for p in log_dir["partitions"]:
                topic, _, pid = p["partition"].rpartition("-")
                sizes[(broker["broker"], topic, int(pid))] = p["size"]
    return sizes


def _settled(cluster: "ClusterLike", broker: "BrokerLike", targets: dict[tuple[str, int], tuple[int, ...]]) -> bool:
    """Broker ``broker`` itself shows every partition of ``targets`` on exactly those replicas, all in sync."""
    try:
        seen = {(p.topic, p.partition): p for p in partitions(cluster, {t for t, _ in targets}, True, via=broker)}
    except ClusterStateError:
        return False
    return all(seen.get(k) is not None and seen[k].replicas == r and set(seen[k].isr) == set(r)
               for k, r in targets.items())


# ---------------------------------------------------------------- leadership
def elect_preferred(cluster: "ClusterLike", topics: Optional[Iterable[str]] = None, timeout: float = 60.0) -> int:
    """A preferred leader election (the admin API's ElectLeaders) for every partition of ``topics`` (default:
    all) not led by its first replica; returns how many moved, once every live broker's metadata shows them."""
    from confluent_kafka import ElectionType, TopicPartition

    todo = [p for p in partitions(cluster, topics, internal=topics is None)
            if p.replicas and p.leader != p.replicas[0] and p.replicas[0] in p.isr]
    if todo:
        future = cluster.admin().elect_leaders(ElectionType.PREFERRED, [TopicPartition(p.topic, p.partition) for p in todo])
        for tp, error in future.result(timeout=timeout).items():
            if error is not None and "ELECTION_NOT_NEEDED" not in str(error):
                raise ClusterStateError(f"The preferred election of {tp.topic}-{tp.partition} failed: {error}.",
                                        "Its preferred replica must be alive and in the ISR.")
    keys = {(p.topic, p.partition) for p in todo}

    def led_by_preferred(broker: "BrokerLike") -> tuple[bool, str]:
        seen = {(p.topic, p.partition): p for p in partitions(cluster, {t for t, _ in keys}, True, via=broker)}
        other = [f"{t}-{n}" for (t, n) in keys if (t, n) in seen and seen[(t, n)].leader != seen[(t, n)].replicas[0]]
        return not other, f"not yet: {other[:4]}" if other else "every preferred leader"

    agreement.agree(cluster, f"{len(todo)} partitions led by their preferred replica", led_by_preferred, timeout=timeout)
    return len(todo)


def wait_for_placement(cluster: "ClusterLike", topic: str, partition: int, replicas: Optional[Sequence[int]] = None,
                       leader: Optional[int] = None, timeout: float = 60.0) -> Placement:
    """Return ``partition`` of ``topic`` once every live broker's own metadata shows it on ``replicas`` (in that
    order) and led by ``leader`` (each only when given).

    For a change made with Kafka's tools (``kafka-reassign-partitions``, ``kafka-leader-election``): a tool
    returns when the controller has committed the change, and a broker applies it when it has fetched that far
    in the metadata log, later on a busy machine; asking "any broker" right after can meet one that has not.
    """
    name = cluster.topic_name(topic) if hasattr(cluster, "topic_name") else topic
    want = f"{name}-{partition}" + (f" on replicas {list(replicas)}" if replicas is not None else "") + \
        (f" led by broker {leader}" if leader is not None else "")
    last: dict[str, Placement] = {}

    def shows(broker: "BrokerLike") -> tuple[bool, str]:
        seen = next((p for p in partitions(cluster, [name], via=broker) if p.partition == partition), None)
        if seen is None:
            return False, "does not know the partition"
        last["seen"] = seen
        ok = (replicas is None or list(seen.replicas) == list(replicas)) and (leader is None or seen.leader == leader)
        return ok, f"replicas {list(seen.replicas)}, leader {seen.leader}"

    agreement.agree(cluster, want, shows, timeout=timeout)
    return last["seen"]


# ---------------------------------------------------------------- one broker at a time
def rolling_restart(cluster: Any, version: Optional[str] = None, brokers: Optional[Sequence[int]] = None,
                    timeout: float = 120.0) -> "pd.DataFrame":
    """Restart ``brokers`` (default: all, the active controller last) one at a time, each gracefully stopped,
    started (on Kafka ``version`` when given: a rolling upgrade) and waited for until every partition of every
    topic has its whole ISR again, before the next one goes. One row per broker with the seconds each step took."""
    import pandas as pd

    order = list(brokers) if brokers is not None else _controller_last(cluster)
    rows = []
    for broker_id in order:
        t0 = time.monotonic()
        cluster.restart_broker(broker_id, version=version, timeout=timeout)
        t1 = time.monotonic()
        agreement.agree(cluster, f"every ISR whole again after broker {broker_id} restarted", isr_whole(cluster),
                        timeout=timeout)
        rows.append({"broker": broker_id, "version": cluster.versions.get(broker_id) if hasattr(cluster, "versions") else None,
                     "restart s": round(t1 - t0, 2), "ISR whole after s": round(time.monotonic() - t1, 2)})
    return pd.DataFrame(rows).set_index("broker")


def isr_whole(cluster: "ClusterLike") -> Callable[["BrokerLike"], tuple[bool, str]]:
    """``holds`` for :func:`~labkit.runtime.agreement.agree`: every partition the broker knows has its whole ISR."""
    def holds(broker: "BrokerLike") -> tuple[bool, str]:
        short = [f"{p.topic}-{p.partition}" for p in partitions(cluster, internal=True, via=broker)
                 if set(p.isr) != set(p.replicas)]
        return not short, f"short ISR: {short[:4]}" if short else "every ISR whole"
    return holds


def _controller_last(cluster: Any) -> list[int]:
    ids = [b.id for b in cluster.brokers if b.state == "running"]
    try:
        leader = quorum(cluster, replication=False).leader
    except Exception:  # noqa: BLE001 - no quorum to ask: any order will do
        return ids
    return sorted(ids, key=lambda i: i == leader)


# ---------------------------------------------------------------- features and the quorum
def features(cluster: "ClusterLike", version: Optional[str] = None, via: Optional[str] = None) -> "pd.DataFrame":
    """``kafka-features describe`` as a frame (feature, supported min/max, finalized level), with the tool of
    Kafka ``version`` (an older tool shows a newer broker's levels as ``UNKNOWN``)."""
    args = ["--bootstrap-server", via] if via else []
    return parse_features(cluster.tool("kafka-features", *args, "describe", version=version).stdout)


def parse_features(text: str) -> "pd.DataFrame":
    """``kafka-features describe``'s lines as a frame indexed by feature."""
    import pandas as pd

    rows = [dict(re.findall(r"(\w+):\s+(\S+(?: \d+)?)", line)) for line in text.splitlines() if line.startswith("Feature:")]
    frame = pd.DataFrame(rows).rename(columns={"Feature": "feature", "SupportedMinVersion": "supported min",
                                               "SupportedMaxVersion": "supported max",
                                               "FinalizedVersionLevel": "finalized", "Epoch": "epoch"})
    return frame.set_index("feature") if len(frame) else frame


def finalize(cluster: "ClusterLike", release: str, version: Optional[str] = None, timeout: float = 60.0) -> "pd.DataFrame":
    """``kafka-features upgrade --release-version RELEASE`` (every feature to that release's level); returns
    :func:`features` once every live broker reports the same finalized levels. There is no way back: a
    metadata.version downgrade is refused."""
    cluster.tool("kafka-features", "upgrade", "--release-version", release, version=version)
    addresses = [b.address for b in agreement.live_brokers(cluster)]

    def agreed() -> Optional[list["pd.DataFrame"]]:
        with ThreadPoolExecutor(len(addresses)) as pool:
            views = list(pool.map(lambda a: features(cluster, version, via=a), addresses))
        levels = {tuple(v["finalized"]) for v in views}
        done = len(levels) == 1 and views[0].loc["metadata.version", "finalized"].startswith(release)
        return views[:1] if done else None

    return Wait(f"every broker to report the features of {release}", timeout=timeout, interval=0.5,
                stretch=True).until(agreed)[0]


@dataclass(frozen=True)
class Quorum:
    """The KRaft controller quorum as ``kafka-metadata-quorum describe`` reports it."""

    leader: int
    epoch: int
    high_watermark: int
    #: voter id -> metadata directory id ("" on a static quorum that has none)
    voters: dict[int, str]
    observers: tuple[int, ...]
    replication: Any  # pandas.DataFrame: NodeId, LogEndOffset, Lag, ..., Status

    @property
    def dynamic(self) -> bool:
        return any(self.voters.values())


def quorum(cluster: "ClusterLike", replication: bool = True) -> Quorum:
    """The controller quorum now: leader, epoch, voters (with directory ids), observers, and (``replication``: one
    more tool run) each replica's lag."""
    status = cluster.tool("kafka-metadata-quorum", "describe", "--status").stdout
    table = cluster.tool("kafka-metadata-quorum", "describe", "--replication").stdout if replication else ""
    return parse_quorum(status, table)


def parse_quorum(status: str, replication: str) -> Quorum:
    """``kafka-metadata-quorum describe --status`` and ``--replication`` output as a :class:`Quorum`."""
    import pandas as pd

    table = replication.strip().splitlines()
    rows = [dict(zip(table[0].split(), line.split())) for line in table[1:] if line.strip()] if table else []

    def field_of(name: str) -> str:
        found = re.search(rf"^{name}:\s+(.*)$", status, re.M)
        return found.group(1).strip() if found else ""

    voters_json = json.loads(field_of("CurrentVoters") or "[]")
    observers_json = json.loads(field_of("CurrentObservers") or "[]")
    return Quorum(int(field_of("LeaderId")), int(field_of("LeaderEpoch")), int(field_of("HighWatermark")),
                  {int(v["id"]): v.get("directoryId", "") for v in voters_json},
                  tuple(int(o["id"]) for o in observers_json), pd.DataFrame(rows))


__all__ = ["BROKER_THROTTLES", "Placement", "Plan", "Quorum", "Reassignment", "TOPIC_THROTTLES", "elect_preferred",
           "features", "finalize", "generate_plan", "isr_whole", "parse_features", "parse_quorum", "releases", "partitions", "placement", "quorum", "racks", "reassign",
           "replica_bytes", "replicas_on", "rolling_restart", "throttles", "wait_for_placement"]
