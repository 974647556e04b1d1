"""Two-input operator test harnesses: records and watermarks per input, keyed state shared by both."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Types
from weir.datastream import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
)
from weir.datastream.state import ValueStateDescriptor
from weir.errors import UsageError
from weir.testing import (
    KeyedOneInputStreamOperatorTestHarness,
    KeyedTwoInputStreamOperatorTestHarness,
    OneInputStreamOperatorTestHarness,
    ProcessFunctionTestHarnesses,
    StreamRecord,
    TwoInputStreamOperatorTestHarness,
    Watermark,
    WatermarkStatus,
    harness_for,
)

TOTAL = ValueStateDescriptor("total", Types.LONG())
ODD = OutputTag("odd", Types.LONG())


class Tag(CoMapFunction):
    def map1(self, value: Any) -> Any:
        return ("left", value)

    def map2(self, value: Any) -> Any:
        return ("right", value)


class Repeat(CoFlatMapFunction):
    def flat_map1(self, value: Any) -> Any:
        return [value] * 2

    def flat_map2(self, value: Any) -> Any:
        return None


class RunningTotal(CoMapFunction):
    """Input 1 adds, input 2 subtracts: one state per key, whichever input the record came on."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(TOTAL)

    def map1(self, value: tuple[str, int]) -> Any:
        self.total.update((self.total.value() or 0) + value[1])
        return (value[0], self.total.value())

    def map2(self, value: tuple[str, int]) -> Any:
        self.total.update((self.total.value() or 0) - value[1])
        return (value[0], self.total.value())


class SplitOdd(CoProcessFunction):
    def process_element1(self, value: int, ctx: Any) -> Any:
        if value % 2:
            ctx.output(ODD, value)
        else:
            yield (value, ctx.timestamp())

    def process_element2(self, value: int, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(10)
        return None


class Expire(KeyedCoProcessFunction):
    """Input 1 opens a key until its timestamp + 100; input 2 records seen in time are counted."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(TOTAL)

    def process_element1(self, value: str, ctx: Any) -> Any:
        self.total.update(0)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)

    def process_element2(self, value: str, ctx: Any) -> Any:
        if self.total.value() is not None:
            self.total.update(self.total.value() + 1)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), self.total.value(), timestamp)
        self.total.clear()


def test_co_map_maps_each_input_with_its_own_method_and_keeps_timestamps() -> None:
    with TwoInputStreamOperatorTestHarness(Tag()) as h:
        h.process_element1(1, timestamp=10)
        h.process_element2("x", timestamp=20)
        h.process_elements1([2, 3])
        assert h.extract_output() == [
            StreamRecord(("left", 1), 10),
            StreamRecord(("right", "x"), 20),
            StreamRecord(("left", 2)),
            StreamRecord(("left", 3)),
        ]


def test_co_flat_map_may_emit_many_or_nothing() -> None:
    with TwoInputStreamOperatorTestHarness(Repeat()) as h:
        h.process_element1("a", timestamp=5)
        h.process_element2("b", timestamp=6)
        assert h.extract_output_records() == [StreamRecord("a", 5), StreamRecord("a", 5)]


def test_the_operator_watermark_is_the_minimum_of_its_inputs() -> None:
    with TwoInputStreamOperatorTestHarness(Tag()) as h:
        h.process_watermark1(100)
        assert h.extract_watermarks() == []  # input 2 is still at the beginning of time
        h.process_watermark2(40)
        h.process_watermark2(70)
        h.process_watermark2(500)
        assert h.extract_watermarks() == [40, 70, 100]
        assert h.current_watermark == 100


def test_an_idle_input_does_not_hold_event_time_back() -> None:
    with TwoInputStreamOperatorTestHarness(Tag()) as h:
        h.process_watermark1(100)
        h.process_watermark_status2(True)
        assert h.extract_output() == [Watermark(100)]
        h.process_watermark_status1(True)
        assert h.extract_output()[-1] == WatermarkStatus(True)  # both idle: the operator is idle
        h.process_watermark_status2(False)
        assert h.extract_output()[-1] == WatermarkStatus(False)


def test_watermarks_of_an_input_never_go_back() -> None:
    with TwoInputStreamOperatorTestHarness(Tag()) as h:
        h.process_watermark2(50)
        with pytest.raises(UsageError, match="watermarks never go back: got 10 after 50"):
            h.process_watermark2(10)
        h.process_watermark1(10)  # the other input has its own watermark


def test_co_process_function_side_outputs_and_no_timers_without_keys() -> None:
    h = ProcessFunctionTestHarnesses.for_co_process_function(SplitOdd())
    h.process_element1(3, timestamp=1)
    h.process_element1(4, timestamp=2)
    assert h.extract_output_values() == [(4, 2)]
    assert h.get_side_output_values(ODD) == [3]
    with pytest.raises(UsageError, match="timers can only be registered on a keyed stream"):
        h.process_element2(1, timestamp=3)


def test_keyed_co_map_shares_one_state_per_key_between_the_inputs() -> None:
    with KeyedTwoInputStreamOperatorTestHarness(RunningTotal(), lambda v: v[0], lambda v: v[0]) as h:
        h.process_element1(("a", 10))
        h.process_element2(("a", 3))
        h.process_element2(("b", 1))
        assert h.extract_output_values() == [("a", 10), ("a", 7), ("b", -1)]
        assert (h.operator.metrics.records_in, h.operator.metrics.records_out) == (3, 3)
        assert h.get_keyed_state(TOTAL, "a") == 7
        assert sorted(h.keys(TOTAL)) == ["a", "b"]


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
def test_keyed_co_process_timers_fire_when_both_inputs_pass_them(backend: str) -> None:
    h = ProcessFunctionTestHarnesses.for_keyed_co_process_function(
        Expire(), lambda v: v, lambda v: v, state_backend=backend
    )
    try:
        h.process_element1("k", timestamp=1_000)
        h.process_element2("k", timestamp=1_050)
        h.process_element2("k", timestamp=1_060)
        h.process_element2("z", timestamp=1_070)  # a key input 1 never opened
        assert h.num_event_time_timers() == 1
        h.process_watermark1(5_000)
        assert h.extract_output_values() == []
        h.process_watermark2(1_100)
        assert h.extract_output_records() == [StreamRecord(("k", 2, 1_100), 1_100)]
        assert h.get_keyed_state(TOTAL, "k") is None
        assert h.operator.metrics.records_in == 4  # both inputs count
    finally:
        h.close()


def test_keyed_state_and_timers_restore_at_another_parallelism() -> None:
    source = KeyedTwoInputStreamOperatorTestHarness(Expire(), lambda v: v, lambda v: v)
    source.open()
    keys = [f"key-{i}" for i in range(12)]
    for i, key in enumerate(keys):
        source.process_element1(key, timestamp=i)
    snapshot = source.snapshot()

    restored = [
        KeyedTwoInputStreamOperatorTestHarness(
            Expire(), lambda v: v, lambda v: v, parallelism=2, subtask_index=i
        ).restore(snapshot)
        for i in range(2)
    ]
    for h in restored:
        h.open()
    assert sorted(t.key for h in restored for t in h.event_time_timers()) == sorted(keys)
    for key in keys:
        (owner,) = [h for h in restored if h.owns_key(key)]
        owner.process_element2(key, timestamp=50)
    for h in restored:
        h.process_both_watermarks(1_000)
    fired = sorted(v for h in restored for v in h.extract_output_values())
    assert fired == sorted((key, 1, i + 100) for i, key in enumerate(keys))


def test_a_record_of_input_2_with_a_key_of_another_subtask_is_an_error() -> None:
    h = KeyedTwoInputStreamOperatorTestHarness(
        Expire(), lambda v: v, lambda v: v, parallelism=2, subtask_index=0
    )
    h.open()
    other = next(f"k{i}" for i in range(100) if not h.owns_key(f"k{i}"))
    with pytest.raises(UsageError, match="owned by subtask 1 of 2"):
        h.process_element2(other)


def test_harness_for_a_connected_stream_builds_the_keyed_two_input_harness() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    opened = env.from_collection(["a"]).key_by(lambda v: v)
    seen = env.from_collection(["a"]).key_by(lambda v: v)
    stream = opened.connect(seen).process(Expire(), output_type=Types.PICKLED_BYTE_ARRAY())
    h = harness_for(stream)
    assert isinstance(h, KeyedTwoInputStreamOperatorTestHarness)
    with h:
        h.process_element1("a", timestamp=0)
        h.process_element2("a", timestamp=1)
        h.process_both_watermarks(100)
        assert h.extract_output_values() == [("a", 1, 100)]
    plain = env.from_collection([1]).connect(env.from_collection(["x"])).map(Tag())
    assert type(harness_for(plain)) is TwoInputStreamOperatorTestHarness


def test_the_wrong_kind_of_harness_says_which_to_use() -> None:
    with pytest.raises(UsageError, match="takes two inputs: test it with TwoInputStreamOperatorTestHarness"):
        OneInputStreamOperatorTestHarness(Tag())
    with pytest.raises(UsageError, match="takes two inputs"):
        KeyedOneInputStreamOperatorTestHarness(Expire(), key_selector=lambda v: v)
    with pytest.raises(UsageError, match="KeyedTwoInputStreamOperatorTestHarness"):
        TwoInputStreamOperatorTestHarness(Expire())
    with pytest.raises(UsageError, match="needs key_selector1 and key_selector2"):
        KeyedTwoInputStreamOperatorTestHarness(Expire(), lambda v: v)
    with pytest.raises(UsageError, match="a two-input test harness wraps"):
        TwoInputStreamOperatorTestHarness(lambda a, b: a)
