"""Share groups (KIP-932, Kafka 4.2+): queues on Kafka, made visible.

    queue = ShareGroup(cluster, topic, "workers", record_lock_duration_ms=2000)  # the group's own settings
    queue.start_member("ada", ack="release"); queue.wait_joined(1)   # a child process: poll, work, acknowledge
    queue.wait_done(produce_jobs(cluster, topic, [{"id": "job-1", "ms": 50, "fails": 0}, ...]))
    queue.per_member(); queue.deliveries(); queue.held()             # from the members' own logs
    queue.describe(); queue.fates()       # kafka-share-groups (members, lag); __share_group_state decoded
    records_timeline(queue.deliveries())  # which member held which record, when

Members run ``python -m labkit.apps.sharemember`` (what a job is, the acknowledgement policies), each a
``ManagedProcess`` that dies with the kernel. The group is read with Kafka's own ``kafka-share-groups``:
librdkafka 2.16 has no share-group admin API ("Current limitations" in its INTRODUCTION.md).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from .apps.sharemember import ACK_POLICIES
from .errors import ClusterStateError, LabkitError
from .runtime.processes import ManagedProcess, scratch_dir
from .waiting import Wait
from .workloads import Outcome

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

    from .runtime.protocols import ClusterLike, OwnedClusterLike

#: A share group's own settings (``kafka-configs --entity-type groups``), each within the broker's
#: ``group.share.min.*`` / ``max.*`` bounds (the lab's lower ones: ``environments/lab-defaults.toml``).
GROUP_SETTINGS = tuple(f"share.{name}" for name in "auto.offset.reset record.lock.duration.ms delivery.count.limit "
                       "session.timeout.ms heartbeat.interval.ms partition.max.record.locks isolation.level".split())
#: ``deliveryState`` in ``__share_group_state`` (Kafka's SharePartition.RecordState; ACQUIRED is never written).
STATES = {0: "available", 1: "acquired", 2: "accepted", 4: "archived"}
#: Member colours, in the order members first appear (groupviz's).
PALETTE = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#d35400", "#7f8c8d", "#f1c40f",
           "#34495e")


def configure_group(cluster: "ClusterLike", group_id: str, timeout: float = 60.0, **settings: Any) -> dict[str, str]:
    """Set a share group's own settings (``record_lock_duration_ms=2000`` is ``share.record.lock.duration.ms``)
    through the admin API; returns them once every live broker reports them (:mod:`labkit.runtime.agreement`)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from .runtime import agreement

    wanted = {_setting(k): str(v) for k, v in settings.items()}
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in wanted.items()])
    try:
        cluster.admin().incremental_alter_configs([resource], request_timeout=15)[resource].result(timeout)
    except KafkaException as exc:
        raise LabkitError(f"The broker refused the settings of share group {group_id!r}: {exc.args[0].str()}",
                          "Each must lie within the broker's group.share.min.* and max.* bounds.") from None

    def holds(broker: Any) -> tuple[bool, str]:
        answer = agreement.routed_configs(cluster, broker, [ConfigResource(ResourceType.GROUP, group_id)])[group_id]
        if isinstance(answer, KafkaError):
            return False, answer.name()
        differ = {k: answer.get(k) for k, v in wanted.items() if answer.get(k) != v}
        return not differ, f"has {differ}" if differ else "has them"

    agreement.agree(cluster, f"share group {group_id!r} configured", holds, timeout=timeout)
    return wanted


def _setting(key: str) -> str:
    name = key if "." in key else key.replace("_", ".")
    name = name if name.startswith("share.") else f"share.{name}"
    if name not in GROUP_SETTINGS:
        raise LabkitError(f"Unknown share group setting {key!r}.", f"Use one of: {', '.join(GROUP_SETTINGS)}.")
    return name


def share_consumer(cluster: "ClusterLike", group_id: str, **config: Any) -> Any:
    """A confluent-kafka ``ShareConsumer`` in ``group_id`` (settings as keyword arguments, dots may be underscores);
    librdkafka's own lines (its "Preview" warning on every share consumer) go to Python logging, not under a cell."""
    from confluent_kafka import ShareConsumer
    from .runtime.librdkafka import quiet
    return ShareConsumer({**quiet(), **cluster.client_config(**config), "group.id": group_id})


def produce_jobs(cluster: "ClusterLike", topic: str, jobs: Iterable[Mapping[str, Any]],
                 keys: Optional[Sequence[Optional[str]]] = None) -> list[str]:
    """Produce each job (a dict, as JSON) in a record batch of its own; returns their ids.

    The broker hands a share member whole record batches: jobs the producer batched together go to one
    member however small its ``max.poll.records`` (a soft bound in librdkafka), so a queue's producer
    sends them one per batch (``batch.num.messages=1``)."""
    producer = cluster.producer(linger_ms=0, batch_num_messages=1, enable_idempotence=True)
    ids = []
    for i, job in enumerate(jobs):
        producer.produce(cluster.topic_name(topic), key=keys[i] if keys else None, value=json.dumps(job))
        producer.poll(0)
        ids.append(str(job["id"]))
    if producer.flush(30):
        raise LabkitError(f"Not every job reached {topic!r} within 30 s.", "Is the cluster running?")
    return ids


@dataclass(frozen=True)
class Delivery:
    """A record delivered to a member at ``got``, worked on until ``done`` (None: it died first), acknowledged ``ack``."""

    member: str
    topic: str
    partition: int
    offset: int
    count: int
    id: Optional[str]
    key: Optional[str]
    got: float
    done: Optional[float] = None
    ok: Optional[bool] = None
    ack: Optional[str] = None


class ShareMember:
    """One member process of a :class:`ShareGroup`: its log (JSON lines) and status file."""

    def __init__(self, name: str, process: ManagedProcess, log: Path, status: Path) -> None:
        self.name, self.process, self.log, self.status_file = name, process, log, status

    @property
    def alive(self) -> bool:
        return self.process.running

    def events(self) -> list[dict[str, Any]]:
        """Its log, oldest first (a half-written last line, after a SIGKILL, is skipped)."""
        return [e for e in map(_json, self.log.read_text().splitlines() if self.log.exists() else []) if e]

    def status(self) -> dict[str, Any]:
        """``join_state``, ``assignment`` (from librdkafka's statistics) and ``held`` records, as last written."""
        return _json(self.status_file.read_text() if self.status_file.exists() else None)

    def deliveries(self) -> list[Delivery]:
        open_: dict[tuple, int] = {}
        out: list[Delivery] = []
        for e in self.events():
            where = (e.get("topic"), e.get("p"), e.get("o"), e.get("n"))
            if e["e"] == "got":
                open_[where] = len(out)
                out.append(Delivery(self.name, e["topic"], e["p"], e["o"], e["n"], e.get("id"), e.get("k"), e["t"]))
            elif e["e"] == "acked" and where in open_:  # accepted on receipt (the "early" policy)
                out[open_[where]] = replace(out[open_[where]], ack=e["ack"])
            elif e["e"] == "done" and where in open_:
                i = open_.pop(where)
                out[i] = replace(out[i], done=e["t"], ok=e["ok"], ack=e["ack"])
        return out


class ShareGroup:
    """A share group whose members are child processes working through ``topic``'s jobs."""

    def __init__(self, cluster: "ClusterLike", topic: str, group_id: str, workdir: Optional[Path] = None,
                 **settings: Any) -> None:
        """``settings``: the group's own (:data:`GROUP_SETTINGS`). It reads from the earliest offset: the default,
        ``share.auto.offset.reset=latest``, skips the jobs sent before its first member joined."""
        self.cluster, self.topic, self.group_id = cluster, cluster.topic_name(topic), group_id
        self.workdir = Path(workdir) if workdir else scratch_dir(cluster, f"share-group-{group_id}-")
        self.members: dict[str, ShareMember] = {}
        self.settings = configure_group(cluster, group_id, auto_offset_reset="earliest", **settings)

    def start_member(self, name: str, ack: str = "release", max_attempts: int = 3, max_records: int = 1,
                     process_ms: float = 1.0, **config: Any) -> ShareMember:
        """Start a member that acknowledges by the policy ``ack`` (:data:`ACK_POLICIES`) and takes at most
        ``max_records`` records per poll; a job without ``"ms"`` takes ``process_ms``; ``config``: client settings."""
        if ack not in ACK_POLICIES:
            raise LabkitError(f"Unknown acknowledgement policy {ack!r}.", f"Choose one of: {', '.join(ACK_POLICIES)}.")
        if name in self.members and self.members[name].alive:
            raise LabkitError(f"Member {name!r} is already running.", "Stop it first, or use another name.")
        log, status = self.workdir / f"{name}.jsonl", self.workdir / f"{name}.status.json"
        conf = {k: v for k, v in self.cluster.client_config().items()
                if k != "bootstrap.servers" and isinstance(v, (str, int, float, bool))}
        conf.update({k.replace("_", ".") if "." not in k else k: v for k, v in config.items()})
        status.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "labkit.apps.sharemember", "--bootstrap", self.cluster.bootstrap_servers,
               "--topic", self.topic, "--group", self.group_id, "--name", name, "--log", str(log), "--status",
               str(status), "--ack", ack, "--max-attempts", str(max_attempts), "--max-records", str(max_records),
               "--process-ms", str(process_ms), "--config", json.dumps(conf)]
        process = ManagedProcess(f"share member {name}", cmd, self.workdir / f"{name}.err").start()
        self.members[name] = ShareMember(name, process, log, status)
        return self.members[name]

    def freeze_member(self, name: str) -> None:
        """SIGSTOP: it keeps its records and its connection but does nothing (a long GC pause, a stalled VM)."""
        self.members[name].process.pause()

    def resume_member(self, name: str) -> None:
        self.members[name].process.resume()

    def crash_member(self, name: str) -> None:
        """SIGKILL: no acknowledgement, no goodbye; the broker sees its connection close."""
        if self.members[name].alive:
            self.members[name].process.kill()
            with self.members[name].log.open("a") as fh:  # the member cannot say so itself
                fh.write(json.dumps({"t": time.time(), "e": "killed"}) + "\n")

    def stop_member(self, name: str, timeout: float = 30.0) -> None:
        """SIGTERM: it finishes its batch, commits its acknowledgements and leaves the group."""
        self.members[name].process.stop(timeout)

    def stop(self) -> None:
        for name in list(self.members):
            self.crash_member(name)

    # ---------------------------------------------------------------- what the members did
    def deliveries(self) -> list[Delivery]:
        """Every delivery to every member (dead ones included), in the order they were got."""
        return sorted((d for m in self.members.values() for d in m.deliveries()), key=lambda d: (d.got, d.member))

    def processed(self) -> Counter:
        """How many times each job's work succeeded, over all members."""
        return Counter(d.id for d in self.deliveries() if d.ok)

    def per_member(self) -> dict[str, int]:
        """Jobs each member did successfully (members that did none included)."""
        done = Counter(d.member for d in self.deliveries() if d.ok)
        return {name: done.get(name, 0) for name in self.members}

    def held(self) -> dict[str, list[tuple[str, int, int]]]:
        """The records each running member holds right now (got, not yet acknowledged)."""
        return {n: [(t, p, o) for t, p, o in m.status().get("held", [])] for n, m in self.members.items() if m.alive}

    def outcome(self, expected: Iterable[str]) -> Outcome:
        """Lost (never done) and duplicated (done again) jobs among ``expected``."""
        expected, seen = set(expected), self.processed()
        return Outcome(expected=len(expected), processed=sum(seen[i] for i in expected), lost=len(expected - set(seen)),
                       duplicated=sum(seen[i] - 1 for i in expected if seen[i] > 1))

    def wait_joined(self, members: int, quiet: float = 1.5, timeout: float = 60.0) -> dict[str, list]:
        """Wait until ``members`` members run, each steady in the group with partitions, the assignment unchanged
        for ``quiet`` seconds; returns it (``{member: [[topic, partition], ...]}``)."""
        seen: dict[str, Any] = {"last": None, "since": 0.0}

        def steady() -> Optional[dict[str, list]]:
            alive = {n: m.status() for n, m in self.members.items() if m.alive}
            now = {n: s.get("assignment", []) for n, s in alive.items()}
            if len(alive) == members and now == seen["last"] and all(
                    s.get("join_state") == "steady" and s.get("assignment") for s in alive.values()):
                return now if time.monotonic() - seen["since"] >= quiet else None
            seen["last"], seen["since"] = now, time.monotonic()
            return None

        return Wait(f"{members} members of share group {self.group_id!r} to join", timeout=timeout, interval=0.2,
                    stretch=True, evidence=self._evidence, hint=f"The members' errors are in {self.workdir}/<name>.err.").until(steady)

    def wait_done(self, ids: Iterable[str], timeout: float = 60.0) -> int:
        """Wait until every job of ``ids`` was done successfully by some member; returns how many they are."""
        wanted = set(ids)
        return Wait(f"{len(wanted)} jobs done by share group {self.group_id!r}", timeout=timeout, interval=0.2,
                    stretch=True, evidence=lambda: f"{len(wanted & set(self.processed()))} done\n{self._evidence()}").until(
            lambda: len(wanted) if wanted <= set(self.processed()) else None)

    def wait_idle(self, quiet: float = 2.0, timeout: float = 60.0) -> int:
        """Wait until no member got or finished anything for ``quiet`` seconds; returns how many deliveries there were."""
        seen = {"n": -1, "since": 0.0}

        def idle() -> Optional[int]:
            ds = self.deliveries()
            n = len(ds) + sum(d.done is not None for d in ds)
            if n != seen["n"]:
                seen["n"], seen["since"] = n, time.monotonic()
            return len(ds) if time.monotonic() - seen["since"] >= quiet else None

        return Wait(f"share group {self.group_id!r} to go quiet", timeout=timeout, interval=0.2, stretch=True,
                    evidence=self._evidence).until(idle)

    def _evidence(self) -> str:
        return "\n".join(f"{m.name} ({'running' if m.alive else 'exited'}): {m.status().get('join_state', 'no status')}, "
                         f"assigned {m.status().get('assignment', [])}; last error line: {m.process.tail(1) or '-'}"
                         for m in self.members.values())

    def describe(self) -> "ShareGroupView":  # the group as the broker reports it
        return read_share_group(self.cluster, self.group_id)

    def fates(self, history: bool = False) -> "pd.DataFrame":  # what became of each record, as the broker wrote it
        return record_fates(self.cluster, self.group_id, history=history)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------- the broker's view
@dataclass(frozen=True)
class ShareMemberView:
    member_id: str
    client_id: str
    epoch: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ShareGroupView:
    """A share group as ``kafka-share-groups --describe`` reports it. ``offsets``: (topic, partition) ->
    (start offset, lag). The start offset is the one the broker last persisted (it trails by a round of
    acknowledgements); the lag counts records not yet accepted, rejected or archived."""

    id: str
    state: str
    coordinator: Optional[int]
    group_epoch: Optional[int]
    members: tuple[ShareMemberView, ...] = ()
    offsets: Mapping[tuple[str, int], tuple[Optional[int], Optional[int]]] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(lag or 0 for _, lag in self.offsets.values())

    def to_frame(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame([{"topic": t, "partition": p, "start offset": s, "lag": lag,
                              "members": ", ".join(m.client_id for m in self.members if (t, p) in m.partitions)}
                             for (t, p), (s, lag) in sorted(self.offsets.items())])


def _table(text: str) -> list[dict[str, str]]:
    """The rows of one of the tool's tables by header (``COORDINATOR (ID)``, ``host:port  (id)``: one cell each)."""
    lines = [re.sub(r"\s+\((\d+|ID)\)", r"(\1)", line) for line in text.splitlines() if line.strip()]
    heads = lines[0].split() if lines and lines[0].startswith("GROUP") else []  # else: "... has no active members"
    return [dict(zip(heads, line.split())) for line in lines[1:]] if heads else []


def _int(text: Optional[str]) -> Optional[int]:
    return int(text) if text and text.lstrip("-").isdigit() else None


def read_share_group(cluster: "ClusterLike", group_id: str) -> ShareGroupView:
    """Members, coordinator, and the start offset and lag per partition, from Kafka's ``kafka-share-groups``."""
    def tool(what: str) -> list[dict[str, str]]:
        result = cluster.tool("kafka-share-groups", "--describe", "--group", group_id, what, "--verbose", check=False)
        if "GroupIdNotFoundException" in result.stdout + result.stderr:
            raise LabkitError(f"Share group {group_id!r} does not exist (yet).",
                              "A share group exists once a member joined; check the group id.")
        return _table(result.stdout)

    with ThreadPoolExecutor(3) as pool:  # three JVMs at once: the tool describes one aspect per run
        states, described, listed = pool.map(tool, ("--state", "--members", "--offsets"))
    state = (states or [{}])[0]
    coordinator = re.search(r"\((\d+)\)", state.get("COORDINATOR(ID)", ""))
    members = [ShareMemberView(r["CONSUMER-ID"], r["CLIENT-ID"], _int(r.get("MEMBER-EPOCH")) or 0,
                               tuple(sorted((t, int(p)) for part in r.get("ASSIGNMENT", "").split(";") if ":" in part
                                            for t, ps in [part.rsplit(":", 1)] for p in ps.split(",") if p.isdigit())))
               for r in described]
    offsets = {(r["TOPIC"], int(r["PARTITION"])): (_int(r.get("START-OFFSET")), _int(r.get("LAG")))
               for r in listed if r.get("PARTITION", "").isdigit()}
    return ShareGroupView(group_id, state.get("STATE", "unknown").lower(),
                          int(coordinator.group(1)) if coordinator else None, _int(state.get("GROUP-EPOCH")),
                          tuple(sorted(members, key=lambda m: m.client_id)), offsets)


def record_fates(cluster: "OwnedClusterLike", group_id: str, history: bool = False) -> "pd.DataFrame":
    """What became of the share group's records, from the broker's own records: the share coordinator's
    ``__share_group_state`` topic, decoded by ``kafka-dump-log --share-group-state-decoder``.

    One row per record offset with its latest state -- ``accepted``; ``archived`` (rejected, or delivered
    ``share.delivery.count.limit`` times); ``available`` (released, by the member or by its lock running out)
    -- and its delivery count. ``history``: every state written, with the time the coordinator wrote it.
    Records a member holds right now are not in it: the broker never writes that state."""
    import pandas as pd
    from confluent_kafka import TopicCollection

    from .segments import parse_dump

    topics = list(cluster.admin().list_topics(timeout=10).topics)
    described = cluster.admin().describe_topics(TopicCollection(topics))
    # librdkafka prints a topic id in standard base64, Kafka in the URL-safe alphabet
    names = {str(d.topic_id).replace("+", "-").replace("/", "_"): d.name
             for d in (f.result(timeout=10) for f in described.values())}
    try:
        state = cluster.describe_topic("__share_group_state").partitions
    except ClusterStateError:  # made when a share group first keeps state: none has on this cluster yet
        state = []
    files = [str(f) for p in state if p.leader is not None
             for f in sorted((cluster.log_dir(p.leader) / f"__share_group_state-{p.partition}").glob("*.log"))]
    dump = cluster.tool("kafka-dump-log", "--share-group-state-decoder", "--files", ",".join(files)) if files else None
    rows = []
    for batch in parse_dump(dump.stdout if dump else ""):
        for record in batch.records:
            key, value = _json(record.key).get("data", {}), _json(record.payload).get("data", {})
            if key.get("groupId") != group_id:
                continue
            for b in value.get("stateBatches", []):
                rows += [{"topic": names.get(key["topicId"], key["topicId"]), "partition": key["partition"],
                          "offset": offset, "state": STATES.get(b["deliveryState"], str(b["deliveryState"])),
                          "deliveries": b["deliveryCount"], "written": record.create_time / 1000}
                         for offset in range(b["firstOffset"], b["lastOffset"] + 1)]
    frame = pd.DataFrame(rows, columns=["topic", "partition", "offset", "state", "deliveries", "written"])
    if not history:
        frame = frame.drop_duplicates(["topic", "partition", "offset"], keep="last").drop(columns="written")
    return frame.sort_values(["topic", "partition", "offset"], kind="stable").reset_index(drop=True)


def _json(text: Optional[str]) -> dict[str, Any]:
    """A JSON object, or {} (not one, or cut short: a member killed mid-line, a status file half written)."""
    try:
        found = json.loads(text) if text and text.startswith("{") else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def records_timeline(deliveries: Sequence[Delivery], t0: Optional[float] = None, until: Optional[float] = None,
                     title: Optional[str] = None) -> "go.Figure":
    """Records (rows: partition and offset) over time: a bar for each delivery, from the moment a member got the
    record to the end of its work, coloured by member; a mark at the end for what the member did (accept,
    release, reject), none where it never acknowledged (frozen past its lock, killed: the bar runs on)."""
    import plotly.graph_objects as go

    if not deliveries:
        raise LabkitError("No deliveries to draw.", "Start members and send them jobs first (ShareGroup).")
    start = t0 if t0 is not None else min(d.got for d in deliveries)
    end = until if until is not None else max(d.done or d.got for d in deliveries)
    colours = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(dict.fromkeys(d.member for d in deliveries))}
    label = {(d.topic, d.partition, d.offset): f"p{d.partition}:{d.offset}" for d in deliveries}
    fig = go.Figure()
    for member, colour in colours.items():
        mine = [d for d in deliveries if d.member == member]
        fig.add_trace(go.Bar(
            orientation="h", base=[d.got - start for d in mine], x=[max((d.done or end) - d.got, 0.01) for d in mine],
            y=[label[(d.topic, d.partition, d.offset)] for d in mine], name=member, marker_color=colour,
            customdata=[[d.id, d.count, d.ack or "not acknowledged"] for d in mine],
            hovertemplate="%{y} (%{customdata[0]}): delivery %{customdata[1]}, %{customdata[2]}<extra>"
                          + member + "</extra>"))
    for ack, (symbol, colour) in {"accept": ("circle", "#27ae60"), "release": ("triangle-left", "#f39c12"),
                                  "reject": ("x", "#c0392b")}.items():
        ended = [d for d in deliveries if d.ack == ack and d.done is not None]
        if ended:
            fig.add_trace(go.Scatter(
                x=[d.done - start for d in ended], y=[label[(d.topic, d.partition, d.offset)] for d in ended],
                mode="markers", name=ack, marker_symbol=symbol, marker_color=colour, marker_size=7, hoverinfo="skip"))
    rows = [label[k] for k in sorted(label)]
    fig.update_yaxes(categoryorder="array", categoryarray=rows, autorange="reversed", title_text="record")
    fig.update_layout(barmode="overlay", bargap=0.3, height=140 + 14 * len(rows), plot_bgcolor="white",
                      xaxis_title="seconds", title=title or "Which member held which record, when",
                      margin=dict(l=60, r=20, t=50, b=40))
    return fig
