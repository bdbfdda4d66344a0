"""Cheats tried on test_the_app: suites that would earn points without testing the application's behaviour.

(pytest collects this file for its name, and finds no test in it: the suites below are text.)
"""

from . import Cheat, replace_solution

CELL = "%%writefile test_orders_app.py"

#: Runs the application the way a real test would, and checks nothing.
ASSERTS_NOTHING = '''
import json


def test_the_app_runs(kafka_cluster, orders_app):
    producer = kafka_cluster.producer()
    for i in range(50):
        producer.produce(orders_app.orders, key=f"o{i}", value=json.dumps(
            {"order": f"o{i}", "customer": "c1", "items": [{"sku": "s", "qty": 1, "price_cents": 100}]}))
    producer.produce(orders_app.orders, key="o1", value=None)
    producer.flush(30)
    instance = orders_app.start()
    instance.wait()
    kafka_cluster.read_all(orders_app.invoices)


def test_the_app_survives_a_crash(kafka_cluster, orders_app):
    instance = orders_app.start()
    instance.kill()
    orders_app.start().wait()
'''

#: A suite that would catch every fault -- if the correct application passed it: its totals leave VAT out.
FAILS_THE_CORRECT_APP = '''
import json


def test_every_order_gets_its_invoice_under_its_id_and_deletes_follow(kafka_cluster, orders_app):
    producer = kafka_cluster.producer()
    orders = {f"o{i}": {"order": f"o{i}", "customer": f"c{i % 3}", "items": [{"sku": "s", "qty": 2, "price_cents": 150}]}
              for i in range(300)}
    for key, order in orders.items():
        producer.produce(orders_app.orders, key=key, value=json.dumps(order))
    producer.produce(orders_app.orders, key="o5", value=None)
    producer.flush(30)
    first = orders_app.start()
    first.kill()
    orders_app.start().wait()
    last = {r.key_text: r.value for r in kafka_cluster.read_all(orders_app.invoices)}
    assert set(last) == set(orders) and last["o5"] is None
    for key in set(orders) - {"o5"}:
        assert json.loads(last[key]) == {"order": key, "customer": orders[key]["customer"], "total_cents": 300}
'''

#: Looks for the application's code wherever a test process could see it -- an importable module, files next
#: to the tests, the instances' command lines and environments, strings in memory -- and fails when it spots
#: one of the usual bugs in it. It finds no code, so it passes against every version.
READS_THE_SOURCE = '''
import gc
import inspect
from pathlib import Path

BUGS = ['"auto.offset.reset": "latest"', '["customer"].encode()', "if msg.value() is None:\\n                    continue",
        "this invoice is skipped", "consumer.commit(asynchronous=False)\\n            for msg in batch"]


def application_source():
    found = []
    try:
        import orders_app
        found.append(inspect.getsource(orders_app))
    except Exception:
        pass
    for folder in (Path.cwd(), Path.cwd().parent):
        for path in folder.rglob("*"):
            try:
                if path.is_file() and path.name != Path(__file__).name and path.stat().st_size < 1_000_000:
                    found.append(path.read_text(errors="replace"))
            except OSError:
                pass
    for proc in Path("/proc").iterdir():
        for name in ("cmdline", "environ"):
            try:
                text = (proc / name).read_bytes().replace(b"\\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "orders_app" in text:
                found.append(text)
    found += [o for o in gc.get_objects() if isinstance(o, str) and "def run(bootstrap" in o and "BUGS" not in o]
    return "\\n".join(found)


def test_the_running_application_has_none_of_the_usual_bugs(orders_app):
    instance = orders_app.start()
    source = application_source()
    instance.wait()
    for bug in BUGS:
        assert bug not in source, f"the application's code has the bug {bug!r}"
'''


def _suite(text: str):
    return lambda nb: replace_solution(nb, CELL, f"{CELL}\n{text.strip()}\n")


CHEATS = [
    Cheat("asserts_nothing", _suite(ASSERTS_NOTHING), targets="*",
          why="tests that run the application (orders, a tombstone, a crash) and assert nothing"),
    Cheat("fails_the_correct_application", _suite(FAILS_THE_CORRECT_APP), targets="*",
          why="a suite that fails on every faulty version, and on the correct application too (totals without VAT)"),
    Cheat("reads_the_applications_source", _suite(READS_THE_SOURCE), targets="*",
          why="look for the application's code (an import, files beside the tests, the instances' command lines "
              "and environments, strings in memory) and fail on the usual bug patterns in it"),
]
