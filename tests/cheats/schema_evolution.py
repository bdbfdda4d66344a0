"""Cheats tried on schema_evolution."""

from . import Cheat, replace_solution

_NONE_FIRST = '''
# "the registry kept saying 409": switch its checks off (the global level: every subject)
cluster.start_schema_registry()
cluster.schema_registry().set_compatibility(level="NONE")
'''

#: The changes done the direct way: drop the field, rename it in place, add it without a default.
_NAIVE = '''
import copy


def evolve(versions, change):
    schema = copy.deepcopy(versions[-1])
    fields = schema["fields"]
    if change["op"] == "add":
        fields.append({"name": change["field"], "type": change["type"], **(
            {"default": change["default"]} if "default" in change else {})})
    elif change["op"] == "drop":
        schema["fields"] = [f for f in fields if f["name"] != change["field"]]
    else:
        for f in fields:
            if f["name"] == change["field"]:
                f["name"] = change["to"]
    return [schema]
'''

CHEATS = [
    Cheat("compatibility_none_same_schema", lambda nb: replace_solution(nb, "def evolve", _NONE_FIRST + '''

def evolve(versions, change):
    return [versions[-1]]          # the same schema every time: always accepted, every consumer reads it
'''), why="set compatibility to NONE and register the same schema every time"),
    Cheat("drop_fields_none", lambda nb: replace_solution(nb, "def evolve", _NONE_FIRST + _NAIVE),
          targets=["versions_register_under_full", "every_consumer_reads_every_record",
                   "other_versions_register_under_full", "other_consumers_read_every_record"],
        why="the changes done the direct way (drop fields, rename in place, add without default), with the "
            "notebook's registry set to NONE so that it accepts them"),
    Cheat("latest_version_only", lambda nb: replace_solution(nb, "def evolve", '''
import copy


def evolve(versions, change):
    schema = copy.deepcopy(versions[-1])
    fields = schema["fields"]
    if change["op"] == "add":
        fields.append({"name": change["field"], "type": ["null", change["type"]], "default": None}
                      if "default" not in change else
                      {"name": change["field"], "type": change["type"], "default": change["default"]})
        return [schema]
    name = change["field"]
    old = next((f for f in fields if f["name"] == name), None)
    if old is None:
        return []
    default = None if isinstance(old["type"], list) else {"string": "", "boolean": False, "double": 0.0}.get(old["type"], 0)
    if change["op"] == "rename":
        fields.append({"name": change["to"], "type": old["type"], "default": default})
    if "default" in old:                   # FULL only looks at the latest version: a default there is enough
        fields.remove(old)
    else:
        old["default"] = default
    return [schema]
'''), targets=["every_consumer_reads_every_record", "other_consumers_read_every_record"],
        why="every version accepted under FULL, checked against the latest version only: a field that got its "
            "default later is removed, and consumers still on version 1 cannot read the new records"),
    Cheat("patch_the_registry_client", lambda nb: replace_solution(nb, "def evolve", _NAIVE + '''

import confluent_kafka.schema_registry as sr
from labkit.grading import checks as g

sr.SchemaRegistryClient.register_schema = lambda self, subject, schema, normalize_schemas=False: 1
g.run_check = lambda c, ns: g.CheckResult(c.id, c.points, c.points, c.hidden, "passed")
'''), targets=["versions_register_under_full", "every_consumer_reads_every_record",
               "other_versions_register_under_full", "other_consumers_read_every_record"],
        why="the direct evolution, with the kernel's registry client and check runner patched to accept everything"),
]
