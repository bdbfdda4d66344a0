"""Plain data across the kernel boundary: the only thing a learner's kernel may hand the grader.

Values are encoded as JSON with tags for what JSON lacks (bytes, tuples, sets, dicts
with non-string keys). Anything else -- objects, functions, modules -- is refused:
the grader only ever decodes data, never code, so nothing a learner's kernel sends
can run in the grader's process.

This file imports only the standard library: the grader sends its source into the
learner's kernel, where the same two functions encode what the learner's code returned.
"""

import base64
import math


class NotPlainData(TypeError):
    """Raised when a value is not plain data (numbers, text, bytes, and lists/tuples/sets/dicts of them)."""


def encode(value, depth=0):
    """``value`` as JSON-ready data; raises :class:`NotPlainData` for anything else."""
    if depth > 50:
        raise NotPlainData("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else {"$int": str(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$set": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$map": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    raise NotPlainData(f"a {type(value).__name__} is not plain data")


def decode(data):
    """The value :func:`encode` encoded; malformed data raises ``ValueError``."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, inner), = data.items()
        if tag == "$bytes":
            return base64.b64decode(inner)
        if tag == "$int":
            return int(inner)
        if tag == "$float":
            return float(inner)
        if tag == "$tuple":
            return tuple(decode(v) for v in inner)
        if tag == "$set":
            return {_hashable(decode(v)) for v in inner}
        if tag == "$map":
            return {_hashable(decode(k)): decode(v) for k, v in inner}
    raise ValueError(f"not wire data: {str(data)[:80]}")


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    return value
