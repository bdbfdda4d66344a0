"""The secured profile's mechanisms on a real cluster (lesson 08's outcomes), its helpers, and its clean-up.

One secured three-node cluster serves the module (names carry a unique suffix); the lifecycle
tests start their own. Each failure mode is asserted by what the client really gets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramMechanism, UserScramCredentialDeletion)

from labkit import security
from labkit.runtime.librdkafka import quiet
from labkit.errors import ClusterStateError, SecurityError, UnsupportedOperation
from labkit.listeners import Trip, listener_table, read_properties, round_trips_figure
from labkit.waiting import Deadline, Wait

integration = pytest.mark.integration


# ---------------------------------------------------------------------------------------------- no broker
def _binding(principal="User:alice", name="orders", operation=AclOperation.WRITE, restype=ResourceType.TOPIC,
             pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def test_acl_table_is_sorted_and_names_the_cluster_resource_as_kafka_does():
    table = security.acl_table([
        _binding(name="payments"), _binding(permission=AclPermissionType.DENY),
        _binding(restype=ResourceType.BROKER, name="kafka-cluster", operation=AclOperation.ALTER)])
    assert list(table.columns) == security.ACL_COLUMNS
    assert table.resource.tolist() == ["CLUSTER", "TOPIC", "TOPIC"]
    assert table.permission.tolist() == ["ALLOW", "ALLOW", "DENY"]
    assert security.acl_table([]).empty


def test_with_credentials_swaps_the_login_and_refuses_settings_without_one():
    admin = {"bootstrap.servers": "x:1", "security.protocol": "SASL_SSL", "sasl.username": "admin",
             "sasl.password": "secret", "ssl.ca.location": "/ca.pem"}
    bob = security.with_credentials(admin, "bob", "pw")
    assert (bob["sasl.username"], bob["sasl.password"], bob["ssl.ca.location"]) == ("bob", "pw", "/ca.pem")
    assert admin["sasl.username"] == "admin"
    with pytest.raises(SecurityError):
        security.with_credentials({"security.protocol": "SSL"}, "bob", "pw")


def test_listener_properties_are_read_as_the_broker_reads_them(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nlisteners=A://127.0.0.1:1,B://127.0.0.1:2\n\nadvertised.listeners=A://h:9\nx = 1\nx=2\n")
    props = read_properties(path)
    assert props["listeners"] == "A://127.0.0.1:1,B://127.0.0.1:2" and props["x"] == "2"


def test_round_trips_figure_draws_one_panel_per_trip_and_a_cross_for_a_failure():
    broken = Trip("broken", "127.0.0.1:1", 1, "kafka-1.lab.invalid:9093", answered=False, outcome="_MSG_TIMED_OUT")
    fixed = Trip("fixed", "127.0.0.1:1", 1, "127.0.0.1:1", answered=True, outcome="delivered")
    fig = round_trips_figure([broken, fixed])
    texts = [a.text for a in fig.layout.annotations]
    assert "broken" in texts and "fixed" in texts
    assert texts.count("✗") == 1 and "_MSG_TIMED_OUT" in texts
    assert any("kafka-1.lab.invalid:9093" in t for t in texts)


def test_advertise_needs_a_cluster_labkit_owns():
    from labkit.backends.external import ExternalCluster

    with pytest.raises(UnsupportedOperation):
        ExternalCluster("127.0.0.1:1").advertise(1, "PLAINTEXT", "elsewhere:9092")


# ---------------------------------------------------------------------------------------------- a secured cluster
@pytest.fixture(scope="module")
def secured():
    import labkit

    c = labkit.start_cluster("secured", progress=False)
    yield c
    c.stop()


def produce(settings, topic, partition=None, timeout_ms=5000):
    """One record: "delivered" or the delivery error's name."""
    result = {}
    producer = Producer({**quiet(), **settings, "message.timeout.ms": timeout_ms})
    kwargs = {} if partition is None else {"partition": partition}
    producer.produce(topic, value=b"x", on_delivery=lambda err, msg: result.update(r=err.name() if err else "delivered"),
                     **kwargs)
    producer.flush(timeout_ms / 1000 + 5)
    return result.get("r", "no report")


def first_record(settings, topic, group, timeout=20.0):
    """What a consumer in ``group`` gets first: "record" or the error's name."""
    consumer = Consumer({**quiet(), **settings, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = Deadline(timeout)
        while not deadline.expired():
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error().name() if msg.error() else "record"
        return "nothing"
    finally:
        consumer.close()


def grant(cluster, *bindings):
    # labkit's call, which returns once every live broker's authorizer has the ACLs: the admin client's own returns
    # when the controller took them, and a broker a moment behind refused the group (fresh clone 17)
    cluster.create_acls(list(bindings))


@integration
def test_each_connection_failure_is_refused_and_explained(secured):
    secured.add_user("alice", "alice-secret")
    alice = secured.client_config(user="alice")
    plaintext = security.try_connect({"bootstrap.servers": secured.bootstrap_servers})
    untrusted = security.try_connect({k: v for k, v in alice.items() if k != "ssl.ca.location"})
    wrong = security.try_connect({**alice, "sasl.password": "guess"})
    unknown = security.try_connect({**alice, "sasl.username": "mallory"})
    no_cert = security.try_connect({k: v for k, v in secured.client_config(user="bob", mtls=True).items()
                                    if not k.startswith(("ssl.certificate", "ssl.key"))})
    right = security.try_connect(alice)
    assert not plaintext.ok and plaintext.error == "_ALL_BROKERS_DOWN" and "plaintext client" in plaintext.explanation
    assert not untrusted.ok and untrusted.error in ("_SSL", "_TRANSPORT") and "certificate" in untrusted.explanation
    assert not wrong.ok and wrong.error == "_AUTHENTICATION" and "password" in wrong.explanation
    assert (unknown.error, unknown.explanation) == (wrong.error, wrong.explanation)
    assert not no_cert.ok and "client certificate" in no_cert.explanation
    assert right.ok


@integration
def test_no_acl_hides_topics_and_refuses_produce(secured, unique):
    secured.add_user("nobody", "pw")
    topic = secured.create_topic(unique("hidden"), partitions=1)
    nobody = secured.client_config(user="nobody")
    assert topic not in AdminClient({**quiet(), **nobody}).list_topics(timeout=10).topics
    assert produce(nobody, topic) == "TOPIC_AUTHORIZATION_FAILED"


@integration
def test_kafka_acls_and_create_acls_grant_and_a_consumer_needs_its_group(secured, unique):
    secured.add_user("alice", "alice-secret")
    alice = secured.client_config(user="alice")
    topic, group = secured.create_topic(unique("orders"), partitions=1), unique("reports")
    out = secured.tool("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)
    assert "operation=WRITE" in out.stdout
    # the tool returns once the controller has the ACL: the leader's authorizer may not have it yet (fresh clone
    # 72 produced into TOPIC_AUTHORIZATION_FAILED here). Lesson 08 waits the same way.
    security.wait_for_acls(secured, [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                                                "*", AclOperation.WRITE, AclPermissionType.ALLOW)])
    assert produce(alice, topic) == "delivered"
    grant(secured, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW))
    assert first_record(alice, topic, group) == "GROUP_AUTHORIZATION_FAILED"
    grant(secured, AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW))
    assert first_record(alice, topic, group) == "record"


@integration
def test_prefixed_acls_deny_wins_and_super_users_ignore_deny(secured, unique):
    secured.add_user("team", "pw")
    team = secured.client_config(user="team")
    prefix = unique("sales") + "-"
    eu, us = (secured.create_topic(prefix + region, partitions=1) for region in ("eu", "us"))
    other = secured.create_topic(unique("audit"), partitions=1)
    grant(secured, AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:team", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW))
    assert [produce(team, t) for t in (eu, us, other)] == ["delivered", "delivered", "TOPIC_AUTHORIZATION_FAILED"]
    grant(secured,
          AclBinding(ResourceType.TOPIC, us, ResourcePatternType.LITERAL, "User:team", "*", AclOperation.WRITE,
                     AclPermissionType.DENY),
          AclBinding(ResourceType.TOPIC, us, ResourcePatternType.LITERAL, "User:admin", "*",
                     AclOperation.WRITE, AclPermissionType.DENY))
    assert [produce(team, t) for t in (eu, us)] == ["delivered", "TOPIC_AUTHORIZATION_FAILED"]
    assert produce(secured.client_config(), us) == "delivered"
    table = security.describe_acls(secured, principal="User:team")
    assert set(zip(table.permission, table.pattern, table.name)) == {("ALLOW", "PREFIXED", prefix),
                                                                    ("DENY", "LITERAL", us)}


@integration
def test_mutual_tls_principal_is_the_certificate_cn(secured, unique):
    topic = secured.create_topic(unique("audit"), partitions=1)
    carol = secured.client_config(user="carol", mtls=True)
    assert produce(carol, topic) == "TOPIC_AUTHORIZATION_FAILED"
    Wait("the authorizer to log User:carol", timeout=10).until(lambda: any(
        secured.broker_log(b, file="authorizer", grep=f"User:carol is Denied .*{topic}") for b in secured.broker_ids))
    grant(secured, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW))
    assert produce(carol, topic) == "delivered"
    secured.add_user("carol", "pw")  # the same principal over SCRAM
    assert produce(secured.client_config(user="carol"), topic) == "delivered"


@integration
def test_add_user_rotates_a_password_without_closing_connections(secured, unique):
    topic = secured.create_topic(unique("rotate"), partitions=1)
    secured.add_user("dave", "one")
    grant(secured, AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:dave", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW))
    old = secured.client_config(user="dave")
    # 30 s for a delivery: the first one opens the connection, a TLS and SCRAM handshake that a loaded machine
    # stretches past seconds (5 s was not enough at load 20)
    connected = Producer({**quiet(), **old, "message.timeout.ms": 30_000})
    errors = []
    connected.produce(topic, value=b"1", partition=0, on_delivery=lambda err, msg: errors.append(err))
    connected.flush(35)
    assert errors == [None], f"the first record, with the first password, was not delivered: {errors}"
    secured.add_user("dave", "two")
    assert secured.users["dave"] == "two"
    # the change reaches every broker through the metadata log (milliseconds; a loaded machine: longer)
    Wait("the old password to be refused", timeout=20).until(lambda: security.try_connect(old).error == "_AUTHENTICATION")
    assert security.try_connect(secured.client_config(user="dave")).ok
    connected.produce(topic, value=b"2", partition=0, on_delivery=lambda err, msg: errors.append(err))
    connected.flush(35)
    assert errors == [None, None], f"an open connection outlives a password change: {errors}"
    for future in secured.admin().alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result()
    Wait("the deleted user to be refused", timeout=20).until(
        lambda: security.try_connect(secured.client_config(user="dave")).error == "_AUTHENTICATION")


@integration
def test_scram_credentials_are_salted_keys_in_the_metadata_log(secured):
    secured.add_user("erin", "erin-secret")
    stored = Wait("erin's credential in the metadata log", timeout=15).until(
        lambda: (lambda t: [t] if "erin" in set(t.name) else None)(security.scram_credentials(secured)))[0]
    assert {"admin", "erin"} <= set(stored.name)
    row = stored[stored.name == "erin"].iloc[-1]
    assert (row.change, row.mechanism, int(row.iterations)) == ("set", "SCRAM-SHA-512", 8192)
    salted = hashlib.pbkdf2_hmac("sha512", b"erin-secret", base64.b64decode(row.salt), 8192)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert base64.b64encode(hashlib.sha512(client_key).digest()).decode() == row.stored_key
    assert not stored.astype(str).apply(lambda col: col.str.contains("erin-secret")).any().any()


@integration
def test_tools_get_the_admins_command_config(secured):
    from labkit.errors import ToolError
    from labkit.runtime.tools import run_tool

    assert secured.tool_config() is not None and secured.tool_config().stat().st_mode & 0o077 == 0
    assert secured.tool("kafka-topics", "--list").returncode == 0
    with pytest.raises(ToolError):  # the same tool without the properties: a plaintext client on a TLS port
        run_tool("kafka-topics", "--list", bootstrap_servers=secured.bootstrap_servers, timeout=60)


@integration
def test_advertising_an_unreachable_address_breaks_produce_to_that_broker_until_fixed(secured, unique):
    with pytest.raises(ClusterStateError):
        secured.advertise(1, "CONTROLLER", "x:1")
    with pytest.raises(ClusterStateError):
        secured.advertise(1, "MTLS", "no-port")
    secured.advertise(1, "MTLS", "kafka-1.lab.invalid:9093")
    try:
        row = listener_table(secured, brokers=[1]).set_index("listener").loc["MTLS"]
        assert row.advertises == "kafka-1.lab.invalid:9093" and row.binds != row.advertises
        refused = secured.tool("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
                               "--add-config", "advertised.listeners=[MTLS://127.0.0.1:9093]", check=False)
        assert refused.returncode != 0 and "Cannot update these configs dynamically" in refused.stdout + refused.stderr
        topic = secured.create_topic(unique("tracking"), partitions=3)
        leaders = {p.partition: p.leader for p in secured.describe_topic(topic).partitions}
        errors = []
        client = {**secured.client_config(user="admin", mtls=True), "error_cb": errors.append,
                  "bootstrap.servers": f"127.0.0.1:{secured.brokers[0].listeners['MTLS']}"}
        metadata = AdminClient({**quiet(), **client}).list_topics(timeout=10)
        assert topic in metadata.topics, "the bootstrap round-trip still works"
        assert (metadata.brokers[1].host, metadata.brokers[1].port) == ("kafka-1.lab.invalid", 9093)
        results = {p: produce(client, topic, partition=p, timeout_ms=3000) for p in leaders}
        assert {results[p] for p in leaders if leaders[p] == 1} == {"_MSG_TIMED_OUT"}
        assert {results[p] for p in leaders if leaders[p] != 1} == {"delivered"}
        assert any(e.str().startswith("ssl://kafka-1.lab.invalid:9093/1:") for e in errors)
    finally:
        secured.advertise(1, "MTLS", None)
    assert listener_table(secured).pipe(lambda t: (t.binds == t.advertises)[t.listener != "CONTROLLER"].all())
    client = {**secured.client_config(user="admin", mtls=True), "message.timeout.ms": 10000}
    assert [produce(client, topic, partition=p) for p in leaders] == ["delivered"] * 3


# ---------------------------------------------------------------------------------------------- clean-up
@integration
def test_stop_leaves_no_process_and_no_key_file(jvm_pids):
    import labkit

    c = labkit.start_cluster("secured", progress=False)
    data_dir = c.data_dir
    secured_files = sorted(data_dir.rglob("*key*.pem")) + sorted(data_dir.rglob("format.args"))
    secured_files.append(c.tool_config())  # the admin's password, for Kafka's tools
    assert len(secured_files) >= 7 and all(f.stat().st_mode & 0o077 == 0 for f in secured_files)
    assert len(jvm_pids(str(data_dir))) == 3
    c.stop()
    assert jvm_pids(str(data_dir)) == []
    assert not data_dir.exists() and not any(f.exists() for f in secured_files)


@integration
def test_sigkill_of_the_owner_leaves_no_process_and_no_key_file(jvm_pids):
    from test_lifecycle import kill_owner, start_child

    proc, data_dir = start_child("secured")
    assert len(list((data_dir / "tls").glob("*-key.pem"))) == 3
    assert len(jvm_pids(str(data_dir))) == 3
    kill_owner(proc, data_dir, "the secured cluster (keys included)")



@integration
def test_a_notebook_attaches_to_a_secured_cluster_with_its_client_config(secured, monkeypatch, unique):
    """What the grader does for an exercise sharing its secured cluster: LABKIT_BOOTSTRAP + LABKIT_CLIENT_CONFIG."""
    import json

    import labkit

    monkeypatch.setenv("LABKIT_BOOTSTRAP", secured.bootstrap_servers)
    monkeypatch.setenv("LABKIT_CLIENT_CONFIG", json.dumps(secured.security_settings()))
    attached = labkit.start_cluster("secured")
    assert attached.backend == "external"
    topic = attached.create_topic(unique("shared"), partitions=1)
    assert topic in secured.topics()
    assert list(security.describe_acls(attached).columns) == security.ACL_COLUMNS  # as the admin
    attached.stop()


@pytest.mark.integration
def test_acls_granted_and_removed_on_every_broker(secured, unique):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)

    from labkit import admin
    from labkit.runtime import agreement

    topic = unique("acl")
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:zoe", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    secured.create_acls([binding])
    for broker in secured.brokers:
        client = agreement.pinned_admin(secured, broker)
        assert client.describe_acls(admin.exact_filter(binding), request_timeout=5).result()
    removed = secured.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None,
                                                    None, AclOperation.ANY, AclPermissionType.ANY)])
    assert len(removed) == 1
    for broker in secured.brokers:
        client = agreement.pinned_admin(secured, broker)
        assert not client.describe_acls(admin.exact_filter(binding), request_timeout=5).result()


@pytest.mark.integration
def test_a_new_scram_user_is_accepted_by_every_broker_when_add_user_returns(secured, unique):
    from labkit.runtime import agreement

    name = unique("user")
    secured.add_user(name, "pw-" + name)
    verdicts = [agreement.user_accepted(secured, secured.client_config(user=name))(b) for b in secured.brokers]
    assert all(ok for ok, _ in verdicts), verdicts
    wrong = {**secured.client_config(user=name), "sasl.password": "not-it"}
    assert all(not ok for ok, _ in (agreement.user_accepted(secured, wrong)(b) for b in secured.brokers))
