"""The window operator: assigns records to windows, keeps their contents, fires on triggers.

Follows Flink's WindowOperator record by record:

- each record goes to the windows its assigner names; a window whose cleanup time
  (``max_timestamp + allowed_lateness`` in event time) is at or behind the watermark is
  late and skipped; a record that landed in no window because all were late goes to the
  late-data side output if there is one, else it is dropped and counted;
- contents are kept per (key, window): the running reduce/aggregate accumulator for
  ``reduce``/``aggregate`` (incremental), all records for ``process``/``apply`` or with an
  evictor;
- the trigger decides on every record and timer: EventTimeTrigger fires when the
  watermark passes ``max_timestamp`` (and at once for a late record within the allowed
  lateness), ProcessingTimeTrigger when the clock does, CountTrigger every N records,
  PurgingTrigger clears after firing;
- a cleanup timer at ``max_timestamp + allowed_lateness`` clears the window;
- session windows merge: a new window overlapping existing ones of its key becomes their
  cover, and their contents are merged;
- results carry the window's ``max_timestamp`` as their timestamp.

Window contents live in the keyed state backend (state ``window-contents``, namespace =
the window), timers in the operator's ``InternalTimerService``.

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
    CountTrigger,
    EventTimeTrigger,
    GlobalWindow,
    ProcessingTimeTrigger,
    PurgingTrigger,
    TimeWindow,
    Trigger,
    WindowAssigner,
    _Sliding,
    _Tumbling,
)
from weir.operators.base import results_of
from weir.operators.keyed import _check_key, _key_function
from weir.operators.window.fast import FastPaneMode
from weir.time.timers import InternalTimerService

CONTINUE, FIRE, PURGE, FIRE_AND_PURGE = 0, 1, 2, 3


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
        evictor_count: int | None,
    ) -> None:
        super().__init__(name, key_selector, assigner, late_data_tag)
        self.trigger = trigger
        self.allowed_lateness_ms = allowed_lateness_ms if assigner.is_event_time else 0
        self.function_kind = function_kind
        self.function = function
        self.window_function = window_function
        self.evictor_count = evictor_count
        self.incremental = function_kind in ("reduce", "aggregate") and evictor_count is None
        if self.incremental and function_kind == "reduce":
            self.contents_descriptor: Any = ReducingStateDescriptor("window-contents", function)
        elif self.incremental:
            self.contents_descriptor = AggregatingStateDescriptor("window-contents", function)
        else:
            self.contents_descriptor = ListStateDescriptor("window-contents")
        self.count_descriptor = ValueStateDescriptor("window-count")
        nested = trigger.nested if isinstance(trigger, PurgingTrigger) else trigger
        self._uses_counts = isinstance(nested, CountTrigger)
        self.sessions: dict[Any, set[TimeWindow]] = {}
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
        self.counts = backend.get_state(self.count_descriptor)
        self._ctx = _WindowContext(self)
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
        """Fast mode: restored timers become open panes (their accumulators stay in the backend)."""
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
        if self._uses_counts:
            self.counts.set_current_namespace(window)

    def _add(self, key: Any, window: Any, value: Any) -> None:
        self._use(key, window)
        self.contents.add(value)
        if self.evictor_count is not None:
            kept = self.contents.get()
            if len(kept) > self.evictor_count:
                self.contents.update(kept[-self.evictor_count :])

    def _emit_window(self, key: Any, window: Any) -> None:
        self._use(key, window)
        state = self.contents.get()
        if state is None or (not self.incremental and not state):
            return
        if self.incremental:
            elements: list[Any] = [state]
            wf = self.window_function
        elif self.function_kind == "reduce":  # with an evictor: reduce what is left at firing time
            value = state[0]
            for element in state[1:]:
                value = self.function.reduce(value, element)
            elements, wf = [value], self.window_function
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
        elif isinstance(wf, fn.ProcessWindowFunction):
            self._ctx._window = window
            produced = results_of(wf.process(key, self._ctx, elements))
        else:
            produced = results_of(wf.apply(key, window, elements))
        ts = window.max_timestamp()
        self._out.extend(produced)
        self._out_ts.extend([ts] * len(produced))

    def _purge(self, key: Any, window: Any) -> None:
        self._use(key, window)
        self.contents.clear()

    def _clear(self, key: Any, window: Any) -> None:
        self._use(key, window)
        self.contents.clear()
        if self._uses_counts:
            self.counts.clear()
        if self._window_state_names:
            self._clear_window_state(key, window)

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
        self.backend.set_current_key(key)
        kg: int = self.backend.current_key_group
        return kg

    def _cleanup_time(self, window: Any) -> int:
        if isinstance(window, GlobalWindow):
            return window.max_timestamp()
        if self.assigner.is_event_time:
            cleanup = window.max_timestamp() + self.allowed_lateness_ms
            return cleanup if cleanup >= window.max_timestamp() else window.max_timestamp()
        return window.max_timestamp()

    def _is_window_late(self, window: Any) -> bool:
        return self.assigner.is_event_time and self._cleanup_time(window) <= self.current_watermark

    # -- triggers ------------------------------------------------------------------------------
    def _on_element(self, trigger: Trigger, key: Any, window: Any, timestamp: int) -> int:
        if isinstance(trigger, PurgingTrigger):
            result = self._on_element(trigger.nested, key, window, timestamp)
            return FIRE_AND_PURGE if result in (FIRE, FIRE_AND_PURGE) else result
        if isinstance(trigger, EventTimeTrigger):
            if window.max_timestamp() <= self.current_watermark:
                return FIRE
            self._register(True, key, window, window.max_timestamp())
            return CONTINUE
        if isinstance(trigger, ProcessingTimeTrigger):
            self._register(False, key, window, window.max_timestamp())
            return CONTINUE
        if isinstance(trigger, CountTrigger):
            self._use(key, window)
            count = (self.counts.value() or 0) + 1
            if count >= trigger.count:
                self.counts.clear()
                return FIRE
            self.counts.update(count)
            return CONTINUE
        return CONTINUE  # NeverTrigger

    def _on_time(self, trigger: Trigger, event_time: bool, window: Any, time: int) -> int:
        if isinstance(trigger, PurgingTrigger):
            result = self._on_time(trigger.nested, event_time, window, time)
            return FIRE_AND_PURGE if result in (FIRE, FIRE_AND_PURGE) else result
        if isinstance(trigger, EventTimeTrigger):
            return FIRE if event_time and time == window.max_timestamp() else CONTINUE
        if isinstance(trigger, ProcessingTimeTrigger):
            return FIRE if not event_time else CONTINUE
        return CONTINUE

    def _apply(self, result: int, key: Any, window: Any) -> None:
        if result in (FIRE, FIRE_AND_PURGE):
            self._emit_window(key, window)
        if result in (PURGE, FIRE_AND_PURGE):
            self._purge(key, window)

    # -- records -------------------------------------------------------------------------------
    def process_batch(self, batch: Batch) -> None:
        if self.fast:
            self._process_fast(batch)
            return
        self.metrics.records_in += len(batch)
        key_of = self._key_of
        event_time = self.assigner.is_event_time
        now = None if event_time else self.context.processing_time_ms()
        late: list[int] = []
        for i, (value, ts) in enumerate(zip(batch.as_list(), batch.timestamp_list())):
            if event_time and ts is None:
                raise self._no_timestamp(value)
            element_time = ts if event_time else now
            assert element_time is not None
            key = key_of(value)
            _check_key(self, key)
            windows = self.assigner.assign_windows(value, element_time)
            if self.assigner.is_merging:
                windows = [self._merge_session(key, w) for w in windows]
            skipped = True
            for window in windows:
                if self._is_window_late(window):
                    if self.assigner.is_merging:
                        self.sessions.get(key, set()).discard(window)
                    continue
                skipped = False
                self._add(key, window, value)
                self._apply(self._on_element(self.trigger, key, window, element_time), key, window)
                if not isinstance(window, GlobalWindow):
                    self._register(event_time, key, window, self._cleanup_time(window))
            if skipped and event_time and element_time + self.allowed_lateness_ms <= self.current_watermark:
                late.append(i)
        self._flush()
        self._emit_late(batch, late)

    def _merge_session(self, key: Any, window: TimeWindow) -> TimeWindow:
        existing = self.sessions.setdefault(key, set())
        overlapping = [w for w in existing if w.intersects(window)]
        if not overlapping:
            existing.add(window)
            return window
        merged = window
        for w in overlapping:
            merged = merged.cover(w)
        for w in sorted(overlapping):
            existing.discard(w)
            event_time = self.assigner.is_event_time
            self._delete(event_time, key, w, w.max_timestamp())
            self._delete(event_time, key, w, self._cleanup_time(w))
        existing.add(merged)
        sources = [w for w in sorted(overlapping) if w != merged]
        if sources:
            self.backend.set_current_key(key)
            self.backend.merge_namespaces(self.contents_descriptor, merged, sources)
        return merged

    # -- time ----------------------------------------------------------------------------------
    def _fire_timers(self, event_time: bool, until: int) -> None:
        pop = self.timers.pop_event_time_timer if event_time else self.timers.pop_processing_time_timer
        while (timer := pop(until)) is not None:
            key, window, time = timer.key, timer.namespace, timer.timestamp
            self._registered.discard((event_time, key, window, time))
            self._apply(self._on_time(self.trigger, event_time, window, time), key, window)
            if time == self._cleanup_time(window) and event_time == self.assigner.is_event_time:
                self._clear(key, window)
                if self.assigner.is_merging:
                    self.sessions.get(key, set()).discard(window)
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

    def _fire(self, until: int) -> None:
        self._fire_fast(until)

    def _next_fire_time(self) -> int | None:
        return self._next_end


__all__ = ["NO_TIMESTAMP", "WindowOperator"]
