"""``JobStatus``: the status of a whole job, as ``pyflink.common.JobStatus`` (Flink's
JobStatus). ``weir.graph.status`` drives its transitions."""

from __future__ import annotations

from enum import Enum


class JobStatus(Enum):
    """The status of a whole job (Flink's JobStatus)."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"

    @property
    def is_globally_terminal(self) -> bool:
        """Finished, canceled or failed: the job is over everywhere and gets cleaned up."""
        return self in _GLOBALLY_TERMINAL_JOB_STATUSES

    @property
    def is_terminal(self) -> bool:
        """Globally terminal, or suspended (over on this JobMaster only)."""
        return self.is_globally_terminal or self is JobStatus.SUSPENDED

    def __str__(self) -> str:
        return self.name

    def is_globally_terminal_state(self) -> bool:
        """PyFlink's name of ``is_globally_terminal``."""
        return self.is_globally_terminal

    def is_terminal_state(self) -> bool:
        """PyFlink's name of ``is_terminal``."""
        return self.is_terminal


_GLOBALLY_TERMINAL_JOB_STATUSES = frozenset({JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED})
