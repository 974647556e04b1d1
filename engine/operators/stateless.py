"""Map, flat_map, filter, process and timestamp assignment: per-record user code, batch in, batch out."""

from __future__ import annotations

from operator import length_hint
from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.common.watermark_strategy import WatermarkStrategy
from weir.core import functions as fn
from weir.errors import UsageError
from weir.operators.base import SideOutputs, StreamOperator, emit_watermark_actions, results_of
from weir.time.watermarks import TimestampAssignment, WatermarkOutput

MAX_WATERMARK = (1 << 63) - 1


def _callable(function: Any, method: str, wrapper: type) -> Any:
    """The fastest callable for a user function: the plain callable inside weir's wrapper."""
    if type(function) is wrapper:
        return function.fn  # type: ignore[attr-defined]
    return getattr(function, method)


class _KeyOnStateUse:
    """The current key of an operator whose user functions run on keyed records: set before
    each call once a function has state; until then (a map after key_by that keeps none)
    only the record is noted, and the key is set from it if a function asks for a state
    object during the call. State is always right, and a stateless function does not pay
    for extracting and hashing every key. One per operator, shared by its functions (a
    connected map has one per input, each with its own key selector)."""

    def __init__(self, backend: Any, provider: Any) -> None:
        self.backend = backend
        self.eager = provider is None or bool(list(backend.registered_state_names()))
        self.record: Any = None
        self.key_of: Any = None  # of the noted record; None: nothing noted yet
        #: (records, their iterator, key selector) of a batch that ``call_all`` runs without noting
        self._running: tuple[list[Any], Any, Any] | None = None
        if provider is not None:
            provider.on_access = self._on_state_access

    def _on_state_access(self) -> None:
        if self.eager:
            return
        self.eager = True
        if self._running is not None:
            records, iterator, key_of = self._running
            current = len(records) - length_hint(iterator) - 1  # the iterator is past the record
            self.backend.set_current_key(key_of(records[current]))
            del records[current + 1 :]  # the iterator ends here; ``call_all`` runs the rest eagerly
        elif self.key_of is not None:
            self.backend.set_current_key(self.key_of(self.record))

    def call_all(self, f: Any, key_of: Any, records: list[Any]) -> list[Any]:
        """``f`` of every record, in order, with state following each record's key. Until a
        function uses state the loop is ``map`` in C with nothing noted per record: if ``f``
        obtains state, the hook finds the record being processed from the iterator's position
        (``length_hint``) and cuts the loop's own copy of the list short after it; the rest of
        the batch then runs with the key set before each call."""
        if self.eager:
            call = self.wrap(f, key_of)
            return [call(v) for v in records]
        mine = list(records)  # the hook may shorten it: never the batch's own list
        iterator = iter(mine)
        self._running = (mine, iterator, key_of)
        try:
            out = list(map(f, iterator))
        finally:
            self._running = None
        if len(out) < len(records):
            call = self.wrap(f, key_of)
            out.extend([call(v) for v in records[len(out) :]])
        return out

    def wrap(self, f: Any, key_of: Any) -> Any:
        backend = self.backend

        def call(v: Any) -> Any:
            if self.eager:
                backend.set_current_key(key_of(v))
            else:
                self.record, self.key_of = v, key_of
            return f(v)

        return call


def _key_tracking(operator: StreamOperator, selector: Any = None) -> tuple[_KeyOnStateUse | None, Any]:
    """The operator's ``_KeyOnStateUse`` and the key function of ``selector`` (default: the
    operator's key selector); ``(None, None)`` on a non-keyed stream."""
    ctx = operator.context
    selector = selector if selector is not None else ctx.key_selector
    if ctx.keyed_backend is None or selector is None:
        return None, None
    keys = getattr(operator, "_key_on_state_use", None)
    if keys is None:
        keys = operator._key_on_state_use = _KeyOnStateUse(ctx.keyed_backend, ctx.state_provider)  # type: ignore[attr-defined]
    return keys, selector.fn if type(selector) is fn._KeySelectorCallable else selector.get_key


def _keyed(operator: StreamOperator, f: Any, selector: Any = None) -> Any:
    """``f`` with its keyed state following the key of each record (see ``_KeyOnStateUse``);
    ``selector`` defaults to the operator's key selector. ``f`` itself on a non-keyed stream."""
    keys, key_of = _key_tracking(operator, selector)
    return f if keys is None else keys.wrap(f, key_of)


def map_batch(f: Any, batch: Batch) -> Batch:
    """``f`` of every record, keeping the timestamps."""
    return Batch(list(map(f, batch.as_list())), batch.timestamps)


def flat_map_batch(f: Any, batch: Batch) -> Batch:
    """Everything ``f`` returns for each record, each result with its record's timestamp."""
    out: list[Any] = []
    counts = []
    for v in batch.as_list():
        produced = results_of(f(v))
        out.extend(produced)
        counts.append(len(produced))
    ts = None if batch.timestamps is None else np.repeat(batch.timestamps, counts)
    return Batch(out, ts)


def process_batch_with(f: Any, ctx: Any, batch: Batch, before: Any = None) -> Batch:
    """``f(value, ctx)`` for every record with ``ctx.timestamp()`` set to the record's; the
    results carry their record's timestamp. ``before(value)`` runs first (e.g. to set the key)."""
    out: list[Any] = []
    counts = []
    for v, ts in zip(batch.as_list(), batch.timestamp_list()):
        if before is not None:
            before(v)
        ctx._timestamp = ts
        produced = results_of(f(v, ctx))
        out.extend(produced)
        counts.append(len(produced))
    stamps = None if batch.timestamps is None else np.repeat(batch.timestamps, counts)
    return Batch(out, stamps)


class _UserFunctionOperator(StreamOperator):
    def __init__(self, name: str, function: Any) -> None:
        super().__init__(name)
        self.function = function

    def open(self) -> None:
        self.function.open(self.context.runtime_context())

    def close(self) -> None:
        self.function.close()


class MapOperator(_UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._map = _callable(self.function, "map", fn._MapCallable)
        self._keys, self._key_of = _key_tracking(self)

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        if self._keys is None:
            self._emit(map_batch(self._map, batch))
        else:
            self._emit(Batch(self._keys.call_all(self._map, self._key_of, batch.as_list()), batch.timestamps))


class FlatMapOperator(_UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._flat_map = _keyed(self, _callable(self.function, "flat_map", fn._FlatMapCallable))

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(flat_map_batch(self._flat_map, batch))


class FilterOperator(_UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._filter = _callable(self.function, "filter", fn._FilterCallable)
        self._keys, self._key_of = _key_tracking(self)

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        f = self._filter
        values = batch.as_list()
        verdicts = map(f, values) if self._keys is None else self._keys.call_all(f, self._key_of, values)
        keep = np.fromiter(map(bool, verdicts), dtype=bool, count=len(values))
        if keep.all():
            self._emit(batch)
        elif keep.any():
            self._emit(batch.take(np.flatnonzero(keep)))


class _ProcessContext(fn.ProcessFunction.Context):
    """The context handed to ProcessFunction.process_element (one object, updated per record)."""

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator
        self._timestamp: int | None = None
        self.side = SideOutputs()

    def timestamp(self) -> int | None:
        return self._timestamp

    def timer_service(self) -> Any:
        return _NonKeyedTimerService(self._operator)

    def output(self, output_tag: Any, value: Any) -> None:
        self.side.add(output_tag, value, self._timestamp)


class _NonKeyedTimerService(fn.TimerService):
    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator

    def current_processing_time(self) -> int:
        return self._operator.context.processing_time_ms()

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def _no_timers(self) -> UsageError:
        return UsageError(
            f"operator '{self._operator.name}': timers can only be registered on a keyed stream; "
            f"use key_by(...).process(KeyedProcessFunction)"
        )

    def register_event_time_timer(self, timestamp: int) -> None:
        raise self._no_timers()

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise self._no_timers()

    def delete_event_time_timer(self, timestamp: int) -> None:
        raise self._no_timers()

    def delete_processing_time_timer(self, timestamp: int) -> None:
        raise self._no_timers()


class ProcessOperator(_UserFunctionOperator):
    def open(self) -> None:
        super().open()
        self._process = _callable(self.function, "process_element", fn._ProcessCallable)
        self._ctx = _ProcessContext(self)

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        self._emit(process_batch_with(self._process, self._ctx, batch))
        self._ctx.side.flush(self.chain_output)


class TimestampsAndWatermarksOperator(StreamOperator):
    """``assign_timestamps_and_watermarks``: stamps records and emits watermarks periodically.

    The watermarks follow the strategy exactly as a source's do (``WatermarkOutput``),
    ``with_idleness`` included: no record for the timeout announces this output idle, so
    downstream valves stop waiting for it; the next record makes it active again.
    """

    def __init__(self, name: str, strategy: WatermarkStrategy, auto_watermark_interval_ms: int) -> None:
        super().__init__(name)
        self.stamping = None if strategy.timestamp_assigner is None else TimestampAssignment(strategy)
        self.watermarks = WatermarkOutput(strategy)
        self.interval_ms = auto_watermark_interval_ms
        self._next_emit_ms: int | None = None

    def open(self) -> None:
        if self.interval_ms > 0:
            self._next_emit_ms = self.context.processing_time_ms() + self.interval_ms

    def process_batch(self, batch: Batch) -> None:
        self.metrics.records_in += len(batch)
        if self.stamping is not None:
            batch = Batch(batch.values, self.stamping.stamp(batch.values, batch.timestamps))
        self._emit(batch)
        now_ms = self.context.processing_time_ms()
        actions = self.watermarks.on_events(batch.timestamps, now_ms)
        if self.interval_ms == 0:
            actions += self.watermarks.on_periodic_emit(now_ms)
        emit_watermark_actions(self, actions)

    def process_watermark(self, timestamp: int) -> None:
        # Upstream watermarks are swallowed, as in Flink, except the final one at end of input.
        if timestamp == MAX_WATERMARK:
            emit_watermark_actions(self, self.watermarks.on_end_of_input())

    def next_processing_time_deadline(self) -> int | None:
        return self._next_emit_ms

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_emit_ms is not None and now_ms >= self._next_emit_ms:
            emit_watermark_actions(self, self.watermarks.on_periodic_emit(now_ms))
            self._next_emit_ms = now_ms + self.interval_ms
