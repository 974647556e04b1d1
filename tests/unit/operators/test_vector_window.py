"""The vectorized window built-ins against the per-record WindowOperator, record for record.

Both operators get the same batches and watermarks; their outputs (values, timestamps and
order), late records and checkpoints must be the same. Checkpoints are taken the way a
task takes them (``prepare_snapshot_pre_barrier`` then the backend's and the timers'
snapshots) and restored the way a task restores them (backend and timers first, then
``initialize_state``), into either operator, on either backend, and split over two
key-group ranges as a rescale does.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.common import Time, Types
from weir.common.types import Row
from weir.core.aggregators import Count, FieldAggregator, Mean, WithKey
from weir.core.functions import KeySelector, wrap_key_selector
from weir.datastream import OutputTag, StreamExecutionEnvironment
from weir.datastream.connectors.builtin import DiscardingSink
from weir.datastream.window import (
    CountTrigger,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from weir.errors import ProtocolViolation, UsageError
from weir.keys import KeyGroupRange
from weir.operators.base import OperatorContext
from weir.operators.window import WindowOperator, create_window_operator
from weir.operators.window import vector as vw
from weir.operators.window.vector import (
    IDENTITY,
    VectorWindowOperator,
    probe_key_field,
    vector_plan,
)
from weir.state import create_keyed_backend

from .operator_harness import CollectingOutput

MAX_WM = (1 << 63) - 1
PAIR = Types.TUPLE([Types.LONG(), Types.LONG()])
MIXED = Types.TUPLE([Types.LONG(), Types.DOUBLE(), Types.LONG()])
NAMED = Types.ROW_NAMED(["id", "name", "amount"], [Types.LONG(), Types.STRING(), Types.DOUBLE()])
TUMBLING = TumblingEventTimeWindows.of(Time.seconds(5))
SLIDING = SlidingEventTimeWindows.of(Time.seconds(6), Time.seconds(2))
AGGS = ["sum", "min", "max", "count", "mean"]


# -- driving one operator like a task does ---------------------------------------------------------


class Run:
    """One operator subtask: setup, optional restore, initialize_state, open; then batches."""

    def __init__(
        self,
        op: Any,
        backend: Any = None,
        restore: list[tuple[Any, Any]] | None = None,
        key_groups: KeyGroupRange | None = None,
    ) -> None:
        self.op = op
        self.now_ms = 0
        self.output = CollectingOutput()
        key_groups = key_groups or KeyGroupRange(0, 127)
        self.backend = backend or create_keyed_backend("hashmap", "op", 128, key_groups)
        op.setup(
            OperatorContext(
                task_name="test", operator_name=op.name, operator_id="op", subtask_index=0, parallelism=1,
                max_parallelism=128, attempt_number=0, batch_mode=False,
                processing_time_ms=lambda: self.now_ms, keyed_backend=self.backend,
            ),
            self.output,
        )  # fmt: skip
        if restore:
            self.backend.restore([keyed for keyed, _ in restore])
            op.timers.restore([timers for _, timers in restore], self.backend.key_group_range)
        op.initialize_state()
        op.open()

    def batch(self, events: list[tuple[Any, int]]) -> None:
        values = [v for v, _ in events]
        self.op.process_batch(Batch(values, np.array([t for _, t in events], dtype=np.int64)))

    def watermark(self, ts: int) -> None:
        self.op.process_watermark(ts)

    def checkpoint(self) -> tuple[Any, Any]:
        self.op.prepare_snapshot_pre_barrier(1)
        return self.backend.snapshot(), self.op.timers.snapshot()

    def records(self) -> list[tuple[Any, int | None]]:
        return self.output.records


def per_record_op(
    agg: str, field: Any, assigner: Any = TUMBLING, key: Any = None, late: Any = None
) -> WindowOperator:
    selector = wrap_key_selector(key or (lambda r: r[0]))
    trigger = assigner.get_default_trigger()
    if agg in ("sum", "min", "max"):
        return WindowOperator(
            "w", selector, assigner, trigger, 0, late, "reduce", FieldAggregator(agg, field), None, None
        )
    function = Count() if agg == "count" else Mean(field)
    return WindowOperator("w", selector, assigner, trigger, 0, late, "aggregate", function, WithKey(), None)


def vector_op(
    agg: str, field: Any, input_type: Any, assigner: Any = TUMBLING, key: Any = None, late: Any = None
) -> VectorWindowOperator:
    plan = vector_plan(agg, field, input_type, assigner, assigner.get_default_trigger(), 0, None)
    assert plan is not None, f"{agg}({field}) over {input_type} should run vectorized"
    return VectorWindowOperator(
        "w", wrap_key_selector(key or (lambda r: r[0])), assigner, plan, input_type, late
    )


def disordered(n: int, seed: int, make: Any, disorder_ms: int = 3_000) -> list[tuple[Any, int]]:
    rng = random.Random(seed)
    events = [(make(rng), i * 20 + rng.randrange(disorder_ms)) for i in range(n)]
    return events


Step = tuple[list[tuple[Any, int]], int]


def steps_of(events: list[tuple[Any, int]], seed: int, bound_ms: int = 2_000) -> list[Step]:
    """Batches of random sizes, each followed by a watermark (max seen - bound)."""
    rng = random.Random(seed)
    steps, i, max_ts = [], 0, -(1 << 62)
    while i < len(events):
        chunk = events[i : i + rng.randrange(1, 60)]
        i += len(chunk)
        max_ts = max(max_ts, *(t for _, t in chunk))
        steps.append((chunk, max_ts - bound_ms))
    return steps


def play(runs: list[Run], steps: list[Step], end: bool = True) -> None:
    for chunk, watermark in steps:
        for run in runs:
            run.batch(chunk)
            run.watermark(watermark)
    if end:
        for run in runs:
            run.watermark(MAX_WM)


def feed(runs: list[Run], events: list[tuple[Any, int]], seed: int) -> None:
    """The same batches and watermarks into every run, then the end of event time."""
    play(runs, steps_of(events, seed))


def both(agg: str, field: Any, input_type: Any, **kw: Any) -> tuple[Run, Run]:
    return Run(per_record_op(agg, field, **kw)), Run(vector_op(agg, field, input_type, **kw))


# -- eligibility -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "eligible"),
    [
        (("sum", 1, PAIR, TUMBLING, EventTimeTrigger(), 0, None), True),
        (("mean", 1, MIXED, SLIDING, EventTimeTrigger(), 0, None), True),
        (("count", 0, None, TUMBLING, EventTimeTrigger(), 0, None), True),  # count needs no field
        (
            (
                "max",
                "amount",
                NAMED,
                TumblingProcessingTimeWindows.of(1000),
                ProcessingTimeTrigger(),
                0,
                None,
            ),
            True,
        ),
        (("sum", 0, Types.DOUBLE(), TUMBLING, EventTimeTrigger(), 0, None), True),
        (("min_by", 1, PAIR, TUMBLING, EventTimeTrigger(), 0, None), False),  # not a vectorized built-in
        (("sum", 1, PAIR, TUMBLING, EventTimeTrigger(), 100, None), False),  # allowed lateness
        (("sum", 1, PAIR, TUMBLING, EventTimeTrigger(), 0, 3), False),  # evictor
        (("sum", 1, PAIR, TUMBLING, PurgingTrigger.of(CountTrigger.of(2)), 0, None), False),
        (("sum", 1, PAIR, TumblingProcessingTimeWindows.of(1000), EventTimeTrigger(), 0, None), False),
        (("sum", 1, PAIR, EventTimeSessionWindows.with_gap(1000), EventTimeTrigger(), 0, None), False),
        (("sum", 1, PAIR, GlobalWindows.create(), CountTrigger.of(2), 0, None), False),
        (("sum", 1, None, TUMBLING, EventTimeTrigger(), 0, None), False),  # untyped
        (("sum", 1, NAMED, TUMBLING, EventTimeTrigger(), 0, None), False),  # a STRING field
        (("sum", 2, PAIR, TUMBLING, EventTimeTrigger(), 0, None), False),  # no such field
        (
            ("sum", 1, Types.TUPLE([Types.LONG(), Types.BOOLEAN()]), TUMBLING, EventTimeTrigger(), 0, None),
            False,
        ),
        (("sum", 1, Types.LONG(), TUMBLING, EventTimeTrigger(), 0, None), False),  # a LONG has only field 0
        (
            ("sum", "f1", Types.ROW([Types.LONG(), Types.LONG()]), TUMBLING, EventTimeTrigger(), 0, None),
            False,
        ),
    ],
)
def test_which_windows_run_vectorized(args: tuple[Any, ...], eligible: bool) -> None:
    assert (vector_plan(*args) is not None) == eligible


def test_the_api_routes_eligible_built_ins_to_the_vectorized_operator() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([(1, 2)], type_info=PAIR).key_by(lambda p: p[0])
    keyed.window(TUMBLING).sum(1).sink_to(DiscardingSink())
    keyed.window(TUMBLING).allowed_lateness(10).sum(1).sink_to(DiscardingSink())
    keyed.window(TUMBLING).count().sink_to(DiscardingSink())
    keyed.window(TUMBLING).reduce(lambda a, b: a).sink_to(DiscardingSink())
    graph = env.get_stream_graph()
    kinds = [
        type(create_window_operator(node)).__name__
        for node in graph.nodes.values()
        if node.operator is not None and node.operator.kind == "window"
    ]
    assert kinds == ["VectorWindowOperator", "WindowOperator", "VectorWindowOperator", "WindowOperator"]


class FirstField(KeySelector):
    def get_key(self, value: Any) -> Any:
        return value[0]


@pytest.mark.parametrize(
    ("selector", "input_type", "expected"),
    [
        (lambda r: r[0], PAIR, 0),
        (lambda r: r[-1], PAIR, 1),
        (lambda r: r.name, NAMED, 1),
        (lambda r: r["amount"], NAMED, 2),
        (lambda n: n, Types.LONG(), IDENTITY),
        (FirstField().get_key, PAIR, 0),
        (lambda r: r[0] + 1, PAIR, None),
        (lambda r: (r[0], r[1]), PAIR, None),
        (lambda r: r[0] if r[1] > 0 else r[1], PAIR, None),
        (lambda r: r[5], PAIR, None),
    ],
)
def test_the_key_probe_finds_field_selectors_only(selector: Any, input_type: Any, expected: Any) -> None:
    assert probe_key_field(selector, input_type) == expected


# -- the same records as the per-record path -------------------------------------------------------


@pytest.fixture(params=["dense", "hash"])
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the dense pane arrays, and again with the hash table they fall back to."""
    if request.param == "hash":
        monkeypatch.setattr(vw, "DENSE_CELLS", 0)  # the first batch moves the panes to the hash table
    return str(request.param)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("assigner", [TUMBLING, SLIDING], ids=["tumbling", "sliding"])
@pytest.mark.parametrize("field", [1, 2], ids=["float", "int"])
def test_same_records_as_the_per_record_path(agg: str, assigner: Any, field: int, store: str) -> None:
    events = disordered(1_500, 1, lambda r: (r.randrange(7), r.uniform(-50, 50), r.randrange(-1000, 1000)))
    slow, fast = both(agg, field, MIXED, assigner=assigner)
    feed([slow, fast], events, seed=2)
    assert len(slow.records()) > 20
    assert fast.records() == slow.records()
    late = slow.op.metrics.late_records_dropped
    assert fast.op.metrics.late_records_dropped == late
    assert fast.op.statistics()["store"] == store
    assert late > 0 or assigner is SLIDING  # sliding windows reach further: these records are never late


@pytest.mark.parametrize("agg", AGGS)
def test_string_keys_named_rows_and_attribute_selectors(agg: str, store: str) -> None:
    def make(r: random.Random) -> Row:
        return Row(id=r.randrange(100), name=f"n{r.randrange(9)}", amount=r.randrange(1000) / 8)

    events = disordered(800, 3, make)
    key = lambda r: r.name  # noqa: E731
    slow = Run(per_record_op(agg, "amount", key=key))
    fast = Run(vector_op(agg, "amount", NAMED, key=key))
    feed([slow, fast], events, seed=4)
    assert fast.records() == slow.records() and len(slow.records()) > 10
    assert fast.op.statistics()["key_slots"] is not None  # strings get key slots


@pytest.mark.parametrize("agg", AGGS)
def test_numeric_streams_keyed_by_the_record_itself(agg: str, store: str) -> None:
    events = disordered(1_000, 5, lambda r: r.randrange(-20, 20))
    slow = Run(per_record_op(agg, 0, key=lambda n: n))
    fast = Run(vector_op(agg, 0, Types.LONG(), key=lambda n: n))
    rng = random.Random(6)
    for start in range(0, len(events), 100):  # numpy batches, as the typed codec decodes them
        chunk = events[start : start + rng.randrange(1, 100)]
        batch = Batch(np.array([v for v, _ in chunk]), np.array([t for _, t in chunk]))
        for run in (slow, fast):
            run.op.process_batch(batch)
            run.watermark(max(t for _, t in chunk) - 2_000)
    for run in (slow, fast):
        run.watermark(MAX_WM)
    assert fast.records() == slow.records() and fast.records()
    assert fast.op.statistics()["key_slots"] is None  # int64 keys are their own pane keys


@pytest.mark.parametrize(("agg", "key", "keys_as"), [("count", 0, np.ndarray), ("mean", 1, list)])
def test_count_and_mean_fire_columns_not_tuples(agg: str, key: int, keys_as: type) -> None:
    events = [((k, f"s{k}", k * 10), t) for t in (1, 2) for k in (5, 9)]
    fired: list[Batch] = []
    run = Run(
        vector_op(agg, 2, Types.TUPLE([Types.LONG(), Types.STRING(), Types.LONG()]), key=lambda r: r[key])
    )
    run.output.emit = fired.append  # type: ignore[method-assign]
    run.batch(events)
    run.watermark(MAX_WM)
    (batch,) = fired
    assert isinstance(batch.values, TupleColumns) and isinstance(batch.values.columns[0], keys_as)
    assert batch.values._records is None  # nothing read the records yet
    expected = {"count": [(5, 2), (9, 2)], "mean": [("s5", 50.0), ("s9", 90.0)]}[agg]
    assert batch.as_list() == expected


def test_a_selector_that_is_not_a_field_is_called_per_record() -> None:
    events = disordered(600, 7, lambda r: (r.randrange(50), r.randrange(100)))
    key = lambda r: r[0] % 4  # noqa: E731
    slow, fast = Run(per_record_op("sum", 1, key=key)), Run(vector_op("sum", 1, PAIR, key=key))
    feed([slow, fast], events, seed=8)
    assert fast.records() == slow.records() and fast.op.statistics()["key_field"] is None


def test_a_probe_that_misreads_the_selector_falls_back_to_calling_it() -> None:
    def key(r: Any) -> Any:  # a field on real tuples, another field on the probe
        return r[0] if isinstance(r, tuple) else r[1]

    events = disordered(400, 9, lambda r: (r.randrange(5), r.randrange(100)))
    fast = Run(vector_op("sum", 1, PAIR, key=key))
    assert fast.op.statistics()["key_field"] == 1
    slow = Run(per_record_op("sum", 1, key=key))
    feed([slow, fast], events, seed=10)
    assert fast.records() == slow.records()
    assert fast.op.statistics()["key_field"] is None


def test_a_none_key_in_an_integer_field_switches_to_object_keys() -> None:
    row = Types.ROW([Types.LONG(), Types.LONG()])
    slow, fast = Run(per_record_op("count", 0)), Run(vector_op("count", 0, row))
    events = [(Row(1, 5), 10), (Row(2, 5), 20), (Row(None, 1), 30), (Row(1, 1), 40)]
    for run in (slow, fast):
        run.batch(events[:2])
        run.batch(events[2:])
        run.watermark(MAX_WM)
    assert fast.records() == slow.records() == [((1, 2), 4_999), ((2, 1), 4_999), ((None, 1), 4_999)]


def test_sum_min_max_keep_the_first_record_and_its_row_kind() -> None:
    from weir.common.types import RowKind

    first = Row(1, 5)
    first.set_row_kind(RowKind.UPDATE_AFTER)
    row = Types.ROW([Types.LONG(), Types.LONG()])
    for agg in ("sum", "min", "max"):
        slow, fast = Run(per_record_op(agg, 1)), Run(vector_op(agg, 1, row))
        for run in (slow, fast):
            run.batch([(first, 1), (Row(1, 9), 2), (Row(1, 3), 3)])
            run.batch([(first, 5_001)])  # a pane of one record: the record itself comes out
            run.watermark(MAX_WM)
        got = [(v, v.get_row_kind(), ts) for v, ts in fast.records()]
        assert got == [(v, v.get_row_kind(), ts) for v, ts in slow.records()]
        assert got[1][1] is RowKind.UPDATE_AFTER


def test_float_sums_round_exactly_like_the_per_record_path() -> None:
    values = [0.1, 1e16, -1e16, 0.2, 1 / 3, 7e-17] * 50
    slow, fast = Run(per_record_op("sum", 1)), Run(vector_op("sum", 1, MIXED))
    for run in (slow, fast):
        run.batch([((0, v, 0), i) for i, v in enumerate(values)])
        run.watermark(MAX_WM)
    assert [v[1].hex() for v, _ in fast.records()] == [v[1].hex() for v, _ in slow.records()]


def test_late_records_go_to_the_side_output_with_their_timestamps() -> None:
    tag = OutputTag("late")
    slow = Run(per_record_op("sum", 1, late=tag))
    fast = Run(vector_op("sum", 1, PAIR, late=tag))
    for run in (slow, fast):
        run.batch([((1, 1), 1_000), ((1, 2), 7_000)])
        run.watermark(6_000)
        run.batch([((1, 4), 4_000), ((1, 8), 9_000), ((2, 16), 100)])
        run.watermark(MAX_WM)
    assert fast.output.side[tag] == slow.output.side[tag] == [((1, 4), 4_000), ((2, 16), 100)]
    assert fast.records() == slow.records() == [((1, 1), 4_999), ((1, 10), 9_999)]


def test_processing_time_windows_fire_on_the_clock() -> None:
    assigner = SlidingProcessingTimeWindows.of(Time.seconds(2), Time.seconds(1))
    slow = Run(per_record_op("count", 0, assigner=assigner))
    fast = Run(vector_op("count", 0, PAIR, assigner=assigner))
    for run in (slow, fast):
        run.now_ms = 500
        run.batch([((1, 0), 0), ((2, 0), 0)])
        run.now_ms = 1_500
        run.batch([((1, 0), 0)])
    assert fast.op.next_processing_time_deadline() == slow.op.next_processing_time_deadline() == 999
    for now in (999, 1_999, 2_999):
        for run in (slow, fast):
            run.op.on_processing_time(now)
        assert fast.records() == slow.records()
    assert [v for v, _ in fast.records()] == [(1, 1), (2, 1), (1, 2), (2, 1), (1, 1)]
    assert fast.op.next_processing_time_deadline() is None


# -- errors ----------------------------------------------------------------------------------------


def test_a_record_without_a_timestamp_is_a_clear_error() -> None:
    run = Run(vector_op("sum", 1, PAIR))
    with pytest.raises(UsageError, match="without a timestamp"):
        run.op.process_batch(Batch([(1, 2)]))


def test_a_field_that_is_not_a_number_is_a_clear_error() -> None:
    run = Run(vector_op("sum", 1, PAIR))
    with pytest.raises(UsageError, match=r"sum\(1\) needs a number .* record 1 is \(2, 'x'\)"):
        run.batch([((1, 2), 1), ((2, "x"), 2)])


def test_an_unhashable_key_is_a_clear_error() -> None:
    run = Run(vector_op("count", 0, PAIR, key=lambda r: [r[0]]))
    with pytest.raises(UsageError, match="not hashable"):
        run.batch([((1, 2), 1)])


def test_a_key_outside_the_subtasks_key_groups_is_a_protocol_violation() -> None:
    run = Run(vector_op("sum", 1, PAIR), key_groups=KeyGroupRange(0, 0))
    with pytest.raises(ProtocolViolation, match="outside this subtask's key group range"):
        run.batch([((n, 1), 1) for n in range(50)])


# -- checkpoints -----------------------------------------------------------------------------------


def backend_of(kind: str, path: Path, name: str, key_groups: KeyGroupRange | None = None) -> Any:
    return create_keyed_backend(kind, "op", 128, key_groups or KeyGroupRange(0, 127), path=path / name)


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize(
    ("before", "after"), [("vector", "vector"), ("vector", "record"), ("record", "vector")]
)
def test_a_checkpoint_restores_into_either_operator(
    agg: str, before: str, after: str, tmp_path: Path, store: str
) -> None:
    events = disordered(1_200, 11, lambda r: (r.randrange(9), r.uniform(0, 10), r.randrange(100)))
    steps = steps_of(events, 12)
    cut = len(steps) // 2

    def make(kind: str) -> Any:
        return vector_op(agg, 1, MIXED) if kind == "vector" else per_record_op(agg, 1)

    whole = Run(make("record"))
    play([whole], steps)
    first = Run(make(before), backend_of("lmdb", tmp_path, "a"))
    play([first], steps[:cut], end=False)
    snapshot = first.checkpoint()
    second = Run(make(after), backend_of("hashmap", tmp_path, "b"), restore=[snapshot])
    play([second], steps[cut:])
    assert first.records() + second.records() == whole.records()
    assert first.records() and second.records()


@pytest.mark.parametrize("agg", ["sum", "mean"])
def test_a_checkpoint_rescales_over_two_key_group_ranges(agg: str) -> None:
    from weir.keys import assign_to_key_group

    events = disordered(1_000, 14, lambda r: (r.randrange(40), r.uniform(0, 10), r.randrange(100)))
    steps = steps_of(events, 15)
    cut = len(steps) // 2
    whole = Run(per_record_op(agg, 2))
    play([whole], steps)
    first = Run(vector_op(agg, 2, MIXED))
    play([first], steps[:cut], end=False)
    snapshot = first.checkpoint()
    got = first.records()
    for key_groups in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        half = Run(vector_op(agg, 2, MIXED), restore=[snapshot], key_groups=key_groups)
        mine = [
            ([(v, t) for v, t in chunk if assign_to_key_group(v[0], 128) in key_groups], watermark)
            for chunk, watermark in steps[cut:]
        ]
        play([half], mine)  # empty batches too: every watermark arrives where it did
        got += half.records()
    assert sorted(map(repr, got)) == sorted(map(repr, whole.records()))


def test_a_second_checkpoint_clears_what_fired_since_the_first() -> None:
    run = Run(vector_op("sum", 1, PAIR))
    run.batch([((1, 1), 1_000), ((2, 1), 6_000)])
    run.checkpoint()
    assert run.backend.number_of_keys() == 2
    run.watermark(5_000)  # fires (1, [0, 5 s))
    run.checkpoint()
    assert run.backend.number_of_keys() == 1
    assert len(run.op.timers.snapshot()) == 1


def test_keys_without_live_panes_are_compacted(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    monkeypatch.setattr(vw, "_KEY_COMPACTION_FLOOR", 10)
    key = lambda r: str(r[0])  # noqa: E731 - string keys get slots
    slow, fast = Run(per_record_op("sum", 1, key=key)), Run(vector_op("sum", 1, PAIR, key=key))
    for run in (slow, fast):
        run.batch([((n, 1), 100) for n in range(100)])
        run.watermark(5_000)
        run.batch([((n, 2), 6_000) for n in range(95, 105)])
        run.watermark(MAX_WM)
    assert fast.records() == slow.records()
    assert fast.op.statistics()["key_slots"] <= 10


def test_restoring_windows_of_another_size_is_a_clear_error() -> None:
    first = Run(vector_op("sum", 1, PAIR))
    first.batch([((1, 1), 1_000)])
    snapshot = first.checkpoint()
    ten_seconds = TumblingEventTimeWindows.of(Time.seconds(10))
    with pytest.raises(UsageError, match=r"TimeWindow\(start=0, end=5000\).*windows of 10000 ms"):
        Run(vector_op("sum", 1, PAIR, assigner=ten_seconds), restore=[snapshot])


@pytest.mark.parametrize("agg", ["sum", "count"])
def test_dense_arrays_hand_over_to_the_hash_table_in_the_middle_of_a_batch(
    agg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 9 keys: growing past 4 window slots keeps 32 key slots; 8 x 32 cells fit, 16 x 32 do not
    monkeypatch.setattr(vw, "DENSE_CELLS", 300)
    events = disordered(400, 31, lambda r: (r.randrange(9), r.randrange(100)), disorder_ms=20_000)
    slow = Run(per_record_op(agg, 1, assigner=SLIDING))
    fast = Run(vector_op(agg, 1, PAIR, assigner=SLIDING))
    play([slow, fast], [(events, -(1 << 62))])  # one batch over many open windows
    assert fast.op.statistics()["store"] == "hash"
    assert fast.records() == slow.records() and fast.records()
