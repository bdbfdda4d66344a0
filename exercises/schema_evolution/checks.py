"""Checks for schema_evolution: the learner's ``evolve(versions, change)`` applied to business changes, under FULL.

Visible checks (the notebook shows them); the grader adds ``hidden_checks.py`` (other schemas, other
changes). The learner's kernel only hands over schemas (plain data). The grader then, on its own
cluster: registers them in order on a fresh subject of a schema registry it starts itself, set to
FULL; produces records written with every version and reads every record with a consumer (an
``AvroDeserializer``) on every version. Whether each business change is done is read from the
schemas themselves.
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from typing import Any

from labkit.grading import Rules, check
from labkit.grading.harness import acknowledged, unique
from labkit.schemas import new_subject, try_register

#: No module of the lab holds this answer; the generic rules (no dynamic imports, no grading machinery) apply.
RULES = Rules()
CLUSTER = "single-broker"
SHARE_CLUSTER = True

# The notebook shows the learner the same schema and changes: they are repeated here on purpose, because the
# grader must not take its test data from the learner's kernel, where they could be edited.
BASE = {"type": "record", "name": "Payment", "namespace": "bank", "fields": [
    {"name": "id", "type": "string"},
    {"name": "account", "type": "string"},
    {"name": "amount", "type": "long"},
    {"name": "memo", "type": "string", "default": ""},
]}
CHANGES = [
    {"op": "add", "field": "currency", "type": "string", "default": "EUR"},
    {"op": "add", "field": "reference", "type": "string"},
    {"op": "drop", "field": "memo"},
    {"op": "rename", "field": "account", "to": "payer"},
    {"op": "add", "field": "instant", "type": "boolean", "default": False},
    {"op": "drop", "field": "account"},
]
#: Records each version's producer writes in the readers check.
RECORDS_PER_VERSION = 3


def describe(change: dict[str, Any]) -> str:
    if change["op"] == "rename":
        return f"rename {change['field']} → {change['to']}"
    if change["op"] == "add":
        default = f" = {json.dumps(change['default'])}" if "default" in change else ""
        return f"add {change['field']}: {change['type']}{default}"
    return f"{change['op']} {change['field']}"


# ---------------------------------------------------------------- the learner's versions
@dataclass
class Evolution:
    """Every version in order (``versions[0]`` is the given one) and, per change, the latest version after it."""

    versions: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    latest_after: list[int]
    why: list[str]   # per version: the change that made it


def as_schema(value: Any, where: str) -> dict[str, Any]:
    """One returned schema as a dict (JSON text is accepted), checked to be an Avro record fastavro can parse."""
    import fastavro

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise AssertionError(f"{where} is text but not JSON: {value[:80]!r}") from None
    assert isinstance(value, dict) and value.get("type") == "record" and isinstance(value.get("fields"), list), \
        f"{where} should be an Avro record schema (a dict with type 'record' and a list of fields), not {value!r:.120}"
    try:
        fastavro.parse_schema(copy.deepcopy(value))
    except Exception as exc:  # noqa: BLE001 - any parse error is the learner's schema's
        raise AssertionError(f"{where} is not a valid Avro schema: {exc}") from None
    return value


def evolution(ns, base: dict[str, Any], changes: list[dict[str, Any]]) -> Evolution:
    """Call the learner's ``evolve`` once per change, in order, with every version so far."""
    versions, latest_after, why = [copy.deepcopy(base)], [], ["given"]
    for change in changes:
        got = ns.evolve(copy.deepcopy(versions), dict(change))
        assert isinstance(got, list), \
            f"evolve(versions, {describe(change)}) should return a list of new versions, not {type(got).__name__}"
        for n, value in enumerate(got, start=1):
            versions.append(as_schema(value, f"new version {n} for '{describe(change)}'"))
            why.append(describe(change))
        latest_after.append(len(versions) - 1)
    return Evolution(versions, list(changes), latest_after, why)


# ---------------------------------------------------------------- what a change must do
def fields_of(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in schema["fields"]}


def accepts(avro_type: Any, wanted: Any) -> bool:
    """Values of ``wanted`` (a primitive name, or a union) can be written into a field of ``avro_type``."""
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    needed = wanted if isinstance(wanted, list) else [wanted]
    return all(w in branches for w in needed)


def optional(field: dict[str, Any] | None) -> bool:
    """A producer may leave the field out: it is gone, or it has a default."""
    return field is None or "default" in field


def assert_change_made(before: dict[str, Any], after: dict[str, Any], change: dict[str, Any]) -> None:
    old, new = fields_of(before), fields_of(after)
    what = describe(change)
    op = change["op"]
    touched = {change["field"], change.get("to")}
    if op == "add":
        name = change["field"]
        assert name in new, f"after '{what}' the newest version has no field {name}"
        assert accepts(new[name]["type"], change["type"]), \
            f"after '{what}' the field {name} is {json.dumps(new[name]['type'])}: it cannot hold a {change['type']}"
        if "default" in change:
            assert new[name].get("default", object()) == change["default"], \
                f"after '{what}' the default of {name} should be {json.dumps(change['default'])}"
    elif op == "drop":
        name = change["field"]
        assert optional(new.get(name)), \
            f"after '{what}' producers must still write {name}: it is there without a default"
    elif op == "rename":
        name, to = change["field"], change["to"]
        assert to in new, f"after '{what}' the newest version has no field {to}"
        assert name in old, f"'{what}': there was no field {name} to rename"
        assert accepts(new[to]["type"], old[name]["type"]), \
            f"after '{what}' {to} is {json.dumps(new[to]['type'])}, but {name} was {json.dumps(old[name]['type'])}"
        assert optional(new.get(name)), \
            f"after '{what}' producers must still write {name}: it is there without a default"
    else:
        raise AssertionError(f"unknown change {change!r}")
    for name, field in old.items():
        if name in touched:
            continue
        assert name in new, f"'{what}' removed the field {name}, which the change does not mention"
        assert new[name]["type"] == field["type"], \
            f"'{what}' changed the type of {name}, which the change does not mention"


def assert_changes_made(evo: Evolution) -> None:
    before = evo.versions[0]
    for change, index in zip(evo.changes, evo.latest_after):
        after = evo.versions[index]
        assert_change_made(before, after, change)
        before = after


# ---------------------------------------------------------------- the registry and the consumers
def registry_client(ns) -> Any:
    """A client of the schema registry beside the checks' cluster (started here if it is not running)."""
    return ns.cluster.start_schema_registry().client()


def assert_registered_under_full(ns, evo: Evolution) -> None:
    client = registry_client(ns)
    subject = unique("payments") + "-value"
    new_subject(client, subject, "FULL")
    for n, (schema, why) in enumerate(zip(evo.versions, evo.why), start=1):
        attempt = try_register(client, subject, schema)
        assert attempt.accepted, (f"the registry (subject in FULL) refused version {n} ({why}): HTTP {attempt.status}: "
                                  f"{attempt.message[:200]}")


def sample_value(avro_type: Any, rng: random.Random) -> Any:
    """A random value of a primitive type or a union of them (what the exercise's schemas use)."""
    if isinstance(avro_type, list):
        return sample_value(rng.choice(avro_type), rng)
    if isinstance(avro_type, dict):
        avro_type = avro_type.get("type")
    values = {
        "null": lambda: None, "boolean": lambda: rng.random() < 0.5, "int": lambda: rng.randint(-2**31, 2**31 - 1),
        "long": lambda: rng.randint(-2**62, 2**62), "float": lambda: rng.randint(-1000, 1000) / 4,
        "double": lambda: rng.randint(-10**6, 10**6) / 8, "string": lambda: f"s{rng.getrandbits(40):x}",
        "bytes": lambda: rng.getrandbits(64).to_bytes(8, "big"),
    }
    assert avro_type in values, f"the checks only write fields of primitive types, not {json.dumps(avro_type)}"
    return values[avro_type]()


def sample_record(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {f["name"]: sample_value(f["type"], rng) for f in schema["fields"]}


def expected_read(written: dict[str, Any], writer: dict[str, Any], reader: dict[str, Any]) -> dict[str, Any]:
    """What a consumer with ``reader`` must get for ``written``: the fields the writer had (by name, else by one of
    the reader field's aliases), and the reader's defaults for the rest."""
    wrote = fields_of(writer)
    out = {}
    for field in reader["fields"]:
        source = next((n for n in [field["name"], *field.get("aliases", [])] if n in wrote), None)
        out[field["name"]] = written[source] if source is not None else field.get("default")
    return out


def assert_every_consumer_reads_every_record(ns, evo: Evolution, rng: random.Random) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = registry_client(ns)
    cluster = ns.cluster
    topic = cluster.create_topic(unique("payments"), partitions=1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = cluster.producer(enable_idempotence=True)
    written = []
    for n, schema in enumerate(evo.versions):
        # Each version's producer registers under a subject of its own: only the ids matter to readers here,
        # and this check stays independent of what the registry accepts (that is the registration check).
        serializer = AvroSerializer(client, json.dumps(schema), conf={
            "subject.name.strategy": lambda context, record_name, n=n: f"{context.topic}-v{n + 1}-value"})
        for _ in range(RECORDS_PER_VERSION):
            record = sample_record(schema, rng)
            try:
                producer.produce(topic, value=serializer(record, ctx))
            except Exception as exc:  # noqa: BLE001 - the learner's schema cannot be written
                raise AssertionError(f"a producer on version {n + 1} ({evo.why[n]}) cannot write {record}: "
                                     f"{type(exc).__name__}: {exc}") from None
            written.append((n, record))
    acknowledged(producer)
    stored = cluster.read_all(topic)
    assert len(stored) == len(written), f"read back {len(stored)} of {len(written)} records"
    failures = []
    for r, reader in enumerate(evo.versions):
        deserializer = AvroDeserializer(client, json.dumps(reader))
        for (w, record), message in zip(written, stored):
            try:
                got = deserializer(message.value, ctx)
            except Exception as exc:  # noqa: BLE001 - a consumer that cannot read a record is what we count
                failures.append(f"a consumer on version {r + 1} cannot read a record written with version {w + 1} "
                                f"({type(exc).__name__}: {str(exc)[:120]})")
                continue
            want = expected_read(record, evo.versions[w], reader)
            if got != want:
                failures.append(f"a consumer on version {r + 1} reads a record written with version {w + 1} as "
                                f"{got}, not {want}")
    assert not failures, f"{len(failures)} of {len(evo.versions) * len(written)} reads failed; the first: {failures[0]}"


def visible(ns) -> Evolution:
    evo = evolution(ns, BASE, CHANGES)
    assert_changes_made(evo)
    return evo


MADE_FIRST = "Only counted once every change is made (changes_are_made): "


@check("changes_are_made", points=2,
       hint="add: the field with a default; rename: the new name with the old type; drop: producers may leave it out.")
def changes_are_made(ns):
    """Applied in order, your versions make each business change, and leave the other fields as they were."""
    visible(ns)


@check("versions_register_under_full", points=2,
       hint="Under FULL a field may only come or go if it has a default.")
def versions_register_under_full(ns):
    """Every version, in order, is accepted by a real schema registry with the subject in FULL."""
    try:
        evo = visible(ns)
    except AssertionError as exc:
        raise AssertionError(MADE_FIRST + str(exc)) from None
    assert_registered_under_full(ns, evo)


@check("every_consumer_reads_every_record", points=3,
       hint="FULL compares with the latest version only: a consumer still on version 1 needs every field it "
            "knows without a default, forever.")
def every_consumer_reads_every_record(ns):
    """Records written with every version are read by a consumer on every version (old and new), with the
    values written, or the reader's defaults for fields the writer did not have."""
    try:
        evo = visible(ns)
    except AssertionError as exc:
        raise AssertionError(MADE_FIRST + str(exc)) from None
    assert_every_consumer_reads_every_record(ns, evo, random.Random())
