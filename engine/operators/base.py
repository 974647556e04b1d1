"""The operator contract and the outputs that connect operators in a chain.

An operator receives whole batches (``process_batch``) and emits batches to its
``Output``. Everything here is synchronous: operators never await. Outputs that end in
the network or at a client (RecordWriter, collect sink) only *queue* batches; the task
awaits their ``drain`` after each input batch, so an operator chain costs one await per
batch, never one per record.

Lifecycle, as in Flink's StreamTask: ``setup`` → ``initialize_state`` → ``open`` →
``process_batch``/``process_watermark``* → ``finish`` (end of input) → ``close``.
``close`` also runs after a failure or cancellation, so it must tolerate a half-opened
operator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch, TupleColumns
from weir.core.functions import RuntimeContext
from weir.core.metrics import MetricGroup
from weir.core.output_tag import is_tagged
from weir.errors import UsageError
from weir.time.watermarks import EmitWatermark, WatermarkAction


@dataclass
class OperatorMetrics:
    records_in: int = 0
    records_out: int = 0
    late_records_dropped: int = 0


@dataclass
class OperatorContext:
    """What an operator knows about where it runs."""

    task_name: str
    operator_name: str
    operator_id: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    batch_mode: bool
    processing_time_ms: Callable[[], int]
    job_parameters: dict[str, str] = field(default_factory=dict)
    keyed_backend: Any = None  # the subtask's KeyedStateBackend when the operator is keyed
    key_selector: Any = None
    operator_state_backend: Any = None  # the subtask's OperatorStateBackend (list and union list state)
    is_restored: bool = False  # the task restored this operator from a checkpoint or savepoint
    state_provider: Any = None  # the RuntimeStateProvider of the last runtime_context() on a keyed backend
    report_recovery: Callable[[str], None] | None = None  # a line for the job's "recovery" result
    metric_group: MetricGroup | None = None  # the user metrics of the operator's functions (on first use)

    def metrics_group(self) -> MetricGroup:
        """The root group of the user metrics of this operator subtask (created on first use)."""
        if self.metric_group is None:
            self.metric_group = MetricGroup(self.processing_time_ms)
        return self.metric_group

    def operator_state(self) -> Any:
        """The subtask's operator state (created on first use, also outside a task)."""
        if self.operator_state_backend is None:
            from weir.state.operator_state import OperatorStateBackend

            self.operator_state_backend = OperatorStateBackend(self.operator_id)
        return self.operator_state_backend

    def keyed_state_backend(self) -> Any:
        """The task's keyed backend, or a heap backend over all key groups when the operator
        runs outside a task (the operator test harnesses)."""
        if self.keyed_backend is None:
            from weir.keys import KeyGroupRange
            from weir.state import create_keyed_backend

            self.keyed_backend = create_keyed_backend(
                "hashmap", self.operator_id, self.max_parallelism, KeyGroupRange(0, self.max_parallelism - 1),
                self.processing_time_ms,
            )  # fmt: skip
        return self.keyed_backend

    def runtime_context(self, state_provider: Any = None) -> RuntimeContext:
        if state_provider is None and self.keyed_backend is not None:
            from weir.state.backend import RuntimeStateProvider

            state_provider = self.state_provider = RuntimeStateProvider(self.keyed_backend)
        return RuntimeContext(
            task_name=self.operator_name,
            index_of_this_subtask=self.subtask_index,
            number_of_parallel_subtasks=self.parallelism,
            max_number_of_parallel_subtasks=self.max_parallelism,
            attempt_number=self.attempt_number,
            job_parameters=self.job_parameters,
            state_provider=state_provider,
            metrics_group=self.metrics_group(),
        )


class Output:
    """Receives an operator's results."""

    def emit(self, batch: Batch) -> None:
        raise NotImplementedError

    def emit_side(self, tag: Any, batch: Batch) -> None:
        pass

    def has_side_outputs(self) -> bool:
        """Someone reads a side output of this operator: then ``(OutputTag, value)`` results
        go to that side output (PyFlink's ``yield tag, value``) instead of the main one."""
        return False

    def emit_watermark(self, timestamp: int) -> None:
        pass

    def emit_watermark_status(self, idle: bool) -> None:
        pass


class StreamOperator:
    """Base of every operator. Subclasses override ``process_batch`` at least."""

    chain_output: Output
    context: OperatorContext
    #: why the operator runs vectorized or per record ("vectorized: ..." / "per-record: <why>"),
    #: set by the factories that choose (``weir plan`` shows it); "" where there is no choice
    vectorized_reason: str = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.metrics = OperatorMetrics()
        self.current_watermark = -(1 << 63)

    def setup(self, context: OperatorContext, output: Output) -> None:
        self.context = context
        self.chain_output = output
        self._routes_tagged = output.has_side_outputs()

    def initialize_state(self) -> None:
        pass

    def open(self) -> None:
        pass

    def process_batch(self, batch: Batch) -> None:
        raise NotImplementedError

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        self.chain_output.emit_watermark(timestamp)

    def process_watermark_status(self, idle: bool) -> None:
        """This operator's input became idle (or active again); operators pass it on."""
        self.chain_output.emit_watermark_status(idle)

    def on_processing_time(self, now_ms: int) -> None:
        """The task's clock advanced; processing-time timers and triggers fire here."""

    def next_processing_time_deadline(self) -> int | None:
        return None

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass

    # checkpoints (Flink's StreamOperator / CheckpointListener)
    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Right before the synchronous snapshot: move anything held outside the state
        backends (e.g. accumulators in arrays) into them. May still emit records."""

    def snapshot_state(self, checkpoint_id: int) -> None:
        """The synchronous part of this operator's snapshot: write what must survive a
        failure into ``context.operator_state()`` (keyed state is snapshotted by the task)."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete (its ``_metadata`` is written)."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` will never complete."""

    # helpers for subclasses
    _routes_tagged = False

    def _emit(self, batch: Batch) -> None:
        if len(batch):
            if self._routes_tagged and not isinstance(batch.values, np.ndarray | TupleColumns):
                batch = route_tagged(batch, self.chain_output)
                if not len(batch):
                    return
            self.metrics.records_out += len(batch)
            self.chain_output.emit(batch)


class ChainingOutput(Output):
    """Hands batches straight to the next operator(s) of the chain; side outputs by tag."""

    def __init__(self) -> None:
        self.main: list[Callable[[Batch], None]] = []
        self.watermark_targets: list[Callable[[int], None]] = []
        self.status_targets: list[Callable[[bool], None]] = []
        self.side: dict[Any, list[Callable[[Batch], None]]] = {}

    def add_main(self, process: Callable[[Batch], None], on_watermark: Callable[[int], None]) -> None:
        self.main.append(process)
        self.watermark_targets.append(on_watermark)

    def add_side(
        self, tag: Any, process: Callable[[Batch], None], on_watermark: Callable[[int], None]
    ) -> None:
        self.side.setdefault(tag, []).append(process)
        self.watermark_targets.append(on_watermark)

    def emit(self, batch: Batch) -> None:
        for process in self.main:
            process(batch)

    def emit_side(self, tag: Any, batch: Batch) -> None:
        for process in self.side.get(tag, ()):
            process(batch)

    def has_side_outputs(self) -> bool:
        return bool(self.side)

    def emit_watermark(self, timestamp: int) -> None:
        for target in self.watermark_targets:
            target(timestamp)

    def add_status_target(self, on_status: Callable[[bool], None]) -> None:
        self.status_targets.append(on_status)

    def emit_watermark_status(self, idle: bool) -> None:
        for target in self.status_targets:
            target(idle)


class SideOutputs:
    """Records a user function sent to side outputs (``ctx.output(tag, value)``) while one
    batch is processed; ``flush`` emits them per tag as one batch each."""

    def __init__(self) -> None:
        self.pending: dict[Any, tuple[list[Any], list[int]]] = {}

    def add(self, tag: Any, value: Any, timestamp: int | None) -> None:
        values, stamps = self.pending.setdefault(tag, ([], []))
        values.append(value)
        stamps.append(NO_TIMESTAMP if timestamp is None else timestamp)

    def flush(self, output: Output) -> None:
        if self.pending:
            pending, self.pending = self.pending, {}
            for tag, (values, stamps) in pending.items():
                output.emit_side(tag, Batch(values, np.array(stamps, dtype=np.int64)))


def route_tagged(batch: Batch, output: Output) -> Batch:
    """Send the ``(OutputTag, value)`` records of ``batch`` to their side outputs (each with
    its record's timestamp) and return the rest, in order: PyFlink's ``yield tag, value``.
    A tag nobody reads drops its records, as Flink drops an unread side output."""
    values = batch.values
    tagged = [i for i, v in enumerate(values) if is_tagged(v)]
    if not tagged:
        return batch
    side = SideOutputs()
    stamps = batch.timestamp_list()
    for i in tagged:
        tag, value = values[i]
        side.add(tag, value, stamps[i])
    side.flush(output)
    keep = np.ones(len(values), dtype=bool)
    keep[tagged] = False
    return batch.take(np.flatnonzero(keep))


def results_of(value: Any) -> list[Any]:
    """A user function's return: None → nothing; an iterable or generator → its items."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return list(value)


def copy_function(name: str, function: Any) -> Any:
    """Each subtask of operator ``name`` gets its own copy of a user function, as Flink
    deserializes one per subtask."""
    if function is None:
        return None
    try:
        return copy.deepcopy(function)
    except Exception as exc:
        raise UsageError(
            f"operator '{name}': its function {function!r} cannot be copied for each subtask "
            f"({type(exc).__name__}: {exc}); functions must be copyable (picklable), as in Flink"
        ) from exc


def emit_watermark_actions(operator: Any, actions: list[WatermarkAction]) -> None:
    """Carry out a watermark generator's actions on ``operator``'s output (a source, or the
    operator of ``assign_timestamps_and_watermarks``): a watermark only when it moves the
    operator's ``current_watermark`` on, and idle/active status as it comes."""
    for action in actions:
        if isinstance(action, EmitWatermark):
            if action.timestamp > operator.current_watermark:
                operator.current_watermark = action.timestamp
                operator.chain_output.emit_watermark(action.timestamp)
        else:
            operator.chain_output.emit_watermark_status(action.idle)
