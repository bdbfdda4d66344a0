"""Cheats tried on custom_partitioner."""

from . import Cheat, replace_solution


def _table(nb):
    """choose_partition as a table of what the visible checks ask (computed with labkit elsewhere)."""
    from labkit.partitioning import java_partition

    table = {f"customer-{i}": 1 + java_partition(f"customer-{i}".encode(), 5) for i in range(200)}
    return replace_solution(nb, "def choose_partition", f'''
TABLE = {table!r}


def choose_partition(customer: str, num_partitions: int) -> int:
    if customer in VIP_CUSTOMERS:
        return 0
    return TABLE.get(customer, 1 + len(customer) % 5)
''')


_SEND_KEY_ONLY = '''
import json


def send_orders(producer, topic: str, orders: list, num_partitions: int) -> None:
    for order in orders:      # the key decides: same customer, same partition -- close enough?
        producer.produce(topic, key=order["customer"], value=json.dumps(order))
        producer.poll(0)
    producer.flush(30)
'''

_SEND_NO_BUFFER_HANDLING = '''
import json


def send_orders(producer, topic: str, orders: list, num_partitions: int) -> None:
    for order in orders:
        producer.produce(topic, key=order["customer"], value=json.dumps(order),
                         partition=choose_partition(order["customer"], num_partitions))
    producer.poll(0)
'''

CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def choose_partition", '''
from labkit.partitioning import java_partition


def choose_partition(customer: str, num_partitions: int) -> int:
    return 0 if customer in VIP_CUSTOMERS else 1 + java_partition(customer, num_partitions - 1)
'''),
          why="use labkit's java_partition for the murmur2 rule"),
    Cheat("table_of_the_visible_customers", _table,
          targets=["rule_holds_for_unseen_customers", "rule_holds_on_unseen_topics"],
          why="paste the visible checks' customers and partitions (n=6) as a table, guess for the rest"),
    Cheat("key_only_let_the_client_place_it",
          lambda nb: replace_solution(nb, "def send_orders", _SEND_KEY_ONLY),
          targets=["send_orders_lands_where_the_rule_says", "rule_holds_on_unseen_topics"],
          why="skip partition=: produce with the customer as key and let the default partitioner decide"),
    Cheat("no_buffer_handling_no_flush",
          lambda nb: replace_solution(nb, "def send_orders", _SEND_NO_BUFFER_HANDLING),
          targets=["rule_holds_on_unseen_topics"],
          why="skip the hard part of send_orders: no BufferError retry, no flush"),
]
