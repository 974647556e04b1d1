"""The panes of an ``Aggregates`` window in creation order, found through a small hash index.

Theory of operation
-------------------
Once an ``Aggregates`` window has too many keys and windows for dense arrays
(``aggregates._AggregatePanes.outgrows``), its panes live here. A pane is a row of one int64
array, ``rows``, laid out as ``kernels``' hash store rows are (window start, key, creation
seq, count, ``fired``, then the int64 slots and the float64 slots, read through ``frows``, a
float64 view of the same memory), kept in the order the panes were created, packed. A
separate open-addressing ``index`` of int64 entries (the top 32 bits of the pane's hash over
row + 1; 0 empty; linear probing; twice as many entries as ``rows`` has rows) finds a pane's
row, and a probe reads a row only when the hash's top bits match.

Why not one hash table of rows: a table at most half full sweeps, zeroes and rehashes twice
the rows it holds, and every access lands anywhere in it. At 10,000 keys and windows of
1,000 records a window task holds half a million to a million panes between two
watermarks; their table was 50-100 MB, past the CPU's caches, and growing it, sweeping it
at every firing and sorting the fired panes back into creation order were most of the
window's time. Here:

- a record probes the index (8 bytes an entry), then touches its pane's row, which for
  event time in order is among the last rows created, so cached; a first pass over the
  batch loads every record's home entry, loads that do not wait for one another, so the
  probes find the index's lines cached;
- a new pane is appended; growing copies the rows in one pass and rebuilds the index;
- firing reads the rows in order, so the panes it fires come out in creation order and
  only need a stable bucket sort by window (``by_window``) into firing order;
- firing reads only the blocks of rows that hold something to do: ``blocks`` keeps, per
  ``BLOCK`` rows, the earliest window start among its unfired panes and among its fired
  ones, so a block with no pane due and none past its cleanup time is skipped. Panes
  that the watermark holds back (a source split far ahead of the others, an idle input)
  then cost nothing per firing; without it every firing read every live row, and with two
  source splits 1,000 s of event time apart the firings read millions of rows each;
- a pane past its cleanup time is marked dead (seq -1) and stays in the index as a
  tombstone (probes run past it) until the next compaction (``compact``), which happens
  when the rows are full and at least half of them are dead, or when none is live.

- a checkpoint does not copy the rows at its barrier: it brings a mirror of them up to
  date (``mirror_rows``), each row packed narrowed at its own place, rewriting only the
  blocks written since that mirror's barrier. Every kernel that writes a row stamps its
  block with the log's ``EPOCH`` (``blocks``' ``WRITTEN``), and a barrier takes the epoch
  on. Held panes (a split far ahead of the others) are then written once, not at every
  barrier: at p = 2 in the shared query 0-5% of a log's old blocks change between two
  barriers. The checkpoint's asynchronous phase unpacks the mirror's live rows
  (``compact_mirror``) without the GIL.

Records never meet a dead pane's key again: a pane dies at its cleanup time, and a record
of that window is late by then and skipped before any probe (``check_late``); processing
time windows only take records for windows that have not fired.

The kernels are held to ``kernels.aggregate_reference`` and
``kernels.hash_aggregate_fire_reference`` by ``tests/property/test_aggregates_properties.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from weir.operators.window import kernels as wk
from weir.operators.window.kernels import (
    FIRES,
    LIVE,
    MIN_FIRED,
    MIN_START,
    NEW,
    NO_START,
    ROW_COUNT,
    ROW_FIRED,
    ROW_KEY,
    ROW_SEQ,
    ROW_SLOTS,
    ROW_START,
    SEQ,
)

Int64Array = npt.NDArray[np.int64]

#: Slots of the log's ``state`` past ``kernels``' (``LIVE``, ``MIN_START``, ``NEW``, ``SEQ``,
#: ``MIN_FIRED``, ``FIRES``): rows used (live and dead), and dead rows among them.
ROWS, DEAD = 6, 7
#: a slot the kernel writes what it touched to, so the loads are not optimised away
TOUCHED = 8
#: the epoch the kernels stamp on the blocks whose rows they write (``WRITTEN``); a
#: barrier's mirror (``mirror_rows``) takes what it holds to this epoch, and the next starts
EPOCH = 9
#: rows per block of the firing summary (``blocks``: a row per block, ``UNFIRED`` and
#: ``FIRED`` columns, and ``WRITTEN``, the epoch of the last write to one of its rows); a
#: block's ``UNFIRED`` at ``VISIT`` makes the next firing read it
BLOCK_SHIFT = 10
BLOCK = 1 << BLOCK_SHIFT
UNFIRED, FIRED, WRITTEN = 0, 1, 2
VISIT = -(1 << 63)

_GOLDEN = wk._GOLDEN


def log_state() -> np.ndarray:
    """The ``state`` of an empty log."""
    return np.array([0, NO_START, 0, 0, NO_START, 0, 0, 0, 0, 0], np.int64)


def log_blocks(capacity: int) -> np.ndarray:
    """The firing summary of ``capacity`` rows, none used: per block of ``BLOCK`` rows, the
    earliest window start of its unfired and of its fired live panes (``NO_START``: none).
    A block's value may be too early, never too late: an early one costs a firing a read of
    the block, which sets it right. Every block is written at epoch 0."""
    blocks = np.full(((capacity >> BLOCK_SHIFT) + 1, 3), NO_START, np.int64)
    blocks[:, WRITTEN] = 0
    return blocks


@njit(cache=True, inline="always")
def _hash(start: Any, key: Any) -> Any:
    return wk._mix(np.uint64(start) * _GOLDEN ^ np.uint64(key))


@njit(cache=True, inline="always")
def _entry(x: Any, r: Any) -> Any:
    """An index entry: the hash's top 32 bits over row + 1 (never 0)."""
    return np.int64((x >> np.uint64(32)) << np.uint64(32)) | (r + 1)


@njit(cache=True, inline="always")
def _find(index: Any, rows: Any, start: Any, key: Any) -> Any:
    """(index entry, row, entry to write) of live pane (start, key), or (the empty entry
    where it would go, -1, the entry to write there for row 0). An entry keeps the top of the
    pane's hash, so a probe reads a row only when the tops match."""
    mask = index.shape[0] - 1
    x = _hash(start, key)
    h = np.int64(x & np.uint64(mask))
    top = np.int64((x >> np.uint64(32)) << np.uint64(32))
    while True:
        e = index[h]
        if e == 0:
            return h, -1, top
        if (e & np.int64(-4294967296)) == top:
            r = (e & np.int64(0xFFFFFFFF)) - 1
            if rows[r, ROW_SEQ] >= 0 and rows[r, ROW_START] == start and rows[r, ROW_KEY] == key:
                return h, r, top
        h = (h + 1) & mask


@njit(cache=True)
def rebuild_index(rows: Any, n_rows: int, index: Any, blocks: Any) -> None:
    """``index`` and ``blocks``' summaries anew for the live rows of ``rows[:n_rows]``."""
    index[:] = 0
    blocks[:, UNFIRED] = NO_START
    blocks[:, FIRED] = NO_START
    mask = index.shape[0] - 1
    for r in range(n_rows):
        if rows[r, ROW_SEQ] < 0:
            continue
        b = r >> BLOCK_SHIFT
        if rows[r, ROW_FIRED] != 0:
            blocks[b, FIRED] = min(blocks[b, FIRED], rows[r, ROW_START])
        else:
            blocks[b, UNFIRED] = min(blocks[b, UNFIRED], rows[r, ROW_START])
        x = _hash(rows[r, ROW_START], rows[r, ROW_KEY])
        h = np.int64(x & np.uint64(mask))
        while index[h] != 0:
            h = (h + 1) & mask
        index[h] = _entry(x, r)


@njit(cache=True)
def live_bounds(rows: Any, n_rows: int, columns: Int64Array, low: Int64Array, high: Int64Array) -> int:
    """The smallest and largest value of each of ``columns`` over the live rows of
    ``rows[:n_rows]`` into ``low`` and ``high``; returns the number of live rows."""
    m = 0
    for r in range(n_rows):
        if rows[r, ROW_SEQ] < 0:
            continue
        for j in range(columns.shape[0]):
            v = rows[r, columns[j]]
            if m == 0 or v < low[j]:
                low[j] = v
            if m == 0 or v > high[j]:
                high[j] = v
        m += 1
    return m


@njit(cache=True)
def first_live(rows: Any, n_rows: int) -> int:
    """The first live row of ``rows[:n_rows]``, or -1."""
    for r in range(n_rows):
        if rows[r, ROW_SEQ] >= 0:
            return r
    return -1


def mirror_words(widths: Int64Array) -> tuple[Int64Array, Int64Array, int]:
    """Where a mirror (``mirror_rows``) keeps a row's values of these widths (bytes): the
    row's status in the low byte of its first uint64 word, then each value in the next
    bits of that word, or of a new one where it would not fit. Returns each value's word
    (within the row) and bit shift, and the words a row takes."""
    word_of = np.zeros(len(widths), np.int64)
    shift_of = np.zeros(len(widths), np.int64)
    word, bit = 0, 8
    for j, w in enumerate(widths.tolist()):
        if bit + 8 * w > 64:
            word, bit = word + 1, 0
        word_of[j], shift_of[j] = word, bit
        bit += 8 * w
    return word_of, shift_of, word + 1


@njit(cache=True)
def mirror_rows(
    rows: Any, n_rows: int, blocks: Any, since: int, columns: Int64Array, bases: Int64Array,
    steps: Int64Array, widths: Int64Array, word_of: Int64Array, shift_of: Int64Array, words: int,
    out: Any,
) -> int:  # fmt: skip
    """Bring a mirror of ``rows[:n_rows]`` up to date: every row of each block written after
    epoch ``since`` (-1: every block) goes to the same place in ``out`` (uint64): row ``r``
    in words ``r * words`` on, its status (0 dead, 1 live, 2 live and fired) in the low byte
    and, for a live row, column ``columns[j]`` less ``bases[j]`` and divided by
    ``steps[j]``, an unsigned integer of ``widths[j]`` bytes, at bit ``shift_of[j]`` of the
    row's word ``word_of[j]`` (``mirror_words``). Returns the rows written, or -1 as soon
    as a value is off its step or too wide for its width (the caller mirrors every block
    again, with bounds). The arithmetic wraps, so eight bytes hold any value."""
    written = 0
    for b in range((n_rows + BLOCK - 1) >> BLOCK_SHIFT):
        if blocks[b, WRITTEN] <= since:
            continue
        for r in range(b << BLOCK_SHIFT, min(n_rows, (b + 1) << BLOCK_SHIFT)):
            written += 1
            at = r * words
            if rows[r, ROW_SEQ] < 0:
                out[at] = 0
                continue
            for k in range(1, words):
                out[at + k] = 0
            out[at] = np.uint64(2 if rows[r, ROW_FIRED] != 0 else 1)
            for j in range(columns.shape[0]):
                v = np.uint64(rows[r, columns[j]]) - np.uint64(bases[j])
                if steps[j] > 1:
                    if v % np.uint64(steps[j]) != 0:
                        return -1
                    v = v // np.uint64(steps[j])
                if widths[j] < 8 and (v >> np.uint64(8 * widths[j])) != 0:
                    return -1
                out[at + word_of[j]] |= v << np.uint64(shift_of[j])
    return written


@njit(cache=True, nogil=True)
def compact_mirror(
    src: Any, n_rows: int, widths: Int64Array, word_of: Int64Array, shift_of: Int64Array,
    words: int, out: Any, out_starts: Int64Array, fired_at: int,
) -> int:  # fmt: skip
    """The live rows of a mirror (``mirror_rows``) of ``n_rows`` rows, in order, into
    ``out`` (uint8) column by column: column ``j`` from byte ``out_starts[j]`` (a multiple
    of 8) as unsigned integers of its width in this machine's byte order, the fired flags
    (one byte each) from byte ``fired_at``; returns how many. Holds no GIL: it runs in the
    checkpoint's asynchronous phase."""
    o16, o32, o64 = out.view(np.uint16), out.view(np.uint32), out.view(np.uint64)
    m = 0
    for r in range(n_rows):
        at = r * words
        status = src[at] & np.uint64(0xFF)
        if status == 0:
            continue
        out[fired_at + m] = np.uint8(status - np.uint64(1))
        for j in range(widths.shape[0]):
            v = src[at + word_of[j]] >> np.uint64(shift_of[j])
            w = widths[j]
            if w == 1:
                out[out_starts[j] + m] = np.uint8(v & np.uint64(0xFF))
            elif w == 2:
                o16[(out_starts[j] >> 1) + m] = np.uint16(v & np.uint64(0xFFFF))
            elif w == 4:
                o32[(out_starts[j] >> 2) + m] = np.uint32(v & np.uint64(0xFFFFFFFF))
            else:
                o64[(out_starts[j] >> 3) + m] = v
        m += 1
    return m


@njit(cache=True)
def compact(rows: Any, n_rows: int, out: Any) -> int:
    """Copy the live rows of ``rows[:n_rows]`` to the start of ``out`` (may be ``rows``), in
    order; returns how many."""
    m = 0
    for r in range(n_rows):
        if rows[r, ROW_SEQ] >= 0:
            out[m, :] = rows[r, :]
            m += 1
    return m


@njit(cache=True)
def log_aggregate(
    times: Int64Array,
    keys: Int64Array,
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
    rows: Any,
    frows: Any,
    index: Any,
    blocks: Any,
    state: Int64Array,
    new_positions: Int64Array,
    landed: npt.NDArray[np.bool_],
    fire_start: Int64Array,
    fire_key: Int64Array,
    fire_count: Int64Array,
    fire_iacc: Any,
    fire_facc: Any,
) -> None:
    """``kernels.hash_aggregate`` on the log: fold every slot of every record into its panes
    in arrival order, appending the panes it creates. The caller leaves room in ``rows`` (and
    so in ``index``) for every pane the call may create."""
    n = times.shape[0]
    mi = iops.shape[0]
    mf = fops.shape[0]
    weighted = weights.shape[0] > 0
    fs = ROW_SLOTS + mi
    live = state[LIVE]
    min_start = state[MIN_START]
    min_fired = state[MIN_FIRED]
    seq = state[SEQ]
    used = state[ROWS]
    epoch = state[EPOCH]
    fresh = 0
    fires = 0
    cached_t0 = np.int64(1)
    cached_t1 = np.int64(0)
    cached_start = np.int64(0)
    # touch every record's first index entry before probing: the loads do not depend on one
    # another, so their cache misses overlap, and the probes below find the lines cached
    mask = np.uint64(index.shape[0] - 1)
    touched = np.int64(0)
    for i in range(n):
        t = times[i]
        start = t - (t - offset) % slide
        touched += index[np.int64(_hash(start, keys[i]) & mask)]
    state[TOUCHED] = touched
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
            end = start + size - 1
            if check_late and end + lateness <= watermark:
                break  # this window is late, and so is every earlier one of this record
            hit = True
            behind = check_late and end <= watermark
            h, r, top = _find(index, rows, start, k)
            b = (used if r < 0 else r) >> BLOCK_SHIFT
            blocks[b, WRITTEN] = epoch
            if r < 0:
                r = used
                used += 1
                index[h] = top | (r + 1)
                rows[r, ROW_START] = start
                rows[r, ROW_KEY] = k
                rows[r, ROW_SEQ] = seq
                rows[r, ROW_FIRED] = 1 if behind else 0
                rows[r, ROW_COUNT] = 0
                seq += 1
                live += 1
                new_positions[fresh] = i
                fresh += 1
                if not behind:
                    blocks[b, UNFIRED] = min(blocks[b, UNFIRED], start)
                    if start < min_start:
                        min_start = start
            c = rows[r, ROW_COUNT]
            if behind:
                if rows[r, ROW_FIRED] == 0:  # its block's earliest unfired start may be this one
                    blocks[b, UNFIRED] = VISIT
                rows[r, ROW_FIRED] = 1
                blocks[b, FIRED] = min(blocks[b, FIRED], start)
                if start < min_fired:
                    min_fired = start
            for s in range(mi):
                col = ROW_SLOTS + s
                rows[r, col] = ivals[i, s] if c == 0 else wk._folded(iops[s], rows[r, col], ivals[i, s])
            for s in range(mf):
                col = fs + s
                frows[r, col] = fvals[i, s] if c == 0 else wk._folded(fops[s], frows[r, col], fvals[i, s])
            c += weights[i] if weighted else 1
            rows[r, ROW_COUNT] = c
            if behind:  # fired already: fire again
                fire_start[fires] = start
                fire_key[fires] = k
                fire_count[fires] = c
                for s in range(mi):
                    fire_iacc[fires, s] = rows[r, ROW_SLOTS + s]
                for s in range(mf):
                    fire_facc[fires, s] = frows[r, fs + s]
                fires += 1
            start -= slide
        landed[i] = hit
    state[LIVE] = live
    state[MIN_START] = min_start
    state[MIN_FIRED] = min_fired
    state[NEW] = fresh
    state[SEQ] = seq
    state[FIRES] = fires
    state[ROWS] = used


@njit(cache=True)
def log_insert(
    rows: Any,
    frows: Any,
    index: Any,
    blocks: Any,
    starts: Int64Array,
    keys: Int64Array,
    counts: Int64Array,
    fired: npt.NDArray[np.bool_],
    iaccs: Any,
    faccs: Any,
    state: Int64Array,
    seqs: Int64Array,
) -> None:
    """``kernels.hash_aggregate_insert`` on the log: append panes given as columns, in order;
    ``seqs[j]`` is the seq pane ``j`` got, or -1 if it existed (then only its ``fired`` flag
    may be set)."""
    mi = iaccs.shape[1]
    mf = faccs.shape[1]
    for j in range(starts.shape[0]):
        start = starts[j]
        seqs[j] = -1
        if fired[j]:
            if start < state[MIN_FIRED]:
                state[MIN_FIRED] = start
        elif start < state[MIN_START]:
            state[MIN_START] = start
        h, r, top = _find(index, rows, start, keys[j])
        if r >= 0:
            if fired[j]:
                b = r >> BLOCK_SHIFT
                blocks[b, WRITTEN] = state[EPOCH]
                if rows[r, ROW_FIRED] == 0:
                    blocks[b, UNFIRED] = VISIT
                rows[r, ROW_FIRED] = 1
                blocks[b, FIRED] = min(blocks[b, FIRED], start)
            continue
        r = state[ROWS]
        state[ROWS] += 1
        b = r >> BLOCK_SHIFT
        blocks[b, WRITTEN] = state[EPOCH]
        column = FIRED if fired[j] else UNFIRED
        blocks[b, column] = min(blocks[b, column], start)
        index[h] = top | (r + 1)
        seqs[j] = state[SEQ]
        rows[r, ROW_START] = start
        rows[r, ROW_KEY] = keys[j]
        rows[r, ROW_SEQ] = state[SEQ]
        rows[r, ROW_COUNT] = counts[j]
        rows[r, ROW_FIRED] = 1 if fired[j] else 0
        for s in range(mi):
            rows[r, ROW_SLOTS + s] = iaccs[j, s]
        for s in range(mf):
            frows[r, ROW_SLOTS + mi + s] = faccs[j, s]
        state[SEQ] += 1
        state[LIVE] += 1


@njit(cache=True)
def log_fire(
    rows: Any, size: int, lateness: int, until: int, due: Int64Array, state: Int64Array, blocks: Any
) -> int:
    """Fire the log up to time ``until``, reading only the blocks with something to do: the
    rows of the panes that have not fired and whose ``max_timestamp`` is at or before
    ``until`` go to ``due`` (in creation order; returns how many) and are marked fired;
    panes past their cleanup time (``max_timestamp + lateness <= until``) are marked dead;
    the blocks read are summed up anew; ``LIVE``, ``DEAD``, ``MIN_START`` and ``MIN_FIRED``
    follow."""
    last = size - 1
    due_to = until - last  # a pane whose start is at most this is due
    dead_to = due_to - lateness  # ... and past its cleanup time at most this
    n_due = 0
    removed = 0
    min_start = NO_START
    min_fired = NO_START
    n_rows = state[ROWS]
    for b in range((n_rows + BLOCK - 1) >> BLOCK_SHIFT):
        if blocks[b, UNFIRED] > due_to and blocks[b, FIRED] > dead_to:
            min_start = min(min_start, blocks[b, UNFIRED])
            min_fired = min(min_fired, blocks[b, FIRED])
            continue
        block_start = NO_START
        block_fired = NO_START
        wrote = False
        for r in range(b << BLOCK_SHIFT, min(n_rows, (b + 1) << BLOCK_SHIFT)):
            if rows[r, ROW_SEQ] < 0:
                continue
            start = rows[r, ROW_START]
            if rows[r, ROW_FIRED] == 0 and start <= due_to:
                due[n_due] = r
                n_due += 1
                rows[r, ROW_FIRED] = 1
                wrote = True
            if start <= dead_to:
                rows[r, ROW_SEQ] = -1
                removed += 1
                wrote = True
                continue
            if rows[r, ROW_FIRED] != 0:
                block_fired = min(block_fired, start)
            else:
                block_start = min(block_start, start)
        blocks[b, UNFIRED] = block_start
        blocks[b, FIRED] = block_fired
        if wrote:
            blocks[b, WRITTEN] = state[EPOCH]
        min_start = min(min_start, block_start)
        min_fired = min(min_fired, block_fired)
    state[LIVE] -= removed
    state[DEAD] += removed
    state[MIN_START] = min_start
    state[MIN_FIRED] = min_fired
    return n_due


@njit(cache=True)
def gather(
    rows: Any,
    frows: Any,
    taken: Int64Array,
    order: Int64Array,
    mi: int,
    starts: Int64Array,
    keys: Int64Array,
    counts: Int64Array,
    iaccs: Any,
    faccs: Any,
    fired: npt.NDArray[np.bool_],
) -> None:
    """The panes of rows ``taken`` (ascending) as columns in the order ``order`` (output ``j``
    is row ``taken[order[j]]``), reading each row once and in row order; ``fired`` is filled
    when it has a slot per pane."""
    n = taken.shape[0]
    mf = faccs.shape[1]
    with_fired = fired.shape[0] == n
    place = np.empty(n, np.int64)
    for j in range(n):
        place[order[j]] = j
    for i in range(n):
        r = taken[i]
        j = place[i]
        starts[j] = rows[r, ROW_START]
        keys[j] = rows[r, ROW_KEY]
        counts[j] = rows[r, ROW_COUNT]
        for s in range(mi):
            iaccs[j, s] = rows[r, ROW_SLOTS + s]
        for s in range(mf):
            faccs[j, s] = frows[r, ROW_SLOTS + mi + s]
        if with_fired:
            fired[j] = rows[r, ROW_FIRED] != 0


@njit(cache=True)
def by_window(starts: Int64Array, slide: int, order: Int64Array) -> bool:
    """Write to ``order`` the stable permutation sorting ``starts`` (window starts, which
    differ by multiples of ``slide``) by window: a counting sort, O(n + windows). False (and
    ``order`` unset) when the windows span too far for that; the caller then sorts."""
    n = starts.shape[0]
    if n == 0:
        return True
    lo, hi = starts[0], starts[0]
    for i in range(n):
        lo = min(lo, starts[i])
        hi = max(hi, starts[i])
    windows = (hi - lo) // slide + 1
    if windows > 4 * n + 1024:
        return False
    counts = np.zeros(windows + 1, np.int64)
    for i in range(n):
        counts[(starts[i] - lo) // slide + 1] += 1
    for w in range(windows):
        counts[w + 1] += counts[w]
    for i in range(n):
        w = (starts[i] - lo) // slide
        order[counts[w]] = i
        counts[w] += 1
    return True


def firing_order(starts: np.ndarray, slide: int) -> np.ndarray:
    """The stable order of ``starts`` by window (``by_window``, else a stable argsort)."""
    order = np.empty(len(starts), np.int64)
    if by_window(starts, slide, order):
        return order
    return np.argsort(starts, kind="stable")
