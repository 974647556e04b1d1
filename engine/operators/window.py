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

Fast mode (``fast``): a ``reduce``/``aggregate`` without evictor over a tumbling or
sliding window with its default trigger and no allowed lateness -- the common incremental
case -- keeps its live accumulators in Python dicts instead, one insertion-ordered dict
``key -> accumulator`` per open window: per record that is one key selector call, one
dict lookup, the user's reduce/add and one dict store; no state object, no key-group
computation, no timer (the key group is checked when a key first shows up).
A window fires when the watermark (or clock) passes its ``max_timestamp``: its panes in
insertion order, which is the order the per-record timers fire in (by time, then by
registration). Checkpoints see exactly what the general mode would have:
``prepare_snapshot_pre_barrier`` writes every live accumulator into the backend and one
timer per pane into ``self.timers``; ``initialize_state`` turns restored timers back into
open panes whose accumulators stay in the backend until a record or the firing needs them.
On a non-heap backend (LMDB) the accumulators are written out (spilled) whenever more
than ``SPILL_PANES`` are held in memory, so memory stays bounded by the keys of the open
panes, which the timer service of the general mode holds too.
"""

from __future__ import annotations

from operator import itemgetter
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
from weir.errors import UsageError
from weir.graph.stream_graph import StreamNode
from weir.operators.base import StreamOperator, results_of
from weir.operators.keyed import _check_key, _key_function
from weir.time.timers import InternalTimerService

CONTINUE, FIRE, PURGE, FIRE_AND_PURGE = 0, 1, 2, 3


def _identity(value: Any) -> Any:
    return value


#: Fast mode on a non-heap backend writes its accumulators to the backend above this many.
SPILL_PANES = 1 << 18
#: Fast mode remembers this many keys whose key group it checked (then starts over).
CHECKED_KEYS = 1 << 20
_MISSING = object()


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


class WindowOperator(StreamOperator):
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
        super().__init__(name)
        self.key_selector = key_selector
        self.assigner = assigner
        self.trigger = trigger
        self.allowed_lateness_ms = allowed_lateness_ms if assigner.is_event_time else 0
        self.late_data_tag = late_data_tag
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
        #: fast mode keeps mutating accumulators it wrote into the backend at the last barrier,
        #: so a heap snapshot must encode them in the synchronous phase (checkpointing reads this)
        self.shares_state_objects = self.fast
        #: fast mode: window -> {key: accumulator} of the panes held in memory, in first-record order
        self._open: dict[TimeWindow, dict[Any, Any]] = {}
        #: fast mode: window -> keys (an ordered set) of panes written out to the backend, which come
        #: first in firing order (they were seen first)
        self._spilled: dict[TimeWindow, dict[Any, None]] = {}
        self._backed: set[tuple[Any, TimeWindow]] = set()  # fast-mode panes with an entry in the backend
        self._in_memory = 0  # fast-mode accumulators held in the dicts
        self._next_end: int | None = None  # fast mode: the smallest max_timestamp of the open windows
        self._checked_keys: set[Any] = set()  # fast mode: keys whose key group was checked

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        self._key_of = _key_function(self.key_selector)
        backend = self.context.keyed_state_backend()
        self.backend = backend
        self.contents = backend.get_state(self.contents_descriptor)
        self.counts = backend.get_state(self.count_descriptor)
        for f in (self.function, self.window_function):
            if isinstance(f, fn.Function):
                f.open(self.context.runtime_context())
        self._ctx = _WindowContext(self)
        f = self.function
        if self.function_kind == "reduce":
            self._reduce = f.fn if type(f) is fn._ReduceCallable else f.reduce
        elif self.incremental:
            self._agg_add = f.add
        self._spills = backend.backend_name != "hashmap"
        if self.fast:  # a selector that reads one field is applied as a C-level getter
            from weir.operators.vector_window import IDENTITY, probe_key_field

            field = probe_key_field(self._key_of, None)
            self._key_getter: Any = (
                None if field is None else (_identity if field == IDENTITY else itemgetter(field))
            )

    def initialize_state(self) -> None:
        """Fast mode: restored timers become open panes (their accumulators stay in the backend)."""
        if not self.fast or not self.timers.number_of_timers():
            return
        snapshot = self.timers.snapshot()
        self.timers = InternalTimerService()
        restored = snapshot.event_time if self.assigner.is_event_time else snapshot.processing_time
        for timer in restored:
            window = timer.namespace
            if isinstance(window, TimeWindow):
                self._spilled.setdefault(window, {})[timer.key] = None
                self._backed.add((timer.key, window))
        self._update_next_end()

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
        if self._window_state_names:  # per-window state of ProcessWindowFunctions goes with the window
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
        self.backend.set_current_key(key)
        kg = self.backend.current_key_group
        if event_time:
            self.timers.register_event_time_timer(key, kg, window, time)
        else:
            self.timers.register_processing_time_timer(key, kg, window, time)

    def _delete(self, event_time: bool, key: Any, window: Any, time: int) -> None:
        self._registered.discard((event_time, key, window, time))
        self.backend.set_current_key(key)
        kg = self.backend.current_key_group
        if event_time:
            self.timers.delete_event_time_timer(key, kg, window, time)
        else:
            self.timers.delete_processing_time_timer(key, kg, window, time)

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
        late_values: list[Any] = []
        late_ts: list[int] = []
        for value, ts in zip(batch.as_list(), batch.timestamp_list()):
            if event_time and ts is None:
                raise UsageError(
                    f"operator '{self.name}': an event-time window got a record without a timestamp ({value!r}); "
                    f"assign timestamps with a WatermarkStrategy (with_timestamp_assigner) on the source "
                    f"or assign_timestamps_and_watermarks(...)"
                )
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
                if self.late_data_tag is not None:
                    late_values.append(value)
                    late_ts.append(element_time)
                else:
                    self.metrics.late_records_dropped += 1
        self._flush()
        if late_values:
            self.chain_output.emit_side(
                self.late_data_tag, Batch(late_values, np.array(late_ts, dtype=np.int64))
            )

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

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        if self.fast:
            if self.assigner.is_event_time:
                self._fire_fast(timestamp)
        else:
            self._fire_timers(True, timestamp)
        self.chain_output.emit_watermark(timestamp)

    def next_processing_time_deadline(self) -> int | None:
        if self.fast:
            return None if self.assigner.is_event_time else self._next_end
        return self.timers.next_processing_time()

    def on_processing_time(self, now_ms: int) -> None:
        if self.fast:
            if not self.assigner.is_event_time:
                self._fire_fast(now_ms)
        else:
            self._fire_timers(False, now_ms)

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

    # -- fast mode -----------------------------------------------------------------------------
    def _element_times(self, batch: Batch) -> list[int] | None:
        """Event timestamps as ints (None for processing time); a missing one is a clear error."""
        if not self.assigner.is_event_time:
            return None
        ts = batch.timestamps
        bad = 0 if ts is None else next(iter(np.flatnonzero(ts == NO_TIMESTAMP).tolist()), None)
        if bad is not None:
            raise UsageError(
                f"operator '{self.name}': an event-time window got a record without a timestamp "
                f"({batch.as_list()[bad]!r}); assign timestamps with a WatermarkStrategy "
                f"(with_timestamp_assigner) on the source or assign_timestamps_and_watermarks(...)"
            )
        assert ts is not None
        stamps: list[int] = ts.tolist()
        return stamps

    def _batch_keys(self, values: list[Any]) -> list[Any]:
        """The key of every record: through the probed getter when it agrees with the key
        selector on the batch's first and last records, else by calling the selector."""
        getter = self._key_getter
        if getter is not None:
            try:
                keys = list(map(getter, values))
                if all(
                    type(keys[i]) is type(expected := self._key_of(values[i])) and keys[i] == expected
                    for i in (0, -1)
                ):
                    return keys
            except Exception:
                pass
            self._key_getter = None  # the probe misread the selector: call it from now on
        key_of = self._key_of
        return [key_of(v) for v in values]

    def _process_fast(self, batch: Batch) -> None:
        n = len(batch)
        self.metrics.records_in += n
        if not n:
            return
        values = batch.as_list()
        stamps = self._element_times(batch)
        assigner = self.assigner
        size = assigner.size  # type: ignore[attr-defined]
        slide = getattr(assigner, "slide", size)
        offset = assigner.offset  # type: ignore[attr-defined]
        wm = self.current_watermark
        if stamps is None:
            stamps = [self.context.processing_time_ms()] * n
            wm = -(1 << 63)  # processing time: nothing is late
        late: list[int] = []
        keys = self._batch_keys(values)
        try:
            if slide == size and min(stamps) - (min(stamps) - offset) % size + size - 1 > wm:
                self._fold_tumbling(values, keys, stamps, size, offset)  # no record of this batch is late
            else:
                late = self._fold_general(values, keys, stamps, size, slide, offset, wm)
        except TypeError:
            for key in keys:
                _check_key(self, key)
            raise
        if self._spills and self._in_memory > SPILL_PANES:
            self._spill()
        if late:
            if self.late_data_tag is not None:
                self.chain_output.emit_side(
                    self.late_data_tag, Batch([values[i] for i in late], np.array([stamps[i] for i in late]))
                )
            else:
                self.metrics.late_records_dropped += len(late)

    def _panes_of(self, start: int, size: int) -> tuple[TimeWindow, dict[Any, Any]]:
        window = TimeWindow(start, start + size)
        panes = self._open.get(window)
        if panes is None:
            panes = self._open[window] = {}
            if self._next_end is None or window.end - 1 < self._next_end:
                self._next_end = window.end - 1
        return window, panes

    def _fold_tumbling(
        self, values: list[Any], keys: list[Any], stamps: list[int], size: int, offset: int
    ) -> None:
        """The hot loop: one window per record, none late."""
        first = self._first
        missing = _MISSING
        lo = hi = 0  # the current window covers [lo, hi)
        window: Any = None
        panes: dict[Any, Any] = {}
        get = panes.get
        if self.function_kind == "reduce":
            reduce = self._reduce
            for value, key, t in zip(values, keys, stamps):
                if not lo <= t < hi:
                    lo = t - (t - offset) % size
                    hi = lo + size
                    window, panes = self._panes_of(lo, size)
                    get = panes.get
                acc = get(key, missing)
                panes[key] = first(key, window, value) if acc is missing else reduce(acc, value)
        else:
            add = self._agg_add
            for value, key, t in zip(values, keys, stamps):
                if not lo <= t < hi:
                    lo = t - (t - offset) % size
                    hi = lo + size
                    window, panes = self._panes_of(lo, size)
                    get = panes.get
                acc = get(key, missing)
                panes[key] = first(key, window, value) if acc is missing else add(value, acc)

    def _fold_general(
        self,
        values: list[Any],
        keys: list[Any],
        stamps: list[int],
        size: int,
        slide: int,
        offset: int,
        wm: int,
    ) -> list[int]:
        """Sliding windows or a batch with late records; returns the positions of late records."""
        reduce = self._reduce if self.function_kind == "reduce" else None
        late = []
        for i, (value, key, t) in enumerate(zip(values, keys, stamps)):
            start = t - (t - offset) % slide
            landed = False
            while start > t - size:
                if start + size - 1 <= wm:
                    break  # this window and every earlier one of the record are late
                landed = True
                window, panes = self._panes_of(start, size)
                acc = panes.get(key, _MISSING)
                if acc is _MISSING:
                    panes[key] = self._first(key, window, value)
                elif reduce is not None:
                    panes[key] = reduce(acc, value)
                else:
                    panes[key] = self._agg_add(value, acc)
                start -= slide
            if not landed:
                late.append(i)
        return late

    def _first(self, key: Any, window: TimeWindow, value: Any) -> Any:
        """The accumulator after ``value`` for a pane not in memory: new, or read back from the backend."""
        checked = self._checked_keys
        if key not in checked:  # a key's group is checked once, not once per pane
            self.backend.set_current_key(key)
            if len(checked) >= CHECKED_KEYS:
                checked.clear()
            checked.add(key)
        stored = None
        if self._backed and (key, window) in self._backed:
            self.backend.set_current_key(key)
            self.contents.set_current_namespace(window)
            stored = self.contents.get_internal()
        self._in_memory += 1
        if self.function_kind == "reduce":
            return value if stored is None else self._reduce(stored, value)
        f = self.function
        return f.add(value, f.create_accumulator() if stored is None else stored)

    def _spill(self) -> None:
        """Write every in-memory accumulator to the backend (bounded memory on LMDB)."""
        backend, contents = self.backend, self.contents
        for window, panes in self._open.items():
            contents.set_current_namespace(window)
            for key, acc in panes.items():
                backend.set_current_key(key)
                contents.update_internal(acc)
                self._backed.add((key, window))
            self._spilled.setdefault(window, {}).update(dict.fromkeys(panes))
            panes.clear()
        self._in_memory = 0

    def _update_next_end(self) -> None:
        self._next_end = min((w.end - 1 for w in (*self._open, *self._spilled)), default=None)

    def _fast_panes(self, window: TimeWindow) -> list[tuple[Any, Any]]:
        """(key, accumulator or _MISSING if only in the backend) of a window, in firing order."""
        panes = self._open.get(window, {})
        spilled = self._spilled.get(window)
        if not spilled:
            return list(panes.items())
        pop = panes.copy().pop
        ordered = [(key, pop(key, _MISSING)) for key in spilled]
        return ordered + [(key, acc) for key, acc in panes.items() if key not in spilled]

    def _fire_fast(self, until: int) -> None:
        if self._next_end is None or self._next_end > until:
            return
        windows = {w for w in (*self._open, *self._spilled) if w.end - 1 <= until}
        wf = self.window_function
        get_result = None if self.function_kind == "reduce" else self.function.get_result
        backed = self._backed
        backend, contents = self.backend, self.contents
        out, out_ts = self._out, self._out_ts
        for window in sorted(windows, key=lambda w: w.end):
            panes = self._fast_panes(window)
            self._open.pop(window, None)
            self._spilled.pop(window, None)
            ts = window.end - 1
            for key, acc in panes:
                if acc is not _MISSING:
                    self._in_memory -= 1
                if backed and (key, window) in backed:
                    backed.discard((key, window))
                    backend.set_current_key(key)
                    contents.set_current_namespace(window)
                    if acc is _MISSING:
                        acc = contents.get_internal()
                    contents.clear()
                    if acc is None:
                        continue
                result = acc if get_result is None else get_result(acc)
                if wf is None:
                    out.append(result)
                    out_ts.append(ts)
                else:
                    backend.set_current_key(key)
                    if isinstance(wf, fn.ProcessWindowFunction):
                        self._ctx._window = window
                        produced = results_of(wf.process(key, self._ctx, [result]))
                    else:
                        produced = results_of(wf.apply(key, window, [result]))
                    out.extend(produced)
                    out_ts.extend([ts] * len(produced))
                if self._window_state_names:
                    self._clear_window_state(key, window)
        self._update_next_end()
        self._flush()

    def _clear_window_state(self, key: Any, window: TimeWindow) -> None:
        self.backend.set_current_key(key)
        if isinstance(self.function, fn.ProcessWindowFunction):
            self._ctx._window = window
            self.function.clear(self._ctx)
        for name in self._window_state_names:
            state = self.backend.get_state(self._window_descriptors[name])
            state.set_current_namespace(window)
            state.clear()

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Fast mode: write the live accumulators into the backend and one timer per pane
        into ``self.timers``, as the general mode holds them."""
        if not self.fast:
            return
        backend, contents = self.backend, self.contents
        timers = InternalTimerService()
        event_time = self.assigner.is_event_time
        register = timers.register_event_time_timer if event_time else timers.register_processing_time_timer
        for window in sorted({*self._open, *self._spilled}, key=lambda w: w.end):
            contents.set_current_namespace(window)
            ts = window.end - 1
            for key, acc in self._fast_panes(window):
                backend.set_current_key(key)
                if acc is not _MISSING:
                    contents.update_internal(acc)
                    self._backed.add((key, window))
                register(key, backend.current_key_group, window, ts)
        self.timers = timers


def create_window_operator(node: StreamNode) -> StreamOperator:
    """The vectorized operator for an eligible built-in (``vector_window.vector_plan``), else
    the per-record WindowOperator."""
    from weir.operators.factory import own_copy
    from weir.operators.vector_window import VectorWindowOperator, vector_plan

    spec = node.operator
    assert spec is not None
    o = spec.options
    builtin = o.get("builtin")
    if builtin is not None:
        plan = vector_plan(
            builtin["aggregation"],
            builtin["field"],
            builtin["input_type"],
            o["assigner"],
            o["trigger"],
            o.get("allowed_lateness_ms", 0),
            o.get("evictor_count"),
        )
        if plan is not None:
            return VectorWindowOperator(
                node.name,
                node.state_key_selector,
                o["assigner"],
                plan,
                builtin["input_type"],
                o.get("late_data_tag"),
            )
    return WindowOperator(
        node.name,
        node.state_key_selector,
        o["assigner"],
        o["trigger"],
        o.get("allowed_lateness_ms", 0),
        o.get("late_data_tag"),
        o["function_kind"],
        spec.function,
        own_copy(node, o.get("window_function")),
        o.get("evictor_count"),
    )


__all__ = ["NO_TIMESTAMP", "WindowOperator", "create_window_operator"]
