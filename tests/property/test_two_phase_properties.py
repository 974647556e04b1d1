"""Two-phase window aggregation gives the one-phase rows, in the same order.

The writer's local phase (``two_phase.LocalAggregator``) feeds partial rows to an
``AggregatesWindowOperator`` taking partial input; the per-record ``WindowOperator`` gets the
records themselves. Same batches, same watermarks, with allowed lateness (late records fire
windows again), NaN in float min/max fields, a tiny hold capacity (rows handed over in the
middle of a batch), holding or not, and small batches arriving as tuples (as the small codec
decodes them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.property.test_aggregates_properties import ROW, outputs_of, play, runs, shapes, window_pair
from tests.unit.operators.test_vector_window import MAX_WM, Run
from weir.codec.batch import Batch, TupleColumns
from weir.common import Types
from weir.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from weir.operators.window import kernels as wk
from weir.operators.window import two_phase
from weir.operators.window.aggregates import aggregates_plan

SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])

#: sums and means of int fields only (a float sum is one phase); extremes, first and last of any
OUTPUTS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["sum", "mean"]), st.sampled_from([1, 3])),
        st.tuples(st.sampled_from(["min", "max", "first", "last"]), st.sampled_from([1, 2, 3])),
    ),
    max_size=5,
)


def steps_of() -> st.SearchStrategy[list[tuple[list[tuple[Any, int]], int]]]:
    """Batches of disordered records whose float field may be NaN, each then a watermark."""
    floats = st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.just(float("nan")))
    return runs(floats=floats).map(lambda run: run[0])


def as_tuples(batch: Batch) -> Batch:
    """A batch of partial rows as the small codec decodes it: a list of tuples."""
    return Batch(list(batch.values), batch.timestamps)


@SETTINGS
@given(
    drawn=OUTPUTS, shape=shapes(), lateness=st.sampled_from([0, 0, 30, 200]), steps=steps_of(),
    hold=st.booleans(), capacity=st.sampled_from([2, 5, 1 << 14]), small=st.booleans(),
    adaptive=st.sampled_from([None, (1, 0.0), (3, 0.5), (7, 1.0)]), data=st.data(),
)  # fmt: skip
def test_two_phase_gives_the_per_record_rows_in_order(
    drawn: list[tuple[str, int]],
    shape: tuple[int, int, int],
    lateness: int,
    steps: list[tuple[list[tuple[Any, int]], int]],
    hold: bool,
    capacity: int,
    small: bool,
    adaptive: tuple[int, float] | None,
    data: st.DataObject,
) -> None:
    """With or without adaptive local aggregation (``adaptive``: records sampled, distinct-rate
    threshold; a rate of 0.0 passes records through after the sample). Then a checkpoint of the two-phase window, taken between two steps (the writer has
    handed its rows over at the barrier), restores into the per-record window."""
    size, slide, offset = shape
    cut = data.draw(st.integers(0, len(steps)))
    if size != slide:  # sliding: no last() and no float min/max (one phase, see two_phase)
        drawn = [(kind, f) for kind, f in drawn if kind != "last" and not (f == 2 and kind in ("min", "max"))]
    assigner = (
        TumblingEventTimeWindows(size, offset)
        if size == slide
        else SlidingEventTimeWindows(size, slide, offset)
    )
    per_record = Run(window_pair(drawn, assigner, lateness, None)[0])
    play([per_record], [*steps, ([], MAX_WM)])

    def two_phase_run() -> tuple[Run, two_phase.LocalAggregator]:
        window_op = window_pair(drawn, assigner, lateness, None)[1]
        agg_plan, _ = aggregates_plan(
            {"spec": window_op.spec, "input_type": ROW}, assigner, assigner.get_default_trigger(), None
        )
        assert agg_plan is not None
        layout = two_phase.PartialLayout(agg_plan, 0, Types.LONG(), slide, offset)
        window_op.use_partial_input(layout)
        sampling, rate = adaptive if adaptive is not None else (None, 0.5)
        local = two_phase.LocalAggregator(
            layout, "test", hold=hold, capacity=capacity, sampling=sampling, distinct_rate=rate
        )
        return Run(window_op), local

    def play_two_phase(window: Run, local: two_phase.LocalAggregator, part: list[Any]) -> None:
        sent = -(1 << 63)

        def deliver(batches: list[Batch]) -> None:
            for b in batches:
                assert isinstance(b.values, TupleColumns)
                window.op.process_batch(as_tuples(b) if small else b)

        for batch, watermark in part:
            if batch:
                records = Batch([v for v, _ in batch], np.array([t for _, t in batch], np.int64))
                deliver(local.add(records, sent))
            flushed = local.flush()  # the writer hands its rows over before the watermark
            deliver([flushed] if flushed is not None else [])
            window.watermark(watermark)
            sent = watermark

    window, local = two_phase_run()
    play_two_phase(window, local, [*steps, ([], MAX_WM)])
    assert repr(window.records()) == repr(per_record.records())  # repr: NaN equals NaN
    assert window.op.metrics.late_records_dropped == per_record.op.metrics.late_records_dropped
    # a checkpoint of the two-phase window at ``cut`` restores into the per-record path
    first, first_local = two_phase_run()
    play_two_phase(first, first_local, steps[:cut])
    snapshot = first.checkpoint()
    restored = Run(window_pair(drawn, assigner, lateness, None)[0], restore=[snapshot])
    restored.op.current_watermark = first.op.current_watermark  # a task restores no watermark
    play([restored], [*steps[cut:], ([], MAX_WM)])
    assert repr(first.records() + restored.records()) == repr(per_record.records())


def test_a_batch_folds_into_one_row_per_key_and_slice_in_first_record_order() -> None:
    spec_outputs = outputs_of([("sum", 1), ("min", 1), ("last", 3)], True)
    from weir.columnar import Aggregates

    agg = Aggregates(*spec_outputs)
    assigner = TumblingEventTimeWindows(10, 0)
    plan, _ = aggregates_plan(
        {"spec": agg.spec, "input_type": ROW}, assigner, assigner.get_default_trigger(), None
    )
    assert plan is not None
    local = two_phase.LocalAggregator(two_phase.PartialLayout(plan, 0, Types.LONG(), 10, 0), "test")
    records = [(7, 5, 0.0, 1), (3, 2, 0.0, 2), (7, -4, 0.0, 3), (7, 9, 0.0, 4), (3, 1, 0.0, 5)]
    times = np.array([1, 2, 3, 12, 4], np.int64)
    assert local.add(Batch(records, times), -(1 << 63)) == []  # held
    assert local.held == 3
    out = local.flush()
    assert out is not None and local.held == 0
    assert list(out.values) == [(7, 2, 1, -4, 3), (3, 2, 3, 1, 5), (7, 1, 9, 9, 4)]
    assert out.timestamps.tolist() == [1, 2, 12]
    # behind the watermark: a row per record, handed over at once
    again = local.add(Batch(records[:2], np.array([1, 2], np.int64)), 9)
    assert [list(b.values) for b in again] == [[(7, 1, 5, 5, 1), (3, 1, 2, 2, 2)]]


def test_the_local_phase_passes_records_through_once_a_sample_shows_combining_does_not_pay() -> None:
    """Flink's adaptive local hash aggregation: after ``sampling`` records, a local phase that
    made more rows than ``distinct_rate`` of them sends every record as a row of its own."""
    from weir.columnar import Aggregates

    agg = Aggregates(*outputs_of([("sum", 1)], True))
    assigner = TumblingEventTimeWindows(1000, 0)
    plan, _ = aggregates_plan(
        {"spec": agg.spec, "input_type": ROW}, assigner, assigner.get_default_trigger(), None
    )
    assert plan is not None
    layout = two_phase.PartialLayout(plan, 0, Types.LONG(), 1000, 0)
    times = np.arange(8, dtype=np.int64)

    def batch(keys: list[int]) -> Batch:
        return Batch([(k, 10 * k, 0.0, 0) for k in keys], times[: len(keys)])

    distinct = two_phase.LocalAggregator(layout, "test", sampling=8, distinct_rate=0.5)
    assert distinct.add(batch([1, 2, 3, 4]), -(1 << 63)) == [] and not distinct.passing_through
    # 8 records made 8 rows: the held rows go out and later records pass through
    out = distinct.add(batch([5, 6, 7, 8]), -(1 << 63))
    assert distinct.passing_through and [len(b) for b in out] == [8]
    assert distinct.add(batch([1, 1, 1]), -(1 << 63)) == []  # held until the writer flushes
    passed = distinct.flush()
    assert passed is not None and list(passed.values) == [(1, 1, 10)] * 3
    assert passed.timestamps.tolist() == [0, 1, 2]
    # a record whose slice ends at or behind the watermark may fire its window again: at once
    late = distinct.add(batch([4, 5]), 999)
    assert [list(b.values) for b in late] == [[(4, 1, 40), (5, 1, 50)]]

    repeated = two_phase.LocalAggregator(layout, "test", sampling=8, distinct_rate=0.5)
    repeated.add(batch([1, 2, 1, 2]), -(1 << 63))
    repeated.add(batch([1, 2, 1, 2]), -(1 << 63))
    assert not repeated.passing_through and repeated.sampling is None  # decided: keep combining
    flushed = repeated.flush()
    assert flushed is not None and list(flushed.values) == [(1, 4, 40), (2, 4, 80)]


@SETTINGS
@given(
    slide=st.integers(1, 40), offset=st.integers(-39, 39), watermark=st.integers(-50, 200),
    ops=st.lists(st.sampled_from([wk.SUM, wk.MIN, wk.MAX, wk.FIRST, wk.LAST]), max_size=3),
    records=st.lists(st.tuples(st.integers(0, 5), st.integers(-20, 300)), max_size=60), data=st.data(),
)  # fmt: skip
def test_local_aggregate_agrees_with_its_reference(
    slide: int,
    offset: int,
    watermark: int,
    ops: list[int],
    records: list[tuple[int, int]],
    data: st.DataObject,
) -> None:
    n, m = len(records), len(ops)
    offset %= slide
    values = [[data.draw(st.integers(-100, 100)) for _ in range(m)] for _ in range(n)]
    expected = wk.local_aggregate_reference(
        [t for _, t in records], [k for k, _ in records], values, ops, slide, offset, watermark
    )
    cap = max(n, 1)
    table = np.zeros(1 << (2 * cap - 1).bit_length(), np.int64)
    key, piece, time, count = (np.empty(cap, np.int64) for _ in range(4))
    iacc, facc = np.empty((cap, m), np.int64), np.empty((cap, 0), np.float64)
    state = np.zeros(3, np.int64)
    wk.local_aggregate(
        np.array([t for _, t in records], np.int64), np.array([k for k, _ in records], np.int64),
        np.array(values, np.int64).reshape(n, m), np.empty((n, 0), np.float64), np.array(ops, np.int64),
        np.empty(0, np.int64), slide, offset, watermark, 0, table, key, piece, time, count, iacc, facc, state,
    )  # fmt: skip
    rows = int(state[wk.HELD])
    assert int(state[wk.HELD_STOP]) == n
    got = [(int(key[r]), int(piece[r]), int(time[r]), int(count[r]), iacc[r].tolist()) for r in range(rows)]
    assert got == expected
    assert int(state[wk.HELD_ALONE]) == sum(
        1 for t in (t for _, t in records) if t - (t - offset) % slide + slide - 1 <= watermark
    )
