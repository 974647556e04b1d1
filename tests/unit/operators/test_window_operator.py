"""The window operator against small oracles, driven record by record."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from weir.common import Time
from weir.core.functions import wrap_key_selector, wrap_reduce
from weir.datastream import AggregateFunction, OutputTag, ProcessWindowFunction
from weir.datastream.window import (
    CountEvictor,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from weir.operators.window import WindowOperator

from .operator_harness import Harness


def window_op(
    assigner,
    kind="reduce",
    function=None,
    window_function=None,
    trigger=None,
    lateness=0,
    late_tag=None,
    evictor=None,
):  # type: ignore[no-untyped-def]
    if function is None:
        function = wrap_reduce("reduce", lambda a, b: (a[0], a[1] + b[1]))
    return WindowOperator(
        "window",
        wrap_key_selector(lambda r: r[0]),
        assigner,
        trigger or assigner.get_default_trigger(),
        lateness,
        late_tag,
        kind,
        function,
        window_function,
        evictor,
    )


def test_tumbling_event_time_matches_an_oracle_on_disordered_input() -> None:
    rng = random.Random(7)
    events = [(f"k{rng.randrange(5)}", rng.randrange(100), rng.randrange(0, 60_000)) for _ in range(2000)]
    events.sort(key=lambda e: e[2] + rng.randrange(-3000, 3000))  # bounded disorder
    h = Harness(window_op(TumblingEventTimeWindows.of(Time.seconds(10))))
    max_ts = 0
    for key, value, ts in events:
        h.elements(((key, value), ts))
        max_ts = max(max_ts, ts)
        h.watermark(max_ts - 6000)  # out-of-orderness bound above the disorder: nothing is late
    h.watermark((1 << 63) - 1)
    oracle: dict[tuple[str, int], int] = defaultdict(int)
    for key, value, ts in events:
        oracle[(key, ts - ts % 10_000)] += value
    got = {(v[0], ts - 9_999): v[1] for v, ts in h.output.records}
    assert got == dict(oracle)
    assert all(ts % 10_000 == 9_999 for _, ts in h.output.records)  # results carry max_timestamp


def test_windows_fire_when_the_watermark_passes_their_end() -> None:
    h = Harness(window_op(TumblingEventTimeWindows.of(Time.seconds(10))))
    h.elements((("a", 1), 1_000), (("a", 2), 9_999), (("a", 5), 10_000))
    h.watermark(9_998)
    assert h.values() == []
    h.watermark(9_999)
    assert h.values() == [("a", 3)]
    h.watermark(20_000)
    assert h.values() == [("a", 3), ("a", 5)]


def test_sliding_windows_assign_each_record_to_size_over_slide_windows() -> None:
    h = Harness(window_op(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))))
    h.elements((("a", 1), 7_000), (("a", 10), 12_000))
    h.watermark((1 << 63) - 1)
    got = sorted((ts, v[1]) for v, ts in h.output.records)
    # windows [0,10) [5,15) [10,20): 1 ; 1+10 ; 10
    assert got == [(9_999, 1), (14_999, 11), (19_999, 10)]


def test_session_windows_merge_and_fire_after_the_gap() -> None:
    h = Harness(window_op(EventTimeSessionWindows.with_gap(Time.seconds(3))))
    h.elements((("a", 1), 1_000), (("a", 2), 3_500), (("b", 7), 2_000), (("a", 4), 10_000), (("a", 8), 2_000))
    h.watermark((1 << 63) - 1)
    got = sorted((v, ts) for v, ts in h.output.records)
    # a: 1000, 2000, 3500 merge into [1000, 6500); 10000 alone; b alone
    assert got == [(("a", 4), 12_999), (("a", 11), 6_499), (("b", 7), 4_999)]


def test_allowed_lateness_refires_and_side_outputs_what_is_too_late() -> None:
    late = OutputTag("late")
    h = Harness(window_op(TumblingEventTimeWindows.of(Time.seconds(10)), lateness=5_000, late_tag=late))
    h.elements((("a", 1), 1_000))
    h.watermark(12_000)
    assert h.values() == [("a", 1)]
    h.elements((("a", 2), 2_000))  # late but within lateness: fires again with the update
    assert h.values() == [("a", 1), ("a", 3)]
    h.watermark(15_000)  # cleanup at 9_999 + 5_000
    h.elements((("a", 4), 3_000))  # too late: side output
    assert h.values() == [("a", 1), ("a", 3)]
    assert h.output.side[late] == [(("a", 4), 3_000)]


def test_late_records_without_a_side_output_are_counted() -> None:
    op = window_op(TumblingEventTimeWindows.of(Time.seconds(10)))
    h = Harness(op)
    h.watermark(50_000)
    h.elements((("a", 1), 1_000), (("a", 1), 2_000))
    assert h.values() == [] and op.metrics.late_records_dropped == 2


class Average(AggregateFunction):
    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return (0, 0)

    def add(self, value, accumulator):  # type: ignore[no-untyped-def]
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):  # type: ignore[no-untyped-def]
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        yield (key, context.window().start, sorted(elements))


def test_aggregate_with_a_process_window_function() -> None:
    h = Harness(
        window_op(
            TumblingEventTimeWindows.of(Time.seconds(10)), "aggregate", Average(), window_function=Describe()
        )
    )
    h.elements((("a", 2), 1_000), (("a", 4), 2_000), (("a", 9), 12_000))
    h.watermark((1 << 63) - 1)
    assert h.values() == [("a", 0, [3.0]), ("a", 10_000, [9.0])]


def test_process_function_sees_every_element() -> None:
    h = Harness(window_op(TumblingEventTimeWindows.of(Time.seconds(10)), "process", Describe()))
    h.elements((("a", 2), 1_000), (("a", 4), 2_000))
    h.watermark(10_000)
    assert h.values() == [("a", 0, [("a", 2), ("a", 4)])]


@pytest.mark.parametrize(("size", "slide", "expected"), [(3, 0, [6, 15]), (3, 2, [3, 9, 15])])
def test_count_windows(size: int, slide: int, expected: list[int]) -> None:
    if slide == 0:
        op = window_op(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(size)))
    else:
        op = window_op(GlobalWindows.create(), trigger=CountTrigger.of(slide), evictor=CountEvictor.of(size))
    h = Harness(op)
    for i in range(1, 7):
        h.elements((("a", i), 0))
    assert [v[1] for v in h.values()] == expected


def test_processing_time_windows_fire_on_the_clock() -> None:
    h = Harness(window_op(TumblingProcessingTimeWindows.of(Time.seconds(1))))
    h.now_ms = 100
    h.elements((("a", 1), 0), (("a", 2), 0))
    h.now_ms = 1_500
    h.elements((("a", 5), 0))
    h.advance_processing_time(999)
    assert h.values() == [("a", 3)]
    h.advance_processing_time(2_000)
    assert h.values() == [("a", 3), ("a", 5)]


class CountFirings(ProcessWindowFunction):
    """Counts how often each window fired (window state) and each key fired at all (global state)."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        from weir.datastream.state import ValueStateDescriptor

        per_window = context.window_state().get_state(ValueStateDescriptor("firings", None))
        per_key = context.global_state().get_state(ValueStateDescriptor("all-firings", None))
        per_window.update((per_window.value() or 0) + 1)
        per_key.update((per_key.value() or 0) + 1)
        yield (key, context.window().start, per_window.value(), per_key.value())


def test_process_window_function_window_and_global_state() -> None:
    op = window_op(TumblingEventTimeWindows.of(Time.seconds(10)), "process", CountFirings(), lateness=10_000)
    h = Harness(op)
    h.elements((("a", 1), 1_000))
    h.watermark(10_000)  # fires [0, 10 s)
    h.elements((("a", 2), 2_000))  # late but allowed: fires the same window again
    h.elements((("a", 3), 12_000))
    h.watermark(20_000)  # fires [10, 20 s)
    assert h.values() == [("a", 0, 1, 1), ("a", 0, 2, 2), ("a", 10_000, 1, 3)]
    h.watermark(40_000)  # cleanup removes the per-window state, not the global one
    op.backend.set_current_key("a")
    from weir.datastream.state import ValueStateDescriptor

    per_window = op.backend.get_state(ValueStateDescriptor("firings", None))
    per_window.set_current_namespace(TimeWindow(0, 10_000))
    assert per_window.value() is None
    per_key = op.backend.get_state(ValueStateDescriptor("all-firings", None))
    per_key.set_current_namespace(None)
    assert per_key.value() == 3
