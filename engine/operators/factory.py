"""Turn a StreamNode into the operator that runs it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from weir.codec.batch import Batch
from weir.common.watermark_strategy import WatermarkStrategy
from weir.core.connectors import has_runtime_side
from weir.errors import UsageError
from weir.graph.stream_graph import StreamNode
from weir.graph.transformations import SinkTransformation, SourceTransformation
from weir.operators import collect, keyed, sources, stateless
from weir.operators.base import StreamOperator, copy_function, emit_watermark_actions
from weir.time.watermarks import (
    TimestampAssignment,
    WatermarkOutput,
)

MAX_WATERMARK = (1 << 63) - 1


class SourceOperator(StreamOperator):
    """The head of a source task: pulls batches from its reader, stamps them, emits watermarks.

    Watermarks follow the source's WatermarkStrategy: generated from the largest timestamp
    seen, emitted on the auto-watermark interval (every batch when it is 0), and with
    ``with_idleness`` an idle status when no record came for the timeout, so downstream
    valves stop waiting for this subtask.
    """

    def __init__(
        self, name: str, reader: sources.SourceReader, strategy: WatermarkStrategy | None, interval_ms: int
    ) -> None:
        super().__init__(name)
        self.reader = reader
        self.strategy = strategy
        self.stamping = None if strategy is None else TimestampAssignment(strategy)
        self.watermarks = None if strategy is None else WatermarkOutput(strategy)
        self.interval_ms = interval_ms
        self._next_emit_ms: int | None = None

    SPLITS_STATE = "SourceReaderState"

    def initialize_state(self) -> None:
        """After a restore: the reader takes over the splits this subtask got (possibly
        from other subtasks, when the parallelism changed). A reader that is not
        replayable saved no splits and starts from its beginning."""
        store = self.context.operator_state()
        if self.context.is_restored and self.SPLITS_STATE in store.state_names():
            state = store.get_list_state(self._splits_descriptor())
            self.reader.restore_splits([json.loads(s) for s in state.get()])

    def _splits_descriptor(self) -> Any:
        from weir.common.typeinfo import Types
        from weir.core.state import ListStateDescriptor

        return ListStateDescriptor(self.SPLITS_STATE, Types.STRING())

    def snapshot_state(self, checkpoint_id: int) -> None:
        """The splits as of the last emitted batch (the reader may have read one ahead)."""
        if self.splits is not None:
            state = self.context.operator_state().get_list_state(self._splits_descriptor())
            state.update([json.dumps(s, sort_keys=True) for s in self.splits])
        on_snapshot = getattr(self.reader, "on_snapshot", None)
        if on_snapshot is not None:
            on_snapshot(checkpoint_id, self.splits)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Passed on to the reader (a Kafka reader commits the checkpoint's offsets)."""
        notify = getattr(self.reader, "notify_checkpoint_complete", None)
        if notify is not None:
            notify(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        notify = getattr(self.reader, "notify_checkpoint_aborted", None)
        if notify is not None:
            notify(checkpoint_id)

    def open(self) -> None:
        self.position = self._position_after_poll = self.reader.position()
        self.splits = self._splits_after_poll = self.reader.snapshot_splits()
        if self.watermarks is not None and self.interval_ms > 0:
            self._next_emit_ms = self.context.processing_time_ms() + self.interval_ms

    def process_batch(self, batch: Batch) -> None:  # pragma: no cover - sources have no input
        raise AssertionError("a source has no input")

    async def poll(self) -> Batch | None:
        """The reader's next batch (None at the end). Cancellation: stops reading."""
        batch = await self.reader.next_batch()
        self._position_after_poll = self.reader.position()
        self._splits_after_poll = self.reader.snapshot_splits()
        return batch

    def emit_batch(self, batch: Batch) -> None:
        """Stamp a batch from ``poll``, push it into the chain, and emit what watermarks follow."""
        self.position = self._position_after_poll  # checkpoints record what was emitted, not what was read
        self.splits = self._splits_after_poll
        if (
            self.stamping is not None
            and self.strategy is not None
            and self.strategy.timestamp_assigner is not None
        ):
            batch = Batch(batch.values, self.stamping.stamp(batch.values, batch.timestamps))
        self.metrics.records_in += len(batch)
        self._emit(batch)
        if self.watermarks is not None:
            actions = self.watermarks.on_events(batch.timestamps, self.context.processing_time_ms())
            if self.interval_ms == 0:
                actions += self.watermarks.on_periodic_emit(self.context.processing_time_ms())
            emit_watermark_actions(self, actions)

    def next_processing_time_deadline(self) -> int | None:
        return self._next_emit_ms

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_emit_ms is not None and now_ms >= self._next_emit_ms:
            assert self.watermarks is not None
            emit_watermark_actions(self, self.watermarks.on_periodic_emit(now_ms))
            self._next_emit_ms = now_ms + self.interval_ms

    def finish(self) -> None:
        # End of a bounded input: event time is over (Flink emits Long.MAX here).
        if self.watermarks is not None:
            emit_watermark_actions(self, self.watermarks.on_end_of_input())
        if self.current_watermark < MAX_WATERMARK:
            self.current_watermark = MAX_WATERMARK
            self.chain_output.emit_watermark(MAX_WATERMARK)

    def close(self) -> None:
        self.reader.close()


def create_source(
    node: StreamNode, subtask: int, parallelism: int, nursery: Any, interval_ms: int
) -> SourceOperator:
    t = node.transformation
    assert isinstance(t, SourceTransformation)
    src = t.source
    if hasattr(src, "create_source_operator"):  # brings its own head operator (weir.testing.TestStream)
        return src.create_source_operator(node.name, subtask, parallelism, interval_ms, t.watermark_strategy)
    if not has_runtime_side(src):
        raise UsageError(f"source '{node.name}': weir cannot run sources of type {type(src).__name__}")
    reader = src.create_reader(subtask, parallelism)  # the connector names its reader
    start_in = getattr(reader, "start_in", None)
    if start_in is not None:
        start_in(nursery)
    strategy = t.watermark_strategy
    if strategy is not None and strategy.kind == WatermarkStrategy.NONE:
        strategy = None
    return SourceOperator(node.name, reader, strategy, interval_ms)


def input_type_of(node: StreamNode) -> Any:
    """The type of the records a one-input operator receives (None when unknown)."""
    inputs = node.transformation.inputs
    return inputs[0].output_type if inputs else None


def own_copy(node: StreamNode, function: Any) -> Any:
    """Each subtask gets its own copy of a user function, as Flink deserializes one per subtask."""
    return copy_function(node.name, function)


def create_operator(
    node: StreamNode, collect_channels: dict[int, Any], auto_watermark_interval_ms: int
) -> StreamOperator:
    t = node.transformation
    if isinstance(t, SinkTransformation):
        sink = t.sink
        if not has_runtime_side(sink):
            raise UsageError(f"sink '{node.name}': weir cannot run sinks of type {type(sink).__name__}")
        operator: StreamOperator = sink.create_operator(node.name)  # the connector names its operator
        if isinstance(operator, collect.CollectSinkOperator):
            if node.id not in collect_channels:
                raise UsageError(f"sink '{node.name}': collect sinks only run under execute_and_collect()")
            operator.channel = collect_channels[node.id]
        return operator
    spec = node.operator
    assert spec is not None
    kind = spec.kind
    if spec.function is not None:
        spec = dataclasses.replace(spec, function=own_copy(node, spec.function))
    if kind == "map":
        if getattr(spec.function, "vectorized", False):  # weir.columnar's batch_map / scalar_map
            from weir.operators.columnar import ColumnMapOperator

            return ColumnMapOperator(node.name, spec.function, input_type_of(node))
        return stateless.MapOperator(node.name, spec.function)
    if kind == "flat_map":
        return stateless.FlatMapOperator(node.name, spec.function)
    if kind == "filter":
        if getattr(spec.function, "vectorized", False):  # weir.columnar's batch_filter / scalar_filter
            from weir.operators.columnar import ColumnFilterOperator

            return ColumnFilterOperator(node.name, spec.function, input_type_of(node))
        return stateless.FilterOperator(node.name, spec.function)
    if kind == "process":
        return stateless.ProcessOperator(node.name, spec.function)
    if kind == "timestamps_watermarks":
        return stateless.TimestampsAndWatermarksOperator(
            node.name, spec.options["watermark_strategy"], auto_watermark_interval_ms
        )
    if kind == "reduce":
        return keyed.ReduceOperator(node.name, node.state_key_selector, spec.function)
    if kind == "aggregation":
        return keyed.AggregationOperator(
            node.name, node.state_key_selector, spec.options["aggregation"], spec.options["field"]
        )
    if kind == "keyed_process":
        from weir.operators import running

        vectorized, reason = running.explain(node)
        plan = running.plan_of(node) if vectorized else None
        if plan is not None:
            operator = running.RunningAggregatesOperator(
                node.name, node.state_key_selector, plan, spec.options["columnar"].get("input_type")
            )
        else:
            operator = keyed.KeyedProcessOperator(node.name, node.state_key_selector, spec.function)
        operator.vectorized_reason = reason
        return operator
    if kind in ("co_map", "co_flat_map", "co_process", "keyed_co_process"):
        return _create_two_input_operator(node, kind, spec.function)
    if kind in ("broadcast_process", "keyed_broadcast_process"):
        from weir.operators import broadcast

        descriptors = spec.options["broadcast_state_descriptors"]
        if kind == "broadcast_process":
            return broadcast.BroadcastProcessOperator(node.name, spec.function, descriptors)
        return broadcast.KeyedBroadcastProcessOperator(
            node.name, node.state_key_selector, spec.function, descriptors
        )
    if kind == "window":
        from weir.operators.window import create_window_operator

        return create_window_operator(node)
    raise UsageError(f"operator '{node.name}': unknown operator kind {kind!r}")


def _create_two_input_operator(node: StreamNode, kind: str, function: Any) -> StreamOperator:
    from weir.operators import co

    selector1, selector2 = node.state_key_selector, node.state_key_selector2
    if kind == "co_map":
        return co.CoMapOperator(node.name, function, selector1, selector2)
    if kind == "co_flat_map":
        return co.CoFlatMapOperator(node.name, function, selector1, selector2)
    if kind == "co_process":
        return co.CoProcessOperator(node.name, function)
    return co.KeyedCoProcessOperator(node.name, selector1, selector2, function)
