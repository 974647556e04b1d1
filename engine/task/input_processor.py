"""The input side of a non-source task (Flink's StreamOneInputProcessor / StreamTaskNetworkInput
with its CheckpointedInputGate): read the input gate, decode, route, and drive barrier alignment.

Theory of operation
-------------------
The processor takes one buffer or event at a time from its input gate. A buffer goes to its
channel's FrameReader (frames may span buffers); every batch it completes goes to the head
operator, one compiled decode per frame, and the chain is drained after each batch.
Watermarks and watermark statuses pass a valve (the minimum over the channels, idle ones
excluded) before they reach the head operator; a two-input head has one valve per input.

With checkpointing on, barriers and end-of-partition events go to the barrier handler (a
pure state machine, ``weir.checkpoint.barrier_handler``), whose actions the processor
carries out: block a channel (its data then waits in the network and its credit stops),
unblock all, take the snapshot and forward the barrier (through the task's
SubtaskCheckpointCoordinator), persist a channel's in-flight data into the unaligned
checkpoint's channel state, or abort. Data that was already taken from a blocked channel
is held and handled, in order, once the channels are unblocked. After a restore from an
unaligned checkpoint the persisted input is processed before anything new is read.

Every item is handled under the task's drain lock, so timers and checkpoint notifications
never run in the middle of one. What it does not do: build the chain, snapshot operators,
or fire timers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.checkpoint.barrier_handler import (
    AbortCheckpoint,
    BlockChannel,
    ForwardBarrier,
    PersistInFlight,
    StopPersisting,
    TakeSnapshot,
    UnblockAll,
    make_barrier_handler,
)
from weir.codec.batch import Batch
from weir.codec.reader import FrameReader
from weir.codec.serializers import serializer_for
from weir.network.events import CheckpointBarrier, EndOfPartition, Watermark, WatermarkStatus
from weir.task.chain import OperatorChain, OperatorGuard, wire_type
from weir.task.channel_state import check_partial_rows, replay_output_state
from weir.task.checkpointing import SubtaskCheckpointCoordinator
from weir.time.valve import WatermarkValve
from weir.time.watermarks import EmitWatermark

if TYPE_CHECKING:
    from weir.task.task import TaskDeployment, _DrainLock

__all__ = ["ITEMS_PER_SCHEDULING_POINT", "StreamInputProcessor"]

#: How many input buffers or events a task handles between two scheduling points while
#: its gate has more: enough to amortise the scheduler, few enough to stay fair to the
#: other tasks of the thread (about 1 ms of work at most).
ITEMS_PER_SCHEDULING_POINT = 8


class StreamInputProcessor:
    """The input loop of one non-source subtask. ``poke_timers_if_due`` is called after each
    item, so the task's timer loop learns of an earlier processing-time deadline."""

    def __init__(
        self,
        deployment: TaskDeployment,
        network: Any,
        chain: OperatorChain,
        checkpointing: SubtaskCheckpointCoordinator,
        drain_lock: _DrainLock,
        poke_timers_if_due: Callable[[], None],
    ) -> None:
        self.d = deployment
        self.network = network
        self.chain = chain
        self.checkpointing = checkpointing
        self._drain_lock = drain_lock
        self._poke_timers_if_due = poke_timers_if_due
        self._alignment: tuple[Any, set[int], set[int], list[FrameReader]] | None = None
        self.buffers_in = 0
        self.records_in = 0
        self.gate: Any = None

    async def run(self, restored_channels: dict[str, Any] | None) -> None:
        """Process the input until every channel has ended. ``restored_channels``: the channel
        state of the unaligned checkpoint the task was restored from, replayed first.
        Cancellation: propagates to the task, which closes its operators."""
        d = self.d
        specs = [spec for _, spec in d.input_channels]
        gate = self.network.create_input_gate(0, specs)
        self.gate = gate
        readers = [
            FrameReader(serializer_for(wire_type(d.stream_graph, edge.stream_edge)))
            for edge, _ in d.input_channels
        ]
        head_guard = self.chain.guards[d.job_vertex.chained_node_ids[0]]
        feed, valve_for, on_valve_action = self._input_routing(head_guard)
        aligner = (
            make_barrier_handler(len(specs), d.unaligned_checkpoints, d.aligned_timeout_ms)
            if d.checkpoint_storage is not None
            else None
        )
        blocked: set[int] = set()
        persisting: set[int] = set()  # channels whose in-flight data goes into the channel state
        held: deque[tuple[int, Any, Any]] = deque()  # (channel, bytes | None, event | None) behind a barrier

        self._alignment = (aligner, blocked, persisting, readers)  # for aborts from the coordinator

        async def process(channel: int, data: Any) -> None:
            self.buffers_in += 1
            into = feed[channel]
            for batch in readers[channel].feed(data):
                self.records_in += len(batch)
                into(batch)
                await self.chain.drain()

        await self._replay_channel_state(process, restored_channels)

        async def handle(channel: int, data: Any, event: Any) -> None:
            if channel in blocked:
                held.append((channel, data, event))
                return
            if data is not None:
                if channel in persisting and self.checkpointing.channel_state is not None:
                    self.checkpointing.channel_state.inputs.setdefault(channel, bytearray()).extend(data)
                await process(channel, data)
                if aligner is not None and blocked:
                    now = d.processing_time_ms()
                    await self._on_alignment(aligner.on_time(now), blocked, persisting, readers)
                return
            actions: list[Any] = []
            if isinstance(event, Watermark):
                valve, local = valve_for[channel]
                actions = valve.input_watermark(local, event.timestamp)
            elif isinstance(event, WatermarkStatus):
                valve, local = valve_for[channel]
                actions = valve.input_watermark_status(local, event.idle)
            elif isinstance(event, CheckpointBarrier) and aligner is not None:
                now = d.processing_time_ms()
                self.checkpointing.on_barrier(event, now)
                alignment = aligner.on_barrier(channel, event, now_ms=now)
                await self._on_alignment(alignment, blocked, persisting, readers)
            elif isinstance(event, EndOfPartition) and aligner is not None:
                await self._on_alignment(aligner.on_end_of_partition(channel), blocked, persisting, readers)
            for action in actions:
                on_valve_action(channel, action)
            if actions:
                await self.chain.drain()

        budget = 0
        while True:
            item = gate.poll_next() if budget > 0 else None
            if item is None:
                item = await gate.get_next()  # a scheduling point; parks when nothing is there
                if item is None:
                    return
                budget = ITEMS_PER_SCHEDULING_POINT
            budget -= 1
            async with self._drain_lock:
                channel = item.channel_index
                if item.is_buffer:
                    data = item.data if channel not in blocked else bytes(item.data)
                    try:
                        await handle(channel, data, None)
                    finally:
                        item.recycle()
                else:
                    event = item.event
                    item.recycle()
                    await handle(channel, None, event)
                while held and not blocked:
                    await handle(*held.popleft())
            self._poke_timers_if_due()

    def _input_routing(
        self, head_guard: OperatorGuard
    ) -> tuple[list[Any], list[tuple[WatermarkValve, int]], Any]:
        """Per input channel: where its batches go, and its watermark valve with the channel's
        index in it; and what to do with a valve's action. One valve over every channel for a
        one-input head; a valve per input for a two-input head (Flink's per-input
        StatusWatermarkValve), whose outputs the operator combines."""
        channels = self.d.input_channels
        head: Any = head_guard.operator
        if not getattr(head, "two_inputs", False):
            valve = WatermarkValve(len(channels))

            def on_action(channel: int, action: Any) -> None:
                if isinstance(action, EmitWatermark):
                    head_guard.watermark(action.timestamp)
                else:
                    head_guard.status(action.idle)

            return [head_guard.process] * len(channels), [(valve, i) for i in range(len(channels))], on_action
        inputs = [edge.stream_edge.type_number for edge, _ in channels]
        valves = {n: WatermarkValve(max(1, inputs.count(n))) for n in (1, 2)}

        def into(process: Callable[[Batch], None]) -> Callable[[Batch], None]:
            return lambda batch: head_guard.process_input(batch, process)

        processes = {1: into(head.process_batch1), 2: into(head.process_batch2)}
        valve_for = [(valves[n], inputs[:i].count(n)) for i, n in enumerate(inputs)]

        def on_two_input_action(channel: int, action: Any) -> None:
            n = inputs[channel]
            if isinstance(action, EmitWatermark):
                head_guard.call(f"process_watermark{n}", action.timestamp)
            else:
                head_guard.call(f"process_watermark_status{n}", action.idle)

        return [processes[n] for n in inputs], valve_for, on_two_input_action

    async def cancel_alignment(self, checkpoint_id: int) -> None:
        """The coordinator gave up ``checkpoint_id``: stop aligning (or persisting) for it, so
        blocked channels flow again (Flink's CancelCheckpointMarker)."""
        if self._alignment is None:
            return
        aligner, blocked, persisting, readers = self._alignment
        if aligner is None:
            return
        state = aligner.state
        barrier = getattr(state, "barrier", None)
        if barrier is None or barrier.checkpoint_id != checkpoint_id:
            return
        live = [c for c in range(aligner.channels) if c not in aligner.ended]
        if live:
            actions = [
                a for a in aligner.on_cancel(live[0], checkpoint_id) if not isinstance(a, AbortCheckpoint)
            ]
            await self._on_alignment(actions, blocked, persisting, readers)

    async def _on_alignment(
        self, actions: list[Any], blocked: set[int], persisting: set[int], readers: list[FrameReader]
    ) -> None:
        """Carry out the barrier handler's actions (aligned and unaligned checkpoints)."""
        for action in actions:
            if isinstance(action, BlockChannel):
                blocked.add(action.channel)
                self.gate.block(action.channel)  # its data waits in the network; credit stops
            elif isinstance(action, UnblockAll):
                blocked.clear()
                self.gate.unblock_all()
            elif isinstance(action, TakeSnapshot):
                await self.checkpointing.take_snapshot(action.checkpoint_id, action.unaligned, readers)
            elif isinstance(action, ForwardBarrier):
                await self.checkpointing.forward_barrier_after_snapshot(action.barrier)
            elif isinstance(action, PersistInFlight):
                persisting.add(action.channel)
            elif isinstance(action, StopPersisting):
                persisting.discard(action.channel)
            elif isinstance(action, AbortCheckpoint):
                persisting.clear()
                self.checkpointing.abort(action.checkpoint_id, action.reason)
        current = self.checkpointing.channel_state
        if (
            current is not None
            and not persisting
            and any(isinstance(a, (TakeSnapshot, StopPersisting)) for a in actions)
        ):
            current.complete.set()  # every channel's barrier is in: the channel state is whole

    async def _replay_channel_state(self, process: Any, restored: dict[str, Any] | None) -> None:
        """After a restore from an unaligned checkpoint: the overtaken output goes out first,
        then the persisted input is processed, before anything new is read."""
        if not restored:
            return
        check_partial_rows(restored, *self.checkpointing.partial_rows(), self.d.job_vertex.name)
        await replay_output_state(self.chain.partitions, restored)
        async with self._drain_lock:
            for channel, data in sorted(restored.get("inputs", {}).items()):
                await process(int(channel), data)
