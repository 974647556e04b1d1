"""Numba kernels of the vectorized window built-ins, each with a plain-Python reference twin.

Theory of operation
-------------------
A vectorized window operator (``weir.operators.window.vector``) keeps one
*pane* per (key, window): the accumulator of a ``sum``/``min``/``max``/``count``/``mean``
over the records of that key in that window. A key is an int64: the key itself for
integer keys, or a *key slot* (a dense int the operator gives any other key). Panes live
in one open-addressing hash table with linear probing, a numpy structured array of rows
``(start, key, seq, count, acc)`` (``PANE_INT`` or ``PANE_FLOAT`` by the accumulator's
type): ``start`` is the window's start, ``seq`` numbers panes in creation order (``-1``
marks an empty row), ``count`` counts the records folded in. A record touches one row,
so one cache line, whatever the state size -- the cost that matters once the table no
longer fits in the CPU caches. The table size is a power of two and the caller keeps it
at most half full for every pane a call can create (``live + records * windows per
record``), so a kernel never runs out of room and never stops half-way through a batch.
Rows are never deleted one by one: firing copies the surviving rows into a fresh table
(``reinsert``).

``accumulate`` takes one batch as columns (event or processing time, key, value),
assigns each record to its windows (Flink's ``getWindowStartWithOffset``: tumbling is
sliding with ``slide == size``), skips windows that are late (``start + size - 1 <=
watermark`` when ``check_late``), creates panes it has not seen, and folds the value
in, record by record in arrival order so a float sum rounds exactly as the per-record
path does:

- ``SUM``: the first value, then ``acc + value``;
- ``MIN``/``MAX``: the first value, then replaced only by a strictly smaller/larger one
  (ties and NaN keep the earlier value, as ``b < a`` does in Python);
- ``COUNT``: only ``count``;
- ``MEAN``: ``0.0 + value + value ...`` in float64, and ``count``.

It reports the batch position of the record that created each new pane (their ``seq``
are ``state[SEQ]`` before the call, then +1 each, in that order) and whether each record
landed in at least one window (a record that did not is late).

``dense_accumulate`` is the same fold over dense arrays ``acc[window slot, key slot]`` and
``count[...]``, with ``order[w]`` listing window ``w``'s key slots in creation order: the
layout for the common case of a bounded key space, where a record's cell sits in a small
row that stays cached. It stops before a record whose windows find no free window slot
and is called again, after the caller added slots, from that record. ``int_key_slots``
maps int64 keys to dense key slots (a direct array for small non-negative keys, else an
open-addressing table).

``dense_aggregate`` folds several slots per pane for ``weir.columnar.Aggregates`` in dense
arrays; its other store, rows in creation order behind a hash index, is
``weir.operators.window.pane_log`` (see the sections below for the row layout both share).

Pure: no I/O, no clock. Every kernel uses ``cache=True``; ``tests/property`` holds
``accumulate`` and ``dense_accumulate`` to their twin ``accumulate_reference``,
``int_key_slots`` to ``int_key_slots_reference``, ``dense_aggregate`` and
``pane_log``'s kernels to ``aggregate_reference`` and ``hash_aggregate_fire_reference``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from weir.state import unforked

__all__ = [
    "COUNT",
    "FIRES",
    "FIRST",
    "HELD",
    "HELD_ALONE",
    "HELD_STOP",
    "LAST",
    "LIVE",
    "MAX",
    "MEAN",
    "MIN",
    "MIN_FIRED",
    "MIN_START",
    "NEW",
    "NO_START",
    "OPS",
    "PANE_FLOAT",
    "PANE_INT",
    "ROW_COUNT",
    "ROW_FIRED",
    "ROW_KEY",
    "ROW_SEQ",
    "ROW_SLOTS",
    "ROW_START",
    "SEQ",
    "SLOT_OPS",
    "STOP",
    "SUM",
    "accumulate",
    "accumulate_reference",
    "aggregate_reference",
    "dense_accumulate",
    "dense_aggregate",
    "dense_aggregate_collect",
    "dense_collect",
    "empty_table",
    "fold_reference",
    "hash_aggregate_fire_reference",
    "insert_panes",
    "insert_string_keys",
    "int_key_slots",
    "int_key_slots_reference",
    "local_aggregate",
    "local_aggregate_reference",
    "rebuild_int_key_table",
    "reinsert",
    "running_aggregate",
    "string_key_slots",
    "string_key_slots_reference",
    "window_starts_reference",
]

SUM, MIN, MAX, COUNT, MEAN = 0, 1, 2, 3, 4
OPS = {"sum": SUM, "min": MIN, "max": MAX, "count": COUNT, "mean": MEAN}

#: Slots of the kernels' int64 ``state`` array: live panes, their smallest window start,
#: panes the last call created, the next pane sequence number.
LIVE, MIN_START, NEW, SEQ = 0, 1, 2, 3

#: Larger than any window start: the ``MIN_START`` of an empty table.
NO_START = (1 << 63) - 1

PANE_INT = np.dtype([("start", "<i8"), ("key", "<i8"), ("seq", "<i8"), ("count", "<i8"), ("acc", "<i8")])
PANE_FLOAT = np.dtype([("start", "<i8"), ("key", "<i8"), ("seq", "<i8"), ("count", "<i8"), ("acc", "<f8")])

Int64Array = npt.NDArray[np.int64]

# uint64 constants: numba types uint64 <op> int64 as float64, so every operand of the
# unsigned arithmetic below is a uint64 itself.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_ONE = np.uint64(1)


def empty_table(size: int, dtype: np.dtype[Any]) -> np.ndarray:
    """A pane table of ``size`` (a power of two) empty rows, kept from checkpoint children
    (``weir.state.unforked``)."""
    table = unforked.zeros(size, dtype)
    table["seq"] = -1
    return table


@njit(cache=True)
def _mix(x: Any) -> Any:
    """splitmix64's finalizer: a well-spread uint64 from any uint64."""
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    return x ^ (x >> _S31)


@njit(cache=True)
def _slot(table: Any, start: Any, key: Any) -> Any:
    """The row of pane (start, key), or the empty row where it would go."""
    mask = np.uint64(table.shape[0] - 1)
    h = np.int64(_mix(np.uint64(start) * _GOLDEN ^ np.uint64(key)) & mask)
    while True:
        row = table[h]
        if row.seq < 0 or (row.start == start and row.key == key):
            return h
        h = np.int64((np.uint64(h) + _ONE) & mask)


@njit(cache=True)
def accumulate(
    times: Int64Array,
    keys: Int64Array,
    values: Any,
    op: int,
    size: int,
    slide: int,
    offset: int,
    watermark: int,
    check_late: bool,
    table: Any,
    state: Int64Array,
    new_positions: Int64Array,
    landed: npt.NDArray[np.bool_],
) -> None:
    """Fold one batch into the panes (see the module docstring); ``values`` is unused for COUNT."""
    n = times.shape[0]
    live = state[LIVE]
    min_start = state[MIN_START]
    seq = state[SEQ]
    fresh = 0
    # the last start computed: records of one window come in runs, so skip the modulo then
    cached_t0 = np.int64(1)
    cached_t1 = np.int64(0)  # an empty range [cached_t0, cached_t1)
    cached_start = np.int64(0)
    for i in range(n):
        t = times[i]
        k = keys[i]
        if cached_t0 <= t < cached_t1:
            start = cached_start
        else:
            start = t - (t - offset) % slide
            cached_start = start
            cached_t0 = start
            cached_t1 = start + slide
        hit = False
        while start > t - size:
            if check_late and start + size - 1 <= watermark:
                break  # this window is late, and so is every earlier one of this record
            hit = True
            row = table[_slot(table, start, k)]
            if row.seq < 0:
                row.start = start
                row.key = k
                row.seq = seq
                row.count = 0
                row.acc = 0
                seq += 1
                live += 1
                new_positions[fresh] = i
                fresh += 1
                if start < min_start:
                    min_start = start
            c = row.count
            if op == SUM:
                if c == 0:
                    row.acc = values[i]
                else:
                    row.acc = row.acc + values[i]
            elif op == MIN:
                if c == 0 or values[i] < row.acc:
                    row.acc = values[i]
            elif op == MAX:
                if c == 0 or values[i] > row.acc:
                    row.acc = values[i]
            elif op == MEAN:
                row.acc = row.acc + values[i]
            row.count = c + 1
            start -= slide
        landed[i] = hit
    state[LIVE] = live
    state[MIN_START] = min_start
    state[NEW] = fresh
    state[SEQ] = seq


@njit(cache=True)
def reinsert(old: Any, rows: Int64Array, table: Any) -> None:
    """Copy rows ``rows`` of table ``old`` into the empty ``table`` (after firing or to resize)."""
    for j in range(rows.shape[0]):
        src = old[rows[j]]
        dst = table[_slot(table, src.start, src.key)]
        dst.start = src.start
        dst.key = src.key
        dst.seq = src.seq
        dst.count = src.count
        dst.acc = src.acc


@njit(cache=True)
def insert_panes(
    table: Any,
    starts: Int64Array,
    keys: Int64Array,
    counts: Int64Array,
    accs: Any,
    state: Int64Array,
    seqs: Int64Array,
) -> None:
    """Add panes given as columns (restoring), in order; ``seqs[j]`` is the sequence number
    pane ``j`` got, or -1 if it existed already (then it is left as it was)."""
    for j in range(starts.shape[0]):
        row = table[_slot(table, starts[j], keys[j])]
        seqs[j] = -1
        if row.seq >= 0:
            continue
        seqs[j] = state[SEQ]
        row.start = starts[j]
        row.key = keys[j]
        row.seq = state[SEQ]
        row.count = counts[j]
        row.acc = accs[j]
        state[SEQ] += 1
        state[LIVE] += 1
        if starts[j] < state[MIN_START]:
            state[MIN_START] = starts[j]


# ----------------------------------------------------------------------------- dense panes

#: Slots of ``dense_accumulate``'s ``state``: where it stopped (``len(times)`` when done).
STOP = 4


@njit(cache=True)
def _window_slot(start: Any, win_start: Any, win_live: Any, create: bool) -> Any:
    """The slot of the open window starting at ``start``; with ``create`` a free slot is opened
    for it. -1: none (no free slot when creating)."""
    free = -1
    for w in range(win_start.shape[0]):
        if win_live[w]:
            if win_start[w] == start:
                return w
        elif free < 0:
            free = w
    if create and free >= 0:
        win_live[free] = True
        win_start[free] = start
    return free if create else -1


@njit(cache=True)
def dense_accumulate(
    times: Int64Array,
    slots: Any,
    values: Any,
    op: int,
    size: int,
    slide: int,
    offset: int,
    watermark: int,
    check_late: bool,
    win_start: Int64Array,
    win_live: npt.NDArray[np.bool_],
    win_count: Int64Array,
    acc: Any,
    count: Any,
    order: Any,
    state: Int64Array,
    new_positions: Int64Array,
    new_windows: Int64Array,
    landed: npt.NDArray[np.bool_],
    begin: int,
) -> None:
    """``accumulate`` over dense arrays: ``acc``/``count`` are indexed ``[window slot, key slot]``,
    ``order[w, :win_count[w]]`` lists window ``w``'s key slots in creation order. A record
    whose windows cannot all get a slot (every window slot is open) stops the call before
    it is touched: ``state[STOP]`` is its position, and the caller adds window slots and
    calls again from there (``begin``). ``state[NEW]`` counts new panes over the calls."""
    if slide == size:
        _dense_tumbling(
            times, slots, values, op, size, offset, watermark, check_late, win_start, win_live,
            win_count, acc, count, order, state, new_positions, new_windows, landed, begin,
        )  # fmt: skip
        return
    n = times.shape[0]
    min_start = state[MIN_START]
    fresh = state[NEW]
    run_t0 = np.int64(1)
    run_t1 = np.int64(0)  # the current run of records with one last start: [run_t0, run_t1)
    run_start = np.int64(0)
    per_record = (size + slide - 1) // slide
    ws = np.full(per_record + 1, -1, np.int64)  # window slot of the run's j-th window; -2: late
    for i in range(begin, n):
        t = times[i]
        k = slots[i]
        if not (run_t0 <= t < run_t1):
            run_start = t - (t - offset) % slide
            run_t0 = run_start
            run_t1 = run_start + slide
            ws[:] = -1
        # every window of this record gets its slot first, so that a stop leaves it untouched
        start = run_start
        j = 0
        while start > t - size:
            if ws[j] == -1:
                if check_late and start + size - 1 <= watermark:
                    ws[j] = -2
                else:
                    w = _window_slot(start, win_start, win_live, True)
                    if w < 0:
                        state[STOP] = i
                        state[MIN_START] = min_start
                        state[NEW] = fresh
                        return
                    ws[j] = w
                    if start < min_start:
                        min_start = start
            start -= slide
            j += 1
        hit = False
        start = run_start
        j = 0
        while start > t - size:
            w = ws[j]
            if w == -2:
                break  # this window is late, and so is every earlier one of the record
            hit = True
            c = count[w, k]
            if c == 0:
                order[w, win_count[w]] = k
                win_count[w] += 1
                new_positions[fresh] = i
                new_windows[fresh] = w
                fresh += 1
                if op == MEAN:
                    acc[w, k] = 0.0
            if op == SUM:
                if c == 0:
                    acc[w, k] = values[i]
                else:
                    acc[w, k] = acc[w, k] + values[i]
            elif op == MIN:
                if c == 0 or values[i] < acc[w, k]:
                    acc[w, k] = values[i]
            elif op == MAX:
                if c == 0 or values[i] > acc[w, k]:
                    acc[w, k] = values[i]
            elif op == MEAN:
                acc[w, k] = acc[w, k] + values[i]
            count[w, k] = c + 1
            start -= slide
            j += 1
        landed[i] = hit
    state[STOP] = n
    state[MIN_START] = min_start
    state[NEW] = fresh


@njit(cache=True)
def _dense_tumbling(
    times: Int64Array,
    slots: Any,
    values: Any,
    op: int,
    size: int,
    offset: int,
    watermark: int,
    check_late: bool,
    win_start: Int64Array,
    win_live: npt.NDArray[np.bool_],
    win_count: Int64Array,
    acc: Any,
    count: Any,
    order: Any,
    state: Int64Array,
    new_positions: Int64Array,
    new_windows: Int64Array,
    landed: npt.NDArray[np.bool_],
    begin: int,
) -> None:
    """``dense_accumulate`` for tumbling windows (one window per record): a run of records in
    one window looks its slot up once, and the loop body is a load and a store per record
    (half the time per record of the general loop).

    The fold of a record into its pane is written out here and in ``dense_accumulate`` on
    purpose: as a shared njit helper it measured 60 ns per record (a call per record, its
    arrays passed each time), and inlined with ``inline="always"`` 15 ns, against 4.7 ns
    written out. Keep the two copies alike; the property tests hold both to the reference."""
    n = times.shape[0]
    min_start = state[MIN_START]
    fresh = state[NEW]
    run_t0 = np.int64(1)
    run_t1 = np.int64(0)  # the current run of records in one window: [run_t0, run_t1)
    w = -2  # the run's window slot; -2: the window is late
    for i in range(begin, n):
        t = times[i]
        if not (run_t0 <= t < run_t1):
            start = t - (t - offset) % size
            run_t0 = start
            run_t1 = start + size
            if check_late and start + size - 1 <= watermark:
                w = -2
            else:
                w = _window_slot(start, win_start, win_live, True)
                if w < 0:
                    state[STOP] = i
                    state[MIN_START] = min_start
                    state[NEW] = fresh
                    return
                if start < min_start:
                    min_start = start
        if w == -2:
            landed[i] = False
            continue
        k = slots[i]
        c = count[w, k]
        if c == 0:
            order[w, win_count[w]] = k
            win_count[w] += 1
            new_positions[fresh] = i
            new_windows[fresh] = w
            fresh += 1
            if op == MEAN:
                acc[w, k] = 0.0
        if op == SUM:
            if c == 0:
                acc[w, k] = values[i]
            else:
                acc[w, k] = acc[w, k] + values[i]
        elif op == MIN:
            if c == 0 or values[i] < acc[w, k]:
                acc[w, k] = values[i]
        elif op == MAX:
            if c == 0 or values[i] > acc[w, k]:
                acc[w, k] = values[i]
        elif op == MEAN:
            acc[w, k] = acc[w, k] + values[i]
        count[w, k] = c + 1
        landed[i] = True
    state[STOP] = n
    state[MIN_START] = min_start
    state[NEW] = fresh


@njit(cache=True)
def dense_collect(
    windows: Int64Array,
    win_start: Int64Array,
    win_live: npt.NDArray[np.bool_],
    win_count: Int64Array,
    order: Any,
    slot_keys: Int64Array,
    int_keys: bool,
    count: Any,
    acc: Any,
    clear: bool,
    starts: Int64Array,
    keys: Int64Array,
    counts: Int64Array,
    accs: Any,
) -> None:
    """The panes of window slots ``windows`` as columns, window by window and within a window
    in creation order; the output arrays hold ``win_count[windows].sum()`` rows. A pane key
    is ``slot_keys[slot]`` with ``int_keys``, else the slot. ``clear`` empties the windows
    (their counts back to 0, their slots free)."""
    row = 0
    for j in range(windows.shape[0]):
        w = windows[j]
        start = win_start[w]
        for m in range(win_count[w]):
            k = order[w, m]
            starts[row] = start
            keys[row] = slot_keys[k] if int_keys else k
            counts[row] = count[w, k]
            accs[row] = acc[w, k]
            if clear:
                count[w, k] = 0
            row += 1
        if clear:
            win_count[w] = 0
            win_live[w] = False


# ----------------------------------------------------------------------------- int key slots


@njit(cache=True)
def _key_hash(key: Any) -> Any:
    return _mix(np.uint64(key) + _GOLDEN)


@njit(cache=True)
def int_key_slots(
    keys: Int64Array,
    direct: Any,
    table_keys: Int64Array,
    table_slots: Any,
    slot_keys: Int64Array,
    state: Int64Array,
) -> Any:
    """The key slot of every int64 key; a key not seen before gets slot ``state[0]`` (then +1).

    A key in ``0 .. len(direct) - 1`` is looked up in ``direct`` (one load: ids from a dense
    range are the common keys); any other in the hash table. ``slot_keys[slot]`` is the key
    of each slot. The caller keeps the table at most half full after the call and
    ``slot_keys`` long enough for ``state[0] + len(keys)`` slots. ``state[1]`` becomes the
    largest key of the call (the caller widens ``direct`` for the next call from it).
    """
    n = keys.shape[0]
    out = np.empty(n, np.int32)
    mask = np.uint64(table_slots.shape[0] - 1)
    limit = direct.shape[0]
    slots = state[0]
    top = np.int64(-(1 << 63))
    for i in range(n):
        key = keys[i]
        if key > top:
            top = key
        if 0 <= key < limit:
            slot = direct[key]
            if slot < 0:
                slot = slots
                slots += 1
                direct[key] = slot
                slot_keys[slot] = key
            out[i] = slot
            continue
        h = np.int64(_key_hash(key) & mask)
        while True:
            slot = table_slots[h]
            if slot < 0:
                slot = slots
                slots += 1
                table_slots[h] = slot
                table_keys[h] = key
                slot_keys[slot] = key
                break
            if table_keys[h] == key:
                break
            h = np.int64((np.uint64(h) + _ONE) & mask)
        out[i] = slot
    state[0] = slots
    state[1] = top
    return out


@njit(cache=True)
def rebuild_int_key_table(
    slot_keys: Int64Array, slots: int, table_keys: Int64Array, table_slots: Any
) -> None:
    """Fill an empty key table (slots all ``-1``) with slots ``0 .. slots - 1``."""
    mask = np.uint64(table_slots.shape[0] - 1)
    for slot in range(slots):
        key = slot_keys[slot]
        h = np.int64(_key_hash(key) & mask)
        while table_slots[h] >= 0:
            h = np.int64((np.uint64(h) + _ONE) & mask)
        table_slots[h] = slot
        table_keys[h] = key


@njit(cache=True)
def string_key_slots(
    data: Any,
    starts: Int64Array,
    ends: Int64Array,
    hashes: Any,
    table_slots: Int64Array,
    table_hashes: Any,
    key_data: Any,
    key_starts: Int64Array,
    key_ends: Int64Array,
) -> Int64Array:
    """The slot of every string ``data[starts[i]:ends[i]]`` the table holds, -1 for the others.

    ``hashes`` are the strings' hashes. The table is open addressing with linear probing:
    ``table_slots[h]`` is a slot (-1: empty), ``table_hashes[h]`` its key's hash, and the key's
    bytes are ``key_data[key_starts[slot]:key_ends[slot]]``. The caller inserts the missing
    keys (``insert_string_keys``) once it has given them slots.
    """
    n = starts.shape[0]
    out = np.empty(n, np.int64)
    mask = np.uint64(table_slots.shape[0] - 1)
    for i in range(n):
        h = hashes[i]
        s = starts[i]
        size = ends[i] - s
        pos = np.int64(_key_hash(h) & mask)
        while True:
            slot = table_slots[pos]
            if slot < 0:
                out[i] = -1
                break
            if table_hashes[pos] == h:
                k = key_starts[slot]
                if key_ends[slot] - k == size:
                    same = True
                    for j in range(size):
                        if key_data[k + j] != data[s + j]:
                            same = False
                            break
                    if same:
                        out[i] = slot
                        break
            pos = np.int64((np.uint64(pos) + _ONE) & mask)
    return out


@njit(cache=True)
def insert_string_keys(table_slots: Int64Array, table_hashes: Any, hashes: Any, slots: Int64Array) -> None:
    """Add keys the table does not hold yet: slot ``slots[i]`` with hash ``hashes[i]``
    (the caller keeps the table at most half full)."""
    mask = np.uint64(table_slots.shape[0] - 1)
    for i in range(slots.shape[0]):
        pos = np.int64(_key_hash(hashes[i]) & mask)
        while table_slots[pos] >= 0:
            pos = np.int64((np.uint64(pos) + _ONE) & mask)
        table_slots[pos] = slots[i]
        table_hashes[pos] = hashes[i]


def string_key_slots_reference(keys: list[bytes], table: dict[bytes, int]) -> list[int]:
    """Twin of ``string_key_slots``: the slot of every key ``table`` holds, -1 for the others."""
    return [table.get(key, -1) for key in keys]


def int_key_slots_reference(keys: list[int], slots: dict[int, int]) -> list[int]:
    """Twin of ``int_key_slots``: ``slots`` maps key -> slot and grows in first-seen order."""
    out = []
    for key in keys:
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = len(slots)
        out.append(slot)
    return out


def window_starts_reference(t: int, size: int, slide: int, offset: int) -> list[int]:
    """The starts of the windows holding time ``t``, latest first (Flink's sliding assigner)."""
    starts = []
    start = t - (t - offset) % slide
    while start > t - size:
        starts.append(start)
        start -= slide
    return starts


def accumulate_reference(
    times: list[int],
    keys: list[int],
    values: list[Any],
    op: int,
    size: int,
    slide: int,
    offset: int,
    watermark: int,
    check_late: bool,
    panes: dict[tuple[int, int], list[Any]],
) -> tuple[list[int], list[bool]]:
    """Twin of ``accumulate`` on a dict: ``panes`` maps (start, key) -> [seq, count, acc].

    Returns the positions of the records that created new panes and, per record,
    whether it landed in a window.
    """
    new_positions: list[int] = []
    landed: list[bool] = []
    for i, (t, k) in enumerate(zip(times, keys)):
        hit = False
        for start in window_starts_reference(t, size, slide, offset):
            if check_late and start + size - 1 <= watermark:
                break
            hit = True
            pane = panes.get((start, k))
            if pane is None:
                pane = panes[(start, k)] = [len(panes), 0, 0.0 if op == MEAN else 0]
                new_positions.append(i)
            c = pane[1]
            if op == SUM:
                pane[2] = values[i] if c == 0 else pane[2] + values[i]
            elif op == MIN:
                if c == 0 or values[i] < pane[2]:
                    pane[2] = values[i]
            elif op == MAX:
                if c == 0 or values[i] > pane[2]:
                    pane[2] = values[i]
            elif op == MEAN:
                pane[2] = pane[2] + values[i]
            pane[1] = c + 1
        landed.append(hit)
    return new_positions, landed


# ----------------------------------------------------------------------------- several aggregates
#
# ``weir.columnar.Aggregates``: a pane holds a count and one accumulator per aggregate of a field
# (a *slot*), int64 slots in ``iacc[..., j]`` and float64 slots in ``facc[..., j]``, each with its
# op (``SUM`` also for ``mean``, ``MIN``, ``MAX``, ``FIRST``, ``LAST``). A slot folds as the
# per-record ``Aggregates.add`` does: the first value, then ``acc + v`` / strict replacement /
# kept / replaced.

FIRST, LAST = 5, 6
#: the op of each kind of slot (``mean``'s slot is a sum)
SLOT_OPS = {"sum": SUM, "mean": SUM, "min": MIN, "max": MAX, "first": FIRST, "last": LAST}
#: Slot of ``dense_aggregate``'s ``state``: the rows it wrote to ``fire_*`` (late records).
FIRES = 5


@njit(cache=True)
def dense_aggregate(
    times: Int64Array,
    slots: Any,
    ivals: Any,
    fvals: Any,
    weights: Int64Array,
    iops: Int64Array,
    fops: Int64Array,
    size: int,
    slide: int,
    offset: int,
    watermark: int,
    lateness: int,
    check_late: bool,
    win_start: Int64Array,
    win_live: npt.NDArray[np.bool_],
    win_fired: npt.NDArray[np.bool_],
    win_count: Int64Array,
    count: Any,
    iacc: Any,
    facc: Any,
    order: Any,
    state: Int64Array,
    new_positions: Int64Array,
    new_windows: Int64Array,
    landed: npt.NDArray[np.bool_],
    fire_w: Int64Array,
    fire_k: Int64Array,
    fire_count: Int64Array,
    fire_iacc: Any,
    fire_facc: Any,
    begin: int,
) -> None:
    """``dense_accumulate`` for several slots at once (``ivals[i, j]``/``fvals[i, j]``: record
    ``i``'s value for slot ``j``) with allowed lateness: a window is late once
    ``max_timestamp + lateness <= watermark`` (``check_late``); a record that lands in a window
    whose ``max_timestamp`` is at or behind the watermark fires it again: the pane's count and
    accumulators after the record go to row ``state[FIRES]`` of ``fire_*`` (then +1), and the
    window is marked fired (its on-time firing is over). Stops and resumes as
    ``dense_accumulate`` when every window slot is open. ``weights``: empty, each row is one record; else row ``i`` is a
    partial aggregate of ``weights[i]`` records (``local_aggregate``), its values the
    partial accumulators, which fold in with the same ops."""
    n = times.shape[0]
    mi = iops.shape[0]
    mf = fops.shape[0]
    weighted = weights.shape[0] > 0
    min_start = state[MIN_START]
    fresh = state[NEW]
    fires = state[FIRES]
    run_t0 = np.int64(1)
    run_t1 = np.int64(0)  # the current run of records with one last start: [run_t0, run_t1)
    run_start = np.int64(0)
    per_record = (size + slide - 1) // slide
    ws = np.full(per_record + 1, -1, np.int64)  # window slot of the run's j-th window; -2: late
    for i in range(begin, n):
        t = times[i]
        k = slots[i]
        if not (run_t0 <= t < run_t1):
            run_start = t - (t - offset) % slide
            run_t0 = run_start
            run_t1 = run_start + slide
            ws[:] = -1
        start = run_start
        j = 0
        while start > t - size:
            if ws[j] == -1:
                if check_late and start + size - 1 + lateness <= watermark:
                    ws[j] = -2
                else:
                    w = _window_slot(start, win_start, win_live, True)
                    if w < 0:
                        state[STOP] = i
                        state[MIN_START] = min_start
                        state[NEW] = fresh
                        state[FIRES] = fires
                        return
                    ws[j] = w
                    if check_late and start + size - 1 <= watermark:
                        win_fired[w] = True
                    if start < min_start:
                        min_start = start
            start -= slide
            j += 1
        hit = False
        start = run_start
        j = 0
        while start > t - size:
            w = ws[j]
            if w == -2:
                break  # this window is late, and so is every earlier one of the record
            hit = True
            c = count[w, k]
            if c == 0:
                order[w, win_count[w]] = k
                win_count[w] += 1
                new_positions[fresh] = i
                new_windows[fresh] = w
                fresh += 1
            for s in range(mi):
                op = iops[s]
                v = ivals[i, s]
                if c == 0 or op == LAST:
                    iacc[w, k, s] = v
                elif op == SUM:
                    iacc[w, k, s] = iacc[w, k, s] + v
                elif (op == MIN and v < iacc[w, k, s]) or (op == MAX and v > iacc[w, k, s]):
                    iacc[w, k, s] = v
            for s in range(mf):
                op = fops[s]
                fv = fvals[i, s]
                if c == 0 or op == LAST:
                    facc[w, k, s] = fv
                elif op == SUM:
                    facc[w, k, s] = facc[w, k, s] + fv
                elif (op == MIN and fv < facc[w, k, s]) or (op == MAX and fv > facc[w, k, s]):
                    facc[w, k, s] = fv
            c += weights[i] if weighted else 1
            count[w, k] = c
            if check_late and start + size - 1 <= watermark:  # fired already: fire again
                fire_w[fires] = w
                fire_k[fires] = k
                fire_count[fires] = c
                for s in range(mi):
                    fire_iacc[fires, s] = iacc[w, k, s]
                for s in range(mf):
                    fire_facc[fires, s] = facc[w, k, s]
                fires += 1
            start -= slide
            j += 1
        landed[i] = hit
    state[STOP] = n
    state[MIN_START] = min_start
    state[NEW] = fresh
    state[FIRES] = fires


@njit(cache=True)
def dense_aggregate_collect(
    windows: Int64Array,
    clear: npt.NDArray[np.bool_],
    win_start: Int64Array,
    win_live: npt.NDArray[np.bool_],
    win_fired: npt.NDArray[np.bool_],
    win_count: Int64Array,
    order: Any,
    slot_keys: Int64Array,
    int_keys: bool,
    count: Any,
    iacc: Any,
    facc: Any,
    starts: Int64Array,
    keys: Int64Array,
    counts: Int64Array,
    iaccs: Any,
    faccs: Any,
    fired: npt.NDArray[np.bool_],
) -> None:
    """``dense_collect`` for several slots: the panes of window slots ``windows`` as rows, window
    by window in creation order; window ``windows[j]`` is emptied when ``clear[j]``."""
    row = 0
    mi = iacc.shape[2]
    mf = facc.shape[2]
    for j in range(windows.shape[0]):
        w = windows[j]
        start = win_start[w]
        for m in range(win_count[w]):
            k = order[w, m]
            starts[row] = start
            keys[row] = slot_keys[k] if int_keys else k
            counts[row] = count[w, k]
            fired[row] = win_fired[w]
            for s in range(mi):
                iaccs[row, s] = iacc[w, k, s]
            for s in range(mf):
                faccs[row, s] = facc[w, k, s]
            if clear[j]:
                count[w, k] = 0
            row += 1
        if clear[j]:
            win_count[w] = 0
            win_live[w] = False
            win_fired[w] = False


@njit(cache=True)
def running_aggregate(
    slots: Any,
    ivals: Any,
    fvals: Any,
    iops: Int64Array,
    fops: Int64Array,
    count: Int64Array,
    iacc: Any,
    facc: Any,
    out_count: Int64Array,
    out_i: Any,
    out_f: Any,
) -> None:
    """``RunningAggregates``: fold record ``i`` into its key slot's accumulators (arrival order)
    and write the key's count and accumulators after it into row ``i`` of ``out_*``."""
    mi = iops.shape[0]
    mf = fops.shape[0]
    for i in range(slots.shape[0]):
        k = slots[i]
        c = count[k]
        for s in range(mi):
            op = iops[s]
            v = ivals[i, s]
            if c == 0 or op == LAST:
                iacc[k, s] = v
            elif op == SUM:
                iacc[k, s] = iacc[k, s] + v
            elif (op == MIN and v < iacc[k, s]) or (op == MAX and v > iacc[k, s]):
                iacc[k, s] = v
            out_i[i, s] = iacc[k, s]
        for s in range(mf):
            op = fops[s]
            fv = fvals[i, s]
            if c == 0 or op == LAST:
                facc[k, s] = fv
            elif op == SUM:
                facc[k, s] = facc[k, s] + fv
            elif (op == MIN and fv < facc[k, s]) or (op == MAX and fv > facc[k, s]):
                facc[k, s] = fv
            out_f[i, s] = facc[k, s]
        count[k] = c + 1
        out_count[i] = c + 1


def fold_reference(op: int, accumulator: Any, count: int, value: Any) -> Any:
    """Twin of one slot's fold in ``dense_aggregate`` and ``running_aggregate``."""
    if count == 0 or op == LAST:
        return value
    if op == SUM:
        return accumulator + value
    if op == MIN:
        return value if value < accumulator else accumulator
    if op == MAX:
        return value if value > accumulator else accumulator
    return accumulator  # FIRST


def aggregate_reference(
    times: list[int],
    keys: list[int],
    values: list[list[Any]],
    ops: list[int],
    size: int,
    slide: int,
    offset: int,
    watermark: int,
    lateness: int,
    check_late: bool,
    panes: dict[tuple[int, int], list[Any]],
) -> tuple[list[int], list[bool], list[tuple[int, int, int, list[Any]]]]:
    """Twin of ``dense_aggregate`` and ``pane_log.log_aggregate`` on a dict: ``panes`` maps (start,
    key) -> [seq, count, accs] (``values[i]``: record ``i``'s value per slot). Returns the positions of the records that
    created panes, per record whether it landed in a window, and the rows fired by records
    in windows at or behind the watermark: (start, key, count, accumulators)."""
    new_positions: list[int] = []
    landed: list[bool] = []
    fires: list[tuple[int, int, int, list[Any]]] = []
    for i, (t, k) in enumerate(zip(times, keys)):
        hit = False
        for start in window_starts_reference(t, size, slide, offset):
            if check_late and start + size - 1 + lateness <= watermark:
                break
            hit = True
            pane = panes.get((start, k))
            if pane is None:
                pane = panes[(start, k)] = [len(panes), 0, [None] * len(ops)]
                new_positions.append(i)
            c = pane[1]
            pane[2] = [fold_reference(op, a, c, v) for op, a, v in zip(ops, pane[2], values[i])]
            pane[1] = c + 1
            if check_late and start + size - 1 <= watermark:
                fires.append((start, k, c + 1, list(pane[2])))
        landed.append(hit)
    return new_positions, landed, fires


# ----------------------------------------------------------------------------- several aggregates, hashed
#
# The rows of ``Aggregates`` panes once they outgrow the dense arrays (``pane_log``): an int64
# array ``rows[row, column]`` whose columns are the pane's window start, key, creation seq (-1:
# a dead row), count, ``fired`` flag, then its int64 slots and its float64 slots (read through a
# float64 view of the same memory). One compiled kernel serves every mix of slots. ``fired``
# marks a pane whose window fired already and that waits for late records until its cleanup
# time (allowed lateness).

ROW_START, ROW_KEY, ROW_SEQ, ROW_COUNT, ROW_FIRED, ROW_SLOTS = 0, 1, 2, 3, 4, 5
#: Slot of the pane log's ``state`` (``LIVE``, ``MIN_START``, ``NEW``, ``SEQ``, this,
#: ``FIRES``): the smallest window start of a fired pane; ``MIN_START`` is then the smallest of
#: a pane that has not fired (or may have: it only errs low).
MIN_FIRED = 4


def hash_aggregate_fire_reference(
    panes: dict[tuple[int, int], list[Any]], size: int, lateness: int, until: int
) -> list[tuple[int, int]]:
    """Twin of ``pane_log.log_fire`` (with its firing order) on a dict ``(start, key) ->
    [seq, count, fired, ...]``: the due panes in firing order (by start, then seq); marks
    them fired and removes the panes past their cleanup time."""
    due = sorted(
        (pane for pane, v in panes.items() if not v[2] and pane[0] + size - 1 <= until),
        key=lambda pane: (pane[0], panes[pane][0]),
    )
    for pane in due:
        panes[pane][2] = True
    for pane in [p for p in panes if p[0] + size - 1 + lateness <= until]:
        del panes[pane]
    return due


# ----------------------------------------------------------------------------- two-phase aggregation
#
# ``weir.operators.window.two_phase``: before the shuffle, records that share a key and a slice of
# event time (``slide`` ms, aligned as the windows are) fold into one held partial row, which the
# window folds in with ``weights`` (its record count).

#: Slots of ``local_aggregate``'s ``state``: held rows, where the call stopped, rows of one record
#: that were behind the watermark.
HELD, HELD_STOP, HELD_ALONE = 0, 1, 2


@njit(cache=True, inline="always")
def _folded(op: int, acc: Any, v: Any) -> Any:
    """A slot's accumulator after one more value (not the first): ``acc + v``, the strictly
    smaller/larger, kept (``FIRST``) or replaced (``LAST``)."""
    if op == LAST or (op == MIN and v < acc) or (op == MAX and v > acc):
        return v
    if op == SUM:
        return acc + v
    return acc


@njit(cache=True)
def local_aggregate(
    times: Int64Array,
    keys: Int64Array,
    ivals: Any,
    fvals: Any,
    iops: Int64Array,
    fops: Int64Array,
    slide: int,
    offset: int,
    watermark: int,
    begin: int,
    table: Int64Array,
    held_key: Int64Array,
    held_slice: Int64Array,
    held_time: Int64Array,
    held_count: Int64Array,
    held_iacc: Any,
    held_facc: Any,
    state: Int64Array,
) -> None:
    """Fold records ``begin..`` into the held partial rows (``state[HELD]`` of them, in the
    order of their first records; ``table``: row + 1 per hash slot, 0 empty, at least twice
    the rows' capacity). A record whose slice ends at or behind ``watermark`` (one of its
    windows may have fired, or be late, downstream) gets a row of its own. Stops at the first
    record that needs a row when every row is taken (``state[HELD_STOP]``; else the batch's
    length)."""
    n = times.shape[0]
    mi = iops.shape[0]
    mf = fops.shape[0]
    capacity = held_key.shape[0]
    mask = np.uint64(table.shape[0] - 1)
    rows = state[HELD]
    alone = state[HELD_ALONE]
    piece = np.int64(0)
    piece_end = np.int64(0)  # the slice of the record before: [piece, piece_end), empty at first
    for i in range(begin, n):
        t = times[i]
        k = keys[i]
        if not (piece <= t < piece_end):
            piece = t - (t - offset) % slide
            piece_end = piece + slide
        r = -1
        h = np.int64(-1)
        if piece + slide - 1 > watermark:
            h = np.int64(_mix(np.uint64(piece) * _GOLDEN ^ np.uint64(k)) & mask)
            while table[h] != 0:
                found = table[h] - 1
                if held_slice[found] == piece and held_key[found] == k:
                    r = found
                    break
                h = (h + 1) & np.int64(mask)
        if r < 0:
            if rows == capacity:
                state[HELD] = rows
                state[HELD_STOP] = i
                state[HELD_ALONE] = alone
                return
            r = rows
            rows += 1
            if h >= 0:
                table[h] = r + 1
            else:
                alone += 1
            held_key[r] = k
            held_slice[r] = piece
            held_time[r] = t
            held_count[r] = 1
            for s in range(mi):
                held_iacc[r, s] = ivals[i, s]
            for s in range(mf):
                held_facc[r, s] = fvals[i, s]
            continue
        held_count[r] += 1
        for s in range(mi):
            held_iacc[r, s] = _folded(iops[s], held_iacc[r, s], ivals[i, s])
        for s in range(mf):
            held_facc[r, s] = _folded(fops[s], held_facc[r, s], fvals[i, s])
    state[HELD] = rows
    state[HELD_STOP] = n
    state[HELD_ALONE] = alone


def local_aggregate_reference(
    times: list[int],
    keys: list[int],
    rows: list[list[Any]],
    ops: list[int],
    slide: int,
    offset: int,
    watermark: int,
) -> list[tuple[int, int, int, int, list[Any]]]:
    """Twin of ``local_aggregate`` over one batch with room for every row: the partial rows
    ``(key, slice, first record's time, count, slot values)`` in the order of their first
    records; a record whose slice ends at or behind ``watermark`` is a row of its own."""
    out: list[tuple[int, int, int, int, list[Any]]] = []
    where: dict[tuple[int, int], int] = {}
    for t, k, values in zip(times, keys, rows):
        piece = t - (t - offset) % slide
        r = where.get((k, piece)) if piece + slide - 1 > watermark else None
        if r is None:
            if piece + slide - 1 > watermark:
                where[(k, piece)] = len(out)
            out.append((k, piece, t, 1, list(values)))
            continue
        key_, piece_, first, count, acc = out[r]
        for s, (op, v) in enumerate(zip(ops, values)):
            if op == LAST:
                acc[s] = v
            elif op == SUM:
                acc[s] = acc[s] + v
            elif (op == MIN and v < acc[s]) or (op == MAX and v > acc[s]):
                acc[s] = v
        out[r] = (key_, piece_, first, count + 1, acc)
    return out
