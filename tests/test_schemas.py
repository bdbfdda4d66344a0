"""labkit.schemas: Confluent's framing taken apart (unit), and compatibility asked of a real registry (integration)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import REPO
from labkit.schemas import HEADER_SIZE, MAGIC_BYTE, Attempt, compatibility_matrix, try_register, unframe


def record(*fields):
    return json.dumps({"type": "record", "name": "Order", "namespace": "test", "fields": list(fields)})


ID = {"name": "id", "type": "string"}
NAME = {"name": "name", "type": "string"}
V1 = record(ID, NAME)


def test_unframe_splits_magic_byte_schema_id_and_payload():
    framed = unframe(b"\x00\x00\x00\x01\x02" + b"avro")
    assert (framed.magic, framed.schema_id, framed.payload) == (MAGIC_BYTE, 258, b"avro")
    assert framed.header == b"\x00\x00\x00\x01\x02" and len(framed.header) == HEADER_SIZE


@pytest.mark.parametrize("value, says", [(b"\x00\x00\x01", "at least 5 bytes"), (None, "has 0"),
                                         (b'{"id": 1}', "not the magic byte")])
def test_unframe_refuses_what_a_serializer_did_not_frame(value, says):
    with pytest.raises(ValueError, match=says):
        unframe(value)


def test_an_attempt_labels_itself():
    assert Attempt(True, 3).label == "✓ accepted"
    assert Attempt(False, status=409, message="Incompatible").label == "✗ 409"


@pytest.mark.integration
def test_the_compatibility_matrix_is_what_the_registry_answers(cluster, unique):
    """The cells lesson 09 shows: add optional / add required / remove / rename / int→long, plus a chain that only
    the transitive modes refuse."""
    cluster.start_schema_registry()
    client = cluster.schema_registry()
    changes = {"add optional": record(ID, NAME, {"name": "e", "type": ["null", "string"], "default": None}),
               "add required": record(ID, NAME, {"name": "e", "type": "string"}),
               "remove": record(ID),
               "rename": record(ID, {"name": "full_name", "type": "string"}),
               "int to long": record({"name": "id", "type": "long"}, NAME)}
    levels = ["BACKWARD", "FORWARD", "FULL"]
    got = compatibility_matrix(client, [V1], {k: v for k, v in changes.items() if k != "int to long"}, levels,
                               prefix=unique("m"))
    got |= compatibility_matrix(client, [record({"name": "id", "type": "int"}, NAME)],
                                {"int to long": changes["int to long"]}, levels, prefix=unique("n"))
    accepted = {change: [lvl for lvl in levels if got[change][lvl].accepted] for change in changes}
    assert accepted == {"add optional": levels, "add required": ["FORWARD"], "remove": ["BACKWARD"],
                        "rename": [], "int to long": ["BACKWARD"]}
    refused = got["rename"]["FULL"]
    assert refused.status == 409 and refused.schema_id is None and refused.message
    chain = [record(ID, {"name": "f", "type": "int", "default": 0}), record(ID)]
    v3 = record(ID, {"name": "f", "type": "string", "default": ""})
    modes = ["FULL", "FULL_TRANSITIVE", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE"]
    transitive = compatibility_matrix(client, chain, {"v3": v3}, modes, prefix=unique("t"))["v3"]
    assert [m for m in modes if transitive[m].accepted] == ["FULL"]
    assert try_register(client, unique("x") + "-value", '{"type": "record"}').status == 422, "an invalid schema"


@pytest.mark.integration
def test_registry_benchmark_reports_start_and_memory(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_registry", REPO / "benchmarks" / "registry.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "registry.json"
    assert module.main(["--runs", "1", "--json", str(out), "--no-fail"]) == 0
    run = json.loads(out.read_text())["runs"][0]
    assert 0 < run["ready_s"] < 120 and 0 < run["cpu_s_to_ready"] < 120
    assert 50 < run["rss_mb_ready"] < 1024 and 50 < run["rss_mb_after_workload"] < 1024
    assert run["exit_code"] in (0, 143), "stopped by SIGTERM"
