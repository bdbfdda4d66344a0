"""Hidden checks of schema_evolution (the grader's only): other records, other fields and types, other changes,
chosen at grade time -- each scenario drops a required field, renames one, and drops a renamed field's old name."""

from __future__ import annotations

import random
from typing import Any

from labkit.grading import check, sibling

checks = sibling(__file__)

RECORDS = [("Shipment", "logistics"), ("Invoice", "billing"), ("Reading", "sensors"), ("Ticket", "support"),
           ("Booking", "travel")]
NAMES = ["sku", "region", "channel", "priority", "weight", "carrier", "batch", "origin", "label", "score", "status",
         "tier", "quantity", "flagged", "comment", "source", "owner", "zone", "rate", "code", "site", "rank", "note",
         "due", "level", "kind", "step", "slot"]
TYPES = ["string", "int", "long", "double", "boolean"]


def default_of(avro_type: str, rng: random.Random) -> Any:
    return {"string": lambda: rng.choice(["", "n/a", "unknown"]), "int": lambda: rng.randint(0, 9),
            "long": lambda: rng.randint(0, 9), "double": lambda: rng.randint(0, 8) / 2,
            "boolean": lambda: rng.random() < 0.5}[avro_type]()


def scenario(rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A version 1 and 6-9 changes: adds with and without defaults, drops (of fields with and without a default),
    renames, and the drop of a renamed field's old name (one version 1 requires)."""
    record, namespace = rng.choice(RECORDS)
    names = rng.sample(NAMES, len(NAMES))
    fields: list[dict[str, Any]] = [{"name": "id", "type": "string"}]
    for n in range(rng.randint(3, 5)):
        field: dict[str, Any] = {"name": names.pop(), "type": rng.choice(TYPES)}
        required = n == 0 or (n > 1 and rng.random() < 0.5)   # at least one required, one with a default
        if not required:
            field["default"] = default_of(field["type"], rng)
        fields.append(field)
    base = {"type": "record", "name": record, "namespace": namespace, "fields": fields}
    present = [f["name"] for f in fields[1:]]   # what the business sees (not the deprecated names)
    # a field version 1 requires, kept for the first rename; its old name is dropped later
    reserved = rng.choice([f["name"] for f in fields[1:] if "default" not in f])
    renamed_away: list[str] = []
    kinds = ["add", "add", "drop", "rename"] + rng.choices(["add", "drop", "rename"], k=rng.randint(1, 4))
    rng.shuffle(kinds)
    kinds.insert(rng.randint(kinds.index("rename") + 1, len(kinds)), "drop renamed")
    changes: list[dict[str, Any]] = []
    for kind in kinds:
        droppable = [n for n in present if n != reserved]
        if (kind == "drop" and not droppable) or (kind == "rename" and not present):
            kind = "add"
        if kind == "add":
            change: dict[str, Any] = {"op": "add", "field": names.pop(), "type": rng.choice(TYPES)}
            if rng.random() < 0.5:
                change["default"] = default_of(change["type"], rng)
            present.append(change["field"])
        elif kind == "drop":
            name = rng.choice(droppable)
            present.remove(name)
            change = {"op": "drop", "field": name}
        elif kind == "rename":
            name, to = (rng.choice(present) if renamed_away else reserved), names.pop()
            present[present.index(name)] = to
            renamed_away.append(name)
            change = {"op": "rename", "field": name, "to": to}
        else:
            change = {"op": "drop", "field": renamed_away[0]}
        changes.append(change)
    return base, changes


def hidden(ns, rng: random.Random):
    evo = checks.evolution(ns, *scenario(rng))
    checks.assert_changes_made(evo)
    return evo


@check("other_changes_are_made", points=2, hidden=True)
def other_changes_are_made(ns):
    """On another version 1 with other changes (chosen now), your versions make every change."""
    hidden(ns, random.Random())


@check("other_versions_register_under_full", points=3, hidden=True)
def other_versions_register_under_full(ns):
    """On another version 1 with other changes, every version is accepted in order under FULL."""
    try:
        evo = hidden(ns, random.Random())
    except AssertionError as exc:
        raise AssertionError(checks.MADE_FIRST + str(exc)) from None
    checks.assert_registered_under_full(ns, evo)


@check("other_consumers_read_every_record", points=3, hidden=True)
def other_consumers_read_every_record(ns):
    """On another version 1 with other changes, a consumer on every version reads every record of every version."""
    rng = random.Random()
    try:
        evo = hidden(ns, rng)
    except AssertionError as exc:
        raise AssertionError(checks.MADE_FIRST + str(exc)) from None
    checks.assert_every_consumer_reads_every_record(ns, evo, rng)
