"""Vectorized window built-ins = per-record path = a plain Python oracle, on random input.

- ``accumulate`` (hash table) and ``dense_accumulate`` (dense arrays, stopping and resuming
  when it runs out of window slots) agree with their reference twin ``accumulate_reference``
  on random batches: same panes, accumulators, counts, creation order, new-pane positions,
  late flags; ``int_key_slots`` agrees with ``int_key_slots_reference``.
- The vectorized operator, the per-record ``WindowOperator`` (fast and general mode) and a
  plain Python oracle see the same random disordered batches with watermarks, for each of
  sum/min/max/count/mean on ints and floats, tumbling and sliding windows with offsets: the
  two operators emit the same records in the same order, the oracle the same multiset.
- End to end at parallelism 1 and 2: one job runs every built-in both vectorized and on the
  per-record path; both equal the oracle.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.codec.batch import Batch
from weir.common import Configuration, Duration, Time, Types, WatermarkStrategy
from weir.core.aggregators import Count, FieldAggregator, Mean, WithKey
from weir.core.functions import wrap_key_selector
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from weir.keys import KeyGroupRange
from weir.operators.base import OperatorContext, Output
from weir.operators.window import WindowOperator
from weir.operators.window import kernels as wk
from weir.operators.window import vector as vw
from weir.operators.window.vector import VectorWindowOperator, vector_plan
from weir.state import create_keyed_backend

AGGS = ["sum", "min", "max", "count", "mean"]
MAX_WM = (1 << 63) - 1

# The first example of each test pays numba's compile (or cache load) time.
KERNEL_SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
OPERATOR_SETTINGS = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def windows(draw: st.DrawFn) -> tuple[int, int, int]:
    """(size, slide, offset): tumbling when slide == size."""
    slide = draw(st.integers(1, 50))
    size = slide * draw(st.integers(1, 4)) if draw(st.booleans()) else slide
    offset = draw(st.integers(-slide + 1, slide - 1))
    return size, slide, offset


INTS = st.integers(-1000, 1000)
FLOATS = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


# -- the kernel and its twin -----------------------------------------------------------------------


@KERNEL_SETTINGS
@given(
    op=st.sampled_from(sorted(wk.OPS.values())),
    floats=st.booleans(),
    shape=windows(),
    check_late=st.booleans(),
    data=st.data(),
)
def test_accumulate_agrees_with_its_reference(
    op: int, floats: bool, shape: tuple[int, int, int], check_late: bool, data: st.DataObject
) -> None:
    size, slide, offset = shape
    values_of = FLOATS if floats or op == wk.MEAN else INTS
    n_batches = data.draw(st.integers(1, 4))
    watermark = data.draw(st.integers(-100, 300))
    dtype = np.float64 if floats or op == wk.MEAN else np.int64
    table = wk.empty_table(1 << 12, wk.PANE_FLOAT if dtype is np.float64 else wk.PANE_INT)
    state = np.array([0, wk.NO_START, 0, 0], np.int64)
    panes: dict[tuple[int, int], list[Any]] = {}
    for _ in range(n_batches):
        n = data.draw(st.integers(0, 40))
        times = data.draw(st.lists(st.integers(-200, 400), min_size=n, max_size=n))
        keys = data.draw(
            st.lists(st.integers(-3, 5) | st.sampled_from([2**62, -(2**63)]), min_size=n, max_size=n)
        )
        values = data.draw(st.lists(values_of, min_size=n, max_size=n))
        new_positions = np.empty(n * 4 + 1, np.int64)
        landed = np.empty(n, np.bool_)
        wk.accumulate(
            np.array(times, np.int64), np.array(keys, np.int64), np.array(values, dtype), op,
            size, slide, offset, watermark, check_late, table, state, new_positions, landed,
        )  # fmt: skip
        expected_new, expected_landed = wk.accumulate_reference(
            times, keys, values, op, size, slide, offset, watermark, check_late, panes
        )
        assert new_positions[: state[wk.NEW]].tolist() == expected_new
        assert landed.tolist() == expected_landed
    rows = np.flatnonzero(table["seq"] >= 0)
    got = {
        (int(r["start"]), int(r["key"])): [int(r["seq"]), int(r["count"]), r["acc"].item()]
        for r in table[rows]
    }
    if op == wk.COUNT:  # the accumulator is unused
        got = {k: v[:2] for k, v in got.items()}
        panes = {k: v[:2] for k, v in panes.items()}
    assert got == panes
    assert int(state[wk.LIVE]) == len(panes)
    assert int(state[wk.MIN_START]) == min((s for s, _ in panes), default=wk.NO_START)


@KERNEL_SETTINGS
@given(
    op=st.sampled_from(sorted(wk.OPS.values())),
    floats=st.booleans(),
    shape=windows(),
    check_late=st.booleans(),
    data=st.data(),
)
def test_dense_accumulate_agrees_with_the_reference(
    op: int, floats: bool, shape: tuple[int, int, int], check_late: bool, data: st.DataObject
) -> None:
    size, slide, offset = shape
    values_of = FLOATS if floats or op == wk.MEAN else INTS
    dtype = np.float64 if floats or op == wk.MEAN else np.int64
    watermark = data.draw(st.integers(-100, 300))
    windows_, keys_ = 1, 6  # one window slot to start with: calls stop and resume
    arrays = [np.zeros(windows_, np.int64), np.zeros(windows_, np.bool_), np.zeros(windows_, np.int64)]
    dense = [np.zeros((windows_, keys_), dtype), np.zeros((windows_, keys_), np.int64)]
    order = np.zeros((windows_, keys_), np.int32)
    state = np.array([0, wk.NO_START, 0, 0, 0], np.int64)
    panes: dict[tuple[int, int], list[Any]] = {}
    for _ in range(data.draw(st.integers(1, 3))):
        n = data.draw(st.integers(0, 30))
        times = data.draw(st.lists(st.integers(-200, 400), min_size=n, max_size=n))
        slots = data.draw(st.lists(st.integers(0, keys_ - 1), min_size=n, max_size=n))
        values = data.draw(st.lists(values_of, min_size=n, max_size=n))
        new_positions, new_windows = np.empty(n * 4 + 1, np.int64), np.empty(n * 4 + 1, np.int64)
        landed = np.empty(n, np.bool_)
        state[wk.NEW], begin = 0, 0
        while True:
            wk.dense_accumulate(
                np.array(times, np.int64), np.array(slots, np.int32), np.array(values, dtype), op,
                size, slide, offset, watermark, check_late, *arrays, *dense, order,
                state, new_positions, new_windows, landed, begin,
            )  # fmt: skip
            begin = int(state[wk.STOP])
            if begin >= n:
                break
            windows_ *= 2  # every window slot was open: grow, as the operator does
            arrays = [np.resize(a, windows_) * (np.arange(windows_) < len(a)) for a in arrays]
            dense = [np.vstack([d, np.zeros_like(d)]) for d in dense]
            order = np.vstack([order, np.zeros_like(order)])
        expected_new, expected_landed = wk.accumulate_reference(
            times, slots, values, op, size, slide, offset, watermark, check_late, panes
        )
        assert new_positions[: state[wk.NEW]].tolist() == expected_new
        assert landed.tolist() == expected_landed
    win_start, win_live, win_count = arrays
    got: dict[tuple[int, int], list[Any]] = {}
    for w in np.flatnonzero(win_live).tolist():
        for k in order[w, : win_count[w]].tolist():
            got[(int(win_start[w]), k)] = [int(dense[1][w, k]), dense[0][w, k].item()]
    expected = {pane: [count, acc] for pane, (_, count, acc) in panes.items()}
    if op == wk.COUNT:
        got = {pane: v[:1] for pane, v in got.items()}
        expected = {pane: v[:1] for pane, v in expected.items()}
    assert got == expected
    # within a window, panes are listed in creation order
    by_window: dict[int, list[tuple[int, int]]] = {}
    for (start, key), (seq, _, _) in panes.items():
        by_window.setdefault(start, []).append((seq, key))
    listed = {int(win_start[w]): order[w, : win_count[w]].tolist() for w in np.flatnonzero(win_live).tolist()}
    assert listed == {start: [k for _, k in sorted(pairs)] for start, pairs in by_window.items()}


@KERNEL_SETTINGS
@given(
    keys=st.lists(st.integers(-5, 40) | st.integers(-(2**63), 2**63 - 1), max_size=60),
    direct=st.integers(0, 32),
)
def test_int_key_slots_agrees_with_the_reference(keys: list[int], direct: int) -> None:
    table_size = 1 << (2 * len(keys) + 1).bit_length()
    state = np.zeros(2, np.int64)
    slot_keys = np.zeros(len(keys) + 1, np.int64)
    slots = wk.int_key_slots(
        np.array(keys, np.int64), np.full(direct, -1, np.int32), np.zeros(table_size, np.int64),
        np.full(table_size, -1, np.int32), slot_keys, state,
    )  # fmt: skip
    reference: dict[int, int] = {}
    assert slots.tolist() == wk.int_key_slots_reference(keys, reference)
    assert slot_keys[: state[0]].tolist() == list(reference)
    assert state[1] == max(keys, default=-(2**63))


@KERNEL_SETTINGS
@given(
    batches=st.lists(
        st.tuples(
            st.booleans(),
            st.lists(st.sampled_from(["a", "b", "é", "", "a\x00", "😀", "k1", "k2"]), max_size=30),
        ),
        max_size=8,
    ),
    compact_after=st.integers(0, 8),
)
def test_string_keys_get_the_slots_of_their_str(
    batches: list[tuple[bool, list[str]]], compact_after: int
) -> None:
    """``_ObjectKeys``: keys that come as ``Strings`` (looked up by their bytes through
    ``string_key_slots``) and keys that come as str (the dict) share one set of slots, also
    after compaction."""
    from weir.codec.strings import Strings
    from weir.operators.window.vector import _ObjectKeys

    class Checks:
        def check_new_keys(self, keys: list[object]) -> None:
            pass

    keys, reference = _ObjectKeys(), _ObjectKeys()
    for i, (as_bytes, batch) in enumerate(batches):
        if i == compact_after and len(keys):
            used = np.arange(0, len(keys), 2, dtype=np.int64)  # keep every other slot
            assert keys.compact(used).tolist() == reference.compact(used).tolist()
        got = (
            keys.string_slots(Strings.from_list(batch), Checks()) if as_bytes else keys.slots(batch, Checks())
        )
        assert got.tolist() == reference.slots(batch, Checks()).tolist()
        assert keys.objects == reference.objects


@KERNEL_SETTINGS
@given(st.lists(st.sampled_from(["a", "b", "é", "", "a\x00", "k1"]), max_size=20), st.sets(st.integers(0, 5)))
def test_string_key_slots_agrees_with_the_reference(keys: list[str], held: set[int]) -> None:
    from weir.codec.strings import Strings

    pool = ["a", "b", "é", "", "a\x00", "k1"]
    table = {pool[i].encode(): slot for slot, i in enumerate(sorted(held))}
    stored = Strings.from_list([pool[i] for i in sorted(held)])
    size = 1 << (2 * len(table) + 1).bit_length()
    table_slots, table_hashes = np.full(size, -1, np.int64), np.zeros(size, np.int64)
    stored_hashes = stored.java_hashes().astype(np.int64)
    wk.insert_string_keys(table_slots, table_hashes, stored_hashes, np.arange(len(table), dtype=np.int64))
    strings = Strings.from_list(keys)
    slots = wk.string_key_slots(
        strings.data, strings.starts, strings.ends, strings.java_hashes().astype(np.int64),
        table_slots, table_hashes, stored.data, stored.starts, stored.ends,
    )  # fmt: skip
    assert slots.tolist() == wk.string_key_slots_reference([k.encode() for k in keys], table)


# -- the operators and the oracle ------------------------------------------------------------------


class Collect(Output):
    def __init__(self) -> None:
        self.records: list[tuple[Any, int]] = []

    def emit(self, batch: Batch) -> None:
        assert batch.timestamps is not None
        self.records.extend(zip(batch.as_list(), batch.timestamps.tolist()))


def start(op: Any) -> Collect:
    out = Collect()
    backend = create_keyed_backend("hashmap", "op", 128, KeyGroupRange(0, 127))
    op.setup(
        OperatorContext(
            task_name="t", operator_name="w", operator_id="op", subtask_index=0, parallelism=1,
            max_parallelism=128, attempt_number=0, batch_mode=False, processing_time_ms=lambda: 0,
            keyed_backend=backend,
        ),
        out,
    )  # fmt: skip
    op.initialize_state()
    op.open()
    return out


def per_record(agg: str, assigner: Any, fast: bool = True) -> WindowOperator:
    key, trigger = wrap_key_selector(lambda r: r[0]), assigner.get_default_trigger()
    if agg in ("sum", "min", "max"):
        op = WindowOperator(
            "w", key, assigner, trigger, 0, None, "reduce", FieldAggregator(agg, 1), None, None
        )
    else:
        function = Count() if agg == "count" else Mean(1)
        op = WindowOperator("w", key, assigner, trigger, 0, None, "aggregate", function, WithKey(), None)
    op.fast = fast
    return op


def oracle(
    agg: str, steps: list[tuple[list[tuple[Any, int]], int]], size: int, slide: int, offset: int
) -> Counter[Any]:
    """Plain Python: a record counts in every window that is not yet complete when it arrives."""
    panes: dict[tuple[int, int], list[Any]] = {}
    watermark = -(1 << 63)
    for batch, next_watermark in steps:
        for (key, value), t in batch:
            for window_start in wk.window_starts_reference(t, size, slide, offset):
                if window_start + size - 1 <= watermark:
                    break
                panes.setdefault((key, window_start), []).append(value)
        watermark = max(watermark, next_watermark)
    out: Counter[Any] = Counter()
    for (key, window_start), values in panes.items():
        if agg == "sum":
            total = values[0]
            for v in values[1:]:
                total = total + v
            result: Any = (key, total)
        elif agg == "min":
            result = (key, min(values))
        elif agg == "max":
            result = (key, max(values))
        elif agg == "count":
            result = (key, len(values))
        else:
            acc = 0.0
            for v in values:
                acc = acc + v
            result = (key, acc / len(values))
        out[(result, window_start + size - 1)] += 1
    return out


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, bool, tuple[int, int, int], list[tuple[list[tuple[Any, int]], int]]]:
    agg = draw(st.sampled_from(AGGS))
    floats = draw(st.booleans())
    shape = draw(windows())
    values_of = FLOATS if floats else INTS
    steps = []
    now, watermark = 0, -(1 << 63)
    for _ in range(draw(st.integers(1, 8))):
        n = draw(st.integers(0, 25))
        batch = []
        for _ in range(n):
            now += draw(st.integers(0, 5))
            t = now - draw(st.integers(0, 60))  # disordered
            batch.append(((draw(st.integers(0, 4)), draw(values_of)), t))
        watermark = max(watermark, now - draw(st.integers(0, 80)))
        steps.append((batch, watermark))
    return agg, floats, shape, steps


@OPERATOR_SETTINGS
@given(run=runs(), hash_store=st.booleans())
def test_vectorized_per_record_and_oracle_agree(
    run: tuple[str, bool, tuple[int, int, int], list[tuple[list[tuple[Any, int]], int]]], hash_store: bool
) -> None:
    dense_cells = vw.DENSE_CELLS
    vw.DENSE_CELLS = 0 if hash_store else dense_cells  # 0: the first batch moves to the hash table
    try:
        check_against_oracle(*run)
    finally:
        vw.DENSE_CELLS = dense_cells


def check_against_oracle(
    agg: str, floats: bool, shape: tuple[int, int, int], steps: list[tuple[list[tuple[Any, int]], int]]
) -> None:
    size, slide, offset = shape
    pair = Types.TUPLE([Types.LONG(), Types.DOUBLE() if floats else Types.LONG()])
    assigner = (
        TumblingEventTimeWindows(size, offset)
        if size == slide
        else SlidingEventTimeWindows(size, slide, offset)
    )
    plan = vector_plan(agg, 1, pair, assigner, assigner.get_default_trigger(), 0, None)
    assert plan is not None
    ops = [
        VectorWindowOperator("w", wrap_key_selector(lambda r: r[0]), assigner, plan, pair, None),
        per_record(agg, assigner, fast=True),
        per_record(agg, assigner, fast=False),
    ]
    outputs = [start(op) for op in ops]
    for batch, watermark in steps:
        for op in ops:
            op.process_batch(Batch([v for v, _ in batch], np.array([t for _, t in batch], np.int64)))
            op.process_watermark(watermark)
    for op in ops:
        op.process_watermark(MAX_WM)
    vectorized, fast, general = (out.records for out in outputs)
    assert vectorized == fast == general
    assert ops[0].metrics.late_records_dropped == ops[2].metrics.late_records_dropped
    assert Counter(vectorized) == oracle(agg, steps, size, slide, offset)


# -- end to end ------------------------------------------------------------------------------------

EVENTS = 3_000


def event(i: int, floats: bool) -> tuple[int, Any, int]:
    """(key, value, event time): at most 400 ms out of order; float values are multiples of
    1/4 so that sums are exact whatever order two channels interleave in."""
    key = (i * 7919) % 13
    value: Any = ((i * 31) % 200 - 100) / 4 if floats else (i * 31) % 200 - 100
    return key, value, i * 5 + (i * 104_729) % 400


def e2e_oracle(agg: str, floats: bool) -> Counter[Any]:
    steps = [([((k, v), t) for k, v, t in (event(i, floats) for i in range(EVENTS))], -(1 << 63))]
    return oracle(agg, steps, 1_000, 500, 0)


@pytest.mark.parametrize("parallelism", [1, 2])
@pytest.mark.parametrize("floats", [False, True], ids=["ints", "floats"])
def test_end_to_end_both_paths_equal_the_oracle(parallelism: int, floats: bool) -> None:
    conf = Configuration()
    conf.set_integer("local.number-taskmanager", 1)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    value_type = Types.DOUBLE() if floats else Types.LONG()
    pair = Types.TUPLE([Types.LONG(), value_type])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(500)
    ).with_timestamp_assigner(lambda e, _: e[2])
    events = [event(i, floats) for i in range(EVENTS)]
    source = env.from_collection(events, type_info=Types.TUPLE([Types.LONG(), value_type, Types.LONG()]))
    pairs = source.assign_timestamps_and_watermarks(strategy).map(lambda e: (e[0], e[1]), output_type=pair)
    keyed = pairs.key_by(lambda p: p[0], key_type=Types.LONG())
    assigner = SlidingEventTimeWindows.of(Time.seconds(1), Time.milliseconds(500))
    branches = []
    for agg in AGGS:
        windowed = keyed.window(assigner)
        built_in = getattr(windowed, agg)(1) if agg != "count" else windowed.count()
        if agg in ("sum", "min", "max"):
            reference = keyed.window(assigner).reduce(FieldAggregator(agg, 1), output_type=pair)
        else:
            function = Count() if agg == "count" else Mean(1)
            reference = keyed.window(assigner).aggregate(function, WithKey())
        for path, stream in (("vectorized", built_in), ("per-record", reference)):
            branches.append(stream.map(lambda r, a=agg, p=path: (a, p, r)))
    results = branches[0].union(*branches[1:]).execute_and_collect(limit=10**6)
    got: dict[tuple[str, str], Counter[Any]] = {}
    for agg, path, record in results:
        got.setdefault((agg, path), Counter())[tuple(record)] += 1
    for agg in AGGS:
        expected = Counter(result for (result, _), n in e2e_oracle(agg, floats).items() for _ in range(n))
        assert got[(agg, "vectorized")] == expected, agg
        assert got[(agg, "per-record")] == expected, agg
