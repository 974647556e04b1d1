"""The checkpoint coordinator: which checkpoint to start, when one is complete, what to drop.

Theory of operation
-------------------
As Flink's ``CheckpointCoordinator`` and ``PendingCheckpoint``, without the lock, the
timer thread or the storage: time arrives as ``now_ms`` and every event returns the
actions the owner (the job master's Trio task) carries out, in order.

A checkpoint moves through these phases::

    (trigger) -> PENDING --all acks--> WRITING --metadata written--> COMPLETED
                   |                      |
                   +--decline/expire/-----+--metadata failed--> ABORTED
                      task failure/
                      shutdown/subsumed

Events:

- ``on_timer(now_ms)``: the periodic trigger fired. It starts a checkpoint unless too
  many are in flight (``max_concurrent``; with ``min_pause_ms > 0`` one is already too
  many, as in Flink) or the last checkpoint ended less than ``min_pause_ms`` ago. A
  trigger refused for concurrency is remembered and rescheduled as soon as a checkpoint
  ends; one refused for the pause is rescheduled at the end of the pause. Either way
  the owner gets ``ScheduleNextTrigger`` rather than guessing.
- ``trigger_checkpoint(now_ms, is_savepoint)``: a manual checkpoint or savepoint. It
  bypasses ``min_pause_ms`` and ``max_concurrent``. Savepoints are always aligned.
- ``on_acknowledge`` / ``on_decline``: a task's answer. The last ack moves the
  checkpoint to WRITING and emits ``WriteMetadata`` with every state handle: the
  ``_metadata`` file is the commit point. ``NotifyCheckpointComplete`` follows only on
  ``on_metadata_written``; ``on_metadata_failed`` aborts.
- ``on_expire_check(now_ms)``: aborts PENDING checkpoints older than ``timeout_ms``.
- ``on_task_failure(task_id)``: aborts every PENDING checkpoint (failover follows).
- ``shutdown()``: aborts every PENDING checkpoint; triggers are refused afterwards.

A checkpoint in WRITING is never aborted by time, failure or shutdown: its state is
durable and the metadata write alone decides whether it exists.

Aborting emits ``NotifyCheckpointAborted`` and ``DiscardCheckpoint`` (the handles
collected so far). Declines, expiry and metadata failures of checkpoints (not of
savepoints, not of aborts caused by failover or shutdown) count as failures; a
completion resets the count; more than ``tolerable_failures`` in a row emits
``FailJob`` (and the count starts again, as in Flink).

Completing checkpoint N aborts older PENDING checkpoints (not savepoints) as
subsumed, and keeps only the ``num_retained`` newest completed checkpoints:
``SubsumeCheckpoints`` names the others (the storage drops them through its shared
state registry, since incremental handles may still be referenced). Savepoints are
never subsumed or discarded once complete.

Invariants: checkpoint ids rise by one from 1 and are never reused, also across
``restore_from``; nothing completes without every task's ack and the metadata write.
Late or duplicate acks for unknown, completed or aborted checkpoints are ignored (the
handles of a late ack for an aborted checkpoint are discarded); acks from a task that
is not in ``tasks_to_ack`` are a ``ProtocolViolation``.

Not here: sending RPCs, writing files, running timers, restoring state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Any

from weir.errors import ProtocolViolation, UsageError

# ---------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class CheckpointCoordinatorConfig:
    """The ``execution.checkpointing.*`` options the coordinator needs, in milliseconds.

    ``interval_ms=None`` disables periodic checkpoints (manual ones still work).
    ``aligned_timeout_ms`` matters only with ``unaligned``: 0 means start unaligned, a
    positive value means start aligned and switch after that long.
    """

    interval_ms: int | None = None
    timeout_ms: int = 600_000
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    num_retained: int = 1
    unaligned: bool = False
    aligned_timeout_ms: int = 0

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, value: object, expected: str) -> None:
            if not ok:
                raise UsageError(f"CheckpointCoordinatorConfig: {name} must be {expected}, got {value!r}")

        need(self.interval_ms is None or self.interval_ms > 0, "interval_ms", self.interval_ms, "> 0 or None")
        need(self.timeout_ms > 0, "timeout_ms", self.timeout_ms, "> 0")
        need(self.min_pause_ms >= 0, "min_pause_ms", self.min_pause_ms, ">= 0")
        need(self.max_concurrent >= 1, "max_concurrent", self.max_concurrent, ">= 1")
        need(self.tolerable_failures >= 0, "tolerable_failures", self.tolerable_failures, ">= 0")
        need(self.num_retained >= 1, "num_retained", self.num_retained, ">= 1")
        need(self.aligned_timeout_ms >= 0, "aligned_timeout_ms", self.aligned_timeout_ms, ">= 0")
        need(
            not (self.unaligned and self.max_concurrent > 1),
            "max_concurrent",
            self.max_concurrent,
            "1 with unaligned checkpoints",
        )

    @classmethod
    def from_configuration(cls, conf: Any) -> CheckpointCoordinatorConfig:
        """Reads the options from an ``weir.common.configuration.Configuration``."""
        from weir.common import config_options as o

        return cls(
            interval_ms=conf.get_option(o.CHECKPOINTING_INTERVAL),
            timeout_ms=conf.get_option(o.CHECKPOINTING_TIMEOUT),
            min_pause_ms=conf.get_option(o.CHECKPOINTING_MIN_PAUSE),
            max_concurrent=conf.get_option(o.CHECKPOINTING_MAX_CONCURRENT),
            tolerable_failures=conf.get_option(o.CHECKPOINTING_TOLERABLE_FAILURES),
            num_retained=conf.get_option(o.CHECKPOINTING_RETAINED),
            unaligned=conf.get_option(o.CHECKPOINTING_UNALIGNED),
            aligned_timeout_ms=conf.get_option(o.CHECKPOINTING_ALIGNED_TIMEOUT),
        )


# ------------------------------------------------------------------------- pending snapshot


@dataclass(frozen=True)
class PendingCheckpoint:
    """An immutable view of one checkpoint's acks so far: who answered, with what.

    ``state_handles`` and ``metrics`` map task id to what that task sent; a task is in
    them exactly when it acknowledged.
    """

    checkpoint_id: int
    timestamp: int
    is_savepoint: bool
    unaligned: bool
    tasks_to_ack: tuple[str, ...]
    state_handles: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    metrics: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def acknowledged(self) -> frozenset[str]:
        return frozenset(self.state_handles)

    @property
    def not_yet_acknowledged(self) -> tuple[str, ...]:
        return tuple(t for t in self.tasks_to_ack if t not in self.state_handles)

    @property
    def is_fully_acknowledged(self) -> bool:
        return len(self.state_handles) == len(self.tasks_to_ack)

    @property
    def state_size_bytes(self) -> int:
        return sum(int(m.get("state_size_bytes", 0)) for m in self.metrics.values())

    def with_ack(self, task_id: str, handles: Any, metrics: Mapping[str, Any] | None) -> PendingCheckpoint:
        """This checkpoint with ``task_id``'s ack added."""
        return replace(
            self,
            state_handles=MappingProxyType({**self.state_handles, task_id: handles}),
            metrics=MappingProxyType({**self.metrics, task_id: MappingProxyType(dict(metrics or {}))}),
        )


# ----------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class TriggerCheckpoint:
    """Tell the source tasks to snapshot and inject ``CheckpointBarrier(checkpoint_id, ...)``."""

    checkpoint_id: int
    timestamp: int
    is_savepoint: bool
    unaligned: bool
    aligned_timeout_ms: int
    targets: tuple[str, ...]


@dataclass(frozen=True)
class WriteMetadata:
    """Write ``_metadata`` atomically; answer with ``on_metadata_written`` or ``on_metadata_failed``."""

    checkpoint_id: int
    pending: PendingCheckpoint


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    checkpoint_id: int
    targets: tuple[str, ...]


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    checkpoint_id: int
    targets: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class DiscardCheckpoint:
    """Delete the state of an aborted checkpoint: ``handles`` maps task id to its handles."""

    checkpoint_id: int
    handles: Mapping[str, Any] = field(hash=False)


@dataclass(frozen=True)
class SubsumeCheckpoints:
    """These completed checkpoints are no longer retained (never savepoints)."""

    checkpoint_ids: tuple[int, ...]


@dataclass(frozen=True)
class FailJob:
    reason: str


@dataclass(frozen=True)
class ScheduleNextTrigger:
    """Call ``on_timer`` at ``at_ms``."""

    at_ms: int


CoordinatorAction = (
    TriggerCheckpoint
    | WriteMetadata
    | NotifyCheckpointComplete
    | NotifyCheckpointAborted
    | DiscardCheckpoint
    | SubsumeCheckpoints
    | FailJob
    | ScheduleNextTrigger
)


# -------------------------------------------------------------------------------- statistics


class CheckpointStatus(Enum):
    PENDING = "PENDING"
    WRITING = "WRITING"  # all acks in, metadata being written
    COMPLETED = "COMPLETED"
    ABORTED = "ABORTED"


@dataclass(frozen=True)
class CompletedCheckpoint:
    checkpoint_id: int
    timestamp: int
    completed_ms: int
    is_savepoint: bool
    pending: PendingCheckpoint


@dataclass(frozen=True)
class CheckpointStats:
    checkpoint_id: int
    is_savepoint: bool
    status: CheckpointStatus
    trigger_ms: int
    end_ms: int | None
    num_acknowledged: int
    num_tasks: int
    state_size_bytes: int
    failure_reason: str | None = None

    @property
    def duration_ms(self) -> int | None:
        return None if self.end_ms is None else self.end_ms - self.trigger_ms


@dataclass(frozen=True)
class CoordinatorStatistics:
    num_triggered: int
    num_in_progress: int
    num_completed: int
    num_failed: int
    consecutive_failures: int
    latest_completed_id: int | None
    checkpoints: tuple[CheckpointStats, ...]  # the most recent ``history_size``, oldest first


# ------------------------------------------------------------------------------- coordinator


class CheckpointCoordinator:
    """Bookkeeping of the checkpoints of one job. Pure: events in, actions out."""

    def __init__(
        self,
        job_id: str,
        tasks_to_trigger: list[str],
        tasks_to_ack: list[str],
        config: CheckpointCoordinatorConfig,
        *,
        history_size: int = 100,
    ) -> None:
        if not tasks_to_ack:
            raise UsageError(f"checkpoint coordinator of job {job_id}: tasks_to_ack is empty")
        if len(set(tasks_to_ack)) != len(tasks_to_ack):
            raise UsageError(f"checkpoint coordinator of job {job_id}: duplicate ids in tasks_to_ack")
        self.job_id = job_id
        self.config = config
        self.tasks_to_trigger = tuple(tasks_to_trigger)
        self.tasks_to_ack = tuple(tasks_to_ack)
        self._ack_set = frozenset(self.tasks_to_ack)
        self._all_tasks = tuple(dict.fromkeys(self.tasks_to_ack + self.tasks_to_trigger))
        self._history_size = history_size
        self._next_id = 1
        self._now_ms = 0
        self._pending: dict[int, PendingCheckpoint] = {}  # PENDING and WRITING, by id
        self._writing: set[int] = set()
        self._completed: list[CompletedCheckpoint] = []  # retained, by id
        self._recently_aborted: dict[int, None] = {}  # ordered set, bounded
        self._stats: dict[int, CheckpointStats] = {}
        self._last_end_ms: int | None = None
        self._trigger_waiting = False  # a periodic trigger was refused for concurrency
        self._consecutive_failures = 0
        self._num_triggered = 0
        self._num_completed = 0
        self._num_failed = 0
        self._shut_down = False

    # ----------------------------------------------------------------------------- triggers

    def on_timer(self, now_ms: int) -> list[CoordinatorAction]:
        """The periodic trigger fired at ``now_ms``."""
        self._tick(now_ms)
        if self._shut_down:
            return []
        interval = self.config.interval_ms
        if interval is None:
            raise UsageError(
                f"checkpoint coordinator of job {self.job_id}: on_timer called, "
                "but periodic checkpoints are disabled (interval_ms is None)"
            )
        in_flight = len(self._pending)
        limit = 1 if self.config.min_pause_ms > 0 else self.config.max_concurrent
        if in_flight >= limit:
            self._trigger_waiting = True  # rescheduled when a checkpoint ends
            return []
        if self._last_end_ms is not None:
            earliest = self._last_end_ms + self.config.min_pause_ms
            if now_ms < earliest:
                return [ScheduleNextTrigger(earliest)]
        self._trigger_waiting = False
        return [self._start(now_ms, is_savepoint=False), ScheduleNextTrigger(now_ms + interval)]

    def trigger_checkpoint(self, now_ms: int, is_savepoint: bool = False) -> list[CoordinatorAction]:
        """A manual checkpoint or savepoint; ignores min pause and max concurrent."""
        self._tick(now_ms)
        if self._shut_down:
            raise UsageError(
                f"checkpoint coordinator of job {self.job_id}: cannot trigger a "
                f"{'savepoint' if is_savepoint else 'checkpoint'}, the coordinator is shut down"
            )
        return [self._start(now_ms, is_savepoint=is_savepoint)]

    def _start(self, now_ms: int, is_savepoint: bool) -> TriggerCheckpoint:
        checkpoint_id = self._next_id
        self._next_id += 1
        cfg = self.config
        may_go_unaligned = cfg.unaligned and not is_savepoint
        unaligned = may_go_unaligned and cfg.aligned_timeout_ms == 0
        aligned_timeout_ms = cfg.aligned_timeout_ms if may_go_unaligned else 0
        self._pending[checkpoint_id] = PendingCheckpoint(
            checkpoint_id, now_ms, is_savepoint, unaligned, self.tasks_to_ack
        )
        self._num_triggered += 1
        self._record(checkpoint_id)
        return TriggerCheckpoint(
            checkpoint_id, now_ms, is_savepoint, unaligned, aligned_timeout_ms, self.tasks_to_trigger
        )

    # ------------------------------------------------------------------------ task answers

    def on_acknowledge(
        self,
        task_id: str,
        checkpoint_id: int,
        state_handles: Any = None,
        metrics: Mapping[str, Any] | None = None,
        *,
        now_ms: int | None = None,
    ) -> list[CoordinatorAction]:
        """``task_id`` finished its part of ``checkpoint_id``; the last ack asks for the metadata."""
        self._tick(now_ms)
        self._check_task(task_id, "on_acknowledge", checkpoint_id, self._ack_set)
        pending = self._pending.get(checkpoint_id)
        if pending is None:
            if checkpoint_id in self._recently_aborted and state_handles is not None:
                return [DiscardCheckpoint(checkpoint_id, MappingProxyType({task_id: state_handles}))]
            return []  # late or duplicate: ignored
        if checkpoint_id in self._writing or task_id in pending.state_handles:
            return []  # duplicate
        pending = pending.with_ack(task_id, state_handles, metrics)
        self._pending[checkpoint_id] = pending
        if not pending.is_fully_acknowledged:
            self._record(checkpoint_id)
            return []
        self._writing.add(checkpoint_id)
        self._record(checkpoint_id)
        return [WriteMetadata(checkpoint_id, pending)]

    def on_decline(
        self,
        task_id: str,
        checkpoint_id: int,
        reason: str,
        *,
        now_ms: int | None = None,
        counts: bool = True,
    ) -> list[CoordinatorAction]:
        """``task_id`` could not take part in ``checkpoint_id``: the checkpoint is aborted.
        ``counts=False``: not a failure of checkpointing (the task finished, as Flink's
        NOT_ALL_REQUIRED_TASKS_RUNNING), so it does not count toward the tolerated failures."""
        self._tick(now_ms)
        self._check_task(task_id, "on_decline", checkpoint_id, frozenset(self._all_tasks))
        if checkpoint_id not in self._pending or checkpoint_id in self._writing:
            return []  # late, or the metadata write decides
        return self._abort(checkpoint_id, f"declined by task {task_id}: {reason}", counts=counts)

    # ------------------------------------------------------------------------ other events

    def on_expire_check(self, now_ms: int) -> list[CoordinatorAction]:
        """Aborts every PENDING checkpoint triggered ``timeout_ms`` or more before ``now_ms``."""
        self._tick(now_ms)
        actions: list[CoordinatorAction] = []
        for checkpoint_id, pending in sorted(self._pending.items()):
            if checkpoint_id in self._writing:
                continue
            if now_ms - pending.timestamp >= self.config.timeout_ms:
                reason = (
                    f"expired after {now_ms - pending.timestamp} ms (timeout {self.config.timeout_ms} ms)"
                )
                actions.extend(self._abort(checkpoint_id, reason, counts=True))
        return actions

    def next_expiry_ms(self) -> int | None:
        """When ``on_expire_check`` will next abort something, if nothing else happens first."""
        times = [
            p.timestamp + self.config.timeout_ms for i, p in self._pending.items() if i not in self._writing
        ]
        return min(times) if times else None

    def on_task_failure(self, task_id: str) -> list[CoordinatorAction]:
        """A task failed: every PENDING checkpoint is aborted (not counted as a checkpoint failure)."""
        if task_id not in self._all_tasks:
            raise ProtocolViolation(
                f"checkpoint coordinator of job {self.job_id}: event on_task_failure from unknown task "
                f"{task_id!r}; expected one of {list(self._all_tasks)}"
            )
        actions: list[CoordinatorAction] = []
        for checkpoint_id in sorted(self._pending):
            if checkpoint_id not in self._writing:
                actions.extend(self._abort(checkpoint_id, f"task {task_id} failed", counts=False))
        return actions

    def on_metadata_written(
        self, checkpoint_id: int, *, now_ms: int | None = None
    ) -> list[CoordinatorAction]:
        """``_metadata`` of ``checkpoint_id`` is durable: the checkpoint is complete."""
        self._tick(now_ms)
        self._check_writing(checkpoint_id, "on_metadata_written")
        pending = self._pending.pop(checkpoint_id)
        self._writing.discard(checkpoint_id)
        completed = CompletedCheckpoint(
            checkpoint_id, pending.timestamp, self._now_ms, pending.is_savepoint, pending
        )
        self._completed.append(completed)
        self._completed.sort(key=lambda c: c.checkpoint_id)
        self._num_completed += 1
        self._consecutive_failures = 0
        self._last_end_ms = self._now_ms
        self._record(checkpoint_id, status=CheckpointStatus.COMPLETED, pending=pending)
        actions: list[CoordinatorAction] = [NotifyCheckpointComplete(checkpoint_id, self._all_tasks)]
        # Older PENDING checkpoints are subsumed by this one (savepoints are not).
        for older in sorted(self._pending):
            if older < checkpoint_id and older not in self._writing and not self._pending[older].is_savepoint:
                actions.extend(
                    self._abort(older, f"subsumed by completed checkpoint {checkpoint_id}", counts=False)
                )
        subsumed = self._apply_retention()
        if subsumed:
            actions.append(SubsumeCheckpoints(subsumed))
        actions.extend(self._reschedule_waiting_trigger())
        return actions

    def on_metadata_failed(
        self, checkpoint_id: int, error: object, *, now_ms: int | None = None
    ) -> list[CoordinatorAction]:
        """``_metadata`` of ``checkpoint_id`` could not be written: the checkpoint is aborted."""
        self._tick(now_ms)
        self._check_writing(checkpoint_id, "on_metadata_failed")
        self._writing.discard(checkpoint_id)
        return self._abort(checkpoint_id, f"writing the metadata failed: {error}", counts=True)

    def shutdown(self) -> list[CoordinatorAction]:
        """Aborts PENDING checkpoints; later triggers are refused. Metadata writes still finish."""
        self._shut_down = True
        self._trigger_waiting = False
        actions: list[CoordinatorAction] = []
        for checkpoint_id in sorted(self._pending):
            if checkpoint_id not in self._writing:
                actions.extend(self._abort(checkpoint_id, "checkpoint coordinator shut down", counts=False))
        return actions

    def restore_from(self, latest_completed_id: int) -> None:
        """After a restore from ``latest_completed_id``: new ids continue after it, never reused."""
        if latest_completed_id < 0:
            raise UsageError(
                f"checkpoint coordinator of job {self.job_id}: restore_from needs a checkpoint id >= 0, "
                f"got {latest_completed_id}"
            )
        self._next_id = max(self._next_id, latest_completed_id + 1)

    # ------------------------------------------------------------------------------ queries

    def latest_completed(self, include_savepoints: bool = False) -> CompletedCheckpoint | None:
        """The newest completed checkpoint (recovery uses this), savepoints only if asked."""
        for completed in reversed(self._completed):
            if include_savepoints or not completed.is_savepoint:
                return completed
        return None

    def completed_checkpoints(self) -> tuple[CompletedCheckpoint, ...]:
        """Retained checkpoints and all completed savepoints, oldest first."""
        return tuple(self._completed)

    def pending_checkpoints(self) -> tuple[PendingCheckpoint, ...]:
        return tuple(self._pending[i] for i in sorted(self._pending))

    @property
    def next_checkpoint_id(self) -> int:
        return self._next_id

    def statistics(self) -> CoordinatorStatistics:
        latest = self.latest_completed(include_savepoints=True)
        return CoordinatorStatistics(
            num_triggered=self._num_triggered,
            num_in_progress=len(self._pending),
            num_completed=self._num_completed,
            num_failed=self._num_failed,
            consecutive_failures=self._consecutive_failures,
            latest_completed_id=None if latest is None else latest.checkpoint_id,
            checkpoints=tuple(self._stats[i] for i in sorted(self._stats)),
        )

    # ----------------------------------------------------------------------------- helpers

    def _tick(self, now_ms: int | None) -> None:
        if now_ms is not None:
            self._now_ms = max(self._now_ms, now_ms)

    def _check_task(self, task_id: str, event: str, checkpoint_id: int, allowed: frozenset[str]) -> None:
        if task_id not in allowed:
            raise ProtocolViolation(
                f"checkpoint coordinator of job {self.job_id}: event {event} for checkpoint {checkpoint_id} "
                f"from unknown task {task_id!r}; expected one of {sorted(allowed)}"
            )

    def _check_writing(self, checkpoint_id: int, event: str) -> None:
        if checkpoint_id not in self._writing:
            status = self._stats.get(checkpoint_id)
            state = "unknown" if status is None else status.status.value
            raise ProtocolViolation(
                f"checkpoint coordinator of job {self.job_id}: event {event} for checkpoint {checkpoint_id} "
                f"in state {state}; expected state {CheckpointStatus.WRITING.value}"
            )

    def _abort(self, checkpoint_id: int, reason: str, counts: bool) -> list[CoordinatorAction]:
        pending = self._pending.pop(checkpoint_id)
        self._writing.discard(checkpoint_id)
        self._recently_aborted[checkpoint_id] = None
        while len(self._recently_aborted) > 1000:
            del self._recently_aborted[next(iter(self._recently_aborted))]
        self._num_failed += 1
        self._last_end_ms = self._now_ms
        self._record(checkpoint_id, status=CheckpointStatus.ABORTED, pending=pending, reason=reason)
        actions: list[CoordinatorAction] = [
            NotifyCheckpointAborted(checkpoint_id, self._all_tasks, reason),
            DiscardCheckpoint(checkpoint_id, pending.state_handles),
        ]
        if counts and not pending.is_savepoint:
            self._consecutive_failures += 1
            if self._consecutive_failures > self.config.tolerable_failures:
                actions.append(
                    FailJob(
                        f"job {self.job_id}: {self._consecutive_failures} checkpoints failed in a row, "
                        f"more than the {self.config.tolerable_failures} tolerated; last: "
                        f"checkpoint {checkpoint_id} {reason}"
                    )
                )
                self._consecutive_failures = 0
        actions.extend(self._reschedule_waiting_trigger())
        return actions

    def _reschedule_waiting_trigger(self) -> list[CoordinatorAction]:
        if not self._trigger_waiting or self._shut_down:
            return []
        self._trigger_waiting = False
        return [ScheduleNextTrigger(self._now_ms + self.config.min_pause_ms)]

    def _apply_retention(self) -> tuple[int, ...]:
        checkpoints = [c for c in self._completed if not c.is_savepoint]
        excess = len(checkpoints) - self.config.num_retained
        if excess <= 0:
            return ()
        dropped = {c.checkpoint_id for c in checkpoints[:excess]}
        self._completed = [c for c in self._completed if c.checkpoint_id not in dropped]
        return tuple(sorted(dropped))

    def _record(
        self,
        checkpoint_id: int,
        status: CheckpointStatus | None = None,
        pending: PendingCheckpoint | None = None,
        reason: str | None = None,
    ) -> None:
        pending = pending if pending is not None else self._pending[checkpoint_id]
        if status is None:
            status = CheckpointStatus.WRITING if checkpoint_id in self._writing else CheckpointStatus.PENDING
        ended = status in (CheckpointStatus.COMPLETED, CheckpointStatus.ABORTED)
        self._stats[checkpoint_id] = CheckpointStats(
            checkpoint_id=checkpoint_id,
            is_savepoint=pending.is_savepoint,
            status=status,
            trigger_ms=pending.timestamp,
            end_ms=self._now_ms if ended else None,
            num_acknowledged=len(pending.state_handles),
            num_tasks=len(pending.tasks_to_ack),
            state_size_bytes=pending.state_size_bytes,
            failure_reason=reason,
        )
        while len(self._stats) > self._history_size:
            oldest = min(self._stats)
            if oldest in self._pending:
                break
            del self._stats[oldest]
