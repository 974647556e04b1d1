"""The Trigger API, evictors, count windows and dynamic session gaps on the per-record WindowOperator."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.common import Time
from weir.core.functions import wrap_key_selector, wrap_reduce, wrap_window_function
from weir.core.state import ValueStateDescriptor
from weir.datastream.window import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    TimeEvictor,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
)
from weir.keys import KeyGroupRange
from weir.operators.window import WindowOperator

from .operator_harness import Harness


def sum_op(assigner: Any, trigger: Any = None, evictor: Any = None, kind: str = "reduce") -> WindowOperator:
    function: Any = wrap_reduce("reduce", lambda a, b: (a[0], a[1] + b[1]))
    if kind == "apply":
        function = wrap_window_function(
            "apply", lambda key, window, rows: [(key, window, [r[1] for r in rows])]
        )
    return WindowOperator(
        "window",
        wrap_key_selector(lambda r: r[0]),
        assigner,
        trigger or assigner.get_default_trigger(),
        0,
        None,
        kind,
        function,
        None,
        evictor,
    )


# -- user-defined triggers ------------------------------------------------------------------------
class EveryOtherElementOrEnd(Trigger):
    """Fires on every second element of a window (count in partitioned state) and at its end."""

    COUNT = ValueStateDescriptor("seen")

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        seen = ctx.get_partitioned_state(self.COUNT)
        n = (seen.value() or 0) + 1
        seen.update(n)
        return TriggerResult.FIRE if n % 2 == 0 else TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self.COUNT).clear()
        ctx.delete_event_time_timer(window.max_timestamp())


def test_a_user_trigger_fires_from_its_own_state_and_timers() -> None:
    op = sum_op(TumblingEventTimeWindows.of(Time.seconds(10)), EveryOtherElementOrEnd())
    h = Harness(op)
    h.elements((("a", 1), 1_000), (("a", 2), 2_000), (("b", 5), 3_000), (("a", 4), 4_000))
    assert h.values() == [("a", 3)]
    h.watermark(9_999)
    assert sorted(h.values()) == [("a", 3), ("a", 7), ("b", 5)]
    # the window was cleared at its cleanup time: its trigger state too
    backend = op.backend
    backend.set_current_key("a")
    state = backend.get_state(EveryOtherElementOrEnd.COUNT)
    state.set_current_namespace(TimeWindow(0, 10_000))
    assert state.value() is None


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_end() -> None:
    op = sum_op(TumblingEventTimeWindows.of(Time.seconds(10)), ContinuousEventTimeTrigger.of(Time.seconds(3)))
    h = Harness(op)
    h.elements((("a", 1), 500), (("a", 2), 3_500))
    h.watermark(2_999)
    assert h.values() == []
    h.watermark(3_000)
    assert h.values() == [("a", 3)]  # the first interval ends at 3 s (aligned to the interval)
    h.elements((("a", 4), 7_000))
    h.watermark(5_999)
    assert h.values() == [("a", 3)]
    h.watermark(6_000)
    assert h.values() == [("a", 3), ("a", 7)]
    h.watermark(9_999)
    assert h.values() == [("a", 3), ("a", 7), ("a", 7), ("a", 7)]  # at 9 s, then the window's end


def test_continuous_processing_time_trigger_fires_on_the_clock() -> None:
    from weir.datastream.window import TumblingProcessingTimeWindows

    op = sum_op(
        TumblingProcessingTimeWindows.of(Time.seconds(10)),
        ContinuousProcessingTimeTrigger.of(Time.seconds(2)),
    )
    h = Harness(op)
    h.now_ms = 100
    h.elements((("a", 1), 0))
    h.advance_processing_time(1_999)
    assert h.values() == []
    h.advance_processing_time(2_000)
    assert h.values() == [("a", 1)]
    h.elements((("a", 5), 0))
    h.advance_processing_time(4_000)
    assert h.values() == [("a", 1), ("a", 6)]


def test_a_trigger_without_merge_support_is_refused_for_sessions() -> None:
    from weir.datastream import StreamExecutionEnvironment
    from weir.errors import UsageError

    env = StreamExecutionEnvironment.get_execution_environment()
    windowed = (
        env.from_collection([("a", 1)]).key_by(lambda r: r[0]).window(EventTimeSessionWindows.with_gap(10))
    )
    try:
        windowed.trigger(EveryOtherElementOrEnd())
    except UsageError as exc:
        assert "can_merge" in str(exc)
    else:
        raise AssertionError("a non-merging trigger was accepted for session windows")


def test_count_trigger_counts_across_merged_sessions() -> None:
    op = sum_op(EventTimeSessionWindows.with_gap(2_500), PurgingTrigger.of(CountTrigger.of(3)))
    h = Harness(op)
    h.elements((("a", 1), 0), (("a", 2), 5_000))  # two sessions, one element each
    h.elements((("a", 4), 2_000))  # joins the first: count 2
    assert h.values() == []
    h.elements((("a", 8), 4_000))  # bridges both: counts 2 + 1 merged, + 1
    assert h.values() == [("a", 15)]


# -- evictors -------------------------------------------------------------------------------------
def test_count_evictor_keeps_the_last_elements_before_the_function() -> None:
    op = sum_op(TumblingEventTimeWindows.of(Time.seconds(10)), evictor=CountEvictor.of(2))
    h = Harness(op)
    h.elements((("a", 1), 1), (("a", 2), 2), (("a", 4), 3))
    h.watermark(9_999)
    assert h.values() == [("a", 6)]


def test_count_evictor_after_the_function_sees_all_then_keeps_the_last() -> None:
    op = sum_op(GlobalWindows.create(), CountTrigger.of(2), CountEvictor.of(1, do_evict_after=True))
    h = Harness(op)
    h.elements((("a", 1), 0), (("a", 2), 0))  # fires with [1, 2], keeps [2]
    h.elements((("a", 4), 0))  # count 1 of 2
    h.elements((("a", 8), 0))  # fires with [2, 4, 8]
    assert h.values() == [("a", 3), ("a", 14)]


def test_time_evictor_drops_elements_older_than_its_size_from_the_newest() -> None:
    op = sum_op(
        TumblingEventTimeWindows.of(Time.seconds(10)), evictor=TimeEvictor.of(Time.seconds(3)), kind="apply"
    )
    h = Harness(op)
    h.elements((("a", 1), 1_000), (("a", 2), 6_000), (("a", 4), 8_000), (("a", 8), 9_000))
    h.watermark(9_999)
    assert h.values() == [("a", TimeWindow(0, 10_000), [4, 8])]  # timestamps <= 9_000 - 3_000 go


# -- count windows (PyFlink's semantics) ----------------------------------------------------------
def reference_count_windows(values: list[int], size: int, slide: int) -> list[int]:
    """Sums of PyFlink's count windows for one key: window i holds elements i*slide .. i*slide+size-1
    and fires once it holds all ``size`` of them, in the order they fill."""
    fired = []
    step = slide or size
    for end in range(len(values)):
        for i in range(end // step, -1, -1):
            start = i * step
            if start + size - 1 == end:
                fired.append(sum(values[start : end + 1]))
    return fired


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 100), max_size=40),
    st.integers(1, 6),
    st.integers(0, 6),
)
def test_count_windows_match_the_reference(values: list[int], size: int, slide: int) -> None:
    assigner = CountSlidingWindowAssigner.of(size, slide) if slide else CountTumblingWindowAssigner.of(size)
    h = Harness(sum_op(assigner))
    for v in values:
        h.elements((("k", v), 0))
    assert [v for _, v in h.values()] == reference_count_windows(values, size, slide)


def test_count_windows_are_cleared_once_they_fire() -> None:
    op = sum_op(CountTumblingWindowAssigner.of(2))
    h = Harness(op)
    h.elements((("a", 1), 0), (("a", 2), 0), (("a", 3), 0))
    backend = op.backend
    backend.set_current_key("a")
    op.contents.set_current_namespace(CountWindow(0))
    assert op.contents.get() is None
    op.contents.set_current_namespace(CountWindow(1))
    assert op.contents.get() == ("a", 3)


# -- dynamic session gaps -------------------------------------------------------------------------
class GapFromElement(SessionWindowTimeGapExtractor):
    def extract(self, element: Any) -> int:
        return int(element[1])


def test_dynamic_session_gaps_come_from_each_element() -> None:
    assigner = EventTimeSessionWindows.with_dynamic_gap(GapFromElement())
    h = Harness(sum_op(assigner, kind="apply"))
    # 0 + gap 1_000 covers 500; 500 + gap 5_000 reaches 5_500, so 5_000 joins; 20_000 is alone
    h.elements((("a", 1_000), 0), (("a", 5_000), 500), (("a", 10), 5_000), (("a", 10), 20_000))
    h.watermark(1 << 40)
    assert h.values() == [
        ("a", TimeWindow(0, 5_500), [1_000, 5_000, 10]),
        ("a", TimeWindow(20_000, 20_010), [10]),
    ]


def test_processing_time_dynamic_gaps_accept_a_callable() -> None:
    assigner = ProcessingTimeSessionWindows.with_dynamic_gap(lambda element: 100)
    h = Harness(sum_op(assigner))
    h.now_ms = 1_000
    h.elements((("a", 1), 0))
    h.now_ms = 1_050
    h.elements((("a", 2), 0))
    h.advance_processing_time(1_148)  # the sessions [1_000, 1_100) and [1_050, 1_150) merged
    assert h.values() == []
    h.advance_processing_time(1_149)
    assert h.values() == [("a", 3)]


def test_a_non_positive_dynamic_gap_is_a_clear_error() -> None:
    from weir.errors import UsageError

    h = Harness(sum_op(EventTimeSessionWindows.with_dynamic_gap(lambda e: 0)))
    try:
        h.elements((("a", 1), 0))
    except UsageError as exc:
        assert "positive" in str(exc) and "('a', 1)" in str(exc)
    else:
        raise AssertionError("a zero gap was accepted")


# -- restore --------------------------------------------------------------------------------------
def restored(old: WindowOperator, new: WindowOperator) -> Harness:
    """``new`` restored from a snapshot of ``old``'s keyed state and timers, taken as a task does
    (``prepare_snapshot_pre_barrier`` first)."""
    old.prepare_snapshot_pre_barrier(1)
    keyed = old.backend.snapshot()
    timers = old.timers.snapshot()

    def prepare(op: Any) -> None:
        op.context.keyed_state_backend().restore([keyed])
        op.timers.restore([timers], KeyGroupRange(0, 127))
        op.context.is_restored = True

    return Harness(new, prepare=prepare)


def test_session_windows_keep_merging_after_a_restore() -> None:
    assigner = EventTimeSessionWindows.with_gap(1_000)
    h = Harness(sum_op(assigner))
    h.elements((("a", 1), 0), (("a", 2), 800))
    h2 = restored(h.operator, sum_op(assigner))  # type: ignore[arg-type]
    h2.elements((("a", 4), 1_500))  # within the gap of the restored session [0, 1_800)
    h2.watermark(10_000)
    assert h2.values() == [("a", 7)]


def test_trigger_state_survives_a_restore() -> None:
    assigner = TumblingEventTimeWindows.of(Time.seconds(10))
    h = Harness(sum_op(assigner, EveryOtherElementOrEnd()))
    h.elements((("a", 1), 1_000))
    h2 = restored(h.operator, sum_op(assigner, EveryOtherElementOrEnd()))  # type: ignore[arg-type]
    h2.elements((("a", 2), 2_000))  # the second element: fires
    assert h2.values() == [("a", 3)]


def test_event_time_trigger_is_the_default_and_merges() -> None:
    assert isinstance(EventTimeSessionWindows.with_gap(5).get_default_trigger(), EventTimeTrigger)
    assert EventTimeTrigger().can_merge() and not Trigger().can_merge()
