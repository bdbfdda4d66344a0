"""librdkafka's own log lines (``%3|…|FAIL|rdkafka#producer-1| …``) go to Python logging, never under a cell.

Without a ``logger`` in its config, librdkafka prints every connection it loses to the
process's stderr: red lines under whichever notebook cell runs, dozens of lines in a
test run's terminal. :func:`quiet` is the config every client labkit makes carries; the
lines then go to the ``labkit.librdkafka`` logger (the lab's log, a test's captured log).
"""

from __future__ import annotations

import logging
from typing import Any

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
