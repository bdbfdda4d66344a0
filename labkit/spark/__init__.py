"""A SparkSession wired to the notebook's Kafka cluster, with Spark's own Kafka source and sink.

    spark = labkit.spark.session(cluster)
    df = (spark.readStream.format("kafka").options(**labkit.spark.kafka_options(cluster))
          .option("subscribe", topic).load())

The Kafka connector is resolved once into the lab's cache
(:mod:`labkit.spark.connector`) and passed as ``spark.jars``, so starting a session
resolves nothing and works offline; ``spark.jars.packages`` would run an Ivy
resolution (and a network check) at every session start and put second copies
of slf4j, lz4, snappy and Hadoop's client on the classpath. ``labkit setup``
(``make setup``) pre-fetches the jars.

Local defaults suit a 2-core laptop: ``local[2]``, two shuffle partitions, a
small driver heap, no web UI, UTC session time zone, quiet logs, and every
checkpoint, scratch and warehouse directory inside the cluster's own temp dir
(deleted with the cluster). ``master=`` or ``$SPARK_MASTER`` selects a real
Spark cluster instead; there the checkpoint root must be a path every executor
sees (pass ``checkpoint_root=``) and the brokers must be reachable from them.

Layer: the teaching helpers (Spark is what lesson 07 imports).
"""

from __future__ import annotations

from .connector import (CONNECTOR_ARTIFACT, SUPPORTED_JAVA, _pyspark_jar_names, cached_connector, check_java,
                        connector_artifacts, connector_coordinates, connector_dir, ensure_connector, jar_artifact,
                        keep_missing_jars, pyspark_version)
from .driver import (DEFAULT_MASTER, LOCAL_DEFAULTS, checkpoint_dir, driver_log, kafka_options, session, session_conf,
                     stop_session, workdir)
from .streaming import (committed_batches, forget_last_commit, progress_figure, progress_table, wait_for_progress,
                        wait_until_idle, watch_progress)

__all__ = ["CONNECTOR_ARTIFACT", "DEFAULT_MASTER", "LOCAL_DEFAULTS", "SUPPORTED_JAVA", "cached_connector",
           "check_java", "checkpoint_dir", "committed_batches", "connector_artifacts", "connector_coordinates",
           "connector_dir", "driver_log", "ensure_connector", "forget_last_commit", "jar_artifact", "kafka_options",
           "keep_missing_jars", "progress_figure", "progress_table", "pyspark_version", "session", "session_conf",
           "stop_session", "wait_for_progress", "wait_until_idle", "watch_progress", "workdir",
           "_pyspark_jar_names"]
