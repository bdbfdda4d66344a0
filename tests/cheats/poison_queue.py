"""Cheats tried on poison_queue."""

from . import Cheat, replace_solution

ACCEPT_ON_RECEIPT = '''
def run_worker(bootstrap: str, topic: str, group: str, do_job, max_attempts: int = 3,
               idle_seconds: float = 5.0) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": rdkafka_log,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 1})
    consumer.subscribe([topic])
    last_job = None
    try:
        while last_job is None or time.monotonic() - last_job < idle_seconds:
            batch = [msg for msg in consumer.poll(0.5) if msg.error() is None]
            for msg in batch:                      # acknowledged at once: the queue never waits for slow jobs
                consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
            if batch:
                consumer.commit_sync(10)
            for msg in batch:
                try:
                    do_job(msg.value())
                except Exception:
                    pass                           # already acknowledged: nothing to give back
                last_job = time.monotonic()
    finally:
        consumer.close()
'''

CONSUMER_GROUP = '''
from confluent_kafka import Consumer


def run_worker(bootstrap: str, topic: str, group: str, do_job, max_attempts: int = 3,
               idle_seconds: float = 5.0) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "logger": rdkafka_log})
    consumer.subscribe([topic])
    last_job = None
    try:
        while last_job is None or time.monotonic() - last_job < idle_seconds:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            for attempt in range(max_attempts):   # retry in place, then skip it: a poison job never blocks
                try:
                    do_job(msg.value())
                    break
                except Exception:
                    continue
            consumer.commit(message=msg, asynchronous=False)   # after the work: nothing lost in a crash
            last_job = time.monotonic()
    finally:
        consumer.close()
'''

RELEASE_FOREVER = '''
def run_worker(bootstrap: str, topic: str, group: str, do_job, max_attempts: int = 3,
               idle_seconds: float = 5.0) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": rdkafka_log,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 1})
    consumer.subscribe([topic])
    last_job = None
    try:
        while last_job is None or time.monotonic() - last_job < idle_seconds:
            batch = [msg for msg in consumer.poll(0.5) if msg.error() is None]
            for msg in batch:
                try:
                    do_job(msg.value())
                    consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                except Exception:                  # the broker's delivery limit archives poison jobs anyway
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE)
                last_job = time.monotonic()
            if batch:
                consumer.commit_sync(10)
    finally:
        consumer.close()
'''

CHEATS = [
    Cheat("accept_on_receipt",
          lambda nb: replace_solution(nb, "def run_worker", ACCEPT_ON_RECEIPT),
          targets=["every_job_done_and_accepted", "nothing_lost_when_a_worker_is_killed"],
          why="acknowledge every job as soon as it is polled (and commit), then work: a crash or a failure loses it"),
    Cheat("plain_consumer_group",
          lambda nb: replace_solution(nb, "def run_worker", CONSUMER_GROUP),
          targets=["workers_share_one_partition", "poison_rejected_within_max_attempts"],
          why="a consumer group committing after the work, retrying in place: one worker per partition, and the "
              "broker never hears of a poison job"),
    Cheat("release_forever",
          lambda nb: replace_solution(nb, "def run_worker", RELEASE_FOREVER),
          targets=["poison_rejected_within_max_attempts"],
          why="release every failure and let the broker's own delivery limit archive poison jobs"),
]
