"""What the live cluster view costs a notebook's kernel: refresh rate, CPU, and cell latency.

    python benchmarks/live_view.py [--seconds 30] [--runs 1] [--no-fail]

A real ipykernel (started with jupyter_client, as JupyterLab does) starts a
three-broker cluster and displays ``cluster.view()`` of one 6-partition topic
and one consumer group. This process plays the rest of the lesson: a consumer
in the group, and in the "busy" scenario a producer writing ~200 records/s so
every refresh has something new to draw. Per scenario it measures, over
``--seconds`` without the view and then with it:

* refreshes/s and redraws/s the view achieved, and widget update messages/s it sent;
* CPU of the view's refresh thread (``time.thread_time`` inside the kernel), the
  extra CPU of the whole kernel process (psutil, all threads incl. librdkafka's,
  minus the window without the view) and of the view's group reader process,
  as % of one core;
* the round-trip time of a trivial cell (``1 + 1``) once a second, with and without the view.

Targets (2-core machine): at most 4 refreshes/s, ≤ 5 % of a core for the kernel,
median cell latency ≤ 100 ms with the view on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

RESULTS = Path(__file__).resolve().parent / "results"
SCENARIOS = {"quiet": {"refresh": 1.0, "produce": False}, "busy": {"refresh": 0.25, "produce": True}}
TARGETS = {"max_refreshes_per_s": 4.0, "max_kernel_cpu_percent": 5.0, "max_median_latency_ms": 100.0}


class Kernel:
    """A real ipykernel: run code, read one expression back, count the widget updates it sends."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3")
        self.process = psutil.Process(self.km.provisioner.process.pid)
        self.updates = 0
        self._reading = True
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while self._reading:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except Exception:  # noqa: BLE001 - queue.Empty on timeout
                continue
            if msg["msg_type"] == "comm_msg" and msg["content"]["data"].get("method") == "update":
                self.updates += 1
            elif msg["msg_type"] == "error":
                print("kernel error:", msg["content"]["ename"], msg["content"]["evalue"], file=sys.stderr)

    def run(self, code: str, expression: str = "None", timeout: float = 180) -> Any:
        """Execute ``code``; returns (seconds to the reply, ``expression`` evaluated afterwards)."""
        t0 = time.monotonic()
        msg_id = self.kc.execute(code, user_expressions={"out": f"__import__('json').dumps({expression})"})
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:  # a late reply to an earlier request
            reply = self.kc.get_shell_msg(timeout=timeout)
        took = time.monotonic() - t0
        content = reply["content"]
        if content["status"] != "ok":
            raise RuntimeError(f"kernel: {content.get('ename')}: {content.get('evalue')}")
        out = content["user_expressions"]["out"]
        if out["status"] != "ok":
            raise RuntimeError(f"kernel expression: {out.get('ename')}: {out.get('evalue')}")
        return took, json.loads(out["data"]["text/plain"].strip("'"))

    def cpu(self) -> float:
        t = self.process.cpu_times()
        return t.user + t.system

    def close(self) -> None:
        self._reading = False
        try:
            self.run("cluster.stop()", timeout=60)
        finally:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)


class Producer(threading.Thread):
    """Writes ~``rate`` records/s until stopped (the "busy" scenario)."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 200) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.topic, self.rate, self.running = topic, rate, True

    def run(self) -> None:
        i = 0
        while self.running:
            for _ in range(self.rate // 10):
                self.producer.produce(self.topic, key=str(i % 60), value=b"x" * 100)
                i += 1
            self.producer.poll(0)
            time.sleep(0.1)
        self.producer.flush(10)


def _window(kernel: Kernel, seconds: float) -> dict[str, float]:
    """Kernel CPU and cell latency over ``seconds`` (one ``1 + 1`` cell a second)."""
    latencies = []
    cpu0, t0, updates0 = kernel.cpu(), time.monotonic(), kernel.updates
    while time.monotonic() - t0 < seconds:
        latencies.append(kernel.run("1 + 1")[0])
        time.sleep(max(0.0, 1.0 - latencies[-1]))
    wall = time.monotonic() - t0
    return {"wall_s": wall, "kernel_cpu_percent": (kernel.cpu() - cpu0) / wall * 100,
            "latency_median_ms": statistics.median(latencies) * 1000,
            "latency_max_ms": max(latencies) * 1000, "updates_per_s": (kernel.updates - updates0) / wall}


_STATS = ("dict(refreshes=view.refreshes, redraws=view.redraws, cpu=view.thread_cpu_seconds, "
          "took=view.snapshot().took, reader=view._reader.group_reader_pid)")


def _cpu_of(pid: Any) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except (psutil.Error, TypeError, ValueError):
        return 0.0


def one_scenario(kernel: Kernel, bootstrap: str, topic: str, name: str, seconds: float) -> dict[str, float]:
    options = SCENARIOS[name]
    producer = Producer(bootstrap, topic) if options["produce"] else None
    if producer:
        producer.start()
    try:
        time.sleep(2)
        without = _window(kernel, seconds)
        kernel.run(f"view = cluster.view(topics=[{topic!r}], refresh={options['refresh']})\ndisplay(view)")
        time.sleep(2)
        _, before = kernel.run("", _STATS)
        reader0 = _cpu_of(before["reader"])
        t0 = time.monotonic()
        with_view = _window(kernel, seconds)
        _, after = kernel.run("", _STATS)
        wall = time.monotonic() - t0
        reader_cpu = _cpu_of(after["reader"]) - reader0 if after["reader"] == before["reader"] else float("nan")
        kernel.run("view.close()")
    finally:
        if producer:
            producer.running = False
            producer.join()
    return {
        "refresh_s": options["refresh"],
        "refreshes_per_s": (after["refreshes"] - before["refreshes"]) / wall,
        "redraws_per_s": (after["redraws"] - before["redraws"]) / wall,
        "widget_updates_per_s": with_view["updates_per_s"],
        "refresh_thread_cpu_percent": (after["cpu"] - before["cpu"]) / wall * 100,
        "kernel_cpu_percent_extra": max(with_view["kernel_cpu_percent"] - without["kernel_cpu_percent"], 0.0),
        "kernel_cpu_percent_with_view": with_view["kernel_cpu_percent"],
        "group_reader_cpu_percent": reader_cpu / wall * 100,
        "last_refresh_ms": after["took"] * 1000,
        "latency_median_ms_without": without["latency_median_ms"],
        "latency_median_ms_with": with_view["latency_median_ms"],
        "latency_max_ms_with": with_view["latency_max_ms"],
    }


def _setup_group(bootstrap: str, topic: str):
    """A consumer in group ``watchers`` that read part of the topic and committed: the group the view shows."""
    from confluent_kafka import Consumer, Producer as KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    for i in range(3000):
        producer.produce(topic, key=str(i), value=b"x")
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watchers", "auto.offset.reset": "earliest",
                         "client.id": "benchmark-reader"})
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 1000 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        got += msg is not None and not msg.error()
    consumer.commit(asynchronous=False)
    return consumer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--json", default=str(RESULTS / "live_view.json"))
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = parser.parse_args(argv)

    kernel = Kernel()
    consumer = None
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in args.scenarios}
    try:
        _, bootstrap = kernel.run("import labkit\ncluster = labkit.start_cluster(progress=False)\n"
                                  "topic = cluster.create_topic('watched', partitions=6)",
                                  "cluster.bootstrap_servers")
        topic = "watched"
        consumer = _setup_group(bootstrap, topic)
        for i in range(args.runs):
            for name in args.scenarios:
                r = one_scenario(kernel, bootstrap, topic, name, args.seconds)
                runs[name].append(r)
                consumer.poll(0.1)  # stay a live member of the group
                print(f"{name:>5} run {i + 1}: " + "  ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)
        consumer.close()
        consumer = None
    finally:
        if consumer is not None:
            consumer.close()
        kernel.close()

    summary = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items() if rs}
    missed = []
    for name, s in summary.items():
        print(f"median {name}: {s['refreshes_per_s']:.2f} refreshes/s ({s['redraws_per_s']:.2f} redraws/s, "
              f"{s['widget_updates_per_s']:.1f} widget updates/s); refresh thread "
              f"{s['refresh_thread_cpu_percent']:.2f} % of a core, kernel +{s['kernel_cpu_percent_extra']:.2f} %, "
              f"group reader {s['group_reader_cpu_percent']:.2f} %; "
              f"cell latency {s['latency_median_ms_without']:.0f} → {s['latency_median_ms_with']:.0f} ms")
        if s["refreshes_per_s"] > TARGETS["max_refreshes_per_s"]:
            missed.append(f"{name}: refresh rate")
        if s["kernel_cpu_percent_extra"] > TARGETS["max_kernel_cpu_percent"]:
            missed.append(f"{name}: kernel CPU")
        if s["latency_median_ms_with"] > TARGETS["max_median_latency_ms"]:
            missed.append(f"{name}: cell latency")
    if missed:
        print("targets missed: " + ", ".join(missed))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"seconds": args.seconds, "targets": TARGETS, "runs": runs, "median": summary},
                               indent=2))
    return 0 if args.no_fail or not missed else 1


if __name__ == "__main__":
    sys.exit(main())
