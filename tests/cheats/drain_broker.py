"""Cheats tried on drain_broker."""

from . import Cheat, replace_solution

DELETE_AND_RECREATE = '''
def drain(cluster, broker, throttle):
    # "drained": every topic on the broker deleted and created again on the other brokers
    from confluent_kafka.admin import NewTopic

    for name in sorted({t for t, _ in ops.replicas_on(cluster, broker, internal=False)}):
        parts = [p for p in ops.partitions(cluster, [name])]
        cluster.delete_topic(name)
        layout = [[r if r != broker else next(b for b in (1, 2, 3) if b not in p.replicas) for r in p.replicas]
                  for p in parts]
        for f in cluster.admin().create_topics([NewTopic(name, len(parts), replica_assignment=layout)]).values():
            f.result(timeout=30)
    ops.elect_preferred(cluster)
'''

LOWER_THE_REPLICATION_FACTOR = '''
def drain_plan(layout, racks, broker):
    # nothing to copy: just leave the broker out of every replica list
    return [{"topic": t, "partition": p, "replicas": [r for r in replicas if r != broker]}
            for t, p, replicas in layout if broker in replicas]
'''

NO_THROTTLE = '''
def drain(cluster, broker, throttle):
    # the right plan, copied as fast as the brokers can
    layout = [[p.topic, p.partition, list(p.replicas)] for p in ops.partitions(cluster, internal=True)]
    plan = drain_plan(layout, ops.racks(cluster), broker)
    if plan:
        moving = ops.reassign(cluster, ops.Plan({(m["topic"], m["partition"]): tuple(m["replicas"]) for m in plan}))
        moving.wait()
        moving.finish()
    ops.elect_preferred(cluster)
'''

CHEATS = [
    Cheat("delete_and_recreate_topics", lambda nb: replace_solution(nb, "def drain(cluster", DELETE_AND_RECREATE),
          targets=["drains_the_live_cluster"],
          why="broker 4 is empty in no time: delete its topics and create them again elsewhere (their records go)"),
    Cheat("lower_the_replication_factor", lambda nb: replace_solution(nb, "def drain_plan(", LOWER_THE_REPLICATION_FACTOR),
          targets=["plan_moves_only_the_brokers_replicas", "plan_keeps_replication_factor_and_racks",
                   "drains_the_live_cluster", "plan_on_layouts_chosen_now"],
          why="nothing to copy: drop the broker from every replica list (one replica fewer everywhere)"),
    Cheat("no_throttle", lambda nb: replace_solution(nb, "def drain(cluster", NO_THROTTLE),
          targets=["copies_within_the_throttle_and_removes_it"],
          why="the right plan, copied at full speed"),
]
