"""Building a secured cluster: its own certificate authority, SCRAM users, listeners and JAAS settings.

The ``secured`` profile gives each node four listeners:

======================  ============  =================================================
listener                protocol      who, and how they prove who they are
======================  ============  =================================================
``SCRAM``               SASL_SSL      clients: SCRAM-SHA-512 password over TLS
``MTLS``                SSL           clients: a certificate (the principal is its CN)
``BROKER``              SSL           replication between brokers: each broker's own certificate
``CONTROLLER``          SSL           the KRaft quorum: the brokers' certificates
======================  ============  =================================================

Why not SCRAM between controllers: the credentials live in the metadata log, which
nobody can read before a controller is elected (KAFKA-15513); and a PLAINTEXT controller
listener would have to make ``User:ANONYMOUS`` a super user, letting anyone on the machine
change the cluster's configuration without a password. Authorization is KRaft's
``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``; the super users are
``User:admin`` and the brokers.

A fresh EC certificate authority per cluster signs the broker and client certificates
(PEM files in the cluster's ``tls/`` directory, read by Kafka as ``ssl.keystore.type=PEM``;
a few milliseconds, where ``keytool`` would start a JVM per step). The admin's SCRAM
credential is written when storage is formatted, pre-salted so the password never appears
on a command line; other users are added while the cluster runs.

What lessons use to look at security (``try_connect``, ``acl_table``, ``scram_credentials``)
lives in :mod:`labkit.security`.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SecurityError
from ..security import java_properties

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 8192
ORG = "Kafka Lab"
ADMIN = "admin"
#: Listener name -> security protocol, for a secured node (CONTROLLER only on controllers).
SECURED_LISTENERS = {"SCRAM": "SASL_SSL", "MTLS": "SSL", "BROKER": "SSL", "CONTROLLER": "SSL"}
#: The listeners clients use; SCRAM is the one bootstrap servers point at.
CLIENT_LISTENERS = ("SCRAM", "MTLS")


# ---------------------------------------------------------------------------------------------- certificates
class CertificateAuthority:
    """The cluster's own CA, in ``directory``: it signs broker and client certificates on demand."""

    def __init__(self, directory: Path, days: int = 30) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.dir, self.days = Path(directory), days
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.timezone.utc)
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG),
                          x509.NameAttribute(NameOID.COMMON_NAME, f"Kafka Lab CA {self.dir.parent.name}")])
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False, encipher_only=False,
                                                   decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.ca_file.write_bytes(self._pem(self._cert))

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.pem"

    @staticmethod
    def _pem(cert: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, name: str, server: bool = False) -> dict[str, Path]:
        """A certificate for ``CN=name,O=Kafka Lab`` (brokers: SANs for 127.0.0.1 and localhost).

        Returns the paths of ``name.pem`` (certificate + CA chain), ``name-key.pem`` (PKCS#8 key)
        and ``name-keystore.pem`` (both in one file: what Kafka's PEM keystore reads).
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        paths = {"cert": self.dir / f"{name}.pem", "key": self.dir / f"{name}-key.pem",
                 "keystore": self.dir / f"{name}-keystore.pem"}
        if all(p.exists() for p in paths.values()):
            return paths
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.timezone.utc)
        # O first, CN last: Java prints the DN in RFC 2253 order, "CN=alice,O=Kafka Lab" (what the mapping rule reads)
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG),
                             x509.NameAttribute(NameOID.COMMON_NAME, name)])
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server \
            else [ExtendedKeyUsageOID.CLIENT_AUTH]  # brokers are TLS clients of each other too
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=self.days))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        chain = self._pem(cert) + self._pem(self._cert)
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        paths["cert"].write_bytes(chain)
        for path, data in ((paths["key"], key_pem), (paths["keystore"], key_pem + chain)):
            path.write_bytes(data)
            os.chmod(path, 0o600)
        return paths


# ---------------------------------------------------------------------------------------------- SCRAM
def scram_salted(password: str, iterations: int = ITERATIONS) -> tuple[str, str]:
    """(salt, salted password), base64: SCRAM's Hi() is PBKDF2-HMAC-SHA-512 of the password with the salt."""
    salt = secrets.token_bytes(24)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return base64.b64encode(salt).decode(), base64.b64encode(salted).decode()


def format_arguments(user: str, password: str) -> list[str]:
    """``--add-scram`` for Kafka's storage formatter, pre-salted (no password in ``ps`` or in the output)."""
    salt, salted = scram_salted(password)
    return ["--add-scram", f'{MECHANISM}=[name={user},iterations={ITERATIONS},salt="{salt}",'
                           f'saltedpassword="{salted}"]']


# ---------------------------------------------------------------------------------------------- a secured cluster
@dataclass
class SecuredCluster:
    """What a secured cluster knows about its security: the CA, the users and their passwords."""

    directory: Path
    brokers: list[int]
    users: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ca = CertificateAuthority(self.directory / "tls")
        self.users.setdefault(ADMIN, secrets.token_urlsafe(12))
        for broker in self.brokers:
            self.ca.issue(f"broker-{broker}", server=True)

    @property
    def super_users(self) -> str:
        return ";".join([f"User:{ADMIN}", *(f"User:broker-{b}" for b in self.brokers)])

    def node_settings(self, broker_id: int) -> dict[str, Any]:
        """What a secured node adds to ``server.properties`` besides its listeners."""
        keystore = self.ca.issue(f"broker-{broker_id}", server=True)["keystore"]
        return {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.ca_file),
            # "CN=alice,O=Kafka Lab" -> User:alice; any other DN stays the whole DN
            "ssl.principal.mapping.rules": f"RULE:^CN=([^,]+),O={ORG}$/$1/,DEFAULT",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.broker.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            "listener.name.scram.sasl.enabled.mechanisms": MECHANISM,
            # the broker side of SCRAM needs a JAAS entry, even without a password of its own
            "listener.name.scram.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": self.super_users,
        }

    def client_settings(self, user: str = ADMIN, mtls: bool = False) -> dict[str, Any]:
        """confluent-kafka settings for ``user``: SCRAM over TLS, or their certificate (``mtls=True``)."""
        if mtls:
            cert = self.ca.issue(user)
            return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca.ca_file),
                    "ssl.certificate.location": str(cert["cert"]), "ssl.key.location": str(cert["key"])}
        if user not in self.users:
            raise SecurityError(f"This cluster has no SCRAM user {user!r}.",
                                f"Add one with cluster.add_user({user!r}, password); users: {', '.join(self.users)}.")
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": user,
                "sasl.password": self.users[user], "ssl.ca.location": str(self.ca.ca_file)}

    def properties_file(self, user: str = ADMIN, mtls: bool = False) -> Path:
        """A client properties file for Kafka's Java tools (``--command-config``), written once per user."""
        path = self.directory / f"{user}{'-mtls' if mtls else ''}.properties"
        path.write_text(java_properties(self.client_settings(user, mtls)))
        os.chmod(path, 0o600)
        return path
