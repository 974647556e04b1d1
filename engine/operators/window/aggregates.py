"""Vectorized windows of ``weir.columnar.Aggregates``: several aggregates of several fields per batch.

Theory of operation
-------------------
``AggregatesWindowOperator`` is the vectorized window operator (``VectorWindowOperator``: key
probe, key slots, pane stores, checkpoints in the canonical form) running the
declarative ``Aggregates(key(), window_start(), count(), sum(1), max(2), ...)`` instead of
one built-in. A pane holds a count and one accumulator per aggregate of a field (a *slot*):
int64 slots and float64 slots. One numba call per batch assigns windows, creates panes and
folds every slot of every record in arrival order, as ``Aggregates.add`` does (the first
value, then ``acc + v``; ``min``/``max`` replace only on a strictly smaller/larger value;
``first`` keeps, ``last`` replaces; int64 sums wrap).

Pane stores: panes start in the dense arrays ``[window slot, key slot, slot]`` of
``_AggregatePanes`` (``kernels.dense_aggregate``; a ``fired`` flag per window). When those
would grow past ``vector.DENSE_CELLS`` while under a quarter of their cells would be live
(``_AggregatePanes.outgrows``: many keys spread over many open windows), the operator moves
the panes once, even in the middle of a batch, into ``_AggregatePaneLog``: int64 rows
``(start, key, seq, count, fired, slots...)`` in creation order, found through a hash index
(``pane_log``), whose memory follows the live panes. Both give the same rows in the same
order.

Eligibility (``aggregates_plan``; the reason is kept for ``weir plan``): tumbling or sliding
windows in event or processing time with the default trigger and no evictor, no window
function of the user's, a TUPLE/ROW input (or one numeric basic type, field 0 being the
record) whose aggregated fields are numbers (BYTE, SHORT, INT, LONG, FLOAT, DOUBLE).
Allowed lateness is supported, as the per-record path does it (Flink's
EventTimeTrigger): a window fires when the watermark passes its ``max_timestamp`` and
stays until ``max_timestamp + allowed_lateness``; each record that lands in it meanwhile
fires it again at once with the pane's updated row (rows in record order, emitted at the end
of the batch, before the late side output); a record all of whose windows are past their
cleanup time is late (side output or counted).

Output: ``TupleColumns`` in the Aggregates' order, numbers as numpy columns (int keys
too), ``mean`` as float64 ``sum / count``; timestamps the window's ``max_timestamp``. Firing
order: windows by end, within a window the panes in creation order (first record's arrival).

Checkpoints: state ``window-contents`` (an ``AggregatingState`` of the ``Aggregates``) holds
the accumulator list ``[n, s_1, ..., s_m]`` per pane, and the timers are the per-record
path's: the trigger's at ``max_timestamp`` (not for a window that fired already) and, with
allowed lateness, the cleanup timer. So a checkpoint restores into either path. As for the
built-ins, a deferred snapshot copies the pane columns at the barrier and builds the
accumulator lists and timers in the asynchronous phase (``ColumnPaneSnapshot``).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from weir.codec.batch import Batch, TupleColumns
from weir.columnar.aggregates import NUMERIC
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation
from weir.core.state import AggregatingStateDescriptor
from weir.core.window import EventTimeTrigger, ProcessingTimeTrigger, TimeWindow, Trigger, WindowAssigner
from weir.errors import UsageError
from weir.operators.window import kernels as wk
from weir.operators.window import pane_log as pl
from weir.operators.window import vector
from weir.operators.window.shared import WindowOperatorBase
from weir.operators.window.vector import (
    _ASSIGNERS,
    _MIN_TABLE,
    PaneColumns,
    VectorWindowOperator,
    _DensePanes,
    _ObjectKeys,
    _PaneStore,
    numeric_column,
)
from weir.state import panes as native_layout
from weir.state import unforked
from weir.state.panes import (
    ColumnPaneSnapshot,
    NativePanes,
    encoded_accumulator_rows,
    narrowest,
    native_table,
)
from weir.time.timers import InternalTimerService

__all__ = ["AggregatesPlan", "AggregatesWindowOperator", "aggregates_plan", "slot_layout"]


# ----------------------------------------------------------------------------- eligibility


@dataclass(frozen=True)
class AggregatesPlan:
    """How an ``Aggregates`` runs vectorized: per slot its field (None: the record itself),
    whether its accumulator is a float64 (else int64), and its op."""

    spec: Any
    positions: tuple[int | None, ...]
    floats: tuple[bool, ...]
    ops: tuple[int, ...]

    @property
    def iops(self) -> np.ndarray:
        return np.array([op for op, f in zip(self.ops, self.floats) if not f], np.int64)

    @property
    def fops(self) -> np.ndarray:
        return np.array([op for op, f in zip(self.ops, self.floats) if f], np.int64)


def _type_name(t: Any) -> str:
    return str(t)


def slot_layout(spec: Any, input_type: TypeInformation | None) -> tuple[AggregatesPlan | None, str]:
    """The slots of ``spec`` over ``input_type`` as columns, or None and why not."""
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        types = list(input_type.get_field_types())
        struct = True
    elif isinstance(input_type, BasicTypeInfo) and getattr(input_type, "name", None) in NUMERIC:
        types = [input_type]
        struct = False
    else:
        return (
            None,
            f"the input is {'untyped' if input_type is None else input_type}, not a TUPLE/ROW or a number",
        )
    positions = spec.field_positions(input_type)
    if positions is None:
        return None, "a field name does not resolve to a position"
    slots: list[int | None] = []
    floats: list[bool] = []
    ops: list[int] = []
    for i, p in zip(spec.slots, positions):
        o = spec.outputs[i]
        if not -len(types) <= p < len(types):
            return None, f"{o.describe()}: no such field"
        t = types[p]
        if getattr(t, "name", None) not in NUMERIC or not isinstance(t, BasicTypeInfo):
            return None, f"{o.describe()}: field {o.field!r} is {_type_name(t)}, not a number"
        slots.append(p % len(types) if struct else None)
        floats.append(t.python_type is float)
        ops.append(wk.SLOT_OPS[o.kind])
    return AggregatesPlan(spec, tuple(slots), tuple(floats), tuple(ops)), "vectorized"


def aggregates_plan(
    columnar: dict[str, Any],
    assigner: WindowAssigner,
    trigger: Trigger,
    evictor: Any,
) -> tuple[AggregatesPlan | None, str]:
    """The plan if this ``windowed.aggregate(Aggregates(...))`` runs vectorized (else None),
    and the reason: ``"vectorized: ..."`` or ``"per-record: <why>"``."""
    if columnar.get("own_window_function"):
        return None, "per-record: Aggregates with a window function of the user's"
    if not isinstance(assigner, _ASSIGNERS):
        return None, f"per-record: {assigner.describe()} is not a tumbling or sliding time window"
    default = EventTimeTrigger if assigner.is_event_time else ProcessingTimeTrigger
    if type(trigger) is not default:
        return (
            None,
            f"per-record: trigger {type(trigger).__name__} is not the window's default {default.__name__}",
        )
    if evictor is not None:
        return None, "per-record: an evictor"
    plan, why = slot_layout(columnar["spec"], columnar.get("input_type"))
    if plan is None:
        return None, f"per-record: {why}"
    return plan, f"vectorized: Aggregates({plan.spec.describe()}) over {assigner.describe()}"


# ----------------------------------------------------------------------------- columns


def slot_columns(plan: AggregatesPlan, values: Any, n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Every record's value of each slot: ``(int64 [n, int slots], float64 [n, float slots])``."""
    mi = len(plan.ops) - sum(plan.floats)
    ivals = np.empty((n, mi), np.int64)
    fvals = np.empty((n, len(plan.ops) - mi), np.float64)
    read: dict[tuple[int | None, bool], np.ndarray] = {}
    ji = jf = 0
    for p, is_float in zip(plan.positions, plan.floats):
        column = read.get((p, is_float))
        if column is None:
            column = read[(p, is_float)] = _column(values, p, np.float64 if is_float else np.int64, n, what)
        if is_float:
            fvals[:, jf] = column
            jf += 1
        else:
            ivals[:, ji] = column
            ji += 1
    return ivals, fvals


def _column(values: Any, p: int | None, dtype: Any, n: int, what: str) -> np.ndarray:
    return numeric_column(
        values, p, dtype, n,
        lambda i, v: f"{what}: field {0 if p is None else p} must be a number in every record; record {i} is {v!r}",
    )  # fmt: skip


def output_columns(
    spec: Any,
    plan: AggregatesPlan,
    keys: Any,
    starts: Any,
    size: int,
    counts: np.ndarray,
    iaccs: Any,
    faccs: Any,
) -> TupleColumns:
    """The Aggregates' output rows as columns (``starts`` None: no window)."""
    columns: list[Any] = []
    ji = jf = 0
    slot = 0
    for o in spec.outputs:
        kind = o.kind
        if kind == "key":
            columns.append(keys)
        elif kind == "window_start":
            columns.append(starts)
        elif kind == "window_end":
            columns.append(starts + size)
        elif kind == "count":
            columns.append(counts)
        else:
            if plan.floats[slot]:
                column = np.ascontiguousarray(faccs[:, jf])
                jf += 1
            else:
                column = np.ascontiguousarray(iaccs[:, ji])
                ji += 1
            slot += 1
            columns.append(column / counts if kind == "mean" else column)
    return TupleColumns(columns)


def canonical_accumulators(
    plan: AggregatesPlan, counts: np.ndarray, iaccs: Any, faccs: Any
) -> list[list[Any]]:
    """The per-record path's accumulator ``[n, s_1, ..., s_m]`` of every row, as Python values."""
    ints: list[Any] = iaccs.tolist()
    flts: list[Any] = faccs.tolist()
    where = []
    ji = jf = 0
    for is_float in plan.floats:
        where.append((True, jf) if is_float else (False, ji))
        if is_float:
            jf += 1
        else:
            ji += 1
    out = []
    for r, n in enumerate(counts.tolist()):
        row_i, row_f = ints[r], flts[r]
        out.append([n] + [row_f[j] if f else row_i[j] for f, j in where])
    return out


def encoded_accumulators(plan: AggregatesPlan, counts: np.ndarray, iaccs: Any, faccs: Any) -> np.ndarray:
    """``encode_value`` of every row's ``canonical_accumulators`` list, byte for byte, one uint8
    row per pane (``weir.state.panes.encoded_accumulator_rows``)."""
    return encoded_accumulator_rows(plan.floats, counts, iaccs, faccs)


def from_canonical(plan: AggregatesPlan, stored: Any, what: str) -> tuple[int, list[int], list[float]]:
    """(count, int slots, float slots) of a stored accumulator list."""
    try:
        if not isinstance(stored, list | tuple) or len(stored) != 1 + len(plan.ops):
            raise ValueError(f"expected a list of {1 + len(plan.ops)} values")
        ints = [int(v) for v, f in zip(stored[1:], plan.floats) if not f]
        floats = [float(v) for v, f in zip(stored[1:], plan.floats) if f]
        return int(stored[0]), ints, floats
    except (TypeError, ValueError, OverflowError) as exc:
        raise UsageError(
            f"{what}: restored state {stored!r} is not an accumulator of Aggregates({plan.spec.describe()}) ({exc})"
        ) from None


# ----------------------------------------------------------------------------- panes

_NO_WEIGHTS = np.empty(0, np.int64)  # the kernels' weights when every row is one record
# a barrier's packed copy, widened back (``native_table``), is read as the log's rows: one layout
assert (wk.ROW_START, wk.ROW_KEY, wk.ROW_SEQ, wk.ROW_COUNT, wk.ROW_FIRED, wk.ROW_SLOTS) == (
    native_layout.NATIVE_START, native_layout.NATIVE_KEY, native_layout.NATIVE_SEQ,
    native_layout.NATIVE_COUNT, native_layout.NATIVE_FIRED, native_layout.NATIVE_SLOTS,
)  # fmt: skip
#: Firings in a row that find the pane log's rows over 32 times too many for the panes live
#: before them, before they shrink (``_AggregatePaneLog._settle_size``).
SPARSE_FIRINGS = 8
#: names each layout of a pane log's rows (``_AggregatePaneLog.generation``)
_LAYOUTS = itertools.count(1)


def _concatenate(a: PaneColumns | None, b: PaneColumns | None) -> PaneColumns | None:
    """Fired rows of two parts of one batch, in order."""
    if a is None or b is None:
        return a if b is None else b
    return PaneColumns(
        np.concatenate([a.starts, b.starts]), np.concatenate([a.keys, b.keys]),
        np.concatenate([a.counts, b.counts]),
        (np.concatenate([a.accs[0], b.accs[0]]), np.concatenate([a.accs[1], b.accs[1]])), None,
    )  # fmt: skip


class _AggregatePanes(_DensePanes):
    """``_DensePanes`` with a count and several slots per pane, and windows that may have fired
    (allowed lateness: they stay until their cleanup time)."""

    win_fired: np.ndarray
    iacc: np.ndarray
    facc: np.ndarray

    def __init__(self, mi: int, mf: int, size: int, slide: int, offset: int, int_keys: bool) -> None:
        self.mi, self.mf = mi, mf
        super().__init__(wk.SUM, np.int64, size, slide, offset, False, int_keys)
        self.state = np.array([0, wk.NO_START, 0, 0, 0, 0], np.int64)

    def _alloc(self, windows: int, keys: int) -> None:
        w0, k0 = self.windows, self.key_capacity
        old = None if not w0 else (self.win_start, self.win_live, self.win_fired, self.win_count, self.count,
                                   self.order, self.iacc, self.facc)  # fmt: skip
        self.win_start = np.zeros(windows, np.int64)
        self.win_live = np.zeros(windows, np.bool_)
        self.win_fired = np.zeros(windows, np.bool_)
        self.win_count = np.zeros(windows, np.int64)
        self.count = unforked.zeros((windows, keys), np.int64)
        self.order = unforked.zeros((windows, keys), np.int32)
        self.iacc = unforked.zeros((windows, keys, self.mi), np.int64)
        self.facc = unforked.zeros((windows, keys, self.mf), np.float64)
        self.firsts = None
        if old is not None:
            win_start, win_live, win_fired, win_count, count, order, iacc, facc = old
            self.win_start[:w0] = win_start
            self.win_live[:w0] = win_live
            self.win_fired[:w0] = win_fired
            self.win_count[:w0] = win_count
            k = min(k0, keys)  # fewer key slots: only unused ones go (``grown_key_slots``)
            self.count[:w0, :k] = count[:, :k]
            self.order[:w0, :k] = order[:, :k]
            self.iacc[:w0, :k] = iacc[:, :k]
            self.facc[:w0, :k] = facc[:, :k]
        self.windows, self.key_capacity = windows, keys

    def fold(
        self,
        times: np.ndarray,
        keys: np.ndarray,
        ivals: np.ndarray,
        fvals: np.ndarray,
        weights: np.ndarray,
        plan_ops: tuple[np.ndarray, np.ndarray],
        watermark: int,
        lateness: int,
        check_late: bool,
    ) -> tuple[np.ndarray, np.ndarray, PaneColumns | None, int]:
        """Fold a batch in: which records landed in a window, the keys new to this store, the
        rows fired again by records in windows that fired already (None: none), and how many
        records were folded -- fewer than all when the arrays would grow past ``outgrows``
        (the operator then moves the panes to the hash store and goes on there)."""
        n = len(times)
        before = self.n_keys
        slots = self._slots(keys)
        new_keys = self.slot_keys[before : self.n_keys] if self.int_keys else keys[:0]
        top = self.n_keys if self.int_keys else (int(slots.max()) + 1 if n else 0)
        landed = np.empty(n, np.bool_)
        if top > self.key_capacity:
            wanted = max(top, 2 * self.key_capacity)
            if self.outgrows(self.windows * wanted):
                return landed, new_keys, None, 0
            self._alloc(self.windows, wanted)
        cap = n * self.per_record
        new_positions = np.empty(cap, np.int64)
        new_windows = np.empty(cap, np.int64)
        fires = cap if check_late and lateness else 0
        fire_w, fire_k, fire_count = (
            np.empty(fires, np.int64),
            np.empty(fires, np.int64),
            np.empty(fires, np.int64),
        )
        fire_iacc, fire_facc = np.empty((fires, self.mi), np.int64), np.empty((fires, self.mf), np.float64)
        iops, fops = plan_ops
        state = self.state
        state[wk.NEW] = 0
        state[wk.FIRES] = 0
        begin = 0
        while True:
            wk.dense_aggregate(
                times, slots, ivals, fvals, weights, iops, fops, self.size, self.slide, self.offset, watermark, lateness,
                check_late, self.win_start, self.win_live, self.win_fired, self.win_count, self.count, self.iacc,
                self.facc, self.order, state, new_positions, new_windows, landed, fire_w, fire_k, fire_count,
                fire_iacc, fire_facc, begin,
            )  # fmt: skip
            begin = int(state[wk.STOP])
            slots_next = self.grown_key_slots()
            if begin >= n or self.outgrows(2 * self.windows * slots_next):
                break
            self._alloc(2 * self.windows, slots_next)  # every window slot was open
        f = int(state[wk.FIRES])
        fired = None
        if f:
            fire_keys = self.slot_keys[fire_k[:f]] if self.int_keys else fire_k[:f]
            fired = PaneColumns(
                self.win_start[fire_w[:f]], fire_keys, fire_count[:f], (fire_iacc[:f], fire_facc[:f]), None
            )
        return landed, new_keys, fired, min(begin, n)

    def outgrows(self, cells: int) -> bool:
        """Whether arrays of ``cells`` cells are too big and too empty: past ``DENSE_CELLS``
        while fewer than a quarter of them would hold a live pane (the pane log then needs
        less memory), or past an eighth of it while fewer than a sixteenth would (so sparse
        that they will outgrow it: moving the panes now moves fewer of them)."""
        live = self.live
        return (cells > vector.DENSE_CELLS and 4 * live < cells) or (
            8 * cells > vector.DENSE_CELLS and 16 * live < cells
        )

    def _collect(self, windows: np.ndarray, clear: np.ndarray) -> PaneColumns:
        """The panes of window slots ``windows``, window by window, each in creation order."""
        n = int(self.win_count[windows].sum())
        columns = PaneColumns(
            np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
            (np.empty((n, self.mi), np.int64), np.empty((n, self.mf), np.float64)), None, np.empty(n, np.bool_),
        )  # fmt: skip
        iaccs, faccs = columns.accs
        assert columns.fired is not None
        wk.dense_aggregate_collect(
            windows, clear, self.win_start, self.win_live, self.win_fired, self.win_count, self.order,
            self.slot_keys, self.int_keys, self.count, self.iacc, self.facc, columns.starts, columns.keys,
            columns.counts, iaccs, faccs, columns.fired,
        )  # fmt: skip
        return columns

    def take(self, until: int, lateness: int) -> PaneColumns | None:
        """The panes of windows whose ``max_timestamp`` is at or before ``until`` and that have
        not fired, in firing order; windows whose cleanup time (``max_timestamp + lateness``)
        is at or before ``until`` are removed, the others marked fired."""
        live = np.flatnonzero(self.win_live)
        if not len(live):
            return None
        ends = self.win_start[live] + (self.size - 1)
        expired = live[(ends + lateness <= until) & self.win_fired[live]]
        if len(expired):  # fired before, now past their cleanup time: removed without output
            self._collect(expired, np.ones(len(expired), np.bool_))
        due = live[(ends <= until) & ~self.win_fired[live]]
        if not len(due):
            return None
        due = due[np.argsort(self.win_start[due], kind="stable")]
        clear = self.win_start[due] + (self.size - 1) + lateness <= until
        columns = self._collect(due, clear)
        self.win_fired[due[~clear]] = True
        return columns

    def export(self) -> PaneColumns:
        windows = self._windows(None)
        return self._collect(windows, np.zeros(len(windows), np.bool_))

    def insert(self, columns: PaneColumns) -> bool:
        """Add panes in this order (a window's panes keep it); a pane that exists is skipped.
        False (and nothing added) if the arrays would grow too big and too empty."""
        if not len(columns):
            return True
        slots = self._slots(columns.keys.astype(np.int64))
        windows = len(np.unique(columns.starts)) + int(self.win_live.sum())
        keys = max(self.key_capacity, int(slots.max()) + 1)
        cells = max(1 << (windows - 1).bit_length(), self.windows) * keys
        if cells > vector.DENSE_CELLS and 4 * (self.live + len(columns)) < cells:
            return False
        self._key_room(slots)
        if windows > self.windows:
            self._alloc(1 << (windows - 1).bit_length(), self.key_capacity)
        iaccs, faccs = columns.accs
        fired = columns.fired if columns.fired is not None else np.zeros(len(columns), np.bool_)
        for i, (start, slot, count) in enumerate(
            zip(columns.starts.tolist(), slots.tolist(), columns.counts.tolist())
        ):
            w = wk._window_slot(start, self.win_start, self.win_live, True)
            if fired[i]:
                self.win_fired[w] = True
            if self.count[w, slot]:
                continue
            self.order[w, self.win_count[w]] = slot
            self.win_count[w] += 1
            self.count[w, slot] = count
            self.iacc[w, slot] = iaccs[i]
            self.facc[w, slot] = faccs[i]
        return True


class _AggregatePaneLog(_PaneStore):
    """Panes in creation order with a hash index (``pane_log``): the store an ``Aggregates``
    window moves its panes to once when the dense arrays would grow too big and too empty
    (``outgrows``). Memory follows the live panes, whatever the number of keys and open
    windows."""

    def __init__(self, mi: int, mf: int, size: int, slide: int, offset: int) -> None:
        _PaneStore.__init__(self, wk.SUM, np.int64, size, slide, offset, False)
        self.mi, self.mf = mi, mf
        self.firsts = None
        self.state = pl.log_state()
        self.index = np.empty(0, np.int64)  # ``_use`` sizes it, and ``blocks``
        self.blocks = pl.log_blocks(0)
        #: the mirrors of the rows the barriers brought up to date (``mirror``), at most two
        self._mirrors: list[_Mirror] = []
        #: the bases, steps and widths of the last mirror (``mirror``)
        self._packing: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: the columns a mirror packs: all but the creation seq, and fired (its status)
        self._picked = np.array([*_MIRRORED, *range(wk.ROW_SLOTS, wk.ROW_SLOTS + mi + mf)], np.int64)
        self.generation = 0  # ``_use``: names the rows' layout, which a compaction changes
        self._use(np.empty((_MIN_TABLE, wk.ROW_SLOTS + mi + mf), np.int64))
        self.sparse_firings = 0  # firings in a row that found the rows 32 times too many

    def _use(self, rows: np.ndarray) -> None:
        """Take ``rows`` (its first ``state[ROWS]`` rows in use) and index them anew; an
        index of the right size is reused (its pages are there), else a new one is kept
        from checkpoint children (``weir.state.unforked``)."""
        self.rows = rows
        self.frows = rows.view(np.float64)
        if len(self.index) != 2 * len(rows):
            self.index = unforked.empty(2 * len(rows), np.int64)
            self.blocks = pl.log_blocks(len(rows))
        pl.rebuild_index(rows, int(self.state[pl.ROWS]), self.index, self.blocks)  # clears both first
        self.blocks[:, pl.WRITTEN] = self.state[pl.EPOCH]
        self.generation = next(_LAYOUTS)  # the rows moved: a mirror of them is of no use

    @property
    def live(self) -> int:
        return int(self.state[wk.LIVE])

    def cells(self) -> int:
        return 0

    def _size_for(self, panes: int) -> int:
        return max(_MIN_TABLE, 1 << (max(panes, 1) - 1).bit_length())

    def _reserve(self, more: int) -> None:
        """Room for ``more`` new rows: compact the rows where at least half are dead, else grow."""
        used = int(self.state[pl.ROWS])
        if used + more <= len(self.rows):
            return
        need = self.live + more
        self._relayout(len(self.rows) if 2 * need <= len(self.rows) else self._size_for(2 * need))

    def _relayout(self, capacity: int) -> None:
        """Keep only the live rows, in order, in ``capacity`` rows."""
        rows = (
            self.rows
            if capacity == len(self.rows)
            else unforked.empty((capacity, self.rows.shape[1]), np.int64)
        )
        self.state[pl.ROWS] = pl.compact(self.rows, int(self.state[pl.ROWS]), rows)
        self.state[pl.DEAD] = 0
        self._use(rows)

    def _live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.rows[: int(self.state[pl.ROWS]), wk.ROW_SEQ] >= 0)

    def fold(
        self,
        times: np.ndarray,
        keys: np.ndarray,
        ivals: np.ndarray,
        fvals: np.ndarray,
        weights: np.ndarray,
        plan_ops: tuple[np.ndarray, np.ndarray],
        watermark: int,
        lateness: int,
        check_late: bool,
    ) -> tuple[np.ndarray, np.ndarray, PaneColumns | None, int]:
        """As ``_AggregatePanes.fold``; the keys are those of the new panes, and every record
        is folded."""
        n = len(times)
        cap = n * self.per_record
        self._reserve(cap)
        new_positions = np.empty(cap, np.int64)
        landed = np.empty(n, np.bool_)
        fires = cap if check_late and lateness else 0
        fire_start, fire_key, fire_count = (np.empty(fires, np.int64) for _ in range(3))
        fire_iacc, fire_facc = np.empty((fires, self.mi), np.int64), np.empty((fires, self.mf), np.float64)
        iops, fops = plan_ops
        pl.log_aggregate(
            times, keys, ivals, fvals, weights, iops, fops, self.size, self.slide, self.offset, watermark, lateness,
            check_late, self.rows, self.frows, self.index, self.blocks, self.state, new_positions, landed, fire_start,
            fire_key, fire_count, fire_iacc, fire_facc,
        )  # fmt: skip
        f = int(self.state[wk.FIRES])
        fired = None
        if f:
            fired = PaneColumns(
                fire_start[:f], fire_key[:f], fire_count[:f], (fire_iacc[:f], fire_facc[:f]), None
            )
        return landed, keys[new_positions[: int(self.state[wk.NEW])]], fired, n

    def _panes(self, rows: np.ndarray, with_fired: bool) -> PaneColumns:
        """Rows ``rows`` (in creation order) as pane columns, in firing order (windows by
        start, then creation)."""
        return log_panes(self.rows, rows, self.slide, self.mi, self.mf, with_fired)

    def mirror(self, space: unforked.CopySpace) -> tuple[MirrorLayout, int, int]:
        """At a barrier: the rows in use as the mirror in a mapping of ``space`` holds them
        (``pl.mirror_rows``), brought up to date by packing only the blocks written since
        that mapping last held them, else every block: after a compaction (with the last
        mirror's widths) or when a value no longer fits them (with each column's bounds).
        Returns the mirror's layout, the rows in use and the rows packed. The mapping stays
        taken until ``space.give_back``."""
        n_rows = int(self.state[pl.ROWS])
        epoch = int(self.state[pl.EPOCH])
        self.state[pl.EPOCH] = epoch + 1  # writes from now on are after this mirror
        ours = [m for m in self._mirrors if m.generation == self.generation and space.holds(m.array)]
        self._mirrors = ours
        mirror = next((m for m in sorted(ours, key=lambda m: -m.epoch) if space.take_again(m.array)), None)
        written = -1
        # the last mirror's bases and widths, else each column's bounds
        packings = [self._packing, None] if self._packing is not None else [None]
        if mirror is not None:
            written = pl.mirror_rows(
                self.rows, n_rows, self.blocks, mirror.epoch, self._picked, *mirror.layout.packing()
            )
            if written < 0:  # a value no longer fits: lay it out anew, with bounds
                space.give_back(mirror.array)
                self._mirrors.remove(mirror)
                packings = [None]
        for packing in packings if written < 0 else ():
            mirror = self._new_mirror(space, n_rows, packing)
            written = pl.mirror_rows(
                self.rows, n_rows, self.blocks, -1, self._picked, *mirror.layout.packing()
            )
            if written >= 0:
                self._mirrors.append(mirror)
                break
            space.give_back(mirror.array)
        assert mirror is not None and written >= 0, "rows mirrored within their own bounds"
        layout = mirror.layout
        self._packing = layout.bases, layout.steps, layout.widths
        mirror.epoch = epoch
        return layout, n_rows, written

    def _new_mirror(
        self,
        space: unforked.CopySpace,
        n_rows: int,
        packing: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    ) -> _Mirror:
        """A mirror for this log's rows with these bases, steps and widths, else each
        column's bounds, in a mapping of ``space`` (taken), holding nothing yet. After a
        compaction the last mirror's fit the same values: one read of the rows, not two."""
        if packing is None:
            picked = self._picked
            low, high = np.zeros(len(picked), np.int64), np.zeros(len(picked), np.int64)
            pl.live_bounds(self.rows, n_rows, picked, low, high)
            steps = np.array([self.slide if c == wk.ROW_START else 1 for c in picked.tolist()], np.int64)
            widths = np.array(
                [
                    np.dtype(narrowest((int(h) - int(lo)) // int(st))).itemsize
                    for lo, h, st in zip(low, high, steps)
                ],
                np.int64,
            )
            packing = (low, steps, widths)
        words = pl.mirror_words(packing[2])[2] * len(self.rows)  # room for every row the log can hold
        return _Mirror(space.take(max(words, 1)), self.generation, *packing)

    def first_live_key(self) -> int | None:
        """The key of the first live pane, if any."""
        r = pl.first_live(self.rows, int(self.state[pl.ROWS]))
        return None if r < 0 else int(self.rows[r, wk.ROW_KEY])

    def next_end(self) -> int | None:
        return int(self.state[wk.MIN_START]) + self.size - 1 if self.live else None

    def take(self, until: int, lateness: int) -> PaneColumns | None:
        """As ``_AggregatePanes.take``: the panes that have not fired and whose
        ``max_timestamp`` is at or before ``until``, in firing order, now marked fired; every
        pane past its cleanup time (``max_timestamp + lateness <= until``) is removed."""
        state, last = self.state, self.size - 1
        if min(int(state[wk.MIN_START]) + last, int(state[wk.MIN_FIRED]) + last + lateness) > until:
            return None
        m = self.live
        due = np.empty(m, np.int64)
        n = pl.log_fire(self.rows, self.size, lateness, until, due, state, self.blocks)
        columns = self._panes(due[:n], with_fired=False) if n else None
        if not self.live:  # every pane gone: start the rows afresh
            state[pl.ROWS] = 0
            state[pl.DEAD] = 0
            self.index.fill(0)
            self.blocks[:, : pl.WRITTEN] = wk.NO_START
        self._settle_size(m)
        return columns

    def _settle_size(self, peak: int) -> None:
        """Shrink the rows once ``SPARSE_FIRINGS`` firings in a row found them over 32 times
        as many as the panes live before them (``peak``) need; else they keep their number.
        Panes come in bursts between two watermarks, and rows shrunk after each firing grew
        again at the next burst; a job whose bursts got smaller does not keep a big index to
        clear at every firing for good."""
        need = self._size_for(peak)
        if len(self.rows) <= 16 * need:
            self.sparse_firings = 0
            return
        self.sparse_firings += 1
        if self.sparse_firings >= SPARSE_FIRINGS:
            self._relayout(max(4 * need, self._size_for(2 * self.live)))
            self.sparse_firings = 0

    def export(self) -> PaneColumns:
        """Every live pane, in firing order, with its fired flag (nothing is removed)."""
        return self._panes(self._live_rows(), with_fired=True)

    def insert(self, columns: PaneColumns) -> bool:
        """Add panes in this order (their creation order follows it); a pane that exists is
        skipped (a fired flag is kept)."""
        n = len(columns)
        if not n:
            return True
        self._reserve(n)
        iaccs, faccs = columns.accs
        fired = columns.fired if columns.fired is not None else np.zeros(n, np.bool_)
        pl.log_insert(
            self.rows, self.frows, self.index, self.blocks, columns.starts.astype(np.int64), columns.keys.astype(np.int64),
            columns.counts.astype(np.int64), fired.astype(np.bool_),
            np.asarray(iaccs, np.int64).reshape(n, self.mi), np.asarray(faccs, np.float64).reshape(n, self.mf),
            self.state, np.empty(n, np.int64),
        )  # fmt: skip
        return True


def log_panes(
    table: np.ndarray, rows: np.ndarray, slide: int, mi: int, mf: int, with_fired: bool
) -> PaneColumns:
    """Rows ``rows`` (ascending, in creation order) of a pane log's ``table`` as pane columns,
    in firing order (windows by start, then creation)."""
    n = len(rows)
    order = pl.firing_order(table[rows, wk.ROW_START], slide)
    starts, keys, counts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    iaccs, faccs = np.empty((n, mi), np.int64), np.empty((n, mf), np.float64)
    fired = np.empty(n if with_fired else 0, np.bool_)
    pl.gather(table, table.view(np.float64), rows, order, mi, starts, keys, counts, iaccs, faccs, fired)
    return PaneColumns(starts, keys, counts, (iaccs, faccs), None, fired if with_fired else None)


#: The pane log's columns a mirror packs before its slots, in ``NativePanes``' order; fired
#: is a row's status, and the creation seq is not kept (the rows' order is the panes').
_MIRRORED = (wk.ROW_START, wk.ROW_KEY, wk.ROW_COUNT)


def _column_starts(rows: int, widths: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Where each column of ``rows`` values of these widths starts in one buffer (each on 8
    bytes), followed by a column of a byte per row; returns the columns' starts, that last
    column's start and the buffer's bytes."""
    starts = np.zeros(len(widths), np.int64)
    at = 0
    for j, w in enumerate(widths.tolist()):
        starts[j] = at
        at += -(-rows * w // 8) * 8
    return starts, at, at + -(-rows // 8) * 8


@dataclass(frozen=True)
class MirrorLayout:
    """How a mirror holds a pane log's rows (``pl.mirror_rows``): row ``r`` in words
    ``r * words`` on of ``flat`` (the uint64 words of ``array``, a ``CopySpace`` mapping),
    its status then each column less its base, over its step, in its width, at its word
    and bit (``pl.mirror_words``)."""

    array: np.ndarray
    flat: np.ndarray
    bases: np.ndarray
    steps: np.ndarray
    widths: np.ndarray
    word_of: np.ndarray
    shift_of: np.ndarray
    words: int

    def packing(self) -> tuple[Any, ...]:
        """``pl.mirror_rows``' arguments past the columns."""
        return self.bases, self.steps, self.widths, self.word_of, self.shift_of, self.words, self.flat


class _Mirror:
    """A pane log's rows as a barrier packed them into a mapping (``_AggregatePaneLog.mirror``):
    ``epoch`` is the log's epoch then, so a later barrier packs only the blocks written since;
    ``generation`` the layout of the log's rows it mirrors."""

    def __init__(self, array: np.ndarray, generation: int, bases: np.ndarray, steps: np.ndarray, widths: np.ndarray) -> None:  # fmt: skip
        self.array = array
        self.generation = generation
        self.epoch = -1
        flat = array.reshape(-1).view(np.uint64)
        self.layout = MirrorLayout(array, flat, bases, steps, widths, *pl.mirror_words(widths))


def compact_mirror(
    layout: MirrorLayout, n_rows: int, live: int, space: unforked.CopySpace
) -> tuple[np.ndarray, tuple[tuple[int, int, np.ndarray], ...]]:
    """The ``live`` panes of a mirror of ``n_rows`` rows as a native section's columns
    (``NativePanes``: start, key, count, fired, slots), in a mapping of ``space`` (taken);
    returns the mapping's array and the columns."""
    widths = layout.widths
    out_starts, fired_at, nbytes = _column_starts(live, widths)
    spare = space.take(max(-(-nbytes // 8), 1))
    flat = spare.reshape(-1).view(np.uint8)
    packed = pl.compact_mirror(
        layout.flat, n_rows, widths, layout.word_of, layout.shift_of, layout.words, flat, out_starts, fired_at
    )
    assert packed == live, f"a mirror held {packed} live panes where the log had {live}"
    columns = [
        (
            int(layout.bases[j]),
            int(layout.steps[j]),
            flat[out_starts[j] : out_starts[j] + live * w].view(f"u{w}"),
        )
        for j, w in enumerate(widths.tolist())
    ]
    fired = (0, 1, flat[fired_at : fired_at + live])
    return spare, (*columns[: len(_MIRRORED)], fired, *columns[len(_MIRRORED) :])


class _Lease:
    """A mapping of a ``CopySpace`` a snapshot holds, given back once (``release``)."""

    def __init__(self, space: unforked.CopySpace, array: np.ndarray | None) -> None:
        self.space = space
        self.array = array
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            array, self.array = self.array, None
        if array is not None:
            self.space.give_back(array)


class _CopiedLog:
    """A pane log's live panes at a barrier: the log's mirror (``_AggregatePaneLog.mirror``),
    whose live rows the asynchronous phase of the checkpoint packs once into a native
    section's columns (``compact_mirror``), giving the mirror's mapping back. It writes them
    as they are (``native``), or widens them and turns them into pane columns in firing
    order once (``columns``). Nothing else holds the packed columns; the columns are fresh
    arrays."""

    def __init__(
        self,
        layout: MirrorLayout,
        n_rows: int,
        live: int,
        mirrors: unforked.CopySpace,
        copies: unforked.CopySpace,
        shape: tuple[int, int, int],
    ) -> None:
        self._source: tuple[MirrorLayout, int] | None = (layout, n_rows)
        self._rows = live
        self._mirror = _Lease(mirrors, layout.array)
        self._copy = _Lease(copies, None)
        self._packed: tuple[tuple[int, int, np.ndarray], ...] | None = None
        self._shape = shape  # slide, mi, mf
        self._columns: PaneColumns | None = None
        self._lock = threading.Lock()
        # once this is gone (written, or given up), its mappings take later barriers' copies
        weakref.finalize(self, self._mirror.release)
        weakref.finalize(self, self._copy.release)

    def _pack(self) -> tuple[tuple[int, int, np.ndarray], ...]:
        if self._packed is None:
            assert self._source is not None
            layout, n_rows = self._source
            self._copy.array, self._packed = compact_mirror(layout, n_rows, self._rows, self._copy.space)
            self._source = None
            self._mirror.release()
        return self._packed

    def columns(self) -> PaneColumns:
        with self._lock:
            if self._columns is None:
                slide, mi, mf = self._shape
                table = native_table(self._rows, self._pack(), mi + mf)
                self._columns = log_panes(table, np.arange(self._rows), slide, mi, mf, True)
            return self._columns

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``ColumnPaneSnapshot.deferred``'s columns."""
        panes = self.columns()
        return panes.starts, panes.keys, panes.fired

    def encoded_accumulators(self, plan: AggregatesPlan) -> np.ndarray:
        panes = self.columns()
        return encoded_accumulators(plan, panes.counts, *panes.accs)

    def native(
        self, describe: Callable[[int, tuple[tuple[int, int, np.ndarray], ...]], NativePanes]
    ) -> NativePanes:
        """The packed panes as a native pane section (``describe`` adds what the operator
        knows); the section keeps this copy, and so its memory, until it is gone."""
        with self._lock:
            section = describe(self._rows, self._pack())
        weakref.finalize(section, id, self)
        return section


# ----------------------------------------------------------------------------- the operator


class AggregatesWindowOperator(VectorWindowOperator):
    """A keyed tumbling/sliding window running ``Aggregates`` on whole batches."""

    def __init__(
        self,
        name: str,
        key_selector: Any,
        assigner: WindowAssigner,
        plan: AggregatesPlan,
        input_type: TypeInformation | None,
        late_data_tag: Any,
        function: Any,
        allowed_lateness_ms: int = 0,
    ) -> None:
        WindowOperatorBase.__init__(self, name, key_selector, assigner, late_data_tag)
        self.aggregates = plan
        self.spec = plan.spec
        self.input_type = input_type
        size: int = assigner.size  # type: ignore[attr-defined]
        self.size = size
        self.slide = getattr(assigner, "slide", size)
        self.offset = assigner.offset  # type: ignore[attr-defined]
        self.lateness = allowed_lateness_ms if self.event_time else 0
        self.aggregator = None
        self.contents_descriptor = AggregatingStateDescriptor("window-contents", function)
        self._keeps_first = False
        self._array_output = False
        self._ops = (plan.iops, plan.fops)
        self.mi, self.mf = len(plan.iops), len(plan.fops)
        self.panes = self._new_store(dense=True, int_keys=True)
        self.timers = InternalTimerService()
        self._written: set[tuple[Any, TimeWindow]] = set()
        self._init_deferral()
        #: the memory of the pane log's mirrors and of their packed live panes (``_defer_log``)
        self._mirror_space: unforked.CopySpace | None = None
        self._copy_space: unforked.CopySpace | None = None
        #: the pane log's rows in use at the barriers, and those of them the barriers packed
        self.mirror_rows = [0, 0]
        self._objects: _ObjectKeys | None = None
        self._ready = False
        self.vectorized_reason = "vectorized"
        #: whether the input is partial rows ``(key, count, slots...)`` (``two_phase``)
        self.partial_input = False
        self._partial: Any = None

    def use_partial_input(self, layout: Any) -> None:
        """Take partial rows of ``two_phase.PartialLayout`` ``layout`` instead of records."""
        self.partial_input = True
        self._partial = layout

    def _new_store(self, dense: bool, int_keys: bool) -> Any:
        if dense:
            return _AggregatePanes(self.mi, self.mf, self.size, self.slide, self.offset, int_keys)
        return _AggregatePaneLog(self.mi, self.mf, self.size, self.slide, self.offset)

    # -- records -------------------------------------------------------------------------------
    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        self.metrics.records_in += n
        values = batch.values
        times = self._times(batch)
        keys = self._keys(values, n)
        if self.partial_input:  # rows of partial aggregates (two_phase): key, count, slots
            ivals, fvals, weights = self._partial.columns(values)
        else:
            ivals, fvals = slot_columns(self.aggregates, values, n, f"operator '{self.name}'")
            weights = _NO_WEIGHTS
        panes: _AggregatePanes | _AggregatePaneLog = self.panes  # type: ignore[assignment]
        args = (self._ops, self.current_watermark, self.lateness, self.event_time)
        landed, new_keys, fired, done = panes.fold(times, keys, ivals, fvals, weights, *args)
        if done < n:  # the dense arrays would grow too big and too empty: go on in the hash table
            self._replace_store(dense=False)
            rest = slice(done, n)
            rest_weights = weights[rest] if len(weights) else weights
            rest_landed, rest_keys, rest_fired, _ = self.panes.fold(  # type: ignore[union-attr]
                times[rest], keys[rest], ivals[rest], fvals[rest], rest_weights, *args
            )
            landed[rest] = rest_landed
            new_keys = np.concatenate([new_keys, rest_keys])
            fired = _concatenate(fired, rest_fired)
        elif isinstance(panes, _AggregatePanes) and panes.outgrows(panes.cells()):
            self._replace_store(dense=False)
        if self._objects is None and len(new_keys):
            self.check_new_keys(new_keys)
        if fired is not None:
            self._emit_rows(fired)
        if self.event_time and np.count_nonzero(landed) != n:
            late = np.flatnonzero(~landed)
            if self.partial_input:  # no late side output here (two_phase): count the records
                self.metrics.late_records_dropped += int(weights[late].sum())
            else:
                self._emit_late(batch, late)

    def _keys(self, values: Any, n: int) -> np.ndarray:
        if self.partial_input:  # field 0 of a partial row, an integer
            from weir.operators.window.two_phase import partial_keys

            return partial_keys(values)
        return super()._keys(values, n)

    def _emit_rows(self, panes: PaneColumns) -> None:
        keys = panes.keys if self._objects is None else self._objects.keys(panes.keys)
        iaccs, faccs = panes.accs
        rows = output_columns(
            self.spec, self.aggregates, keys, panes.starts, self.size, panes.counts, iaccs, faccs
        )
        self._emit(Batch(rows, panes.starts + (self.size - 1)))

    # -- time ----------------------------------------------------------------------------------
    def _fire(self, until: int) -> None:
        panes: _AggregatePanes | _AggregatePaneLog = self.panes  # type: ignore[assignment]
        due = panes.take(until, self.lateness)
        if due is not None and len(due):
            self._emit_rows(due)
            self._maybe_compact_keys()

    # -- checkpoints ---------------------------------------------------------------------------
    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Copy the live panes' columns for the asynchronous phase (deferred), or write every
        live pane into the keyed backend and its timers into ``self.timers``."""
        self._setup()
        if self.defer_pane_snapshots and isinstance(self.panes, _AggregatePaneLog):
            self.pane_snapshot = self._defer_log(self.panes)
            return
        panes = self.panes.export()
        iaccs, faccs = panes.accs
        if self.defer_pane_snapshots:
            build = partial(encoded_accumulators, self.aggregates, panes.counts, iaccs, faccs)
            self.pane_snapshot = self._freeze_panes(panes, build, self.lateness, encoded=True)
            return
        self.pane_snapshot = None
        canonical = canonical_accumulators(self.aggregates, panes.counts, iaccs, faccs)
        keys = self._keys_of(panes.keys)
        windows = [TimeWindow(start, start + self.size) for start in panes.starts.tolist()]
        fired = None if panes.fired is None else panes.fired.tolist()
        self._write_and_clear(self._write_panes(zip(keys, windows, canonical), self.lateness, fired))

    def _defer_log(self, log: _AggregatePaneLog) -> ColumnPaneSnapshot:
        """The pending snapshot of a pane log's panes: the log's mirror brought up to date
        here (``_AggregatePaneLog.mirror``); packing its live panes, their order and columns
        are the asynchronous phase's (``_CopiedLog``)."""
        if self._mirror_space is None or self._copy_space is None:
            self._mirror_space, self._copy_space = unforked.CopySpace(1), unforked.CopySpace(1)
        layout, n_rows, packed = log.mirror(self._mirror_space)
        self.mirror_rows[0] += n_rows
        self.mirror_rows[1] += packed
        n = log.live
        slot_keys = self._hand_over_panes()
        first = log.first_live_key()
        sample = [] if first is None else [first if slot_keys is None else slot_keys[first]]
        shape = (self.slide, self.mi, self.mf)
        copied = _CopiedLog(layout, n_rows, n, self._mirror_space, self._copy_space, shape)
        describe = partial(
            NativePanes, self.contents_descriptor.name, self.size, self.lateness, self.event_time,
            self.backend.max_parallelism, tuple(map(bool, self.aggregates.floats)),
            None if slot_keys is None else tuple(slot_keys),
        )  # fmt: skip
        return ColumnPaneSnapshot.deferred(
            self.contents_descriptor.name, copied.load, n, sample, self.size, slot_keys,
            partial(copied.encoded_accumulators, self.aggregates), self.lateness, self.event_time,
            self.backend.max_parallelism, encoded=True, native=partial(copied.native, describe),
        )  # fmt: skip

    def initialize_state(self) -> None:
        """Load the panes a restore put into the backend and timers, in firing order; a pane
        without its trigger's timer (only the cleanup timer) fired already."""
        self._setup()
        timers = self._restored_timers()
        if not timers:
            return
        seen: dict[tuple[Any, Any], list[bool]] = {}
        for key, window, time in timers:
            if not isinstance(window, TimeWindow) or window.end - window.start != self.size:
                raise UsageError(
                    f"operator '{self.name}': the restored state holds window {window!r}, which this "
                    f"operator's {self.assigner.describe()} cannot hold (windows of {self.size} ms); "
                    f"restore it with the window it was written with"
                )
            trigger = time == window.max_timestamp()
            entry = seen.setdefault((key, window), [False])
            entry[0] = entry[0] or trigger
        backend, contents = self.backend, self.contents
        starts, keys, counts, ints, floats, fired = [], [], [], [], [], []
        what = f"operator '{self.name}'"
        for (key, window), (has_trigger,) in seen.items():
            if (key, window) in self._written:
                continue
            backend.set_current_key(key)
            contents.set_current_namespace(window)
            stored = contents.get_internal()
            if stored is None:
                continue
            self._written.add((key, window))
            n, i, f = from_canonical(self.aggregates, stored, what)
            starts.append(window.start)
            keys.append(key)
            counts.append(n)
            ints.append(i)
            floats.append(f)
            fired.append(not has_trigger)
        pane_keys = [self._pane_key_of(key) for key in keys]  # may switch to object keys
        self._insert(
            PaneColumns(
                np.array(starts, np.int64), np.array(pane_keys, np.int64), np.array(counts, np.int64),
                (np.array(ints, np.int64).reshape(len(starts), self.mi), np.array(floats, np.float64).reshape(len(starts), self.mf)),
                None, np.array(fired, np.bool_),
            )
        )  # fmt: skip

    def statistics(self) -> dict[str, Any]:
        stats = super().statistics()
        stats["lateness_ms"] = self.lateness
        stats["barrier_rows_in_use"], stats["barrier_rows_packed"] = self.mirror_rows
        return stats
