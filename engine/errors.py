"""The errors weir raises on purpose.

Every message names the object, the value received, and what would be valid.
"""

from __future__ import annotations

from typing import Any


class WeirError(Exception):
    """Base class of every error weir raises on purpose."""


class UsageError(WeirError, ValueError):
    """A caller's mistake: a job that cannot be built, a bad option, a malformed file."""


class ProtocolViolation(WeirError):
    """A peer broke a protocol: an event that is illegal in the current state."""


class IllegalStateTransition(ProtocolViolation):
    """A state machine was asked for a transition its table does not allow."""

    def __init__(self, machine: str, from_state: object, event: str, to_state: object) -> None:
        self.machine = machine
        self.from_state = from_state
        self.event = event
        self.to_state = to_state
        super().__init__(f"{machine}: illegal transition {from_state} -> {to_state} on event '{event}'")


class JobExecutionError(WeirError):
    """A job failed; carries the user's exception and names the operator and subtask."""


class CheckpointError(WeirError):
    """A checkpoint or savepoint that was asked for did not complete; says why."""


class OperatorFailure(WeirError):
    """A user function (or an operator) raised inside a task; names the operator and subtask."""

    def __init__(self, operator: str, subtask_index: int, parallelism: int, cause: BaseException) -> None:
        self.operator = operator
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self.cause = cause
        super().__init__(
            f"operator '{operator}' (subtask {subtask_index + 1}/{parallelism}) failed: "
            f"{type(cause).__name__}: {cause}"
        )

    def __reduce__(self) -> Any:  # pickles (to the JobManager) with its constructor's arguments
        return (type(self), (self.operator, self.subtask_index, self.parallelism, self.cause), self.__dict__)
