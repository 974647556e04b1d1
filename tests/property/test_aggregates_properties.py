"""Vectorized ``Aggregates`` / ``RunningAggregates`` = the per-record path, on random input.

- ``dense_aggregate`` and ``pane_log.log_aggregate`` agree with their twin
  ``aggregate_reference`` (panes, counts, slots, creation order, new-pane positions, late
  flags, rows fired by late records), the dense one stopping and resuming when it runs out
  of window slots; ``log_insert``, ``compact`` and ``rebuild_index`` keep every pane;
  ``log_fire`` with ``firing_order`` agrees with its twin (and every pane left stays
  reachable through the index); ``by_window`` with a stable sort;
  ``running_aggregate`` agrees with ``fold_reference``.
- The vectorized window operator and the per-record ``WindowOperator`` running the same
  ``Aggregates`` see the same random disordered batches, watermarks, late records and
  allowed lateness: same records in the same order, same late side output and drop count;
  a checkpoint taken at a random cut from either restores into the other. Each of the
  vectorized operators runs on the dense store, the hash store, or switches from the first
  to the second when it needs more window slots (``STORES``).
- ``RunningAggregatesOperator`` and the per-record ``KeyedProcessOperator`` running
  ``RunningAggregates``: same records; a checkpoint crosses both ways.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.operators.test_vector_window import MAX_WM, Run
from weir.codec.batch import Batch, TupleColumns
from weir.codec.strings import Strings
from weir.columnar import (
    Aggregates,
    RunningAggregates,
    count,
    first,
    key,
    last,
    max,
    mean,
    min,
    sum,
    window_end,
    window_start,
)
from weir.columnar.aggregates import AggregatesWindowFunction
from weir.common import Types
from weir.core.functions import wrap_key_selector, wrap_keyed_process
from weir.datastream import OutputTag
from weir.datastream.window import (
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from weir.keys import KeyGroupRange
from weir.operators.keyed import KeyedProcessOperator
from weir.operators.running import RunningAggregatesOperator
from weir.operators.window import WindowOperator
from weir.operators.window import kernels as wk
from weir.operators.window import pane_log as pl
from weir.operators.window import vector as vw
from weir.operators.window.aggregates import AggregatesWindowOperator, aggregates_plan, slot_layout
from weir.state import create_keyed_backend

NO_WEIGHTS = np.empty(0, np.int64)  # every row one record

KERNEL_SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
OPERATOR_SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])

ROW = Types.TUPLE([Types.LONG(), Types.LONG(), Types.DOUBLE(), Types.INT()])
OUTPUTS = st.lists(
    st.sampled_from(["sum", "min", "max", "mean", "first", "last"]).flatmap(
        lambda kind: st.tuples(st.just(kind), st.sampled_from([1, 2, 3]))
    ),
    min_size=0,
    max_size=5,
)
FUNCTIONS = {"sum": sum, "min": min, "max": max, "mean": mean, "first": first, "last": last}


#: ``DENSE_CELLS`` per store: the default (the tests' panes fit in the dense arrays), 0 (the
#: first batch moves the panes to the hash table), the first dense arrays' cells (the panes
#: move, in the middle of a batch, when the arrays would grow).
STORES = {"dense": vw.DENSE_CELLS, "hash": 0, "switch": 4 * vw._MIN_TABLE}


@contextmanager
def store(name: str) -> Iterator[None]:
    dense_cells = vw.DENSE_CELLS
    vw.DENSE_CELLS = STORES[name]
    try:
        yield
    finally:
        vw.DENSE_CELLS = dense_cells


def outputs_of(drawn: list[tuple[str, int]], windowed: bool) -> list[Any]:
    head = [key(), window_start(), window_end(), count()] if windowed else [key(), count()]
    return head + [FUNCTIONS[kind](f) for kind, f in drawn]


@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, int, int]:
    slide = draw(st.integers(1, 50))
    size = slide * draw(st.integers(1, 3)) if draw(st.booleans()) else slide
    offset = draw(st.integers(-slide + 1, slide - 1))
    return size, slide, offset


# -- the kernels and their twins ---------------------------------------------------------------------


@KERNEL_SETTINGS
@given(shape=shapes(), lateness=st.integers(0, 60), check_late=st.booleans(), data=st.data())
def test_dense_aggregate_agrees_with_its_reference(
    shape: tuple[int, int, int], lateness: int, check_late: bool, data: st.DataObject
) -> None:
    size, slide, offset = shape
    floats = data.draw(st.lists(st.booleans(), max_size=4))
    ops = data.draw(
        st.lists(
            st.sampled_from([wk.SUM, wk.MIN, wk.MAX, wk.FIRST, wk.LAST]),
            min_size=len(floats),
            max_size=len(floats),
        )
    )
    iops = np.array([op for op, f in zip(ops, floats) if not f], np.int64)
    fops = np.array([op for op, f in zip(ops, floats) if f], np.int64)
    mi, mf = len(iops), len(fops)
    windows, keys = 1, 6  # one window slot to start with: calls stop and resume
    win = [
        np.zeros(windows, np.int64),
        np.zeros(windows, np.bool_),
        np.zeros(windows, np.bool_),
        np.zeros(windows, np.int64),
    ]
    count_ = np.zeros((windows, keys), np.int64)
    iacc, facc = np.zeros((windows, keys, mi), np.int64), np.zeros((windows, keys, mf), np.float64)
    order = np.zeros((windows, keys), np.int32)
    state = np.array([0, wk.NO_START, 0, 0, 0, 0], np.int64)
    panes: dict[tuple[int, int], list[Any]] = {}
    watermark = -(1 << 62)
    for _ in range(data.draw(st.integers(1, 3))):
        n = data.draw(st.integers(0, 30))
        times = data.draw(st.lists(st.integers(-200, 400), min_size=n, max_size=n))
        slots = data.draw(st.lists(st.integers(0, keys - 1), min_size=n, max_size=n))
        rows = [
            [data.draw(st.floats(-1e6, 1e6) if f else st.integers(-1000, 1000)) for f in floats]
            for _ in range(n)
        ]
        ivals = np.array([[v for v, f in zip(r, floats) if not f] for r in rows], np.int64).reshape(n, mi)
        fvals = np.array([[v for v, f in zip(r, floats) if f] for r in rows], np.float64).reshape(n, mf)
        cap = n * 4 + 1
        new_positions, new_windows, landed = (
            np.empty(cap, np.int64),
            np.empty(cap, np.int64),
            np.empty(n, np.bool_),
        )
        fire = [np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)]
        fire_iacc, fire_facc = np.empty((cap, mi), np.int64), np.empty((cap, mf), np.float64)
        state[wk.NEW], state[wk.FIRES], begin = 0, 0, 0
        while True:
            wk.dense_aggregate(
                np.array(times, np.int64), np.array(slots, np.int32), ivals, fvals, NO_WEIGHTS, iops, fops, size, slide, offset,
                watermark, lateness, check_late, *win, count_, iacc, facc, order, state, new_positions,
                new_windows, landed, *fire, fire_iacc, fire_facc, begin,
            )  # fmt: skip
            begin = int(state[wk.STOP])
            if begin >= n:
                break
            windows *= 2  # every window slot was open: grow, as the operator does
            win = [np.resize(a, windows) * (np.arange(windows) < len(a)) for a in win]
            count_, order = (
                np.vstack([count_, np.zeros_like(count_)]),
                np.vstack([order, np.zeros_like(order)]),
            )
            iacc, facc = np.vstack([iacc, np.zeros_like(iacc)]), np.vstack([facc, np.zeros_like(facc)])
        expected_new, expected_landed, expected_fires = wk.aggregate_reference(
            times, slots, rows, ops, size, slide, offset, watermark, lateness, check_late, panes
        )
        assert new_positions[: state[wk.NEW]].tolist() == expected_new
        assert landed.tolist() == expected_landed
        fired = []
        for j in range(int(state[wk.FIRES])):
            w, k = int(fire[0][j]), int(fire[1][j])
            ints, flts = iter(fire_iacc[j].tolist()), iter(fire_facc[j].tolist())
            fired.append(
                (int(win[0][w]), k, int(fire[2][j]), [next(flts) if f else next(ints) for f in floats])
            )
        assert fired == expected_fires
        watermark = data.draw(st.integers(watermark, 300))
    got = {}
    for w in np.flatnonzero(win[1]).tolist():
        for k in order[w, : win[3][w]].tolist():
            ints, flts = iter(iacc[w, k].tolist()), iter(facc[w, k].tolist())
            got[(int(win[0][w]), k)] = [int(count_[w, k]), [next(flts) if f else next(ints) for f in floats]]
    assert got == {pane: [c, accs] for pane, (_, c, accs) in panes.items()}


def slot_ops(data: st.DataObject) -> tuple[list[bool], list[int], np.ndarray, np.ndarray]:
    floats = data.draw(st.lists(st.booleans(), max_size=4))
    ops = data.draw(
        st.lists(
            st.sampled_from([wk.SUM, wk.MIN, wk.MAX, wk.FIRST, wk.LAST]),
            min_size=len(floats),
            max_size=len(floats),
        )
    )
    iops = np.array([op for op, f in zip(ops, floats) if not f], np.int64)
    fops = np.array([op for op, f in zip(ops, floats) if f], np.int64)
    return floats, ops, iops, fops


def fields(table: np.ndarray, mi: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Views of a hash store table: its columns by name, its int64 slots, its float64 slots."""
    columns = {
        name: table[:, c]
        for name, c in (
            ("start", wk.ROW_START), ("key", wk.ROW_KEY), ("seq", wk.ROW_SEQ), ("count", wk.ROW_COUNT),
            ("fired", wk.ROW_FIRED),
        )
    }  # fmt: skip
    return columns, table[:, wk.ROW_SLOTS : wk.ROW_SLOTS + mi], table.view(np.float64)[:, wk.ROW_SLOTS + mi :]


def mixed(floats: list[bool], ints: Any, flts: Any) -> list[Any]:
    """One pane's slots in the Aggregates' order, from its int64 and float64 slots."""
    i, f = iter(ints), iter(flts)
    return [next(f) if is_float else next(i) for is_float in floats]


@KERNEL_SETTINGS
@given(shape=shapes(), lateness=st.integers(0, 60), check_late=st.booleans(), data=st.data())
def test_log_aggregate_agrees_with_its_reference(
    shape: tuple[int, int, int], lateness: int, check_late: bool, data: st.DataObject
) -> None:
    size, slide, offset = shape
    floats, ops, iops, fops = slot_ops(data)
    mi, mf = len(iops), len(fops)
    table = np.zeros((1 << 9, wk.ROW_SLOTS + mi + mf), np.int64)  # 3 batches x 30 records x 3 windows
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    panes: dict[tuple[int, int], list[Any]] = {}
    behind: set[tuple[int, int]] = set()
    watermark = -(1 << 62)
    for _ in range(data.draw(st.integers(1, 3))):
        n = data.draw(st.integers(0, 30))
        times = data.draw(st.lists(st.integers(-200, 400), min_size=n, max_size=n))
        keys = data.draw(
            st.lists(st.integers(-3, 5) | st.sampled_from([2**62, -(2**63)]), min_size=n, max_size=n)
        )
        rows = [
            [data.draw(st.floats(-1e6, 1e6) if f else st.integers(-1000, 1000)) for f in floats]
            for _ in range(n)
        ]
        ivals = np.array([[v for v, f in zip(r, floats) if not f] for r in rows], np.int64).reshape(n, mi)
        fvals = np.array([[v for v, f in zip(r, floats) if f] for r in rows], np.float64).reshape(n, mf)
        cap = n * 3
        new_positions, landed = np.empty(cap, np.int64), np.empty(n, np.bool_)
        fire = [np.empty(cap, np.int64) for _ in range(3)]
        fire_iacc, fire_facc = np.empty((cap, mi), np.int64), np.empty((cap, mf), np.float64)
        pl.log_aggregate(
            np.array(times, np.int64), np.array(keys, np.int64), ivals, fvals, NO_WEIGHTS, iops, fops, size, slide, offset,
            watermark, lateness, check_late, table, table.view(np.float64), index, blocks, state, new_positions, landed,
            *fire,
            fire_iacc, fire_facc,
        )  # fmt: skip
        expected_new, expected_landed, expected_fires = wk.aggregate_reference(
            times, keys, rows, ops, size, slide, offset, watermark, lateness, check_late, panes
        )
        assert new_positions[: state[wk.NEW]].tolist() == expected_new
        assert landed.tolist() == expected_landed
        fired = [
            (int(fire[0][j]), int(fire[1][j]), int(fire[2][j]), mixed(floats, fire_iacc[j].tolist(), fire_facc[j].tolist()))
            for j in range(int(state[wk.FIRES]))
        ]  # fmt: skip
        assert fired == expected_fires
        behind |= {(start, k) for start, k, _, _ in expected_fires}
        watermark = data.draw(st.integers(watermark, 300))
    t, iacc, facc = fields(table[: state[pl.ROWS]], mi)
    live = np.flatnonzero(t["seq"] >= 0).tolist()
    assert live == list(range(len(live)))  # rows in creation order, packed
    got = {
        (int(t["start"][h]), int(t["key"][h])): [
            int(t["seq"][h]), int(t["count"][h]), mixed(floats, iacc[h].tolist(), facc[h].tolist())
        ]
        for h in live
    }  # fmt: skip
    assert got == panes
    assert {pane for pane, h in zip(got, live) if t["fired"][h]} == behind
    assert int(state[wk.LIVE]) == len(panes)
    unfired = [start for start, k in panes if (start, k) not in behind]
    assert int(state[wk.MIN_START]) == builtins.min(unfired, default=wk.NO_START)
    assert int(state[wk.MIN_FIRED]) == builtins.min((start for start, _ in behind), default=wk.NO_START)


@KERNEL_SETTINGS
@given(data=st.data())
def test_log_insert_and_compaction_keep_every_pane(data: st.DataObject) -> None:
    mi, mf = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    n = data.draw(st.integers(0, 60))
    panes = data.draw(
        st.lists(
            st.tuples(st.integers(-50, 50), st.integers(-3, 3) | st.sampled_from([2**62, -(2**63)])),
            min_size=n,
            max_size=n,
        )
    )
    counts = data.draw(st.lists(st.integers(1, 9), min_size=n, max_size=n))
    fired = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    iaccs = np.array(
        data.draw(st.lists(st.integers(-(2**62), 2**62), min_size=n * mi, max_size=n * mi)), np.int64
    )
    faccs = np.array(data.draw(st.lists(st.floats(-1e9, 1e9), min_size=n * mf, max_size=n * mf)), np.float64)
    iaccs, faccs = iaccs.reshape(n, mi), faccs.reshape(n, mf)
    expected: dict[tuple[int, int], list[Any]] = {}
    for j, pane in enumerate(panes):  # the twin: the first of equal panes wins; a fired flag sticks
        entry = expected.setdefault(
            pane, [len(expected), counts[j], False, iaccs[j].tolist(), faccs[j].tolist()]
        )
        entry[2] = entry[2] or fired[j]
    table = np.zeros((64, wk.ROW_SLOTS + mi + mf), np.int64)
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    seqs = np.empty(n, np.int64)
    pl.log_insert(
        table, table.view(np.float64), index, blocks, np.array([s for s, _ in panes], np.int64),
        np.array([k for _, k in panes], np.int64), np.array(counts, np.int64), np.array(fired, np.bool_), iaccs, faccs,
        state, seqs,
    )  # fmt: skip
    firsts = [pane not in panes[:j] for j, pane in enumerate(panes)]
    assert seqs.tolist() == [expected[p][0] if first else -1 for p, first in zip(panes, firsts)]
    used = int(state[pl.ROWS])
    bigger = np.zeros((128, table.shape[1]), np.int64)
    assert pl.compact(table, used, bigger) == len(expected)
    bigger_index = np.zeros(2 * len(bigger), np.int64)
    pl.rebuild_index(bigger, len(expected), bigger_index, pl.log_blocks(len(bigger)))
    for (start, k), entry in expected.items():  # found through the index
        assert int(table[pl._find(index, table, start, k)[1], wk.ROW_SEQ]) == entry[0]
        assert int(bigger[pl._find(bigger_index, bigger, start, k)[1], wk.ROW_SEQ]) == entry[0]
    for t, ia, fa in (fields(table[:used], mi), fields(bigger[: len(expected)], mi)):
        got = {
            (int(t["start"][h]), int(t["key"][h])): [
                int(t["seq"][h]), int(t["count"][h]), bool(t["fired"][h]), ia[h].tolist(), fa[h].tolist()
            ]
            for h in np.flatnonzero(t["seq"] >= 0).tolist()
        }  # fmt: skip
        assert got == expected
    assert int(state[wk.LIVE]) == len(expected)


@KERNEL_SETTINGS
@given(
    panes=st.lists(st.tuples(st.integers(-10, 10), st.integers(-3, 40), st.booleans()), max_size=200),
    size=st.integers(1, 5),
    lateness=st.integers(0, 8),
    untils=st.lists(st.integers(-15, 20), min_size=1, max_size=4),
)
def test_log_fire_agrees_with_its_reference(
    panes: list[tuple[int, int, bool]], size: int, lateness: int, untils: list[int]
) -> None:
    table = np.zeros((256, wk.ROW_SLOTS + 2), np.int64)
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    n = len(panes)
    starts, keys = np.array([p[0] for p in panes], np.int64), np.array([p[1] for p in panes], np.int64)
    fired = np.array([p[2] for p in panes], np.bool_)
    pl.log_insert(
        table, table.view(np.float64), index, blocks, starts, keys, np.ones(n, np.int64), fired, keys.reshape(n, 1) * 3,
        starts.reshape(n, 1) / 2, state, np.empty(n, np.int64),
    )  # fmt: skip
    t, iacc, facc = fields(table[: state[pl.ROWS]], 1)
    expected: dict[tuple[int, int], list[Any]] = {}
    for start, k, f in panes:
        expected.setdefault((start, k), [len(expected), 1, False])[2] |= f
    for until in sorted(untils):
        due = np.empty(n, np.int64)
        n_due = pl.log_fire(table, size, lateness, until, due, state, blocks)
        rows = due[:n_due]
        assert (np.diff(rows) > 0).all()  # in creation order
        order = pl.firing_order(t["start"][rows], 1)
        columns = [np.empty(n_due, np.int64) for _ in range(3)]
        iaccs, faccs, was_fired = (
            np.empty((n_due, 1), np.int64),
            np.empty((n_due, 1)),
            np.empty(n_due, np.bool_),
        )
        pl.gather(table, table.view(np.float64), rows, order, 1, *columns, iaccs, faccs, was_fired)
        rows = rows[order]
        assert [c.tolist() for c in columns] == [
            t["start"][rows].tolist(),
            t["key"][rows].tolist(),
            [1] * n_due,
        ]
        assert (
            iaccs[:, 0].tolist() == iacc[rows, 0].tolist() and faccs[:, 0].tolist() == facc[rows, 0].tolist()
        )
        assert was_fired.all()  # marked fired as they fire
        assert (t["count"][rows] == 1).all() and (iacc[rows, 0] == t["key"][rows] * 3).all()
        assert (facc[rows, 0] == t["start"][rows] / 2).all()
        got_due = list(zip(t["start"][rows].tolist(), t["key"][rows].tolist()))
        assert got_due == wk.hash_aggregate_fire_reference(expected, size, lateness, until)
        live = np.flatnonzero(t["seq"] >= 0)
        got = {
            (int(t["start"][h]), int(t["key"][h])): [int(t["seq"][h]), 1, bool(t["fired"][h])]
            for h in live.tolist()
        }
        assert got == expected
        assert (iacc[live, 0] == t["key"][live] * 3).all() and (facc[live, 0] == t["start"][live] / 2).all()
        assert int(state[wk.LIVE]) == len(expected)
        unfired = [s for (s, _), v in expected.items() if not v[2]]
        assert int(state[wk.MIN_START]) == builtins.min(unfired, default=wk.NO_START)
        assert int(state[wk.MIN_FIRED]) == builtins.min(
            (s for (s, _), v in expected.items() if v[2]), default=wk.NO_START
        )
        for start, k in expected:  # every pane is still reachable through the index
            h = int(np.flatnonzero((t["start"] == start) & (t["key"] == k) & (t["seq"] >= 0))[0])
            assert pl._find(index, table, start, k)[1] == h


def block_summaries(table: np.ndarray, used: int) -> np.ndarray:
    """What ``blocks`` should say of ``table[:used]``: per block, the earliest start of its
    live unfired and of its live fired panes."""
    want = pl.log_blocks(len(table))
    for r in range(used):
        if table[r, wk.ROW_SEQ] >= 0:
            column = pl.FIRED if table[r, wk.ROW_FIRED] else pl.UNFIRED
            b = r >> pl.BLOCK_SHIFT
            want[b, column] = builtins.min(want[b, column], int(table[r, wk.ROW_START]))
    return want


@KERNEL_SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    behind=st.integers(1, 3),
    lateness=st.integers(0, 30),
    steps=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 40)), min_size=1, max_size=5),
)
def test_a_firing_over_many_blocks_agrees_with_its_reference_and_leaves_each_block_summed_up(
    seed: int, behind: int, lateness: int, steps: list[tuple[int, int]]
) -> None:
    """Panes of two ranges far apart (as of two source splits whose watermarks differ) land
    in turns over several blocks; some come again fired (restored ones); firings between
    the batches fire what the reference fires, keep every block's summary never later than
    its panes, and leave it exact."""
    rng = np.random.default_rng(seed)
    size = 10
    table = np.zeros((8 * pl.BLOCK, wk.ROW_SLOTS + 1), np.int64)
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    expected: dict[tuple[int, int], list[Any]] = {}
    until = -(1 << 40)
    for n, advance in steps:
        ahead = np.arange(n) < n * behind // 4  # a batch of the split far ahead, then the other's
        starts = (rng.integers(0, 60, n) + np.where(ahead, 100_000, until // size + 5)) * size
        keys = rng.integers(0, 50, n)
        fired = rng.random(n) < 0.1
        seqs = np.empty(n, np.int64)
        pl.log_insert(
            table, table.view(np.float64), index, blocks, starts, keys, np.ones(n, np.int64), fired,
            keys.reshape(n, 1), np.empty((n, 0)), state, seqs,
        )  # fmt: skip
        for start, k, f, seq in zip(starts.tolist(), keys.tolist(), fired.tolist(), seqs.tolist()):
            if seq >= 0:
                assert (start, k) not in expected
                expected[(start, k)] = [seq, 1, False]
            expected[(start, k)][2] |= f
        used = int(state[pl.ROWS])
        want = block_summaries(table, used)
        assert (blocks <= want).all()  # never later than its panes: no firing skips a due one
        until = builtins.max(until, int(starts.min(initial=0))) + advance * size
        due = np.empty(used, np.int64)
        n_due = pl.log_fire(table, size, lateness, until, due, state, blocks)
        rows = due[:n_due]
        rows = rows[pl.firing_order(table[rows, wk.ROW_START], size)]
        got = list(zip(table[rows, wk.ROW_START].tolist(), table[rows, wk.ROW_KEY].tolist()))
        assert got == wk.hash_aggregate_fire_reference(expected, size, lateness, until)
        assert (blocks == block_summaries(table, used)).all()
        assert int(state[wk.LIVE]) == len(expected)
        unfired = [st for (st, _), v in expected.items() if not v[2]]
        assert int(state[wk.MIN_START]) == builtins.min(unfired, default=wk.NO_START)


def test_a_firing_reads_no_block_whose_panes_are_all_held_back() -> None:
    """A block whose summary says nothing in it is due is not read: a row changed behind the
    summary's back (as no kernel does) is not fired."""
    table = np.zeros((4 * pl.BLOCK, wk.ROW_SLOTS), np.int64)
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    n = 2 * pl.BLOCK  # the first block holds back panes far ahead, the second is due
    starts = np.where(np.arange(n) < pl.BLOCK, 10_000, 0).astype(np.int64)
    keys = np.arange(n, dtype=np.int64)
    pl.log_insert(
        table, table.view(np.float64), index, blocks, starts, keys, np.ones(n, np.int64), np.zeros(n, np.bool_),
        np.empty((n, 0), np.int64), np.empty((n, 0)), state, np.empty(n, np.int64),
    )  # fmt: skip
    table[5, wk.ROW_START] = 0  # due now, but its block's summary still says 10,000
    due = np.empty(n, np.int64)
    n_due = pl.log_fire(table, 1, 0, 0, due, state, blocks)
    assert sorted(due[:n_due].tolist()) == list(range(pl.BLOCK, 2 * pl.BLOCK))
    assert table[5, wk.ROW_SEQ] >= 0 and table[5, wk.ROW_FIRED] == 0
    blocks[0, pl.UNFIRED] = pl.VISIT  # as a kernel marks a block whose summary may be late
    assert pl.log_fire(table, 1, 0, 0, due, state, blocks) == 1 and due[0] == 5


def test_a_pane_that_comes_again_fired_leaves_no_earlier_unfired_start_behind() -> None:
    """The one earliest unfired pane of a block comes again fired (as a restore may bring
    it): after a firing that has nothing else to do there, ``MIN_START`` is the next one's."""
    table = np.zeros((2 * pl.BLOCK, wk.ROW_SLOTS), np.int64)
    index = np.zeros(2 * len(table), np.int64)
    blocks = pl.log_blocks(len(table))
    state = pl.log_state()
    n = pl.BLOCK
    starts = np.where(np.arange(n) == 0, 9_000, 10_000).astype(np.int64)

    def insert(starts: np.ndarray, keys: np.ndarray, fired: np.ndarray) -> None:
        m = len(starts)
        pl.log_insert(
            table, table.view(np.float64), index, blocks, starts, keys, np.ones(m, np.int64), fired,
            np.empty((m, 0), np.int64), np.empty((m, 0)), state, np.empty(m, np.int64),
        )  # fmt: skip

    insert(starts, np.arange(n, dtype=np.int64), np.zeros(n, np.bool_))
    insert(starts[:1], np.zeros(1, np.int64), np.ones(1, np.bool_))
    assert pl.log_fire(table, 1, 100_000, 0, np.empty(n, np.int64), state, blocks) == 0
    assert int(state[wk.MIN_START]) == 10_000 and int(state[wk.MIN_FIRED]) == 9_000


@KERNEL_SETTINGS
@given(
    slide=st.integers(1, 1000),
    offset=st.integers(-5000, 5000),
    windows=st.lists(st.integers(0, 3000), min_size=0, max_size=300),
)
def test_by_window_is_a_stable_sort_by_window(slide: int, offset: int, windows: list[int]) -> None:
    n = len(windows)
    starts = np.array([offset + w * slide for w in windows], np.int64)
    order = np.empty(n, np.int64)
    if pl.by_window(starts, slide, order):  # else the windows span too far for it
        assert order.tolist() == np.argsort(starts, kind="stable").tolist()
    assert pl.firing_order(starts, slide).tolist() == np.argsort(starts, kind="stable").tolist()


@KERNEL_SETTINGS
@given(data=st.data())
def test_running_aggregate_agrees_with_the_reference(data: st.DataObject) -> None:
    floats = data.draw(st.lists(st.booleans(), max_size=4))
    ops = data.draw(
        st.lists(
            st.sampled_from([wk.SUM, wk.MIN, wk.MAX, wk.FIRST, wk.LAST]),
            min_size=len(floats),
            max_size=len(floats),
        )
    )
    n = data.draw(st.integers(0, 40))
    slots = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    rows = [
        [data.draw(st.floats(allow_infinity=False) if f else st.integers(-(2**40), 2**40)) for f in floats]
        for _ in range(n)
    ]
    iops = np.array([op for op, f in zip(ops, floats) if not f], np.int64)
    fops = np.array([op for op, f in zip(ops, floats) if f], np.int64)
    mi, mf = len(iops), len(fops)
    count_, iacc, facc = np.zeros(5, np.int64), np.zeros((5, mi), np.int64), np.zeros((5, mf), np.float64)
    out_count, out_i, out_f = (
        np.empty(n, np.int64),
        np.empty((n, mi), np.int64),
        np.empty((n, mf), np.float64),
    )
    wk.running_aggregate(
        np.array(slots, np.int32),
        np.array([[v for v, f in zip(r, floats) if not f] for r in rows], np.int64).reshape(n, mi),
        np.array([[v for v, f in zip(r, floats) if f] for r in rows], np.float64).reshape(n, mf),
        iops, fops, count_, iacc, facc, out_count, out_i, out_f,
    )  # fmt: skip
    accs: dict[int, list[Any]] = {}
    counts: dict[int, int] = {}
    for i, (k, row) in enumerate(zip(slots, rows)):
        c = counts.get(k, 0)
        accs[k] = [
            wk.fold_reference(op, a, c, v) for op, a, v in zip(ops, accs.get(k, [None] * len(ops)), row)
        ]
        counts[k] = c + 1
        ints, flts = iter(out_i[i].tolist()), iter(out_f[i].tolist())
        got = [next(flts) if f else next(ints) for f in floats]
        assert int(out_count[i]) == c + 1
        assert repr(got) == repr(accs[k])  # repr: NaN equals NaN


# -- the operators against the per-record path ----------------------------------------------------


FINITE = st.floats(-1e3, 1e3, allow_nan=False)


@st.composite
def runs(
    draw: st.DrawFn, floats: st.SearchStrategy[float] = FINITE
) -> tuple[list[tuple[list[tuple[Any, int]], int]], int]:
    """Batches of disordered records, each followed by a (monotonic) watermark; field 2 from
    ``floats``."""
    steps = []
    now, watermark = 0, -(1 << 62)
    for _ in range(draw(st.integers(1, 10))):
        batch = []
        for _ in range(draw(st.integers(0, 25))):
            now += draw(st.integers(0, 6))
            record = (
                draw(st.integers(0, 4)),
                draw(st.integers(-100, 100)),
                draw(floats),
                draw(st.integers(-5, 5)),
            )
            batch.append((record, now - draw(st.integers(0, 120))))
        watermark = builtins_max(watermark, now - draw(st.integers(0, 80)))
        steps.append((batch, watermark))
    return steps, draw(st.integers(0, len(steps)))


def builtins_max(a: int, b: int) -> int:
    return a if a >= b else b


def window_pair(
    drawn: list[tuple[str, int]], assigner: Any, lateness: int, tag: Any, row: Any = ROW
) -> tuple[Any, Any]:
    agg = Aggregates(*outputs_of(drawn, True))
    trigger = assigner.get_default_trigger()
    per_record = WindowOperator(
        "w", wrap_key_selector(lambda r: r[0]), assigner, trigger, lateness, tag, "aggregate", agg,
        AggregatesWindowFunction(agg.spec), None,
    )  # fmt: skip
    plan, reason = aggregates_plan({"spec": agg.spec, "input_type": row}, assigner, trigger, None)
    assert plan is not None, reason
    vector = AggregatesWindowOperator(
        "w", wrap_key_selector(lambda r: r[0]), assigner, plan, row, tag, agg, lateness
    )
    return per_record, vector


def play(runs_: list[Run], steps: list[tuple[list[tuple[Any, int]], int]]) -> None:
    for batch, watermark in steps:
        for run in runs_:
            run.batch(batch)
            run.watermark(watermark)


@OPERATOR_SETTINGS
@given(
    drawn=OUTPUTS, shape=shapes(), lateness=st.sampled_from([0, 0, 30, 200]), side=st.booleans(),
    run=runs(), direction=st.sampled_from(["vector->record", "record->vector", "vector->vector"]),
    lmdb=st.booleans(), stores=st.tuples(st.sampled_from(sorted(STORES)), st.sampled_from(sorted(STORES))),
)  # fmt: skip
def test_vectorized_aggregates_equal_the_per_record_path(
    drawn: list[tuple[str, int]],
    shape: tuple[int, int, int],
    lateness: int,
    side: bool,
    run: tuple[list[tuple[list[tuple[Any, int]], int]], int],
    direction: str,
    lmdb: bool,
    stores: tuple[str, str],
    tmp_path_factory: Any,
) -> None:
    """``stores``: the store of the vectorized operator before the checkpoint, and after."""
    size, slide, offset = shape
    assigner = (
        TumblingEventTimeWindows(size, offset)
        if size == slide
        else SlidingEventTimeWindows(size, slide, offset)
    )
    tag = OutputTag("late") if side else None
    steps, cut = run
    per_record, vector = (Run(op) for op in window_pair(drawn, assigner, lateness, tag))
    with store(stores[0]):
        play([per_record, vector], [*steps, ([], MAX_WM)])
    assert vector.records() == per_record.records()
    assert vector.output.side == per_record.output.side
    assert vector.op.metrics.late_records_dropped == per_record.op.metrics.late_records_dropped
    # a checkpoint at ``cut`` from one path restored into the other
    before, after = direction.split("->")
    ops = dict(zip(("record", "vector"), window_pair(drawn, assigner, lateness, tag)))
    path = tmp_path_factory.mktemp("agg")
    backend = create_keyed_backend(
        "lmdb" if lmdb else "hashmap", "op", 128, KeyGroupRange(0, 127), path=path / "a"
    )
    first_run = Run(ops[before], backend)
    with store(stores[0]):
        play([first_run], steps[:cut])
        snapshot = first_run.checkpoint()
    later = window_pair(drawn, assigner, lateness, tag)[0 if after == "record" else 1]
    with store(stores[1]):
        second = Run(
            later, create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127)), restore=[snapshot]
        )
        second.op.current_watermark = (
            first_run.op.current_watermark
        )  # a task restores no watermark: the next one comes
        play([second], [*steps[cut:], ([], MAX_WM)])
    assert first_run.records() + second.records() == per_record.records()


STRING_ROW = Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE(), Types.INT()])


def _string_keyed(steps: list[tuple[list[tuple[Any, int]], int]]) -> list[tuple[list[tuple[Any, int]], int]]:
    """The same steps with string keys (one of them beyond ASCII)."""
    return [([((f"k{r[0]}" + "é" * (r[0] == 3), *r[1:]), t) for r, t in batch], wm) for batch, wm in steps]


def _play_columns(run: Run, steps: list[tuple[list[tuple[Any, int]], int]], as_columns: list[bool]) -> None:
    """``play`` for one run, a step's batch as columns with its keys as ``Strings`` (as a
    frame decodes them) where ``as_columns`` says so, else as records."""
    for i, (events, watermark) in enumerate(steps):
        if events and as_columns[i % len(as_columns)]:
            key, a, b, c = zip(*(v for v, _ in events))
            columns = TupleColumns([Strings.from_list(list(key)), np.array(a), np.array(b), np.array(c)])
            run.op.process_batch(Batch(columns, np.array([t for _, t in events], dtype=np.int64)))
        else:
            run.batch(events)
        run.watermark(watermark)


@OPERATOR_SETTINGS
@given(
    drawn=OUTPUTS, shape=shapes(), run=runs(), as_columns=st.lists(st.booleans(), min_size=1, max_size=6),
    vector_first=st.booleans(), lmdb=st.booleans(),
)  # fmt: skip
def test_vectorized_aggregates_over_string_columns_equal_the_per_record_path(
    drawn: list[tuple[str, int]],
    shape: tuple[int, int, int],
    run: tuple[list[tuple[list[tuple[Any, int]], int]], int],
    as_columns: list[bool],
    vector_first: bool,
    lmdb: bool,
    tmp_path_factory: Any,
) -> None:
    """String keys reaching the vectorized window as ``Strings`` (looked up by their bytes)
    or as str, batch by batch: the per-record path's records, and a checkpoint of either
    restores into the other."""
    size, slide, offset = shape
    assigner = (
        TumblingEventTimeWindows(size, offset)
        if size == slide
        else SlidingEventTimeWindows(size, slide, offset)
    )
    steps, cut = run
    steps = _string_keyed(steps)
    per_record, vector = (Run(op) for op in window_pair(drawn, assigner, 30, None, STRING_ROW))
    play([per_record], [*steps, ([], MAX_WM)])
    _play_columns(vector, [*steps, ([], MAX_WM)], as_columns)
    assert vector.records() == per_record.records()
    first_op, second_op = window_pair(drawn, assigner, 30, None, STRING_ROW)[:: 1 if not vector_first else -1]
    path = tmp_path_factory.mktemp("strings")
    first_run = Run(
        first_op,
        create_keyed_backend(
            "lmdb" if lmdb else "hashmap", "op", 128, KeyGroupRange(0, 127), path=path / "a"
        ),
    )
    _play_columns(first_run, steps[:cut], as_columns)
    snapshot = first_run.checkpoint()
    second = Run(
        second_op, create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127)), restore=[snapshot]
    )
    second.op.current_watermark = first_run.op.current_watermark
    _play_columns(second, [*steps[cut:], ([], MAX_WM)], as_columns)
    assert first_run.records() + second.records() == per_record.records()


def running_pair(drawn: list[tuple[str, int]], row: Any) -> Any:
    """``make(vectorized)``: a ``RunningAggregatesOperator``, or the per-record
    ``KeyedProcessOperator`` running the same ``RunningAggregates``, over records of ``row``."""
    function = RunningAggregates(*outputs_of(drawn, False))
    plan, reason = slot_layout(function.spec, row)
    assert plan is not None, reason

    def make(vectorized: bool) -> Any:
        if vectorized:
            return RunningAggregatesOperator("k", wrap_key_selector(lambda r: r[0]), plan, row)
        return KeyedProcessOperator(
            "k", wrap_key_selector(lambda r: r[0]), wrap_keyed_process(RunningAggregates(*function.outputs))
        )

    return make


@OPERATOR_SETTINGS
@given(drawn=OUTPUTS, run=runs(), vector_first=st.booleans())
def test_running_aggregates_equal_the_per_record_path(
    drawn: list[tuple[str, int]], run: tuple[list[tuple[list[tuple[Any, int]], int]], int], vector_first: bool
) -> None:
    steps, cut = run
    make = running_pair(drawn, ROW)
    per_record, vector = Run(make(False)), Run(make(True))
    play([per_record, vector], steps)
    assert vector.records() == per_record.records()
    first_run = Run(make(vector_first))
    play([first_run], steps[:cut])
    first_run.op.prepare_snapshot_pre_barrier(1)
    backend = create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127))
    backend.restore([first_run.backend.snapshot()])  # the operator's timers: none, on either path
    second = Run(make(not vector_first), backend)
    play([second], steps[cut:])
    assert first_run.records() + second.records() == per_record.records()


@OPERATOR_SETTINGS
@given(
    drawn=OUTPUTS,
    run=runs(),
    as_columns=st.lists(st.booleans(), min_size=1, max_size=6),
    vector_first=st.booleans(),
)
def test_running_aggregates_over_string_columns_equal_the_per_record_path(
    drawn: list[tuple[str, int]],
    run: tuple[list[tuple[list[tuple[Any, int]], int]], int],
    as_columns: list[bool],
    vector_first: bool,
) -> None:
    """String keys reaching ``RunningAggregatesOperator`` as ``Strings`` or as str, batch by
    batch: the per-record path's records; a checkpoint crosses both ways."""
    steps, cut = run
    steps = _string_keyed(steps)
    make = running_pair(drawn, STRING_ROW)
    per_record, vector = Run(make(False)), Run(make(True))
    play([per_record], steps)
    _play_columns(vector, steps, as_columns)
    assert vector.records() == per_record.records()
    first_run = Run(make(vector_first))
    _play_columns(first_run, steps[:cut], as_columns)
    first_run.op.prepare_snapshot_pre_barrier(1)
    backend = create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127))
    backend.restore([first_run.backend.snapshot()])
    second = Run(make(not vector_first), backend)
    _play_columns(second, steps[cut:], as_columns)
    assert first_run.records() + second.records() == per_record.records()
