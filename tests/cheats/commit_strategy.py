"""Cheats tried on commit_strategy."""

from . import Cheat, replace_solution

COMMIT_AT_THE_END = '''
def consume_loop(consumer, process, idle_seconds: float = 3.0) -> None:
    last = time.monotonic()
    while True:
        batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
        if not consumer.assignment():
            last = time.monotonic()
        if not batch:
            if time.monotonic() - last > idle_seconds:
                consumer.commit(asynchronous=False)   # once, when everything is done: fewer round trips
                return
            continue
        last = time.monotonic()
        for msg in batch:
            process(msg)
'''

COMMIT_IN_A_COMMENT = '''
def consume_loop(consumer, process, idle_seconds: float = 3.0) -> None:
    last = time.monotonic()
    while True:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            if consumer.assignment() and time.monotonic() - last > idle_seconds:
                return
            if not consumer.assignment():
                last = time.monotonic()
            continue
        last = time.monotonic()
        process(msg)
        # consumer.commit(message=msg)  -- the caller's consumer takes care of offsets
'''

COMMIT_BEFORE_PROCESSING = '''
def consume_loop(consumer, process, idle_seconds: float = 3.0) -> None:
    last = time.monotonic()
    while True:
        batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if not m.error()]
        if not consumer.assignment():
            last = time.monotonic()
        if not batch:
            if time.monotonic() - last > idle_seconds:
                return
            continue
        last = time.monotonic()
        consumer.commit(asynchronous=False)   # commit first: a slow process() then never blocks the group
        for msg in batch:
            process(msg)
'''

CHEATS = [
    Cheat("commit_only_at_the_end",
          lambda nb: replace_solution(nb, "def consume_loop", COMMIT_AT_THE_END),
          targets=["nothing_lost_little_replayed_across_crashes"],
          why="commit once, when idle: never loses a record, but a crash replays everything since the start"),
    Cheat("commit_in_a_comment",
          lambda nb: replace_solution(nb, "def consume_loop", COMMIT_IN_A_COMMENT),
          targets="*",
          why="no commit at all, with `.commit(` in a comment for a check that greps the source"),
    Cheat("commit_before_processing",
          lambda nb: replace_solution(nb, "def consume_loop", COMMIT_BEFORE_PROCESSING),
          targets=["nothing_lost_little_replayed_across_crashes"],
          why="commit what poll returned before processing it (at most once): a crash mid-batch skips records"),
]
