"""The exercise notebook schema_evolution: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Evolve a schema under FULL compatibility", exercise="schema_evolution")

nb.md("""
# Exercise · Evolve a schema under FULL compatibility

The payments topic carries Avro records; its subject in the schema registry is set to **FULL**:
producers and consumers upgrade in any order, so every new version must be readable by old
consumers and must read old records. The business keeps asking for changes. Your job: turn each
change into the next version(s) of the schema.

The grader calls your `evolve` for each change in order, then, on its own cluster:

1. registers every version, in order, on a fresh subject set to FULL in a real schema registry:
   every one must be accepted;
2. produces records written with **every** version and reads **every** record with a consumer on
   **every** version — version 1 included: all must be read, with the values written (or the
   reader's default for a field the writer did not have);
3. checks that each change is made. The hidden checks use other schemas and other changes.

*About 25 minutes. Goes with lesson 09.*
""")
nb.md("""
## Setup
""")
nb.code("""
import json

import pandas as pd

import labkit
from labkit.grading import exercise
from labkit.schemas import new_subject, try_register

labkit.setup_check()
cluster = labkit.start_cluster("single-broker")
ex = exercise("schema_evolution")
""")
nb.md("""
## Version 1, and the changes asked for

A change is a dict:

* `{"op": "add", "field": F, "type": T}` — a new field `F` holding values of the Avro type `T`;
  with `"default": D`, records that do not have it (older ones) must read as `D`.
* `{"op": "drop", "field": F}` — producers stop writing `F`: they must be able to leave it out.
* `{"op": "rename", "field": A, "to": B}` — the value moves to a new field `B` of `A`'s type;
  producers stop writing `A`.

Fields a change does not mention keep their type.
""")
nb.code("""
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
""")
nb.md("""
## Task — `evolve(versions, change)`

`versions` is every version so far (`versions[0]` is `BASE`, `versions[-1]` the latest), as
dicts. Return the list of **new** versions to register for `change`, in order: usually one,
none if the latest version already does what is asked. Do not modify `versions`.

Think about what FULL lets a field do, and about who still reads with version 1: the registry
compares a new version with the **latest** one only; the consumers do not.
""")
nb.code('''
### BEGIN SOLUTION
import copy

#: A default of each primitive type, for fields that must get one.
TYPE_DEFAULTS = {"null": None, "boolean": False, "int": 0, "long": 0, "float": 0.0, "double": 0.0,
                 "string": "", "bytes": ""}


def default_for(avro_type):
    """A valid default: for a union, a value of its first branch."""
    first = avro_type[0] if isinstance(avro_type, list) else avro_type
    return TYPE_DEFAULTS[first]


def still_needed(versions, name):
    """Some version has the field without a default: its consumers need it in every record, forever."""
    return any(f["name"] == name and "default" not in f for v in versions for f in v["fields"])


def stop_writing(versions, schema, name):
    """Let producers leave `name` out: remove it if no version's consumers need it, else give it a default."""
    fields = schema["fields"]
    field = next((f for f in fields if f["name"] == name), None)
    if field is None:
        return
    if still_needed(versions, name):
        field.setdefault("default", default_for(field["type"]))
    else:
        fields.remove(field)


def evolve(versions, change):
    latest = versions[-1]
    schema = copy.deepcopy(latest)
    fields = schema["fields"]
    if change["op"] == "add":
        if "default" in change:
            fields.append({"name": change["field"], "type": change["type"], "default": change["default"]})
        else:
            fields.append({"name": change["field"], "type": ["null", change["type"]], "default": None})
    elif change["op"] == "drop":
        stop_writing(versions, schema, change["field"])
    elif change["op"] == "rename":
        old = next(f for f in fields if f["name"] == change["field"])
        fields.append({"name": change["to"], "type": copy.deepcopy(old["type"]), "default": default_for(old["type"])})
        stop_writing(versions, schema, change["field"])
    else:
        raise ValueError(f"unknown change {change}")
    return [] if schema == latest else [schema]
### END SOLUTION
''')
nb.md("""
## Your versions

Each change, in order, and the fields of every version (`*` marks a field with a default):
""")
nb.code("""
versions = [BASE]
made_by = ["given"]
for change in CHANGES:
    new = evolve([json.loads(json.dumps(v)) for v in versions], change)
    versions += new
    made_by += [json.dumps(change)] * len(new)
pd.DataFrame({"made by": made_by,
              "fields": [", ".join(f["name"] + ("*" if "default" in f else "") for f in v["fields"]) for v in versions]},
             index=[f"v{n}" for n in range(1, len(versions) + 1)])
""")
nb.md("""
Try them on a real schema registry yourself (started beside your cluster the first time): a fresh
subject in FULL, every version in order.
""")
nb.code("""
cluster.start_schema_registry()
registry = cluster.schema_registry()
subject = f"payments-try-{len(registry.get_subjects())}-value"
new_subject(registry, subject, "FULL")
pd.DataFrame([{"version": f"v{n}", "registry": try_register(registry, subject, v).label}
              for n, v in enumerate(versions, start=1)])
""")
nb.code("""
ex.check(globals())
""")
nb.code("""
cluster.stop()
""")
nb.get_graded()
