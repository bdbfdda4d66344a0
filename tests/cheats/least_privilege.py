"""Cheats tried on least_privilege."""

from . import Cheat, replace_solution

#: Two users created properly; what differs is the ACLs each cheat grants (``ACLS``) and who logs in.
TEMPLATE = '''
def secure_payments(admin_settings: dict, topic: str, transactional_id: str, group: str) -> dict:
    admin = AdminClient(admin_settings)
    users = {{"producer": f"{{topic}}-writer", "consumer": f"{{group}}-reader"}}
    passwords = {{role: secrets.token_urlsafe(16) for role in users}}
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upserts = [UserScramCredentialUpsertion(users[role], info, passwords[role].encode()) for role in users]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result()

    def acl(resource_type, name, principal, operation, pattern=ResourcePatternType.LITERAL):
        return AclBinding(resource_type, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)

    producer, consumer = f"User:{{users['producer']}}", f"User:{{users['consumer']}}"
{acls}
    for future in admin.create_acls(acls, request_timeout=15).values():
        future.result()
    credentials = {{role: {{"username": users[role], "password": passwords[role]}} for role in users}}
{after}
    return credentials
'''


def _solution(acls: str, after: str = "") -> str:
    return TEMPLATE.format(acls=acls, after=after)


def _cheat(source: str):
    return lambda nb: replace_solution(nb, "def secure_payments", source)


ALLOW_ALL = _solution('''\
    # it works, ship it: everything, for both
    acls = [acl(rt, "*", p, AclOperation.ALL) for p in (producer, consumer)
            for rt in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)]''')

PRODUCER_IS_THE_ADMIN = _solution('''\
    # the writer runs as the admin (a super user: nothing to grant); the reader gets its two ACLs
    acls = [acl(ResourceType.TOPIC, topic, consumer, AclOperation.READ),
            acl(ResourceType.GROUP, group, consumer, AclOperation.READ)]''', after='''\
    credentials["producer"] = {"username": admin_settings["sasl.username"],
                               "password": admin_settings["sasl.password"]}''')

PREFIXED_NAMESPACE = _solution('''\
    # prefixes, so that payments-eu and billing-v2 work too later
    prefixed = ResourcePatternType.PREFIXED
    acls = [acl(ResourceType.TOPIC, topic, producer, AclOperation.WRITE, prefixed),
            acl(ResourceType.TRANSACTIONAL_ID, transactional_id, producer, AclOperation.WRITE, prefixed),
            acl(ResourceType.TOPIC, topic, consumer, AclOperation.READ, prefixed),
            acl(ResourceType.GROUP, group, consumer, AclOperation.READ, prefixed)]''')

EVERYONE = _solution('''\
    # the right four ACLs, granted to User:* so that any user (and the next app) works
    acls = [acl(ResourceType.TOPIC, topic, "User:*", AclOperation.WRITE),
            acl(ResourceType.TRANSACTIONAL_ID, transactional_id, "User:*", AclOperation.WRITE),
            acl(ResourceType.TOPIC, topic, "User:*", AclOperation.READ),
            acl(ResourceType.GROUP, group, "User:*", AclOperation.READ)]''')

CHEATS = [
    Cheat("allow_all", _cheat(ALLOW_ALL),
          targets=["producer_can_do_nothing_else", "consumer_can_do_nothing_else", "only_the_minimum_acls",
                   "least_privilege_on_other_names"],
          why="ALLOW ALL on every topic, group and transactional id (wildcard '*') for both users"),
    Cheat("producer_is_the_admin", _cheat(PRODUCER_IS_THE_ADMIN),
          targets=["producer_can_do_nothing_else", "only_the_minimum_acls", "least_privilege_on_other_names"],
          why="the producer logs in as the admin, a super user the authorizer never checks"),
    Cheat("prefixed_namespace", _cheat(PREFIXED_NAMESPACE),
          targets=["producer_can_do_nothing_else", "consumer_can_do_nothing_else", "only_the_minimum_acls",
                   "least_privilege_on_other_names"],
          why="the right operations, but PREFIXED on the names: payments-archive and billing-audit come with them"),
    Cheat("everyone", _cheat(EVERYONE),
          targets=["producer_can_do_nothing_else", "consumer_can_do_nothing_else", "nobody_else_gets_in",
                   "only_the_minimum_acls", "least_privilege_on_other_names"],
          why="the four right ACLs, granted to User:* instead of to each application's user"),
]
