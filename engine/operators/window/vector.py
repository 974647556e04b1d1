"""Vectorized window built-ins: ``sum``, ``min``, ``max``, ``count`` and ``mean`` on whole batches.

Theory of operation
-------------------
``VectorWindowOperator`` gives the same records as the per-record ``WindowOperator``
running the same built-in, but it touches no Python object per record on its fast path:
a batch becomes columns (event time, key, value), and one numba call
(``kernels.dense_accumulate``, or ``accumulate`` on the hash store)
assigns windows, creates panes and folds values into accumulator arrays. Python work is
per batch, per new key, per new pane of tuple/Row ``sum``/``min``/``max`` (its first
record is kept) and per fired pane, never per record.

Eligibility (decided once, when the operator is created; see ``vector_plan``): a
``WindowedStream.sum/min/max/count/mean`` over a tumbling or sliding window, event time
or processing time, with the assigner's default trigger, no evictor and no allowed
lateness; for sum/min/max/mean the aggregated field must be a numeric (BYTE, SHORT, INT,
LONG, FLOAT, DOUBLE) field of a TUPLE/ROW stream, or the record itself on a numeric
stream. Everything else (sessions, global/count windows, custom or purging triggers,
allowed lateness, evictors, min_by/max_by, untyped or non-numeric fields) runs on the
per-record ``WindowOperator``. Late records (all their windows at or behind the
watermark) go to the late-data side output or are counted, as there.

Keys: the key selector is probed once with a stand-in record. A selector that returns
one field (``lambda r: r[0]``, ``lambda r: r.name``) or the record itself is read as a
column (``itemgetter``, or the numpy array itself); an integer column stays int64 (pane
keys are the keys), anything else gets dense key slots from a dict (one lookup per
record, in C). Any other selector is called per record. The probe is checked against the
real selector on the first and last records of every batch; on a mismatch the operator
falls back to calling it.

Semantics kept from the per-record path:

- sums, minima and maxima fold in arrival order, so float results are bit-identical;
  ties and NaN keep the earlier value; integer sums are int64 and wrap past 2**63 - 1
  (as Java's long does), where the per-record path would grow a Python int;
- ``sum``/``min``/``max`` emit the first record of the pane with the field replaced
  (the first record itself when nothing replaced it; on a LONG/DOUBLE stream the values
  as the batch's numpy array); ``count``/``mean`` emit ``(key, value)``; results carry
  the window's ``max_timestamp``;
- firing order: windows by end time, within a window the panes in the order their
  first record arrived -- the order the per-record path's timers fire in.

Checkpoints hold every live pane in the per-record path's canonical form (state
``window-contents``, namespace = the ``TimeWindow``: the reduced record for sum/min/max,
the ``Count``/``Mean`` accumulator for count/mean) and one timer per pane at
``max_timestamp``, so snapshots, rescaling and backend changes work unchanged, and a
checkpoint of either operator restores into the other. A task defers them
(``defer_pane_snapshots``): ``prepare_snapshot_pre_barrier`` exports the panes as fresh
columns and hands them over as a ``weir.state.panes.ColumnPaneSnapshot`` (``pane_snapshot``)
whose entries and timers are built in the asynchronous phase, so the barrier costs no
Python per pane; otherwise (the test harness) it writes every pane into the backend and
its timer into ``self.timers``. ``initialize_state`` (which
runs after the task restored the backend and timers) loads the panes back in firing
order (state written with windows of another size is a ``UsageError``). Between
checkpoints the arrays are the truth; entries written at the previous checkpoint are
overwritten or cleared at the next one.

Pane stores: panes start in dense arrays indexed ``[window slot, key slot]``
(``_DensePanes``): a record touches one cell of a small per-window row, which stays in the
CPU caches; int keys map to slots through a direct array (small non-negative ids) or a
numba hash table. When ``windows x keys`` would pass ``DENSE_CELLS`` (many keys spread over
many open windows), the panes move once, even in the middle of a batch, into a hash table
of pane rows (``_HashPanes``), whose memory follows the live panes only. Key slots of
non-int keys are compacted when most keys have no live pane. Output records of a firing
are built with the cyclic garbage collector paused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Any

import numpy as np

from weir.codec import kernels
from weir.codec.batch import Batch, TupleColumns
from weir.codec.serializers import _gc_paused  # output records are built with the collector paused
from weir.codec.strings import Strings
from weir.common.typeinfo import BasicTypeInfo, RowTypeInfo, TupleTypeInfo, TypeInformation
from weir.core.aggregators import Count, FieldAggregator, Mean
from weir.core.state import AggregatingStateDescriptor, ReducingStateDescriptor
from weir.core.window import (
    EventTimeTrigger,
    ProcessingTimeTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    Trigger,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from weir.errors import ProtocolViolation, UsageError
from weir.keys import java_hash_array, key_groups_for_hashes
from weir.operators.keyed import _check_key, _key_function
from weir.operators.window import kernels as wk
from weir.operators.window.shared import IDENTITY, WindowOperatorBase, identity, probe_agrees, probe_key_field
from weir.state import unforked
from weir.state.panes import ColumnPaneSnapshot
from weir.time.timers import InternalTimerService

__all__ = ["VectorPlan", "VectorWindowOperator", "vector_plan"]

BUILT_INS = ("sum", "min", "max", "count", "mean")
_ASSIGNERS = (
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
)
_MIN_TABLE = 1 << 10
#: The fewest key slots dense arrays keep when they grow their window slots
#: (``_DensePanes.grown_key_slots``).
_MIN_KEY_SLOTS = 1 << 5
#: Key slots are compacted when more than this many exist and most hold no live pane.
_KEY_COMPACTION_FLOOR = 1 << 16
#: Dense pane arrays hold at most this many (window slot, key slot) cells (about 20 bytes
#: each) before the operator moves its panes into the hash table, whose memory follows the
#: live panes only.
DENSE_CELLS = 1 << 22
#: Int keys below this (or below 8x the keys seen) are mapped to slots by direct lookup.
_DIRECT_KEYS = 1 << 16


# ----------------------------------------------------------------------------- eligibility


@dataclass(frozen=True)
class VectorPlan:
    """How a built-in runs vectorized: the aggregation, the field's index and accumulator dtype."""

    aggregation: str
    field: int | str
    field_index: int | None  # None: the record itself (numeric basic stream) or count
    dtype: Any  # np.int64 or np.float64 (count: np.int64, unused)
    struct: bool  # records are tuples or Rows


def _numeric(t: TypeInformation | None) -> Any:
    """The accumulator dtype of a numeric basic type, else None."""
    if isinstance(t, BasicTypeInfo) and t.python_type in (int, float) and t.numpy_dtype is not None:
        return np.int64 if t.python_type is int else np.float64
    return None


def vector_plan(
    aggregation: str | None,
    field: Any,
    input_type: TypeInformation | None,
    assigner: WindowAssigner,
    trigger: Trigger,
    allowed_lateness_ms: int,
    evictor: Any,
) -> VectorPlan | None:
    """The plan if this window runs vectorized, else None (see the module docstring)."""
    if aggregation not in BUILT_INS or not isinstance(assigner, _ASSIGNERS):
        return None
    default = EventTimeTrigger if assigner.is_event_time else ProcessingTimeTrigger
    if type(trigger) is not default or allowed_lateness_ms != 0 or evictor is not None:
        return None
    struct = isinstance(input_type, TupleTypeInfo | RowTypeInfo)
    if aggregation == "count":
        return VectorPlan("count", field, None, np.int64, struct)
    if isinstance(input_type, TupleTypeInfo | RowTypeInfo):
        index: int | None = None
        if isinstance(field, int) and not isinstance(field, bool) and 0 <= field < input_type.get_arity():
            index = field
        elif (
            isinstance(field, str)
            and isinstance(input_type, RowTypeInfo)
            and field in input_type.field_names
            and input_type.field_names != [f"f{i}" for i in range(input_type.get_arity())]
        ):
            index = input_type.field_names.index(field)
        if index is None:
            return None
        dtype = _numeric(input_type.field_types[index])
        if dtype is None:
            return None
        return VectorPlan(aggregation, field, index, np.float64 if aggregation == "mean" else dtype, True)
    dtype = _numeric(input_type)
    if dtype is None or field not in (0, "f0"):
        return None
    return VectorPlan(aggregation, field, None, np.float64 if aggregation == "mean" else dtype, False)


# ----------------------------------------------------------------------------- keys


def _ends(values: Any) -> Any:
    """The first and last records of a batch's values, without building every tuple of
    ``TupleColumns``."""
    if isinstance(values, TupleColumns):
        return values[:1].records() + values[-1:].records()
    return values


def check_key_groups(operator_name: str, keys: Any, max_parallelism: int, key_group_range: Any) -> None:
    """Raise ``ProtocolViolation`` if a key belongs to a key group outside the subtask's range."""
    if key_group_range is None or not len(keys):
        return
    groups = key_groups_for_hashes(java_hash_array(keys), max_parallelism)
    lo, hi = int(groups.min()), int(groups.max())
    if lo < key_group_range.start_key_group or hi > key_group_range.end_key_group:
        bad = next(i for i, g in enumerate(groups.tolist()) if g not in key_group_range)
        key = keys[bad].item() if isinstance(keys, np.ndarray) else keys[bad]
        raise ProtocolViolation(
            f"operator '{operator_name}': key {key!r} belongs to key group {int(groups[bad])}, "
            f"outside this subtask's key group range {key_group_range} (max_parallelism {max_parallelism})"
        )


class _StringKeyTable:
    """The slots of string keys by their UTF-8 bytes (``kernels.string_key_slots``): a batch's
    ``Strings`` find their slots without a ``str`` per record. It holds the keys that came as
    ``Strings``; ``_ObjectKeys`` gives the slots."""

    def __init__(self) -> None:
        self.table_slots = np.full(2 * _MIN_TABLE, -1, np.int64)
        self.table_hashes = np.zeros(2 * _MIN_TABLE, np.int64)
        self.key_data = np.zeros(1024, np.uint8)
        self.used_bytes = 0
        self.key_starts = np.zeros(_MIN_TABLE, np.int64)
        self.key_ends = np.zeros(_MIN_TABLE, np.int64)
        self.slots_held: list[np.ndarray] = []  # the slots the table holds, a batch at a time
        self.hashes_held: list[np.ndarray] = []
        self.held = 0

    def lookup(self, strings: Strings, hashes: np.ndarray) -> np.ndarray:
        """The slot of every value, -1 where the table does not hold it."""
        return wk.string_key_slots(
            strings.data, strings.starts, strings.ends, hashes, self.table_slots, self.table_hashes,
            self.key_data, self.key_starts, self.key_ends,
        )  # fmt: skip

    def insert(self, strings: Strings, hashes: np.ndarray, slots: np.ndarray) -> None:
        """Add distinct keys the table does not hold, with their slots."""
        sizes = strings.ends - strings.starts
        total = int(sizes.sum())
        if self.used_bytes + total > len(self.key_data):
            self.key_data = np.resize(self.key_data, max(self.used_bytes + total, 2 * len(self.key_data)))
        top = int(slots.max()) + 1 if len(slots) else 0
        if top > len(self.key_starts):
            size = max(top, 2 * len(self.key_starts))
            self.key_starts = np.resize(self.key_starts, size)
            self.key_ends = np.resize(self.key_ends, size)
        new_starts = self.used_bytes + np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(sizes) else sizes
        order = np.arange(len(sizes), dtype=np.int64)
        kernels.gather_strings(
            self.key_data, np.array([self.used_bytes], np.int64), strings.data, strings.starts, strings.ends,
            order, np.array([0, len(sizes)], np.int64), -1,
        )  # fmt: skip
        self.key_starts[slots] = new_starts
        self.key_ends[slots] = new_starts + sizes
        self.used_bytes += total
        self.slots_held.append(slots)
        self.hashes_held.append(hashes)
        self.held += len(slots)
        if 2 * self.held > len(self.table_slots):  # grow, and put every key back
            size = 1 << (2 * self.held - 1).bit_length()
            self.table_slots = np.full(size, -1, np.int64)
            self.table_hashes = np.zeros(size, np.int64)
            self.slots_held = [np.concatenate(self.slots_held)]
            self.hashes_held = [np.concatenate(self.hashes_held)]
            wk.insert_string_keys(
                self.table_slots, self.table_hashes, self.hashes_held[0], self.slots_held[0]
            )
        else:
            wk.insert_string_keys(self.table_slots, self.table_hashes, hashes, slots)


class _ObjectKeys:
    """Keys that are not int64s, as dense slots ``0 .. n - 1`` (a dict; one C lookup per record;
    string keys held as ``Strings`` are looked up by their bytes instead)."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.objects: list[Any] = []
        self._strings: _StringKeyTable | None = None

    def string_slots(self, keys: Strings, operator: Any) -> np.ndarray:
        """The slot of every key of a ``Strings`` column; keys not seen before get new slots."""
        table = self._strings
        if table is None:
            table = self._strings = _StringKeyTable()
        hashes = keys.java_hashes().astype(np.int64)
        slots = table.lookup(keys, hashes)
        missing = np.flatnonzero(slots < 0)
        if len(missing):  # new keys, or keys that came as str: the dict decides their slots
            found = self.slots(keys.take(missing).tolist(), operator)
            slots[missing] = found
            distinct, first = np.unique(found, return_index=True)
            picked = missing[first]
            table.insert(keys.take(picked), hashes[picked], distinct)
        return slots

    def __len__(self) -> int:
        return len(self.objects)

    def slots(self, keys: list[Any], operator: Any) -> np.ndarray:
        ids = self.ids
        try:
            slots = list(map(ids.get, keys))
        except TypeError:
            for key in keys:
                _check_key(operator, key)
            raise
        if None in slots:
            new: list[Any] = []
            for i, slot in enumerate(slots):
                if slot is None:
                    key = keys[i]
                    slot = ids.get(key)
                    if slot is None:
                        slot = ids[key] = len(self.objects)
                        self.objects.append(key)
                        new.append(key)
                    slots[i] = slot
            operator.check_new_keys(new)
        return np.fromiter(slots, np.int64, len(slots))

    def keys(self, slots: np.ndarray) -> list[Any]:
        objects = self.objects
        return [objects[s] for s in slots.tolist()]

    def compact(self, used: np.ndarray) -> np.ndarray:
        """Keep only the slots in ``used`` (sorted, unique); returns old slot -> new slot."""
        mapping = np.full(max(len(self.objects), 1), -1, np.int64)
        mapping[used] = np.arange(len(used), dtype=np.int64)
        self.objects = [self.objects[i] for i in used.tolist()]
        self.ids = {k: i for i, k in enumerate(self.objects)}
        self._strings = None  # refilled by the next batches' lookups
        return mapping


# ----------------------------------------------------------------------------- panes


@dataclass
class PaneColumns:
    """Panes as columns, in firing order: window start, pane key, count, accumulator, first record."""

    starts: np.ndarray
    keys: np.ndarray
    counts: np.ndarray
    accs: Any  # one array; for ``Aggregates`` (int64 rows, float64 rows)
    firsts: list[Any] | None
    fired: np.ndarray | None = None  # ``Aggregates`` with allowed lateness: the window fired already

    def __len__(self) -> int:
        return len(self.starts)


@dataclass
class FoldInput:
    """One batch as a pane store folds it: per record its time, pane key and aggregated value,
    the records themselves (kept as first records; else None), the watermark and whether
    windows at or behind it are skipped (event time)."""

    times: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    records: Any
    watermark: int
    check_late: bool

    def part(self, rest: slice) -> FoldInput:
        records = None if self.records is None else self.records[rest]
        return FoldInput(
            self.times[rest], self.keys[rest], self.values[rest], records, self.watermark, self.check_late
        )


class _PaneStore:
    """What both pane stores know: the aggregation, its accumulator dtype and the windows."""

    def __init__(self, op: int, dtype: Any, size: int, slide: int, offset: int, keeps_first: bool) -> None:
        self.op = op
        self.dtype = dtype
        self.size = size
        self.slide = slide
        self.offset = offset
        self.per_record = -(-size // slide)  # windows per record
        self.keeps_first = keeps_first

    def next_end(self) -> int | None:
        """The smallest ``max_timestamp`` of the live panes."""
        raise NotImplementedError

    def fire(self, until: int) -> PaneColumns | None:
        """Remove and return the panes whose window's max_timestamp is <= ``until``, in firing order."""
        end = self.next_end()
        if end is None or end > until:
            return None
        return self._take_due(until)

    def _take_due(self, until: int) -> PaneColumns:
        raise NotImplementedError


class _HashPanes(_PaneStore):
    """Panes in one hash table of rows (``kernels``): memory grows with the
    live panes only, whatever the number of keys and windows. The fallback when dense arrays
    would grow past ``DENSE_CELLS``."""

    def __init__(self, op: int, dtype: Any, size: int, slide: int, offset: int, keeps_first: bool) -> None:
        super().__init__(op, dtype, size, slide, offset, keeps_first)
        self.row_dtype = wk.PANE_FLOAT if dtype is np.float64 else wk.PANE_INT
        self.state = np.array([0, wk.NO_START, 0, 0], np.int64)
        self.table = wk.empty_table(_MIN_TABLE, self.row_dtype)
        self._spare: np.ndarray | None = None  # the table before the last resize (``_empty``)
        self.firsts: dict[int, Any] | None = {} if keeps_first else None  # pane seq -> first record

    @property
    def live(self) -> int:
        return int(self.state[wk.LIVE])

    def cells(self) -> int:
        return 0

    def _empty(self, size: int) -> np.ndarray:
        """An empty table of ``size`` rows: the table last replaced, cleared, if it has that
        size. Its pages are resident; a new big array costs a page fault per 4 KiB page on
        first touch, which made growing and firing rebuilds most of a window's time."""
        spare, self._spare = self._spare, None
        if spare is not None and len(spare) == size:
            spare["seq"] = -1
            return spare
        return wk.empty_table(size, self.row_dtype)

    def _resize(self, rows: np.ndarray, size: int) -> None:
        table = self._empty(size)
        wk.reinsert(self.table, rows, table)
        self._spare = self.table if len(self.table) > _MIN_TABLE else None
        self.table = table

    def _size_for(self, panes: int) -> int:
        return max(_MIN_TABLE, 1 << (2 * max(panes, 1) - 1).bit_length())

    def _reserve(self, more: int) -> None:
        need = self.live + more
        if 2 * need > len(self.table):
            self._resize(self._live_rows(), self._size_for(need))

    def _live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.table["seq"] >= 0)

    def accumulate(self, batch: FoldInput) -> tuple[np.ndarray, np.ndarray, int]:
        """Fold a batch in: which records landed in a window, the keys of the new panes, and
        how many records were folded (all)."""
        times, keys, values, records = batch.times, batch.keys, batch.values, batch.records
        n = len(times)
        self._reserve(n * self.per_record)
        new_positions = np.empty(n * self.per_record, np.int64)
        landed = np.empty(n, np.bool_)
        seq = int(self.state[wk.SEQ])
        wk.accumulate(
            times, keys, values, self.op, self.size, self.slide, self.offset, batch.watermark,
            batch.check_late, self.table, self.state, new_positions, landed,
        )  # fmt: skip
        positions = new_positions[: int(self.state[wk.NEW])]
        if self.firsts is not None and len(positions):
            records = records if isinstance(records, list) else list(records)
            self.firsts.update(
                zip(range(seq, int(self.state[wk.SEQ])), map(records.__getitem__, positions.tolist()))
            )
        return landed, keys[positions], n

    def _columns(self, rows: np.ndarray, pop: bool) -> PaneColumns:
        table = self.table  # field first, then rows: fancy indexing of whole rows is slow
        firsts = None
        if self.firsts is not None:
            get = self.firsts.pop if pop else self.firsts.__getitem__
            firsts = list(map(get, table["seq"][rows].tolist()))
        return PaneColumns(
            table["start"][rows], table["key"][rows], table["count"][rows], table["acc"][rows], firsts
        )

    def _ordered(self, rows: np.ndarray) -> np.ndarray:
        return rows[np.lexsort((self.table["seq"][rows], self.table["start"][rows]))]

    def next_end(self) -> int | None:
        return int(self.state[wk.MIN_START]) + self.size - 1 if self.live else None

    def _take_due(self, until: int) -> PaneColumns:
        table = self.table
        live = table["seq"] >= 0
        due = live & (table["start"] <= until - (self.size - 1))
        columns = self._columns(self._ordered(np.flatnonzero(due)), pop=True)
        survivors = np.flatnonzero(live & ~due)
        m = len(survivors)
        self.state[wk.LIVE] = m
        self.state[wk.MIN_START] = int(table["start"][survivors].min()) if m else wk.NO_START
        size = len(table) if len(table) <= 8 * self._size_for(m) else self._size_for(m)
        self._resize(survivors, size)
        return columns

    def export(self) -> PaneColumns:
        """Every live pane, in firing order (nothing is removed)."""
        return self._columns(self._ordered(self._live_rows()), pop=False)

    def insert(self, columns: PaneColumns) -> bool:
        """Add panes in this order (their creation order follows it); duplicates are skipped."""
        self._reserve(len(columns))
        seqs = np.empty(len(columns), np.int64)
        wk.insert_panes(
            self.table, columns.starts.astype(np.int64), columns.keys.astype(np.int64),
            columns.counts.astype(np.int64), columns.accs.astype(self.dtype), self.state, seqs,
        )  # fmt: skip
        if self.firsts is not None and columns.firsts is not None:
            self.firsts.update((seq, first) for seq, first in zip(seqs.tolist(), columns.firsts) if seq >= 0)
        return True


class IntKeySlots:
    """Int64 keys as dense slots ``0 .. n_keys - 1`` in first-seen order (``kernels.int_key_slots``):
    small non-negative keys through a direct array, the others through an open-addressing
    table; ``slot_keys[slot]`` is the key of a slot."""

    def __init__(self) -> None:
        self.n_keys = 0
        self.slot_keys = np.zeros(_MIN_TABLE, np.int64)
        self.direct = np.full(_MIN_TABLE, -1, np.int32)
        self.table_keys = np.zeros(2 * _MIN_TABLE, np.int64)
        self.table_slots = np.full(2 * _MIN_TABLE, -1, np.int32)
        self._state = np.zeros(2, np.int64)  # slots given out; the largest key of the last call

    def slots(self, keys: np.ndarray) -> np.ndarray:
        """The slot of every key (int32); keys not seen before get new slots."""
        need = self.n_keys + len(keys)
        if need > len(self.slot_keys):
            self.slot_keys = np.resize(self.slot_keys, max(need, 2 * len(self.slot_keys)))
        if 2 * need > len(self.table_slots):
            size = 1 << (2 * need - 1).bit_length()
            self.table_keys = np.zeros(size, np.int64)
            self.table_slots = np.full(size, -1, np.int32)
            wk.rebuild_int_key_table(self.slot_keys, self.n_keys, self.table_keys, self.table_slots)
        state = self._state
        state[0] = self.n_keys
        slots = wk.int_key_slots(keys, self.direct, self.table_keys, self.table_slots, self.slot_keys, state)
        self.n_keys = int(state[0])
        top = int(state[1])
        if len(self.direct) <= top < max(_DIRECT_KEYS, 8 * self.n_keys):
            # keys of a denser range than ``direct`` covers: widen it for the next batches (the
            # keys hashed until now move into it)
            self._widen_direct(1 << top.bit_length())
        return slots

    def _widen_direct(self, size: int) -> None:
        """Grow ``direct``; hashed keys that now fall in its range keep their slots."""
        direct = np.full(size, -1, np.int32)
        direct[: len(self.direct)] = self.direct
        keys = self.slot_keys[: self.n_keys]
        moved = np.flatnonzero((keys >= len(self.direct)) & (keys < size))
        direct[keys[moved]] = moved
        self.direct = direct


class _DensePanes(_PaneStore):
    """Panes in dense arrays ``[window slot, key slot]``: a record touches its key slot's cells
    in small per-window rows that stay in the CPU caches, where a hash table of panes does
    not. Keys are int64s mapped to slots by a numba hash table, or already slots."""

    win_start: np.ndarray
    win_live: np.ndarray
    win_count: np.ndarray
    acc: np.ndarray
    count: np.ndarray
    order: np.ndarray
    firsts: np.ndarray | None

    def __init__(
        self, op: int, dtype: Any, size: int, slide: int, offset: int, keeps_first: bool, int_keys: bool
    ) -> None:
        super().__init__(op, dtype, size, slide, offset, keeps_first)
        self.int_keys = int_keys
        self.state = np.array([0, wk.NO_START, 0, 0, 0], np.int64)
        self.windows = 0  # window slots
        self.key_capacity = 0
        self._alloc(4, _MIN_TABLE)
        self.key_slots = IntKeySlots()

    def _alloc(self, windows: int, keys: int) -> None:
        """(Re)allocate for ``windows`` window slots and ``keys`` key slots, keeping the contents."""
        w0, k0 = self.windows, self.key_capacity
        old = (
            None
            if not w0
            else (self.win_start, self.win_live, self.win_count, self.acc, self.count, self.order)
        )
        old_firsts = getattr(self, "firsts", None)
        self.win_start = np.zeros(windows, np.int64)
        self.win_live = np.zeros(windows, np.bool_)
        self.win_count = np.zeros(windows, np.int64)
        self.acc = unforked.zeros((windows, keys), self.dtype)
        self.count = unforked.zeros((windows, keys), np.int64)
        self.order = unforked.zeros((windows, keys), np.int32)
        self.firsts = np.empty((windows, keys), dtype=object) if self.keeps_first else None
        if old is not None:
            win_start, win_live, win_count, acc, count, order = old
            self.win_start[:w0] = win_start
            self.win_live[:w0] = win_live
            self.win_count[:w0] = win_count
            k = min(k0, keys)  # fewer key slots: only unused ones go (``grown_key_slots``)
            self.acc[:w0, :k] = acc[:, :k]
            self.count[:w0, :k] = count[:, :k]
            self.order[:w0, :k] = order[:, :k]
            if self.firsts is not None and old_firsts is not None:
                self.firsts[:w0, :k] = old_firsts[:, :k]
        self.windows, self.key_capacity = windows, keys

    def cells(self) -> int:
        return self.windows * self.key_capacity

    def grown_key_slots(self) -> int:
        """The key slots for arrays of more window slots: fewer than now when at most an eighth
        are used by int keys (slots ``0 .. n_keys - 1``). A subtask of 50 keys with 4,096 open
        windows otherwise kept 4 Mi cells, 99% empty, and moved to the hash table."""
        n = self.n_keys
        if self.int_keys and 8 * n <= self.key_capacity:
            return max(_MIN_KEY_SLOTS, 1 << (2 * max(n, 1) - 1).bit_length())
        return self.key_capacity

    @property
    def live(self) -> int:
        return int(self.win_count[self.win_live].sum())

    @property
    def n_keys(self) -> int:
        return self.key_slots.n_keys

    @property
    def slot_keys(self) -> np.ndarray:
        return self.key_slots.slot_keys

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        return self.key_slots.slots(keys) if self.int_keys else keys

    def _key_room(self, slots: np.ndarray) -> None:
        top = int(slots.max()) + 1 if len(slots) else 0
        if top > self.key_capacity:
            self._alloc(self.windows, max(top, 2 * self.key_capacity))

    def accumulate(self, batch: FoldInput) -> tuple[np.ndarray, np.ndarray, int]:
        """Fold a batch in: which records landed in a window, the keys new to this store, and how
        many records were folded -- fewer than all when the arrays would have to grow past
        ``DENSE_CELLS`` (the caller then moves the panes to a hash table and goes on there)."""
        times, keys, values, records = batch.times, batch.keys, batch.values, batch.records
        n = len(times)
        before = self.n_keys
        slots = self._slots(keys)
        new_positions = np.empty(n * self.per_record, np.int64)
        new_windows = np.empty(n * self.per_record, np.int64)
        landed = np.empty(n, np.bool_)
        new_keys = self.slot_keys[before : self.n_keys] if self.int_keys else keys[:0]
        # int keys: every slot is below n_keys; other keys come as slots already
        top = self.n_keys if self.int_keys else (int(slots.max()) + 1 if n else 0)
        if top > self.key_capacity:
            wanted = max(top, 2 * self.key_capacity)
            if self.windows * wanted > DENSE_CELLS:
                return landed, new_keys, 0
            self._alloc(self.windows, wanted)
        state = self.state
        state[wk.NEW] = 0
        begin = 0
        while True:
            wk.dense_accumulate(
                times, slots, values, self.op, self.size, self.slide, self.offset, batch.watermark,
                batch.check_late, self.win_start, self.win_live, self.win_count, self.acc, self.count, self.order,
                state, new_positions, new_windows, landed, begin,
            )  # fmt: skip
            begin = int(state[wk.STOP])
            slots_next = self.grown_key_slots()
            if begin >= n or 2 * self.windows * slots_next > DENSE_CELLS:
                break
            self._alloc(2 * self.windows, slots_next)  # every window slot was open
        fresh = int(state[wk.NEW])
        if self.firsts is not None and fresh:
            records = records if isinstance(records, list) else list(records)
            positions = new_positions[:fresh]
            firsts = np.empty(fresh, dtype=object)
            for j, i in enumerate(positions.tolist()):
                firsts[j] = records[i]  # one by one: numpy would take a tuple apart
            self.firsts[new_windows[:fresh], slots[positions]] = firsts
        return landed, new_keys, min(begin, n)

    def next_end(self) -> int | None:
        live = self.win_live
        return int(self.win_start[live].min()) + self.size - 1 if live.any() else None

    def _columns(self, windows: np.ndarray, clear: bool) -> PaneColumns:
        """The panes of window slots ``windows``, window by window, each in creation order."""
        sizes = self.win_count[windows]
        n = int(sizes.sum())
        columns = PaneColumns(
            np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, self.dtype), None
        )
        if self.firsts is not None:  # read before the kernel clears the windows
            firsts: list[Any] = []
            for w, size in zip(windows.tolist(), sizes.tolist()):
                k = self.order[w, :size]
                firsts.extend(self.firsts[w, k].tolist())
                if clear:
                    self.firsts[w, k] = None
            columns.firsts = firsts
        wk.dense_collect(
            windows, self.win_start, self.win_live, self.win_count, self.order, self.slot_keys, self.int_keys,
            self.count, self.acc, clear, columns.starts, columns.keys, columns.counts, columns.accs,
        )  # fmt: skip
        return columns

    def _windows(self, until: int | None) -> np.ndarray:
        live = np.flatnonzero(self.win_live)
        if until is not None:
            live = live[self.win_start[live] <= until - (self.size - 1)]
        return live[np.argsort(self.win_start[live], kind="stable")]

    def _take_due(self, until: int) -> PaneColumns:
        return self._columns(self._windows(until), clear=True)

    def export(self) -> PaneColumns:
        return self._columns(self._windows(None), clear=False)

    def insert(self, columns: PaneColumns) -> bool:
        """Add panes in this order (a window's panes keep it); a pane that exists is skipped.
        False (and nothing added) if they do not fit in ``DENSE_CELLS``."""
        if not len(columns):
            return True
        slots = self._slots(columns.keys.astype(np.int64))
        windows = len(np.unique(columns.starts)) + int(self.win_live.sum())
        keys = max(self.key_capacity, int(slots.max()) + 1)
        if max(windows, self.windows) * keys > DENSE_CELLS:
            return False
        self._key_room(slots)
        if windows > self.windows:
            self._alloc(1 << (windows - 1).bit_length(), self.key_capacity)
        firsts = columns.firsts
        for i, (start, slot, count, acc) in enumerate(
            zip(columns.starts.tolist(), slots.tolist(), columns.counts.tolist(), columns.accs.tolist())
        ):
            w = wk._window_slot(start, self.win_start, self.win_live, True)
            if self.count[w, slot]:
                continue
            self.order[w, self.win_count[w]] = slot
            self.win_count[w] += 1
            self.count[w, slot] = count
            self.acc[w, slot] = acc
            if self.firsts is not None and firsts is not None:
                self.firsts[w, slot] = firsts[i]
        return True


# ----------------------------------------------------------------------------- the operator


class VectorWindowOperator(WindowOperatorBase):
    """A keyed tumbling/sliding window running a built-in aggregation on whole batches."""

    def __init__(
        self,
        name: str,
        key_selector: Any,
        assigner: WindowAssigner,
        plan: VectorPlan,
        input_type: TypeInformation | None,
        late_data_tag: Any,
    ) -> None:
        super().__init__(name, key_selector, assigner, late_data_tag)
        self.plan = plan
        self.input_type = input_type
        size: int = assigner.size  # type: ignore[attr-defined]
        self.size = size
        self.slide: int = getattr(assigner, "slide", size)
        self.offset: int = assigner.offset  # type: ignore[attr-defined]
        self.op = wk.OPS[plan.aggregation]
        self.aggregator: Any = None
        if plan.aggregation == "count":
            self.contents_descriptor: Any = AggregatingStateDescriptor("window-contents", Count())
        elif plan.aggregation == "mean":
            self.contents_descriptor = AggregatingStateDescriptor("window-contents", Mean(plan.field))
        else:
            self.aggregator = FieldAggregator(plan.aggregation, plan.field)
            self.contents_descriptor = ReducingStateDescriptor("window-contents", self.aggregator)
        #: sum/min/max of tuples and Rows keep each pane's first record: the output's other fields
        self._keeps_first = plan.struct and plan.aggregation in ("sum", "min", "max")
        #: sum/min/max of a LONG or DOUBLE stream emit their accumulators as the batch's numpy array
        self._array_output = (
            not plan.struct
            and plan.aggregation in ("sum", "min", "max")
            and isinstance(input_type, BasicTypeInfo)
            and np.dtype(input_type.numpy_dtype) == np.dtype(plan.dtype)
        )
        self.panes: _DensePanes | _HashPanes = self._new_store(dense=True, int_keys=True)
        self.timers = InternalTimerService()  # filled only for checkpoints (see the module docstring)
        self._written: set[tuple[Any, TimeWindow]] = set()
        self._init_deferral()
        #: None while keys are int64s (pane keys are the keys themselves); else the key slots
        self._objects: _ObjectKeys | None = None
        self._ready = False
        self._empty = np.zeros(0, plan.dtype)

    def _new_store(self, dense: bool, int_keys: bool) -> _DensePanes | _HashPanes:
        args = (self.op, self.plan.dtype, self.size, self.slide, self.offset, self._keeps_first)
        return _DensePanes(*args, int_keys=int_keys) if dense else _HashPanes(*args)

    def _replace_store(self, dense: bool, remap: Any = None) -> None:
        """Move every pane into a new store (dense or hash), mapping pane keys through ``remap``."""
        columns = self.panes.export()
        if remap is not None:
            columns.keys = remap(columns.keys)
        self.panes = self._new_store(dense, int_keys=self._objects is None)
        self._insert(columns)

    def _insert(self, columns: PaneColumns) -> None:
        if not self.panes.insert(columns):  # too many for dense arrays
            self.panes = self._new_store(dense=False, int_keys=self._objects is None)
            self.panes.insert(columns)

    # -- lifecycle -----------------------------------------------------------------------------
    def _setup(self) -> None:
        if self._ready:
            return
        self._ready = True
        self._key_of = _key_function(self.key_selector)
        backend = self.context.keyed_state_backend()
        self.backend = backend
        self.contents = backend.get_state(self.contents_descriptor)
        t = self.input_type
        field = probe_key_field(self._key_of, t)
        self._key_field = field
        key_type: Any = None
        if field == IDENTITY:
            key_type = t
        elif field is not None and isinstance(t, TupleTypeInfo | RowTypeInfo):
            key_type = t.field_types[field]
        self._key_getter = None if field is None or field == IDENTITY else itemgetter(field)
        if not (isinstance(key_type, BasicTypeInfo) and key_type.python_type is int):
            self._objects = _ObjectKeys()
            self.panes = self._new_store(dense=True, int_keys=False)

    def initialize_state(self) -> None:
        """Load the panes a restore put into the backend and timers, in firing order."""
        self._setup()
        restored = self._restored_panes()
        if not restored:
            return
        backend, contents = self.backend, self.contents
        starts: list[int] = []
        keys: list[Any] = []
        counts: list[int] = []
        accs: list[Any] = []
        firsts: list[Any] = []
        for key, window in restored:
            if not isinstance(window, TimeWindow) or window.end - window.start != self.size:
                raise UsageError(
                    f"operator '{self.name}': the restored state holds window {window!r}, which this "
                    f"operator's {self.assigner.describe()} cannot hold (windows of {self.size} ms); "
                    f"restore it with the window it was written with"
                )
            if (key, window) in self._written:
                continue
            backend.set_current_key(key)
            contents.set_current_namespace(window)
            stored = contents.get_internal()
            if stored is None:
                continue
            self._written.add((key, window))
            acc, count, first = self._from_canonical(stored)
            starts.append(window.start)
            keys.append(key)
            counts.append(count)
            accs.append(acc)
            firsts.append(first)
        pane_keys = [self._pane_key_of(key) for key in keys]
        self._insert(
            PaneColumns(
                np.array(starts, np.int64),
                np.array(pane_keys, np.int64),
                np.array(counts, np.int64),
                np.array(accs, self.plan.dtype),
                firsts if self._keeps_first else None,
            )
        )

    def open(self) -> None:
        self._setup()
        if self.aggregator is not None:
            self.aggregator.open(self.context.runtime_context())

    def close(self) -> None:
        if self.aggregator is not None:
            self.aggregator.close()

    # -- keys ----------------------------------------------------------------------------------
    def check_new_keys(self, keys: Any) -> None:
        check_key_groups(self.name, keys, self.backend.max_parallelism, self.backend.key_group_range)

    def _pane_key_of(self, key: Any) -> int:
        """The pane key of one key (restoring)."""
        if self._objects is None:
            if type(key) is int and -(1 << 63) <= key < (1 << 63):
                return key
            self._to_object_keys()
        assert self._objects is not None
        return int(self._objects.slots([key], self)[0])

    def _to_object_keys(self) -> None:
        """From here on keys are Python objects with slots (a key that is no int64 showed up)."""
        if self._objects is not None:
            return
        objects = _ObjectKeys()
        live_keys = self.panes.export().keys
        objects.objects = np.unique(live_keys).tolist()
        objects.ids = {k: i for i, k in enumerate(objects.objects)}
        self._objects = objects
        ids = objects.ids
        self._replace_store(
            isinstance(self.panes, _DensePanes),
            lambda keys: np.array([ids[k] for k in keys.tolist()], np.int64),
        )

    def _keys_of(self, pane_keys: np.ndarray) -> list[Any]:
        if self._objects is None:
            result: list[Any] = pane_keys.tolist()
            return result
        return self._objects.keys(pane_keys)

    # -- canonical state -----------------------------------------------------------------------
    def _from_canonical(self, stored: Any) -> tuple[Any, int, Any]:
        """(accumulator, count, first record) from what the per-record path stores."""
        kind = self.plan.aggregation
        try:
            if kind == "count":
                return 0, int(stored), None
            if kind == "mean":
                return float(stored[0]), int(stored[1]), None
            value = self.aggregator._get(stored)
            return self.plan.dtype(value), 1, stored
        except (TypeError, ValueError, OverflowError, IndexError) as exc:
            raise UsageError(
                f"operator '{self.name}': restored window state {stored!r} does not fit "
                f"{kind}() over {self.plan.dtype.__name__} ({exc})"
            ) from None

    def _results(self, panes: PaneColumns) -> Sequence[Any]:
        """The output records of ``panes``; for sum/min/max also what the per-record path stores."""
        with _gc_paused():
            return self._build_results(panes)

    def _build_results(self, panes: PaneColumns) -> Sequence[Any]:
        kind = self.plan.aggregation
        if kind in ("count", "mean"):  # (key, value) records, built only if something reads them
            keys = panes.keys if self._objects is None else self._objects.keys(panes.keys)
            return TupleColumns([keys, panes.counts if kind == "count" else panes.accs / panes.counts])
        accs: list[Any] = panes.accs.tolist()
        if not self._keeps_first:
            return accs
        assert panes.firsts is not None
        agg = self.aggregator
        out = []
        if kind == "sum":
            for first, acc, count in zip(panes.firsts, accs, panes.counts.tolist()):
                out.append(first if count == 1 else agg._set(first, acc))
        elif kind == "min":
            for first, acc in zip(panes.firsts, accs):
                out.append(agg._set(first, acc) if acc < agg._get(first) else first)
        else:
            for first, acc in zip(panes.firsts, accs):
                out.append(agg._set(first, acc) if acc > agg._get(first) else first)
        return out

    def _canonical(self, panes: PaneColumns, results: Sequence[Any]) -> Sequence[Any]:
        """What the per-record path would hold in ``window-contents`` for these panes."""
        kind = self.plan.aggregation
        if kind == "count":
            counts: list[Any] = panes.counts.tolist()
            return counts
        if kind == "mean":
            return list(zip(panes.accs.tolist(), panes.counts.tolist()))
        return results

    # -- records -------------------------------------------------------------------------------
    def _keys(self, values: Any, n: int) -> np.ndarray:
        """The pane key of every record: the int64 key, or the key's slot."""
        field = self._key_field
        if field is not None:  # check the probe against the selector on two real records
            getter = identity if field == IDENTITY else self._key_getter
            if not probe_agrees(getter, self._key_of, _ends(values)):  # the probe misread the selector
                self._key_field = field = None
                self._to_object_keys()
        column = (
            values.columns[field]
            if isinstance(values, TupleColumns) and field not in (None, IDENTITY)
            else None
        )
        if self._objects is None and isinstance(column, Strings):
            self._to_object_keys()  # string keys
        if self._objects is None:
            try:
                if isinstance(values, np.ndarray):
                    return values.astype(np.int64, copy=False)
                if isinstance(column, np.ndarray) and column.dtype.kind == "i":
                    return column.astype(np.int64, copy=False)
                source = values if field == IDENTITY else map(self._key_getter, values)  # type: ignore[arg-type]
                return np.fromiter(source, np.int64, n)
            except (TypeError, OverflowError, ValueError):
                self._to_object_keys()  # a None or a huge int: keys as Python objects from here on
        assert self._objects is not None
        if field is None:
            key_of = self._key_of
            records = values.tolist() if isinstance(values, np.ndarray) else values
            keys_list = [key_of(v) for v in records]
        elif field == IDENTITY:
            keys_list = values.tolist() if isinstance(values, np.ndarray) else list(values)
        elif isinstance(column, Strings):
            return self._objects.string_slots(column, self)
        elif column is not None:
            keys_list = column.tolist() if isinstance(column, np.ndarray) else list(column)
        else:
            keys_list = list(map(self._key_getter, values))  # type: ignore[arg-type]
        return self._objects.slots(keys_list, self)

    def _column(self, values: Any, n: int) -> np.ndarray:
        if self.op == wk.COUNT:
            return self._empty
        return numeric_column(
            values,
            self.plan.field_index,
            self.plan.dtype,
            n,
            lambda i, v: (
                f"operator '{self.name}': {self.plan.aggregation}({self.plan.field!r}) needs a number "
                f"in that field of every record; record {i} is {v!r}"
            ),
        )

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        self.metrics.records_in += n
        values = batch.values
        times = self._times(batch)
        keys = self._keys(values, n)
        column = self._column(values, n)
        records = values if self._keeps_first else None
        folding = FoldInput(times, keys, column, records, self.current_watermark, self.event_time)
        landed, new_keys, done = self.panes.accumulate(folding)
        if done < n:  # the dense arrays would grow too big: go on in a hash table of panes
            self._replace_store(dense=False)
            rest = slice(done, n)
            rest_landed, rest_keys, _ = self.panes.accumulate(folding.part(rest))
            landed[rest] = rest_landed
            new_keys = np.concatenate([new_keys, rest_keys])
        elif self.panes.cells() > DENSE_CELLS:
            self._replace_store(dense=False)
        if self._objects is None and len(new_keys):  # object keys are checked when they get a slot
            self.check_new_keys(new_keys)
        if self.event_time and np.count_nonzero(landed) != n:
            self._emit_late(batch, np.flatnonzero(~landed))

    # -- time ----------------------------------------------------------------------------------
    def _fire(self, until: int) -> None:
        panes = self.panes.fire(until)
        if panes is None or not len(panes):
            return
        values: Any = panes.accs if self._array_output else self._results(panes)
        self._maybe_compact_keys()
        self._emit(Batch(values, panes.starts + (self.size - 1)))

    def _maybe_compact_keys(self) -> None:
        objects = self._objects
        if objects is None or len(objects) <= _KEY_COMPACTION_FLOOR:
            return
        used = np.unique(self.panes.export().keys)
        if 4 * len(used) > len(objects):
            return
        mapping = objects.compact(used)
        self._replace_store(isinstance(self.panes, _DensePanes), lambda keys: mapping[keys])

    def _next_fire_time(self) -> int | None:
        return self.panes.next_end()

    # -- checkpoints ---------------------------------------------------------------------------
    def _init_deferral(self) -> None:
        #: set by the task before a checkpoint: copy the panes' columns instead of writing them out
        self.defer_pane_snapshots = False
        #: the panes copied at the last barrier, until the task takes them
        self.pane_snapshot: ColumnPaneSnapshot | None = None

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Copy the live panes' columns for the asynchronous phase (deferred), or write every
        live pane into the keyed backend and its timer into ``self.timers``."""
        self._setup()
        panes = self.panes.export()
        if self.defer_pane_snapshots:
            self.pane_snapshot = self._freeze_panes(panes, partial(self._deferred_canonical, panes))
            return
        self.pane_snapshot = None
        canonical = self._canonical(panes, self._results(panes))
        keys = self._keys_of(panes.keys)
        size = self.size
        windows = [TimeWindow(start, start + size) for start in panes.starts.tolist()]
        self._write_and_clear(self._write_panes(zip(keys, windows, canonical)))

    def _deferred_canonical(self, panes: PaneColumns) -> Sequence[Any]:
        """``_canonical`` of panes copied at a barrier, in the asynchronous phase: reads only
        ``panes`` and the operator's fixed configuration."""
        if self.plan.aggregation in ("count", "mean"):
            return self._canonical(panes, ())
        return self._build_results(panes)

    def _write_and_clear(self, written: list[tuple[Any, TimeWindow]]) -> None:
        """After writing ``written`` panes: clear the entries of panes written before that are
        gone (fired since)."""
        now = set(written)
        backend, contents = self.backend, self.contents
        for key, window in self._written - now:  # fired since the last checkpoint
            backend.set_current_key(key)
            contents.set_current_namespace(window)
            contents.clear()
        self._written = now

    def _freeze_panes(
        self,
        panes: PaneColumns,
        accumulators: Callable[[], Sequence[Any] | np.ndarray],
        lateness: int = 0,
        encoded: bool = False,
    ) -> ColumnPaneSnapshot:
        """The pending snapshot of ``panes`` (exported at the barrier: fresh arrays the stores
        never write again) whose entries and timers the asynchronous phase builds. The backend
        keeps no pane entry: those a restore or a synchronous snapshot left there are
        cleared (the copied panes replace the live ones); ``self.timers`` starts over empty."""
        slot_keys = self._hand_over_panes()
        return ColumnPaneSnapshot(
            self.contents_descriptor.name, panes.starts, self.size, panes.keys, slot_keys, accumulators,
            panes.fired, lateness, self.event_time, self.backend.max_parallelism, encoded,
        )  # fmt: skip

    def _hand_over_panes(self) -> list[Any] | None:
        """Before a pane snapshot that holds every live pane: clear the backend's pane entries
        and the timers (``_freeze_panes``); returns a copy of the slot -> key list, if any."""
        self._write_and_clear([])
        self.timers = InternalTimerService()
        return None if self._objects is None else self._objects.objects.copy()

    def statistics(self) -> dict[str, Any]:
        return {
            "live_panes": self.panes.live,
            "store": "dense" if isinstance(self.panes, _DensePanes) else "hash",
            "cells": self.panes.cells(),
            "key_slots": None if self._objects is None else len(self._objects),
            "key_field": self._key_field if self._ready else None,
        }


_NOT_A_NUMBER = (TypeError, ValueError, OverflowError, IndexError, KeyError)


def numeric_column(values: Any, index: int | None, dtype: Any, n: int, bad: Any) -> np.ndarray:
    """Field ``index`` of a batch's values (the values themselves when None) as a numpy array
    of ``dtype``: the column itself when the batch holds columns. A record whose field is not
    a number is a UsageError with ``bad(i, record)``."""
    try:
        if isinstance(values, np.ndarray):
            return values.astype(dtype, copy=False)
        if isinstance(values, TupleColumns):
            return np.asarray(values.columns[0 if index is None else index], dtype)
        return np.fromiter(values if index is None else map(itemgetter(index), values), dtype, n)
    except _NOT_A_NUMBER:
        for i, v in enumerate(values):
            try:
                np.array([v if index is None else v[index]], dtype)
            except _NOT_A_NUMBER:
                raise UsageError(bad(i, v)) from None
        raise
