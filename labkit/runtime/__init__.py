"""What everything runs on (layer: runtime, the bottom but for ``waiting`` and ``errors``).

The user cache and its lock (``cache``), jars from Maven Central (``maven``), Java
(``jvm``), the Kafka distributions (``distribution``), fast JVM starts (``classdata``),
the environment files and cluster profiles (``environment``, ``profiles``), managed
processes and their watchdog (``processes``, ``watchdog``), Kafka's CLI tools
(``tools``), broker log files (``brokerlogs``), the metrics agent and scraping
(``metrics``), progress bars, the learner's record on this machine (``learner``), the
set-up step registry (``steps``) and what parts need from a cluster (``protocols``).
It knows nothing of clusters as lessons see them.
"""
