"""Several named clusters in one notebook (a primary and its disaster-recovery copy), stopped together.

    primary, dr = labkit.start_clusters(["primary", "dr"], profile="single-broker")
    clusters = labkit.start_clusters(["east", "west"])     # clusters["east"], clusters.west, clusters.stop()
    with labkit.start_clusters(["a", "b"]) as (a, b): ...

Each cluster is an ordinary one (see :func:`labkit.start_cluster`) with a ``label`` (its
name in reprs and in the live view, and MirrorMaker 2's alias for it) and a ``colour``
(the view's frame and title), so two views side by side cannot be confused.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence, Union

#: Colours given to the clusters of a set, in order: distinct, and none of the view's status colours.
COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2")


class ClusterSet(Sequence[Any]):
    """Named clusters started together: unpack it, index it by position or name, ``stop()`` them all."""

    def __init__(self, clusters: Sequence[Any]) -> None:
        self._clusters = list(clusters)

    @property
    def names(self) -> list[str]:
        return [c.label for c in self._clusters]

    def __getitem__(self, key: Union[int, str, slice]) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            for c in self._clusters:
                if c.label == key:
                    return c
            raise KeyError(f"no cluster {key!r} here; the clusters are {', '.join(self.names)}")
        return self._clusters[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(str(exc)) from None

    def __len__(self) -> int:
        return len(self._clusters)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._clusters)

    def stop(self) -> None:
        """Stop every cluster (the last started first), with its services; safe to call twice."""
        errors = []
        for cluster in reversed(self._clusters):
            try:
                cluster.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others, then say what failed
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> "ClusterSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return "<ClusterSet\n" + "\n".join(f"  {c!r}" for c in self._clusters) + "\n>"

    def _repr_html_(self) -> str:
        return "<div>" + "".join(c._repr_html_() for c in self._clusters) + "</div>"


__all__ = ["COLOURS", "ClusterSet"]
