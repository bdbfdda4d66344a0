"""Cheats tried on durability_config."""

from . import Cheat, replace_solution


def _settings(source: str):
    return lambda nb: replace_solution(nb, "REPLICATION_FACTOR =", source)


CHEATS = [
    Cheat("acks_one", _settings('''
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
PRODUCER_CONFIG = {"acks": "1", "enable.idempotence": False}   # fast, and a leader kill lost nothing when I tried
'''), targets=["acks_wait_for_the_isr", "retries_do_not_duplicate", "survives_the_failure_script"],
        why="acks=1: passes a plain leader kill most of the time, loses what the leader acknowledged alone"),
    Cheat("right_on_paper_acks_one_in_effect", _settings('''
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
PRODUCER_CONFIG = {"acks": "all", "retries": 5, "request.required.acks": 1}
'''), targets=["acks_wait_for_the_isr", "survives_the_failure_script"],
        why="the key the checks look for says all; librdkafka's alias set last says 1"),
    Cheat("give_up_quickly", _settings('''
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True, "delivery.timeout.ms": 3000}
'''), targets=["survives_the_failure_script"],
        why="every setting the visible checks read is right, but records are dropped after 3 s of failover"),
    Cheat("lesson_04_acks_cell", _settings('''
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}        # the lesson's profile
PRODUCER_CONFIG = {"acks": "all", "message.timeout.ms": 5000}   # lesson 04's acks cell: acks=all, quick = 5 s
'''), targets=["retries_do_not_duplicate", "survives_the_failure_script"],
        why="copy lesson 04's acks cell, which the acks hint points at: acks=all and its 5 s message timeout, "
            "idempotence left at librdkafka's default (off)"),
]
