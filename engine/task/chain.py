"""The operator chain of one task (Flink's OperatorChain): its operators, their outputs, and
the RecordWriters at its network edges.

A task's JobVertex fuses several StreamNodes; the chain turns them into operators wired
to each other (a tree: an operator may feed several chained successors and several
network outputs, and side outputs go only to the edges that asked for their tag). Each
operator sits behind a guard, so a failure names the operator and the subtask; a chained
edge with a declared type checks every batch against it, since records in a chain are
never encoded -- except behind a filter or a timestamp assignment, which pass on records of
their input that fit the same type already (``passes_checked_records``). The chain opens
its operators tail first (a successor is ready before its predecessor emits), finishes
them head first, and drains its writers and async sinks once per batch. What it does not do: read input, take checkpoints, or fire timers (the task
and its input processor, checkpoint coordinator and timer loop do).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from weir.codec.batch import Batch
from weir.codec.serializers import ColumnarSerializer, serializer_for
from weir.columnar.functions import FieldKeySelector
from weir.common import config_options as opts
from weir.errors import OperatorFailure, UsageError
from weir.graph.stream_graph import StreamEdge, StreamGraph
from weir.network.events import WatermarkStatus
from weir.operators.base import ChainingOutput, OperatorContext, StreamOperator
from weir.operators.factory import create_operator, create_source
from weir.operators.sinks import SinkOperator
from weir.operators.stateless import FilterOperator, TimestampsAndWatermarksOperator
from weir.operators.window import two_phase
from weir.state.operator_state import OperatorStateBackend
from weir.task.channel_selectors import selector_for
from weir.task.record_writer import FrameCache, RecordWriter

if TYPE_CHECKING:
    from weir.task.task import TaskDeployment

__all__ = ["OperatorChain", "OperatorGuard", "edge_type", "passes_checked_records"]


class WriterTarget:
    """Adapts a RecordWriter to the operator-side callbacks (queue only)."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer

    def process(self, batch: Batch) -> None:
        self.writer.add(batch)

    def watermark(self, timestamp: int) -> None:
        self.writer.add_watermark(timestamp)

    def status(self, idle: bool) -> None:
        self.writer.add_event(WatermarkStatus(idle))


class OperatorGuard:
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


class OperatorChain:
    """The chained operators of one subtask, head first, with their guards and writers.

    ``create_keyed_backend(operator_id, max_parallelism)`` gives a keyed operator its
    state backend (the task owns the backends and disposes of them)."""

    def __init__(
        self, deployment: TaskDeployment, network: Any, create_keyed_backend: Callable[[str, int], Any]
    ) -> None:
        self.d = deployment
        self.network = network
        self.create_keyed_backend = create_keyed_backend
        self.operators: list[StreamOperator] = []  # chain order, head first
        self.guards: dict[int, OperatorGuard] = {}
        self._producers: dict[int, OperatorGuard] = {}  # id(writer) -> the operator that feeds it
        self.writers: list[RecordWriter] = []
        self.partitions: list[Any] = []
        self.async_sinks: list[SinkOperator] = []
        self.backpressured_seconds = 0.0

    @property
    def head_guard(self) -> OperatorGuard:
        return self.guards[self.d.job_vertex.chained_node_ids[0]]

    def build(self, nursery: trio.Nursery) -> None:
        """Create the operators (a source needs ``nursery``), their writers, and wire them."""
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
                partial = two_phase.layout_for(graph, node)
                if partial is not None:
                    op.use_partial_input(partial)  # type: ignore[attr-defined]
            by_node[node_id] = op
            self.operators.append(op)
            self.guards[node_id] = OperatorGuard(op, d.subtask_index, vertex.parallelism)
            if d.failure_injector is not None:
                self.guards[node_id].inject = d.failure_injector.for_operator(
                    node.name, node.uid, d.subtask_index, vertex.parallelism, d.attempt_number, d.execution_id
                )
            if isinstance(op, SinkOperator) and type(op).drain is not SinkOperator.drain:
                self.async_sinks.append(op)
        writers_by_edge: dict[int, WriterTarget] = {}
        frames = FrameCache()
        for produced in d.produced:
            partition = self.network.create_result_partition(
                produced.partition_id, produced.num_subpartitions, blocking=produced.blocking
            )
            self.partitions.append(partition)
            stream_edge = produced.job_edge.stream_edge
            consumer = graph.node(stream_edge.target_id)
            partial = two_phase.edge_layout(graph, stream_edge)
            partitioner = produced.job_edge.partitioner
            if partial is not None:  # partial rows: the key is their field 0
                partitioner = dataclasses.replace(partitioner, key_selector=FieldKeySelector(0))
            writer = RecordWriter(
                partition,
                selector_for(
                    partitioner, d.subtask_index, consumer.max_parallelism, partitioner_seed(d.job_id)
                ),
                serializer_for(wire_type(graph, stream_edge)),
                flush_after_emit=d.buffer_timeout_ms == 0,
                frames=frames,
            )
            if partial is not None:
                conf = graph.configuration
                writer.combiner = two_phase.LocalAggregator(
                    partial,
                    f"operator '{graph.node(stream_edge.source_id).name}' (local phase of '{consumer.name}')",
                    hold=d.buffer_timeout_ms != 0,
                    sampling=(
                        int(conf.get_option(opts.LOCAL_AGG_SAMPLING))
                        if conf.get_option(opts.LOCAL_AGG_ADAPTIVE)
                        else None
                    ),
                    distinct_rate=float(conf.get_option(opts.LOCAL_AGG_DISTINCT_RATE)),
                )
            self.writers.append(writer)
            self._producers[id(writer)] = self.guards[stream_edge.source_id]
            writers_by_edge[id(stream_edge)] = WriterTarget(writer)
        for node_id in vertex.chained_node_ids:
            node = graph.node(node_id)
            output = ChainingOutput()
            for edge in node.out_edges:
                if edge.target_id in chain_ids:
                    guard = self.guards[edge.target_id]
                    checked_type = (
                        None
                        if passes_checked_records(graph, edge, by_node[node_id])
                        else edge_type(graph, edge)
                    )
                    process, on_wm = type_checked(guard.process, checked_type), guard.watermark
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
                keyed_backend = self.create_keyed_backend(operator_id, node.max_parallelism)
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

    def open_operators(self) -> None:
        """Initialize state and open every operator, tail first."""
        for node_id in reversed(self.d.job_vertex.chained_node_ids):
            self.guards[node_id].call("initialize_state")
            self.guards[node_id].call("open")

    def call_all(self, method: str, *args: Any) -> None:
        """Call ``method`` on every operator, head first (checkpoint notifications, timers)."""
        for node_id in self.d.job_vertex.chained_node_ids:
            self.guards[node_id].call(method, *args)

    async def drain(self) -> None:
        """Await the writers' and async sinks' ``drain``: once per batch, never per record."""
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

    async def finish_operators(self, skip_head: bool = False) -> None:
        """End of input: ``finish`` the operators head first, draining after each, then send
        EndOfPartition. ``skip_head``: a stop without drain (event time does not end: no
        Long.MAX watermark)."""
        for i, node_id in enumerate(self.d.job_vertex.chained_node_ids):
            if i == 0 and skip_head:
                continue
            self.guards[node_id].call("finish")
            await self.drain()
        self.flush_held()
        await self.drain()

    def flush_held(self) -> None:
        """Queue what the writers' local phases hold (``RecordWriter.flush_held``)."""
        for writer in self.writers:
            writer.flush_held()

    async def finish_partitions(self) -> None:
        for partition in self.partitions:
            await partition.finish()

    def close_operators(self) -> None:
        """Close every operator, tail first; runs after failures and cancellation too."""
        for op in reversed(self.operators):
            with contextlib.suppress(Exception):
                op.close()


def type_checked(process: Callable[[Batch], None], type_info: Any) -> Callable[[Batch], None]:
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


#: Operators whose main output holds only record objects of their input (a subset, in order).
PASS_THROUGH = (FilterOperator, TimestampsAndWatermarksOperator)


def passes_checked_records(graph: StreamGraph, edge: StreamEdge, operator: StreamOperator) -> bool:
    """Whether every record on chained ``edge`` already fits its type, so the check would
    only repeat one done before: ``operator`` (its producer) passes its input records on
    unchanged, and each of its inputs has the edge's type, so each was checked on its own
    chained edge or decoded by a serializer of that type. A record that does not fit is then
    reported where it was made, naming the operator that made it, as before."""
    if type(operator) not in PASS_THROUGH or edge.side_output_tag is not None:
        return False
    out = edge_type(graph, edge)
    node = graph.node(edge.source_id)
    return bool(node.in_edges) and all(edge_type(graph, e) == out for e in node.in_edges)


def edge_type(graph: StreamGraph, edge: StreamEdge) -> Any:
    if edge.side_output_tag is not None:
        return edge.side_output_tag.type_info
    return graph.node(edge.source_id).output_type


def wire_type(graph: StreamGraph, edge: StreamEdge) -> Any:
    """What a network edge carries: the records' type, or the partial rows of a two-phase
    window (``weir.operators.window.two_phase``)."""
    partial = two_phase.edge_layout(graph, edge)
    return edge_type(graph, edge) if partial is None else partial.type_info


def partitioner_seed(job_id: str) -> int:
    return int(job_id[:8], 16) if job_id[:8].isalnum() else 0
