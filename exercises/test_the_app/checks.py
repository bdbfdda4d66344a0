"""Checks for test_the_app: the learner's pytest tests, graded by the bugs they catch.

The learner writes ``test_orders_app.py`` (a cell of the notebook writes it) for the application ``APP``.
The grader runs those tests with plain pytest and the lab's plugin, in a folder of their own, against the
correct application and against faulty versions of it, each breaking one promise of its contract (two
here, the rest in ``hidden_checks.py``). A faulty version is caught when a test fails against it. A suite
that fails against the correct application catches nothing; one that asserts nothing, too.

The tests never hold the application's code: they get it through the ``orders_app`` fixture (``CONFTEST``),
which asks an :class:`AppServer` in the grader's process to start, stop or kill instances of it. Each
instance is a process that receives its code from the server over a Unix socket -- the server gives it only
to a process it started itself (the peer's pid, from ``SO_PEERCRED``) -- so no file, command line or
environment holds the version under test, and a test that reads the application's source finds nothing to
tell the versions apart. The grader runs the correct application twice, at random places among the faulty
ones, and the suite must pass both times: a suite that counts its runs cannot guess which one is correct.
"""

from __future__ import annotations

import ast
import concurrent.futures
import json
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.grading import LocalNamespace, Rules, check
from labkit.runtime.processes import Supervisor
from labkit.testing.runner import pytest_command, read_junit

CLUSTER = "single-broker"
SHARE_CLUSTER = True
RULES = Rules()

#: The file the notebook's cell writes, read back by the checks.
SUITE_FILE = "test_orders_app.py"
#: Seconds one test may take, and one run of the whole suite.
TEST_TIMEOUT, RUN_TIMEOUT = 120, 600
#: Suites run at once: most of a run is spent waiting on the application and the broker.
PARALLEL = 3

APP = '''
"""orders_app: an invoice for every order.

Reads the orders topic and writes one invoice per order to the invoices topic.

* An order: key = its order id; value = JSON {"order": id, "customer": id, "items": [{"sku", "qty",
  "price_cents"}]}. A record without a value (a tombstone) means the order was deleted.
* Its invoice: key = the same order id; value = JSON {"order", "customer", "total_cents"}: the items plus
  20 % VAT, rounded to the cent. A deleted order's invoice is deleted too: a tombstone under its order id.
* At least once: killed at any moment and started again, the app still invoices every order (an invoice
  may then be written twice, never lost). A new deployment (a group that never committed) invoices the
  orders already in the topic.
* It returns once it has read every partition to its end and IDLE seconds passed without a new order, and
  on SIGTERM once its batch is done.

    python orders_app.py BOOTSTRAP ORDERS INVOICES GROUP [IDLE]
"""

import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer

VAT = 0.20
BATCH = 100


def total_cents(order):
    net = sum(item["qty"] * item["price_cents"] for item in order["items"])
    return round(net * (1 + VAT))


def invoice_for(order_value):
    """An order's value -> its invoice's value (None: the order was deleted)."""
    if order_value is None:
        return None
    time.sleep(0.004)  # the tax service answers in a few milliseconds
    order = json.loads(order_value)
    return json.dumps({"order": order["order"], "customer": order["customer"],
                       "total_cents": total_cents(order)}).encode()


def send(producer, topic, key, value):
    while True:
        try:
            producer.produce(topic, key=key, value=value)
            return
        except BufferError:  # the local queue is full: send what waits in it, then try again
            producer.flush()


def run(bootstrap, orders, invoices, group, idle=2.0):
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    # a crashed instance's partitions move to the others after 6 s (librdkafka's default: 45 s)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "enable.partition.eof": True})
    # invoices wait up to a second to go out in big batches; at most 20 wait at a time (a small container)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 1000, "queue.buffering.max.messages": 20})
    consumer.subscribe([orders])
    last, at_end = time.monotonic(), set()
    try:
        while not stopping:
            batch = []
            for msg in consumer.consume(BATCH, timeout=0.2):
                if msg.error() is None:
                    batch.append(msg)
                    at_end.discard(msg.partition())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
            if not batch:
                assigned = {tp.partition for tp in consumer.assignment()}
                if assigned and assigned <= at_end and time.monotonic() - last > idle:
                    return
                continue
            last = time.monotonic()
            for msg in batch:
                send(producer, invoices, msg.key(), invoice_for(msg.value()))
            if producer.flush(30):
                raise RuntimeError("invoices not delivered: stop without committing (a restart sends them)")
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()


if __name__ == "__main__":
    run(*sys.argv[1:5], *(float(a) for a in sys.argv[5:6]))
'''.lstrip("\n")


# ---------------------------------------------------------------- the versions under test


@dataclass(frozen=True)
class Version:
    name: str
    source: str
    #: The promise it breaks, as the check's message says it.
    what: str = ""


def mutate(source: str, *edits: tuple[str, str]) -> str:
    """``source`` with each ``(old, new)`` replaced; every ``old`` must be there exactly once."""
    for old, new in edits:
        assert source.count(old) == 1, f"a faulty version's edit no longer applies: {old!r}"
        source = source.replace(old, new)
    return source


#: Every version the checks loaded know (hidden_checks.py adds its own when the grader loads it).
VERSIONS: dict[str, Version] = {"correct": Version("correct", APP)}


def fault(name: str, what: str, *edits: tuple[str, str]) -> str:
    VERSIONS[name] = Version(name, mutate(APP, *edits), what)
    return name


WRONG_KEY = fault("wrong_key", "invoices are keyed by the customer instead of the order id",
                  ("send(producer, invoices, msg.key(), invoice_for(msg.value()))",
                   "key = json.loads(msg.value())[\"customer\"].encode() if msg.value() is not None else msg.key()\n"
                   "                send(producer, invoices, key, invoice_for(msg.value()))"))
TOMBSTONES_IGNORED = fault("tombstones_ignored", "a deleted order (a tombstone) is skipped: its invoice stays",
                           ("            for msg in batch:\n",
                            "            for msg in batch:\n                if msg.value() is None:\n"
                            "                    continue\n"))


# ---------------------------------------------------------------- how a version runs for the tests

#: An application process: connect to the server, receive the code (only a process the server started gets
#: it), run it as ``__main__``. Its code is in no file and on no command line.
BOOT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op": "code"}\n')
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(1 << 16)
    if not chunk:
        sys.exit("orders_app: no code from the app server")
    data += chunk
s.close()
reply = json.loads(data)
if "code" not in reply:
    sys.exit("orders_app: " + reply.get("error", "no code"))
sys.argv = ["orders_app", *sys.argv[2:]]
exec(compile(reply["code"], "orders_app", "exec"), {"__name__": "__main__"})
""".strip()

#: The conftest.py beside the learner's tests: the ``orders_app`` fixture (documented in the notebook).
CONFTEST = r'''
"""The `orders_app` fixture: the application under test, run as processes the tests start, stop and kill."""

import json
import os
import socket
import uuid

import pytest


def _ask(request):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(os.environ["ORDERS_APP_SERVER"])
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply


class Instance:
    """One running instance of the application (a process of its own)."""

    def __init__(self, id):
        self.id = id

    def kill(self):
        """SIGKILL: a crash, wherever it is."""
        _ask({"op": "kill", "id": self.id})

    def stop(self, timeout=30.0):
        """SIGTERM: it finishes its batch and exits; returns its exit code."""
        return _ask({"op": "stop", "id": self.id, "timeout": timeout})["code"]

    def wait(self, timeout=60.0):
        """Wait until it exits by itself (every order read, `idle` seconds without new ones); its exit code (None:
        still running after `timeout`)."""
        return _ask({"op": "wait", "id": self.id, "timeout": timeout})["code"]

    @property
    def running(self):
        return _ask({"op": "wait", "id": self.id, "timeout": 0})["code"] is None


class OrdersApp:
    """The application on topics of this test's own: `orders` and `invoices` (3 partitions), group `group`."""

    def __init__(self, bootstrap, orders, invoices, group):
        self.bootstrap, self.orders, self.invoices, self.group = bootstrap, orders, invoices, group

    def start(self, group=None, idle=1.0):
        """Start an instance in `group` (default: this test's group); it exits after `idle` s without orders."""
        return Instance(_ask({"op": "start", "args": [self.bootstrap, self.orders, self.invoices,
                                                      group or self.group, str(idle)]})["id"])


@pytest.fixture
def orders_app(kafka_cluster, kafka_topic_factory):
    yield OrdersApp(kafka_cluster.bootstrap_servers, kafka_topic_factory("orders"), kafka_topic_factory("invoices"),
                    f"orders-app-{uuid.uuid4().hex[:8]}")
    _ask({"op": "kill_all"})
'''.lstrip("\n")


def _peer_pid(conn: socket.socket) -> int:
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]


class AppServer:
    """One version of the application for one run of the tests: a Unix socket in ``work``; instances are
    managed processes of its supervisor (they die with this process, even one killed with SIGKILL)."""

    def __init__(self, source: str, work: Path) -> None:
        self.source, self.work = source, work
        self.path = str(work / "app.sock")
        self.supervisor = Supervisor(work / "apps")
        self.instances: dict[int, Any] = {}
        self.served: set[int] = set()
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.bind(self.path)
        self._sock.listen(32)
        threading.Thread(target=self._serve, name="orders-app-server", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                data += chunk
            try:
                reply = self._answer(json.loads(data), _peer_pid(conn))
            except Exception as exc:  # noqa: BLE001 - the test sees the error; the server goes on
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:  # the asker is gone (its test process stopped while waiting): nobody to tell
                pass

    def _answer(self, request: dict, peer: int) -> dict:
        op = request.get("op")
        if op == "code":
            with self._lock:
                if peer in self.served or peer not in {i.pid for i in self.instances.values() if i.pid}:
                    return {"error": "only an instance the server started gets the application's code"}
                self.served.add(peer)
            return {"code": self.source}
        if op == "start":
            with self._lock:
                n = len(self.instances) + 1
                self.instances[n] = self.supervisor.process(
                    f"orders_app {n}", [sys.executable, "-c", BOOT, self.path, *map(str, request["args"])],
                    self.work / "apps" / f"{n}.log", cwd=self.work / "apps", env=_app_env())
                self.instances[n].start()
            return {"id": n}
        if op == "kill_all":
            for instance in list(self.instances.values()):
                instance.kill()
            return {}
        instance = self.instances[int(request["id"])]
        if op == "kill":
            instance.kill()
            return {"code": instance.returncode}
        if op == "stop":
            instance.stop(float(request.get("timeout", 30)))
            return {"code": instance.returncode}
        if op == "wait":
            return {"code": instance.wait(float(request.get("timeout", 60)))}
        return {"error": f"unknown request {op!r}"}

    def close(self) -> None:
        self._sock.close()
        self.supervisor.stop_all(remove_root=False)


def _app_env() -> dict[str, str]:
    """The same small environment for every version (nothing in it says which one runs)."""
    return {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}


@dataclass
class Verdict:
    """One run of the suite against one version: pytest's exit code and the tests that failed."""

    version: str
    code: int
    tests: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.code == 0 and self.tests > 0

    @property
    def caught(self) -> bool:
        """A test failed (pytest's exit code 1: not a collection error, an interrupt or no tests at all)."""
        return self.code == 1 and bool(self.failures)

    def summary(self, most: int = 3) -> str:
        if self.code == 5 or not self.tests:
            return "pytest found no test in your file"
        if not self.failures:
            return f"pytest stopped with exit code {self.code}"
        more = f" (and {len(self.failures) - most} more)" if len(self.failures) > most else ""
        return "; ".join(self.failures[:most]) + more


def run_suite(suite: str, version: Version, bootstrap: str, exitfirst: bool) -> Verdict:
    """Run the learner's tests with plain pytest and the lab's plugin against ``version`` on the cluster at
    ``bootstrap``, in a folder of their own (nothing of the notebook's beside them)."""
    work = Path(tempfile.mkdtemp(prefix="labkit-test-the-app-"))
    server = None
    try:
        tests = work / "tests"
        tests.mkdir()
        (tests / "conftest.py").write_text(CONFTEST)
        (tests / SUITE_FILE).write_text(suite)
        server = AppServer(version.source, work)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LABKIT_"))}
        env.update({"LABKIT_BOOTSTRAP": bootstrap, "LABKIT_DATA_DIR": str(work), "ORDERS_APP_SERVER": server.path,
                    "PYTHONDONTWRITEBYTECODE": "1"})
        report = work / "report.xml"
        # Only the lab's plugin and pytest-timeout (labkit.testing.runner): other plugins only cost start-up time.
        cmd = pytest_command("-p", "pytest_timeout", "-q", f"--timeout={TEST_TIMEOUT}", *(["-x"] if exitfirst else []),
                             SUITE_FILE, report=report)
        pytest_run = server.supervisor.process("pytest", cmd, work / "pytest.log", cwd=tests, env=env).start()
        code = pytest_run.wait(RUN_TIMEOUT)
        if code is None:
            pytest_run.kill()
            return Verdict(version.name, 1, 1, [f"the tests did not finish within {RUN_TIMEOUT} s"])
        outcomes, messages = read_junit(report)
        return Verdict(version.name, code, len(outcomes),
                       [f"{name}: {messages.get(name, outcome)}" for name, outcome in outcomes.items()
                        if outcome in ("failed", "error")])
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- the learner's suite, run once per version


def read_suite(user: Any, name: str) -> Any:
    """A task: the text of the learner's test file, written by the notebook's cell (None if missing)."""
    from pathlib import Path as _Path

    path = _Path(name)
    return path.read_text() if path.is_file() else None


def suite_of(ns: Any) -> str:
    """The learner's tests; NotImplementedError ("not attempted") while the file is missing or still the stub."""
    text = ns.run(read_suite, SUITE_FILE)
    if text is None:
        raise NotImplementedError(f"there is no {SUITE_FILE} yet: run the cell that writes your tests")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise AssertionError(f"{SUITE_FILE} does not parse: {exc.msg} (line {exc.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                raise NotImplementedError("your tests are not written yet")
    return text


_VERDICTS: "weakref.WeakKeyDictionary[Any, dict[str, dict[str, list[Verdict]]]]" = weakref.WeakKeyDictionary()


def verdicts(ns: Any) -> dict[str, list[Verdict]]:
    """The suite's verdict against every version the loaded checks know, run once per namespace and suite.

    The grader runs the correct application twice, and everything in a random order; in the notebook the
    correct one goes first, once. As soon as the suite fails the correct application, nothing more runs.
    """
    suite = suite_of(ns)
    cache = _VERDICTS.setdefault(ns, {})
    if suite in cache:
        return cache[suite]
    grading = not isinstance(ns, LocalNamespace)
    faulty = [n for n in VERSIONS if n != "correct"]
    runs = ["correct", *faulty]
    if grading:
        runs.append("correct")
        random.shuffle(runs)
    found: dict[str, list[Verdict]] = {}
    bootstrap = ns.cluster.bootstrap_servers
    with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
        futures = [pool.submit(run_suite, suite, VERSIONS[n], bootstrap, n != "correct") for n in runs]
        for future in futures:
            verdict = future.result()
            found.setdefault(verdict.version, []).append(verdict)
            if verdict.version == "correct" and not verdict.passed:
                for later in futures:
                    later.cancel()
                break
    cache[suite] = found
    return found


def passes_correct(found: dict[str, list[Verdict]]) -> None:
    for verdict in found.get("correct", []):
        assert verdict.passed, (f"your tests fail against the correct application, so they catch nothing: "
                                f"{verdict.summary()}")


def caught(ns: Any, name: str) -> None:
    """The check of one faulty version: the suite passes the correct application and fails against this one."""
    found = verdicts(ns)
    passes_correct(found)
    verdict = found[name][0]
    assert verdict.caught, (f"every test passed against a version where {VERSIONS[name].what}" if verdict.code == 0
                            else f"against the version where {VERSIONS[name].what}, pytest stopped with exit code "
                                 f"{verdict.code} instead of a failing test")


# ---------------------------------------------------------------- visible checks


@check("passes_the_correct_application", points=0,
       hint="Run the application on orders your test sends, wait for it, then compare what it wrote with the contract.")
def passes_the_correct_application(ns):
    """Your tests pass against the correct application (the grader runs it twice, among the faulty versions):
    a suite that fails it catches nothing, and scores nothing."""
    passes_correct(verdicts(ns))


@check("catches_the_wrong_key", points=2, hint="Read the invoices back: is each one's key its order's id?")
def catches_the_wrong_key(ns):
    """A test fails against a version that keys invoices by customer instead of by order id."""
    caught(ns, WRONG_KEY)


@check("catches_ignored_tombstones", points=2,
       hint="Delete an order (a record with no value) and look at the last invoice under its id.")
def catches_ignored_tombstones(ns):
    """A test fails against a version that skips deleted orders (tombstones) instead of deleting their invoice."""
    caught(ns, TOMBSTONES_IGNORED)
