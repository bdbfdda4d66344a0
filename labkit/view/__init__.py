"""The live cluster view (layer: view, below the cluster that draws it, above the teaching helpers).

``widgets`` (the ``ClusterView`` a notebook shows) draws what ``snapshot`` reads through
pure renderers (``render``); consumer groups come from a child process (``groupread``,
``groupreader``: librdkafka can crash a kernel), broker metrics from the panel
(``panel``). It takes a cluster through ``runtime.protocols.ClusterLike``.
"""
