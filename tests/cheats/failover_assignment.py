"""Cheats tried on failover_assignment."""

from . import Cheat, replace_solution

FOLLOW_BY_NAME = '''
def follow(consumer, me: str, live: dict[str, int], partitions: list[tuple[str, int]]) -> list[tuple[str, int]]:
    mine = sorted(partitions) if me == "primary" else []     # the primary is called "primary"
    current = sorted((tp.topic, tp.partition) for tp in consumer.assignment())
    if current != mine:
        if mine:
            consumer.assign([TopicPartition(topic, partition) for topic, partition in mine])
        else:
            consumer.unassign()
    return mine
'''

ANSWERS_FOR_THE_VISIBLE_CASES = '''
def failover_assign(members: dict[str, int], partitions: list[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    if not members:
        return {}
    known = {("a", "b", "c"): "b", ("east", "north", "west"): "east", ("solo",): "solo"}
    active = known.get(tuple(sorted(members)), max(members, key=members.get))
    return {name: sorted(partitions) if name == active else [] for name in members}
'''

CHEATS = [
    Cheat("follow_by_name",
          lambda nb: replace_solution(nb, "def follow", FOLLOW_BY_NAME),
          targets=["failover_and_back_loses_nothing"],
          why="follow() ignores who is alive and makes the member called 'primary' active, as in the demo"),
    Cheat("answers_for_the_visible_cases",
          lambda nb: replace_solution(nb, "def failover_assign", ANSWERS_FOR_THE_VISIBLE_CASES),
          targets=["hidden_cases"],
          why="hard-code the visible checks' answers, max() by priority for anything else"),
    Cheat("every_statement_true",
          lambda nb: replace_solution(nb, "ANSWERS = {", "ANSWERS = {key: True for key in STATEMENTS}"),
          targets=["assign_trade_offs"],
          why="Task 3 without thinking: call every statement about assign() true"),
]
