"""Which ``Aggregates``/``RunningAggregates`` run vectorized, and why; errors; rescaling;
when the panes move from the dense arrays to the hash table.

The record-for-record comparisons with the per-record path (random input, allowed
lateness, side outputs, checkpoints crossing paths) are in
tests/property/test_aggregates_properties.py.
"""

from __future__ import annotations

import builtins
import random
from typing import Any

import numpy as np
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.columnar import Aggregates, RunningAggregates, count, first, key, last, mean, sum, window_start
from weir.columnar.aggregates import AggregatesWindowFunction
from weir.common import Types
from weir.core.functions import KeyedProcessFunction, wrap_key_selector
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.window import (
    CountTrigger,
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from weir.errors import UsageError
from weir.keys import KeyGroupRange, assign_to_key_group
from weir.operators import running
from weir.operators.factory import create_operator
from weir.operators.window import WindowOperator, aggregates, create_window_operator, explain
from weir.operators.window import pane_log as pl
from weir.operators.window import vector as vw
from weir.operators.window.aggregates import AggregatesWindowOperator, aggregates_plan

from .test_vector_window import MAX_WM, Run, play

ROW = Types.TUPLE([Types.LONG(), Types.LONG(), Types.DOUBLE(), Types.STRING()])
TUMBLING = TumblingEventTimeWindows.of(1_000)


@pytest.fixture(params=["dense", "hash"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the dense pane arrays, and again with the hash table of panes."""
    if request.param == "hash":
        monkeypatch.setattr(vw, "DENSE_CELLS", 0)  # the first batch moves the panes to the hash table
    return str(request.param)


def window_nodes(env: StreamExecutionEnvironment, kind: str) -> list[Any]:
    graph = env.get_stream_graph()
    return [n for n in graph.nodes.values() if n.operator is not None and n.operator.kind == kind]


def test_the_api_routes_aggregates_and_says_why() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([(1, 2, 0.5, "a")], type_info=ROW).key_by(
        lambda r: r[0], key_type=Types.LONG()
    )
    agg = Aggregates(key(), window_start(), count(), sum(1), mean(2))
    keyed.window(TUMBLING).aggregate(agg).sink_to(DiscardingSink())
    keyed.window(TUMBLING).allowed_lateness(500).aggregate(agg).sink_to(DiscardingSink())
    keyed.window(TumblingProcessingTimeWindows.of(1_000)).aggregate(agg).sink_to(DiscardingSink())
    keyed.window(TUMBLING).aggregate(Aggregates(key(), last(3))).sink_to(DiscardingSink())  # a STRING field
    keyed.window(EventTimeSessionWindows.with_gap(10)).aggregate(agg).sink_to(DiscardingSink())
    keyed.window(TUMBLING).trigger(CountTrigger.of(2)).aggregate(agg).sink_to(DiscardingSink())
    keyed.window(TUMBLING).aggregate(Aggregates(count(), sum(1)), lambda k, w, it: it).sink_to(
        DiscardingSink()
    )
    nodes = window_nodes(env, "window")
    operators = [create_window_operator(node) for node in nodes]
    expected = [True, True, True, False, False, False, False]
    assert [isinstance(op, AggregatesWindowOperator) for op in operators] == expected
    assert [explain(node)[0] for node in nodes] == expected
    reasons = [op.vectorized_reason for op in operators]
    assert all(r.startswith("vectorized: ") for r in reasons[:3])
    assert "last(3)" in reasons[3] and "not a number" in reasons[3]
    assert "EventTimeSessionWindows" in reasons[4]
    assert "CountTrigger" in reasons[5]
    assert "window function" in reasons[6]
    assert all(r.startswith("per-record: ") for r in reasons[3:])


class Plain(KeyedProcessFunction):
    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value


def test_keyed_process_routes_running_aggregates_and_says_why() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([(1, 2, 0.5, "a")], type_info=ROW).key_by(
        lambda r: r[0], key_type=Types.LONG()
    )
    keyed.process(RunningAggregates(key(), count(), sum(1), first(2))).sink_to(DiscardingSink())
    keyed.process(RunningAggregates(key(), first(3))).sink_to(DiscardingSink())
    keyed.process(Plain()).sink_to(DiscardingSink())
    nodes = window_nodes(env, "keyed_process")
    operators = [create_operator(node, {}, 0) for node in nodes]
    assert [type(op).__name__ for op in operators] == [
        "RunningAggregatesOperator",
        "KeyedProcessOperator",
        "KeyedProcessOperator",
    ]
    assert [running.explain(node)[0] for node in nodes] == [True, False, False]
    assert operators[0].vectorized_reason.startswith("vectorized: ")
    assert "first(3)" in operators[1].vectorized_reason
    assert operators[2].vectorized_reason.startswith("per-record: ")


def pair(lateness: int = 0) -> tuple[Any, Any]:
    agg = Aggregates(key(), window_start(), count(), sum(1), mean(2))
    trigger = TUMBLING.get_default_trigger()
    plan, _ = aggregates_plan({"spec": agg.spec, "input_type": ROW}, TUMBLING, trigger, None)
    assert plan is not None
    selector = wrap_key_selector(lambda r: r[0])
    return (
        WindowOperator("w", selector, TUMBLING, trigger, lateness, None, "aggregate", agg, AggregatesWindowFunction(agg.spec), None),
        AggregatesWindowOperator("w", selector, TUMBLING, plan, ROW, None, agg, lateness),
    )  # fmt: skip


def test_a_field_that_is_not_a_number_is_a_clear_error(store: str) -> None:
    run = Run(pair()[1])
    with pytest.raises(UsageError, match=r"field 1 must be a number.*'x'"):
        run.batch([((1, "x", 0.5, "a"), 10)])


def test_restored_state_that_is_no_accumulator_is_a_clear_error(store: str) -> None:
    run = Run(pair()[0])
    run.batch([((1, 2, 0.5, "a"), 10)])
    snapshot = run.checkpoint()
    other = Aggregates(key(), count(), sum(1))  # one slot where the restoring operator has two
    plan, _ = aggregates_plan(
        {"spec": other.spec, "input_type": ROW}, TUMBLING, TUMBLING.get_default_trigger(), None
    )
    assert plan is not None
    op = AggregatesWindowOperator("w", wrap_key_selector(lambda r: r[0]), TUMBLING, plan, ROW, None, other)
    with pytest.raises(UsageError, match="not an accumulator of Aggregates"):
        Run(op, restore=[snapshot])


@pytest.mark.parametrize("lateness", [0, 700])
def test_a_checkpoint_rescales_over_two_key_group_ranges(lateness: int, store: str) -> None:
    rng = random.Random(5)
    events = [
        ((rng.randrange(40), rng.randrange(100), rng.randrange(8) / 4, "s"), i * 7 + rng.randrange(900))
        for i in range(900)
    ]
    steps, i, top = [], 0, 0
    while i < len(events):
        chunk = events[i : i + rng.randrange(1, 50)]
        i += len(chunk)
        top = max(top, *(t for _, t in chunk))
        steps.append((chunk, top - 400))
    cut = len(steps) // 2
    whole = Run(pair(lateness)[0])
    play([whole], steps)
    first_run = Run(pair(lateness)[1])
    play([first_run], steps[:cut], end=False)
    snapshot = first_run.checkpoint()
    got = first_run.records()
    for key_groups in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        half = Run(pair(lateness)[1], restore=[snapshot], key_groups=key_groups)
        half.op.current_watermark = first_run.op.current_watermark
        mine = [
            ([(v, t) for v, t in chunk if assign_to_key_group(v[0], 128) in key_groups], w)
            for chunk, w in steps[cut:]
        ]
        play([half], mine)
        got += half.records()
    assert sorted(map(repr, got)) == sorted(map(repr, whole.records()))
    assert MAX_WM


PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])


def count_and_sum_window(lateness: int = 0) -> AggregatesWindowOperator:
    """``Aggregates(key(), window_start(), count(), sum(1))`` over (key, value) pairs in 1 s
    tumbling event-time windows, with ``lateness`` ms of allowed lateness."""
    agg = Aggregates(key(), window_start(), count(), sum(1))
    plan, _ = aggregates_plan(
        {"spec": agg.spec, "input_type": PAIR}, TUMBLING, TUMBLING.get_default_trigger(), None
    )
    assert plan is not None
    return AggregatesWindowOperator(
        "w", wrap_key_selector(lambda r: r[0]), TUMBLING, plan, PAIR, None, agg, lateness
    )


def count_and_sum(keys: int) -> tuple[Run, list[tuple[tuple[int, int, int, int], int]], dict[str, Any]]:
    """300 s of events, one per ms, over ``keys`` keys, with no watermark until the end (so
    ~300 windows are open at once, as when the periodic watermark fires rarely), run through
    ``Aggregates(key(), window_start(), count(), sum(1))``; and the answer from a dict, in
    firing order (windows by start, panes in creation order)."""
    run = Run(count_and_sum_window())
    rng = np.random.default_rng(3)
    n = 300_000
    times = np.arange(n, dtype=np.int64) + rng.integers(0, 50, n)
    k, v = rng.integers(0, keys, n), rng.integers(-100, 100, n)
    for lo in range(0, n, 4_096):
        part = slice(lo, lo + 4_096)
        run.op.process_batch(Batch(TupleColumns([k[part], v[part]]), times[part]))
    stats = run.op.statistics()
    run.watermark(MAX_WM)
    panes: dict[tuple[int, int], list[int]] = {}
    for t, key_, value in zip(times.tolist(), k.tolist(), v.tolist()):
        pane = panes.setdefault((t - t % 1_000, key_), [0, 0])
        pane[0] += 1
        pane[1] += value
    expected = [
        ((key_, start, c, total), start + 999)
        for (start, key_), (c, total) in sorted(panes.items(), key=lambda item: item[0][0])  # stable
    ]
    return run, expected, stats


def test_many_open_windows_of_many_keys_move_the_panes_to_the_hash_table() -> None:
    run, expected, stats = count_and_sum(10_000)
    assert stats["store"] == "hash"  # dense: 300 windows x 10,000+ key slots, 90% empty
    assert run.records() == expected


def test_many_open_windows_of_few_keys_stay_in_the_dense_arrays() -> None:
    run, expected, stats = count_and_sum(100)
    assert stats["store"] == "dense"  # 512 window slots x 1,024 key slots: under DENSE_CELLS
    assert run.records() == expected


def test_the_pane_log_keeps_its_size_after_a_burst_and_shrinks_once_bursts_are_over() -> None:
    from weir.operators.window import aggregates as ag
    from weir.operators.window import kernels as wk

    panes = ag._AggregatePaneLog(1, 0, 10, 10, 0)
    ops = (np.array([wk.SUM], np.int64), np.empty(0, np.int64))

    def fold(times: np.ndarray, keys: np.ndarray) -> None:
        n = len(times)
        panes.fold(
            times, keys, np.ones((n, 1), np.int64), np.empty((n, 0)), np.empty(0, np.int64), ops, -1, 0, True
        )

    burst = np.arange(100_000, dtype=np.int64)
    fold(np.zeros(len(burst), np.int64), burst)  # 100,000 panes of window [0, 10)
    big = len(panes.rows)
    assert big >= 200_000
    assert panes.take(9, 0) is not None and panes.live == 0
    assert len(panes.rows) == big  # kept for the next burst
    for firing in range(1, ag.SPARSE_FIRINGS + 1):
        start = 10 * firing
        fold(np.array([start, start], np.int64), np.array([1, 2], np.int64))  # a quiet stretch
        due = panes.take(start + 9, 0)
        assert due is not None and len(due) == 2
        if firing < ag.SPARSE_FIRINGS:
            assert len(panes.rows) == big, firing
    assert len(panes.rows) < big // 16  # bursts are over: no big index to clear at every firing


def pane_log_run(n: int = 40_000) -> tuple[Run, np.ndarray, np.ndarray]:
    """A count-and-sum window whose ``n`` records (one per ms, random keys of 10,000) are in
    its pane log, with snapshots deferred; returns the run, the records' times and keys."""
    run = Run(count_and_sum_window())
    rng = np.random.default_rng(5)
    times = np.arange(n, dtype=np.int64)
    keys, values = rng.integers(0, 10_000, n), rng.integers(-9, 9, n)
    run.op.process_batch(Batch(TupleColumns([keys, values]), times))
    assert run.op.statistics()["store"] == "hash"
    run.op.defer_pane_snapshots = True
    return run, times, keys


def take_barrier(run: Run) -> Any:
    """The pane snapshot of a barrier, not yet packed."""
    run.op.prepare_snapshot_pre_barrier(1)
    snapshot, run.op.pane_snapshot = run.op.pane_snapshot, None
    return snapshot


def assert_holds(snapshot: Any, panes: Any) -> None:
    """``snapshot``'s panes are ``panes`` (an export of the log), in firing order."""
    assert len(snapshot) == len(panes)
    assert snapshot._starts.tolist() == panes.starts.tolist()
    assert snapshot._pane_keys.tolist() == panes.keys.tolist()
    assert snapshot._fired.tolist() == panes.fired.tolist()
    want = aggregates.encoded_accumulators(run_plan(), panes.counts, *panes.accs)
    assert snapshot._accumulators().tolist() == want.tolist()


def run_plan() -> Any:
    return count_and_sum_window().aggregates


def test_a_deferred_pane_log_snapshot_packs_the_live_rows_and_reuses_the_packed_memory_once_it_is_gone() -> (
    None
):
    """The asynchronous phase packs a barrier's live panes into a mapping of the operator's
    copy space; a later snapshot's panes go where the first's were only once the first
    snapshot is gone, never while it lives."""
    import gc

    run, _, _ = pane_log_run()

    def barrier() -> Any:
        return take_barrier(run)

    def address(snapshot: Any) -> int:
        """Where the snapshot's panes were packed (it packs them: call it first)."""
        return int(snapshot._load.__self__._pack()[0][2].ctypes.data)

    first = barrier()
    expected = run.op.panes.export()  # what the snapshot holds: the live panes in firing order
    at_first = address(first)
    assert_holds(first, expected)
    second = barrier()  # the first is alive (its columns were built, its copy is not reused)
    assert address(second) != at_first
    at_second = address(second)
    del first
    gc.collect()
    third = barrier()  # the second is alive: the third goes where the first was
    assert address(third) == at_first
    del second, third
    gc.collect()
    fourth = barrier()
    assert address(fourth) in (at_first, at_second)
    assert_holds(fourth, expected)


def written_rows(blocks: set[int], n_rows: int) -> int:
    """The rows in use of these blocks of a pane log."""
    return builtins.sum(min(n_rows, (b + 1) << pl.BLOCK_SHIFT) - (b << pl.BLOCK_SHIFT) for b in blocks)


def test_a_barrier_packs_only_the_blocks_of_the_pane_log_written_since_the_mirror_it_updates() -> None:
    """A barrier brings the log's mirror up to date: every row at first, then only the
    blocks written since the mirror's barrier. A mirror whose panes a snapshot has not
    packed yet is not touched: the barrier lays out another, and both snapshots hold their
    own barrier's panes. A value too wide for the mirror's columns lays the mirror out anew."""
    run, times, keys = pane_log_run()
    log = run.op.panes
    packed = lambda: run.op.statistics()["barrier_rows_packed"]  # noqa: E731

    def fold(t: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        run.op.process_batch(Batch(TupleColumns([k, v]), t))

    n_rows = int(log.state[pl.ROWS])
    first = take_barrier(run)
    assert packed() == n_rows  # a first barrier packs every row
    assert_holds(first, log.export())
    del first

    before = packed()
    second = take_barrier(run)
    assert packed() == before  # nothing written since
    assert_holds(second, log.export())
    del second

    # one pane of the first block gets a record, and 3,000 new panes come after the rows
    row = int(np.flatnonzero(log.rows[:n_rows, 1] == keys[0])[0])
    fold(times[:1], keys[:1], np.array([7], np.int64))
    fold(np.full(3_000, 50_000, np.int64), np.arange(3_000, dtype=np.int64), np.ones(3_000, np.int64))
    grown = int(log.state[pl.ROWS])
    assert grown == n_rows + 3_000
    written = {row >> pl.BLOCK_SHIFT, *range(n_rows >> pl.BLOCK_SHIFT, ((grown - 1) >> pl.BLOCK_SHIFT) + 1)}
    before = packed()
    third = take_barrier(run)
    assert packed() - before == written_rows(written, grown)
    held = log.export()

    # the third's mirror is not packed yet: the next barrier packs every row elsewhere
    fold(times[1:2], keys[1:2], np.array([5], np.int64))
    before = packed()
    fourth = take_barrier(run)
    assert packed() - before == grown
    assert_holds(fourth, log.export())
    assert_holds(third, held)  # the write after the third's barrier is not in it
    del third, fourth

    # a sum wider than the mirror's column: every row again, in wider columns
    fold(times[2:3], keys[2:3], np.array([1 << 40], np.int64))
    before = packed()
    fifth = take_barrier(run)
    assert packed() - before == grown
    assert_holds(fifth, log.export())
    del fifth
    before = packed()
    assert_holds(take_barrier(run), log.export())
    assert packed() == before


def test_after_a_compaction_a_barrier_packs_every_row_with_the_last_mirrors_widths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compaction moves the rows, so the next barrier packs every one of them; their values
    are those the last mirror held, so it lays them out with that mirror's bases and widths
    without reading the rows' bounds first."""
    run, _, _ = pane_log_run()
    log = run.op.panes
    packed = lambda: run.op.statistics()["barrier_rows_packed"]  # noqa: E731
    assert_holds(take_barrier(run), log.export())
    run.op.process_batch(Batch(TupleColumns([np.arange(5), np.ones(5, np.int64)]), np.full(5, 1_000)))
    run.watermark(20_999)  # most panes fire and are gone: dead rows
    log._relayout(len(log.rows))  # as ``_reserve`` does when the rows are full
    bounds_read = []
    real_bounds = pl.live_bounds
    monkeypatch.setattr(pl, "live_bounds", lambda *a: bounds_read.append(1) or real_bounds(*a))
    before = packed()
    assert_holds(take_barrier(run), log.export())
    assert packed() - before == int(log.state[pl.ROWS]) == log.live
    assert not bounds_read
