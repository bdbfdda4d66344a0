"""Cheats tried on idempotent_retry."""

from . import Cheat, replace_solution


def _config(source: str):
    return lambda nb: replace_solution(nb, "FIXED_CONFIG = {", source)


CHEATS = [
    Cheat("raise_the_timeout", _config('''
FIXED_CONFIG = {**BROKEN_CONFIG, "request.timeout.ms": 30000}   # no timeouts during a 5 s stall, no retries
'''), why="fix the symptom: a request timeout longer than the stall, idempotence still off"),
    Cheat("no_retries", _config('''
FIXED_CONFIG = {**BROKEN_CONFIG, "retries": 0}   # nothing retried, nothing stored twice
'''), why="turn retries off: no duplicates because nothing is retried"),
    Cheat("give_up_quickly", _config('''
FIXED_CONFIG = {**BROKEN_CONFIG, "enable.idempotence": True, "delivery.timeout.ms": 2000}
'''), targets=["no_duplicates_after_lost_acks"],
        why="pass the visible config checks, but give up on a record after 2 s (records fail during a stall)"),
    Cheat("idempotence_on_paper", _config('''
FIXED_CONFIG = {"enable.idempotence": True, **BROKEN_CONFIG, "enable_idempotence": False}
'''), targets=["fixed_config_is_idempotent", "no_duplicates_after_lost_acks"],
        why="a config that reads right key by key, but whose last word (the underscore spelling) turns it off"),
    Cheat("one_in_flight", _config('''
FIXED_CONFIG = {**BROKEN_CONFIG, "max.in.flight.requests.per.connection": 1}   # lesson 04: "the old advice"
'''), targets=["fixed_config_is_idempotent", "no_duplicates_after_lost_acks"],
        why="lesson 04's old advice for ordering, one request in flight, copied as the fix: idempotence still off, "
            "so a retry after a lost acknowledgement is still stored twice"),
]
