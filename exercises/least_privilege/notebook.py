"""The exercise notebook least_privilege: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Least privilege", exercise="least_privilege")

nb.md("""
# Exercise · Least privilege

Two applications are moving onto a secured cluster:

* **the payments writer** produces to a topic **transactionally** (a `transactional.id` of its own);
* **the billing reader** consumes that topic in a consumer **group**, with
  `isolation.level=read_committed`, and commits its offsets.

Give each application **its own SCRAM user** and the **minimum ACLs** for its job — and nothing else.

The grader runs your function on a fresh secured cluster of its own, then logs in as each user.
Everything the job needs must work; everything outside it must be refused by the authorizer:
other topics (including one whose name starts with yours), other groups, other transactional ids,
reading or writing the wrong way round, changing topic or broker configs, creating topics,
granting ACLs, deleting the topic or the group. A third user must get nowhere. Hidden checks use
other topic, group and transactional-id names.

*About 20 minutes. Goes with lesson 08.*
""")
nb.md("""
## Setup
""")
nb.code("""
import secrets

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

import labkit
from labkit.grading import exercise
from labkit.runtime.agreement import acl_barrier
from labkit.security import describe_acls

labkit.setup_check()
cluster = labkit.start_cluster("secured-single-broker")  # TLS, SCRAM-SHA-512, ACLs: nothing allowed without one
ex = exercise("least_privilege")
""")
nb.md("""
## Task — `secure_payments(admin_settings, topic, transactional_id, group)`

* `admin_settings` are the admin's confluent-kafka client settings (a super user:
  `AdminClient(admin_settings)` may create users and ACLs).
* Create two SCRAM users with `AdminClient.alter_user_scram_credentials` — the cluster's SCRAM
  listener speaks **SCRAM-SHA-512** — with passwords you choose, and the ACLs each one needs with
  `AdminClient.create_acls`. Wait for every future's `result()`.
* Return their credentials:
  `{"producer": {"username": ..., "password": ...}, "consumer": {"username": ..., "password": ...}}`.

Lesson 08 showed what a consumer needs beside READ on its topic. Think about what a
*transactional* producer needs beside WRITE on its topic, and which operations imply others.
""")
nb.code('''
def secure_payments(admin_settings: dict, topic: str, transactional_id: str, group: str) -> dict:
    ### BEGIN SOLUTION
    admin = AdminClient(admin_settings)
    users = {"producer": f"{topic}-writer", "consumer": f"{group}-reader"}
    passwords = {role: secrets.token_urlsafe(16) for role in users}
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upserts = [UserScramCredentialUpsertion(users[role], info, passwords[role].encode()) for role in users]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result()

    def allow(resource_type, name, role, operation):
        return AclBinding(resource_type, name, ResourcePatternType.LITERAL, f"User:{users[role]}", "*",
                          operation, AclPermissionType.ALLOW)

    acls = [allow(ResourceType.TOPIC, topic, "producer", AclOperation.WRITE),
            allow(ResourceType.TRANSACTIONAL_ID, transactional_id, "producer", AclOperation.WRITE),
            allow(ResourceType.TOPIC, topic, "consumer", AclOperation.READ),
            allow(ResourceType.GROUP, group, "consumer", AclOperation.READ)]
    for future in admin.create_acls(acls, request_timeout=15).values():
        future.result()
    return {role: {"username": users[role], "password": passwords[role]} for role in users}
    ### END SOLUTION
''')
nb.md("""
## Try it

Secure the real names, and read back what the cluster now holds (the admin's view):
""")
nb.code("""
payments = cluster.create_topic("payments", exist_ok=True)
credentials = secure_payments(cluster.client_config(), payments, "payments-writer", "billing")
# create_acls returns once the controller has them; each broker's authorizer applies them a moment later
acl_barrier(cluster)
describe_acls(cluster)
""")
nb.md("""
The checks below do what the grader does, with fresh names: they log in as each of your users
(`labkit.security.with_credentials(cluster.client_config(), username, password)` gives such
settings), run each application's job, and try everything else.
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
