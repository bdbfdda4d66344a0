"""The exercise notebook durability_config: its text, code, and reference solution (the learner copy is generated from it).

Built by labkit.authoring; its checks are in checks.py beside this file."""

from labkit.authoring import Notebook

nb = Notebook("Exercise · Settings that lose nothing", exercise="durability_config")

nb.md("""
# Exercise · Settings that lose nothing

Your team's payments topic must never lose a record the producer was told was written — even
while brokers crash and restart. Choose the **topic** settings and the **producer** settings.

The grader runs failure scripts against your settings on a real three-broker cluster of its own:
the one you can try below (the leader of a partition is killed while records are produced), and a
longer one — about 600 records while the followers of a partition freeze for a moment, their
leader is killed and later restarted, then another broker is killed and brought back. Full marks
when no acknowledged record is lost, none is stored twice, and every record is acknowledged in
the end. (The grader's producer uses your producer *delivery* settings — acks, idempotence,
retries, timeouts, batching — and gives up on a record after 60 s unless you set
`message.timeout.ms` yourself.)

*About 20 minutes. Goes with lessons 03 and 04.*
""")
nb.md("""
## Setup
""")
nb.code("""
import labkit
from labkit.grading import exercise
from labkit.producing import counts_frame, produce_and_count

labkit.setup_check()
cluster = labkit.start_cluster()          # three brokers
ex = exercise("durability_config")
""")
nb.md("""
## Task — three settings

* `REPLICATION_FACTOR`: how many copies of each partition.
* `TOPIC_CONFIG`: topic settings (a dict of strings), e.g. `{"min.insync.replicas": "..."}`.
* `PRODUCER_CONFIG`: confluent-kafka producer settings (dots in the names, as in the docs).

Think about what each failure does: which replicas are in the ISR, whether a write can be
acknowledged before it is on enough disks, and what a retry after a failover does.
""")
nb.code('''
### BEGIN SOLUTION
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
PRODUCER_CONFIG = {"acks": "all", "enable.idempotence": True}
### END SOLUTION
''')
nb.code("""
ex.check(globals())
""")
nb.md("""
## Try the failure script yourself

This is the failure the check `survives_a_leader_kill` runs: kill the leader of partition 0 halfway
(the grader's hidden script is longer).
""")
nb.code("""
topic = cluster.create_topic("payments", partitions=3, replication_factor=REPLICATION_FACTOR, config=TOPIC_CONFIG)
victim = cluster.describe_topic(topic)[0].leader
config = {k.replace(".", "_"): v for k, v in PRODUCER_CONFIG.items()}
trial = produce_and_count(cluster, topic, count=300, pace=0.004, **config,
                          actions={150: lambda: cluster.kill_broker(victim)})
cluster.start_broker(victim)
counts_frame({"your settings, leader killed": trial})
""", tags=("demo",))
nb.code("""
cluster.stop()
""")
nb.get_graded()
