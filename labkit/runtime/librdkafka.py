"""librdkafka's own log lines (``%3|…|FAIL|rdkafka#producer-1| …``) go to Python logging, never under a cell.

Without a ``logger`` in its config, librdkafka prints every connection it loses to the
process's stderr: red lines under whichever notebook cell runs, dozens of lines in a
test run's terminal. :func:`quiet` is the config every client labkit makes carries; the
lines then go to the ``labkit.librdkafka`` logger (the lab's log, a test's captured log).

:class:`Producer` is the producer labkit hands out: confluent-kafka's, whose ``flush`` keeps
waiting while records are still being acknowledged (a busy machine is slow, not broken).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import confluent_kafka

LOGGER = logging.getLogger("labkit.librdkafka")

#: ``socket.connection.setup.timeout.ms`` for clients that speak TLS or SASL: on a loaded 2-core machine the
#: TLS and SCRAM handshakes of a new connection take seconds, and a bound of 2-3 s failed good connections
#: again and again (a SCRAM user never "accepted" by one broker, an old password never "refused", in a
#: fresh clone's make test). A refusal -- a wrong password, an untrusted CA, plaintext on a TLS port -- comes
#: as soon as the broker answers, so this bounds only a broker that does not answer at all.
HANDSHAKE_MS = 15_000


def quiet() -> dict[str, Any]:
    """Client config routing librdkafka's log lines and error callbacks to the ``labkit.librdkafka`` logger."""
    return {"logger": LOGGER, "error_cb": lambda err: LOGGER.debug("client error: %s", err)}


class Producer(confluent_kafka.Producer):
    """confluent-kafka's ``Producer``, with one change: ``flush(timeout)`` gives up only after ``timeout``
    seconds in which no record was acknowledged.

    confluent-kafka's ``flush(10)`` returns after 10 s whatever happened, with the number of records still
    waiting; code that ignores that number (as most does) goes on with records missing. On a busy machine a
    cluster that acknowledges slowly is still acknowledging: here ``flush`` keeps waiting while the queue
    shrinks, and returns the same number as confluent-kafka's when it stalls (a broker down, ``min.insync``
    not met)."""

    def flush(self, timeout: float = -1) -> int:
        if timeout is None or timeout < 0:
            return super().flush()
        left, quiet_since = self._waiting(), time.monotonic()
        while True:
            super().flush(max(0.0, min(1.0, quiet_since + timeout - time.monotonic())))
            now_left = self._waiting()
            if now_left == 0:
                return 0
            if now_left < left:
                left, quiet_since = now_left, time.monotonic()
            elif time.monotonic() - quiet_since >= timeout:
                return now_left

    def _waiting(self) -> int:
        """The records not yet acknowledged. ``len()`` also counts what waits to be served by ``poll()`` (log lines
        and error callbacks: a producer whose broker is down queues one per connection attempt), so that is
        served first: a count that went down means records were acknowledged, not that a log line was printed."""
        self.poll(0)
        return len(self)
