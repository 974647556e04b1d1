"""Operator test harnesses: drive one operator or function record by record, without a cluster.

As Flink's ``OneInputStreamOperatorTestHarness`` and
``KeyedOneInputStreamOperatorTestHarness``::

    h = KeyedOneInputStreamOperatorTestHarness(MyKeyedProcessFunction(), key_selector=lambda e: e[0])
    h.open()
    h.process_element(("a", 1), timestamp=10)
    h.process_watermark(100)            # event-time timers fire
    h.set_processing_time(60_000)       # processing-time timers fire
    assert h.extract_output_values() == [...]
    snapshot = h.snapshot()             # keyed state, timers, operator state

    h2 = KeyedOneInputStreamOperatorTestHarness(..., parallelism=2, subtask_index=1)
    h2.restore(snapshot)                # takes the key groups of subtask 1 of 2
    h2.open()

``harness_for(stream)`` wraps the operator of any stream built with the DataStream API
(a window, a reduce, a map with a lambda, ...): build the pipeline as usual and hand the
last stream to it.

Theory of operation
-------------------
A harness plays the task's part for one operator: it builds the OperatorContext (subtask
index, parallelism, max parallelism, a processing-time clock it owns, and for keyed
harnesses a keyed state backend over the subtask's key-group range from
``compute_key_group_range_for_operator_index``), collects everything the operator emits
in order (records with timestamps, watermarks, idleness, side outputs per tag) and calls
the operator's entry points directly. Time moves only when the test says so:
``process_watermark`` for event time, ``set_processing_time`` for processing time (it
fires every processing-time callback due by then).

Timers and keyed state are shown as a checkpoint would see them: operators that keep state
outside their backend for speed (the window operator's fast panes) are first asked to
write it in (``prepare_snapshot_pre_barrier``), as the task does before a snapshot.

Snapshots are what a checkpoint of this subtask would hold: the keyed state
(``KeyedStateSnapshot``), the timers (``TimerSnapshot``) and the operator state.
``restore`` takes snapshots of one or several old subtasks taken at any parallelism with
the same max parallelism: keyed state and timers are filtered to the new subtask's key
groups (as recovery does), operator list state is split evenly and union state given
whole. Restoring must happen before ``open``, as Flink's ``initializeState``.

Two-input operators (``connect``) have ``TwoInputStreamOperatorTestHarness`` and
``KeyedTwoInputStreamOperatorTestHarness``: ``process_element1``/``process_element2``
and a watermark per input (``process_watermark1``/``process_watermark2``); the
operator's event time is the minimum of the two, as in a task.

What it does not do: run chains of operators, networks or checkpoint barriers (use the
``weir_env`` fixture for that).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.core import functions as fn
from weir.errors import UsageError
from weir.keys import KeyGroupRange, assign_to_key_group, compute_key_group_range_for_operator_index
from weir.operators.base import OperatorContext, Output, StreamOperator

# -- what comes out --------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamRecord:
    """A record an operator emitted, with its event timestamp (None: it has none)."""

    value: Any
    timestamp: int | None = None


@dataclass(frozen=True)
class Watermark:
    """A watermark an operator forwarded."""

    timestamp: int


@dataclass(frozen=True)
class WatermarkStatus:
    """An idle (or active again) status an operator forwarded."""

    idle: bool


@dataclass(frozen=True)
class RegisteredTimer:
    """A timer the operator has registered and that has not fired yet."""

    timestamp: int
    key: Any
    namespace: Any = None


@dataclass(frozen=True)
class OperatorSubtaskState:
    """A harness snapshot: what a checkpoint of this operator subtask would hold."""

    operator_name: str
    checkpoint_id: int
    max_parallelism: int
    parallelism: int
    subtask_index: int
    key_group_range: KeyGroupRange | None
    keyed: Any = None  # KeyedStateSnapshot
    timers: Any = None  # TimerSnapshot
    operator_state: Any = None  # OperatorStateSnapshot


class _CollectingOutput(Output):
    def __init__(self) -> None:
        self.events: list[StreamRecord | Watermark | WatermarkStatus] = []
        self.side: dict[Any, list[StreamRecord]] = {}

    def emit(self, batch: Batch) -> None:
        self.events.extend(StreamRecord(v, t) for v, t in zip(batch.as_list(), batch.timestamp_list()))

    def emit_side(self, tag: Any, batch: Batch) -> None:
        self.side.setdefault(tag, []).extend(
            StreamRecord(v, t) for v, t in zip(batch.as_list(), batch.timestamp_list())
        )

    def has_side_outputs(self) -> bool:
        return True  # a harness records every side output

    def emit_watermark(self, timestamp: int) -> None:
        self.events.append(Watermark(timestamp))

    def emit_watermark_status(self, idle: bool) -> None:
        self.events.append(WatermarkStatus(idle))


# -- functions to operators ------------------------------------------------------------------


def _operator_for(function: Any, keyed: bool, key_selector: Any) -> StreamOperator:
    from weir.operators import keyed as keyed_ops
    from weir.operators import stateless

    if isinstance(function, StreamOperator):
        return function
    name = type(function).__name__
    if isinstance(
        function, (fn.CoMapFunction, fn.CoFlatMapFunction, fn.CoProcessFunction, fn.KeyedCoProcessFunction)
    ):
        raise UsageError(
            f"{name} takes two inputs: test it with TwoInputStreamOperatorTestHarness "
            f"(or KeyedTwoInputStreamOperatorTestHarness)"
        )
    if isinstance(function, fn.KeyedProcessFunction):
        if not keyed:
            raise UsageError(
                f"{name} is a KeyedProcessFunction: test it with KeyedOneInputStreamOperatorTestHarness"
            )
        return keyed_ops.KeyedProcessOperator(name, key_selector, function)
    if isinstance(function, fn.ProcessFunction):
        if keyed:
            return keyed_ops.KeyedProcessOperator(name, key_selector, fn.wrap_keyed_process(function))
        return stateless.ProcessOperator(name, function)
    if isinstance(function, fn.ReduceFunction):
        if not keyed:
            raise UsageError(f"{name} is a ReduceFunction: a rolling reduce needs a keyed harness")
        return keyed_ops.ReduceOperator(name, key_selector, function)
    if isinstance(function, fn.MapFunction):
        return stateless.MapOperator(name, function)
    if isinstance(function, fn.FlatMapFunction):
        return stateless.FlatMapOperator(name, function)
    if isinstance(function, fn.FilterFunction):
        return stateless.FilterOperator(name, function)
    raise UsageError(
        f"a one-input test harness wraps an operator or a ProcessFunction, KeyedProcessFunction, MapFunction, "
        f"FlatMapFunction, FilterFunction or ReduceFunction, got {function!r}; for a plain callable or a "
        f"window, build the stream with the DataStream API and use harness_for(stream)"
    )


def _two_input_operator_for(
    function: Any, keyed: bool, key_selector1: Any, key_selector2: Any
) -> StreamOperator:
    from weir.operators import co

    if isinstance(function, StreamOperator):
        if not getattr(function, "two_inputs", False):
            raise UsageError(
                f"operator '{function.name}' has one input: test it with OneInputStreamOperatorTestHarness"
            )
        return function
    name = type(function).__name__
    if isinstance(function, fn.KeyedCoProcessFunction) or (
        keyed and isinstance(function, fn.CoProcessFunction)
    ):
        if not keyed:
            raise UsageError(
                f"{name} is a KeyedCoProcessFunction: test it with KeyedTwoInputStreamOperatorTestHarness"
            )
        return co.KeyedCoProcessOperator(name, key_selector1, key_selector2, function)
    if isinstance(function, fn.CoProcessFunction):
        return co.CoProcessOperator(name, function)
    if isinstance(function, fn.CoMapFunction):
        return co.CoMapOperator(name, function, key_selector1, key_selector2)
    if isinstance(function, fn.CoFlatMapFunction):
        return co.CoFlatMapOperator(name, function, key_selector1, key_selector2)
    raise UsageError(
        f"a two-input test harness wraps a two-input operator or a CoMapFunction, CoFlatMapFunction, "
        f"CoProcessFunction or KeyedCoProcessFunction, got {function!r}"
    )


def _check_index(what: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UsageError(f"{what} must be an integer in {low}..{high}, got {value!r}")
    return value


# -- harnesses -------------------------------------------------------------------------------


class AbstractStreamOperatorTestHarness:
    """What every harness does: the operator's context and life cycle, processing time,
    snapshots, output, timers. The subclasses add the inputs."""

    __test__ = False  # not a pytest test class

    keyed = False

    def __init__(
        self,
        operator: Any,
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        max_parallelism: int = 128,
        processing_time_ms: int = 0,
        operator_id: str | None = None,
        batch_mode: bool = False,
        job_parameters: dict[str, str] | None = None,
        key_selector: Any = None,
    ) -> None:
        _check_index("max_parallelism", max_parallelism, 1, 32768)
        _check_index("parallelism", parallelism, 1, max_parallelism)
        _check_index("subtask_index", subtask_index, 0, parallelism - 1)
        self._time_ms = int(processing_time_ms)
        self.operator = self._make_operator(operator, key_selector)
        self.output = _CollectingOutput()
        self._opened = False
        self._closed = False
        self._restored: list[OperatorSubtaskState] = []
        self._checkpoint_ids = itertools.count(1)
        self.context = OperatorContext(
            task_name=self.operator.name,
            operator_name=self.operator.name,
            operator_id=operator_id or f"harness-{self.operator.name}",
            subtask_index=subtask_index,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            attempt_number=0,
            batch_mode=batch_mode,
            processing_time_ms=self.get_processing_time,
            job_parameters=dict(job_parameters or {}),
        )
        self._setup_keyed(key_selector)
        self.operator.setup(self.context, self.output)

    def _make_operator(self, operator: Any, key_selector: Any) -> StreamOperator:
        raise NotImplementedError

    def _setup_keyed(self, key_selector: Any) -> None:
        pass

    def _check_keys(self, values: list[Any], input_index: int = 1) -> None:
        pass

    def _batch(
        self, values: Iterable[Any], timestamps: Iterable[int | None] | None, input_index: int
    ) -> Batch:
        self._check_open()
        values = list(values)
        stamps = None
        if timestamps is not None:
            ts = list(timestamps)
            if len(ts) != len(values):
                raise UsageError(f"process_elements got {len(values)} values but {len(ts)} timestamps")
            stamps = np.array([NO_TIMESTAMP if t is None else int(t) for t in ts], dtype=np.int64)
        self._check_keys(values, input_index)
        return Batch(values, stamps)

    def _check_watermark(self, timestamp: int, previous: int) -> int:
        self._check_open()
        if timestamp < previous:
            raise UsageError(f"watermarks never go back: got {timestamp} after {previous}")
        return int(timestamp)

    # -- life cycle ----------------------------------------------------------------------------
    def restore(self, *snapshots: OperatorSubtaskState) -> Any:
        """Start from ``snapshots`` (of one or several old subtasks, any parallelism); before ``open``."""
        if self._opened:
            raise UsageError("restore() must come before open(), as Flink's initializeState()")
        if not snapshots:
            raise UsageError("restore() needs at least one snapshot (from harness.snapshot())")
        for snap in snapshots:
            if not isinstance(snap, OperatorSubtaskState):
                raise UsageError(f"restore() takes snapshots from harness.snapshot(), got {snap!r}")
            if snap.max_parallelism != self.context.max_parallelism:
                raise UsageError(
                    f"snapshot of '{snap.operator_name}' has max_parallelism {snap.max_parallelism}; this harness has "
                    f"{self.context.max_parallelism}, and key groups cannot move across a different max_parallelism"
                )
        self._restored.extend(snapshots)
        return self

    def open(self) -> Any:
        """Restore (if asked), then ``initialize_state`` and ``open`` the operator."""
        if self._opened:
            raise UsageError("the harness is already open")
        if self._restored:
            self._load(self._restored)
        self.operator.initialize_state()
        self.operator.open()
        self._opened = True
        return self

    def _load(self, snapshots: list[OperatorSubtaskState]) -> None:
        from weir.state import repartition_operator_state

        timers = [s.timers for s in snapshots if s.timers is not None]
        internal = self._timer_service()
        if timers and internal is not None:
            internal.restore(timers, self._key_group_range())
        # old subtask i's operator state at index i, as a restore from a checkpoint passes it
        operator_states: list[Any] = [None] * max(s.parallelism for s in snapshots)
        for snap in snapshots:
            if snap.operator_state is not None:
                if operator_states[snap.subtask_index] is not None:
                    raise UsageError(
                        f"restore() got two snapshots of subtask {snap.subtask_index} of "
                        f"'{snap.operator_name}'; pass one snapshot per old subtask"
                    )
                operator_states[snap.subtask_index] = snap.operator_state
        if any(state is not None for state in operator_states):
            parts = repartition_operator_state(operator_states, self.context.parallelism)
            self.context.operator_state().restore([parts[self.context.subtask_index]])
        self.context.is_restored = True

    def end_input(self) -> None:
        """End of input: the operator's ``finish`` (bounded streams; batch mode emits here)."""
        self._check_open()
        self.operator.finish()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._opened:
            self.operator.close()

    def __enter__(self) -> Any:
        if not self._opened:
            self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if not self._opened:
            raise UsageError("the harness is not open: call harness.open() first")
        if self._closed:
            raise UsageError("the harness is closed")

    # -- input ---------------------------------------------------------------------------------
    def set_processing_time(self, timestamp_ms: int) -> None:
        """The clock moves to ``timestamp_ms``; every processing-time callback due by then fires."""
        self._check_open()
        if timestamp_ms < self._time_ms:
            raise UsageError(f"processing time never goes back: got {timestamp_ms} after {self._time_ms}")
        self._time_ms = int(timestamp_ms)
        for _ in range(100_000):
            deadline = self.operator.next_processing_time_deadline()
            if deadline is None or deadline > self._time_ms:
                return
            self.operator.on_processing_time(self._time_ms)
            if self.operator.next_processing_time_deadline() == deadline:
                return  # the operator keeps a deadline it already handled (a periodic emitter)

    def get_processing_time(self) -> int:
        return self._time_ms

    @property
    def current_watermark(self) -> int:
        return self.operator.current_watermark

    # -- checkpoints ---------------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int | None = None) -> OperatorSubtaskState:
        """What a checkpoint of this subtask would hold, taken as the task does (the operator
        flushes what it holds outside its state, then snapshots)."""
        self._check_open()
        cid = next(self._checkpoint_ids) if checkpoint_id is None else int(checkpoint_id)
        self.operator.prepare_snapshot_pre_barrier(cid)
        self.operator.snapshot_state(cid)
        ctx = self.context
        op_state = ctx.operator_state_backend
        internal = self._timer_service()
        backend = ctx.keyed_backend
        return OperatorSubtaskState(
            operator_name=self.operator.name,
            checkpoint_id=cid,
            max_parallelism=ctx.max_parallelism,
            parallelism=ctx.parallelism,
            subtask_index=ctx.subtask_index,
            key_group_range=None if backend is None else backend.key_group_range,
            keyed=None if backend is None else backend.snapshot(),
            timers=None if internal is None else internal.snapshot(),
            operator_state=op_state.snapshot() if op_state is not None and op_state.state_names() else None,
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._check_open()
        self.operator.notify_checkpoint_complete(checkpoint_id)

    # -- output --------------------------------------------------------------------------------
    def extract_output(self) -> list[StreamRecord | Watermark | WatermarkStatus]:
        """Everything emitted on the main output, in order: records, watermarks, statuses."""
        return list(self.output.events)

    def extract_output_records(self) -> list[StreamRecord]:
        return [e for e in self.output.events if isinstance(e, StreamRecord)]

    def extract_output_values(self) -> list[Any]:
        return [e.value for e in self.output.events if isinstance(e, StreamRecord)]

    def extract_watermarks(self) -> list[int]:
        return [e.timestamp for e in self.output.events if isinstance(e, Watermark)]

    def get_side_output(self, tag: Any) -> list[StreamRecord]:
        """Records sent to the side output ``tag`` (an OutputTag), in order."""
        return list(self.output.side.get(tag, []))

    def get_side_output_values(self, tag: Any) -> list[Any]:
        return [r.value for r in self.output.side.get(tag, [])]

    def clear_output(self) -> None:
        self.output.events.clear()
        self.output.side.clear()

    # -- timers --------------------------------------------------------------------------------
    def _timer_service(self) -> Any:
        timers = getattr(self.operator, "timers", None)
        internal = getattr(timers, "internal", timers)
        return internal if internal is not None and hasattr(internal, "snapshot") else None

    def _key_group_range(self) -> KeyGroupRange:
        return KeyGroupRange(0, self.context.max_parallelism - 1)

    def _materialize(self) -> None:
        """Have the operator write what it holds outside its state backend and timer service into
        them (fast window panes), as the task does before a snapshot, so queries see it."""
        if self._opened and not self._closed:
            self.operator.prepare_snapshot_pre_barrier(0)

    def _timers(self, event_time: bool) -> list[RegisteredTimer]:
        self._materialize()
        internal = self._timer_service()
        if internal is None:
            return []
        snap = internal.snapshot()
        chosen = snap.event_time if event_time else snap.processing_time
        return [RegisteredTimer(t.timestamp, t.key, t.namespace) for t in chosen]

    def event_time_timers(self) -> list[RegisteredTimer]:
        """Registered event-time timers in firing order."""
        return self._timers(True)

    def processing_time_timers(self) -> list[RegisteredTimer]:
        """Registered processing-time timers in firing order."""
        return self._timers(False)

    def num_event_time_timers(self) -> int:
        return len(self._timers(True))

    def num_processing_time_timers(self) -> int:
        return len(self._timers(False))


class OneInputStreamOperatorTestHarness(AbstractStreamOperatorTestHarness):
    """Drives a one-input operator (or function) without a cluster; see the module docstring."""

    def _make_operator(self, operator: Any, key_selector: Any) -> StreamOperator:
        return _operator_for(operator, self.keyed, key_selector)

    # -- input ---------------------------------------------------------------------------------
    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record (a StreamRecord, or a value with an optional event timestamp)."""
        if isinstance(value, StreamRecord):
            value, timestamp = value.value, value.timestamp
        self.process_elements([value], None if timestamp is None else [timestamp])

    def process_elements(self, values: Iterable[Any], timestamps: Iterable[int | None] | None = None) -> None:
        """Several records as one batch (as the task hands them over)."""
        self.operator.process_batch(self._batch(values, timestamps, 1))

    def process_watermark(self, timestamp: int) -> None:
        """Event time advances to ``timestamp``: event-time timers and windows fire."""
        self.operator.process_watermark(self._check_watermark(timestamp, self.operator.current_watermark))

    def process_watermark_status(self, idle: bool) -> None:
        self._check_open()
        self.operator.process_watermark_status(bool(idle))


class TwoInputStreamOperatorTestHarness(AbstractStreamOperatorTestHarness):
    """Drives a two-input operator (a CoMapFunction, CoFlatMapFunction, CoProcessFunction, or an
    operator from ``harness_for(connected.map(...))``): records and watermarks per input. The
    operator's watermark is the minimum over the inputs that are not idle."""

    def _make_operator(self, operator: Any, key_selector: Any) -> StreamOperator:
        return _two_input_operator_for(
            operator, self.keyed, key_selector, getattr(self, "_key_selector2", None)
        )

    # -- input ---------------------------------------------------------------------------------
    def _elements(self, index: int, value: Any, timestamp: int | None) -> None:
        if isinstance(value, StreamRecord):
            value, timestamp = value.value, value.timestamp
        self._process(index, [value], None if timestamp is None else [timestamp])

    def _process(self, index: int, values: Iterable[Any], timestamps: Iterable[int | None] | None) -> None:
        batch = self._batch(values, timestamps, index)
        process = self.operator.process_batch1 if index == 1 else self.operator.process_batch2  # type: ignore[attr-defined]
        process(batch)

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """One record of input 1 (a StreamRecord, or a value with an optional timestamp)."""
        self._elements(1, value, timestamp)

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """One record of input 2."""
        self._elements(2, value, timestamp)

    def process_elements1(
        self, values: Iterable[Any], timestamps: Iterable[int | None] | None = None
    ) -> None:
        self._process(1, values, timestamps)

    def process_elements2(
        self, values: Iterable[Any], timestamps: Iterable[int | None] | None = None
    ) -> None:
        self._process(2, values, timestamps)

    def _watermark(self, index: int, timestamp: int) -> None:
        combined = self.operator.combined  # type: ignore[attr-defined]
        ts = self._check_watermark(timestamp, combined.watermarks[index - 1])
        getattr(self.operator, f"process_watermark{index}")(ts)

    def process_watermark1(self, timestamp: int) -> None:
        """Input 1's event time advances; the operator's moves to the minimum of both inputs."""
        self._watermark(1, timestamp)

    def process_watermark2(self, timestamp: int) -> None:
        self._watermark(2, timestamp)

    def process_both_watermarks(self, timestamp1: int, timestamp2: int | None = None) -> None:
        """Both inputs' event time advances (to the same time unless ``timestamp2`` is given)."""
        self._watermark(1, timestamp1)
        self._watermark(2, timestamp1 if timestamp2 is None else timestamp2)

    def process_watermark_status1(self, idle: bool) -> None:
        """Input 1 becomes idle (or active): an idle input no longer holds event time back."""
        self._check_open()
        self.operator.process_watermark_status1(bool(idle))  # type: ignore[attr-defined]

    def process_watermark_status2(self, idle: bool) -> None:
        self._check_open()
        self.operator.process_watermark_status2(bool(idle))  # type: ignore[attr-defined]


class _KeyedHarness(AbstractStreamOperatorTestHarness):
    """Keyed state for a harness: a keyed state backend over this subtask's key groups
    (``"hashmap"``, or ``"lmdb"`` in a temporary directory removed by ``close``), keys checked
    against them, and the state visible for assertions."""

    keyed = True
    _state_backend_kind = "hashmap"
    _lmdb_dir: str | None = None
    _key_ofs: dict[int, Callable[[Any], Any]]

    def _setup_keyed(self, key_selector: Any) -> None:
        from weir.state import create_keyed_backend

        ctx = self.context
        self.key_selector = key_selector
        self._key_ofs = {1: key_selector.get_key}
        selector2 = getattr(self, "_key_selector2", None)
        if selector2 is not None:
            self._key_ofs[2] = selector2.get_key
        key_groups = compute_key_group_range_for_operator_index(
            ctx.max_parallelism, ctx.parallelism, ctx.subtask_index
        )
        path = None
        if str(self._state_backend_kind).lower() in ("lmdb", "rocksdb"):
            self._lmdb_dir = path = tempfile.mkdtemp(prefix="weir-harness-")
        ctx.keyed_backend = create_keyed_backend(
            self._state_backend_kind, ctx.operator_id, ctx.max_parallelism, key_groups,
            self.get_processing_time, path=path,
        )  # fmt: skip
        ctx.key_selector = key_selector

    @property
    def key_group_range(self) -> KeyGroupRange:
        """The key groups this subtask owns (Flink's formula for its index and parallelism)."""
        range_: KeyGroupRange = self.context.keyed_backend.key_group_range
        return range_

    def _key_group_range(self) -> KeyGroupRange:
        return self.key_group_range

    def owns_key(self, key: Any) -> bool:
        """Whether ``key`` belongs to this subtask (its key group is in ``key_group_range``)."""
        return assign_to_key_group(key, self.context.max_parallelism) in self.key_group_range

    def _check_keys(self, values: list[Any], input_index: int = 1) -> None:
        key_of = self._key_ofs.get(input_index)
        if key_of is None:  # the broadcast input of a keyed broadcast operator
            return
        for v in values:
            key = key_of(v)
            if not self.owns_key(key):
                from weir.keys import assign_key_to_parallel_operator

                ctx = self.context
                owner = assign_key_to_parallel_operator(key, ctx.max_parallelism, ctx.parallelism)
                raise UsageError(
                    f"key {key!r} of record {v!r} belongs to key group "
                    f"{assign_to_key_group(key, ctx.max_parallelism)}, owned by subtask {owner} of "
                    f"{ctx.parallelism}; this harness is subtask {ctx.subtask_index} (key groups "
                    f"{self.key_group_range.start_key_group}..{self.key_group_range.end_key_group})"
                )

    def _load(self, snapshots: list[OperatorSubtaskState]) -> None:
        keyed = [s.keyed for s in snapshots if s.keyed is not None]
        if keyed:
            self.context.keyed_backend.restore(keyed)
        super()._load(snapshots)

    def close(self) -> None:
        if self._closed:
            return
        try:
            super().close()
        finally:
            backend = self.context.keyed_backend
            if backend is not None:
                backend.dispose()
            if self._lmdb_dir is not None:
                shutil.rmtree(self._lmdb_dir, ignore_errors=True)

    # -- keyed state ---------------------------------------------------------------------------
    def state_names(self) -> list[str]:
        return list(self.context.keyed_backend.registered_state_names())

    def keys(self, state: Any, namespace: Any = None) -> list[Any]:
        """The keys that have an entry of ``state`` (a descriptor or its name) in ``namespace``."""
        name = state if isinstance(state, str) else state.name
        self._materialize()
        if name not in self.state_names():
            return []
        return list(self.context.keyed_backend.keys(name, namespace))

    def get_keyed_state(self, descriptor: Any, key: Any, namespace: Any = None) -> Any:
        """The content of the keyed state ``descriptor`` for ``key`` (None / [] / {} when empty):
        a value for value state, a list for list state, a dict for map state, the
        accumulated value for reducing and aggregating state."""
        from weir.core.state import StateDescriptor

        if not isinstance(descriptor, StateDescriptor):
            raise UsageError(f"get_keyed_state needs the state's descriptor, got {descriptor!r}")
        self._materialize()
        backend = self.context.keyed_backend
        empty: Any = {"list": [], "map": {}}.get(descriptor.kind)
        if descriptor.name not in self.state_names():
            return empty
        if not self.owns_key(key):
            raise UsageError(f"key {key!r} is not in this subtask's key groups {self.key_group_range}")
        previous = backend.current_key
        state = backend.get_state(descriptor)
        try:
            backend.set_current_key(key)
            state.set_current_namespace(namespace)
            kind = descriptor.kind
            if kind == "value":
                return state.value()
            if kind == "list":
                return list(state.get() or [])
            if kind == "map":
                return dict(state.items())
            return state.get()
        finally:
            state.set_current_namespace(None)
            if previous is not None:
                backend.set_current_key(previous)


class KeyedOneInputStreamOperatorTestHarness(_KeyedHarness, OneInputStreamOperatorTestHarness):
    """A harness for keyed operators: a keyed state backend over this subtask's key groups.

    ``key_selector`` is required when wrapping a function; an operator built by
    ``harness_for`` brings its own. ``state_backend`` is ``"hashmap"`` (default) or
    ``"lmdb"`` (in a temporary directory removed by ``close``).
    """

    def __init__(
        self,
        operator: Any,
        key_selector: Callable[[Any], Any] | fn.KeySelector | None = None,
        *,
        state_backend: str = "hashmap",
        **kwargs: Any,
    ) -> None:
        if key_selector is None:
            key_selector = getattr(operator, "key_selector", None)
        if key_selector is None:
            raise UsageError(
                "KeyedOneInputStreamOperatorTestHarness needs a key_selector (a KeySelector or a callable)"
            )
        self._state_backend_kind = state_backend
        super().__init__(operator, key_selector=fn.wrap_key_selector(key_selector), **kwargs)


class KeyedTwoInputStreamOperatorTestHarness(_KeyedHarness, TwoInputStreamOperatorTestHarness):
    """A harness for keyed two-input operators (a KeyedCoProcessFunction, or a Co*Function on
    keyed inputs): one key selector per input, one keyed state and one set of timers for both."""

    def __init__(
        self,
        operator: Any,
        key_selector1: Callable[[Any], Any] | fn.KeySelector | None = None,
        key_selector2: Callable[[Any], Any] | fn.KeySelector | None = None,
        *,
        state_backend: str = "hashmap",
        **kwargs: Any,
    ) -> None:
        if key_selector1 is None:
            key_selector1 = getattr(operator, "key_selector", None)
        if key_selector2 is None:
            key_selector2 = getattr(operator, "key_selector2", None)
        broadcast = getattr(operator, "broadcast_input2", False)  # input 2 is a broadcast stream: no key
        if key_selector1 is None or (key_selector2 is None and not broadcast):
            raise UsageError(
                "KeyedTwoInputStreamOperatorTestHarness needs key_selector1 and key_selector2 "
                "(a KeySelector or a callable for each input)"
            )
        self._state_backend_kind = state_backend
        self._key_selector2 = None if key_selector2 is None else fn.wrap_key_selector(key_selector2)
        super().__init__(operator, key_selector=fn.wrap_key_selector(key_selector1), **kwargs)


class ProcessFunctionTestHarnesses:
    """Shortcuts named as Flink's: a harness around a function, opened and ready."""

    @staticmethod
    def for_process_function(
        function: fn.ProcessFunction, **kwargs: Any
    ) -> OneInputStreamOperatorTestHarness:
        return OneInputStreamOperatorTestHarness(function, **kwargs).open()

    @staticmethod
    def for_keyed_process_function(
        function: fn.KeyedProcessFunction, key_selector: Any, **kwargs: Any
    ) -> KeyedOneInputStreamOperatorTestHarness:
        harness = KeyedOneInputStreamOperatorTestHarness(function, key_selector, **kwargs)
        harness.open()
        return harness

    @staticmethod
    def for_co_process_function(
        function: fn.CoProcessFunction, **kwargs: Any
    ) -> TwoInputStreamOperatorTestHarness:
        harness = TwoInputStreamOperatorTestHarness(function, **kwargs)
        harness.open()
        return harness

    @staticmethod
    def for_keyed_co_process_function(
        function: fn.KeyedCoProcessFunction, key_selector1: Any, key_selector2: Any, **kwargs: Any
    ) -> KeyedTwoInputStreamOperatorTestHarness:
        harness = KeyedTwoInputStreamOperatorTestHarness(function, key_selector1, key_selector2, **kwargs)
        harness.open()
        return harness


def harness_for(stream: Any, **kwargs: Any) -> Any:
    """A harness around the operator that produced ``stream`` (built with the DataStream API),
    keyed when the operator is, with two inputs when it came from ``connect``. Keyword
    arguments go to the harness (parallelism, subtask_index, max_parallelism,
    state_backend, processing_time_ms, ...). Not opened."""
    from weir.graph.transformations import OneInputTransformation, TwoInputTransformation
    from weir.operators.factory import create_operator

    get_transformation = getattr(stream, "get_transformation", None)
    if get_transformation is None:
        raise UsageError(f"harness_for() needs a DataStream, got {stream!r}")
    transformation = get_transformation()
    if not isinstance(transformation, (OneInputTransformation, TwoInputTransformation)):
        raise UsageError(
            f"harness_for() wraps an operator (map, process, reduce, window, a connected map, ...); the stream "
            f"comes from '{transformation.name}' ({type(transformation).__name__})"
        )
    env = stream.get_execution_environment()
    graph = env.get_stream_graph()
    node = next(n for n in graph.nodes.values() if n.transformation is transformation)
    operator = create_operator(node, {}, env.get_config().get_auto_watermark_interval())
    kwargs.setdefault("max_parallelism", node.max_parallelism)
    kwargs.setdefault("operator_id", node.uid or f"harness-{node.id}-{node.name}")
    if node.is_two_input:
        if node.state_key_selector is not None:
            return KeyedTwoInputStreamOperatorTestHarness(
                operator, node.state_key_selector, node.state_key_selector2, **kwargs
            )
        return TwoInputStreamOperatorTestHarness(operator, **kwargs)
    if node.state_key_selector is not None:
        return KeyedOneInputStreamOperatorTestHarness(operator, node.state_key_selector, **kwargs)
    return OneInputStreamOperatorTestHarness(operator, **kwargs)


__all__ = [
    "AbstractStreamOperatorTestHarness",
    "KeyedOneInputStreamOperatorTestHarness",
    "KeyedTwoInputStreamOperatorTestHarness",
    "OneInputStreamOperatorTestHarness",
    "OperatorSubtaskState",
    "ProcessFunctionTestHarnesses",
    "RegisteredTimer",
    "StreamRecord",
    "TwoInputStreamOperatorTestHarness",
    "Watermark",
    "WatermarkStatus",
    "harness_for",
]
