"""``JobClient`` and ``JobExecutionResult``, as ``pyflink.common``'s: what ``execute_async``
and ``execute`` hand back. ``JobClient`` here names the calls; ``weir.cluster.client``'s
JobClient runs them against the embedded cluster."""

from __future__ import annotations

from typing import Any

from weir.common.completable_future import CompletableFuture
from weir.common.job_status import JobStatus


class JobID(str):
    """A job's ID (32 hex digits), as ``pyflink.common.JobID``; it is its own string."""

    __slots__ = ()


class JobClient:
    """A handle on a submitted job (``env.execute_async``)."""

    def get_job_id(self) -> JobID:
        raise NotImplementedError

    def get_job_status(self) -> CompletableFuture:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        format_type: str = "canonical",
    ) -> Any:
        raise NotImplementedError

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, format_type: str = "canonical"
    ) -> Any:
        raise NotImplementedError

    def get_accumulators(self) -> CompletableFuture:
        """The job's accumulators (weir has none yet: an empty dict)."""
        return CompletableFuture.completed({})

    def get_job_execution_result(self) -> CompletableFuture:
        raise NotImplementedError


class JobExecutionResult:
    """What ``execute()`` returns (PyFlink's JobExecutionResult)."""

    def __init__(self, result: Any, statistics: list[Any] | None = None) -> None:
        self._result = result
        self.statistics = statistics or []

    def get_job_id(self) -> JobID:
        return JobID(self._result.job_id)

    def get_job_status(self) -> JobStatus:
        return self._result.status

    def get_net_runtime(self) -> int:
        """Milliseconds from the job's start to its end."""
        return self._result.net_runtime_ms

    def get_user_metrics(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The metrics user functions registered through ``get_metrics_group()``, as the job
        ended: subtask (``"Map (1/2)"``) → operator → dotted metric name → value."""
        return {s.name: s.user_metrics for s in self.statistics if getattr(s, "user_metrics", None)}

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return dict(self._result.accumulators)

    def get_accumulator_result(self, name: str) -> Any:
        return self._result.accumulators.get(name)

    def __repr__(self) -> str:
        return f"JobExecutionResult(job {self.get_job_id()}, {self.get_job_status().name}, {self.get_net_runtime()} ms)"
