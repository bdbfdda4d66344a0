"""Cheats tried on predict_placement."""

from . import Cheat, replace_solution

_ORACLE = '''
_oracle_topics, _oracle_producers = {}, {}


def predict(key, num_partitions: int, config: dict):
    """Ask the broker: produce the key with the real client and see where it lands."""
    name = config.get("partitioner", "consistent_random")
    if isinstance(key, str):
        key = key.encode()
    if (key is None and name.endswith("_random")) or (key == b"" and name == "consistent_random"):
        return None
    if (name, num_partitions) not in _oracle_topics:
        _oracle_topics[name, num_partitions] = cluster.create_topic(f"oracle-{name}-{num_partitions}",
                                                                    partitions=num_partitions, exist_ok=True)
    if name not in _oracle_producers:
        _oracle_producers[name] = cluster.producer(partitioner=name)
    producer, landed = _oracle_producers[name], []
    producer.produce(_oracle_topics[name, num_partitions], key=key, value=b"?",
                     on_delivery=lambda err, msg: landed.append(msg.partition()))
    producer.flush(10)
    return landed[0]
'''

_HALF_A_MODEL = '''
def predict(key, num_partitions: int, config: dict):
    name = config.get("partitioner", "consistent_random")
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode()
    if name.startswith("consistent"):
        return zlib.crc32(key) % num_partitions
    if name.startswith("murmur2"):
        return to_positive(murmur2(key)) % num_partitions
    return None   # fnv1a: nobody uses it
'''

_COUNT_EVERYTHING = '''
def produce_and_compare(cluster, topic: str, keys: list, config: dict) -> dict:
    producer = cluster.producer(**config)
    for key in keys:
        producer.produce(topic, key=key, value=b"payload")
        producer.poll(0)
    producer.flush(30)
    return {"matched": len(keys), "total": len(keys)}     # my model is right anyway
'''

CHEATS = [
    Cheat("import_the_reference",
          lambda nb: replace_solution(nb, "def predict", '''
from labkit.partitioning import librdkafka_partition


def predict(key, num_partitions: int, config: dict):
    return librdkafka_partition(key, num_partitions, config.get("partitioner", "consistent_random"))
'''),
          why="wrap labkit's own model of the client"),
    Cheat("ask_the_broker", lambda nb: replace_solution(nb, "def predict", _ORACLE),
          targets=["predict_is_a_model_for_any_partition_count"],
          why="no model at all: predict produces the key to a scratch topic and returns where it landed"),
    Cheat("half_a_model", lambda nb: replace_solution(nb, "def predict", _HALF_A_MODEL),
          targets=["predictions_match_the_broker_on_unseen_topics", "random_cases_are_none",
                   "predict_is_a_model_for_any_partition_count"],
          why="model only what the visible checks ask (default and murmur2_random, null keys), skip fnv1a "
              "and empty keys"),
    Cheat("compare_counts_everything", lambda nb: replace_solution(nb, "def produce_and_compare", _COUNT_EVERYTHING),
          targets=["compare_counts_what_predict_placed"],
          why="produce, but report every record as matched without reading the broker"),
]
