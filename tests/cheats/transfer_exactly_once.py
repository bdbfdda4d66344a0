"""Cheats tried on transfer_exactly_once."""

from . import Cheat, replace_solution

WITHOUT_TRANSACTIONS = '''
def transfer(bootstrap_servers: str, source: str, target: str, group_id: str, transactional_id: str) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": group_id, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 6000,
    })
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})  # no duplicates, right?
    consumer.subscribe([source])
    last_record = time.monotonic()
    try:
        while True:
            batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
            if not consumer.assignment():
                last_record = time.monotonic()
            if not batch:
                if time.monotonic() - last_record > 3:
                    return
                continue
            last_record = time.monotonic()
            for msg in batch:
                payment = json.loads(msg.value())
                producer.produce(target, key=msg.key(),
                                 value=json.dumps({"id": payment["id"], "amount_cents": round(payment["amount"] * 100)}))
            producer.flush(30)
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
'''

OFFSETS_OUTSIDE_THE_TRANSACTION = '''
def transfer(bootstrap_servers: str, source: str, target: str, group_id: str, transactional_id: str) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": group_id, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 6000,
    })
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id})
    producer.init_transactions(30)
    consumer.subscribe([source])
    last_record = time.monotonic()
    try:
        while True:
            batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
            if not consumer.assignment():
                last_record = time.monotonic()
            if not batch:
                if time.monotonic() - last_record > 3:
                    return
                continue
            last_record = time.monotonic()
            producer.begin_transaction()
            for msg in batch:
                payment = json.loads(msg.value())
                producer.produce(target, key=msg.key(),
                                 value=json.dumps({"id": payment["id"], "amount_cents": round(payment["amount"] * 100)}))
            producer.commit_transaction(30)
            consumer.commit(asynchronous=False)   # the offsets right after: simpler than send_offsets_to_transaction
    finally:
        consumer.close()
'''

CHEATS = [
    Cheat("without_transactions",
          lambda nb: replace_solution(nb, "def transfer", WITHOUT_TRANSACTIONS),
          targets=["ledger_is_transactional", "exactly_once_across_a_crash"],
          why="an idempotent producer and a commit after each flushed batch, no transaction"),
    Cheat("offsets_outside_the_transaction",
          lambda nb: replace_solution(nb, "def transfer", OFFSETS_OUTSIDE_THE_TRANSACTION),
          targets=["exactly_once_across_a_crash"],
          why="transactions for the ledger, but the input offsets committed by the consumer after each one"),
]
