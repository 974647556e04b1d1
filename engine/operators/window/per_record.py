"""The window operator: assigns records to windows, keeps their contents, fires on triggers.

Follows Flink's WindowOperator record by record:

- each record goes to the windows its assigner names; a window whose cleanup time
  (``max_timestamp + allowed_lateness`` in event time) is at or behind the watermark is
  late and skipped; a record that landed in no window because all were late goes to the
  late-data side output if there is one, else it is dropped and counted;
- contents are kept per (key, window): the running reduce/aggregate accumulator for
  ``reduce``/``aggregate`` (incremental), all records for ``process``/``apply``; with an
  evictor all records with their timestamps, and when the window fires the evictor
  removes some before and/or after the window function (Flink's EvictingWindowOperator);
- the trigger (``weir.core.window.Trigger``, built-in or the user's) decides on every
  record (``on_element``) and on every timer it registered (``on_event_time``/
  ``on_processing_time``) through a ``_TriggerContext`` scoped to the key and window:
  timers in the operator's timer service, state in the keyed backend with the window as
  namespace; FIRE evaluates the window, PURGE clears its contents;
- a cleanup timer at ``max_timestamp + allowed_lateness`` clears the window, its trigger
  state (``Trigger.clear``) and per-window state; windows that never end (global and count
  windows) have none;
- merging assigners (sessions): each key's set of windows is kept in a dict while the job
  runs and written into keyed state ``merging-window-set`` before every snapshot (read back
  per key after a restore); a new window the assigner merges with existing ones becomes
  their cover: the trigger's ``on_merge`` runs for it, the merged windows' trigger state
  and cleanup timers are cleared, and their contents move into it;
- results carry the window's ``max_timestamp`` as their timestamp.

Window contents live in the keyed state backend (state ``window-contents``, namespace =
the window), timers in the operator's ``InternalTimerService``; so everything is in a
checkpoint and restores at any parallelism.

Fast mode (``fast``, ``weir.operators.window.fast``): a ``reduce``/``aggregate`` without
evictor over a tumbling or sliding window with its default trigger and no allowed
lateness keeps its live accumulators in Python dicts instead of state and timers; the
constructor decides. Timestamps, late records, the clocks and the key probe are the
family's (``weir.operators.window.shared``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.core import functions as fn
from weir.core.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from weir.core.window import (
    MAX_WATERMARK,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    EventTimeTrigger,
    Evictor,
    ProcessingTimeTrigger,
    TimestampedValue,
    Trigger,
    TriggerResult,
    WindowAssigner,
    _DynamicSession,
    _Session,
    _Sliding,
    _Tumbling,
)
from weir.errors import UsageError
from weir.operators.base import results_of
from weir.operators.keyed import _check_key, _key_function
from weir.operators.window.fast import FastPaneMode
from weir.time.timers import InternalTimerService

CONTINUE, FIRE = TriggerResult.CONTINUE, TriggerResult.FIRE


class _TriggerContext(Trigger.OnMergeContext, WindowAssigner.WindowAssignerContext, Evictor.EvictorContext):
    """What the trigger (and the assigner, and the evictor) of one window operator see: the
    current key and window, timers and state scoped to them, the clocks."""

    def __init__(self, operator: WindowOperator) -> None:
        self._operator = operator
        self.key: Any = None
        self.window: Any = None
        self.merged: list[Any] = []

    def get_current_processing_time(self) -> int:
        return self._operator.context.processing_time_ms()

    def get_current_watermark(self) -> int:
        return self._operator.current_watermark

    def get_metric_group(self) -> Any:
        return self._operator._runtime_context.get_metrics_group()

    def get_runtime_context(self) -> Any:
        return self._operator._runtime_context

    def register_event_time_timer(self, time: int) -> None:
        self._operator._register(True, self.key, self.window, time)

    def register_processing_time_timer(self, time: int) -> None:
        self._operator._register(False, self.key, self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._operator._delete(True, self.key, self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._operator._delete(False, self.key, self.window, time)

    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        operator = self._operator
        operator.backend.set_current_key(self.key)
        state = operator.backend.get_state(state_descriptor)
        state.set_current_namespace(self.window)
        return state

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        if self.merged:
            backend = self._operator.backend
            backend.set_current_key(self.key)
            backend.merge_namespaces(state_descriptor, self.window, self.merged)


class _MergeCollector:
    """The ``MergeCallback`` handed to ``merge_windows``: collects what merges into what."""

    def __init__(self) -> None:
        self.merges: list[tuple[set[Any], Any]] = []

    def merge(self, to_be_merged: Any, merge_result: Any) -> None:
        self.merges.append((set(to_be_merged), merge_result))


class _WindowContext(fn.ProcessWindowFunction.Context):
    def __init__(self, operator: WindowOperator) -> None:
        self._operator = operator
        self._window: Any = None

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._operator.context.processing_time_ms()

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def window_state(self) -> Any:
        """Keyed state scoped to the current key and this window (cleared with the window)."""
        return _ScopedState(self._operator, self._window)

    def global_state(self) -> Any:
        """Keyed state of the current key across all windows."""
        return _ScopedState(self._operator, None)

    def output(self, output_tag: Any, value: Any) -> None:
        self._operator._side.setdefault(output_tag, []).append((value, self._window.max_timestamp()))


class _ScopedState:
    """``context.window_state()``/``global_state()``: keyed state in one namespace."""

    def __init__(self, operator: WindowOperator, namespace: Any) -> None:
        self._operator = operator
        self._namespace = namespace

    def _get(self, descriptor: Any) -> Any:
        from weir.state.backend import RuntimeStateProvider

        self._operator._on_state_access()
        state = RuntimeStateProvider(self._operator.backend).get_state(descriptor.kind, descriptor)
        state.set_current_namespace(self._namespace)
        if self._namespace is not None:
            self._operator._window_state_names.add(descriptor.name)
            self._operator._window_descriptors[descriptor.name] = descriptor
        return state

    def get_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._get(state_descriptor)


class WindowOperator(FastPaneMode):
    def __init__(
        self,
        name: str,
        key_selector: Any,
        assigner: WindowAssigner,
        trigger: Trigger,
        allowed_lateness_ms: int,
        late_data_tag: Any,
        function_kind: str,
        function: Any,
        window_function: Any,
        evictor: Evictor | None = None,
    ) -> None:
        super().__init__(name, key_selector, assigner, late_data_tag)
        self.trigger = trigger
        self.allowed_lateness_ms = allowed_lateness_ms if assigner.is_event_time else 0
        self.function_kind = function_kind
        self.function = function
        self.window_function = window_function
        self.evictor = evictor
        self.incremental = function_kind in ("reduce", "aggregate") and evictor is None
        if self.incremental and function_kind == "reduce":
            self.contents_descriptor: Any = ReducingStateDescriptor("window-contents", function)
        elif self.incremental:
            self.contents_descriptor = AggregatingStateDescriptor("window-contents", function)
        else:  # all elements; with an evictor as (value, timestamp) pairs
            self.contents_descriptor = ListStateDescriptor("window-contents")
        self.window_set_descriptor = ValueStateDescriptor("merging-window-set")
        self._sets: dict[Any, list[Any]] = {}  # key -> its windows (merging assigners)
        self._dirty_sets: set[Any] = set()
        self._restored_sets = False
        self._time_sessions = isinstance(assigner, _Session | _DynamicSession)
        self._lateness = self.allowed_lateness_ms
        self._default_trigger = type(trigger) in (EventTimeTrigger, ProcessingTimeTrigger)
        # a count window with its default trigger fires once, when full, and never gets
        # another element: it is cleared when it fires (Flink keeps it forever)
        self._clear_on_fire = (
            isinstance(assigner, CountTumblingWindowAssigner | CountSlidingWindowAssigner)
            and type(trigger) is CountTrigger
            and trigger.count == assigner.window_size
        )
        self.timers = InternalTimerService()  # namespace = window, partitioned by key group
        self._registered: set[tuple[bool, Any, Any, int]] = set()  # timers known to be registered
        self._window_state_names: set[str] = set()
        self._window_descriptors: dict[str, Any] = {}
        self._out: list[Any] = []
        self._out_ts: list[int] = []
        self._side: dict[Any, list[tuple[Any, int]]] = {}
        default = EventTimeTrigger if assigner.is_event_time else ProcessingTimeTrigger
        self.fast = (
            self.incremental
            and isinstance(assigner, _Tumbling | _Sliding)
            and type(trigger) is default
            and self.allowed_lateness_ms == 0
        )
        self._init_fast()

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        self._key_of = _key_function(self.key_selector)
        backend = self.context.keyed_state_backend()
        self.backend = backend
        self.contents = backend.get_state(self.contents_descriptor)
        self._ctx = _WindowContext(self)
        self._tctx = _TriggerContext(self)
        self._runtime_context = self.context.runtime_context()
        for f in (self.function, self.window_function):
            if isinstance(f, fn.Function):
                runtime_context = self.context.runtime_context()
                if self.context.state_provider is not None:
                    self.context.state_provider.on_access = self._on_state_access
                f.open(runtime_context)
        f = self.function
        self._reduce = self._agg_add = None
        if self.function_kind == "reduce":
            self._reduce = f.fn if type(f) is fn._ReduceCallable else f.reduce
        elif self.incremental:
            self._agg_add = f.add
        self._spills = backend.backend_name != "hashmap"
        if self.fast:
            self._open_fast()

    def initialize_state(self) -> None:
        """Fast mode: restored timers become open panes (their accumulators stay in the backend).
        Merging assigners: the windows of a key are read from the backend when first needed."""
        self._restored_sets = self.context.is_restored
        if self.fast and self.timers.number_of_timers():
            self._restore_fast()

    def close(self) -> None:
        for f in (self.function, self.window_function):
            if isinstance(f, fn.Function):
                f.close()

    # -- contents (keyed state, namespace = window) -------------------------------------------
    def _use(self, key: Any, window: Any) -> None:
        self.backend.set_current_key(key)
        self.contents.set_current_namespace(window)

    def _add(self, window: Any, value: Any, timestamp: int | None) -> None:
        """Into ``window`` of the current key (the caller set it)."""
        contents = self.contents
        contents.set_current_namespace(window)
        contents.add(value if self.evictor is None else (value, timestamp))

    def _emit_window(self, key: Any, window: Any) -> None:
        self._use(key, window)
        state = self.contents.get()
        if state is None or (not self.incremental and not state):
            return
        evicted: list[TimestampedValue] | None = None
        if self.evictor is not None:
            evicted = [TimestampedValue(v, t) for v, t in state]
            self._tctx.key, self._tctx.window = key, window
            self.evictor.evict_before(evicted, len(evicted), window, self._tctx)
            state = [e.get_value() for e in evicted]
        if self.incremental:
            elements: list[Any] = [state]
            wf = self.window_function
        elif self.function_kind == "reduce":  # with an evictor: reduce what is left at firing time
            elements, wf = [], self.window_function
            if state:
                value = state[0]
                for element in state[1:]:
                    value = self.function.reduce(value, element)
                elements = [value]
        elif self.function_kind == "aggregate":
            acc = self.function.create_accumulator()
            for element in state:
                acc = self.function.add(element, acc)
            elements, wf = [self.function.get_result(acc)], self.window_function
        else:
            elements = list(state)
            wf = self.function
        if wf is None:
            produced = elements
        elif not elements and self.function_kind == "reduce":
            produced = []
        elif isinstance(wf, fn.ProcessWindowFunction):
            self._ctx._window = window
            produced = results_of(wf.process(key, self._ctx, elements))
        else:
            produced = results_of(wf.apply(key, window, elements))
        ts = window.max_timestamp()
        self._out.extend(produced)
        self._out_ts.extend([ts] * len(produced))
        if evicted is not None and self.evictor is not None:
            self.evictor.evict_after(evicted, len(evicted), window, self._tctx)
            self._use(key, window)
            self.contents.update([(e.get_value(), e.get_timestamp()) for e in evicted])

    def _purge(self, key: Any, window: Any) -> None:
        self._use(key, window)
        self.contents.clear()

    def _clear(self, key: Any, window: Any, fired_at: int | None = None) -> None:
        """Everything of a window: contents, trigger state and timers, per-window state.
        ``fired_at``: the time of the timer that fired (and is gone) just now."""
        self._use(key, window)
        self.contents.clear()
        trigger = self.trigger
        if not (self._default_trigger and fired_at == window.max_timestamp()):
            ctx = self._tctx  # (a default trigger's clear deletes the timer that just fired)
            ctx.key, ctx.window = key, window
            trigger.clear(window, ctx)
        if self._window_state_names:
            self._clear_window_state(key, window)
        if self.assigner.is_merging:
            self._retire(key, window)

    def _clear_window_state(self, key: Any, window: Any) -> None:
        """Per-window state of ProcessWindowFunctions goes with the window."""
        self.backend.set_current_key(key)
        if isinstance(self.function, fn.ProcessWindowFunction):
            self._ctx._window = window
            self.function.clear(self._ctx)
        for name in self._window_state_names:
            state = self.backend.get_state(self._window_descriptors[name])
            state.set_current_namespace(window)
            state.clear()

    # -- timers --------------------------------------------------------------------------------
    def _register(self, event_time: bool, key: Any, window: Any, time: int) -> None:
        marker = (event_time, key, window, time)
        if marker in self._registered:  # most records land in a window whose timers exist
            return
        self._registered.add(marker)
        timers = self.timers
        register = timers.register_event_time_timer if event_time else timers.register_processing_time_timer
        register(key, self._key_group(key), window, time)

    def _delete(self, event_time: bool, key: Any, window: Any, time: int) -> None:
        self._registered.discard((event_time, key, window, time))
        timers = self.timers
        delete = timers.delete_event_time_timer if event_time else timers.delete_processing_time_timer
        delete(key, self._key_group(key), window, time)

    def _key_group(self, key: Any) -> int:
        """The key group of ``key``, which becomes the backend's current key."""
        backend = self.backend
        if backend.current_key is not key:
            backend.set_current_key(key)
        kg: int = backend.current_key_group
        return kg

    def _cleanup_time(self, window: Any) -> int:
        end: int = window.max_timestamp()
        if end == MAX_WATERMARK or not self._lateness:
            return end
        cleanup = end + self._lateness
        return cleanup if cleanup < MAX_WATERMARK else MAX_WATERMARK

    def _is_window_late(self, window: Any) -> bool:
        return self.assigner.is_event_time and self._cleanup_time(window) <= self.current_watermark

    # -- triggers ------------------------------------------------------------------------------
    def _apply(self, result: TriggerResult, key: Any, window: Any) -> None:
        if result is CONTINUE:
            return
        if result.is_fire():
            self._emit_window(key, window)
            if self._clear_on_fire:
                self._clear(key, window)
                return
        if result.is_purge():
            self._purge(key, window)

    # -- records -------------------------------------------------------------------------------
    def process_batch(self, batch: Batch) -> None:
        if self.fast:
            self._process_fast(batch)
            return
        self.metrics.records_in += len(batch)
        key_of = self._key_of
        event_time = self.assigner.is_event_time
        merging = self.assigner.is_merging
        now = None if event_time else self.context.processing_time_ms()
        ctx = self._tctx
        trigger = self.trigger
        # the default triggers' on_element, inlined (the same decisions, without the calls)
        event_trigger = type(trigger) is EventTimeTrigger
        processing_trigger = type(trigger) is ProcessingTimeTrigger
        assign = self.assigner.assign_windows
        backend = self.backend
        register = self._register
        cleanup_time = self._cleanup_time
        late: list[int] = []
        for i, (value, ts) in enumerate(zip(batch.as_list(), batch.timestamp_list())):
            if event_time and ts is None:
                raise self._no_timestamp(value)
            element_time = ts if event_time else now
            assert element_time is not None
            key = key_of(value)
            _check_key(self, key)
            backend.set_current_key(key)
            ctx.key = key
            windows = assign(value, element_time, ctx)
            skipped = True
            for window in windows:
                if merging:
                    window = self._merge(key, window)
                    if backend.current_key is not key:
                        backend.set_current_key(key)
                cleanup = cleanup_time(window)
                if event_time and cleanup <= self.current_watermark:  # the window is late
                    if merging:
                        self._retire(key, window)
                    continue
                skipped = False
                self._add(window, value, ts)
                if event_trigger:
                    end = window.max_timestamp()
                    if end <= self.current_watermark:
                        self._apply(FIRE, key, window)
                    else:
                        register(True, key, window, end)
                elif processing_trigger:
                    register(False, key, window, window.max_timestamp())
                else:
                    ctx.key, ctx.window = key, window
                    self._apply(trigger.on_element(value, element_time, window, ctx), key, window)
                if cleanup != MAX_WATERMARK:
                    register(event_time, key, window, cleanup)
            if skipped and event_time and element_time + self.allowed_lateness_ms <= self.current_watermark:
                late.append(i)
        self._flush()
        self._emit_late(batch, late)

    # -- merging windows (sessions) --------------------------------------------------------------
    # Each key's windows live in ``self._sets`` while the job runs; ``prepare_snapshot_pre_barrier``
    # writes the keys that changed into keyed state ``merging-window-set`` (so a checkpoint holds
    # them, redistributed with the key groups), and a key not in ``self._sets`` is read from there.
    def _windows_of(self, key: Any) -> list[Any]:
        windows = self._sets.get(key)
        if windows is None:
            if self._restored_sets:
                self.backend.set_current_key(key)
                state = self.backend.get_state(self.window_set_descriptor)
                state.set_current_namespace(None)
                windows = list(state.value() or ())
            else:
                windows = []
            self._sets[key] = windows
        return windows

    def _set_windows(self, key: Any, windows: list[Any]) -> None:
        self._sets[key] = windows
        self._dirty_sets.add(key)

    def _retire(self, key: Any, window: Any) -> None:
        windows = self._windows_of(key)
        if window in windows:
            self._set_windows(key, [w for w in windows if w != window])

    def _persist_window_sets(self) -> None:
        if not self._dirty_sets:
            return
        backend = self.backend
        state = backend.get_state(self.window_set_descriptor)
        for key in self._dirty_sets:
            windows = self._sets.get(key)
            backend.set_current_key(key)
            state.set_current_namespace(None)
            if windows:
                state.update(sorted(windows))
            else:
                state.clear()
                self._sets.pop(key, None)
        self._dirty_sets.clear()
        self._restored_sets = True  # keys dropped from memory are in the backend now

    def _merge(self, key: Any, new_window: Any) -> Any:
        """Add ``new_window`` to the key's windows, merging as the assigner says; returns the
        window the element goes to (``new_window`` or the one it merged into)."""
        existing = self._windows_of(key)
        if new_window in existing:
            return new_window
        if self._time_sessions:  # weir's session assigners: merge what overlaps the new window
            overlapping = [w for w in existing if w.intersects(new_window)]
            if not overlapping:
                self._set_windows(key, [*existing, new_window])
                return new_window
            result = new_window
            for w in overlapping:
                result = result.cover(w)
            sources = sorted(w for w in overlapping if w != result)
            if sources:
                self._merge_into(key, result, sources)
            self._set_windows(key, [w for w in existing if w not in overlapping] + [result])
            return result
        collector = _MergeCollector()
        self.assigner.merge_windows([*existing, new_window], collector)  # type: ignore[attr-defined]
        current = set(existing)
        result_window = new_window
        added = False
        for merged, result in collector.merges:
            if new_window in merged:
                merged.discard(new_window)
                result_window = result
                added = True
            current -= merged
            current.add(result)
            sources = sorted(w for w in merged if w != result)
            if sources:
                self._merge_into(key, result, sources)
        if not added:
            current.add(new_window)
        self._set_windows(key, list(current))
        return result_window

    def _merge_into(self, key: Any, result: Any, sources: list[Any]) -> None:
        """Windows ``sources`` of ``key`` become ``result``: trigger merge, their trigger state
        and cleanup timers go, their contents move."""
        if self.assigner.is_event_time and self._cleanup_time(result) <= self.current_watermark:
            raise UsageError(
                f"operator '{self.name}': merging windows {sources} into {result} would end it before "
                f"the current watermark {self.current_watermark}; a merging assigner must not do that"
            )
        ctx = self._tctx
        ctx.key, ctx.window, ctx.merged = key, result, sources
        try:
            self.trigger.on_merge(result, ctx)
        finally:
            ctx.merged = []
        event_time = self.assigner.is_event_time
        for w in sources:
            ctx.window = w
            self.trigger.clear(w, ctx)
            cleanup = self._cleanup_time(w)
            if cleanup != MAX_WATERMARK:
                self._delete(event_time, key, w, cleanup)
        self.backend.set_current_key(key)
        self.backend.merge_namespaces(self.contents_descriptor, result, sources)
        ctx.window = result

    # -- time ----------------------------------------------------------------------------------
    def _fire_timers(self, event_time: bool, until: int) -> None:
        pop = self.timers.pop_event_time_timer if event_time else self.timers.pop_processing_time_timer
        ctx = self._tctx
        trigger = self.trigger
        merging = self.assigner.is_merging
        own_clock = event_time == self.assigner.is_event_time
        event_trigger = type(trigger) is EventTimeTrigger
        processing_trigger = type(trigger) is ProcessingTimeTrigger
        while (timer := pop(until)) is not None:
            key, window, time = timer.key, timer.namespace, timer.timestamp
            self._registered.discard((event_time, key, window, time))
            if merging and window not in self._windows_of(key):
                continue  # the window merged into another or is gone
            self.backend.set_current_key(key)
            if event_trigger:  # EventTimeTrigger.on_event_time / ProcessingTimeTrigger.on_processing_time
                result = FIRE if event_time and time == window.max_timestamp() else CONTINUE
            elif processing_trigger:
                result = CONTINUE if event_time else FIRE
            else:
                ctx.key, ctx.window = key, window
                if event_time:
                    result = trigger.on_event_time(time, window, ctx)
                else:
                    result = trigger.on_processing_time(time, window, ctx)
            self._apply(result, key, window)
            if own_clock and time == self._cleanup_time(window):
                self._clear(key, window, time)
        self._flush()

    def _advance(self, event_time: bool, until: int) -> None:
        if self.fast:
            super()._advance(event_time, until)
        else:
            self._fire_timers(event_time, until)

    def next_processing_time_deadline(self) -> int | None:
        if self.fast:
            return super().next_processing_time_deadline()
        return self.timers.next_processing_time()

    def finish(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if self._out:
            out, stamps = self._out, self._out_ts
            self._out, self._out_ts = [], []
            self._emit(Batch(out, np.array(stamps, dtype=np.int64)))
        if self._side:
            side, self._side = self._side, {}
            for tag, items in side.items():
                self.chain_output.emit_side(
                    tag, Batch([v for v, _ in items], np.array([t for _, t in items], dtype=np.int64))
                )

    # -- fast mode (``FastPaneMode``) -----------------------------------------------------------
    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        if self.fast:
            self._snapshot_fast()
        if self.assigner.is_merging:
            self._persist_window_sets()

    def _fire(self, until: int) -> None:
        self._fire_fast(until)

    def _next_fire_time(self) -> int | None:
        return self._next_end


__all__ = ["NO_TIMESTAMP", "WindowOperator"]
