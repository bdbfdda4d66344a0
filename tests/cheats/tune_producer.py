"""Cheats tried on tune_producer."""

from . import Cheat, replace_solution


def _config(source: str):
    return lambda nb: replace_solution(nb, "TUNED_CONFIG = {", source)


CHEATS = [
    Cheat("acks_one", _config('''
TUNED_CONFIG = {"acks": "1", "enable.idempotence": False, "linger.ms": 20, "batch.size": 1_000_000}
'''), why="skip the followers: acks=1 and no idempotence answer sooner"),
    Cheat("acks_zero_as_the_last_word", _config('''
TUNED_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 20, "batch.size": 1_000_000,
                "request.required.acks": 0}
'''), why="the key the checks look for says all; librdkafka's alias set last says 0 (fire and forget)"),
    Cheat("give_up_quickly", _config('''
TUNED_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 20, "batch.size": 1_000_000,
                "compression.type": "lz4", "message.timeout.ms": 1000}
'''), targets=["loses_nothing_when_a_follower_freezes"],
        why="drop records that take more than a second: fast on a good day, records lost when a follower stalls"),
    Cheat("slow_down_the_baseline", _config('''
TEAM_CONFIG = {**TEAM_CONFIG, "max.in.flight.requests.per.connection": 1, "batch.size": 4096}   # "the team's" producer
TUNED_CONFIG = {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "batch.size": 16384}
'''), targets=["three_times_the_team_producer", "three_times_with_other_records"],
        why="fake the ratio: make the notebook's baseline slower and hand in the old settings"),
]
