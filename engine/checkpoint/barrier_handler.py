"""Barrier alignment at a task's input: when to snapshot, what to block, what to persist.

Theory of operation
-------------------
As Flink's ``SingleCheckpointBarrierHandler`` with its small state classes
(``WaitingForFirstBarrier``, ``CollectingBarriers``, ``CollectingBarriersUnaligned``,
``AlternatingCollectingBarriers*``). A handler sees, in the order the task reads them
from its input gate, the in-band events of its ``channels`` input channels. Each event
goes to the current state object, which returns the next state and the actions for the
task, in the order to carry them out.

States:

- ``WaitingForFirstBarrier``: no checkpoint in progress.
- ``CollectingAligned``: some channels delivered the barrier and are blocked; the task
  keeps reading the others (their data is before the barrier, so it belongs in the
  snapshot). When the last channel's barrier arrives: ``TakeSnapshot``,
  ``ForwardBarrier``, ``UnblockAll``.
- ``CollectingUnaligned``: the snapshot was taken at the first barrier (after
  ``ForwardBarrier``, so the barrier overtakes the output); every channel whose barrier
  had not arrived gets ``PersistInFlight`` and, when its barrier arrives,
  ``StopPersisting``. Nothing is blocked.

Events: ``on_barrier(channel, barrier)``, ``on_cancel(channel, checkpoint_id)`` (a
``CancelCheckpointMarker``), ``on_end_of_partition(channel)``, ``on_time(now_ms)``,
``on_buffer(channel, size_bytes)`` (data; for statistics and a check that a blocked
channel delivers nothing).

The three handlers differ only in the choice made at the first barrier:
``AlignedBarrierHandler`` always aligns; ``UnalignedBarrierHandler`` never does (except
for savepoints, which are always aligned); ``AlternatingBarrierHandler`` aligns unless the
barrier says ``unaligned``, and switches an aligned checkpoint (not a savepoint) to
unaligned once ``barrier.timestamp + aligned_timeout_ms`` has passed, noticed at
``on_time`` or at a barrier carrying ``now_ms``. The switch snapshots at once, persists
what is still in flight on the channels whose barrier has not arrived, and unblocks.

Rules common to all: a barrier of a newer checkpoint while one is in progress aborts the
older one (``AbortCheckpoint`` plus ``UnblockAll``/``StopPersisting``) and starts the
newer; a barrier or cancel marker for a checkpoint at or below the last one finished
(completed or aborted) is ignored; a cancel marker for the checkpoint in progress (or a
newer one) aborts it; a channel at end of partition counts as aligned for this and every
later checkpoint.

Invariants (aligned): between the first barrier and the snapshot no blocked channel
delivers data, so the snapshot covers exactly the data before every channel's barrier.
(Unaligned): the snapshot plus the persisted in-flight data is exactly the data before
every channel's barrier. Illegal input -- a channel out of range, a negative checkpoint
id, a second barrier of the same checkpoint on one channel, anything on a channel after
its end of partition, data on a blocked channel -- raises ``ProtocolViolation`` naming
the handler, the state and the event.

Not here: reading buffers, spilling in-flight data, the snapshot itself, declining the
checkpoint to the coordinator (the task does that on ``AbortCheckpoint``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from weir.errors import ProtocolViolation, UsageError
from weir.network.events import CancelCheckpointMarker, CheckpointBarrier, Event

# --------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class BlockChannel:
    channel: int


@dataclass(frozen=True)
class UnblockAll:
    pass


@dataclass(frozen=True)
class TakeSnapshot:
    checkpoint_id: int
    unaligned: bool = False


@dataclass(frozen=True)
class ForwardBarrier:
    barrier: CheckpointBarrier


@dataclass(frozen=True)
class PersistInFlight:
    """Persist, as part of ``checkpoint_id``, data of ``channel`` read from now until its barrier."""

    channel: int
    checkpoint_id: int


@dataclass(frozen=True)
class StopPersisting:
    channel: int


@dataclass(frozen=True)
class AbortCheckpoint:
    checkpoint_id: int
    reason: str


BarrierAction = (
    BlockChannel
    | UnblockAll
    | TakeSnapshot
    | ForwardBarrier
    | PersistInFlight
    | StopPersisting
    | AbortCheckpoint
)


@dataclass(frozen=True)
class BarrierHandlerStatistics:
    state: str
    checkpoint_id: int | None  # in progress
    last_completed_checkpoint_id: int | None
    last_aborted_checkpoint_id: int | None
    num_blocked_channels: int
    num_persisting_channels: int
    alignment_start_ms: int | None  # of the checkpoint in progress, or the last one
    last_alignment_duration_ms: int | None  # first barrier to last barrier (or abort)
    bytes_processed_during_alignment: int  # of the checkpoint in progress, or the last one
    bytes_persisted: int  # of the checkpoint in progress, or the last one
    total_bytes_persisted: int
    num_switched_to_unaligned: int


# ---------------------------------------------------------------------------------- states


@dataclass(frozen=True)
class WaitingForFirstBarrier:
    """No checkpoint in progress; barriers at or below ``last_checkpoint_id`` are stale."""

    last_checkpoint_id: int = 0


@dataclass(frozen=True)
class CollectingAligned:
    barrier: CheckpointBarrier
    arrived: frozenset[int]  # channels whose barrier arrived (blocked)
    deadline_ms: int | None = None  # switch to unaligned after this (alternating only)


@dataclass(frozen=True)
class CollectingUnaligned:
    barrier: CheckpointBarrier
    persisting: frozenset[int]  # channels whose barrier has not arrived yet


HandlerState = WaitingForFirstBarrier | CollectingAligned | CollectingUnaligned
Transition = tuple[HandlerState, list[BarrierAction]]


@dataclass
class _Stats:
    alignment_start_ms: int | None = None
    last_alignment_duration_ms: int | None = None
    bytes_processed_during_alignment: int = 0
    bytes_persisted: int = 0
    total_bytes_persisted: int = 0
    num_switched_to_unaligned: int = 0
    last_completed: int | None = None
    last_aborted: int | None = None
    persisting: set[int] = field(default_factory=set)


# -------------------------------------------------------------------------------- handlers


class BarrierHandler:
    """The state machine shared by the three handlers; subclasses choose the mode.

    ``state`` is an immutable value (``WaitingForFirstBarrier``, ``CollectingAligned``,
    ``CollectingUnaligned``); each event computes the next state and the actions.
    """

    def __init__(self, channels: int) -> None:
        if channels < 1:
            raise UsageError(f"{type(self).__name__}: needs at least one input channel, got {channels}")
        self.channels = channels
        self.state: HandlerState = WaitingForFirstBarrier()
        self.ended: set[int] = set()  # channels at end of partition
        self._now_ms: int | None = None
        self._stats = _Stats()

    # ----------------------------------------------------------------------- mode policy

    def _starts_unaligned(self, barrier: CheckpointBarrier) -> bool:
        raise NotImplementedError

    def _deadline(self, barrier: CheckpointBarrier) -> int | None:
        return None

    # ---------------------------------------------------------------------------- events

    def on_barrier(
        self,
        channel: int,
        barrier: CheckpointBarrier | None = None,
        *,
        checkpoint_id: int | None = None,
        now_ms: int | None = None,
    ) -> list[BarrierAction]:
        """A barrier was read from ``channel``; give ``barrier`` or just ``checkpoint_id``."""
        if barrier is None:
            if checkpoint_id is None:
                raise UsageError(f"{type(self).__name__}.on_barrier: give a barrier or a checkpoint_id")
            barrier = CheckpointBarrier(checkpoint_id, 0)
        elif checkpoint_id is not None and checkpoint_id != barrier.checkpoint_id:
            raise UsageError(
                f"{type(self).__name__}.on_barrier: checkpoint_id {checkpoint_id} does not match "
                f"the barrier's {barrier.checkpoint_id}"
            )
        event = f"barrier {barrier.checkpoint_id} on channel {channel}"
        self._check_channel(channel, event)
        self._check_id(barrier.checkpoint_id, event)
        self._tick(now_ms)
        state = self.state
        if isinstance(state, WaitingForFirstBarrier):
            if barrier.checkpoint_id <= state.last_checkpoint_id:
                return []
            return self._apply(self._start(barrier, channel))
        current = state.barrier.checkpoint_id
        if barrier.checkpoint_id < current:
            return []  # an older, already superseded checkpoint
        if barrier.checkpoint_id > current:
            reason = f"subsumed by checkpoint {barrier.checkpoint_id} (barrier on channel {channel})"
            _, actions = self._abort(state, reason)
            next_state, more = self._start(barrier, channel)
            return self._apply((next_state, actions + more))
        if isinstance(state, CollectingAligned):
            if channel in state.arrived:
                self._violation(event, "a second barrier of the same checkpoint on one channel")
            arrived = state.arrived | {channel}
            if self._all_arrived(arrived):
                return self._apply(self._complete_aligned(state.barrier, blocked=state.arrived))
            next_aligned = replace(state, arrived=arrived)
            if self._past_deadline(next_aligned):
                return self._apply(self._switch_to_unaligned(next_aligned))
            return self._apply((next_aligned, [BlockChannel(channel)]))
        if channel not in state.persisting:
            self._violation(event, "a second barrier of the same checkpoint on one channel")
        return self._apply(self._stop_persisting(state, channel))

    def on_cancel(self, channel: int, checkpoint_id: int) -> list[BarrierAction]:
        """A ``CancelCheckpointMarker(checkpoint_id)`` was read from ``channel``."""
        event = f"cancel marker {checkpoint_id} on channel {channel}"
        self._check_channel(channel, event)
        self._check_id(checkpoint_id, event)
        state = self.state
        reason = f"cancelled by upstream (marker on channel {channel})"
        if isinstance(state, WaitingForFirstBarrier):
            if checkpoint_id <= state.last_checkpoint_id:
                return []
            self._stats.last_aborted = checkpoint_id
            return self._apply(
                (WaitingForFirstBarrier(checkpoint_id), [AbortCheckpoint(checkpoint_id, reason)])
            )
        current = state.barrier.checkpoint_id
        if checkpoint_id < current:
            return []
        if checkpoint_id == current:
            return self._apply(self._abort(state, reason))
        _, actions = self._abort(state, f"subsumed by cancelled checkpoint {checkpoint_id}")
        actions.append(AbortCheckpoint(checkpoint_id, reason))
        self._stats.last_aborted = checkpoint_id
        return self._apply((WaitingForFirstBarrier(checkpoint_id), actions))

    def on_end_of_partition(self, channel: int) -> list[BarrierAction]:
        """``channel`` has ended; it counts as aligned from now on."""
        event = f"end of partition on channel {channel}"
        self._check_channel(channel, event)
        self.ended.add(channel)
        state = self.state
        if isinstance(state, CollectingAligned):
            if channel in state.arrived:
                return []  # it was blocked, so this cannot have been read; be lenient
            if self._all_arrived(state.arrived):
                return self._apply(self._complete_aligned(state.barrier, blocked=state.arrived))
            return []
        if isinstance(state, CollectingUnaligned) and channel in state.persisting:
            return self._apply(self._stop_persisting(state, channel))
        return []

    def on_time(self, now_ms: int) -> list[BarrierAction]:
        """Time passed; an alternating handler may switch the alignment to unaligned."""
        self._tick(now_ms)
        state = self.state
        if isinstance(state, CollectingAligned) and self._past_deadline(state):
            return self._apply(self._switch_to_unaligned(state))
        return []

    def on_buffer(self, channel: int, size_bytes: int = 0) -> list[BarrierAction]:
        """Data was read from ``channel`` (for statistics; never produces actions)."""
        event = f"buffer of {size_bytes} bytes on channel {channel}"
        self._check_channel(channel, event)
        state = self.state
        if isinstance(state, CollectingAligned):
            if channel in state.arrived:
                self._violation(event, "no data from a channel blocked by its barrier")
            self._stats.bytes_processed_during_alignment += size_bytes
        elif isinstance(state, CollectingUnaligned) and channel in state.persisting:
            self._stats.bytes_persisted += size_bytes
            self._stats.total_bytes_persisted += size_bytes
        return []

    def on_event(self, channel: int, event: Event, now_ms: int | None = None) -> list[BarrierAction]:
        """Dispatches an in-band event; events that do not concern alignment give no actions."""
        from weir.network.events import EndOfPartition

        if isinstance(event, CheckpointBarrier):
            return self.on_barrier(channel, event, now_ms=now_ms)
        if isinstance(event, CancelCheckpointMarker):
            return self.on_cancel(channel, event.checkpoint_id)
        if isinstance(event, EndOfPartition):
            return self.on_end_of_partition(channel)
        return []

    # ---------------------------------------------------------------------------- queries

    @property
    def blocked_channels(self) -> frozenset[int]:
        state = self.state
        return state.arrived if isinstance(state, CollectingAligned) else frozenset()

    @property
    def persisting_channels(self) -> frozenset[int]:
        state = self.state
        return state.persisting if isinstance(state, CollectingUnaligned) else frozenset()

    def statistics(self) -> BarrierHandlerStatistics:
        state = self.state
        s = self._stats
        return BarrierHandlerStatistics(
            state=type(state).__name__,
            checkpoint_id=None if isinstance(state, WaitingForFirstBarrier) else state.barrier.checkpoint_id,
            last_completed_checkpoint_id=s.last_completed,
            last_aborted_checkpoint_id=s.last_aborted,
            num_blocked_channels=len(self.blocked_channels),
            num_persisting_channels=len(self.persisting_channels),
            alignment_start_ms=s.alignment_start_ms,
            last_alignment_duration_ms=s.last_alignment_duration_ms,
            bytes_processed_during_alignment=s.bytes_processed_during_alignment,
            bytes_persisted=s.bytes_persisted,
            total_bytes_persisted=s.total_bytes_persisted,
            num_switched_to_unaligned=s.num_switched_to_unaligned,
        )

    # ------------------------------------------------------------------------ transitions

    def _start(self, barrier: CheckpointBarrier, channel: int) -> Transition:
        """The first barrier of a checkpoint arrived on ``channel``."""
        self._stats.alignment_start_ms = self._now_ms
        self._stats.last_alignment_duration_ms = None
        self._stats.bytes_processed_during_alignment = 0
        self._stats.bytes_persisted = 0
        deadline = self._deadline(barrier)
        timed_out = deadline is not None and self._now_ms is not None and self._now_ms > deadline
        if timed_out:
            self._stats.num_switched_to_unaligned += 1
        if self._starts_unaligned(barrier) or timed_out:
            forwarded = barrier if barrier.unaligned else replace(barrier, unaligned=True)
            pending = self._not_arrived({channel})
            unaligned = CollectingUnaligned(forwarded, pending)
            actions: list[BarrierAction] = [
                ForwardBarrier(forwarded),
                TakeSnapshot(barrier.checkpoint_id, unaligned=True),
            ]
            actions.extend(PersistInFlight(c, barrier.checkpoint_id) for c in sorted(pending))
            if not pending:
                return self._finish(barrier.checkpoint_id, actions)
            return unaligned, actions
        aligned = CollectingAligned(barrier, frozenset({channel}), deadline)
        if self._all_arrived(aligned.arrived):
            return self._complete_aligned(barrier, blocked=frozenset())
        return aligned, [BlockChannel(channel)]

    def _complete_aligned(self, barrier: CheckpointBarrier, blocked: frozenset[int]) -> Transition:
        actions: list[BarrierAction] = [TakeSnapshot(barrier.checkpoint_id), ForwardBarrier(barrier)]
        if blocked:
            actions.append(UnblockAll())
        return self._finish(barrier.checkpoint_id, actions)

    def _switch_to_unaligned(self, state: CollectingAligned) -> Transition:
        """Alignment timed out: snapshot now, persist the rest in flight, unblock."""
        self._stats.num_switched_to_unaligned += 1
        barrier = replace(state.barrier, unaligned=True)
        pending = self._not_arrived(state.arrived)
        actions: list[BarrierAction] = [
            ForwardBarrier(barrier),
            TakeSnapshot(barrier.checkpoint_id, unaligned=True),
        ]
        actions.extend(PersistInFlight(c, barrier.checkpoint_id) for c in sorted(pending))
        actions.append(UnblockAll())
        if not pending:
            return self._finish(barrier.checkpoint_id, actions)
        return CollectingUnaligned(barrier, pending), actions

    def _stop_persisting(self, state: CollectingUnaligned, channel: int) -> Transition:
        persisting = state.persisting - {channel}
        actions: list[BarrierAction] = [StopPersisting(channel)]
        if not persisting:
            return self._finish(state.barrier.checkpoint_id, actions)
        return replace(state, persisting=persisting), actions

    def _finish(self, checkpoint_id: int, actions: list[BarrierAction]) -> Transition:
        self._stats.last_completed = checkpoint_id
        self._end_alignment()
        return WaitingForFirstBarrier(checkpoint_id), actions

    def _abort(self, state: CollectingAligned | CollectingUnaligned, reason: str) -> Transition:
        checkpoint_id = state.barrier.checkpoint_id
        actions: list[BarrierAction] = [AbortCheckpoint(checkpoint_id, reason)]
        if isinstance(state, CollectingAligned):
            actions.append(UnblockAll())
        else:
            actions.extend(StopPersisting(c) for c in sorted(state.persisting))
        self._stats.last_aborted = checkpoint_id
        self._end_alignment()
        return WaitingForFirstBarrier(checkpoint_id), actions

    # --------------------------------------------------------------------------- helpers

    def _apply(self, transition: Transition) -> list[BarrierAction]:
        self.state, actions = transition
        return actions

    def _end_alignment(self) -> None:
        start = self._stats.alignment_start_ms
        if start is not None and self._now_ms is not None:
            self._stats.last_alignment_duration_ms = self._now_ms - start

    def _all_arrived(self, arrived: frozenset[int]) -> bool:
        return len(arrived | self.ended) == self.channels

    def _not_arrived(self, arrived: set[int] | frozenset[int]) -> frozenset[int]:
        return frozenset(range(self.channels)) - arrived - self.ended

    def _past_deadline(self, state: CollectingAligned) -> bool:
        return state.deadline_ms is not None and self._now_ms is not None and self._now_ms > state.deadline_ms

    def _tick(self, now_ms: int | None) -> None:
        if now_ms is not None:
            self._now_ms = now_ms if self._now_ms is None else max(self._now_ms, now_ms)

    def _check_channel(self, channel: int, event: str) -> None:
        if not 0 <= channel < self.channels:
            self._violation(event, f"a channel in 0..{self.channels - 1}")
        if channel in self.ended:
            self._violation(event, "nothing after the channel's end of partition")

    def _check_id(self, checkpoint_id: int, event: str) -> None:
        if checkpoint_id < 0:
            self._violation(event, "a checkpoint id >= 0")

    def _violation(self, event: str, expected: str) -> None:
        raise ProtocolViolation(
            f"{type(self).__name__}: illegal {event} in state {self.state}; expected {expected}"
        )


class AlignedBarrierHandler(BarrierHandler):
    """Exactly-once alignment: block each channel at its barrier, snapshot when all arrived."""

    def _starts_unaligned(self, barrier: CheckpointBarrier) -> bool:
        return False


class UnalignedBarrierHandler(BarrierHandler):
    """Snapshot at the first barrier and persist what is still in flight (savepoints align)."""

    def _starts_unaligned(self, barrier: CheckpointBarrier) -> bool:
        return not barrier.is_savepoint


class AlternatingBarrierHandler(BarrierHandler):
    """Start aligned; switch to unaligned once alignment exceeds ``aligned_timeout_ms``.

    The deadline is ``barrier.timestamp + aligned_timeout_ms`` (the checkpoint's start,
    as in Flink). A barrier flagged ``unaligned`` starts unaligned; savepoints never switch.
    """

    def __init__(self, channels: int, aligned_timeout_ms: int) -> None:
        if aligned_timeout_ms < 0:
            raise UsageError(
                f"AlternatingBarrierHandler: aligned_timeout_ms must be >= 0, got {aligned_timeout_ms}"
            )
        super().__init__(channels)
        self.aligned_timeout_ms = aligned_timeout_ms

    def _starts_unaligned(self, barrier: CheckpointBarrier) -> bool:
        return barrier.unaligned and not barrier.is_savepoint

    def _deadline(self, barrier: CheckpointBarrier) -> int | None:
        if barrier.is_savepoint:
            return None
        return barrier.timestamp + self.aligned_timeout_ms


def make_barrier_handler(
    channels: int, unaligned: bool, aligned_timeout_ms: int = 0
) -> AlignedBarrierHandler | UnalignedBarrierHandler | AlternatingBarrierHandler:
    """The handler for a task's configuration (``execution.checkpointing.unaligned.*``)."""
    if not unaligned:
        return AlignedBarrierHandler(channels)
    if aligned_timeout_ms > 0:
        return AlternatingBarrierHandler(channels, aligned_timeout_ms)
    return UnalignedBarrierHandler(channels)


__all__: Sequence[str] = (
    "AbortCheckpoint",
    "AlignedBarrierHandler",
    "AlternatingBarrierHandler",
    "BarrierAction",
    "BarrierHandler",
    "BarrierHandlerStatistics",
    "BlockChannel",
    "CancelCheckpointMarker",
    "CollectingAligned",
    "CollectingUnaligned",
    "ForwardBarrier",
    "PersistInFlight",
    "StopPersisting",
    "TakeSnapshot",
    "UnalignedBarrierHandler",
    "UnblockAll",
    "WaitingForFirstBarrier",
    "make_barrier_handler",
)
