"""Programs labkit runs as child processes (layer: apps, above the runtime only).

``member``: one consumer-group member (``python -m labkit.apps.member``), started,
crashed and frozen by :class:`labkit.workloads.Group`; ``sharemember``: one share-group
member (``python -m labkit.apps.sharemember``), the same for :class:`labkit.sharegroups.ShareGroup`.
A child imports nothing above this layer, so what it runs is exactly what the lesson shows.
"""
