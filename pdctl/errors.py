"""Error types that map onto pdctl's exit codes (CLI.md): 1 = the check failed, 2 = bad input, 3 = not calibrated
(parity: no verdict, a control the comparison needs is missing).

Commands raise these instead of printing and exiting themselves, so that the CLI layer is the single place
that turns an error into a message and an exit code, and no user error ever ends in a traceback.
"""

from __future__ import annotations


class PdctlError(Exception):
    """Base class; `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail  # e.g. the tail of a failing process's log
        self.diagnosis: dict | None = None  # a failing run's diagnosis (pdctl.diagnose), for the JSON document


class UserError(PdctlError):
    """Bad input: unreadable or invalid topology, bad option, unreachable URL given by the user (exit 2)."""

    exit_code = 2


class CheckFailed(PdctlError):
    """The thing checked failed: incompatible topology, launch failure, accuracy under floor (exit 1)."""

    exit_code = 1


class NotCalibrated(PdctlError):
    """A verdict that cannot be given: the comparison's noise floor lacks a control it needs, and what differs
    may be what that control would have measured (parity: a TP split unknown or uncontrolled) (exit 3)."""

    exit_code = 3
