"""The class poll, seen from a notebook: what a learner's kernel sends to the class, and what the trainer reads.

In a Kafka Lab classroom (``labkit classroom``: :mod:`labkit.app.classroom`), the hub starts one secured
class cluster and gives every learner's server a SCRAM login of its own, in the environment:

=========================  ==========================================================
``LABKIT_CLASS_BOOTSTRAP``  the class cluster's SCRAM (SASL_SSL) listener
``LABKIT_CLASS_USER``       the learner's hub name, which is also their SCRAM user
``LABKIT_CLASS_PASSWORD``   their SCRAM password (set by the hub at enrolment)
``LABKIT_CLASS_CA``         the class cluster's CA certificate (public; PEM text or a file)
``LABKIT_CLASS_TRAINERS``   the trainers' names (their own answers are not the class's)
=========================  ==========================================================

Each learner may write only to their own topic, ``class.answers.<user>``: the hub grants
``User:<user>`` WRITE and DESCRIBE on that literal name and nothing else, so the broker refuses
anything a learner sends elsewhere (``TOPIC_AUTHORIZATION_FAILED``), and who answered is the
topic the broker accepted the record on, never what the record says. Trainers may READ every
``class.answers.`` topic (a PREFIXED ACL). Without these variables -- one learner on their own
machine -- nothing is sent and nothing is read.

A record's key is what it is about (a prediction id, a lesson, an exercise); its value is JSON
with a ``kind``: ``prediction`` (locked in), ``outcome`` (revealed: what the cluster did and
whether the learner was right), ``lesson`` (a lesson's summary reached), ``grade`` (``labkit grade``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from .librdkafka import HANDSHAKE_MS, quiet

log = logging.getLogger(__name__)

PREFIX = "class.answers."
#: librdkafka's consumer always looks up its group's coordinator: trainers may READ groups with this prefix.
GROUP_PREFIX = "class.poll."
ENV = ("LABKIT_CLASS_BOOTSTRAP", "LABKIT_CLASS_USER", "LABKIT_CLASS_PASSWORD", "LABKIT_CLASS_CA")
KINDS = ("prediction", "outcome", "lesson", "grade")


@dataclass(frozen=True)
class ClassLink:
    """One notebook's login to the class cluster (see the module doc)."""

    bootstrap: str
    user: str
    password: str
    ca: str
    trainers: tuple[str, ...] = ()

    @property
    def topic(self) -> str:
        """The one topic this login may write: ``class.answers.<user>``."""
        return PREFIX + self.user

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka settings for this login (SCRAM-SHA-512 over TLS, librdkafka's lines to logging)."""
        # The hub hands the CA over as PEM text (no file a learner would need to read); a path works too.
        ca = {"ssl.ca.pem": self.ca} if self.ca.lstrip().startswith("-----BEGIN") else {"ssl.ca.location": self.ca}
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": self.user, "sasl.password": self.password,
                **ca, **quiet()}


def link() -> Optional[ClassLink]:
    """This notebook's class login from the environment, or None outside a classroom."""
    values = [os.environ.get(name, "").strip() for name in ENV]
    if not all(values):
        return None
    trainers = tuple(t for t in os.environ.get("LABKIT_CLASS_TRAINERS", "").replace(",", " ").split() if t)
    return ClassLink(*values, trainers=trainers)


# ---------------------------------------------------------------------------------------------- sending
_producer: Any = None
_producer_for: Optional[ClassLink] = None
_lock = threading.Lock()


def _get_producer(login: ClassLink) -> Any:
    global _producer, _producer_for
    from confluent_kafka import Producer

    if _producer is None or _producer_for != login:
        # acks=all: an answer is either on the class cluster or reported as not sent; 5 s, then the learner
        # is told (a class cluster that is down must not keep a lesson's cell waiting).
        # quiet(): the producer lives as long as the kernel; a class cluster that stops must not fill cells (or a
        # test run's terminal) with librdkafka's reconnection complaints
        _producer = Producer({**login.client_config(), "acks": "all", "linger.ms": 0, **quiet(),
                              "message.timeout.ms": 5000, "socket.connection.setup.timeout.ms": HANDSHAKE_MS})
        _producer_for = login
    return _producer


def connect_early() -> None:
    """Open the class connection in the background (a TLS + SCRAM handshake), so the first answer goes at once."""
    login = link()
    if login is None:
        return
    threading.Thread(target=lambda: _with_producer(login, lambda p: p.poll(0)), daemon=True,
                     name="labkit-class-connect").start()


def _with_producer(login: ClassLink, use: Any) -> Any:
    with _lock:
        return use(_get_producer(login))


def publish(kind: str, key: str, /, timeout: float = 6.0, **fields: Any) -> Optional[str]:
    """Send one event to this learner's class topic. None when sent (or outside a classroom), else why not.

    Never raises: a poll that cannot be reached must not break a lesson; the caller shows the reason.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    login = link()
    if login is None:
        return None
    value = json.dumps({**fields, "kind": kind, "key": key, "at": time.time()}, default=str).encode()
    outcome: list[Any] = []
    try:
        def send(producer: Any) -> None:
            producer.produce(login.topic, key=key.encode(), value=value,
                             on_delivery=lambda err, msg: outcome.append(err))
            producer.flush(timeout)

        _with_producer(login, send)
    except Exception as exc:  # noqa: BLE001 - reported, never raised into the lesson
        return f"{type(exc).__name__}: {exc}"
    if not outcome:
        return f"the class cluster did not answer within {timeout:.0f} s"
    if outcome[0] is not None:
        return f"{outcome[0].name()}: {outcome[0].str()}"
    return None


# ---------------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class Event:
    """One record of one learner's class topic."""

    learner: str
    kind: str
    key: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0


def decode(topic: str, value: Optional[bytes]) -> Optional[Event]:
    """The event a record of ``topic`` carries (None for anything that is not one). The learner is the topic's."""
    if not topic.startswith(PREFIX) or not value:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        return None
    return Event(topic[len(PREFIX):], data["kind"], str(data.get("key", "")), data, float(data.get("at") or 0.0))


class EventReader:
    """Every class topic this login may read, from the beginning; :meth:`poll` returns what arrived since.

    New learners' topics are picked up every ``rescan`` seconds. A trainer's login reads all of them;
    a learner's login reads nothing (the broker refuses).
    """

    def __init__(self, login: ClassLink, rescan: float = 3.0) -> None:
        from confluent_kafka import Consumer

        self.login, self.rescan = login, rescan
        self._consumer = Consumer({**login.client_config(), **quiet(), "enable.auto.commit": False,
                                   "group.id": f"{GROUP_PREFIX}{login.user}.{uuid.uuid4().hex[:8]}",
                                   "enable.partition.eof": False})
        self._topics: set[str] = set()
        self._scanned = 0.0
        self.events: list[Event] = []
        self.error = ""

    def _scan(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        metadata = self._consumer.list_topics(timeout=5)
        found = {t for t in metadata.topics if t.startswith(PREFIX)}
        new = sorted(found - self._topics)
        if new:
            self._topics |= set(new)
            self._consumer.incremental_assign([TopicPartition(t, p, OFFSET_BEGINNING)
                                               for t in new for p in metadata.topics[t].partitions])
        self._scanned = time.monotonic()

    def poll(self, seconds: float = 1.0) -> list[Event]:
        """Read for up to ``seconds``; the events that arrived (also appended to :attr:`events`)."""
        got: list[Event] = []
        self.error = ""
        try:
            if time.monotonic() - self._scanned >= self.rescan:
                self._scan()
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                for msg in self._consumer.consume(500, timeout=min(left, 0.5)):
                    if msg.error():
                        self.error = msg.error().str()
                        continue
                    event = decode(msg.topic(), msg.value())
                    if event is not None:
                        got.append(event)
        except Exception as exc:  # noqa: BLE001 - a live figure shows it on its status line
            self.error = f"{type(exc).__name__}: {exc}"
        self.events.extend(got)
        return got

    def close(self) -> None:
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - closing twice, or after the cluster went
            pass


def read_events(login: Optional[ClassLink] = None, seconds: float = 3.0) -> list[Event]:
    """Everything in the class topics this login may read (the trainer's: all of them), oldest first per learner."""
    login = login or link()
    if login is None:
        return []
    reader = EventReader(login, rescan=0.0)
    try:
        reader.poll(seconds)
        return list(reader.events)
    finally:
        reader.close()


# ---------------------------------------------------------------------------------------------- what they say
def answers(events: Iterable[Event], prediction_id: str, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """Learner -> the answer they locked in last for ``prediction_id`` (a changed answer replaces the old one)."""
    skip = set(exclude)
    out: dict[str, Any] = {}
    for e in events:
        if e.kind == "prediction" and e.key == prediction_id and e.learner not in skip:
            out[e.learner] = e.data.get("value")
    return out


def outcomes(events: Iterable[Event], prediction_id: str) -> dict[str, dict[str, Any]]:
    """Learner (or trainer) -> their last reveal of ``prediction_id``: ``{"actual": ..., "right": ...}``."""
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.kind == "outcome" and e.key == prediction_id:
            out[e.learner] = {"actual": e.data.get("actual"), "right": e.data.get("right")}
    return out


def progress(events: Iterable[Event], exclude: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """Learner -> where they are: lesson (of their latest event), last seen, predictions right/judged, grades."""
    skip = set(exclude)
    rows: dict[str, dict[str, Any]] = {}
    judged: dict[str, dict[str, bool]] = {}
    for e in sorted(events, key=lambda ev: ev.at):
        if e.learner in skip:
            continue
        row = rows.setdefault(e.learner, {"lesson": "", "last_seen": 0.0, "right": 0, "judged": 0,
                                          "lessons_done": [], "grades": {}})
        row["last_seen"] = max(row["last_seen"], e.at)
        if e.kind in ("prediction", "outcome"):
            row["lesson"] = e.key.split(".", 1)[0]
        if e.kind == "outcome" and e.data.get("right") is not None:
            judged.setdefault(e.learner, {})[e.key] = bool(e.data["right"])
        elif e.kind == "lesson":
            row["lesson"] = e.key
            if e.key not in row["lessons_done"]:
                row["lessons_done"].append(e.key)
        elif e.kind == "grade":
            row["grades"][e.key] = f"{e.data.get('score')}/{e.data.get('max_score')}"
    for learner, verdicts in judged.items():
        rows[learner]["right"] = sum(verdicts.values())
        rows[learner]["judged"] = len(verdicts)
    return rows
