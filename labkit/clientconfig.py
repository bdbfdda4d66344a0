"""A producer configuration as librdkafka applies it: aliases resolved, underscores for dots, the last key wins.

Exercises whose answer is a config dict (plain data) read it through :func:`effective_config`
before the grader builds a producer from it in its own process: a config that reads right key by
key but whose last word says otherwise (``"acks": "all"`` then ``"request.required.acks": 1``) is
judged by what librdkafka would do, and only *delivery* settings are taken (how records are
batched, compressed, sent, retried and acknowledged — not addresses, callbacks or plugins).
"""

from __future__ import annotations

from typing import Any, Mapping

#: librdkafka's aliases, to one name.
ALIASES = {"request.required.acks": "acks", "message.send.max.retries": "retries",
           "delivery.timeout.ms": "message.timeout.ms", "queue.buffering.max.ms": "linger.ms",
           "max.in.flight": "max.in.flight.requests.per.connection", "compression.codec": "compression.type"}
#: The producer settings a config may hold: how records are batched, sent, retried and acknowledged.
DELIVERY_SETTINGS = frozenset({
    "acks", "enable.idempotence", "retries", "retry.backoff.ms", "retry.backoff.max.ms", "request.timeout.ms",
    "message.timeout.ms", "linger.ms", "batch.size", "batch.num.messages", "max.in.flight.requests.per.connection",
    "compression.type", "compression.level", "enable.gapless.guarantee", "queue.buffering.max.messages",
    "queue.buffering.max.kbytes", "socket.timeout.ms", "client.id", "partitioner", "sticky.partitioning.linger.ms",
    "message.max.bytes", "socket.keepalive.enable", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "topic.metadata.refresh.interval.ms", "metadata.max.age.ms",
})
#: librdkafka's defaults for the settings checks read most.
DEFAULTS = {"acks": "all", "enable.idempotence": False, "linger.ms": 5, "batch.size": 1_000_000,
            "compression.type": "none", "retries": 2147483647, "request.timeout.ms": 30000,
            "message.timeout.ms": 300000}


def effective_config(config: Any, name: str, allowed: frozenset[str] = DELIVERY_SETTINGS) -> dict[str, Any]:
    """``config`` as librdkafka applies it: one name per setting (dots; aliases resolved; the last one wins).

    Fails (``AssertionError`` naming ``name``, the learner's variable) on anything but a dict of
    ``allowed`` setting names to strings, numbers or booleans."""
    assert isinstance(config, dict), f"{name} must be a dict of producer settings, not {type(config).__name__}"
    out: dict[str, Any] = {}
    for key, value in config.items():
        assert isinstance(key, str), f"{name} has a key that is not a setting name: {key!r}"
        setting = key if "." in key else key.replace("_", ".")
        setting = ALIASES.get(setting, setting)
        assert setting in allowed, \
            f"{name} sets {key!r}: only producer delivery settings count here ({', '.join(sorted(allowed))})"
        assert isinstance(value, (str, int, float, bool)), f"{name}[{key!r}] should be a string, number or bool"
        out.pop(setting, None)
        out[setting] = value
    return out


def setting(config: Mapping[str, Any], name: str) -> Any:
    """What ``config`` (already effective) sets ``name`` to, else librdkafka's default."""
    return config.get(name, DEFAULTS.get(name))


def is_true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "t", "1")


def acks_all(config: Mapping[str, Any]) -> bool:
    return str(setting(config, "acks")).strip().lower() in ("all", "-1")


__all__ = ["ALIASES", "DEFAULTS", "DELIVERY_SETTINGS", "acks_all", "effective_config", "is_true", "setting"]


def librdkafka_defaults() -> dict[str, str]:
    """Every producer and consumer setting with the value librdkafka itself reports for it before anything is
    set: its own configuration dump (``rd_kafka_conf_dump`` and ``rd_kafka_topic_conf_dump`` of new, empty
    configurations), read from the library confluent-kafka loaded. Names as in librdkafka's CONFIGURATION.md
    (``request.required.acks``, ``message.send.max.retries``; :data:`ALIASES` maps them to the Java names)."""
    import ctypes

    import confluent_kafka.cimpl as cimpl

    lib = ctypes.CDLL(cimpl.__file__)  # the extension module; librdkafka's symbols resolve through it
    found: dict[str, str] = {}
    for kind in ("conf", "topic_conf"):
        new, dump, destroy = (getattr(lib, f"rd_kafka_{kind}_{op}") for op in ("new", "dump", "destroy"))
        new.restype = ctypes.c_void_p
        dump.restype = ctypes.POINTER(ctypes.c_char_p)
        dump.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_conf_dump_free.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
        conf, count = new(), ctypes.c_size_t()
        pairs = dump(conf, ctypes.byref(count))
        try:
            found.update({pairs[i].decode(): pairs[i + 1].decode() for i in range(0, count.value, 2)})
        finally:
            lib.rd_kafka_conf_dump_free(pairs, count)
            destroy(conf)
    return found
