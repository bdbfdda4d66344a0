"""The one exception family of Kafka Lab.

Every failure a learner can meet is a :class:`LabkitError` whose message says,
in one or two sentences, what happened and what to do. Subclasses keep the
facts a caller needs (broker id, log path, valid names) as attributes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence


class LabkitError(Exception):
    """Base class: raised when Kafka Lab cannot do what was asked."""

    #: One line saying what to do about it (already part of ``str(error)``).
    hint: str = ""

    def __init__(self, message: str, hint: str = "") -> None:
        self.hint = hint
        super().__init__(f"{message} {hint}".strip() if hint else message)

    def _render_traceback_(self) -> list[str]:  # IPython: show the message, not a wall of frames
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


class JavaError(LabkitError):
    """Raised when no suitable Java runtime (17 or newer) can be found."""


class DistributionError(LabkitError):
    """Raised when the Kafka jars cannot be found or fetched."""


class OfflineError(DistributionError):
    """Raised when the jars are not cached and Maven Central cannot be reached."""


class ProfileError(LabkitError):
    """Raised for an unknown cluster profile; ``valid`` lists the known ones."""

    def __init__(self, message: str, hint: str = "", valid: Sequence[str] = ()) -> None:
        self.valid = list(valid)
        super().__init__(message, hint)


class SettingError(LabkitError):
    """Raised for an unknown or malformed broker setting; ``suggestions`` lists close names."""

    def __init__(self, message: str, hint: str = "", suggestions: Sequence[str] = ()) -> None:
        self.suggestions = list(suggestions)
        super().__init__(message, hint)


class BackendError(LabkitError):
    """Raised for an unknown backend, or one whose requirements are missing."""


class ProcessStartError(LabkitError):
    """Raised when a process the lab started (a broker, a registry, a Connect worker) exited or did not
    come up; carries its name, the log it wrote and that log's last lines."""

    def __init__(self, message: str, hint: str = "", name: str = "", log_path: Path | None = None,
                 log_tail: str = "") -> None:
        self.name = name
        self.log_path = log_path
        self.log_tail = log_tail
        super().__init__(message, hint)

    def __str__(self) -> str:
        text = super().__str__()
        if self.log_tail:
            # A failed start removes the cluster's directory, logs and all: name a file only while it exists.
            if self.log_path and Path(self.log_path).exists():
                where = str(self.log_path)
            else:
                where = (f"{self.name}'s log" if self.name else "the log") + " (removed with its directory)"
            text += "\n--- last lines of " + where + " ---\n" + self.log_tail
        return text


class BrokerStartError(ProcessStartError):
    """Raised when a broker did not come up; carries its id, log path and log tail."""

    def __init__(
        self,
        message: str,
        hint: str = "",
        broker_id: int | None = None,
        log_path: Path | None = None,
        log_tail: str = "",
    ) -> None:
        self.broker_id = broker_id
        super().__init__(message, hint, name=f"broker {broker_id}" if broker_id is not None else "",
                         log_path=log_path, log_tail=log_tail)


class PortInUseError(BrokerStartError):
    """Raised when a broker could not bind its port (another process took it)."""


class SecurityError(LabkitError):
    """Raised for a user or certificate a secured cluster does not have, or asked of a cluster without security."""


class ClusterStateError(LabkitError):
    """Raised when an operation does not fit the cluster's state (stopped cluster, unknown broker)."""


class UnsupportedOperation(LabkitError):
    """Raised when a backend cannot do something, e.g. kill a broker of an external cluster."""


class WaitTimeout(LabkitError):
    """Raised when a wait ran out of time; ``evidence`` holds what was last seen."""

    def __init__(self, message: str, hint: str = "", evidence: str = "") -> None:
        self.evidence = evidence
        super().__init__(message, hint)

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n{self.evidence}" if self.evidence else text


class ToolError(LabkitError):
    """Raised when a Kafka command-line tool is unknown or exits with an error."""

    def __init__(self, message: str, hint: str = "", returncode: int | None = None, output: str = "") -> None:
        self.returncode = returncode
        self.output = output
        super().__init__(message, hint)


class LimitError(LabkitError):
    """Raised when starting a cluster would go past a learner's limit in a classroom (clusters at once, memory)."""

    def __init__(self, message: str, hint: str = "", limit: str = "", used: float = 0, allowed: float = 0) -> None:
        self.limit, self.used, self.allowed = limit, used, allowed
        super().__init__(message, hint)


class ClassroomError(LabkitError):
    """Raised when the classroom (``labkit classroom``) cannot be set up or served as configured."""


#: What a client error a learner meets in a cell usually means, and what to try (by librdkafka's error name).
KAFKA_HINTS = {
    "_TIMED_OUT": "A broker did not answer in time. On a busy machine that happens: run the cell again; "
                  "`cluster.brokers` shows whether one is stopped or paused.",
    "_MSG_TIMED_OUT": "The record was not acknowledged within message.timeout.ms: its partition's leader did "
                      "not answer (a stopped or paused broker, or too few in-sync replicas).",
    "_TRANSPORT": "The connection to a broker broke: is the cluster still running (`cluster`)?",
    "_ALL_BROKERS_DOWN": "No broker answers: is the cluster still running (`cluster`)? `cluster.stop()` ends it.",
    "UNKNOWN_TOPIC_OR_PART": "The broker that answered does not know this topic: create it with "
                             "`cluster.create_topic(...)`, which returns once every broker knows it.",
    "TOPIC_AUTHORIZATION_FAILED": "This principal has no ACL allowing that on the topic (lesson 08).",
    "GROUP_AUTHORIZATION_FAILED": "This principal has no READ ACL on the consumer group (lesson 08).",
    "NOT_ENOUGH_REPLICAS": "Fewer in-sync replicas than min.insync.replicas: acks=all writes are refused.",
}


def kafka_error_paragraph(value: BaseException, cell_line: str = "") -> str:
    """One readable paragraph for a confluent-kafka exception raised in a notebook cell: what Kafka said, where,
    what it usually means, and how busy the machine is — instead of a bare client exception trace."""
    err = value.args[0] if value.args else None
    name = err.name() if hasattr(err, "name") else type(value).__name__
    said = err.str() if hasattr(err, "str") else str(value)
    hint = KAFKA_HINTS.get(name, "See the lesson's explanation of this error, or run the cell again.")
    load = machine_load("is")
    where = f" ({cell_line})" if cell_line else ""
    return f"Kafka said {name}: {said}{where}. {hint}" + (f" {load}" if load else "")


def load_average() -> Optional[tuple[float, int]]:
    """This machine's 1-minute load average and its cores; None where no load average exists."""
    import os

    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except (AttributeError, OSError):
        return None


def machine_load(tense: str = "was") -> str:
    """One sentence on how busy this machine is (the 1-minute load average against its cores); ``tense``:
    "was" after a wait that ran out, "is" for an error just raised. Empty where no load average exists."""
    measured = load_average()
    if measured is None:
        return ""
    one, cores = measured
    busy = " — busy: other programs compete for the CPU" if one > cores else ""
    return f"The machine's load average {tense} {one:.1f} on {cores} cores{busy}."
