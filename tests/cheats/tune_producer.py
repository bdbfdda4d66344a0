"""Cheats tried on tune_producer."""

from . import Cheat, replace_solution


def _config(source: str):
    return lambda nb: replace_solution(nb, "def tuned_config(", source)


#: The checks that need the config to fit the latency budget chosen at grade time.
BUDGETED = ["stays_within_the_latency_budget", "three_times_the_team_producer", "three_times_with_other_records"]

CHEATS = [
    Cheat("acks_one", _config('''
def tuned_config(latency_budget_ms):
    return {"acks": "1", "enable.idempotence": False, "linger.ms": 0, "batch.size": 1_000_000}
'''), why="skip the followers: acks=1 and no idempotence answer sooner"),
    Cheat("acks_zero_as_the_last_word", _config('''
def tuned_config(latency_budget_ms):
    return {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "batch.size": 1_000_000,
            "request.required.acks": 0}
'''), why="the key the checks look for says all; librdkafka's alias set last says 0 (fire and forget)"),
    Cheat("give_up_quickly", _config('''
def tuned_config(latency_budget_ms):
    return {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "batch.size": 1_000_000,
            "compression.type": "lz4", "message.timeout.ms": 1000}
'''), targets=["loses_nothing_when_a_follower_freezes"],
        why="drop records that take more than a second: fast on a good day, records lost when a follower stalls"),
    Cheat("slow_down_the_baseline", _config('''
TEAM_CONFIG = {**TEAM_CONFIG, "max.in.flight.requests.per.connection": 1, "batch.size": 4096}   # "the team's" producer


def tuned_config(latency_budget_ms):
    return {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "batch.size": 16384}
'''), targets=["three_times_the_team_producer", "three_times_with_other_records"],
        why="fake the ratio: make the notebook's baseline slower and hand in the old settings"),
    # issue 25: copying the lesson's code, following the hint alone
    Cheat("lesson_11_settings", _config('''
def tuned_config(latency_budget_ms):
    # the fastest corner of lesson 11's sweep, whatever the budget
    return {"acks": "all", "enable.idempotence": True, "linger.ms": 20, "batch.size": 1_000_000,
            "compression.type": "lz4"}
'''), targets=BUDGETED, why="copy lesson 11's best settings (linger.ms=20) and ignore the latency budget"),
    Cheat("the_hint_alone", _config('''
def tuned_config(latency_budget_ms):
    # "16 kB batches and no linger": bigger batches, let them wait for company; JSON compresses
    return {"acks": "all", "enable.idempotence": True, "batch.size": 1_000_000, "compression.type": "zstd"}
'''), targets=["stays_within_the_latency_budget", "three_times_the_team_producer"],
        why="follow the hint alone: bigger batches and compression, linger.ms left to librdkafka's default (5 ms)"),
]
