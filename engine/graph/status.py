"""Job status and execution state: two small state machines driven by tables.

Theory of operation
-------------------
An ExecutionGraph carries one *job status*; every Execution (one attempt of one
subtask) carries one *execution state*. Both follow Flink's documentation, the
"States and Transitions of Flink job" and "States and Transitions of Task
Executions" diagrams (seeds 000 and 004). Names are Flink's, including its two
spellings: the job is ``CANCELLING``, an execution is ``CANCELING``.

Job status. A job starts ``INITIALIZING`` and becomes ``CREATED`` once the
ExecutionGraph exists, ``RUNNING`` once scheduled and ``FINISHED`` when all
work is done. A failure moves it to ``FAILING`` while its tasks are cancelled;
when all of them are terminal it is ``FAILED``, unless the restart strategy lets
it restart, in which case it goes through ``RESTARTING`` back to ``RUNNING``
(or, on Flink's older path, to ``CREATED``: "once the job has been
completely restarted, it will reach the created state"). A user's cancel moves
it to ``CANCELLING`` and, once every task is terminal, to ``CANCELED``.
``FINISHED``, ``CANCELED`` and ``FAILED`` are *globally* terminal: the job is
cleaned up. ``SUSPENDED`` is only *locally* terminal: this JobMaster stops, but
another one may recover the job from the HA store.

Execution state. An attempt goes ``CREATED → SCHEDULED → DEPLOYING →
INITIALIZING → RUNNING → FINISHED``. A cancel from any non-terminal state but
``CANCELING`` moves it to ``CANCELING`` and the TaskExecutor's acknowledgement
("canceled") to ``CANCELED``; an attempt that was never deployed (``CREATED``,
``SCHEDULED``) may go to ``CANCELED`` directly ("cancel_unscheduled"), since
there is nothing to wait for. A failure from any non-terminal state gives
``FAILED``. Recovery never revives an attempt: the ExecutionVertex starts a new
Execution with a fresh machine.

Events are plain strings; the tables ``JOB_STATUS_TRANSITIONS`` and
``EXECUTION_STATE_TRANSITIONS`` map ``(from_state, event)`` to the next state
and are the whole definition of each machine.

Invariants
----------
- Terminal states absorb nothing: no table entry starts from a terminal state
  (including ``SUSPENDED``), so every event there raises.
- Every transition taken is appended to ``history`` as ``(from, event, to)``;
  consecutive entries chain (one entry's ``to`` is the next one's ``from``) and
  the last ``to`` is ``state``.
- A refused event changes nothing: it raises ``IllegalStateTransition`` naming
  the machine, the current state, the event and the target (``'?'`` when the
  table has none).

What it does not do: no I/O, no clock, no callbacks. It does not cancel tasks,
count restarts, or decide whether a job is restartable; the JobMaster and the
scheduler do that and report the outcome here as events.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Generic, NamedTuple, TypeVar

from weir.common.job_status import JobStatus
from weir.errors import IllegalStateTransition

__all__ = [
    "EXECUTION_STATE_EVENTS",
    "EXECUTION_STATE_TRANSITIONS",
    "JOB_STATUS_EVENTS",
    "JOB_STATUS_TRANSITIONS",
    "ExecutionState",
    "ExecutionStateMachine",
    "JobStatus",
    "JobStatusMachine",
    "Transition",
]


class ExecutionState(Enum):
    """The state of one execution attempt of one subtask (Flink's ExecutionState)."""

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        """Finished, canceled or failed: the attempt will never run again."""
        return self in _TERMINAL_EXECUTION_STATES

    def __str__(self) -> str:
        return self.name


_TERMINAL_EXECUTION_STATES = frozenset(
    {ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED}
)


_J = JobStatus

JOB_STATUS_TRANSITIONS: Mapping[tuple[JobStatus, str], JobStatus] = {
    (_J.INITIALIZING, "initialized"): _J.CREATED,
    (_J.INITIALIZING, "cancel"): _J.CANCELED,
    (_J.INITIALIZING, "fail"): _J.FAILED,
    (_J.CREATED, "schedule"): _J.RUNNING,
    (_J.CREATED, "fail"): _J.FAILING,
    (_J.CREATED, "cancel"): _J.CANCELLING,
    (_J.CREATED, "suspend"): _J.SUSPENDED,
    (_J.RUNNING, "all_finished"): _J.FINISHED,
    (_J.RUNNING, "fail"): _J.FAILING,
    (_J.RUNNING, "restart"): _J.RESTARTING,
    (_J.RUNNING, "cancel"): _J.CANCELLING,
    (_J.RUNNING, "suspend"): _J.SUSPENDED,
    (_J.FAILING, "all_terminal"): _J.FAILED,
    (_J.FAILING, "restart"): _J.RESTARTING,
    (_J.FAILING, "cancel"): _J.CANCELLING,
    (_J.FAILING, "suspend"): _J.SUSPENDED,
    (_J.RESTARTING, "restarted"): _J.RUNNING,
    (_J.RESTARTING, "reset"): _J.CREATED,  # older path: a restarted job "will reach the created state"
    (_J.RESTARTING, "cancel"): _J.CANCELED,
    (_J.RESTARTING, "fail"): _J.FAILED,  # restarts exhausted while restarting
    (_J.RESTARTING, "suspend"): _J.SUSPENDED,
    (_J.CANCELLING, "all_terminal"): _J.CANCELED,
    (_J.CANCELLING, "suspend"): _J.SUSPENDED,
}

_E = ExecutionState

EXECUTION_STATE_TRANSITIONS: Mapping[tuple[ExecutionState, str], ExecutionState] = {
    (_E.CREATED, "schedule"): _E.SCHEDULED,
    (_E.SCHEDULED, "deploy"): _E.DEPLOYING,
    (_E.DEPLOYING, "initialize"): _E.INITIALIZING,
    (_E.INITIALIZING, "run"): _E.RUNNING,
    (_E.RUNNING, "finish"): _E.FINISHED,
    **{
        (state, "cancel"): _E.CANCELING
        for state in (_E.CREATED, _E.SCHEDULED, _E.DEPLOYING, _E.INITIALIZING, _E.RUNNING)
    },
    (_E.CANCELING, "canceled"): _E.CANCELED,
    # Nothing was deployed, so there is no TaskExecutor acknowledgement to wait for.
    **{(state, "cancel_unscheduled"): _E.CANCELED for state in (_E.CREATED, _E.SCHEDULED)},
    **{
        (state, "fail"): _E.FAILED
        for state in (_E.CREATED, _E.SCHEDULED, _E.DEPLOYING, _E.INITIALIZING, _E.RUNNING, _E.CANCELING)
    },
}

del _J, _E

JOB_STATUS_EVENTS: frozenset[str] = frozenset(event for _, event in JOB_STATUS_TRANSITIONS)
EXECUTION_STATE_EVENTS: frozenset[str] = frozenset(event for _, event in EXECUTION_STATE_TRANSITIONS)


S = TypeVar("S", JobStatus, ExecutionState)


class Transition(NamedTuple, Generic[S]):
    """One entry of a machine's history."""

    from_state: S
    event: str
    to_state: S


class _StateMachine(Generic[S]):
    """A table-driven machine: ``state`` plus the ``history`` of transitions that led to it."""

    def __init__(self, transitions: Mapping[tuple[S, str], S], state: S, name: str) -> None:
        self._transitions: Mapping[tuple[S, str], S] = transitions
        self.name = name
        self.state: S = state
        self.history: list[Transition[S]] = []

    def on_event(self, event: str) -> S:
        """Apply ``event``; return the new state. Raises IllegalStateTransition if the table has no entry."""
        target = self._transitions.get((self.state, event))
        if target is None:
            raise IllegalStateTransition(self.name, self.state, event, "?")
        return self._take(event, target)

    def transition_to(self, target_state: S, event: str | None = None) -> S:
        """Move to ``target_state`` if some event of the table leads there from the current state.

        With ``event`` given, that event must be one that leads there; without it, the
        table's (first) such event is used and recorded in ``history``.
        """
        if event is None:
            for candidate in self.allowed_events():
                if self._transitions[(self.state, candidate)] is target_state:
                    return self._take(candidate, target_state)
            raise IllegalStateTransition(self.name, self.state, "transition_to", target_state)
        if self._transitions.get((self.state, event)) is not target_state:
            raise IllegalStateTransition(self.name, self.state, event, target_state)
        return self._take(event, target_state)

    def allowed_events(self) -> tuple[str, ...]:
        """Events the current state accepts, in table order; empty in a terminal state."""
        return tuple(event for (state, event) in self._transitions if state is self.state)

    def allowed_targets(self) -> tuple[S, ...]:
        """States reachable in one transition, in table order, without repeats."""
        targets = (self._transitions[(self.state, event)] for event in self.allowed_events())
        return tuple(dict.fromkeys(targets))

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    def _take(self, event: str, target: S) -> S:
        self.history.append(Transition(self.state, event, target))
        self.state = target
        return target

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, state={self.state})"


class JobStatusMachine(_StateMachine[JobStatus]):
    """The job status of one job, as the JobMaster drives it."""

    def __init__(self, state: JobStatus = JobStatus.INITIALIZING, *, name: str = "JobStatusMachine") -> None:
        super().__init__(JOB_STATUS_TRANSITIONS, state, name)


class ExecutionStateMachine(_StateMachine[ExecutionState]):
    """The state of one Execution attempt; a restart creates a new attempt and a new machine."""

    def __init__(
        self, state: ExecutionState = ExecutionState.CREATED, *, name: str = "ExecutionStateMachine"
    ) -> None:
        super().__init__(EXECUTION_STATE_TRANSITIONS, state, name)
