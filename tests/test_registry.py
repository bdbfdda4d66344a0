"""The schema registry beside a cluster: a real server (Apicurio, Confluent's API), started and stopped by labkit."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.error import SchemaRegistryError

import labkit
from labkit.errors import ClusterStateError
from labkit.services import answers, registry

pytestmark = pytest.mark.integration

ORDER = '{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}'
ORDER_V2 = ('{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},'
            '{"name":"note","type":["null","string"],"default":null}]}')
ORDER_INT = '{"type":"record","name":"Order","fields":[{"name":"id","type":"int"}]}'


def test_a_cluster_without_a_registry_says_how_to_get_one(cluster):
    with pytest.raises(ClusterStateError, match="schema_registry=True"):
        cluster.schema_registry_url  # noqa: B018 - reading the property raises


def test_the_registry_speaks_confluents_api_and_checks_compatibility(cluster, unique):
    reg = cluster.start_schema_registry()
    assert cluster.start_schema_registry() is reg, "one registry per cluster"
    client = cluster.schema_registry()
    subject = unique("orders") + "-value"
    first = client.register_schema(subject, Schema(ORDER, "AVRO"))
    assert client.register_schema(subject, Schema(ORDER_V2, "AVRO")) != first  # an optional field: BACKWARD-compatible
    assert [v for v in client.get_versions(subject)] == [1, 2]
    assert reg.request("GET", "/config")[1]["compatibilityLevel"] == "BACKWARD", "Confluent's default, not NONE"
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(ORDER_INT, "AVRO"))
    assert refused.value.http_status_code == 409
    assert reg.process.pid and answers(f"http://127.0.0.1:{reg.port}/health/ready")


def test_the_registry_stops_with_its_cluster(jvm_pids):
    c = labkit.start_cluster("single-broker", schema_registry=True, progress=False)
    url, marker = c.schema_registry_url, str(c.data_dir)
    assert any("quarkus-run.jar" in open(f"/proc/{p}/cmdline").read() for p in jvm_pids(marker))
    c.stop()
    assert jvm_pids(marker) == [] and not answers(url.replace("/apis/ccompat/v7", "/health/ready"))


def test_no_registry_outlives_a_killed_kernel(jvm_pids):
    from test_lifecycle import kill_owner, start_child

    proc, data_dir = start_child("single-broker", "c.start_schema_registry()")
    assert len(jvm_pids(str(data_dir))) == 2, "a broker and the registry"
    kill_owner(proc, data_dir, "the broker and the registry")


def test_the_registry_is_built_once_into_the_cache():
    jar = registry.ensure_registry(progress=False)
    assert jar.name == "quarkus-run.jar" and jar.parent == registry.app_dir()
