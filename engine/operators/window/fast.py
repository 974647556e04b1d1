"""Fast mode of the per-record window operator: live accumulators in Python dicts.

A ``reduce``/``aggregate`` without evictor over a tumbling or sliding window with its
default trigger and no allowed lateness -- the common incremental case -- keeps its live
accumulators in Python dicts, one insertion-ordered dict ``key -> accumulator`` per open
window: per record that is one key selector call, one dict lookup, the user's reduce/add
and one dict store; no state object, no key-group computation, no timer (the key group is
checked when a key first shows up).

A window fires when the watermark (or clock) passes its ``max_timestamp``: its panes in
insertion order, which is the order the general mode's per-record timers fire in (by time,
then by registration). Per pane that is the user's ``get_result`` and window function call,
run in one loop in C; the backend's current key is set before each call only once a user
function has reached for keyed state (``_on_state_access``), and the results of a firing
leave as one batch whose timestamps (each window's ``max_timestamp``) are built per window.

Checkpoints see exactly what the general mode would have: every live accumulator as an
entry of ``window-contents`` and one timer per pane at its window's ``max_timestamp``. The
task asks for them deferred (``defer_pane_snapshots``): at the barrier each open window's
dict is frozen with ``dict.copy()`` (``_freeze_panes``, a ``weir.state.panes.PaneSnapshot``
the task takes from ``pane_snapshot``), and the entries and timers are built and merged
into the backend's and the timers' snapshots in the asynchronous phase, so the
synchronous phase costs one C-level copy per open window. That needs accumulators that
cannot change after the barrier: an immutable type (numbers, strings, bytes, None, tuples
of those). An ``aggregate`` whose ``create_accumulator()`` is mutable, a window whose
first or last accumulator is, and every snapshot after the asynchronous phase found one
(that checkpoint is declined) take the synchronous way instead, as do snapshots the task
does not defer (the test harness): ``prepare_snapshot_pre_barrier``
writes every live accumulator into the backend and one timer per pane into ``self.timers``
(``WindowOperatorBase._write_panes``), sharing the accumulator objects with the backend
(``shares_state_objects``). ``initialize_state`` turns restored timers back into open
panes whose accumulators stay in the backend until a record or the firing needs them. On
a non-heap backend (LMDB) the accumulators are written out (spilled) whenever more are
held in memory than the backend's budget for them holds (``window_pane_memory_bytes``,
``state.backend.lmdb.memory.window-panes``, 256 MiB by default; a pane's size is measured
on a sample of the panes held), so memory stays bounded by that and by the keys of the
open panes, which the timer service of the general mode holds too. This is the write cache
in front of the on-disk store, as RocksDB's write buffers are in Flink's. A deferred
snapshot takes the spilled panes from the backend's own snapshot (its timers from the
frozen keys).

``FastPaneMode`` is the strategy's half of ``WindowOperator`` (its base class); the
operator chooses it in its constructor (``op.fast``).
"""

from __future__ import annotations

import sys
from functools import partial
from itertools import chain, repeat
from operator import is_not, itemgetter, length_hint
from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.core import functions as fn
from weir.core.window import TimeWindow
from weir.operators.base import results_of
from weir.operators.keyed import _check_key
from weir.operators.window.shared import (
    IDENTITY,
    MISSING,
    WindowOperatorBase,
    identity,
    probe_agrees,
    probe_key_field,
)
from weir.state.panes import PaneSnapshot, is_immutable
from weir.time.timers import InternalTimerService


def _deep_size(value: Any, depth: int = 3) -> int:
    """Bytes of ``value`` and, a few levels down, of what its tuples, lists and dicts hold
    (shared objects such as small ints counted each time: an upper bound)."""
    size = sys.getsizeof(value)
    if depth and isinstance(value, (tuple, list)):
        size += sum(_deep_size(v, depth - 1) for v in value)
    elif depth and isinstance(value, dict):
        size += sum(_deep_size(k, depth - 1) + _deep_size(v, depth - 1) for k, v in value.items())
    return size


#: Whether a window function returned something (None: nothing), as a C function.
_is_not_none = partial(is_not, None)

#: Fast mode on a non-heap backend writes its accumulators to the backend above this many,
#: or above as many as its memory budget holds (``state.backend.lmdb.memory.window-panes``).
SPILL_PANES = 1 << 24
#: A pane's share of its window's dict: the hash table's slot and index at two-thirds load.
_SLOT_BYTES = 48
#: Panes whose size is sampled to tell how many the memory budget holds.
_SAMPLED_PANES = 16
#: Fast mode remembers this many keys whose key group it checked (then starts over).
CHECKED_KEYS = 1 << 20


class FastPaneMode(WindowOperatorBase):
    """The fast mode's state and steps; ``WindowOperator`` provides the function and output."""

    function: Any
    function_kind: str
    window_function: Any
    fast: bool
    _key_of: Any
    _spills: bool
    _reduce: Any
    _agg_add: Any
    _ctx: Any
    _window_state_names: set[str]
    _out: list[Any]
    contents_descriptor: Any

    def _flush(self) -> None:
        raise NotImplementedError

    def _clear_window_state(self, key: Any, window: Any) -> None:
        raise NotImplementedError

    def _init_fast(self) -> None:
        #: window -> {key: accumulator} of the panes held in memory, in first-record order
        self._open: dict[TimeWindow, dict[Any, Any]] = {}
        #: window -> keys (an ordered set) of panes written out to the backend, which come
        #: first in firing order (they were seen first)
        self._spilled: dict[TimeWindow, dict[Any, None]] = {}
        self._backed: set[tuple[Any, TimeWindow]] = set()  # panes with an entry in the backend
        self._next_end: int | None = None  # the smallest max_timestamp of the open windows
        self._checked_keys: set[Any] = set()  # keys whose key group was checked
        #: panes held in memory above which they are measured against the memory budget again
        self._spill_at = _SAMPLED_PANES
        #: a user function reached for keyed state: window function calls set their pane's key
        self._keyed_firing = False
        #: (keys, their iterator) of the window ``_fire_in_memory`` runs in C, while it does
        self._running: tuple[list[Any], Any] | None = None
        #: set by the task before a checkpoint: freeze the panes instead of writing them out
        self.defer_pane_snapshots = False
        #: whether the accumulators may be frozen by reference (immutable, as far as seen)
        self._deferrable = True
        #: the panes frozen at the last barrier, until the task takes them
        self.pane_snapshot: PaneSnapshot | None = None
        #: the accumulators are objects the backend holds too (the synchronous snapshot's form)
        self.shares_state_objects = False

    def _open_fast(self) -> None:
        """A selector that reads one field is applied as a C-level getter; an ``aggregate``
        with a mutable accumulator snapshots synchronously."""
        if self.function_kind != "reduce" and not is_immutable(self.function.create_accumulator()):
            self._deferrable = False
        field = probe_key_field(self._key_of, None)
        self._key_getter: Any = (
            None if field is None else (identity if field == IDENTITY else itemgetter(field))
        )

    def _restore_fast(self) -> None:
        """Restored timers become open panes (their accumulators stay in the backend)."""
        for key, window in self._restored_panes():
            if isinstance(window, TimeWindow):
                self._spilled.setdefault(window, {})[key] = None
                self._backed.add((key, window))
        self._update_next_end()

    def _batch_keys(self, values: list[Any]) -> list[Any]:
        """The key of every record: through the probed getter when it agrees with the key
        selector on the batch's first and last records, else by calling the selector."""
        getter = self._key_getter
        if getter is not None:
            if probe_agrees(getter, self._key_of, values):
                try:
                    return list(map(getter, values))
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
        times = self._times(batch)
        assigner = self.assigner
        size = assigner.size  # type: ignore[attr-defined]
        slide = getattr(assigner, "slide", size)
        offset = assigner.offset  # type: ignore[attr-defined]
        wm = self.current_watermark if self.event_time else -(1 << 63)  # processing time: nothing is late
        late: Any = ()
        keys = self._batch_keys(values)
        try:
            first = int(times.min())
            if slide == size and first - (first - offset) % size + size - 1 > wm:
                # no record of this batch is late: one window per record
                self._fold(values, keys, (times - (times - offset) % size).tolist(), size)
            else:
                late = self._fold_general(values, keys, times, size, slide, offset, wm)
        except TypeError:
            for key in keys:
                _check_key(self, key)
            raise
        if self._spills:
            held = self._in_memory
            if held > min(SPILL_PANES, self._spill_at):
                self._spill_at = self._panes_in_budget()
                if held > min(SPILL_PANES, self._spill_at):
                    self._spill()
        self._emit_late(batch, late)

    def _panes_of(self, start: int, size: int) -> tuple[TimeWindow, dict[Any, Any]]:
        window = TimeWindow(start, start + size)
        panes = self._open.get(window)
        if panes is None:
            panes = self._open[window] = {}
            if self._next_end is None or window.end - 1 < self._next_end:
                self._next_end = window.end - 1
        return window, panes

    def _fold(self, values: list[Any], keys: list[Any], starts: list[int], size: int) -> None:
        """The hot loop: fold ``values[i]`` into the pane of ``keys[i]`` in the window starting at
        ``starts[i]``, in this order (a run of one window looks it up once; sliding windows
        alternate between the windows this call has seen). A new pane of a key whose group was
        checked, with nothing in the backend, starts here; any other goes through ``_first``."""
        first = self._first
        missing = MISSING
        reduce, add = self._reduce, self._agg_add  # one of them is None
        create = None if add is None else self.function.create_accumulator
        checked = self._checked_keys
        fresh = not self._backed  # nothing in the backend to read back (``_first`` adds nothing there)
        lo = None  # the current window's start
        seen: dict[int, tuple[TimeWindow, dict[Any, Any]]] = {}  # start -> (window, panes) of this call
        window: Any = None
        panes: dict[Any, Any] = {}
        get = panes.get
        for value, key, start in zip(values, keys, starts):
            if start != lo:
                lo = start
                found = seen.get(start)
                if found is None:
                    found = seen[start] = self._panes_of(start, size)
                window, panes = found
                get = panes.get
            acc = get(key, missing)
            if acc is missing:
                if fresh and key in checked:
                    panes[key] = value if create is None else add(value, create())
                else:
                    panes[key] = first(key, window, value)
            elif reduce is not None:
                panes[key] = reduce(acc, value)
            else:
                panes[key] = add(value, acc)

    def _fold_general(
        self,
        values: list[Any],
        keys: list[Any],
        times: np.ndarray,
        size: int,
        slide: int,
        offset: int,
        wm: int,
    ) -> np.ndarray:
        """Sliding windows or a batch with late records: every record once per window it lands
        in, latest window first, skipping windows at or behind ``wm``; returns the positions of
        the records that landed in none (late)."""
        per_record = -(-size // slide)
        last = times - (times - offset) % slide
        starts = last[:, None] - slide * np.arange(per_record, dtype=np.int64)  # [record, window]
        lands = (starts > (times - size)[:, None]) & (starts + (size - 1) > wm)
        folded = np.flatnonzero(lands.ravel())
        rows = (folded // per_record).tolist()
        self._fold(
            list(map(values.__getitem__, rows)),
            list(map(keys.__getitem__, rows)),
            starts.ravel()[folded].tolist(),
            size,
        )
        return np.flatnonzero(~lands.any(axis=1))

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
        if self.function_kind == "reduce":
            return value if stored is None else self._reduce(stored, value)
        f = self.function
        return f.add(value, f.create_accumulator() if stored is None else stored)

    def _panes_in_budget(self) -> int:
        """How many panes like the ones held now fit in the backend's memory budget for them
        (their keys and accumulators measured on a sample, plus their dict slots)."""
        budget = getattr(self.backend, "window_pane_memory_bytes", None)
        if budget is None:
            return SPILL_PANES
        sample: list[int] = []
        for panes in self._open.values():
            for key, acc in panes.items():
                sample.append(_SLOT_BYTES + _deep_size(key) + _deep_size(acc))
                if len(sample) >= _SAMPLED_PANES:
                    break
            if len(sample) >= _SAMPLED_PANES:
                break
        if not sample:
            return SPILL_PANES
        return max(1, budget * len(sample) // sum(sample))

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

    @property
    def _in_memory(self) -> int:
        """Accumulators held in the dicts (few windows are open, so this is cheap)."""
        return sum(map(len, self._open.values()))

    def _update_next_end(self) -> None:
        self._next_end = min((w.end - 1 for w in (*self._open, *self._spilled)), default=None)

    def _fast_panes(self, window: TimeWindow) -> list[tuple[Any, Any]]:
        """(key, accumulator or MISSING if only in the backend) of a window, in firing order."""
        panes = self._open.get(window, {})
        spilled = self._spilled.get(window)
        if not spilled:
            return list(panes.items())
        pop = panes.copy().pop
        ordered = [(key, pop(key, MISSING)) for key in spilled]
        return ordered + [(key, acc) for key, acc in panes.items() if key not in spilled]

    def _fire_fast(self, until: int) -> None:
        if self._next_end is None or self._next_end > until:
            return
        windows = {w for w in (*self._open, *self._spilled) if w.end - 1 <= until}
        if self._out:
            self._flush()
        out = self._out
        stamps: list[int] = []  # of each window, and how many results it had
        counts: list[int] = []
        for window in sorted(windows, key=lambda w: w.end):
            before = len(out)
            if self._backed or self._spilled.get(window):
                self._fire_backed(window)
            else:
                self._fire_in_memory(window, self._open.pop(window, {}))
                self._spilled.pop(window, None)
            stamps.append(window.end - 1)
            counts.append(len(out) - before)
        self._update_next_end()
        if out:  # results carry their window's max_timestamp
            self._out = []
            self._emit(Batch(out, np.repeat(np.array(stamps, dtype=np.int64), counts)))
        self._flush()  # side outputs

    def _fire_in_memory(self, window: TimeWindow, panes: dict[Any, Any]) -> None:
        """Emit the panes of ``window`` (all in memory, none in the backend), in insertion order:
        the per-pane work is the user's ``get_result`` and window function, and no more.

        The backend's current key is set before each window function call only once a user
        function has reached for keyed state (``_on_state_access``). Until then the panes run
        in one loop in C (``map`` over the keys) with nothing noted per pane: if a function
        asks for state, the hook finds the pane being fired from the key iterator's position,
        sets its key, and cuts the loop's own key list short after it; the rest of the window
        then runs with the key set before each call (as do all later windows)."""
        out = self._out
        get_result = None if self.function_kind == "reduce" else self.function.get_result
        results: Any = iter(panes.values()) if get_result is None else map(get_result, panes.values())
        wf = self.window_function
        if wf is None:
            out.extend(results)
        else:
            ctx = self._ctx
            ctx._window = window
            process_window = isinstance(wf, fn.ProcessWindowFunction)
            call = wf.process if process_window else wf.apply
            scope: Any = ctx if process_window else window
            window_state = self._window_state_names  # a window function may register some as it runs
            keys = list(panes)
            done = 0
            if not self._keyed_firing:
                running = keys.copy()  # the hook may shorten it: never ``keys``
                iterator = iter(running)
                self._running = (running, iterator)
                try:
                    produced = map(call, iterator, repeat(scope), map(list, zip(results)))
                    out.extend(chain.from_iterable(filter(_is_not_none, produced)))
                finally:
                    self._running = None
                done = len(running)
                if window_state and done:  # registered by the last pane, which flipped the hook
                    self._clear_window_state(running[-1], window)
            if done < len(keys):
                set_key = self.backend.set_current_key
                extend = out.extend
                for key, result in zip(keys[done:], results):
                    set_key(key)
                    produced = call(key, scope, [result])
                    if produced is not None:
                        extend(produced)
                    if window_state:
                        self._clear_window_state(key, window)

    def _fire_backed(self, window: TimeWindow) -> None:
        """Emit the panes of ``window`` when some may be in the backend (spilled or restored)."""
        wf = self.window_function
        get_result = None if self.function_kind == "reduce" else self.function.get_result
        backed = self._backed
        backend, contents = self.backend, self.contents
        out = self._out
        panes = self._fast_panes(window)
        self._open.pop(window, None)
        self._spilled.pop(window, None)
        for key, acc in panes:
            if backed and (key, window) in backed:
                backed.discard((key, window))
                backend.set_current_key(key)
                contents.set_current_namespace(window)
                if acc is MISSING:
                    acc = contents.get_internal()
                contents.clear()
                if acc is None:
                    continue
            result = acc if get_result is None else get_result(acc)
            if wf is None:
                out.append(result)
            else:
                backend.set_current_key(key)
                if isinstance(wf, fn.ProcessWindowFunction):
                    self._ctx._window = window
                    produced = results_of(wf.process(key, self._ctx, [result]))
                else:
                    produced = results_of(wf.apply(key, window, [result]))
                out.extend(produced)
            if self._window_state_names:
                self._clear_window_state(key, window)

    def _on_state_access(self) -> None:
        """A user function reached for keyed state: from now on every window function call
        runs with its pane's key set, and so does the call under way (if any)."""
        if self._keyed_firing:
            return
        self._keyed_firing = True
        if self._running is not None:
            running, iterator = self._running
            current = len(running) - length_hint(iterator) - 1  # the iterator is past the pane
            self.backend.set_current_key(running[current])
            del running[current + 1 :]  # the C loop ends here; ``_fire_in_memory`` runs the rest

    def _snapshot_fast(self) -> None:
        """At a barrier: freeze the panes (deferred) or write them out (synchronous)."""
        if self.defer_pane_snapshots and self._deferrable and self._may_freeze():
            self.pane_snapshot = self._freeze_panes()
            self.shares_state_objects = False
        else:
            self._write_panes_now()

    def _write_panes_now(self) -> None:
        """Write the live accumulators into the backend and one timer per pane into
        ``self.timers``, as the general mode holds them."""
        self.pane_snapshot = None
        self.shares_state_objects = True
        windows = sorted({*self._open, *self._spilled}, key=lambda w: w.end)
        panes = [(key, window, acc) for window in windows for key, acc in self._fast_panes(window)]
        self._backed.update(self._write_panes(panes))

    def _may_freeze(self) -> bool:
        """The first and last accumulator of every open window are immutable (O(windows);
        the asynchronous phase checks them all)."""
        for panes in self._open.values():
            if panes and not (
                is_immutable(next(iter(panes.values()))) and is_immutable(next(reversed(panes.values())))
            ):
                self._deferrable = False
                return False
        return True

    def _freeze_panes(self) -> PaneSnapshot:
        """The panes as of now: a C-level copy of each open window's dict and of the ordered
        keys it keeps in the backend; ``self.timers`` starts over empty (it holds no pane)."""
        windows = sorted({*self._open, *self._spilled}, key=lambda w: w.end)
        frozen = []
        for window in windows:
            panes = self._open.get(window)
            spilled = self._spilled.get(window)
            frozen.append(
                (
                    window,
                    window.max_timestamp(),
                    panes.copy() if panes else {},
                    spilled.copy() if spilled else None,
                )
            )
        self.timers = InternalTimerService()
        return PaneSnapshot(
            self.contents_descriptor.name,
            frozen,
            self.event_time,
            self.backend.max_parallelism,
            self._not_deferrable,
        )

    def _not_deferrable(self) -> None:
        """The asynchronous phase found a mutable accumulator: snapshot synchronously from now on."""
        self._deferrable = False
