"""How fast the schema registry starts and how much memory it uses.

    python benchmarks/registry.py [--runs 5] [--json PATH] [--no-fail]

One single-broker cluster; per run, a fresh registry (Apicurio, Confluent's API, in-memory
storage) is started beside it the way ``cluster.start_schema_registry()`` does it, and measured:
time until it is ready (``/health/ready`` answers and the global compatibility is set), the CPU
seconds its JVM used until then, its resident memory (RSS) at ready and after a small workload
(60 Avro registrations across 20 subjects with compatibility checks, then 500 Avro records produced
through ``AvroSerializer`` and read back through ``AvroDeserializer``), and the time from SIGTERM
to exit. Prints every run, then the median, min and max. Target on a 2-core machine: RSS after
the workload <= 300 MB (median); the start time is reported, machine load beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import reporting
import labkit
from labkit.schemas import new_subject, try_register
from labkit.services import registry

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"rss_mb_after_workload": 300.0}


def record(*extra: dict) -> str:
    return json.dumps({"type": "record", "name": "Reading", "namespace": "bench", "fields": [
        {"name": "id", "type": "string"}, {"name": "value", "type": "double"}, *extra]})


def workload(cluster, reg: registry.SchemaRegistry) -> float:
    """60 registrations (20 subjects x 3 versions, each checked under BACKWARD) and 500 Avro records."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    t0 = time.monotonic()
    client = reg.client()
    run = uuid.uuid4().hex[:6]
    versions = [record(), record({"name": "unit", "type": ["null", "string"], "default": None}),
                record({"name": "unit", "type": ["null", "string"], "default": None},
                       {"name": "site", "type": "string", "default": ""})]
    for s in range(20):
        subject = f"bench-{run}-{s}-value"
        new_subject(client, subject, "BACKWARD")
        for schema in versions:
            assert try_register(client, subject, schema).accepted
        assert not try_register(client, subject, record({"name": "site", "type": "int"})).accepted
    topic = cluster.create_topic(f"bench-{run}", partitions=1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(client, versions[-1])
    producer = cluster.producer()
    for i in range(500):
        producer.produce(topic, value=serializer({"id": f"r{i}", "value": i / 4, "unit": "C", "site": "lab"}, ctx))
        producer.poll(0)
    assert producer.flush(30) == 0
    deserializer = AvroDeserializer(client)
    read = [deserializer(r.value, ctx) for r in cluster.read_all(topic)]
    assert len(read) == 500 and read[-1]["id"] == "r499"
    return time.monotonic() - t0


def one_run(cluster) -> dict:
    t0 = time.monotonic()
    reg = registry.start(cluster)
    ready = time.monotonic() - t0
    proc = psutil.Process(reg.process.pid)
    cpu = proc.cpu_times()
    rss_ready = proc.memory_info().rss / 2**20
    work = workload(cluster, reg)
    rss_after = proc.memory_info().rss / 2**20
    t1 = time.monotonic()
    reg.process.stop()
    stop = time.monotonic() - t1
    return {"ready_s": ready, "cpu_s_to_ready": cpu.user + cpu.system, "rss_mb_ready": rss_ready,
            "workload_s": work, "rss_mb_after_workload": rss_after, "stop_s": stop,
            "exit_code": reg.process.returncode}


KEYS = ("ready_s", "cpu_s_to_ready", "rss_mb_ready", "workload_s", "rss_mb_after_workload", "stop_s")


def summarize(runs: list[dict]) -> dict:
    return {k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs),
                "max": max(r[k] for r in runs)} for k in KEYS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=str(RESULTS / "registry.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = parser.parse_args(argv)
    registry.ensure_registry(progress=True)
    load_before = psutil.getloadavg()
    cluster = labkit.start_cluster("single-broker", progress=False)
    runs = []
    try:
        print(f"schema registry (Apicurio {registry.APICURIO_VERSION}): {args.runs} runs, load average "
              f"{load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}")
        print(f"  {'run':>3}  {'ready s':>7}  {'CPU s':>6}  {'RSS ready MB':>12}  {'workload s':>10}  "
              f"{'RSS after MB':>12}  {'stop s':>6}")
        for i in range(args.runs):
            r = one_run(cluster)
            runs.append(r)
            print(f"  {i + 1:>3}  {r['ready_s']:>7.2f}  {r['cpu_s_to_ready']:>6.2f}  {r['rss_mb_ready']:>12.0f}  "
                  f"{r['workload_s']:>10.2f}  {r['rss_mb_after_workload']:>12.0f}  {r['stop_s']:>6.2f}", flush=True)
    finally:
        cluster.stop()
    load_after = psutil.getloadavg()
    summary = summarize(runs)
    print("  median " + "  ".join(f"{k}={v['median']:.2f}" for k, v in summary.items()))
    print(f"  load average after: {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}")
    failed = False
    for key, limit in TARGETS.items():
        value = summary[key]["median"]
        failed |= not reporting.meets(f"median {key}", value, limit)
    report = {"machine": reporting.machine(load_average_before=load_before, load_average_after=load_after),
              "apicurio": registry.APICURIO_VERSION, "runs": runs, "summary": summary}
    reporting.write(args.json, report)
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
