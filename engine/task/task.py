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
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
from weir.codec.serializers import ColumnarSerializer, serializer_for
from weir.errors import OperatorFailure, UsageError, WeirError
from weir.graph.job_graph import JobEdge, JobVertex
from weir.graph.stream_graph import StreamEdge, StreamGraph
from weir.loop.ticker import use_ticker
from weir.network.debloat import BatchDebloater
from weir.network.environment import ChannelSpec
from weir.network.events import CheckpointBarrier, EndOfPartition, Watermark, WatermarkStatus
from weir.network.flusher import run_output_flusher
from weir.operators.base import ChainingOutput, OperatorContext, StreamOperator
from weir.operators.factory import SourceOperator, create_operator, create_source
from weir.operators.sinks import SinkOperator
from weir.state.operator_state import OperatorStateBackend, repartition_operator_state
from weir.task.channel_selectors import selector_for
from weir.task.record_writer import FrameCache, RecordWriter
from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots
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


class _WriterTarget:
    """Adapts a RecordWriter to the operator-side callbacks (queue only)."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer

    def process(self, batch: Batch) -> None:
        self.writer.add(batch)

    def watermark(self, timestamp: int) -> None:
        self.writer.add_watermark(timestamp)

    def status(self, idle: bool) -> None:
        self.writer.add_event(WatermarkStatus(idle))


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


class _Guard:
    """Wraps an operator's entry points so a failure names the operator and subtask."""

    inject: Callable[[int], None] | None = None  # failure injection before each batch

    def __init__(self, operator: StreamOperator, subtask: int, parallelism: int) -> None:
        self.operator = operator
        self.subtask = subtask
        self.parallelism = parallelism

    def fail(self, exc: BaseException) -> OperatorFailure:
        if isinstance(exc, OperatorFailure):
            return exc
        return OperatorFailure(self.operator.name, self.subtask, self.parallelism, exc)

    def process(self, batch: Batch) -> None:
        self.process_input(batch, self.operator.process_batch)

    def process_input(self, batch: Batch, process: Callable[[Batch], None]) -> None:
        """One batch into ``process``: the operator's ``process_batch``, or one of a two-input
        operator's ``process_batch1``/``2``."""
        try:
            if self.inject is not None:
                self.inject(len(batch))
            process(batch)
        except OperatorFailure:
            raise
        except Exception as exc:
            raise self.fail(exc) from exc

    def watermark(self, timestamp: int) -> None:
        try:
            self.operator.process_watermark(timestamp)
        except OperatorFailure:
            raise
        except Exception as exc:
            raise self.fail(exc) from exc

    def status(self, idle: bool) -> None:
        try:
            self.operator.process_watermark_status(idle)
        except OperatorFailure:
            raise
        except Exception as exc:
            raise self.fail(exc) from exc

    def call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.operator, method)(*args)
        except OperatorFailure:
            raise
        except Exception as exc:
            raise self.fail(exc) from exc


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


@dataclass
class ChannelState:
    """The in-flight data of one unaligned checkpoint of one task (Flink's channel state):
    per input channel the bytes that belong before its barrier but were not processed
    when the snapshot was taken (an incomplete frame, then what arrived until the
    barrier), and per output subpartition the bytes the barrier overtook. Complete when
    every input channel delivered its barrier."""

    checkpoint_id: int
    inputs: dict[int, bytearray] = field(default_factory=dict)
    outputs: dict[str, bytes] = field(default_factory=dict)  # "<partition index>:<subpartition>"
    complete: trio.Event = field(default_factory=trio.Event)

    def size_bytes(self) -> int:
        return sum(map(len, self.inputs.values())) + sum(map(len, self.outputs.values()))

    def to_payload(self) -> dict[str, Any]:
        return {
            "inputs": {ch: bytes(data) for ch, data in self.inputs.items() if data},
            "outputs": {key: data for key, data in self.outputs.items() if data},
        }


class Task:
    def __init__(self, deployment: TaskDeployment, network: Any) -> None:
        self.d = deployment
        self.network = network
        self.operators: list[StreamOperator] = []  # chain order, head first
        self.guards: dict[int, _Guard] = {}
        self._producers: dict[int, _Guard] = {}  # id(writer) -> the operator that feeds it
        self.writers: list[RecordWriter] = []
        self._flushed_by_timer: list[Any] = []  # partitions the TaskManager's shared flusher flushes
        self.partitions: list[Any] = []
        self.async_sinks: list[SinkOperator] = []
        self.keyed_backends: list[Any] = []
        self._triggers: list[tuple[CheckpointBarrier, str | None]] = []
        self._notifications: list[tuple[str, int]] = []
        self._channel_state: ChannelState | None = None  # of the unaligned checkpoint in progress
        self._restored_channels: dict[str, Any] | None = None
        self.persisted_in_flight_bytes = 0
        self._checkpoint_timing: dict[int, dict[str, float]] = {}  # id -> alignment_ms, sync_ms
        self._first_barrier_ms: dict[int, int] = {}
        self._is_savepoint: dict[int, bool] = {}
        self._input_ended = False
        self._alignment: tuple[Any, set[int], set[int], list[FrameReader]] | None = None
        self._stop: tuple[int, str] | None = None  # (savepoint id, mode) of a stop-with-savepoint
        self._stop_changed = trio.Event()
        self._stopped_without_drain = False
        self._stop_done = False
        self._poll_scope: trio.CancelScope | None = None
        self._taken: list[OperatorSnapshot] = []
        self._snapshot_for = 0
        self._nursery: trio.Nursery | None = None
        self.buffers_in = 0
        self.records_in = 0
        self.backpressured_seconds = 0.0
        self._drain_lock = _DrainLock()
        self._timer_changed = trio.Event()
        # what the timer loop waits for: a deadline, inf (nothing), -inf (it is busy)
        self._armed_deadline = -math.inf
        self._started = trio.current_time()
        self.gate: Any = None

    # -- building ------------------------------------------------------------------------------
    def _build(self, nursery: trio.Nursery) -> None:
        d = self.d
        graph = d.stream_graph
        vertex = d.job_vertex
        chain_ids = set(vertex.chained_node_ids)
        by_node: dict[int, StreamOperator] = {}
        for node_id in vertex.chained_node_ids:
            node = graph.node(node_id)
            if node.is_source:
                op: StreamOperator = create_source(
                    node, d.subtask_index, vertex.parallelism, nursery, d.auto_watermark_interval_ms
                )
            else:
                op = create_operator(node, d.collect_channels, d.auto_watermark_interval_ms)
            by_node[node_id] = op
            self.operators.append(op)
            self.guards[node_id] = _Guard(op, d.subtask_index, vertex.parallelism)
            if d.failure_injector is not None:
                self.guards[node_id].inject = d.failure_injector.for_operator(
                    node.name, node.uid, d.subtask_index, vertex.parallelism, d.attempt_number, d.execution_id
                )
            if isinstance(op, SinkOperator) and type(op).drain is not SinkOperator.drain:
                self.async_sinks.append(op)
        writers_by_edge: dict[int, _WriterTarget] = {}
        frames = FrameCache()
        for produced in d.produced:
            partition = self.network.create_result_partition(
                produced.partition_id, produced.num_subpartitions, blocking=produced.blocking
            )
            self.partitions.append(partition)
            stream_edge = produced.job_edge.stream_edge
            consumer = graph.node(stream_edge.target_id)
            writer = RecordWriter(
                partition,
                selector_for(
                    produced.job_edge.partitioner, d.subtask_index, consumer.max_parallelism, _seed(d.job_id)
                ),
                serializer_for(_edge_type(graph, stream_edge)),
                flush_after_emit=d.buffer_timeout_ms == 0,
                frames=frames,
            )
            self.writers.append(writer)
            self._producers[id(writer)] = self.guards[stream_edge.source_id]
            writers_by_edge[id(stream_edge)] = _WriterTarget(writer)
        for node_id in vertex.chained_node_ids:
            node = graph.node(node_id)
            output = ChainingOutput()
            for edge in node.out_edges:
                if edge.target_id in chain_ids:
                    guard = self.guards[edge.target_id]
                    process, on_wm = _type_checked(guard.process, _edge_type(graph, edge)), guard.watermark
                    output.add_status_target(guard.status)
                else:
                    target = writers_by_edge[id(edge)]
                    process, on_wm = target.process, target.watermark
                    output.add_status_target(target.status)
                if edge.side_output_tag is None:
                    output.add_main(process, on_wm)
                else:
                    output.add_side(edge.side_output_tag, process, on_wm)
            operator_id = next(op.id for op in vertex.operators if op.node_id == node_id)
            keyed_backend = None
            if node.state_key_selector is not None:
                keyed_backend = self._create_keyed_backend(operator_id, node.max_parallelism)
            by_node[node_id].setup(
                OperatorContext(
                    task_name=vertex.name,
                    operator_name=node.name,
                    operator_id=operator_id,
                    subtask_index=d.subtask_index,
                    parallelism=vertex.parallelism,
                    max_parallelism=node.max_parallelism,
                    attempt_number=d.attempt_number,
                    batch_mode=d.batch_mode,
                    processing_time_ms=d.processing_time_ms,
                    job_parameters=d.job_parameters,
                    keyed_backend=keyed_backend,
                    key_selector=node.state_key_selector,
                    operator_state_backend=OperatorStateBackend(operator_id),
                    report_recovery=d.on_recovery_note,
                ),
                output,
            )

    def _create_keyed_backend(self, operator_id: str, max_parallelism: int) -> Any:
        """This subtask's keyed state: the key groups the formula assigns to it, in the job's backend."""
        from weir.core.state_backend import HashMapStateBackend
        from weir.keys import compute_key_group_range_for_operator_index
        from weir.state import create_keyed_state_backend

        d = self.d
        key_groups = compute_key_group_range_for_operator_index(
            max_parallelism, d.job_vertex.parallelism, d.subtask_index
        )
        backend = create_keyed_state_backend(
            d.state_backend or HashMapStateBackend(),
            operator_id,
            d.subtask_index,
            max_parallelism,
            key_groups,
            d.processing_time_ms,
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
            self._nursery = nursery
            try:
                self._build(nursery)
                if self.d.restore_state:
                    self._restore(self.d.restore_state)
                for node_id in reversed(self.d.job_vertex.chained_node_ids):
                    self.guards[node_id].call("initialize_state")
                    self.guards[node_id].call("open")
                if on_running is not None:
                    on_running()
                timeout = self.d.buffer_timeout_ms
                if timeout > 0:
                    for partition in self.partitions:
                        if self.network.flush_by_timer(partition, timeout):
                            self._flushed_by_timer.append(partition)
                        else:  # the environment is not running (tests): a timer of the task's own
                            nursery.start_soon(run_output_flusher, partition, timeout)
                nursery.start_soon(self._run_timers)
                head = self.operators[0]
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

    async def _drain(self) -> None:
        for writer in self.writers:
            if writer.pending:
                started = trio.current_time()
                try:
                    await writer.drain()
                except UsageError as exc:  # a record that does not fit the declared type
                    raise self._producers[id(writer)].fail(exc) from exc
                self.backpressured_seconds += trio.current_time() - started
        for sink in self.async_sinks:
            await sink.drain()

    async def _run_source(self, head: SourceOperator) -> None:
        if self._restored_channels:
            restored, self._restored_channels = self._restored_channels, None
            await self._replay_output_state(restored)
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
        guard = self.guards[self.d.job_vertex.chained_node_ids[0]]
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
                await self._drain()
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
            FrameReader(serializer_for(_edge_type(d.stream_graph, edge.stream_edge)))
            for edge, _ in d.input_channels
        ]
        head_guard = self.guards[d.job_vertex.chained_node_ids[0]]
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
                await self._drain()

        await self._replay_channel_state(process)

        async def handle(channel: int, data: Any, event: Any) -> None:
            if channel in blocked:
                held.append((channel, data, event))
                return
            if data is not None:
                if channel in persisting and self._channel_state is not None:
                    self._channel_state.inputs.setdefault(channel, bytearray()).extend(data)
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
                self._first_barrier_ms.setdefault(event.checkpoint_id, now)
                # canonical savepoints are full; native ones keep the backend's own (incremental) form
                self._is_savepoint[event.checkpoint_id] = event.is_savepoint and not event.native
                alignment = aligner.on_barrier(channel, event, now_ms=now)
                await self._on_alignment(alignment, blocked, persisting, readers)
            elif isinstance(event, EndOfPartition) and aligner is not None:
                await self._on_alignment(aligner.on_end_of_partition(channel), blocked, persisting, readers)
            for action in actions:
                on_valve_action(channel, action)
            if actions:
                await self._drain()

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

    def _input_routing(self, head_guard: _Guard) -> tuple[list[Any], list[tuple[WatermarkValve, int]], Any]:
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

    def _state_for(self, checkpoint_id: int) -> ChannelState:
        state = self._channel_state
        if state is None or state.checkpoint_id != checkpoint_id:
            state = self._channel_state = ChannelState(checkpoint_id)
        return state

    async def _on_alignment(
        self, actions: list[Any], blocked: set[int], persisting: set[int], readers: list[FrameReader]
    ) -> None:
        """Carry out the barrier handler's actions (aligned and unaligned checkpoints)."""
        d = self.d
        assert self._nursery is not None
        for action in actions:
            if isinstance(action, BlockChannel):
                blocked.add(action.channel)
                self.gate.block(action.channel)  # its data waits in the network; credit stops
            elif isinstance(action, UnblockAll):
                blocked.clear()
                self.gate.unblock_all()
            elif isinstance(action, TakeSnapshot):
                await self._drain()
                self._snapshot_for = action.checkpoint_id
                self._taken = await self._snapshot_operators(
                    action.checkpoint_id, full=self._is_savepoint.pop(action.checkpoint_id, False)
                )
                if action.unaligned:
                    # an input channel's incomplete frame was read before the snapshot but
                    # not processed: it belongs to the channel state
                    state = self._state_for(action.checkpoint_id)
                    for channel, reader in enumerate(readers):
                        pending = reader.pending_bytes()
                        if pending:
                            state.inputs[channel] = bytearray(pending)
                    self._nursery.start_soon(
                        self._write_and_acknowledge, action.checkpoint_id, self._taken, state
                    )
            elif isinstance(action, ForwardBarrier):
                barrier = action.barrier
                if barrier.unaligned:
                    await self._forward_barrier(barrier, self._state_for(barrier.checkpoint_id))
                else:
                    await self._forward_barrier(barrier, None)
                    self._nursery.start_soon(self._write_and_acknowledge, barrier.checkpoint_id, self._taken)
            elif isinstance(action, PersistInFlight):
                persisting.add(action.channel)
            elif isinstance(action, StopPersisting):
                persisting.discard(action.channel)
            elif isinstance(action, AbortCheckpoint):
                persisting.clear()
                self._channel_state = None
                if d.on_checkpoint_decline is not None:
                    d.on_checkpoint_decline(d.execution_id, action.checkpoint_id, action.reason)
        current = self._channel_state
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
        await self._replay_output_state(restored)
        async with self._drain_lock:
            for channel, data in sorted(restored.get("inputs", {}).items()):
                await process(int(channel), data)

    async def _replay_output_state(self, restored: dict[str, Any]) -> None:
        for key, data in sorted(restored.get("outputs", {}).items()):
            partition_index, subpartition = map(int, key.split(":"))
            await self.partitions[partition_index].emit(subpartition, data)

    async def _finish(self) -> None:
        await self._deliver_notifications()
        async with self._drain_lock:
            for i, node_id in enumerate(self.d.job_vertex.chained_node_ids):
                if i == 0 and self._stopped_without_drain:
                    continue  # stop without drain: event time does not end (no Long.MAX watermark)
                self.guards[node_id].call("finish")
                await self._drain()
            await self._drain()
        for partition in self.partitions:
            await partition.finish()

    def _close_all(self) -> None:
        for op in reversed(self.operators):
            with contextlib.suppress(Exception):
                op.close()
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

    def _restore(self, restore_state: dict[str, list[dict[str, Any]]]) -> None:
        """Load checkpointed state (recovery, or a savepoint at any parallelism): keyed state and
        timers of this subtask's key groups, and this subtask's share of the operator list
        state (sources keep their splits there)."""
        from weir.keys import KeyGroupRange

        d = self.d
        for op in self.operators:
            payloads = restore_state.get(op.context.operator_id)
            if not payloads:
                continue
            backend = op.context.keyed_backend
            if backend is not None:
                from weir.state.incremental import restorable_for  # chains: native or folded

                keyed = [p["keyed"] for p in payloads if p.get("keyed") is not None]
                backend.restore(restorable_for(backend, keyed))
            timers = getattr(op, "timers", None)
            internal: Any = getattr(timers, "internal", timers)
            snapshots = [p["timers"] for p in payloads if p.get("timers") is not None]
            if internal is not None and hasattr(internal, "restore") and snapshots:
                key_groups = (
                    backend.key_group_range
                    if backend is not None
                    else KeyGroupRange(0, op.context.max_parallelism - 1)
                )
                internal.restore(snapshots, key_groups)
            operator_states = [
                p["operator_state"]
                for p in sorted(payloads, key=lambda p: p.get("subtask", 0))
                if p.get("operator_state") is not None
            ]
            if operator_states:
                parts = repartition_operator_state(operator_states, d.job_vertex.parallelism)
                op.context.operator_state().restore([parts[d.subtask_index]])
            op.context.is_restored = True
            if op is self.operators[0]:
                mine = [p for p in payloads if p.get("subtask") == d.subtask_index and p.get("channel_state")]
                if mine:
                    self._restored_channels = mine[0]["channel_state"]

    async def _snapshot_operators(self, checkpoint_id: int, full: bool = False) -> list[OperatorSnapshot]:
        """The synchronous part of a checkpoint: copy out every chained operator's state.
        Operators first flush what they hold outside the backends (head first, so what a head
        emits reaches its successors before they snapshot), then snapshot themselves.
        Keyed state is incremental where the backend has it on (LMDB), unless ``full`` (savepoints:
        always the full, canonical ``backend.snapshot()``)."""
        d = self.d
        started = time.perf_counter()
        first = self._first_barrier_ms.pop(checkpoint_id, None)
        timing = self._checkpoint_timing.setdefault(checkpoint_id, {})
        timing["alignment_ms"] = 0.0 if first is None else float(d.processing_time_ms() - first)
        for node_id in d.job_vertex.chained_node_ids:
            self.guards[node_id].call("prepare_snapshot_pre_barrier", checkpoint_id)
        await self._drain()
        for node_id in d.job_vertex.chained_node_ids:
            self.guards[node_id].call("snapshot_state", checkpoint_id)
        out = []
        for op in self.operators:
            ctx = op.context
            op_state = ctx.operator_state_backend
            operator_state = op_state.snapshot() if op_state is not None and op_state.state_names() else None
            backend = ctx.keyed_backend
            timers = getattr(op, "timers", None)
            internal: Any = getattr(timers, "internal", timers)
            timer_snapshot = (
                internal.snapshot() if internal is not None and hasattr(internal, "snapshot") else None
            )
            keyed: Any = None
            if backend is not None:
                storage = d.checkpoint_storage
                if not full and storage is not None and getattr(backend, "incremental_checkpointing", False):
                    keyed = backend.snapshot_incremental(checkpoint_id, storage.is_complete)
                else:
                    keyed = backend.snapshot()
            out.append(
                OperatorSnapshot(
                    operator_id=ctx.operator_id,
                    parallelism=ctx.parallelism,
                    max_parallelism=ctx.max_parallelism,
                    subtask_index=d.subtask_index,
                    keyed=keyed,
                    key_group_range=None if backend is None else backend.key_group_range,
                    timers=timer_snapshot,
                    source_position=op.position if isinstance(op, SourceOperator) else None,
                    operator_state=operator_state,
                )
            )
        timing["sync_ms"] = (time.perf_counter() - started) * 1000
        return out

    async def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Snapshot, forward the barrier in line, and write the files in the background.
        Called with the drain lock held. Cancellation: the checkpoint is abandoned."""
        await self._drain()  # everything before the barrier goes out first
        snapshots = await self._snapshot_operators(
            barrier.checkpoint_id, full=barrier.is_savepoint and not barrier.native
        )
        channel_state = ChannelState(barrier.checkpoint_id) if barrier.unaligned else None
        await self._forward_barrier(barrier, channel_state)
        if channel_state is not None:
            channel_state.complete.set()  # a source has no input channels
        assert self._nursery is not None
        self._nursery.start_soon(self._write_and_acknowledge, barrier.checkpoint_id, snapshots, channel_state)

    async def _forward_barrier(self, barrier: CheckpointBarrier, channel_state: ChannelState | None) -> None:
        """Send ``barrier`` downstream: in line (aligned), or ahead of the unsent output,
        which then belongs to the checkpoint's channel state (unaligned)."""
        await self._drain()
        if not barrier.unaligned:
            for writer in self.writers:
                writer.add_event(barrier)
            await self._drain()
            return
        for i, partition in enumerate(self.partitions):
            for sub, data in enumerate(partition.broadcast_priority_event(barrier)):
                if channel_state is not None and data:
                    channel_state.outputs[f"{i}:{sub}"] = data

    async def _write_and_acknowledge(
        self, checkpoint_id: int, snapshots: list[OperatorSnapshot], channel_state: ChannelState | None = None
    ) -> None:
        """The asynchronous part: write in a worker thread while processing goes on (for an
        unaligned checkpoint once its channel state is complete).
        Cancellation: the files written so far stay; the checkpoint never completes."""
        d = self.d
        if d.checkpoint_storage is None or d.on_checkpoint_ack is None:
            return
        persisted = 0
        if channel_state is not None:
            await channel_state.complete.wait()
            if self._channel_state is channel_state:
                self._channel_state = None
            payload = channel_state.to_payload()
            persisted = channel_state.size_bytes()
            self.persisted_in_flight_bytes += persisted
            snapshots = [replace(snapshots[0], channel_state=payload), *snapshots[1:]]
        started = time.perf_counter()
        try:
            acks, size = await trio.to_thread.run_sync(
                write_operator_snapshots, d.checkpoint_storage, checkpoint_id, snapshots
            )
        except Exception as exc:
            if d.on_checkpoint_decline is not None:
                d.on_checkpoint_decline(d.execution_id, checkpoint_id, f"{type(exc).__name__}: {exc}")
            return
        timing = self._checkpoint_timing.pop(checkpoint_id, {})
        if d.on_checkpoint_metrics is not None:
            d.on_checkpoint_metrics(
                d.execution_id,
                checkpoint_id,
                {
                    "alignment_ms": timing.get("alignment_ms", 0.0),
                    "sync_ms": timing.get("sync_ms", 0.0),
                    "async_ms": (time.perf_counter() - started) * 1000,
                    "checkpointed_size_bytes": size,
                    "full_size_bytes": sum(
                        a.handle.file.size_bytes + sum(f.size_bytes for f in a.handle.shared_files)
                        for a in acks
                    ),
                    "persisted_in_flight_bytes": persisted,
                },
            )
        d.on_checkpoint_ack(d.execution_id, checkpoint_id, acks, size)

    # -- processing time -----------------------------------------------------------------------
    def _next_deadline_ms(self) -> int | None:
        deadlines = [t for op in self.operators if (t := op.next_processing_time_deadline()) is not None]
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
                    self.guards[node_id].call(method, checkpoint_id)
                await self._drain()
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
                        self.guards[head_id].call("finish")  # end event time: every timer fires first
                        await self._drain()
                    await self._checkpoint(barrier)
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
                    self.guards[node_id].call("on_processing_time", now)
                await self._drain()

    def statistics(self) -> TaskStatistics:
        partitions = [p.statistics() for p in self.partitions]
        return TaskStatistics(
            name=self.d.name_with_subtask,
            records_in=self.records_in
            if self.operators and not isinstance(self.operators[0], SourceOperator)
            else 0,
            records_out=sum(w.records_out for w in self.writers),
            buffers_in=self.buffers_in,
            buffers_out=sum(sp.buffers_finished for p in partitions for sp in p.subpartitions),
            backpressured_seconds=self.backpressured_seconds,
            busy_seconds=trio.current_time() - self._started,
            operators={op.name: (op.metrics.records_in, op.metrics.records_out) for op in self.operators},
            partitions=partitions,
            gate=None if self.gate is None else self.gate.statistics(),
        )


def _type_checked(process: Callable[[Batch], None], type_info: Any) -> Callable[[Batch], None]:
    """``process`` behind a check that each batch fits the edge's declared type. The producer
    calls it, so its guard names the producer; records in a chain are never encoded, and the
    check is what enforces a declared ``output_type`` there. An untyped edge is not checked."""
    if type_info is None:
        return process
    serializer = serializer_for(type_info)
    if not isinstance(serializer, ColumnarSerializer):
        return process  # pickled: anything goes
    check = serializer.check_types

    def checked(batch: Batch) -> None:
        check(batch)
        process(batch)

    return checked


def _edge_type(graph: StreamGraph, edge: StreamEdge) -> Any:
    if edge.side_output_tag is not None:
        return edge.side_output_tag.type_info
    return graph.node(edge.source_id).output_type


def _seed(job_id: str) -> int:
    return int(job_id[:8], 16) if job_id[:8].isalnum() else 0
