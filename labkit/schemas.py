"""Schemas on the wire and on a real registry: Confluent's framing of a value, and compatibility tried out.

    framed = unframe(msg.value())            # Framed(magic=0, schema_id=3, payload=b'...Avro...')
    verdicts = compatibility_matrix(client, [V1], {"add a field": V2}, ["BACKWARD", "FULL"], prefix="evo-ab12")
    verdicts["add a field"]["FULL"]           # Attempt(accepted=True, schema_id=4, ...)

Confluent's serializers (in confluent-kafka: ``AvroSerializer``, ``JSONSerializer``,
``ProtobufSerializer``) write one magic byte ``0``, the schema's id as a 4-byte
big-endian int, then the payload; :func:`unframe` takes such a value apart, nothing
more (decoding the payload is the deserializer's job). :func:`try_register` and
:func:`compatibility_matrix` ask the registry itself -- a verdict here is what the
server answered, never a model of it.

The lab's registry is Apicurio (Confluent's API). One difference matters here:
a subject's compatibility can be set to any level *before* its first schema, except
``NONE``, which Apicurio keeps only as the global level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

#: The first byte of every value framed by a Confluent serializer.
MAGIC_BYTE = 0
#: Magic byte + 4-byte schema id.
HEADER_SIZE = 5
#: The compatibility levels of Confluent's API, in the order lessons show them.
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")

SchemaText = Union[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Framed:
    """A value as a Confluent serializer framed it: magic byte, schema id, then the payload."""

    magic: int
    schema_id: int
    payload: bytes

    @property
    def header(self) -> bytes:
        return bytes([self.magic]) + self.schema_id.to_bytes(4, "big")


def unframe(value: bytes) -> Framed:
    """Split a framed value into magic byte, schema id and payload (``ValueError`` if it is not framed)."""
    if value is None or len(value) < HEADER_SIZE:
        raise ValueError(f"a framed value has at least {HEADER_SIZE} bytes; this one has "
                         f"{0 if value is None else len(value)}")
    if value[0] != MAGIC_BYTE:
        raise ValueError(f"the first byte is {value[0]}, not the magic byte {MAGIC_BYTE}: "
                         "this value was not written by a schema-registry serializer")
    return Framed(value[0], int.from_bytes(value[1:HEADER_SIZE], "big"), bytes(value[HEADER_SIZE:]))


def schema_text(schema: SchemaText) -> str:
    """A schema as the registry takes it: JSON text (a dict is dumped)."""
    return schema if isinstance(schema, str) else json.dumps(schema)


@dataclass(frozen=True)
class Attempt:
    """What the registry answered to one registration: accepted (with the id) or refused (status, message)."""

    accepted: bool
    schema_id: Optional[int] = None
    status: Optional[int] = None
    message: str = ""

    @property
    def label(self) -> str:
        return "✓ accepted" if self.accepted else f"✗ {self.status}"


def try_register(client: Any, subject: str, schema: SchemaText, schema_type: str = "AVRO") -> Attempt:
    """Register ``schema`` under ``subject``; a refusal (409: incompatible, 422: invalid) is returned, not raised."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return Attempt(True, client.register_schema(subject, Schema(schema_text(schema), schema_type)))
    except SchemaRegistryError as err:
        return Attempt(False, status=err.http_status_code, message=err.error_message)


def new_subject(client: Any, subject: str, level: str, history: Sequence[SchemaText] = (),
                schema_type: str = "AVRO") -> None:
    """Set ``subject``'s compatibility to ``level``, then register ``history`` in order (each must be accepted)."""
    if level == "NONE":
        raise ValueError("Apicurio keeps NONE only as the global level: use client.set_compatibility(level='NONE')")
    client.set_compatibility(subject_name=subject, level=level)
    for version, schema in enumerate(history, start=1):
        attempt = try_register(client, subject, schema, schema_type)
        if not attempt.accepted:
            raise ValueError(f"version {version} of the history was refused under {level} on {subject!r}: "
                             f"{attempt.status} {attempt.message}")


def compatibility_matrix(client: Any, history: Sequence[SchemaText], candidates: Mapping[str, SchemaText],
                         levels: Sequence[str], prefix: str, schema_type: str = "AVRO",
                         ) -> dict[str, dict[str, Attempt]]:
    """For every candidate and level: a fresh subject set to the level, ``history`` registered, then the
    candidate tried. Returns ``{candidate name: {level: Attempt}}``, in the order given."""
    out: dict[str, dict[str, Attempt]] = {}
    for n, (name, candidate) in enumerate(candidates.items()):
        out[name] = {}
        for level in levels:
            subject = f"{prefix}-{n}-{level.lower().replace('_', '-')}-value"
            new_subject(client, subject, level, history, schema_type)
            out[name][level] = try_register(client, subject, candidate, schema_type)
    return out


__all__ = ["HEADER_SIZE", "LEVELS", "MAGIC_BYTE", "Attempt", "Framed", "compatibility_matrix", "new_subject",
           "schema_text", "try_register", "unframe"]
