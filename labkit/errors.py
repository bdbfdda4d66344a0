"""The one exception family of Kafka Lab.

Every failure a learner can meet is a :class:`LabkitError` whose message says,
in one or two sentences, what happened and what to do. Subclasses keep the
facts a caller needs (broker id, log path, valid names) as attributes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


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
            text += "\n--- last lines of " + str(self.log_path) + " ---\n" + self.log_tail
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
