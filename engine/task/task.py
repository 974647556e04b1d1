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

This module holds the task itself (Flink's StreamTask): the lifecycle, the source loop, the
drain lock, and the timer loop, which also runs checkpoint triggers and notifications
between batches (Flink's mailbox). The chain is ``weir.task.chain``, the input loop and
barrier alignment ``weir.task.input_processor``, snapshots and restore
``weir.task.checkpointing``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from weir.errors import OperatorFailure, WeirError
from weir.graph.job_graph import JobEdge, JobVertex
from weir.graph.stream_graph import StreamGraph
from weir.loop.ticker import use_ticker
from weir.network.debloat import BatchDebloater
from weir.network.environment import ChannelSpec
from weir.network.events import CheckpointBarrier
from weir.network.flusher import run_output_flusher
from weir.operators.factory import SourceOperator
from weir.state import unforked
from weir.task.chain import OperatorChain
from weir.task.channel_state import check_partial_rows, replay_output_state
from weir.task.checkpointing import SubtaskCheckpointCoordinator
from weir.task.input_processor import StreamInputProcessor


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
    async_snapshot: str = (
        "thread"  # weir.checkpointing.async-snapshot: "auto" | "process" (a forked child) | "thread"
    )
    periodic_checkpoints: bool = False  # execution.checkpointing.interval is set

    @property
    def forks_snapshots(self) -> bool:
        """Whether this task's checkpoints may be written by forked children."""
        mode = self.async_snapshot.lower()
        return mode == "process" or (mode == "auto" and self.periodic_checkpoints)

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
    #: the metrics user functions registered (``get_metrics_group()``): operator name → dotted
    #: metric name → value (a count, a gauge's value, {count, rate} of a meter, {count, sum,
    #: min, max, mean} of a distribution); only operators that registered some
    user_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def backpressured_fraction(self) -> float:
        return self.backpressured_seconds / self.busy_seconds if self.busy_seconds > 0 else 0.0


def user_metrics(operators: list[Any]) -> dict[str, dict[str, Any]]:
    """The user metrics of the operators of a chain that registered any, by operator name."""
    out: dict[str, dict[str, Any]] = {}
    for op in operators:
        group = getattr(getattr(op, "context", None), "metric_group", None)
        if group is not None and (values := group.snapshot()):
            out[op.name] = values
    return out


class Task:
    def __init__(self, deployment: TaskDeployment, network: Any) -> None:
        self.d = deployment
        self.network = network
        if deployment.forks_snapshots:  # pane tables a child does not inherit (docs/state.md)
            unforked.enable()
        self.chain = OperatorChain(deployment, network, self._create_keyed_backend)
        self._flushed_by_timer: list[Any] = []  # partitions the TaskManager's shared flusher flushes
        self.keyed_backends: list[Any] = []
        self._triggers: list[tuple[CheckpointBarrier, str | None]] = []
        self._notifications: list[tuple[str, int]] = []
        self.checkpointing = SubtaskCheckpointCoordinator(deployment, self.chain)
        self._drain_lock = _DrainLock()
        self.input = StreamInputProcessor(
            deployment, network, self.chain, self.checkpointing, self._drain_lock, self._poke_timers_if_due
        )
        self._restored_channels: dict[str, Any] | None = None
        self._input_ended = False
        self._stop: tuple[int, str] | None = None  # (savepoint id, mode) of a stop-with-savepoint
        self._stop_changed = trio.Event()
        self._stopped_without_drain = False
        self._stop_done = False
        self._poll_scope: trio.CancelScope | None = None
        self._timer_changed = trio.Event()
        # what the timer loop waits for: a deadline, inf (nothing), -inf (it is busy)
        self._armed_deadline = -math.inf
        self._started = trio.current_time()

    # -- building ------------------------------------------------------------------------------
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
                    restored, self._restored_channels = self._restored_channels, None
                    await self.input.run(restored)
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
            check_partial_rows(restored, *self.checkpointing.partial_rows(), self.d.job_vertex.name)
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
                    await self.input.cancel_alignment(checkpoint_id)
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
            records_in=self.input.records_in
            if self.chain.operators and not isinstance(self.chain.operators[0], SourceOperator)
            else 0,
            records_out=sum(w.records_out for w in self.chain.writers),
            buffers_in=self.input.buffers_in,
            buffers_out=sum(sp.buffers_finished for p in partitions for sp in p.subpartitions),
            backpressured_seconds=self.chain.backpressured_seconds,
            busy_seconds=trio.current_time() - self._started,
            operators={
                op.name: (op.metrics.records_in, op.metrics.records_out) for op in self.chain.operators
            },
            partitions=partitions,
            gate=None if self.input.gate is None else self.input.gate.statistics(),
            user_metrics=user_metrics(self.chain.operators),
        )
