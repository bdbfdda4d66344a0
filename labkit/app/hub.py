"""The classroom's JupyterHub: who may log in, what each learner's server is, and the class poll.

``environments/classroom/jupyterhub_config.py`` is two lines: it loads the class's configuration
(:func:`labkit.app.classroom.load_config`) and calls :func:`configure`. All of it is JupyterHub's own
machinery, configured:

* **Login**: ``jupyterhub-firstuseauthenticator`` (the first password a name logs in with becomes its
  password, bcrypt-hashed) with JupyterHub's ``LocalAuthenticator``, which creates a system user per
  learner (``useradd``, home mode 0700, the class group). JupyterHub's shared-password authenticator
  is not used: anyone with the class password could log in as any learner. A name that is already a
  system user outside the class group (root, daemon, ...) is refused, or it would get that user's server.
* **Servers**: JupyterHub's ``LocalProcessSpawner`` runs each learner's JupyterLab as their own user
  (``labkit classroom singleuser``), so nobody reads another's files; ``jupyterhub-idle-culler`` stops
  idle servers. A server takes its kernels with it, and a kernel its brokers (the watchdog and the
  parent-death signal, :mod:`labkit.runtime.processes`), so every learner's brokers go with their server.
* **The poll** (:class:`ClassPoll`): a secured single-broker cluster started in the hub's process (so
  it dies with the hub), and per learner, when their server starts, a SCRAM user and the ACLs that let
  them write only ``class.answers.<name>`` (:mod:`labkit.runtime.classlink`); trainers read them all.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import pwd
import secrets
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Optional

from ..runtime.classlink import GROUP_PREFIX, PREFIX
from .classroom import Config

log = logging.getLogger(__name__)

#: Hub names: what ``useradd`` and a Kafka topic name both accept (lower case, no dots).
USERNAME_PATTERN = r"^[a-z][a-z0-9-]{1,30}$"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- the poll
class ClassPoll:
    """The class cluster and its logins (see the module doc). ``enrol(name)`` is idempotent."""

    def __init__(self, trainers: tuple[str, ...]) -> None:
        from ..backends import start_cluster

        self.trainers = trainers
        # Not one of the learners' clusters: no class limits apply to the hub's own.
        self.cluster: Any = start_cluster("secured-single-broker", progress=False)
        self.ca_pem = Path(self.cluster.client_config()["ssl.ca.location"]).read_text()
        self.bootstrap = self.cluster.bootstrap_servers
        self._passwords: dict[str, str] = {}
        self._lock = threading.Lock()

    def acls(self, name: str) -> list[Any]:
        """What ``name`` may do: write (and describe) their own topic; a trainer also reads everyone's."""
        from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

        def allow(rtype: Any, resource: str, pattern: Any, op: Any) -> Any:
            return AclBinding(rtype, resource, pattern, f"User:{name}", "*", op, AclPermissionType.ALLOW)

        own = [allow(ResourceType.TOPIC, PREFIX + name, ResourcePatternType.LITERAL, op)
               for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        if name not in self.trainers:
            return own
        return own + [allow(ResourceType.TOPIC, PREFIX, ResourcePatternType.PREFIXED, op)
                      for op in (AclOperation.READ, AclOperation.DESCRIBE)] + [
            allow(ResourceType.GROUP, GROUP_PREFIX, ResourcePatternType.PREFIXED, AclOperation.READ)]

    def enrol(self, name: str) -> str:
        """``name``'s SCRAM user, topic and ACLs on the class cluster (once); returns their password."""
        with self._lock:
            if name in self._passwords:
                return self._passwords[name]
            password = secrets.token_urlsafe(18)
            self.cluster.add_user(name, password)
            self.cluster.create_topic(PREFIX + name, partitions=1, replication_factor=1, exist_ok=True)
            self.cluster.create_acls(self.acls(name))
            self._passwords[name] = password
            return password

    def environment(self, name: str) -> dict[str, str]:
        """What ``name``'s server gets (:mod:`labkit.runtime.classlink` reads it); the CA travels as PEM text."""
        return {"LABKIT_CLASS_BOOTSTRAP": self.bootstrap, "LABKIT_CLASS_USER": name,
                "LABKIT_CLASS_PASSWORD": self.enrol(name), "LABKIT_CLASS_CA": self.ca_pem}

    def stop(self) -> None:
        self.cluster.stop()


# ---------------------------------------------------------------------------------------------- login
def authenticator_class(cfg: Config) -> type:
    """FirstUseAuthenticator + LocalAuthenticator, refusing system users outside the class group."""
    from firstuseauthenticator import FirstUseAuthenticator
    from jupyterhub.auth import LocalAuthenticator

    group_name = cfg.group

    class ClassAuthenticator(LocalAuthenticator, FirstUseAuthenticator):
        """First-use passwords; every learner a system user of the class's group (labkit.app.hub)."""

        def check_blocked_users(self, username: str, authentication: Any = None) -> bool:
            try:
                user = pwd.getpwnam(username)
            except KeyError:  # a new learner: created in the class group at their first login
                return super().check_blocked_users(username, authentication)
            group = grp.getgrnam(group_name)
            if user.pw_gid != group.gr_gid and username not in group.gr_mem:
                self.log.warning("Refused %r: a system user outside the class group %r", username, group_name)
                return False
            return super().check_blocked_users(username, authentication)

    return ClassAuthenticator


# ---------------------------------------------------------------------------------------------- the hub
def configure(c: Any, cfg: Config, poll: Optional[ClassPoll] = None) -> Optional[ClassPoll]:
    """Fill JupyterHub's config ``c`` for the class ``cfg``; starts the class poll when enabled (returned)."""
    state = cfg.state
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    c.JupyterHub.ip, c.JupyterHub.port = cfg.ip, cfg.port
    # The hub's API and the proxy's API stay on loopback, on ports of their own (two classes, or a test beside
    # a class, never collide).
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = free_port()
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{free_port()}"
    c.ConfigurableHTTPProxy.command = [str(cfg.proxy)]
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "cookie_secret")
    c.JupyterHub.cleanup_servers = True  # stopping the hub stops every learner's server (and so their brokers)

    c.JupyterHub.authenticator_class = authenticator_class(cfg)
    auth = c.ClassAuthenticator
    auth.create_system_users = True
    auth.add_user_cmd = ["useradd", "--create-home", "--gid", cfg.group, "--shell", "/bin/bash", "-K", "HOME_MODE=0700"]
    auth.dbm_path = str(state / "passwords.dbm")
    auth.min_password_length = cfg.min_password_length
    auth.username_pattern = USERNAME_PATTERN
    auth.allow_all = True
    auth.admin_users = set(cfg.trainers)

    c.Spawner.cmd = [str(cfg.venv / "bin" / "python"), "-m", "labkit.app.classroom", "singleuser"]
    c.Spawner.default_url = "/lab/workspaces/kafka-lab"  # the personal start page (labkit.app.lab.WORKSPACE)
    c.Spawner.environment = {"LABKIT_CACHE_DIR": str(cfg.cache), "LABKIT_CLASSROOM": str(cfg.learner_config),
                             "LABKIT_CLASS_TRAINERS": ",".join(cfg.trainers)}
    c.Spawner.start_timeout = c.Spawner.http_timeout = 180  # a loaded class server starts servers slowly
    c.Spawner.mem_limit = f"{cfg.memory_mb}M"  # what labkit enforces itself at cluster start (runtime/limits)

    c.JupyterHub.services = [{"name": "idle-culler", "command": [
        sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={cfg.idle_minutes * 60}", "--cull-every=60"]}]
    c.JupyterHub.load_roles = [{"name": "idle-culler", "services": ["idle-culler"],
                                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]

    if cfg.poll and poll is None:
        os.environ["LABKIT_DATA_DIR"] = str(state / "poll")  # the class cluster's files: root's, in the hub's state
        poll = ClassPoll(cfg.trainers)
    if poll is not None:
        c.Spawner.pre_spawn_hook = enrol_hook(poll)
    return poll


def enrol_hook(poll: ClassPoll) -> Any:
    """A spawner's ``pre_spawn_hook``: the learner's class login goes into their server's environment (any spawner:
    ``LocalProcessSpawner`` here, ``KubeSpawner`` in ``environments/classroom/values.yaml``)."""
    async def enrol(spawner: Any) -> None:
        name = spawner.user.name
        env = await asyncio.get_running_loop().run_in_executor(None, poll.environment, name)
        spawner.environment = {**spawner.environment, **env}
        spawner.log.info("class poll: %s may write %s%s", name, PREFIX, name)

    return enrol
