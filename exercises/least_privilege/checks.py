"""Checks for least_privilege: two applications' users and the minimum ACLs, judged by acting as each user.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py``. The learner's
``secure_payments(admin_settings, topic, transactional_id, group)`` runs in their kernel with the
admin's client settings and returns each application's user name and password (plain data).
Everything else happens here, in the grader's process, on the grader's own secured cluster: the
grader creates the topics, then logs in as each application and tries what its job needs (it must
work) and what it does not (other topics and groups, other transactional ids, reading or writing
the wrong way, changing configs, ACLs, deleting): every one of those must be refused by the
authorizer. A third user the grader creates must get nowhere, and the ACLs that apply to these
resources must be exactly the four the two jobs need.
"""

from __future__ import annotations

import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from labkit.grading import Rules, check
from labkit.grading.harness import unique

#: No module of the lab holds this answer; the generic rules (no dynamic imports, no grading machinery) apply.
RULES = Rules()
#: One node with the secured profile's listeners and authorizer: ACLs and logins are cluster-wide, and one
#: node answers every probe (three TLS nodes cost a grading three times the handshakes and start-up).
CLUSTER = "secured-single-broker"
#: While graded, the notebook attaches to the grader's secured cluster as its admin (LABKIT_CLIENT_CONFIG).
SHARE_CLUSTER = True

#: Committed and aborted records the producer writes; what a read_committed consumer must see.
COMMITTED = [f"payment-{i}" for i in range(6)]
ABORTED = [f"aborted-{i}" for i in range(3)]
#: How long one probe may take before it counts as "not refused" (refusals come within a second).
PROBE_TIMEOUT = 8.0
#: Super users of the secured profile: no ACL applies to them.
SUPER_USERS = {"admin", "broker-1", "broker-2", "broker-3"}  # the super users of either secured profile


@dataclass(frozen=True)
class Names:
    """One scenario's resources: the applications' own, and neighbours they must not reach."""

    topic: str
    transactional_id: str
    group: str

    @property
    def sibling_topic(self) -> str:  # shares the topic's name as a prefix: a PREFIXED grant reaches it
        return f"{self.topic}-archive"

    @property
    def sibling_group(self) -> str:
        return f"{self.group}-audit"

    @property
    def sibling_transactional_id(self) -> str:
        return f"{self.transactional_id}-2"

    def others(self, suffix: str) -> tuple[str, str]:
        """An unrelated topic and group."""
        return f"audit-{suffix}", f"reporting-{suffix}"


@dataclass
class Probe:
    """One thing a user tried: what, whether it must be refused, and what happened."""

    who: str
    what: str
    result: str  # "allowed", "no answer" or the error's name

    @property
    def refused(self) -> bool:
        return self.result.endswith("AUTHORIZATION_FAILED")


@dataclass
class Outcome:
    names: Names
    users: dict[str, str] = field(default_factory=dict)
    produced: str = ""
    consumed: list[str] = field(default_factory=list)
    consume_error: str = ""
    committed_offsets: str = ""
    probes: list[Probe] = field(default_factory=list)
    #: (principal, resource, name, pattern, operation, permission) of every ACL that applies to these resources.
    acls: set[tuple[str, ...]] = field(default_factory=set)


# ---------------------------------------------------------------------------------------------- the learner's answer
def credentials_of(ns, names: Names) -> dict[str, dict[str, str]]:
    """Call ``secure_payments`` with the admin's settings; its answer, checked to have the right shape."""
    answer = ns.secure_payments(ns.cluster.client_config(), names.topic, names.transactional_id, names.group)
    assert isinstance(answer, dict) and set(answer) == {"producer", "consumer"}, \
        f"secure_payments should return {{'producer': {{...}}, 'consumer': {{...}}}}, not {answer!r:.200}"
    for role, creds in answer.items():
        assert isinstance(creds, dict) and isinstance(creds.get("username"), str) and \
            isinstance(creds.get("password"), str) and creds["username"] and creds["password"], \
            f"answer[{role!r}] should be {{'username': ..., 'password': ...}} (non-empty strings), not {creds!r:.200}"
    assert answer["producer"]["username"] != answer["consumer"]["username"], \
        "both applications log in as the same user: each needs its own, with only its own ACLs"
    return answer


def as_user(cluster, creds: dict[str, str], **config: Any) -> dict[str, Any]:
    from labkit.admin import client_logging
    from labkit.security import with_credentials

    # TLS + SCRAM handshakes are slow under load; librdkafka's complaints (an Actor's clients outlive the grading's
    # cluster until they are collected) go to logging, not to the grader's terminal
    return {**with_credentials(cluster.client_config(), creds["username"], creds["password"]),
            "socket.connection.setup.timeout.ms": 15_000, **client_logging(), **config}


# ---------------------------------------------------------------------------------------------- acting as a user
def _error_name(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    return err.name() if hasattr(err, "name") else f"{type(exc).__name__}: {exc}"


class Actor:
    """A user the grader logs in as: its client settings, and one admin client and one producer kept for its tries
    (a new connection costs a TLS handshake and a SCRAM exchange)."""

    def __init__(self, name: str, settings: dict[str, Any]) -> None:
        self.name, self.settings = name, settings
        self._admin: Any = None
        self._producer: Any = None

    @property
    def principal(self) -> str:
        return f"User:{self.name}"

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(self.settings)
        return self._admin

    def produce(self, topic: str) -> str:
        """One record to ``topic``: "allowed" (delivered) or the delivery error's name."""
        from confluent_kafka import Producer

        if self._producer is None:
            self._producer = Producer({**self.settings, "message.timeout.ms": int(PROBE_TIMEOUT * 1000)})
        result: dict[str, str] = {}

        def on_delivery(err, msg):
            result["r"] = err.name() if err is not None else "allowed"

        self._producer.produce(topic, value=b"probe", on_delivery=on_delivery)
        self._producer.flush(PROBE_TIMEOUT + 2)
        return result.get("r", "no answer")

    def admin_call(self, call: Callable[[Any], Any]) -> str:
        """An AdminClient request as this user: "allowed" or the error's name."""
        from confluent_kafka import KafkaException

        try:
            futures = call(self.admin())
            for future in (futures.values() if isinstance(futures, dict) else [futures]):
                future.result()
        except KafkaException as exc:
            return _error_name(exc)
        return "allowed"

    def read(self, topic: str) -> str:
        """Fetch from ``topic`` (assigned, no group): "allowed" (a record came), or the refusal.

        A topic the user may not even DESCRIBE is refused in the metadata; one it may describe but
        not READ, at the first fetch.
        """
        meta = self.admin().list_topics(topic=topic, timeout=PROBE_TIMEOUT).topics.get(topic)
        if meta is not None and meta.error is not None and meta.error.name().endswith("AUTHORIZATION_FAILED"):
            return meta.error.name()
        values, error, _ = read(self.settings, topic, f"probe-{uuid.uuid4().hex[:6]}", subscribe=False)
        return error or ("allowed" if values else "no answer")

    def join(self, topic: str, group: str) -> str:
        """Consume ``topic`` in ``group``: "allowed" (a record came), or the refusal (the group's, or the topic's)."""
        values, error, _ = read(self.settings, topic, group, subscribe=True)
        return error or ("allowed" if values else "no answer")

    def init_transactions(self, transactional_id: str) -> str:
        return init_transactions(self.settings, transactional_id)


def init_transactions(settings: dict[str, Any], transactional_id: str) -> str:
    """Register ``transactional_id``: "allowed" or the error's name."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**settings, "transactional.id": transactional_id}).init_transactions(PROBE_TIMEOUT)
    except KafkaException as exc:
        return _error_name(exc)
    return "allowed"


def transact(settings: dict[str, Any], names: Names) -> str:
    """The producer's job: one committed transaction of COMMITTED, one aborted of ABORTED. "committed" or why not."""
    from confluent_kafka import KafkaException, Producer

    failures: list[str] = []

    def on_delivery(err, msg):
        if err is not None and msg.value().decode() in COMMITTED:  # aborting purges the others: no failure
            failures.append(err.name())

    producer = Producer({**settings, "transactional.id": names.transactional_id, "message.timeout.ms": 10000})
    try:
        producer.init_transactions(15)
        for values, commit in ((COMMITTED, True), (ABORTED, False)):
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce(names.topic, key=str(i), value=value.encode(), on_delivery=on_delivery)
            if commit:
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)
    except KafkaException as exc:
        return _error_name(exc) + (f" (deliveries: {sorted(set(failures))})" if failures else "")
    return "committed" if not failures else f"delivery failed: {sorted(set(failures))}"


def read(settings: dict[str, Any], topic: str, group: str, subscribe: bool,
         want: int = 1, timeout: float = PROBE_TIMEOUT, commit: bool = False) -> tuple[list[str], str, str]:
    """Read ``topic``: in ``group`` (subscribe), or by assigning its partitions (fetching needs no group: the
    client's own look-up of ``group`` may fail, which says nothing about the topic, and is ignored).

    Returns (values read, the first error's name or "", the commit's result when ``commit``).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    values: list[str] = []
    error, committed = "", ""
    try:
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(values) < want:
            msg = consumer.poll(0.25)
            if msg is None:
                continue
            if msg.error():
                if not subscribe and msg.error().name() == "GROUP_AUTHORIZATION_FAILED":
                    continue
                error = msg.error().name()
                break
            values.append(msg.value().decode(errors="replace"))
        if commit and not error:
            end = time.monotonic() + 1.0  # anything more (an aborted record) would show up now
            while time.monotonic() < end:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    values.append(msg.value().decode(errors="replace"))
            try:
                consumer.commit(asynchronous=False)
                committed = "committed"
            except KafkaException as exc:
                committed = _error_name(exc)
    finally:
        consumer.close()
    return values, error, committed


def alter_topic(topic: str) -> Callable[[Any], Any]:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    return lambda client: client.incremental_alter_configs([resource], request_timeout=PROBE_TIMEOUT)


def alter_broker() -> Callable[[Any], Any]:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry("log.cleaner.backoff.ms", "15000", incremental_operation=AlterConfigOpType.SET)])
    return lambda client: client.incremental_alter_configs([resource], request_timeout=PROBE_TIMEOUT)


def grant_itself(principal: str, topic: str) -> Callable[[Any], Any]:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", AclOperation.ALL,
                         AclPermissionType.ALLOW)
    return lambda client: client.create_acls([binding], request_timeout=PROBE_TIMEOUT)


def create_topic(name: str) -> Callable[[Any], Any]:
    from confluent_kafka.admin import NewTopic

    return lambda client: client.create_topics([NewTopic(name, 1)], request_timeout=PROBE_TIMEOUT)


def delete_topic(name: str) -> Callable[[Any], Any]:
    return lambda client: client.delete_topics([name], request_timeout=PROBE_TIMEOUT)


def delete_group(name: str) -> Callable[[Any], Any]:
    return lambda client: client.delete_consumer_groups([name], request_timeout=PROBE_TIMEOUT)


# ---------------------------------------------------------------------------------------------- one scenario
def applicable_acls(cluster, principals: set[str], resources: dict[str, set[str]]) -> set[tuple]:
    """Every ACL of ``principals`` (and of ``User:*``) that applies to one of ``resources`` (type -> names)."""
    from labkit.security import describe_acls

    found = set()
    for row in describe_acls(cluster).itertuples(index=False):
        if row.principal not in principals | {"User:*"}:
            continue
        targets = resources.get(row.resource, set())
        if row.resource == "CLUSTER" or any(
                row.name == "*" or (row.pattern == "PREFIXED" and target.startswith(row.name))
                or (row.pattern == "LITERAL" and target == row.name) for target in targets):
            found.add((row.principal, row.resource, row.name, row.pattern, row.operation, row.permission))
    return found


def run_scenario(ns, names: Names) -> Outcome:
    """Create the resources, let the learner secure them, then act as each application and as an outsider."""
    cluster = ns.cluster
    suffix = uuid.uuid4().hex[:6]
    unrelated_topic, unrelated_group = names.others(suffix)
    cluster.create_topic(names.topic, partitions=3)
    out = Outcome(names)
    creds = credentials_of(ns, names)
    out.users = {role: c["username"] for role, c in creds.items()}
    seed = cluster.producer()  # the neighbours: other people's topics, with records to steal
    for topic in (names.sibling_topic, unrelated_topic):
        cluster.create_topic(topic, partitions=3)
        seed.produce(topic, value=b"someone else's record")
    assert seed.flush(15) == 0, "the grader could not write its own records"
    producer, consumer = (Actor(creds[role]["username"], as_user(cluster, creds[role]))
                          for role in ("producer", "consumer"))
    settled(cluster, [producer.settings, consumer.settings])

    # what each job needs
    out.produced = transact(producer.settings, names)
    out.consumed, out.consume_error, out.committed_offsets = read(
        consumer.settings, names.topic, names.group, subscribe=True, want=len(COMMITTED), timeout=30, commit=True)

    # what neither job needs
    tries: list[tuple[str, str, Callable[[], str]]] = [
        ("producer", f"write to {names.sibling_topic}", lambda: producer.produce(names.sibling_topic)),
        ("producer", f"write to {unrelated_topic}", lambda: producer.produce(unrelated_topic)),
        ("producer", f"use transactional id {names.sibling_transactional_id}",
         lambda: producer.init_transactions(names.sibling_transactional_id)),
        ("producer", f"read {names.topic}", lambda: producer.read(names.topic)),
        ("producer", f"join group {names.group}", lambda: producer.join(names.topic, names.group)),
        ("consumer", f"write to {names.topic}", lambda: consumer.produce(names.topic)),
        ("consumer", f"use transactional id {names.transactional_id}",
         lambda: consumer.init_transactions(names.transactional_id)),
        ("consumer", f"read {names.sibling_topic}", lambda: consumer.read(names.sibling_topic)),
        ("consumer", f"read {unrelated_topic}", lambda: consumer.read(unrelated_topic)),
        ("consumer", f"join group {names.sibling_group}", lambda: consumer.join(names.topic, names.sibling_group)),
        ("consumer", f"join group {unrelated_group}", lambda: consumer.join(names.topic, unrelated_group)),
    ]
    for role, actor in (("producer", producer), ("consumer", consumer)):
        tries += [
            (role, f"change {names.topic}'s config", lambda a=actor: a.admin_call(alter_topic(names.topic))),
            (role, "change a broker's config", lambda a=actor: a.admin_call(alter_broker())),
            (role, "create a topic", lambda a=actor: a.admin_call(create_topic(f"{names.topic}-new"))),
            (role, "grant itself an ACL", lambda a=actor: a.admin_call(grant_itself(a.principal, unrelated_topic))),
        ]
    tries.append(("consumer", f"delete group {names.group}", lambda: consumer.admin_call(delete_group(names.group))))
    for role, actor in (("consumer", consumer), ("producer", producer)):
        tries.append((role, f"delete {names.topic}", lambda a=actor: a.admin_call(delete_topic(names.topic))))

    # an outsider: a user of the grader's own, with no ACL
    outsider = Actor(f"outsider-{suffix}", {})
    cluster.add_user(outsider.name, uuid.uuid4().hex)
    outsider.settings = as_user(cluster, {"username": outsider.name, "password": cluster.users[outsider.name]})
    tries += [
        ("outsider", f"write to {names.topic}", lambda: outsider.produce(names.topic)),
        ("outsider", f"read {names.topic}", lambda: outsider.read(names.topic)),
        ("outsider", f"join group {names.group}", lambda: outsider.join(names.topic, names.group)),
        ("outsider", f"use transactional id {names.transactional_id}",
         lambda: outsider.init_transactions(names.transactional_id)),
    ]
    for who, what, attempt in tries:
        result = attempt()
        out.probes.append(Probe(who, what, result))
        if what == f"delete {names.topic}" and result == "allowed":
            cluster.create_topic(names.topic, partitions=3)  # so the next user's try means something

    resources = {"TOPIC": {names.topic, names.sibling_topic, unrelated_topic, f"{names.topic}-new"},
                 "GROUP": {names.group, names.sibling_group, unrelated_group},
                 "TRANSACTIONAL_ID": {names.transactional_id, names.sibling_transactional_id}}
    out.acls = applicable_acls(cluster, {producer.principal, consumer.principal}, resources)
    return out


def settled(cluster, users: list[dict[str, Any]]) -> None:
    """Wait until every broker has what the learner's code did: its users' credentials (each broker authenticates
    them — or a wrong password is left for the probes to show) and its ACLs (a marker ACL added after them has
    reached every broker's authorizer). The learner's calls returned when the controller had committed them;
    each broker applies them a moment later, seconds later on a loaded machine."""
    from labkit.errors import WaitTimeout
    from labkit.runtime import agreement

    for settings in users:
        try:
            agreement.agree(cluster, "the learner's user", agreement.user_accepted(cluster, settings), timeout=30,
                            stretch=False)  # a wrong password never agrees: a busy machine must not stretch it
        except WaitTimeout:
            pass  # a password the learner got wrong: the probes below say so
    agreement.acl_barrier(cluster)


_OUTCOMES: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()


def outcome(ns, key: str, names: Callable[[], Names]) -> Outcome:
    """The scenario ``key`` for this grading (run once, shared by the checks that read it)."""
    runs = _OUTCOMES.setdefault(ns, {})
    if key not in runs:
        try:
            runs[key] = run_scenario(ns, names())
        except BaseException as exc:  # noqa: BLE001 - every check reading this scenario reports the same failure
            runs[key] = exc
    found = runs[key]
    if isinstance(found, BaseException):
        raise found
    return found


def visible(ns) -> Outcome:
    topic = unique("payments")
    return outcome(ns, "visible", lambda: Names(topic, f"{topic}-writer", unique("billing")))


# ---------------------------------------------------------------------------------------------- verdicts
def required_acls(out: Outcome) -> set[tuple[str, ...]]:
    p, c = (f"User:{out.users[r]}" for r in ("producer", "consumer"))
    n = out.names
    return {(p, "TOPIC", n.topic, "LITERAL", "WRITE", "ALLOW"),
            (p, "TRANSACTIONAL_ID", n.transactional_id, "LITERAL", "WRITE", "ALLOW"),
            (c, "TOPIC", n.topic, "LITERAL", "READ", "ALLOW"),
            (c, "GROUP", n.group, "LITERAL", "READ", "ALLOW")}


def assert_producer_works(out: Outcome) -> None:
    assert out.produced == "committed", \
        f"as {out.users['producer']}, the transaction on {out.names.topic} failed: {out.produced}"


def assert_consumer_works(out: Outcome) -> None:
    name, n = out.users["consumer"], out.names
    assert not out.consume_error, f"as {name}, reading {n.topic} in group {n.group} failed: {out.consume_error}"
    assert sorted(out.consumed) == sorted(COMMITTED), \
        f"as {name} (read_committed), got {sorted(out.consumed)[:8]}, expected the {len(COMMITTED)} committed records"
    assert out.committed_offsets == "committed", f"as {name}, committing offsets in {n.group} failed: " \
                                                 f"{out.committed_offsets}"


def assert_refused(out: Outcome, who: str) -> None:
    user = out.users.get(who, who)
    assert user not in SUPER_USERS, f"{user} is a super user: the authorizer never checks it, so no ACL limits it"
    allowed = [p for p in out.probes if p.who == who and not p.refused]
    assert not allowed, f"as {user}, these were not refused: " + "; ".join(
        f"{p.what} ({p.result})" for p in allowed)


def assert_minimal(out: Outcome) -> None:
    required, found = required_acls(out), out.acls
    missing, extra = required - found, found - required
    implied = {e for e in extra if e[4] == "DESCRIBE" and e[5] == "ALLOW"}

    def fmt(acls):
        return "; ".join(f"{a[5]} {a[0]} {a[4]} on {a[1]} {a[3]} {a[2]!r}" for a in sorted(acls))

    problems = [f"missing: {fmt(missing)}"] if missing else []
    if implied:
        problems.append(f"not needed: {fmt(implied)} (WRITE and READ imply DESCRIBE)")
    if extra - implied:
        problems.append(f"more than the two jobs need: {fmt(extra - implied)}")
    assert not problems, " | ".join(problems)


@check("producer_writes_transactionally", points=2,
       hint="A transactional producer needs WRITE on its topic and WRITE on its transactional id.")
def producer_writes_transactionally(ns):
    """Logged in as the producer's user, the grader commits a transaction to the topic (and aborts another)."""
    assert_producer_works(visible(ns))


@check("consumer_reads_committed", points=2,
       hint="A consumer in a group needs READ on the topic and READ on the group.")
def consumer_reads_committed(ns):
    """Logged in as the consumer's user, the grader reads the committed records (not the aborted ones) in the group
    and commits its offsets."""
    assert_consumer_works(visible(ns))


@check("producer_can_do_nothing_else", points=2,
       hint="Grant on exactly the names you are given, LITERAL; no wildcards, no prefixes, no ALL.")
def producer_can_do_nothing_else(ns):
    """The producer's user is refused everything else: other topics (one sharing the topic's name as a prefix),
    another transactional id, reading, changing topic or broker configs, creating topics, ACLs, deleting."""
    assert_refused(visible(ns), "producer")


@check("consumer_can_do_nothing_else", points=2,
       hint="Grant on exactly the names you are given, LITERAL; no wildcards, no prefixes, no ALL.")
def consumer_can_do_nothing_else(ns):
    """The consumer's user is refused everything else: writing, other topics and groups, the transactional id,
    changing configs, ACLs, deleting its group or topic."""
    assert_refused(visible(ns), "consumer")


@check("nobody_else_gets_in", points=1, hint="ACLs for User:* reach every user, including ones you never met.")
def nobody_else_gets_in(ns):
    """A third user with no ACL of its own can neither write, read, join the group, nor use the transactional id."""
    assert_refused(visible(ns), "outsider")


@check("only_the_minimum_acls", points=1, hint="Two ACLs per application.")
def only_the_minimum_acls(ns):
    """The ACLs that apply to these topics, groups and transactional ids are exactly the four the jobs need."""
    assert_minimal(visible(ns))
