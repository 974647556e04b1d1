"""TestStream: scripted elements, watermarks, processing time and idleness, at any parallelism."""

from __future__ import annotations

from typing import Any

import pytest

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream import OutputTag
from weir.datastream.window import TumblingEventTimeWindows, TumblingProcessingTimeWindows
from weir.errors import JobExecutionError, UsageError
from weir.testing import TestStream, TimestampedValue, assert_exactly_once, assert_output, collect

PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def windowed_sums(env: Any, stream: TestStream, late: OutputTag | None = None, size_ms: int = 10_000) -> Any:
    windows = (
        env.from_source(stream, WatermarkStrategy.no_watermarks(), "events")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(size_ms)))
    )
    if late is not None:
        windows = windows.side_output_late_data(late)
    return windows.reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=PAIR)


@pytest.mark.weir(parallelism=[1, 2, 4])
def test_an_element_behind_the_watermark_is_late_at_every_parallelism(weir_env) -> None:
    stream = (
        TestStream(type_info=PAIR)
        .add_elements(TimestampedValue(("a", 1), 1_000), TimestampedValue(("b", 2), 2_000))
        .add_elements(TimestampedValue(("a", 3), 3_000), TimestampedValue(("c", 4), 9_000))
        .advance_watermark_to(10_000)
        .add_elements(TimestampedValue(("a", 100), 4_000), TimestampedValue(("b", 200), 9_999))  # late
        .add_elements(TimestampedValue(("a", 7), 12_000))
        .advance_watermark_to_infinity()
    )
    late = OutputTag("late", PAIR)
    sums = windowed_sums(weir_env, stream, late)
    on_time = collect(sums)
    too_late = collect(sums.get_side_output(late))
    weir_env.execute()
    assert_output(on_time, [("a", 4), ("b", 2), ("c", 4), ("a", 7)])
    assert_output(too_late, [("a", 100), ("b", 200)])


@pytest.mark.weir(parallelism=[1, 2])
def test_processing_time_advances_fire_processing_time_windows(weir_env, weir_clock) -> None:
    stream = (
        TestStream(type_info=PAIR)
        .add_elements(("a", 1), ("b", 1), ("a", 2))
        .advance_processing_time(60_000)
        .add_elements(("a", 5))
        .advance_processing_time(30_000)
        .add_elements(("a", 6))
        .advance_processing_time(30_000)
        .end()
    )
    minutes = collect(
        weir_env.from_source(stream, WatermarkStrategy.no_watermarks(), "events")
        .key_by(lambda e: e[0])
        .window(TumblingProcessingTimeWindows.of(Time.minutes(1)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=PAIR)
    )
    weir_env.execute()
    assert sorted(minutes.records_with_timestamps()) == [
        (("a", 3), 59_999),
        (("a", 11), 119_999),
        (("b", 1), 59_999),
    ]
    assert weir_clock.virtual_seconds >= 120


@pytest.mark.weir(parallelism=2)
def test_an_idle_subtask_stops_holding_the_watermark_back(weir_env) -> None:
    def run(idle: bool) -> tuple[list[Any], list[Any]]:
        stream = TestStream(type_info=PAIR).add_elements(
            TimestampedValue(("a", 1), 1_000), TimestampedValue(("a", 2), 2_000), subtask=0
        )
        stream.advance_watermark_to(20_000, subtasks=0)  # subtask 1 says nothing about event time
        if idle:
            stream.mark_idle(1)
        stream.add_elements(TimestampedValue(("a", 5), 5_000), subtask=0).end()
        late = OutputTag("late", PAIR)
        sums = windowed_sums(weir_env, stream, late)
        on_time, too_late = collect(sums), collect(sums.get_side_output(late))
        weir_env.execute()
        return on_time.records, too_late.records

    # idle: the downstream watermark is subtask 0's 20 s, the window [0, 10 s) has fired, 5 s is late
    assert run(idle=True) == ([("a", 3)], [("a", 5)])
    # not idle: subtask 1 holds the watermark back, so the element at 5 s still counts
    assert run(idle=False) == ([("a", 8)], [])


@pytest.mark.weir(parallelism=3)
def test_a_key_selector_keeps_each_keys_elements_in_script_order(weir_env) -> None:
    keys = ["a", "b", "c", "d", "e"]
    stream = TestStream(type_info=PAIR, key_selector=lambda e: e[0])
    for i in range(1, 31):
        stream.add_elements((keys[i % 5], i))
    running = collect(weir_env.from_source(stream, WatermarkStrategy.no_watermarks(), "events")
                      .key_by(lambda e: e[0]).reduce(lambda a, b: (a[0], b[1] - a[1])))  # fmt: skip
    weir_env.execute()
    # an order-sensitive reduce: the same per-key results as a plain loop over the script
    expected = []
    last: dict[str, int] = {}
    for i in range(1, 31):
        key = keys[i % 5]
        last[key] = i if key not in last else i - last[key]
        expected.append((key, last[key]))
    assert_output(running, expected)
    for key in keys:
        assert [r for r in running.records if r[0] == key] == [r for r in expected if r[0] == key]


@pytest.mark.weir(parallelism=2)
def test_a_test_stream_replays_from_its_checkpointed_position(weir_env_factory, weir_clock) -> None:
    def build(env: Any) -> Any:
        stream = TestStream(type_info=PAIR)
        for second in range(30):
            stream.add_elements(*[TimestampedValue((k, second), second * 1_000 + 1) for k in "abc"])
            stream.advance_watermark_to(second * 1_000 + 999)
            stream.advance_processing_time(100)
        return collect(windowed_sums(env, stream.end(), size_ms=5_000), exactly_once=True)

    report = assert_exactly_once(
        build, env_factory=weir_env_factory, seed=2, failures=2, records_hint=40, checkpoint_interval_ms=200
    )
    assert len(report.clean_output) == 3 * 6 and report.restarts == 2


def test_script_mistakes_get_clear_errors(weir_env) -> None:
    with pytest.raises(UsageError, match="nothing can follow"):
        TestStream().add_elements(1).end().add_elements(2)
    with pytest.raises(UsageError, match="timestamp must be an int"):
        TimestampedValue("x", 1.5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="at least one element"):
        TestStream().add_elements()
    weir_env.set_parallelism(2)
    sink = collect(
        weir_env.from_source(TestStream().add_elements(1, subtask=3), WatermarkStrategy.no_watermarks(), "s")
    )
    with pytest.raises(JobExecutionError, match="names subtask 3, but the source runs at parallelism 2"):
        weir_env.execute()
    assert sink.records == []
