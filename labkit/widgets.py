"""A live view of a running cluster for notebooks: brokers with fault buttons, partition maps, groups and lag.

    view = cluster.view(topics=[orders])          # or labkit.widgets.live_view(cluster, ...)
    view                                          # renders; refreshes in a background thread
    view.snapshot()                               # the data it shows, as plain objects
    view.close()                                  # or cluster.stop(): the view notices and stops

The refresh runs in one daemon thread, at most ``max_rate`` times a second, so
cells keep running while the view updates. The widgets are only touched when
what they show changed, and after a few unchanged refreshes the thread polls
less often (down to every ``idle_refresh`` seconds) until something moves again;
a button press or a broker that labkit sees change state wakes it at once.
Errors while brokers are down go to the status line; nothing is raised into
the notebook. Consumer groups are read by a small child process (see
``_GROUP_READER``): librdkafka's group admin requests can crash the process
that sends them while coordinators die, and that must not be the kernel.
Outside a live notebook the view renders as a static HTML (or text) snapshot.

Everything from the cluster to what is drawn goes through plain data
(:class:`Snapshot`) and pure functions (``broker_status``, ``button_states``,
``snapshot_html``, ...), which is what the unit tests check.
"""

from __future__ import annotations

import html
import json
import logging
import select
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from . import admin as _admin_module
from .admin import PartitionState, TopicState
from .errors import ClusterStateError, LabkitError, UnsupportedOperation
from .viz import ROLES, _heatmap, _legend, replica_roles

if TYPE_CHECKING:
    from .cluster import Cluster

log = logging.getLogger(__name__)

#: Broker status (what the view shows) -> colour.
STATUS_COLOURS = {"up": "#27ae60", "starting": "#2e86de", "paused": "#f39c12", "down": "#c0392b"}
#: Button label -> the Cluster method it calls.
ACTIONS = {"kill": "kill_broker", "pause": "pause_broker", "resume": "resume_broker", "restart": "start_broker"}
_BUTTON_STYLES = {"kill": "danger", "pause": "warning", "resume": "info", "restart": "success"}
#: Text marks per replica role in the static partition map (the figure uses the same ones).
_ROLE_MARKS = {"leader": "L", "follower (in sync)": "F", "follower (out of sync)": "lag",
               "replica on a dead broker": "✗", "no replica": ""}
#: Consumer groups labkit itself creates (``Cluster.read_all``): not shown unless asked for.
INTERNAL_GROUP_PREFIX = "labkit-"
#: How often (seconds) the thread looks at labkit's own broker states between refreshes.
_PROBE_SECONDS = 0.25
#: How long (seconds) a background refresh waits for the group reader before drawing without its answer.
_GROUPS_WAIT = 0.25

GroupsOption = Union[None, bool, Sequence[str]]


# ---------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class BrokerView:
    """One broker: the state labkit gave it, and whether the cluster's metadata lists it right now."""

    id: int
    #: labkit's state: "running", "paused", "stopped", "killed" or "external".
    state: str
    #: Listed in the cluster's metadata (a killed broker stays listed until its session times out).
    registered: bool

    @property
    def status(self) -> str:
        """"up", "starting", "paused" or "down" (see :func:`broker_status`)."""
        return broker_status(self.state, self.registered)


@dataclass(frozen=True)
class MemberView:
    """One member of a consumer group and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition: committed offset, log-end offset and the lag between them."""

    committed: Optional[int]
    end: Optional[int]

    @property
    def lag(self) -> Optional[int]:
        if self.committed is None or self.end is None:
            return None
        return max(self.end - self.committed, 0)


@dataclass(frozen=True)
class GroupView:
    """One consumer group as the broker reports it."""

    id: str
    #: "stable", "empty", "preparing_rebalancing", "completing_rebalancing", "dead", "not found" or "unknown".
    state: str
    members: tuple[MemberView, ...] = ()
    #: (topic, partition) -> committed / log-end offsets, for every partition committed to or assigned.
    offsets: Mapping[tuple[str, int], PartitionLag] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(x.lag or 0 for x in self.offsets.values())

    def owner(self, topic: str, partition: int) -> Optional[MemberView]:
        """The member that has ``partition`` of ``topic`` assigned, if any."""
        return next((m for m in self.members if (topic, partition) in m.partitions), None)

    def lag(self, topic: str, partition: int) -> Optional[int]:
        x = self.offsets.get((topic, partition))
        return None if x is None else x.lag

    def key(self) -> tuple:
        return (self.id, self.state, self.members, tuple(sorted(self.offsets.items())))


@dataclass(frozen=True)
class Snapshot:
    """Everything the view shows at one moment, read in one refresh."""

    brokers: tuple[BrokerView, ...]
    topics: Mapping[str, TopicState]
    groups: tuple[GroupView, ...]
    #: What could not be read this time (shown in the status line), e.g. "group billing: timed out".
    errors: tuple[str, ...] = ()
    #: Wall-clock time the refresh started, and how long it took.
    taken_at: float = 0.0
    took: float = 0.0

    @property
    def error(self) -> Optional[str]:
        return "; ".join(self.errors) or None

    def broker(self, broker_id: int) -> BrokerView:
        return next(b for b in self.brokers if b.id == broker_id)

    @property
    def broker_ids(self) -> list[int]:
        return [b.id for b in self.brokers]

    @property
    def dead_brokers(self) -> set[int]:
        """Brokers whose replicas cannot serve: down, or missing from the metadata."""
        return {b.id for b in self.brokers if b.status == "down" or not b.registered}

    def roles(self, topic: str) -> list[list[str]]:
        """Partition × broker replica roles of ``topic`` (:func:`labkit.viz.replica_roles`)."""
        return replica_roles(self.topics[topic], self.broker_ids, self.dead_brokers)

    def leaders(self, topic: str) -> dict[int, Optional[int]]:
        return self.topics[topic].leaders()

    def group(self, group_id: str) -> GroupView:
        return next(g for g in self.groups if g.id == group_id)

    @property
    def settling(self) -> bool:
        """Something is about to change: a dead or frozen broker still listed, a broker not listed yet,
        or a shown partition without leader or with replicas out of sync."""
        if any(b.registered != (b.status == "up") for b in self.brokers):
            return True
        return any(p.leader is None or p.out_of_sync for s in self.topics.values() for p in s.partitions)

    def topic_key(self, topic: str) -> tuple:
        """What the partition map of ``topic`` depends on."""
        state = self.topics.get(topic)
        parts = () if state is None else tuple((p.leader, p.replicas, p.isr) for p in state.partitions)
        return (tuple(self.broker_ids), tuple(sorted(self.dead_brokers)), parts)

    def key(self) -> tuple:
        """Everything that changes what is drawn: equal keys mean nothing to redraw."""
        topics = tuple((n, self.topic_key(n), tuple(p.high_watermark for p in s.partitions))
                       for n, s in sorted(self.topics.items()))
        return (self.brokers, topics, tuple(g.key() for g in self.groups), self.errors)


# ---------------------------------------------------------------------------------------------- pure functions
def broker_status(state: str, registered: bool) -> str:
    """What a broker is, from labkit's state and the metadata.

    ``up``: running and listed; ``starting``: its process runs but the cluster does
    not list it (yet); ``paused``: frozen by SIGSTOP / ``docker pause``;
    ``down``: killed or stopped (it may stay listed until its session times out).
    """
    if state in ("killed", "stopped"):
        return "down"
    if state == "paused":
        return "paused"
    return "up" if registered else ("down" if state == "external" else "starting")


def broker_detail(broker: BrokerView) -> str:
    """One line under the broker's status: what labkit did and what the metadata says."""
    listed = "in metadata" if broker.registered else "not in metadata"
    if broker.status == "down":
        return f"{broker.state} · " + ("still in metadata until its session times out" if broker.registered
                                       else "gone from metadata")
    if broker.status == "paused":
        return "frozen (no answers) · " + listed
    if broker.status == "starting":
        return "process running · not in metadata yet"
    return listed


def button_states(state: str, faults: bool = True, busy: bool = False) -> dict[str, bool]:
    """Which fault buttons make sense for a broker in ``state`` (all off without fault injection or while busy)."""
    if not faults or busy:
        return {a: False for a in ACTIONS}
    running, paused = state == "running", state == "paused"
    return {"kill": running or paused, "pause": running, "resume": paused, "restart": state in ("killed", "stopped")}


def supports_fault_injection(cluster: "Cluster") -> bool:
    """True when ``cluster``'s backend owns its brokers (it overrides the fault-injection methods)."""
    from .cluster import Cluster

    return all(getattr(type(cluster), m, None) is not getattr(Cluster, m) for m in ACTIONS.values())


def next_interval(interval: float, idle_interval: float, unchanged: int) -> float:
    """Seconds until the next refresh after ``unchanged`` refreshes in a row that changed nothing.

    Two quiet refreshes keep the normal pace; after that the wait doubles each
    time, up to ``idle_interval``.
    """
    if unchanged <= 2:
        return interval
    return min(interval * 2 ** (unchanged - 2), max(idle_interval, interval))


def short_error(exc: BaseException) -> str:
    """A one-line reason for the status line (Kafka error texts or names, labkit messages)."""
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "str"):
        err = exc.args[0]
        text = err.str().strip()
        if not text or text.endswith(":"):
            text = err.name().strip("_").lower().replace("_", " ")
    elif isinstance(exc, TimeoutError):
        text = "timed out"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:159] + "…"


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _dash(value: Optional[int]) -> str:
    return "–" if value is None else str(value)


def broker_card_html(broker: BrokerView) -> str:
    """The label of one broker card."""
    colour = STATUS_COLOURS[broker.status]
    return (f"<b>broker {broker.id}</b> <span style='color:{colour};font-weight:bold'>● {broker.status}</span>"
            f"<br><small>{_esc(broker_detail(broker))}</small>")


def brokers_html(brokers: Sequence[BrokerView]) -> str:
    """Brokers as an HTML table (the static view)."""
    rows = "".join(f"<tr><td>{b.id}</td><td style='color:{STATUS_COLOURS[b.status]}'><b>● {b.status}</b></td>"
                   f"<td>{_esc(broker_detail(b))}</td></tr>" for b in brokers)
    return f"<table><tr><th>broker</th><th>status</th><th></th></tr>{rows}</table>"


def partition_map_html(state: TopicState, brokers: Sequence[int], dead: Iterable[int] = ()) -> str:
    """A partition × broker table coloured by replica role (the static twin of the live figure)."""
    roles = replica_roles(state, brokers, dead)
    head = "".join(f"<th>broker {b}</th>" for b in brokers)
    rows = []
    for p, row in zip(state.partitions, roles):
        cells = "".join(f"<td title='{_esc(r)}' style='background:{ROLES[r]};text-align:center;min-width:4em'>"
                        f"{_ROLE_MARKS[r]}</td>" for r in row)
        rows.append(f"<tr><th>p{p.partition}</th>{cells}</tr>")
    return f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def roles_legend_html() -> str:
    return " ".join(f"<span style='background:{c};padding:0 6px'>{_ROLE_MARKS[r] or '&nbsp;'}</span> {_esc(r)}"
                    for r, c in ROLES.items() if r != "no replica")


def groups_html(groups: Sequence[GroupView]) -> str:
    """Consumer groups as one HTML table: per partition its owner, committed and log-end offsets, and lag."""
    if not groups:
        return "<i>No consumer groups yet.</i>"
    rows = []
    for g in groups:
        members = "; ".join(f"{_esc(m.client_id or m.member_id[:12])} → "
                            + (", ".join(f"{t}-{p}" for t, p in m.partitions) or "<i>nothing</i>")
                            for m in g.members) or "<i>no members</i>"
        rows.append(f"<tr style='border-top:2px solid #ccc'><td><b>{_esc(g.id)}</b></td><td>{_esc(g.state)}</td>"
                    f"<td colspan='3' style='text-align:left'>{members}</td>"
                    f"<td><b>{g.total_lag}</b></td></tr>")
        for (t, p), x in sorted(g.offsets.items()):
            owner = g.owner(t, p)
            who = _esc(owner.client_id or owner.member_id[:12]) if owner else "<i>unassigned</i>"
            lag = x.lag
            colour = "#c0392b" if lag else "inherit"
            rows.append(f"<tr><td></td><td>{_esc(t)}-{p}</td><td>{who}</td><td>{_dash(x.committed)}</td>"
                        f"<td>{_dash(x.end)}</td><td style='color:{colour}'>{_dash(lag)}</td></tr>")
    return ("<table><thead><tr><th>group</th><th>state / partition</th><th>member</th><th>committed</th>"
            f"<th>log end</th><th>lag</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def snapshot_html(snap: Snapshot, title: str = "Kafka cluster") -> str:
    """The whole view as static HTML: what a saved notebook, nbconvert or a non-widget frontend shows."""
    parts = [f"<div><b>{_esc(title)}</b> <small>(snapshot {time.strftime('%H:%M:%S', time.localtime(snap.taken_at))}"
             "; live in JupyterLab)</small>", brokers_html(snap.brokers)]
    for name, state in sorted(snap.topics.items()):
        parts.append(f"<p><b>{_esc(name)}</b></p>" + partition_map_html(state, snap.broker_ids, snap.dead_brokers))
    if snap.topics:
        parts.append(f"<p><small>{roles_legend_html()}</small></p>")
    parts.append("<p><b>Consumer groups</b></p>" + groups_html(snap.groups))
    if snap.errors:
        parts.append(f"<p style='color:#c0392b'>{_esc(snap.error)}</p>")
    return "".join(parts) + "</div>"


def snapshot_text(snap: Snapshot) -> str:
    """The whole view as plain text (terminal, logs)."""
    lines = ["brokers: " + ", ".join(f"{b.id} {b.status}" for b in snap.brokers)]
    for name, state in sorted(snap.topics.items()):
        lines.append(f"topic {name}:")
        for p in state.partitions:
            lines.append(f"  p{p.partition}: leader={p.leader} replicas={list(p.replicas)} isr={list(p.isr)}")
    for g in snap.groups:
        lag = ", ".join(f"{t}-{p}:{_dash(x.lag)}" for (t, p), x in sorted(g.offsets.items()))
        lines.append(f"group {g.id} ({g.state}, {len(g.members)} members): lag {g.total_lag} [{lag}]")
    if snap.errors:
        lines.append("errors: " + "; ".join(snap.errors))
    return "\n".join(lines)


def status_html(snap: Optional[Snapshot], interval: float, next_in: float, state: str = "live") -> str:
    """The status line: live or stopped, last refresh time and duration, pace, errors."""
    if state != "live":
        return f"<small style='color:#7f8c8d'>■ {_esc(state)}</small>"
    if snap is None:
        return "<small>● live · reading the cluster…</small>"
    pace = f"every {interval:g} s" if next_in <= interval + 1e-9 else f"quiet: next look in {next_in:.0f} s"
    text = (f"<small>● live · updated {time.strftime('%H:%M:%S', time.localtime(snap.taken_at))} "
            f"in {snap.took * 1000:.0f} ms · {pace}")
    if snap.errors:
        text += f" · <span style='color:#c0392b'>{_esc(snap.error)}</span>"
    return text + "</small>"


def topic_title(state: TopicState) -> str:
    """Figure title: the topic and what is wrong with it, if anything."""
    offline = sum(p.leader is None for p in state.partitions)
    under = sum(bool(p.out_of_sync) for p in state.partitions)
    notes = [f"{offline} offline" if offline else "", f"{under} under-replicated" if under else ""]
    extra = " · ".join(n for n in notes if n)
    return f"{state.name}: replicas per broker" + (f" <span style='color:#c0392b'>({extra})</span>" if extra else "")


# ---------------------------------------------------------------------------------------------- reading
#
# Consumer groups are read in a child process. librdkafka (2.16) can take down the whole process
# in the coordinator-based admin requests (DescribeConsumerGroups, ListConsumerGroupOffsets) when
# a coordinator dies or moves -- exactly what lessons do: an assertion in
# rd_kafka_admin_coord_response_parse (librdkafka PR #5397) and a NULL dereference in
# rd_kafka_handle_OffsetFetch on NOT_COORDINATOR (librdkafka issue #5040), both reproduced here
# with a live view while killing and pausing brokers. In a child process such a crash costs one
# refresh of the groups table (the view restarts the reader) instead of the learner's kernel.

class _ClusterStopped(ClusterStateError):
    """Raised when the cluster stopped while the view was reading it."""

    def __init__(self) -> None:
        super().__init__("This cluster has been stopped, so there is nothing to view.",
                         "Start a new one with labkit.start_cluster().")


def topic_state_from_metadata(name: str, topic: Any) -> TopicState:
    """A :class:`TopicState` from one topic of a Metadata response (leaders, replicas, ISR; no offsets)."""
    parts = []
    for pid in sorted(topic.partitions):
        p = topic.partitions[pid]
        leader = p.leader if p.leader is not None and p.leader >= 0 else None
        parts.append(PartitionState(name, pid, leader, tuple(p.replicas), tuple(p.isrs), None, None))
    return TopicState(name, tuple(parts))


class _Deadline:
    """One time budget shared by several requests."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.05)


def _end_offsets(admin: AdminClient, partitions: Iterable[tuple[str, int]],
                 deadline: _Deadline) -> dict[tuple[str, int], Optional[int]]:
    """Log-end offsets (what a read_uncommitted consumer can reach); None where unreadable (no leader)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted},
                                 request_timeout=deadline.left())
    out: dict[tuple[str, int], Optional[int]] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(timeout=deadline.left()).offset
        except Exception:  # noqa: BLE001 - a partition without a leader has no end to show
            out[(tp.topic, tp.partition)] = None
    return out


#: The group reader process: one JSON request per line in, one JSON answer per line out; exits
#: when its stdin closes (so it never outlives the kernel that started it).
_GROUP_READER = r'''
import json, sys, time
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

admin = AdminClient(json.loads(sys.argv[1]))

def reason(exc):
    err = exc.args[0] if exc.args else None
    if hasattr(err, "name"):  # a KafkaError: its text, or its name when the text says nothing
        text = err.str().strip()
        return text if text and not text.endswith(":") else err.name().strip("_").lower().replace("_", " ")
    return "timed out" if isinstance(exc, TimeoutError) else (str(exc) or type(exc).__name__)

for line in sys.stdin:
    request = json.loads(line)
    end = time.monotonic() + request["timeout"]
    left = lambda: max(end - time.monotonic(), 0.05)
    answer = {"listed": None, "groups": [], "error": None}
    try:
        ids = request["groups"]
        if ids is None:
            try:
                listing = admin.list_consumer_groups(request_timeout=left()).result(timeout=left())
                ids = answer["listed"] = sorted(g.group_id for g in listing.valid
                                                if not g.group_id.startswith(request["ignore"]))
            except Exception as exc:  # a broker that does not answer: describe the groups known so far
                answer["error"] = "listing: " + reason(exc)
                ids = request["known"]
            end = time.monotonic() + request["timeout"]
        if ids:
            described = admin.describe_consumer_groups(ids, request_timeout=left())
            for gid in ids:
                group = {"id": gid, "state": "unknown", "members": [], "committed": [], "error": None}
                answer["groups"].append(group)
                try:
                    desc = described[gid].result(timeout=left())
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                        group["state"] = "not found"
                    else:
                        group["error"] = reason(exc)
                    continue
                except Exception as exc:
                    group["error"] = reason(exc)
                    continue
                group["state"] = (getattr(desc.state, "name", None) or str(desc.state)).lower()
                group["members"] = [[m.member_id, m.client_id, m.host,
                                     [[tp.topic, tp.partition] for tp in
                                      (m.assignment.topic_partitions if m.assignment else [])]]
                                    for m in desc.members]
                try:
                    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)],
                                                            request_timeout=left())[gid].result(timeout=left())
                    group["committed"] = [[tp.topic, tp.partition, tp.offset] for tp in got.topic_partitions
                                          if tp.offset >= 0]
                except Exception as exc:
                    group["error"] = "offsets: " + reason(exc)
    except Exception as exc:
        answer["error"] = reason(exc)
        answer["failed"] = True
    print(json.dumps(answer), flush=True)
'''


class GroupReaderCrashed(LabkitError):
    """Raised when the child process reading consumer groups died or stopped answering."""


class _GroupReader:
    """The parent's end of the group reader process: started on first use, restarted after a crash.

    One request at a time: :meth:`send` it, then :meth:`receive` the answer, waiting as
    long as the caller can afford (the view waits a moment, then looks again next refresh).
    """

    def __init__(self, client_config: Mapping[str, Any]) -> None:
        self.config = {k: v for k, v in client_config.items() if isinstance(v, (str, int, float, bool))}
        self.proc: Optional[subprocess.Popen] = None
        self.crashes = 0
        self._sent_at: Optional[float] = None
        self._patience = 0.0

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def pending(self) -> bool:
        """A request was sent and its answer not read yet."""
        return self._sent_at is not None

    def send(self, groups: Optional[Sequence[str]], timeout: float, known: Sequence[str] = ()) -> None:
        """Ask for ``groups`` (None: list them all, or describe ``known`` if listing fails).

        Raises :class:`GroupReaderCrashed` if the reader died."""
        if self.proc is not None and self.proc.poll() is not None:
            self._crashed()  # died since the last answer
        if self.proc is None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        request = {"groups": None if groups is None else list(groups), "timeout": timeout,
                   "known": list(known), "ignore": INTERNAL_GROUP_PREFIX}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._crashed()
        self._sent_at, self._patience = time.monotonic(), 2 * timeout + 5  # listing, then describing

    def receive(self, wait: float) -> Optional[dict[str, Any]]:
        """The answer, waiting up to ``wait`` seconds for it; None while it is still being worked out."""
        if self.proc is None or self._sent_at is None or self.proc.stdout is None:
            return None
        try:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(wait, 0.0))
            line = self.proc.stdout.readline() if ready else None
        except (OSError, ValueError):
            line = ""
        if line is None:
            if time.monotonic() - self._sent_at > self._patience:
                self._crashed()  # hung
            return None
        if not line:
            self._crashed()
        self._sent_at = None
        return json.loads(line)

    def read(self, groups: Optional[Sequence[str]], timeout: float) -> dict[str, Any]:
        """:meth:`send` and wait for the answer."""
        self.send(groups, timeout)
        answer = self.receive(2 * timeout + 5)
        if answer is None:
            self._crashed()
        assert answer is not None
        return answer

    def _crashed(self) -> None:
        assert self.proc is not None
        try:
            code: Optional[int] = self.proc.wait(timeout=1)  # its output ended: it is exiting, or hung
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        self.crashes += 1
        what = f"exited with {code}" if code is not None else "stopped answering"
        raise GroupReaderCrashed(f"the group reader {what} (librdkafka); it restarts on the next refresh")

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _GROUP_READER, json.dumps(self.config)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)

    def close(self) -> None:
        proc, self.proc, self._sent_at = self.proc, None, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - busy or hung: it must go anyway
            proc.kill()
            proc.wait(timeout=5)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


class ClusterReader:
    """Reads what the view shows, in two steps: :meth:`layout` (brokers, leaders, replicas, ISR:
    one Metadata request, fast even while brokers die) then :meth:`complete` (log-end offsets
    and consumer groups, which may wait on dead brokers).

    It owns what it opens: a client on the running brokers while one is paused (a frozen
    broker never answers, so requests sent to it only time out), and the group reader
    process. :meth:`close` releases them.
    """

    def __init__(self, cluster: "Cluster", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                 timeout: float = 3.0, max_topics: int = 12) -> None:
        self.cluster = cluster
        self.topics = None if topics is None else list(topics)
        self.groups = groups
        self.timeout = timeout
        self.max_topics = max_topics
        self.faults = supports_fault_injection(cluster)
        self._fallback: Optional[tuple[tuple[str, ...], AdminClient]] = None
        self._group_reader = _GroupReader({"socket.connection.setup.timeout.ms": 3000,
                                           "reconnect.backoff.max.ms": 1000,
                                           "topic.metadata.refresh.interval.ms": 2000, **cluster.client_config()})
        self._listed: Optional[list[str]] = None
        self._found: list[Any] = []
        self._found_errors: list[str] = []

    # -- step 1
    def layout(self, stopped: Callable[[], bool] = lambda: False) -> Snapshot:
        """Brokers (labkit's state + the metadata) and every shown topic's leaders, replicas and ISR."""
        t0, wall = time.monotonic(), time.time()
        self._guard(stopped)
        errors: list[str] = []
        known: list[tuple[int, str]] = []
        if self.faults:
            try:
                known = [(b.id, b.state) for b in self.cluster.brokers]
            except Exception as exc:  # noqa: BLE001
                errors.append(f"brokers: {short_error(exc)}")
        md = None
        try:
            md = self._admin(known).list_topics(timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - every broker down: say so, keep going
            errors.append(f"metadata: {short_error(exc)}")
        registered = set(md.brokers) if md is not None else set()
        if not self.faults:
            known = [(bid, "external") for bid in sorted(registered)]
        states: dict[str, TopicState] = {}
        if md is not None:
            names = self.topics
            if names is None:
                names = sorted(t for t in md.topics if not t.startswith("__"))[:self.max_topics]
            for name in names:
                topic = md.topics.get(name)
                if topic is None or (topic.error is not None and not topic.partitions):
                    errors.append(f"{name}: no such topic")
                    continue
                states[name] = topic_state_from_metadata(name, topic)
        brokers = tuple(BrokerView(bid, state, bid in registered) for bid, state in known)
        return Snapshot(brokers, states, (), tuple(errors), taken_at=wall, took=time.monotonic() - t0)

    # -- step 2
    def complete(self, layout: Snapshot, stopped: Callable[[], bool] = lambda: False,
                 groups_wait: Optional[float] = None) -> Snapshot:
        """``layout`` plus high watermarks and consumer groups (members, committed offsets, lag).

        ``groups_wait``: seconds to wait for the group reader's answer; when it takes
        longer (a coordinator is down), the groups read last time are used and the
        answer is picked up by a later call. None waits for it (up to the timeout).
        """
        t0 = time.monotonic()
        errors = list(layout.errors)
        found: list[tuple[str, str, tuple[MemberView, ...], dict[tuple[str, int], Optional[int]]]] = []
        if self.groups is not False:
            self._guard(stopped)
            try:
                found = self._read_groups(layout.brokers, errors, groups_wait)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"groups: {short_error(exc)}")
        self._guard(stopped)
        # Only ask leaders that can answer: a killed or frozen leader stays in the metadata for a few
        # seconds, and a request to it would only wait for the timeout.
        answering = {b.id for b in layout.brokers if b.status == "up" and b.registered}
        leaders = {(n, p.partition): p.leader for n, s in layout.topics.items() for p in s.partitions}
        wanted = {tp for tp, leader in leaders.items() if leader in answering}
        wanted |= {tp for *_, committed in found for tp in committed if leaders.get(tp, -1) in answering | {-1}}
        try:
            admin = self._admin([(b.id, b.state) for b in layout.brokers])
            ends = _end_offsets(admin, wanted, _Deadline(self.timeout))
        except Exception as exc:  # noqa: BLE001
            ends = {}
            errors.append(f"offsets: {short_error(exc)}")
        topics = {n: TopicState(n, tuple(replace(p, high_watermark=ends.get((n, p.partition)))
                                         for p in s.partitions), s.config) for n, s in layout.topics.items()}
        groups = tuple(GroupView(gid, state, members, {tp: PartitionLag(c, ends.get(tp))
                                                       for tp, c in sorted(committed.items())})
                       for gid, state, members, committed in found)
        return Snapshot(layout.brokers, topics, groups, tuple(errors), taken_at=layout.taken_at,
                        took=layout.took + time.monotonic() - t0)

    @property
    def group_reader_pid(self) -> Optional[int]:
        """Pid of the group reader process while it runs (for tests)."""
        return self._group_reader.pid

    def close(self) -> None:
        """Stop the group reader process and forget the fallback client."""
        self._group_reader.close()
        self._fallback = None

    # -- internals
    def _guard(self, stopped: Callable[[], bool]) -> None:
        if stopped() or getattr(self.cluster, "stopped", False):
            raise _ClusterStopped()

    def _admin(self, known: Sequence[tuple[int, str]]) -> AdminClient:
        """The cluster's client, or one on the running brokers only while some broker is paused."""
        if not any(state == "paused" for _, state in known):
            return self.cluster.admin()
        running = tuple(sorted(b.address for b in self.cluster.brokers if b.state == "running"))
        if not running:
            return self.cluster.admin()
        if self._fallback is None or self._fallback[0] != running:
            self._fallback = (running, _admin_module.make_admin(",".join(running)))
        return self._fallback[1]

    def _read_groups(self, brokers: Sequence[BrokerView], errors: list[str], wait: Optional[float]) -> list[Any]:
        if self.groups is None or self.groups is True:
            # Listing asks every broker in the metadata; a dead or frozen one that is still listed
            # would hold the answer until the timeout, so meanwhile keep the groups listed last time.
            silent = any(b.registered and b.status in ("down", "paused") for b in brokers)
            asked = self._listed if silent and self._listed is not None else None
        else:
            asked = sorted(self.groups)  # type: ignore[arg-type]
        reader = self._group_reader
        if asked == [] and not reader.pending:
            self._found, self._found_errors = [], []
            return []
        if not reader.pending:
            reader.send(asked, self.timeout, known=self._listed or ())
        answer = reader.receive(2 * self.timeout + 5 if wait is None else wait)
        if answer is None:  # still working (a coordinator is away): show what we had
            errors.extend(self._found_errors)
            return self._found
        if answer["listed"] is not None:
            self._listed = answer["listed"]
        found_errors: list[str] = [f"groups: {answer['error']}"] if answer["error"] else []
        if answer.get("failed"):
            self._found_errors = found_errors
            errors.extend(found_errors)
            return self._found
        self._found = [parse_group(g, found_errors) for g in answer["groups"]]
        self._found_errors = found_errors
        errors.extend(found_errors)
        return self._found


def parse_group(group: Mapping[str, Any], errors: Optional[list[str]] = None) -> tuple:
    """One group of the reader's answer as (id, state, members, {(topic, partition): committed or None})."""
    if group.get("error") and errors is not None:
        errors.append(f"group {group['id']}: {group['error']}")
    members = tuple(sorted((MemberView(mid, cid, host, tuple(sorted((t, p) for t, p in tps)))
                            for mid, cid, host, tps in group["members"]), key=lambda m: (m.client_id, m.member_id)))
    offsets: dict[tuple[str, int], Optional[int]] = {tp: None for m in members for tp in m.partitions}
    offsets.update({(t, p): o for t, p, o in group["committed"]})
    return group["id"], group["state"], members, offsets


def read_groups(cluster: "Cluster", groups: GroupsOption = None, timeout: float = 3.0) -> list[GroupView]:
    """Consumer groups with members, assignments, committed offsets, log-end offsets and lag.

    ``groups``: None or True for every group (labkit's own ``labkit-*`` readers left
    out), a list of group ids for just those.
    """
    return list(take_snapshot(cluster, topics=[], groups=groups, timeout=timeout).groups)


def take_snapshot(cluster: "Cluster", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                  timeout: float = 3.0, max_topics: int = 12) -> Snapshot:
    """Read brokers, topics and groups once. Failures become the snapshot's ``errors``, never exceptions.

    ``topics=None`` covers every non-internal topic (the first ``max_topics``).
    """
    reader = ClusterReader(cluster, topics, groups, timeout=timeout, max_topics=max_topics)
    try:
        return reader.complete(reader.layout())
    finally:
        reader.close()


# ---------------------------------------------------------------------------------------------- the view
#: Every view that is still refreshing, so a new view of the same cluster can retire the old one.
_LIVE_VIEWS: "weakref.WeakSet[ClusterView]" = weakref.WeakSet()


class ClusterView:
    """The live dashboard of one cluster. Display it (last expression of a cell); ``close()`` stops it.

    ``topics``: names to map (None: every topic, following new ones). ``groups``:
    None for every consumer group, a list of ids, or False for none. ``refresh``:
    seconds between refreshes (never faster than ``max_rate`` per second);
    ``idle_refresh``: the slowest pace while nothing changes (default 4 × refresh).
    ``replace``: stop other live views of the same cluster (so re-running a cell
    does not pile up threads). ``timeout``: seconds one refresh may wait on the cluster.
    """

    def __init__(self, cluster: "Cluster", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
                 refresh: float = 1.0, *, max_rate: float = 4.0, idle_refresh: Optional[float] = None,
                 timeout: float = 3.0, replace: bool = True) -> None:
        import ipywidgets as w

        if refresh <= 0 or max_rate <= 0:
            raise ValueError("refresh and max_rate must be positive (seconds between refreshes, refreshes per second)")
        self.cluster = cluster
        self.topics: Optional[list[str]] = None if topics is None else [cluster.topic_name(t) for t in topics]
        self.groups: GroupsOption = [groups] if isinstance(groups, str) else (
            sorted(groups) if isinstance(groups, (list, tuple, set, frozenset)) else groups)
        self.interval = max(refresh, 1.0 / max_rate)
        self.idle_interval = max(idle_refresh if idle_refresh is not None else 4 * self.interval, self.interval)
        self.timeout = timeout
        self.faults = supports_fault_injection(cluster)
        #: Counters for benchmarks and tests.
        self.refreshes = 0
        self.redraws = 0
        self.thread_cpu_seconds = 0.0
        self.last: Optional[Snapshot] = None
        self._unchanged = 0
        self._next_in = self.interval
        self._drawn_key: Optional[tuple] = None
        self._topic_keys: dict[str, tuple] = {}
        self._busy: set[int] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ui = threading.RLock()
        self._refreshing = threading.Lock()
        self._closed_reason = ""
        self._reader = ClusterReader(cluster, self.topics, self.groups, timeout=timeout)

        self.status = w.HTML(status_html(None, self.interval, self.interval))
        self.message = w.HTML()
        self.broker_box = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        self.topic_box = w.VBox()
        self.group_html = w.HTML()
        self._cards: dict[int, tuple[Any, Any]] = {}
        #: (broker id, action) -> its Button, e.g. ``view.buttons[(2, "kill")].click()``.
        self.buttons: dict[tuple[int, str], Any] = {}
        self.figures: dict[str, Any] = {}
        parts = [w.HTML("<b>Brokers</b>" + ("" if self.faults else
                                             " <small>(this backend cannot break its brokers)</small>")),
                 self.broker_box, self.message, self.topic_box]
        if self.groups is not False:
            parts += [w.HTML("<b>Consumer groups</b>"), self.group_html]
        parts.append(self.status)
        self.widget = w.VBox(parts)

        if replace:
            for other in list(_LIVE_VIEWS):
                if other.cluster is cluster and other is not self:
                    other.close("replaced by a newer view of this cluster")
        try:
            self.refresh_now()
        except BaseException:
            self._reader.close()
            raise
        self._listen_for_stop()
        self._thread = threading.Thread(target=self._loop, name="labkit-cluster-view", daemon=True)
        _LIVE_VIEWS.add(self)
        self._thread.start()

    # ------------------------------------------------------------------ public
    @property
    def running(self) -> bool:
        """True while the refresh thread runs."""
        return self._thread.is_alive()

    def snapshot(self) -> Snapshot:
        """The data the view shows now (read at the last refresh)."""
        assert self.last is not None  # the constructor takes the first one
        return self.last

    def refresh_now(self) -> Snapshot:
        """Read the cluster now (groups included) and redraw what changed; returns the snapshot.

        Cluster errors end up in the snapshot's ``errors``, not raised.
        """
        return self._refresh(groups_wait=None)

    def _refresh(self, groups_wait: Optional[float]) -> Snapshot:
        """Two steps: brokers and partition maps are drawn as soon as the metadata answers, then
        offsets and groups (waiting ``groups_wait`` s for the group reader, None: until it answers)."""
        with self._refreshing:
            layout = self._reader.layout(stopped=self._stop.is_set)
            with self._ui:
                # What the page shows until the second step is done: the new layout, the previous groups.
                kept = tuple(e for e in self.last.errors if e.startswith(("group", "offsets"))) if self.last else ()
                interim = replace(layout, groups=self.last.groups if self.last else (), errors=layout.errors + kept)
                self.last = interim
                self._draw_brokers(interim.brokers)
                self._draw_topics(interim)
            snap = self._reader.complete(layout, stopped=self._stop.is_set, groups_wait=groups_wait)
            changed = self._drawn_key != snap.key()
            self._unchanged = 0 if changed or snap.settling else self._unchanged + 1
            self._next_in = next_interval(self.interval, self.idle_interval, self._unchanged)
            with self._ui:
                self.last = snap
                self.refreshes += 1
                if changed:
                    self._draw(snap)
                    self.redraws += 1
                if not self._stop.is_set():
                    self.status.value = status_html(snap, self.interval, self._next_in)
            return snap

    def press(self, broker_id: int, action: str) -> threading.Thread:
        """What a broker button does: run ``action`` ("kill", "pause", "resume", "restart") in a worker thread.

        The result (or the error) appears in the view's message line; the view
        refreshes as soon as it is done. Returns the worker thread.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        with self._ui:
            self._busy.add(broker_id)
            self.message.value = f"<small><i>{action} broker {broker_id}…</i></small>"
            self._draw_brokers(self.last.brokers if self.last else ())
        worker = threading.Thread(target=self._run_action, args=(broker_id, action), daemon=True,
                                  name=f"labkit-view-{action}-{broker_id}")
        worker.start()
        return worker

    def close(self, reason: str = "view closed") -> None:
        """Stop refreshing; the widgets keep what they showed last, the buttons are switched off."""
        first = not self._stop.is_set()
        self._stop.set()
        self._wake.set()
        if first:
            self._closed_reason = reason
        if hasattr(self, "_thread") and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self.timeout * 3 + 5)
        self._finish()

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live widget in JupyterLab; a static HTML / text snapshot anywhere else."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        if self.last is not None:
            bundle["text/html"] = snapshot_html(self.last, title=f"Kafka cluster ({self._state_word()})")
        bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        head = f"<ClusterView {self._state_word()}, every {self.interval:g} s, {self.refreshes} refreshes>"
        return head if self.last is None else head + "\n" + snapshot_text(self.last)

    def _state_word(self) -> str:
        if hasattr(self, "_thread") and self.running:
            return "live"
        return self._closed_reason or "stopped"

    # ------------------------------------------------------------------ drawing (under self._ui)
    def _draw(self, snap: Snapshot) -> None:
        self._drawn_key = snap.key()
        self._draw_brokers(snap.brokers)
        self._draw_topics(snap)
        if self.groups is not False:
            self.group_html.value = groups_html(snap.groups)

    def _draw_brokers(self, brokers: Sequence[BrokerView]) -> None:
        stopped = self._stop.is_set()
        for b in brokers:
            if b.id not in self._cards:
                self._cards[b.id] = self._broker_card(b.id)
            _, label = self._cards[b.id]
            text = broker_card_html(b)
            if label.value != text:
                label.value = text
            states = button_states(b.state, self.faults and not stopped, b.id in self._busy)
            for action, enabled in states.items():
                button = self.buttons[(b.id, action)]
                if button.disabled == enabled:
                    button.disabled = not enabled
        cards = [self._cards[b.id][0] for b in brokers]
        if list(self.broker_box.children) != cards:
            self.broker_box.children = cards

    def _broker_card(self, broker_id: int) -> tuple[Any, Any]:
        import ipywidgets as w

        label = w.HTML()
        buttons = []
        for action in ACTIONS:
            tip = (f"{action} broker {broker_id}" if self.faults else
                   "Not possible here: labkit does not own this cluster's brokers (start one with start_cluster()).")
            b = w.Button(description=action, button_style=_BUTTON_STYLES[action], tooltip=tip, disabled=True,
                         layout=w.Layout(width="76px"))
            b.on_click(lambda _b, bid=broker_id, a=action: self.press(bid, a))
            self.buttons[(broker_id, action)] = b
            buttons.append(b)
        card = w.VBox([label, w.HBox(buttons)],
                      layout=w.Layout(border="1px solid #ddd", padding="4px", margin="2px"))
        return card, label

    def _draw_topics(self, snap: Snapshot) -> None:
        import plotly.graph_objects as go

        names = list(snap.topics) if self.topics is None else [t for t in self.topics if t in snap.topics]
        for name in names:
            key = snap.topic_key(name)
            if self._topic_keys.get(name) == key:
                continue
            self._topic_keys[name] = key
            state = snap.topics[name]
            heat = _heatmap(state, snap.broker_ids, snap.dead_brokers, showscale=False)
            fig = self.figures.get(name)
            if fig is None:
                fig = go.FigureWidget()
                fig.add_trace(heat)
                _legend(fig)
                fig.update_layout(plot_bgcolor="white", margin=dict(l=40, r=20, t=40, b=30),
                                  yaxis_autorange="reversed")
                self.figures[name] = fig
            with fig.batch_update():
                trace = fig.data[0]
                trace.z, trace.text, trace.customdata = heat.z, heat.text, heat.customdata
                trace.x, trace.y = heat.x, heat.y
                fig.layout.title.text = topic_title(state)
                fig.layout.height = 150 + 34 * len(state)
        shown = [self.figures[n] for n in names if n in self.figures]
        if list(self.topic_box.children) != shown:
            self.topic_box.children = shown

    # ------------------------------------------------------------------ the thread
    def _loop(self) -> None:
        cpu0 = time.thread_time()
        try:
            took = 0.0
            while self._pause(max(self._next_in - took, _PROBE_SECONDS / 5)):
                started = time.monotonic()
                try:
                    self._refresh(groups_wait=_GROUPS_WAIT)
                except _ClusterStopped:
                    break
                except Exception as exc:  # noqa: BLE001 - keep the view alive and say what went wrong
                    log.debug("live view refresh failed", exc_info=True)
                    with self._ui:
                        self.status.value = (f"<small style='color:#c0392b'>refresh failed: "
                                             f"{_esc(short_error(exc))}</small>")
                took = time.monotonic() - started  # refreshes start every interval, however long one takes
                self.thread_cpu_seconds = time.thread_time() - cpu0
        finally:
            self.thread_cpu_seconds = time.thread_time() - cpu0
            if self._cluster_stopped() and not self._stop.is_set():
                self._closed_reason = "cluster stopped · view stopped"
            self._stop.set()
            self._finish()

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` (less if woken or if a broker changed state); False when the view must stop."""
        deadline = time.monotonic() + seconds
        seen = self._local_states()
        while True:
            if self._stop.is_set() or self._cluster_stopped():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if self._wake.wait(min(left, _PROBE_SECONDS)):
                self._wake.clear()
                self._unchanged = 0
                return not self._stop.is_set()
            if seen is not None and self._local_states() != seen:
                self._unchanged = 0
                return True

    def _local_states(self) -> Optional[tuple]:
        """labkit's own broker states when reading them is free (native processes), else None."""
        if getattr(self.cluster, "backend", "") != "native":
            return None
        try:
            return tuple((b.id, b.state) for b in self.cluster.brokers)
        except Exception:  # noqa: BLE001
            return None

    def _cluster_stopped(self) -> bool:
        return bool(getattr(self.cluster, "stopped", False))

    def _listen_for_stop(self) -> None:
        """Stop with the cluster: through its ``on_stop`` hook when it has one (else the loop polls ``stopped``)."""
        hook = getattr(self.cluster, "on_stop", None)
        if not callable(hook):
            return
        me = weakref.ref(self)

        def stopped() -> None:
            view = me()
            if view is not None:
                view._closed_reason = view._closed_reason or "cluster stopped · view stopped"
                view._stop.set()
                view._wake.set()

        hook(stopped)

    def _run_action(self, broker_id: int, action: str) -> None:
        t0 = time.monotonic()
        try:
            getattr(self.cluster, ACTIONS[action])(broker_id)
            text = f"<small>{action} broker {broker_id}: done in {time.monotonic() - t0:.1f} s</small>"
        except UnsupportedOperation as exc:
            self.faults = False
            text = f"<small style='color:#c0392b'>{_esc(exc)}</small>"
        except LabkitError as exc:
            text = f"<small style='color:#c0392b'>{action} broker {broker_id}: {_esc(exc)}</small>"
        except Exception as exc:  # noqa: BLE001 - shown, never raised into the kernel
            log.debug("live view action failed", exc_info=True)
            text = f"<small style='color:#c0392b'>{action} broker {broker_id} failed: {_esc(short_error(exc))}</small>"
        with self._ui:
            self._busy.discard(broker_id)
            self.message.value = text
            self._draw_brokers(self._fresh_brokers())
        self._wake.set()

    def _fresh_brokers(self) -> tuple[BrokerView, ...]:
        """The last snapshot's brokers with labkit's current states (the metadata follows at the next refresh)."""
        if self.last is None:
            return ()
        try:
            states = {b.id: b.state for b in self.cluster.brokers}
        except Exception:  # noqa: BLE001
            return self.last.brokers
        return tuple(BrokerView(b.id, states.get(b.id, b.state), b.registered) for b in self.last.brokers)

    def _finish(self) -> None:
        """Show that the view stopped and switch the buttons off (idempotent)."""
        _LIVE_VIEWS.discard(self)
        thread = getattr(self, "_thread", None)
        if thread is None or threading.current_thread() is thread or not thread.is_alive():
            self._reader.close()  # only once nobody reads through it any more
        with self._ui:
            reason = self._closed_reason or "view stopped"
            text = status_html(self.last, self.interval, self.interval, state=reason)
            if self.status.value != text:
                self.status.value = text
            for button in self.buttons.values():
                if not button.disabled:
                    button.disabled = True


def live_view(cluster: "Cluster", topics: Optional[Sequence[str]] = None, groups: GroupsOption = None,
              refresh: float = 1.0, **options: Any) -> ClusterView:
    """A :class:`ClusterView` of ``cluster``: every topic and group unless given. Same as ``cluster.view()``."""
    return ClusterView(cluster, topics=topics, groups=groups, refresh=refresh, **options)


__all__ = ["ACTIONS", "BrokerView", "ClusterReader", "ClusterView", "GroupReaderCrashed", "GroupView", "MemberView",
           "PartitionLag", "STATUS_COLOURS", "Snapshot", "broker_status", "button_states", "groups_html",
           "live_view", "next_interval", "parse_group", "partition_map_html", "read_groups", "snapshot_html",
           "snapshot_text", "status_html", "supports_fault_injection", "take_snapshot", "topic_state_from_metadata"]
