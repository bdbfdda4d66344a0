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


def quiet() -> dict[str, Any]:
    """Client config routing librdkafka's log lines and error callbacks to the ``labkit.librdkafka`` logger."""
    return {"logger": LOGGER, "error_cb": lambda err: LOGGER.debug("client error: %s", err)}
