"""Keyed operators: rolling reduce, field aggregations and KeyedProcessFunction with timers.

State here is a plain per-operator dict (key → value), the simple heap state the state
backends will replace; timers live in a heap ordered by time, one per (key, timestamp).
In BATCH mode rolling operators emit only each key's final value at end of input, as
Flink's batch execution does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.core import functions as fn
from weir.core.aggregators import FieldAggregator
from weir.core.state import ValueStateDescriptor
from weir.errors import UsageError
from weir.operators.base import SideOutputs, StreamOperator, results_of
from weir.operators.stateless import process_batch_with
from weir.time.timers import InternalTimerService


def _key_function(selector: Any) -> Any:
    return selector.fn if type(selector) is fn._KeySelectorCallable else selector.get_key


def _check_key(operator: StreamOperator, key: Any) -> None:
    try:
        hash(key)
    except TypeError:
        raise UsageError(
            f"operator '{operator.name}': key {key!r} ({type(key).__name__}) is not hashable; "
            f"a key selector must return a value such as int, str, float, bytes, tuple or Row"
        ) from None


class _KeyedOperator(StreamOperator):
    """A keyed operator: its state lives in the subtask's keyed state backend."""

    STATE = ValueStateDescriptor("_weir_rolling_value")

    def __init__(self, name: str, key_selector: Any) -> None:
        super().__init__(name)
        self.key_selector = key_selector

    def open(self) -> None:
        self._key_of = _key_function(self.key_selector)
        self.backend = self.context.keyed_state_backend()

    def _emit_final_state(self) -> None:
        if not self.context.batch_mode:
            return
        state = self.backend.get_state(self.STATE)
        out = []
        for key in list(self.backend.keys(self.STATE.name)):
            self.backend.set_current_key(key)
            out.append(state.value())
        if out:
            self._emit(Batch(out))


class ReduceOperator(_KeyedOperator):
    def __init__(self, name: str, key_selector: Any, function: Any) -> None:
        super().__init__(name, key_selector)
        self.function = function

    def open(self) -> None:
        super().open()
        self.function.open(self.context.runtime_context())
        self._reduce = self.function.fn if type(self.function) is fn._ReduceCallable else self.function.reduce

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        backend = self.backend
        state = backend.get_state(self.STATE)
        key_of = self._key_of
        reduce = self._reduce
        out = []
        for v in batch.as_list():
            key = key_of(v)
            _check_key(self, key)
            backend.set_current_key(key)
            current = state.value()
            new = v if current is None else reduce(current, v)
            state.update(new)
            out.append(new)
        if not self.context.batch_mode:
            self._emit(Batch(out, batch.timestamps))

    def finish(self) -> None:
        self._emit_final_state()

    def close(self) -> None:
        self.function.close()


class AggregationOperator(_KeyedOperator):
    """Rolling sum/min/max/min_by/max_by on a field (position or name) or on the value itself."""

    def __init__(self, name: str, key_selector: Any, aggregation: str, field: int | str) -> None:
        super().__init__(name, key_selector)
        self.aggregation = aggregation
        self.field = field
        self.aggregator = FieldAggregator(aggregation, field)

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        backend = self.backend
        state = backend.get_state(self.STATE)
        key_of = self._key_of
        combine = self.aggregator.reduce
        out = []
        try:
            for v in batch.as_list():
                key = key_of(v)
                _check_key(self, key)
                backend.set_current_key(key)
                current = state.value()
                if current is None:
                    self.aggregator._get(v)
                    new = v
                else:
                    new = combine(current, v)
                state.update(new)
                out.append(new)
        except UsageError as exc:
            raise UsageError(f"operator '{self.name}': {exc}") from None
        if not self.context.batch_mode:
            self._emit(Batch(out, batch.timestamps))

    def finish(self) -> None:
        self._emit_final_state()


class TimerService(fn.TimerService):
    """The ``ctx.timer_service()`` of a KeyedProcessFunction: timers of the current key.

    Timers live in an InternalTimerService partitioned by key group (so they can be
    snapshotted and redistributed with the key groups); one per (key, timestamp).
    """

    def __init__(self, operator: KeyedProcessOperator) -> None:
        self._operator = operator
        self.internal = InternalTimerService()

    def current_processing_time(self) -> int:
        return self._operator.context.processing_time_ms()

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def _where(self) -> tuple[Any, int]:
        backend = self._operator.backend
        return backend.current_key, backend.current_key_group

    def register_event_time_timer(self, timestamp: int) -> None:
        key, key_group = self._where()
        self.internal.register_event_time_timer(key, key_group, None, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        key, key_group = self._where()
        self.internal.register_processing_time_timer(key, key_group, None, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        key, key_group = self._where()
        self.internal.delete_event_time_timer(key, key_group, None, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        key, key_group = self._where()
        self.internal.delete_processing_time_timer(key, key_group, None, timestamp)

    def next_processing_deadline(self) -> int | None:
        return self.internal.next_processing_time()


class _KeyedContext(fn.KeyedProcessFunction.OnTimerContext):
    def __init__(self, operator: KeyedProcessOperator) -> None:
        self._operator = operator
        self._timestamp: int | None = None
        self._time_domain: fn.TimeDomain | None = None
        self.side = SideOutputs()

    def timestamp(self) -> int | None:
        return self._timestamp

    def timer_service(self) -> TimerService:
        return self._operator.timers

    def get_current_key(self) -> Any:
        return self._operator.current_key

    def time_domain(self) -> Any:
        return self._time_domain

    def output(self, output_tag: Any, value: Any) -> None:
        self.side.add(output_tag, value, self._timestamp)


class KeyedProcessOperator(_KeyedOperator):
    def __init__(self, name: str, key_selector: Any, function: Any) -> None:
        super().__init__(name, key_selector)
        self.function = function
        self.current_key: Any = None
        self.timers = TimerService(self)

    def open(self) -> None:
        super().open()
        self.function.open(self.context.runtime_context())
        self._bind_function()
        self._ctx = _KeyedContext(self)

    def _bind_function(self) -> None:
        """The user function's per-record entry point (two-input subclasses bind two)."""
        self._process = (
            self.function.fn
            if type(self.function) is fn._KeyedProcessCallable
            else self.function.process_element
        )

    def _flush_side(self) -> None:
        self._ctx.side.flush(self.chain_output)

    def process_batch(self, batch: Batch) -> None:
        self._process_keyed(self._key_of, self._process, batch)

    def _process_keyed(self, key_of: Any, f: Any, batch: Batch) -> None:
        """``f(value, ctx)`` per record with the record's key current in state and timers."""
        self.metrics.records_in += len(batch)
        self._ctx._time_domain = None
        backend = self.backend

        def set_key(v: Any) -> None:
            key = key_of(v)
            self.current_key = key
            backend.set_current_key(key)

        self._emit(process_batch_with(f, self._ctx, batch, set_key))
        self._flush_side()

    def _fire(self, event_time: bool, until: int) -> None:
        """Fire due timers one at a time, so a timer registered while firing fires too (as Flink)."""
        internal = self.timers.internal
        pop = internal.pop_event_time_timer if event_time else internal.pop_processing_time_timer
        ctx = self._ctx
        ctx._time_domain = fn.TimeDomain.EVENT_TIME if event_time else fn.TimeDomain.PROCESSING_TIME
        out: list[Any] = []
        stamps: list[int] = []
        while (timer := pop(until)) is not None:
            self.current_key = timer.key
            self.backend.set_current_key(timer.key)
            ctx._timestamp = timer.timestamp
            produced = results_of(self.function.on_timer(timer.timestamp, ctx))
            out.extend(produced)
            stamps.extend([timer.timestamp] * len(produced))
        if out:
            self._emit(Batch(out, np.array(stamps, dtype=np.int64)))
        self._flush_side()

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        self._fire(True, timestamp)
        self.chain_output.emit_watermark(timestamp)

    def next_processing_time_deadline(self) -> int | None:
        return self.timers.next_processing_deadline()

    def on_processing_time(self, now_ms: int) -> None:
        self._fire(False, now_ms)

    def close(self) -> None:
        self.function.close()
