"""Source of notebooks/08_security.ipynb: build it with `python scripts/build_notebooks.py 08`."""

from labkit.authoring import Notebook

nb = Notebook("08 · Security: TLS, SCRAM, ACLs and listeners",
              summary="A cluster with TLS, SCRAM passwords, client certificates and ACLs: each mechanism refusing and "
                      "admitting clients, advertised listeners that break produce, credentials stored and rotated.",
              minutes=40)

nb.md("""
# 08 · Security: TLS, SCRAM, ACLs and listeners

Every production cluster **encrypts** (TLS), **authenticates** (who is this client?) and
**authorizes** (may this client do that?). This lesson starts a cluster with all three switched
on and makes each mechanism refuse and admit real clients. Then it breaks the setting behind the
most-asked question of all — *"bootstrap works, but every produce times out"* — and fixes it.

*About 40 minutes. Every cell is safe to re-run.*
""")
nb.md("""
## Setup
""")
nb.code("""
import base64
import hashlib
import hmac
import secrets
import socket
import ssl
import struct
import time
import uuid
from pathlib import Path

import pandas as pd
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramMechanism, UserScramCredentialDeletion)
from cryptography import x509

import labkit
from labkit import predict
from labkit.listeners import Trip, listener_table, round_trips_figure
from labkit.runtime.librdkafka import quiet
from labkit.security import acl_table, scram_credentials, try_connect, wait_for_acls
from labkit.waiting import Wait

labkit.setup_check()
""")
nb.code("""
cluster = labkit.start_cluster("secured")    # three nodes, a certificate authority of its own, ACLs switched on
run = uuid.uuid4().hex[:6]
cluster
""")
nb.md("""
`start_cluster("secured")` made a fresh **certificate authority** for this cluster (in its data
directory, gone when the cluster stops), a certificate signed by it for every broker, and an
`admin` user with a random password. `cluster.client_config()` is the admin's client settings;
`cluster.client_config(user="alice")` is alice's.

## Listeners: a name, a protocol, a port

A broker accepts connections on one or more **listeners**. Each has a name, a **security
protocol** — `PLAINTEXT`, `SSL` (TLS), `SASL_PLAINTEXT` (a login, no encryption) or `SASL_SSL`
(a login over TLS) — and a port. This cluster's nodes have four:
""")
nb.code("""
listener_table(cluster, brokers=[1])
""")
nb.code("""
table = listener_table(cluster)
print("listener -> protocol:", dict(zip(table.listener, table.protocol)))
print("every broker advertises where it binds:", (table.binds == table.advertises)[table.listener != "CONTROLLER"].all())
""", check=True)
nb.md("""
* **SCRAM** (`SASL_SSL`): applications log in with a user name and password, over TLS.
* **MTLS** (`SSL` with client certificates): applications prove who they are with a certificate.
* **BROKER** (`SSL`): replication between brokers, each with its own certificate.
* **CONTROLLER** (`SSL`): the KRaft quorum. Not SCRAM: the passwords live *in* the metadata log the
  controllers replicate, which nobody can read before a controller leader exists. Not
  `PLAINTEXT` either: anyone on the machine could then change the cluster's configuration.

`binds` is `listeners` in `server.properties`; `advertises` is `advertised.listeners`, what the
broker tells clients. They are equal here — keep that column in mind for later.

## TLS and SCRAM: five clients knock

`try_connect(settings)` tries to list topics with some client settings and, when that fails,
returns the first error librdkafka reports, with what it means. (librdkafka itself never gives
up on these errors: it reconnects forever, and your call fails only at its own timeout.)
""")
nb.code("""
cluster.add_user("alice", "alice-secret")          # a SCRAM user, created while the cluster runs
alice = cluster.client_config(user="alice")
attempts = {
    "PLAINTEXT client on the TLS port": {"bootstrap.servers": cluster.bootstrap_servers},
    "TLS, but not trusting the cluster's CA": {k: v for k, v in alice.items() if k != "ssl.ca.location"},
    "alice, wrong password": {**alice, "sasl.password": "guess"},
    "mallory (no such user)": {**alice, "sasl.username": "mallory", "sasl.password": "guess"},
    "alice, right password": alice,
}
outcomes = {who: try_connect(settings) for who, settings in attempts.items()}
pd.DataFrame([{"client": who, "connected": a.ok, "librdkafka says": a.error, "what it means": a.explanation}
              for who, a in outcomes.items()])
""")
nb.code("""
print("plaintext client refused:", not outcomes["PLAINTEXT client on the TLS port"].ok)
print("untrusted CA: the TLS handshake fails:", "certificate" in outcomes["TLS, but not trusting the cluster's CA"].explanation)
print("wrong password:", outcomes["alice, wrong password"].error)
print("unknown user, same error code from librdkafka:",
      outcomes["mallory (no such user)"].error == outcomes["alice, wrong password"].error)
print("right password: connected:", outcomes["alice, right password"].ok)
""", check=True)
nb.md("""
* A **plaintext** client gets nothing back: the broker waits for a TLS handshake and hangs up.
  The only clue is in librdkafka's log (`connection closed by peer … in state APIVERSION_QUERY`);
  Kafka's Java tools even report `OutOfMemoryError` — they read the TLS bytes as a message size.
* **TLS** means the broker shows a certificate, and the client accepts it only if a CA it trusts
  signed it (`ssl.ca.location`) *and* the address it dialled is in the certificate (here:
  `127.0.0.1` and `localhost`).
* **SASL/PLAIN** would send the password itself (inside TLS). **SCRAM** (`SCRAM-SHA-256/512`) never
  sends it: client and broker prove to each other that they know it, with a challenge and a salted,
  iterated hash.
* librdkafka reports a wrong password and an unknown user with the same error code,
  `_AUTHENTICATION`. Does the broker treat the two alike?

### Which users exist? Ask the SCRAM exchange

A SCRAM login is a conversation (RFC 5802): the client sends its user name and a random nonce; the
server answers with *that user's* salt and iteration count and its own nonce; only then does the
client prove the password. Below, Kafka's protocol by hand — a `SaslHandshake` request, then the
client's first SCRAM message in a `SaslAuthenticate` request, over TLS to the `SCRAM` listener —
for a user that exists and one that does not:
""")
nb.code("""
def scram_first_answer(settings, port, user):
    \"\"\"The broker's answer to the first SCRAM message for `user`: (error code, error message, server-first-message).\"\"\"
    tls = ssl.create_default_context(cafile=settings["ssl.ca.location"])
    with tls.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1") as sock:
        def read(n):
            data = b""
            while len(data) < n:
                data += sock.recv(n - len(data))
            return data

        def request(api_key, version, correlation_id, body):   # a size, a request header v1, the body
            header = struct.pack(">hhih", api_key, version, correlation_id, 8) + b"lesson08"
            sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            return read(struct.unpack(">i", read(4))[0])[4:]      # the response, after its correlation id

        mechanism = settings["sasl.mechanism"].encode()
        request(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism)               # SaslHandshake v1
        first = f"n,,n={user},r={secrets.token_hex(12)}".encode()                       # client-first-message
        answer = request(36, 1, 2, struct.pack(">i", len(first)) + first)              # SaslAuthenticate v1
        code, length = struct.unpack_from(">hh", answer)
        message = answer[4:4 + max(length, 0)].decode()
        (size,) = struct.unpack_from(">i", answer, 4 + max(length, 0))
        return code, message, answer[8 + max(length, 0):8 + max(length, 0) + size].decode()


scram_port = cluster.brokers[0].listeners["SCRAM"]
first_answers = {user: scram_first_answer(alice, scram_port, user) for user in ("alice", "mallory")}
pd.DataFrame([{"user": u, "error code": c, "error message": m[:70], "server's first message": f[:90]}
              for u, (c, m, f) in first_answers.items()])
""")
nb.code("""
alice_code, _, alice_first = first_answers["alice"]
mallory_code, _, _ = first_answers["mallory"]
print("alice (exists): no error, and the server sent her salt and iteration count:",
      alice_code == 0 and ",s=" in alice_first and ",i=" in alice_first)
print("mallory (no such user): refused at the first message, SASL_AUTHENTICATION_FAILED:", mallory_code == 58)
""", check=True)
nb.md("""
A wrong password fails one step later, at the client's proof; an unknown user fails at once. So a
client that speaks SCRAM itself can tell which user names exist — only librdkafka's error code
blurs it. Treat user names as known to an attacker: strong passwords, alerts on failed logins,
and the listener reachable only from where clients run.
""")
nb.md("""
## Authorization: no ACL, no access

The brokers run KRaft's `StandardAuthorizer` with `allow.everyone.if.no.acl.found=false`: an
operation is allowed only if an **ACL** allows it. The **super users** (`admin` and the brokers
themselves) skip the check. alice is authenticated, but has no ACL yet.
""")
nb.code("""
orders = cluster.create_topic(f"orders-{run}", partitions=3)      # as the admin
q_list = predict.ask("08.no-acl-topics", "alice has no ACL at all. What does list_topics() show her: an "
                     "authorization error, an empty list, or every topic?",
                     choices=["an error", "an empty list", "every topic"])
q_list
""")
nb.code("""
alice_admin = AdminClient({**alice, **quiet()})     # quiet(): librdkafka's log lines to the lab's log
visible = [t for t in alice_admin.list_topics(timeout=10).topics if not t.startswith("__")]
print("topics alice sees:", visible)
""", check=True)
nb.code("""
q_list.reveal("an empty list" if not visible else "every topic",
              "Topics you may not DESCRIBE are left out of the metadata: no error, just nothing.",
              expected="an empty list")
""")
nb.md("""
Producing is refused with an authorization error, quickly (not after a timeout). A small helper
produces one record the way the confluent examples do — a delivery callback checking `err` first —
and returns the result:
""")
nb.code("""
def produce_one(settings, topic, value="hello"):
    \"\"\"Produce one record; 'delivered' or the error the delivery report carries.\"\"\"
    result = {}

    def on_delivery(err, msg):
        result["outcome"] = err.name() if err is not None else "delivered"

    producer = Producer({**quiet(), **settings, "message.timeout.ms": 5000})
    try:
        producer.produce(topic, value=value, on_delivery=on_delivery)
        producer.flush(10)
    finally:
        producer.close()
    return result.get("outcome", "no delivery report")


print("alice ->", orders, ":", produce_one(alice, orders))
""", check=True)
nb.md("""
### Granting with `kafka-acls`

Kafka's own tool, run through `cluster.tool(...)`, which hands it the admin's client properties
(`--command-config`: the SCRAM login and the CA) automatically:
""")
nb.code("""
print(cluster.tool("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", orders))
# The tool returns once the controller has the ACL; each broker's authorizer applies it a moment later: wait for all
wait_for_acls(cluster, [AclBinding(ResourceType.TOPIC, orders, ResourcePatternType.LITERAL, "User:alice", "*",
                                   AclOperation.WRITE, AclPermissionType.ALLOW)])
""")
nb.code("""
print("alice ->", orders, ":", produce_one(alice, orders))
""", check=True)
nb.md("""
### Granting with `AdminClient.create_acls`, and the consumer's second ACL

The same thing from Python: an `AclBinding` is *(resource type, name, pattern type, principal,
host, operation, permission)*. alice also wants to **read** the topic, with a consumer in group
`reports`:
""")
nb.code("""
admin = cluster.admin()                     # an AdminClient logged in as the admin


def grant(*bindings):
    for future in admin.create_acls(list(bindings), request_timeout=15).values():
        future.result()                     # raises if the broker refused one
    wait_for_acls(cluster, bindings)        # until every broker's authorizer has them (labkit.security)


grant(AclBinding(ResourceType.TOPIC, orders, ResourcePatternType.LITERAL, "User:alice", "*",
                 AclOperation.READ, AclPermissionType.ALLOW))
group = f"reports-{run}"
q_group = predict.ask("08.consumer-group", "alice may READ the topic now. Does her consumer get the record?",
                      kind="yes/no")
q_group
""")
nb.code("""
def consume_first(settings, topic, group, timeout=20):
    \"\"\"The first record a consumer in `group` gets, or the error it gets instead.\"\"\"
    consumer = Consumer({**quiet(), **settings, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return msg.error().name()   # authorization errors are not fatal: librdkafka would retry forever
            return f"read {msg.value().decode()!r}"
        return "nothing"
    finally:
        consumer.close()


first_try = consume_first(alice, orders, group)
print("alice's consumer:", first_try)
""", check=True)
nb.code("""
q_group.reveal(first_try.startswith("read"),
               "A consumer in a group also needs READ on the group: its offsets and membership are the group's.")
""")
nb.code("""
grant(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                 AclOperation.READ, AclPermissionType.ALLOW))
print("alice's consumer:", consume_first(alice, orders, group))
""", check=True)
nb.md("""
### Prefixed patterns, and DENY

A `LITERAL` ACL names one resource; a `PREFIXED` one every resource whose name starts with it —
the usual way to give a team its own namespace of topics (`orders-…`). `*` with `LITERAL` means
every resource.
""")
nb.code("""
eu, us, audit = (cluster.create_topic(f"{name}-{run}", partitions=1) for name in ("orders-eu", "orders-us", "audit"))
grant(AclBinding(ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED, "User:alice", "*",
                 AclOperation.WRITE, AclPermissionType.ALLOW))
for topic in (eu, us, audit):
    print("alice ->", topic, ":", produce_one(alice, topic))
""", check=True)
nb.code("""
q_deny = predict.ask("08.deny-wins", f"Add DENY WRITE on {us} (literal) for alice, beside the ALLOW on the prefix "
                     "'orders-'. Can she still write to it?", kind="yes/no")
q_deny
""")
nb.code("""
deny_us = AclBinding(ResourceType.TOPIC, us, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.DENY)
grant(deny_us)
after_deny = {topic: produce_one(alice, topic) for topic in (eu, us)}
for topic, outcome in after_deny.items():
    print("alice ->", topic, ":", outcome)
""", check=True)
nb.code("""
q_deny.reveal(after_deny[us] == "delivered", "A matching DENY always wins over any ALLOW, however specific.")
""")
nb.code("""
grant(AclBinding(ResourceType.TOPIC, us, ResourcePatternType.LITERAL, "User:admin", "*",
                 AclOperation.WRITE, AclPermissionType.DENY))
print("admin (a super user) -> DENY on", us, ":", produce_one(cluster.client_config(), us))
""", check=True)
nb.md("""
Super users are not checked at all — not even against a DENY. Keep that list short.

### Reading the ACLs back

`describe_acls` takes a filter (`ANY` matches everything); `acl_table` makes its answer a table:
""")
nb.code("""
alice_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                AclOperation.ANY, AclPermissionType.ANY)
alice_acls = acl_table(admin.describe_acls(alice_filter, request_timeout=15).result())
alice_acls
""")
nb.code("""
print(alice_acls.groupby(["permission", "operation", "resource", "pattern"]).size().to_dict())
""", check=True)

nb.md("""
## Mutual TLS: the certificate is the identity

On the `MTLS` listener the broker asks the *client* for a certificate too, signed by the cluster's
CA. No password: the principal is the certificate's **distinguished name**, turned into a user
name by `ssl.principal.mapping.rules` (here `CN=bob,O=Kafka Lab` becomes `User:bob`).
`cluster.client_config(user="bob", mtls=True)` has the lab's CA issue bob a certificate:
""")
nb.code("""
bob = cluster.client_config(user="bob", mtls=True)
cert = x509.load_pem_x509_certificate(Path(bob["ssl.certificate.location"]).read_bytes())
rule = next(line for line in (cluster.broker_dir(1) / "server.properties").read_text().splitlines()
            if line.startswith("ssl.principal.mapping.rules"))
print("bob's certificate, subject:", cert.subject.rfc4514_string())
print("the broker's mapping:", rule)
""", check=True)
nb.code("""
print("bob ->", audit, ":", produce_one(bob, audit))
denied = [line for b in cluster.broker_ids for line in
          cluster.broker_log(b, file="authorizer", lines=3, grep="User:bob is Denied").splitlines()]
print(denied[-1][:220] if denied else "(no authorizer line yet)")
""")
nb.md("""
The broker's authorizer log says who it saw: `User:bob`, from the certificate. Give that principal an
ACL like any other — and notice alice: over mTLS with her certificate she is the same `User:alice`
as with her password, so her ACLs apply on both listeners.
""")
nb.code("""
grant(AclBinding(ResourceType.TOPIC, audit, ResourcePatternType.LITERAL, "User:bob", "*",
                 AclOperation.WRITE, AclPermissionType.ALLOW))
print("the authorizer named User:bob:", any("User:bob" in line for line in denied))
print("bob ->", audit, ":", produce_one(bob, audit))
print("alice over mTLS ->", orders, ":", produce_one(cluster.client_config(user="alice", mtls=True), orders))
""", check=True)

nb.md("""
## Listeners and advertised listeners

The most-asked question of every Kafka course: *"my client connects, but every produce times out"*.
A client talks to the cluster in **two round-trips**:

1. it sends a **metadata request** to an address from `bootstrap.servers` — any broker will do;
2. the answer lists every broker **at the address it advertises** (`advertised.listeners`, per
   listener) and which broker leads each partition; every produce and fetch then goes to the
   leader **at that advertised address**.

Make broker 1 advertise `kafka-1.lab.invalid:9093` on its `MTLS` listener — an address no client
can reach: `.invalid` never resolves, like a container's host name outside its network:
""")
nb.code("""
cluster.advertise(1, "MTLS", "kafka-1.lab.invalid:9093")    # rewrites server.properties, restarts broker 1
listener_table(cluster, brokers=[1])
""")
nb.md("""
Kafka reads `advertised.listeners` only at start-up — `kafka-configs` refuses to change it on a
running broker — which is why `advertise()` restarts the broker:
""")
nb.code("""
attempt = cluster.tool("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
                       "--add-config", "advertised.listeners=[MTLS://127.0.0.1:9093]", check=False)
print("refused:", attempt.returncode != 0, "|", "Cannot update these configs dynamically" in attempt.stdout + attempt.stderr)
""", check=True)
nb.code("""
tracking = cluster.create_topic(f"tracking-{run}", partitions=3)     # each broker leads one partition
leaders = {p.partition: p.leader for p in cluster.describe_topic(tracking).partitions}
bootstrap = f"127.0.0.1:{cluster.brokers[0].listeners['MTLS']}"    # broker 1's real MTLS port
client_errors = []
mtls_client = {**cluster.client_config(user="admin", mtls=True),   # the admin's certificate: no ACLs in the way
               "bootstrap.servers": bootstrap, "message.timeout.ms": 4000, "error_cb": client_errors.append}
q_boot = predict.ask("08.bootstrap", f"The client bootstraps from broker 1's real address {bootstrap}. "
                     "Does its metadata request succeed?", kind="yes/no")
q_boot
""")
nb.code("""
metadata = AdminClient({**quiet(), **mtls_client}).list_topics(timeout=10)
print("round-trip 1, metadata from the bootstrap address:", tracking in metadata.topics)
print("brokers as the metadata lists them:", {b.id: f"{b.host}:{b.port}" for b in sorted(metadata.brokers.values(), key=lambda b: b.id)})
""", check=True)
nb.code("""
q_boot.reveal(tracking in metadata.topics, "The bootstrap address is only used for metadata; it is right, so this works.")
""")
nb.md("""
Now round-trip 2: one record to each partition, each sent to that partition's leader at the address
the metadata gave — for the partitions broker 1 leads, `kafka-1.lab.invalid:9093`.
""")
nb.code("""
def produce_per_partition(settings, topic, partitions):
    results = {}

    def on_delivery(err, msg):
        results[msg.partition()] = err.name() if err is not None else "delivered"

    producer = Producer({**quiet(), **settings})
    for p in range(partitions):
        producer.produce(topic, value=f"to partition {p}", partition=p, on_delivery=on_delivery)
    producer.flush(15)
    producer.close()
    return results


t0 = time.monotonic()
broken = produce_per_partition(mtls_client, tracking, 3)
print(f"answered after {time.monotonic() - t0:.1f} s (message.timeout.ms = 4 s; the default is 300 s)")
pd.DataFrame([{"partition": p, "leader": leaders[p], "result": broken[p]} for p in sorted(broken)])
""")
nb.code("""
victim = next(p for p, leader in leaders.items() if leader == 1)
print("partition led by broker 1:", broken[victim])
print("the others:", sorted(set(r for p, r in broken.items() if p != victim)))
first = next(e.str() for e in client_errors if "/1:" in e.str())
print("the client's error names broker 1 at its advertised address:", first.split(": ")[0])
""", check=True)
nb.md("""
Step 1 worked, step 2 failed for broker 1: a broker that advertises an address the client cannot
reach — a container's host name, a private IP — lets bootstrap succeed and every request to it
fail. The error's prefix is the quickest clue: `…/bootstrap` is the connection to a bootstrap address,
`…/1` the connection to node 1 **at its advertised address**. With a single broker (the classic
container setup) *every* produce fails this way; here only the partitions broker 1 leads.
""")
nb.code("""
reason = next(e.name() for e in client_errors if "/1:" in e.str())      # _RESOLVE: the name means nothing here
trips = [Trip("advertised: kafka-1.lab.invalid:9093", bootstrap, 1, "kafka-1.lab.invalid:9093",
              answered=False, outcome=f"{reason}, then {broken[victim]} after 4 s")]
round_trips_figure(trips)
""")
nb.md("""
The fix is configuration: advertise what clients can reach (for containers, one listener per
network: an internal name for the brokers, an external address for clients), then restart.
""")
nb.code("""
cluster.advertise(1, "MTLS", None)      # back to its real address, restart
fixed = produce_per_partition({**mtls_client, "error_cb": lambda err: None}, tracking, 3)
print("after the fix:", dict(sorted(fixed.items())))
""", check=True)
nb.code("""
trips.append(Trip("fixed: advertises where it binds", bootstrap, 1, bootstrap, answered=True,
                  outcome=f"partition {victim}: {fixed[victim]}"))
round_trips_figure(trips)
""")

nb.md("""
## Where the passwords live, and rotating them

SCRAM credentials are cluster metadata: records in `__cluster_metadata`, replicated by the
controllers like topics and ACLs. Kafka's `kafka-dump-log --cluster-metadata-decoder` reads that
log on disk:
""")
nb.code("""
stored = scram_credentials(cluster)
stored[["name", "change", "mechanism", "iterations", "salt", "stored_key"]]
""")
nb.md("""
No password anywhere: a **salt**, an **iteration count**, and two keys derived from the password.
SCRAM's recipe is public — PBKDF2 over the password with the salt, then HMACs — so from alice's
password we can recompute what the broker stored, but not the other way round:
""")
nb.code("""
record = stored[stored.name == "alice"].iloc[-1]
salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", base64.b64decode(record.salt), int(record.iterations))
client_key = hmac.new(salted, b"Client Key", "sha512").digest()
stored_key = base64.b64encode(hashlib.sha512(client_key).digest()).decode()
print("storedKey == SHA-512(HMAC(PBKDF2(password, salt, 8192), 'Client Key')):", stored_key == record.stored_key)
print("iterations:", int(record.iterations), "| mechanism:", record.mechanism)
""", check=True)
nb.md("""
### Rotation without downtime: two users

Passwords change: rotate with **two users**. Create `billing-v2` with the same ACLs as
`billing-v1`, move the application over at its own pace, then delete v1. The application below is
still connected as v1 when v1's password goes.
""")
nb.code("""
cluster.add_user("billing-v1", "first-secret")
grant(AclBinding(ResourceType.TOPIC, orders, ResourcePatternType.LITERAL, "User:billing-v1", "*",
                 AclOperation.WRITE, AclPermissionType.ALLOW))
v1_settings = {**cluster.client_config(user="billing-v1"), "message.timeout.ms": 5000}
v1_producer = Producer({**quiet(), **v1_settings,            # the running application, connected as v1
                        "message.timeout.ms": 60000})        # patient: a busy machine may answer slowly
v1_results = []
v1_producer.produce(orders, value="v1 #1", partition=0, on_delivery=lambda err, msg: v1_results.append(err))
v1_producer.flush(60)

# v2: a new user, and a copy of every ACL of v1
cluster.add_user("billing-v2", "second-secret")
v1_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:billing-v1", None,
                             AclOperation.ANY, AclPermissionType.ANY)
grant(*[AclBinding(b.restype, b.name, b.resource_pattern_type, "User:billing-v2", b.host, b.operation,
                   b.permission_type) for b in admin.describe_acls(v1_filter, request_timeout=15).result()])
print("v2 ->", orders, ":", produce_one(cluster.client_config(user="billing-v2"), orders))
""", check=True)
nb.code("""
for future in admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("billing-v1", ScramMechanism.SCRAM_SHA_512)]).values():
    try:
        future.result()
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.RESOURCE_NOT_FOUND:   # deleted already: the cell ran before
            raise
# Each broker applies the deletion when it reads the metadata log: wait until every one refuses a new v1 login
Wait("every broker to refuse a new billing-v1 login", timeout=60).until(
    lambda: all(try_connect({**v1_settings, "bootstrap.servers": b.address}).error == "_AUTHENTICATION"
                for b in cluster.brokers))
q_conn = predict.ask("08.connected-after-delete", "billing-v1's password is deleted. Does the producer that is "
                     "already connected as billing-v1 still deliver?", kind="yes/no")
q_conn
""")
nb.code("""
v1_producer.produce(orders, value="v1 #2", partition=0,        # over the connection it already has
                    on_delivery=lambda err, msg: v1_results.append(err))
v1_producer.flush(60)
still_delivers = v1_results[-1] is None
print("the connected v1 producer still delivers:", still_delivers)
print("a new v1 connection:", try_connect(v1_settings).error)
print("v2 ->", orders, ":", produce_one(cluster.client_config(user="billing-v2"), orders))
""", check=True)
nb.code("""
q_conn.reveal(still_delivers, "SCRAM is checked when a connection opens; nothing closes the open ones unless the "
              "broker sets connections.max.reauth.ms.")
""")
nb.md("""
That is what makes the rotation painless — and why deleting a user is not "revoke now": remove
their ACLs too (authorization is checked on every request), or set `connections.max.reauth.ms`
so that brokers make clients log in again. Finish the rotation by deleting v1's ACLs:
""")
nb.code("""
v1_producer.close()
removed = cluster.delete_acls([v1_filter])      # returns once no broker's authorizer has them any more
print("removed:", acl_table(removed)[["principal", "operation", "resource", "name"]].to_dict("records"))
print("billing-v1's ACLs gone:", not admin.describe_acls(v1_filter, request_timeout=15).result())
""", check=True)

nb.md("""
## What you saw

| claim | shown by |
|---|---|
| a listener is a name, a protocol and a port; the controller and broker links are listeners too | `listener_table`: SCRAM, MTLS, BROKER, CONTROLLER |
| a plaintext client on a TLS port is refused; a client that does not trust the CA fails the handshake | `try_connect` |
| librdkafka reports a wrong password and an unknown user alike, `_AUTHENTICATION` | `try_connect` |
| the SCRAM exchange tells which users exist: a known one gets its salt and iterations, an unknown one fails at once | `SaslHandshake` + `SaslAuthenticate` by hand |
| no ACL: an empty topic list and `TOPIC_AUTHORIZATION_FAILED` | alice before any grant |
| ACLs by `kafka-acls` and by `AdminClient.create_acls` | alice produces |
| a consumer needs READ on its group too | `GROUP_AUTHORIZATION_FAILED`, then records |
| prefixed ACLs cover a namespace; DENY beats ALLOW; super users ignore both | `orders-…` topics, `orders-us`, the admin |
| mutual TLS: the certificate's DN is the principal, ACLs work the same | bob's certificate and the authorizer's log |
| a wrong advertised address: bootstrap works, produce to that broker times out | `advertise()`, the two round-trips |
| `advertised.listeners` changes only with a restart | `kafka-configs` refused; `advertise(…, None)` fixed it |
| SCRAM credentials are salted, iterated keys in `__cluster_metadata`, never the password | `kafka-dump-log`, recomputed storedKey |
| rotation with two users: open connections survive a deleted password | billing-v1 → billing-v2 |

Next: the graded exercise `least_privilege` — two applications, two users, the minimum ACLs.
""")
nb.code("""
predict.summary("08")
""")
nb.code("""
alice_admin = None           # every client of the lesson closed before the brokers go (no reconnect noise)
cluster.stop()
""")
