"""Cheats tried on retention_and_compaction."""

from . import Cheat, replace_solution

_DELETE_RECORDS_BY_HAND = '''
def delete_customer(producer, topic: str, customer_id: str) -> None:
    # Forget the customer for real: delete its records on the broker instead of waiting for a cleaner.
    from confluent_kafka import TopicPartition

    producer.flush(10)
    mine = [r for r in cluster.read_all(topic) if r.key_text == customer_id]
    cut = {}
    for r in mine:
        cut[r.partition] = max(cut.get(r.partition, 0), r.offset + 1)
    if cut:
        futures = cluster.admin().delete_records([TopicPartition(topic, p, o) for p, o in cut.items()])
        for future in futures.values():
            future.result(10)
'''

_VISIBLE_TIMINGS = '''
def table_topic_config(max_dirty_ms: int, keep_tombstone_ms: int) -> dict:
    # tuned until the checks in the notebook passed
    return {"cleanup.policy": "compact", "max.compaction.lag.ms": "1000", "delete.retention.ms": "3000"}
'''

_SEGMENT_MS_ONLY = '''
def table_topic_config(max_dirty_ms: int, keep_tombstone_ms: int) -> dict:
    # close a segment every max_dirty_ms so the cleaner can get at it
    return {"cleanup.policy": "compact", "segment.ms": str(max_dirty_ms),
            "delete.retention.ms": str(keep_tombstone_ms)}
'''

_RETENTION_INSTEAD = '''
def table_topic_config(max_dirty_ms: int, keep_tombstone_ms: int) -> dict:
    # old records go after a while, and so do deleted customers
    return {"cleanup.policy": "compact,delete", "max.compaction.lag.ms": str(max_dirty_ms),
            "delete.retention.ms": str(keep_tombstone_ms), "retention.ms": str(keep_tombstone_ms)}
'''

CHEATS = [
    Cheat("delete_records_by_hand",
          lambda nb: replace_solution(nb, "def delete_customer", _DELETE_RECORDS_BY_HAND),
          targets=["delete_customer_writes_a_tombstone", "deleted_customers_disappear",
                   "a_few_changes_to_a_big_table_are_compacted_in_time", "tombstones_stay_for_the_time_asked_then_go"],
          why="delete a customer with the admin API's delete_records (up to its last record) instead of a tombstone"),
    Cheat("the_visible_timings_hard_coded",
          lambda nb: replace_solution(nb, "def table_topic_config", _VISIBLE_TIMINGS),
          targets=["tombstones_stay_for_the_time_asked_then_go"],
          why="settings tuned to the notebook's timings (1000 ms, 3000 ms) whatever the arguments say"),
    Cheat("segment_ms_instead_of_a_compaction_lag",
          lambda nb: replace_solution(nb, "def table_topic_config", _SEGMENT_MS_ONLY),
          targets=["a_few_changes_to_a_big_table_are_compacted_in_time", "tombstones_stay_for_the_time_asked_then_go"],
          why="roll segments every max_dirty_ms and rely on the default dirty ratio: a few changes in a big table "
              "are never compacted"),
    Cheat("retention_deletes_the_deleted",
          lambda nb: replace_solution(nb, "def table_topic_config", _RETENTION_INSTEAD),
          targets=["config_makes_a_compacted_topic", "only_the_latest_value_survives", "deleted_customers_disappear",
                   "a_few_changes_to_a_big_table_are_compacted_in_time", "tombstones_stay_for_the_time_asked_then_go"],
          why="add time retention so deleted customers go for sure: latest values go with them"),
]
