"""Cheats tried on dr_failover."""

from . import Cheat, replace_solution

IMPORT_THE_REFERENCE = '''
from labkit.services.mirror import translated_offsets as lab_translation


def translated_offsets(bootstrap: str, group: str, source_alias: str, topic: str) -> dict[int, int]:
    return lab_translation(labkit.connect(bootstrap), group, source_alias, topic)
'''

FROM_THE_EARLIEST = '''
def failover_consumer(bootstrap: str, group: str, source_alias: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([f"{source_alias}.{topic}"])      # safe: nothing can be missed
    return consumer
'''

FROM_THE_LATEST = '''
def failover_consumer(bootstrap: str, group: str, source_alias: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                         "enable.auto.commit": False})
    consumer.subscribe([f"{source_alias}.{topic}"])      # no duplicates: only what comes next
    return consumer
'''

PRIMARYS_OFFSETS = '''
def failover_consumer(bootstrap: str, group: str, source_alias: str, topic: str) -> Consumer:
    import uuid

    remote = f"{source_alias}.{topic}"
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}", "enable.auto.commit": False})
    checkpoints = f"{source_alias}.checkpoints.internal"
    low, high = reader.get_watermark_offsets(TopicPartition(checkpoints, 0), timeout=10)
    reader.assign([TopicPartition(checkpoints, 0, OFFSET_BEGINNING)])
    committed, done = {}, high == 0                      # the group's commits on primary: "the same offsets"
    while not done:
        msg = reader.poll(1.0)
        if msg is None or msg.error():
            continue
        g, t, partition, upstream, _downstream = decode_checkpoint(msg.key(), msg.value())
        if g == group and t == remote:
            committed[partition] = upstream
        done = msg.offset() + 1 >= high
    reader.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    partitions = consumer.list_topics(remote, timeout=10).topics[remote].partitions
    consumer.assign([TopicPartition(remote, p, committed.get(p, OFFSET_BEGINNING)) for p in sorted(partitions)])
    return consumer
'''

#: issue 25: the written answer the notebook used to ask for, handed in as prose (the lesson's words), and the
#: first choice everywhere.
PROSE_ANSWERS = '''
WHY_TWICE = "MirrorMaker only knows the offset pairs it wrote down, so a failed-over group re-reads a little"
UPSTREAM_ON_DR = "the upstream offset is primary's numbering"
'''
FIRST_CHOICES = '''
WHY_TWICE = "a"
UPSTREAM_ON_DR = "a"
'''

CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def translated_offsets", IMPORT_THE_REFERENCE),
          why="call the lab's own translation (labkit.services.mirror.translated_offsets)"),
    Cheat("from_the_earliest",
          lambda nb: replace_solution(nb, "def failover_consumer", FROM_THE_EARLIEST),
          targets=["fails_over_after_a_crash"],
          why="subscribe on dr and let auto.offset.reset=earliest start from the beginning (nothing missed)"),
    Cheat("from_the_latest",
          lambda nb: replace_solution(nb, "def failover_consumer", FROM_THE_LATEST),
          targets=["fails_over_after_a_crash"],
          why="subscribe on dr from the latest offset (no duplicates)"),
    Cheat("primarys_offsets_untranslated",
          lambda nb: replace_solution(nb, "def failover_consumer", PRIMARYS_OFFSETS),
          targets=["fails_over_after_a_crash"],
          why="resume at the offsets the group committed on primary (the checkpoints' upstream offsets)"),
    Cheat("prose_instead_of_a_letter", lambda nb: replace_solution(nb, "WHY_TWICE =", PROSE_ANSWERS),
          targets=["why_some_records_twice", "upstream_offset_on_dr"],
          why="answer the questions with lesson 10's sentences instead of choosing"),
    Cheat("first_choice_everywhere", lambda nb: replace_solution(nb, "WHY_TWICE =", FIRST_CHOICES),
          targets=["why_some_records_twice", "upstream_offset_on_dr"],
          why="pick the first choice of every question"),
]
