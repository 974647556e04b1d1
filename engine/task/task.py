"""Task: one subtask of one JobVertex, running ``InputGate → OperatorChain → ResultPartitions``.

Theory of operation
-------------------
A task is one Trio task. It builds its operator chain from the StreamNodes chained into
its JobVertex (a tree: an operator may feed several chained successors and several
network outputs, and side outputs go only to the edges that asked for their tag), opens
the operators tail first, then loops:

- a source task pulls a batch from its reader and pushes it through the chain;
- any other task takes one buffer from its input gate, decodes the frames it completes
  into batches (one compiled call per frame), and pushes each batch through the chain;
  watermarks pass the valve (minimum over channels) before reaching the head operator.

After each step the task awaits the RecordWriters' and async sinks' ``drain`` — one await
per batch, never per record. A sibling Trio task fires processing-time callbacks (timers,
periodic watermarks) under the same drain lock, so operators never run concurrently.
At end of input the operators ``finish`` head first, the writers drain, the partitions
send EndOfPartition, and the operators ``close``. ``close`` also runs on failure and
cancellation. A user exception is re-raised as OperatorFailure naming the operator and
subtask; the TaskExecutor reports it to the JobMaster.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

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
from weir.errors import OperatorFailure, WeirError
from weir.graph.job_graph import JobEdge, JobVertex
from weir.graph.stream_graph import StreamGraph
from weir.loop.ticker import use_ticker
from weir.network.debloat import BatchDebloater
from weir.network.environment import ChannelSpec
from weir.network.events import CheckpointBarrier, EndOfPartition, Watermark, WatermarkStatus
from weir.network.flusher import run_output_flusher
from weir.operators.factory import SourceOperator
from weir.task.chain import OperatorChain, OperatorGuard, edge_type
from weir.task.channel_state import replay_output_state
from weir.task.checkpointing import SubtaskCheckpointCoordinator
from weir.time.valve import WatermarkValve
from weir.time.watermarks import EmitWatermark


@dataclass
class ProducedPartition:
    partition_id: str
    num_subpartitions: int
    job_edge: JobEdge
    blocking: bool


@dataclass
class TaskDeployment:
    """Everything a TaskExecutor needs to run one execution attempt (Flink's TDD)."""

    job_id: str
    job_name: str
    execution_id: str
    job_vertex: JobVertex
    stream_graph: StreamGraph
    subtask_index: int
    attempt_number: int
    produced: list[ProducedPartition]
    input_channels: list[tuple[JobEdge, ChannelSpec]]
    buffer_timeout_ms: int
    auto_watermark_interval_ms: int
    batch_mode: bool
    processing_time_ms: Callable[[], int]
    collect_channels: dict[int, Any] = field(default_factory=dict)
    job_parameters: dict[str, str] = field(default_factory=dict)
    state_backend: Any = None  # StateBackend creating each keyed operator's KeyedStateBackend
    checkpoint_storage: Any = None  # CheckpointStorage when checkpointing is on
    on_checkpoint_ack: Any = None  # (execution_id, checkpoint_id, acks, size_bytes) -> None
    on_checkpoint_metrics: Any = None  # (execution_id, checkpoint_id, metrics dict) -> None, before the ack
    on_checkpoint_decline: Any = None  # (execution_id, checkpoint_id, reason) -> None
    restore_state: Any = None  # operator id -> list of checkpointed payloads to restore from
    on_recovery_note: Any = None  # (line) -> None: what an operator's restore did beyond the usual
    unaligned_checkpoints: bool = False  # execution.checkpointing.unaligned.enabled
    aligned_timeout_ms: int = 0  # start aligned, go unaligned after this long (0: unaligned at once)
    failure_injector: Any = None  # weir.cluster.failure_injector.FailureInjector (tests, --inject-failures)
    debloat: Any = None  # weir.network.debloat.DebloatSettings; None: source batches keep their size

    @property
    def name_with_subtask(self) -> str:
        return f"{self.job_vertex.name} ({self.subtask_index + 1}/{self.job_vertex.parallelism})"


class _DrainLock:
    """The task's lock between its input loop and its timers.

    An uncontended acquire is not a scheduling point (the loops yield once per batch on
    their own, and a scheduling point per buffer costs more than the buffer's processing).
    A release hands the lock to the task that has waited longest, as ``trio.Lock`` does, so
    a source that re-acquires it in a tight loop cannot starve a waiting checkpoint. It
    does less than ``trio.Lock`` (no owner check, no breaking of the lock when its owner
    exits without releasing), which ``async with`` makes unnecessary: the lock and its
    two tasks live and die with the Task. Cancellation: a task cancelled while it waits
    does not get the lock."""

    __slots__ = ("_held", "_lot")

    def __init__(self) -> None:
        self._held = False
        self._lot = trio.lowlevel.ParkingLot()

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if self._held:
            await self._lot.park()  # woken by a release that handed the lock over
        else:
            self._held = True

    async def __aexit__(self, *exc: object) -> None:
        if self._lot:
            self._lot.unpark()  # still held: it now belongs to the longest waiter
        else:
            self._held = False


#: How many input buffers or events a task handles between two scheduling points while
#: its gate has more: enough to amortise the scheduler, few enough to stay fair to the
#: other tasks of the thread (about 1 ms of work at most).
ITEMS_PER_SCHEDULING_POINT = 8


@dataclass
class TaskStatistics:
    """A task's metrics: records and buffers in/out, backpressure, and its network objects' snapshots."""

    name: str
    records_in: int
    records_out: int
    buffers_in: int
    buffers_out: int
    backpressured_seconds: float
    busy_seconds: float
    operators: dict[str, tuple[int, int]]
    partitions: list[Any]
    gate: Any

    @property
    def backpressured_fraction(self) -> float:
        return self.backpressured_seconds / self.busy_seconds if self.busy_seconds > 0 else 0.0


class Task:
    def __init__(self, deployment: TaskDeployment, network: Any) -> None:
        self.d = deployment
        self.network = network
        self.chain = OperatorChain(deployment, network, self._create_keyed_backend)
        self._flushed_by_timer: list[Any] = []  # partitions the TaskManager's shared flusher flushes
        self.keyed_backends: list[Any] = []
        self._triggers: list[tuple[CheckpointBarrier, str | None]] = []
        self._notifications: list[tuple[str, int]] = []
        self.checkpointing = SubtaskCheckpointCoordinator(deployment, self.chain)
        self._restored_channels: dict[str, Any] | None = None
        self._input_ended = False
        self._alignment: tuple[Any, set[int], set[int], list[FrameReader]] | None = None
        self._stop: tuple[int, str] | None = None  # (savepoint id, mode) of a stop-with-savepoint
        self._stop_changed = trio.Event()
        self._stopped_without_drain = False
        self._stop_done = False
        self._poll_scope: trio.CancelScope | None = None
        self.buffers_in = 0
        self.records_in = 0
        self._drain_lock = _DrainLock()
        self._timer_changed = trio.Event()
        # what the timer loop waits for: a deadline, inf (nothing), -inf (it is busy)
        self._armed_deadline = -math.inf
        self._started = trio.current_time()
        self.gate: Any = None

    # -- building ------------------------------------------------------------------------------
    def _create_keyed_backend(self, operator_id: str, max_parallelism: int) -> Any:
        """This subtask's keyed state: the key groups the formula assigns to it, in the job's backend."""
        from weir.datastream.state_backend import HashMapStateBackend
        from weir.keys import compute_key_group_range_for_operator_index

        d = self.d
        backend_factory = d.state_backend or HashMapStateBackend()
        key_groups = compute_key_group_range_for_operator_index(
            max_parallelism, d.job_vertex.parallelism, d.subtask_index
        )
        backend = backend_factory.create_keyed_state_backend(
            operator_id, d.subtask_index, max_parallelism, key_groups, d.processing_time_ms
        )
        self.keyed_backends.append(backend)
        return backend

    # -- running -------------------------------------------------------------------------------
    async def run(self, on_running: Callable[[], None] | None = None) -> None:
        """Run the attempt to its end. Cancellation: operators are closed, partitions dropped;
        the cancellation propagates to the caller (the TaskExecutor reports CANCELED)."""
        # this task's sleeps (an open-loop source's) share the TaskManager's timer
        use_ticker(self.network.ticker)
        async with trio.open_nursery() as nursery:
            self.checkpointing.nursery = nursery
            try:
                self.chain.build(nursery)
                if self.d.restore_state:
                    self._restored_channels = self.checkpointing.restore(self.d.restore_state)
                self.chain.open_operators()
                if on_running is not None:
                    on_running()
                timeout = self.d.buffer_timeout_ms
                if timeout > 0:
                    for partition in self.chain.partitions:
                        if self.network.flush_by_timer(partition, timeout):
                            self._flushed_by_timer.append(partition)
                        else:  # the environment is not running (tests): a timer of the task's own
                            nursery.start_soon(run_output_flusher, partition, timeout)
                nursery.start_soon(self._run_timers)
                head = self.chain.operators[0]
                if isinstance(head, SourceOperator):
                    await self._run_source(head)
                else:
                    await self._run_input()
                self._input_ended = True
                await self._finish()
            finally:
                for partition in self._flushed_by_timer:
                    self.network.output_flusher.unregister(partition, self.d.buffer_timeout_ms)
                self._close_all()
            nursery.cancel_scope.cancel()

    async def _run_source(self, head: SourceOperator) -> None:
        if self._restored_channels:
            restored, self._restored_channels = self._restored_channels, None
            await replay_output_state(self.chain.partitions, restored)
        # One scope for the whole loop, not one per poll (a cancel scope costs more than a
        # small batch's routing). Only a completed stop-with-savepoint cancels it, and by
        # then the stop barrier is out: the loop no longer emits, so the cancellation finds
        # it in a poll, waiting for the stop's outcome, or between two batches, never with
        # a batch half emitted or output half drained.
        with trio.CancelScope() as self._poll_scope:
            await self._source_loop(head)
        if self._stop is not None and self._stop_done:
            self._stopped_without_drain = self._stop[1] == "no_drain"

    async def _source_loop(self, head: SourceOperator) -> None:
        """Poll and emit until the input ends or a stop-with-savepoint completes."""
        guard = self.chain.guards[self.d.job_vertex.chained_node_ids[0]]
        debloater = self._source_debloater(head)
        while True:
            if self._stop is not None:
                # a stop-with-savepoint barrier went out: end once the savepoint completes,
                # go on reading if it was aborted
                if self._stop_done:
                    return
                await self._stop_changed.wait()
                self._stop_changed = trio.Event()
                continue
            try:
                batch = await head.poll()  # outside the lock: a silent source must not block timers
            except (WeirError, Exception) as exc:
                raise guard.fail(exc) from exc
            if batch is None:
                return
            async with self._drain_lock:
                if self._stop is not None:
                    continue  # read after a stop-with-savepoint barrier: never emitted, not in the position
                started = trio.current_time()
                try:
                    head.emit_batch(batch)
                except OperatorFailure:
                    raise
                except (WeirError, Exception) as exc:
                    raise guard.fail(exc) from exc
                if debloater is not None:
                    now = trio.current_time()
                    resized = debloater.on_batch(len(batch), now - started, now)
                    if resized is not None:
                        head.reader.batch_size = resized
                await self.chain.drain()
            self._poke_timers_if_due()
            await trio.lowlevel.checkpoint()

    def _source_debloater(self, head: SourceOperator) -> BatchDebloater | None:
        """What sizes this source's batches from its chain's processing rate (None: a reader
        that sizes its own batches, or debloating is off)."""
        settings = self.d.debloat
        size = head.reader.batch_size
        if settings is None or not settings.enabled or not isinstance(size, int) or size < 1:
            return None
        debloater = BatchDebloater(settings, max_batch=size)
        head.reader.batch_size = debloater.batch_size  # the probe
        return debloater

    async def _run_input(self) -> None:
        d = self.d
        specs = [spec for _, spec in d.input_channels]
        gate = self.network.create_input_gate(0, specs)
        self.gate = gate
        readers = [
            FrameReader(serializer_for(edge_type(d.stream_graph, edge.stream_edge)))
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

        await self._replay_channel_state(process)

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

    async def _cancel_alignment(self, checkpoint_id: int) -> None:
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

    async def _replay_channel_state(self, process: Any) -> None:
        """After a restore from an unaligned checkpoint: the overtaken output goes out first,
        then the persisted input is processed, before anything new is read."""
        restored = self._restored_channels
        if not restored:
            return
        self._restored_channels = None
        await replay_output_state(self.chain.partitions, restored)
        async with self._drain_lock:
            for channel, data in sorted(restored.get("inputs", {}).items()):
                await process(int(channel), data)

    async def _finish(self) -> None:
        await self._deliver_notifications()
        async with self._drain_lock:
            await self.chain.finish_operators(skip_head=self._stopped_without_drain)
        await self.chain.finish_partitions()

    def _close_all(self) -> None:
        self.chain.close_operators()
        for backend in self.keyed_backends:
            with contextlib.suppress(Exception):
                backend.dispose()

    # -- checkpoints ---------------------------------------------------------------------------
    def trigger_checkpoint(self, barrier: CheckpointBarrier, stop: str | None = None) -> None:
        """A source task: snapshot at the next batch boundary and emit ``barrier`` in line.
        ``stop`` ("drain" or "no_drain"): a stop-with-savepoint; the source emits nothing after
        the barrier and ends once the savepoint completes ("drain" first ends event time)."""
        self._triggers.append((barrier, stop))
        self._poke_timers()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Queued and delivered in the task's own loop, between batches (Flink's mailbox)."""
        self._notifications.append(("notify_checkpoint_complete", checkpoint_id))
        self._poke_timers()

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._notifications.append(("notify_checkpoint_aborted", checkpoint_id))
        self._poke_timers()

    def _next_deadline_ms(self) -> int | None:
        deadlines = [
            t for op in self.chain.operators if (t := op.next_processing_time_deadline()) is not None
        ]
        return min(deadlines) if deadlines else None

    async def _deliver_notifications(self) -> None:
        """Checkpoint completions and aborts, in the task's loop (Flink's mailbox)."""
        d = self.d
        while self._notifications:
            method, checkpoint_id = self._notifications.pop(0)
            async with self._drain_lock:
                if method == "notify_checkpoint_aborted":
                    await self._cancel_alignment(checkpoint_id)
                for node_id in d.job_vertex.chained_node_ids:
                    self.chain.guards[node_id].call(method, checkpoint_id)
                await self.chain.drain()
            if self._stop is not None and self._stop[0] == checkpoint_id:
                if method == "notify_checkpoint_aborted":
                    self._stop = None  # the savepoint failed: the job goes on
                else:
                    self._stop_done = True
                    if self._poll_scope is not None:
                        self._poll_scope.cancel()
                self._stop_changed.set()

    def _poke_timers(self) -> None:
        self._timer_changed.set()

    def _poke_timers_if_due(self) -> None:
        """After a batch: wake the timer loop only if an operator now has a processing-time
        deadline earlier than the one it waits for (a busy loop looks again by itself)."""
        deadline = self._next_deadline_ms()
        if deadline is not None and deadline < self._armed_deadline:
            self._poke_timers()

    async def _run_timers(self) -> None:
        """Fire processing-time callbacks when their time comes. Cancellation: stops firing."""
        d = self.d
        while True:
            self._timer_changed = trio.Event()
            while self._triggers:
                barrier, stop = self._triggers.pop(0)
                if self._input_ended:  # too late: the end of input went out before this barrier could
                    if d.on_checkpoint_decline is not None:
                        d.on_checkpoint_decline(
                            d.execution_id,
                            barrier.checkpoint_id,
                            "the source reached the end of its input",
                            False,
                        )
                    continue
                async with self._drain_lock:
                    if stop == "drain":
                        head_id = d.job_vertex.chained_node_ids[0]
                        self.chain.guards[head_id].call("finish")  # end event time: every timer fires first
                        await self.chain.drain()
                    await self.checkpointing.checkpoint(barrier)
                    if stop is not None:
                        self._stop = (barrier.checkpoint_id, stop)
            await self._deliver_notifications()
            deadline = self._next_deadline_ms()
            if deadline is None or self._stop is not None:
                # a source stopping with a savepoint is suspended: after its barrier it emits
                # nothing, not even a periodic watermark (Flink's synchronous savepoint)
                self._armed_deadline = math.inf
                await self._timer_changed.wait()
                self._armed_deadline = -math.inf
                continue
            now = d.processing_time_ms()
            if now < deadline:
                wake = trio.current_time() + (deadline - now) / 1000.0
                self._armed_deadline = deadline
                with trio.move_on_at(wake):
                    await self._timer_changed.wait()
                self._armed_deadline = -math.inf
                if d.processing_time_ms() < deadline:
                    continue
            async with self._drain_lock:
                now = d.processing_time_ms()
                for node_id in d.job_vertex.chained_node_ids:
                    self.chain.guards[node_id].call("on_processing_time", now)
                await self.chain.drain()

    def statistics(self) -> TaskStatistics:
        partitions = [p.statistics() for p in self.chain.partitions]
        return TaskStatistics(
            name=self.d.name_with_subtask,
            records_in=self.records_in
            if self.chain.operators and not isinstance(self.chain.operators[0], SourceOperator)
            else 0,
            records_out=sum(w.records_out for w in self.chain.writers),
            buffers_in=self.buffers_in,
            buffers_out=sum(sp.buffers_finished for p in partitions for sp in p.subpartitions),
            backpressured_seconds=self.chain.backpressured_seconds,
            busy_seconds=trio.current_time() - self._started,
            operators={
                op.name: (op.metrics.records_in, op.metrics.records_out) for op in self.chain.operators
            },
            partitions=partitions,
            gate=None if self.gate is None else self.gate.statistics(),
        )
