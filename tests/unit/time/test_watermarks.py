from __future__ import annotations

import numpy as np
import pytest

from weir.common.time import Duration
from weir.common.watermark_strategy import WatermarkStrategy
from weir.errors import UsageError
from weir.time.watermarks import (
    MAX_WATERMARK,
    NO_TIMESTAMP,
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    EmitWatermark,
    EmitWatermarkStatus,
    NoWatermarksGenerator,
    TimestampAssignment,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarksWithIdleness,
    create_watermark_generator,
    max_timestamp,
)


def test_bounded_out_of_orderness_is_none_until_the_first_event() -> None:
    gen = BoundedOutOfOrdernessWatermarks(5)
    assert gen.on_periodic_emit() is None
    assert gen.on_event(100) is None
    assert gen.on_periodic_emit() == 94


def test_bounded_out_of_orderness_tracks_the_maximum() -> None:
    gen = BoundedOutOfOrdernessWatermarks(10)
    for ts in (50, 70, 60, 20):
        gen.on_event(ts)
    assert gen.on_periodic_emit() == 59
    gen.on_event(71)
    assert gen.on_periodic_emit() == 60


def test_bounded_out_of_orderness_batch_form_ignores_missing_timestamps() -> None:
    gen = BoundedOutOfOrdernessWatermarks(3)
    gen.on_events(np.array([NO_TIMESTAMP, NO_TIMESTAMP], dtype=np.int64))
    assert gen.on_periodic_emit() is None
    gen.on_events(np.array([7, NO_TIMESTAMP, 12, 9], dtype=np.int64))
    assert gen.on_periodic_emit() == 8
    gen.on_event(NO_TIMESTAMP)
    assert gen.on_periodic_emit() == 8


def test_bounded_out_of_orderness_does_not_wrap_below_long_min() -> None:
    gen = BoundedOutOfOrdernessWatermarks(1000)
    gen.on_event(NO_TIMESTAMP + 1)
    assert gen.on_periodic_emit() == NO_TIMESTAMP


def test_negative_bound_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="-1 ms"):
        BoundedOutOfOrdernessWatermarks(-1)


def test_ascending_is_max_minus_one() -> None:
    gen = AscendingTimestampsWatermarks()
    gen.on_event(1000)
    assert gen.on_periodic_emit() == 999


def test_no_watermarks_never_emits() -> None:
    gen = NoWatermarksGenerator()
    gen.on_event(5)
    gen.on_events(np.array([9], dtype=np.int64))
    assert gen.on_periodic_emit() is None


def test_create_watermark_generator_from_strategies() -> None:
    assert isinstance(create_watermark_generator(WatermarkStrategy.no_watermarks()), NoWatermarksGenerator)
    assert isinstance(
        create_watermark_generator(WatermarkStrategy.for_monotonous_timestamps()),
        AscendingTimestampsWatermarks,
    )
    bounded = create_watermark_generator(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(250))
    )
    assert isinstance(bounded, BoundedOutOfOrdernessWatermarks)
    assert bounded.max_out_of_orderness_ms == 250
    assert isinstance(bounded, WatermarkGenerator)
    with pytest.raises(UsageError, match="'sometimes'"):
        create_watermark_generator(WatermarkStrategy("sometimes"))


def test_max_timestamp() -> None:
    assert max_timestamp(None) is None
    assert max_timestamp(np.empty(0, dtype=np.int64)) is None
    assert max_timestamp(np.array([NO_TIMESTAMP], dtype=np.int64)) is None
    assert max_timestamp([3, NO_TIMESTAMP, 9, 1]) == 9


@pytest.mark.parametrize("n", [1, 128, 129, 5000])
def test_max_timestamp_is_the_same_for_small_and_large_batches(n: int) -> None:
    # up to 128 values the maximum is found in Python, above that by numpy
    values = np.arange(n, dtype=np.int64) * 7 - 3
    values[n // 2] = NO_TIMESTAMP
    expected = int(values.max()) if n > 1 else None
    assert max_timestamp(values) == expected
    assert max_timestamp(np.full(n, NO_TIMESTAMP, dtype=np.int64)) is None


# ---------------------------------------------------------------- idleness


def test_idleness_starts_after_the_timeout_since_the_last_event() -> None:
    w = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), idle_timeout_ms=1000)
    w.on_event(50, now_ms=0)
    assert w.on_periodic_emit(now_ms=200) == 49
    assert not w.idle
    assert w.on_periodic_emit(now_ms=999) == 49
    assert not w.idle
    assert w.on_periodic_emit(now_ms=1000) is None
    assert w.idle
    w.on_event(60, now_ms=1100)
    assert not w.idle
    assert w.on_periodic_emit(now_ms=1200) == 59


def test_idleness_before_any_event_counts_from_the_first_check() -> None:
    w = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), idle_timeout_ms=500)
    assert w.on_periodic_emit(now_ms=10_000) is None
    assert not w.idle
    assert w.on_periodic_emit(now_ms=10_499) is None
    assert not w.idle
    w.on_periodic_emit(now_ms=10_500)
    assert w.idle


def test_idleness_timeout_must_be_positive() -> None:
    with pytest.raises(UsageError, match="0 ms"):
        WatermarksWithIdleness(NoWatermarksGenerator(), 0)


def test_idleness_batch_form_with_empty_batch_is_no_activity() -> None:
    w = WatermarksWithIdleness(BoundedOutOfOrdernessWatermarks(0), idle_timeout_ms=100)
    w.on_events(np.array([10], dtype=np.int64), now_ms=0)
    w.on_events(np.empty(0, dtype=np.int64), now_ms=90)
    w.on_periodic_emit(now_ms=100)
    assert w.idle
    w.mark_activity(now_ms=150)
    assert not w.idle


# ---------------------------------------------------------------- the output


def test_output_forwards_only_rising_watermarks() -> None:
    out = WatermarkOutput(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10)))
    assert out.on_periodic_emit(0) == []
    assert out.on_events(np.array([100, 90], dtype=np.int64), 0) == []
    assert out.on_periodic_emit(200) == [EmitWatermark(89)]
    assert out.on_periodic_emit(400) == []
    assert out.on_event(95, 500) == []
    assert out.on_periodic_emit(600) == []
    out.on_event(120, 700)
    assert out.on_periodic_emit(800) == [EmitWatermark(109)]
    assert out.on_end_of_input() == [EmitWatermark(MAX_WATERMARK)]
    assert out.on_end_of_input() == []


def test_output_announces_idle_once_and_active_at_the_next_event() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(1000))
    out = WatermarkOutput(strategy)
    out.on_event(10, now_ms=0)
    assert out.on_periodic_emit(200) == [EmitWatermark(9)]
    assert out.on_periodic_emit(1000) == [EmitWatermarkStatus(idle=True)]
    assert out.on_periodic_emit(1200) == []
    assert out.idle
    assert out.on_events(np.array([20], dtype=np.int64), now_ms=1300) == [EmitWatermarkStatus(idle=False)]
    assert out.on_periodic_emit(1400) == [EmitWatermark(19)]


def test_output_records_without_timestamps_are_activity() -> None:
    out = WatermarkOutput(WatermarkStrategy.no_watermarks().with_idleness(Duration.of_millis(100)))
    out.on_periodic_emit(0)
    assert out.on_periodic_emit(100) == [EmitWatermarkStatus(idle=True)]
    assert out.on_events(None, now_ms=150) == [EmitWatermarkStatus(idle=False)]
    assert out.on_periodic_emit(200) == []


def test_output_end_of_input_makes_an_idle_output_active() -> None:
    out = WatermarkOutput(
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(100))
    )
    out.on_periodic_emit(0)
    out.on_periodic_emit(100)
    assert out.on_end_of_input() == [EmitWatermarkStatus(idle=False), EmitWatermark(MAX_WATERMARK)]


# ---------------------------------------------------------------- timestamps


def test_stamp_uses_the_assigner_per_record() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, prev: v[1])
    stamps = TimestampAssignment(strategy).stamp([("a", 5), ("b", 7)], None)
    assert stamps.dtype == np.int64
    assert stamps.tolist() == [5, 7]


def test_stamp_passes_previous_timestamps_and_no_timestamp() -> None:
    seen: list[int] = []

    def assigner(value: int, previous: int) -> int:
        seen.append(previous)
        return value * 10

    stamps = TimestampAssignment(WatermarkStrategy.no_watermarks().with_timestamp_assigner(assigner)).stamp(
        np.array([1, 2, 3]), np.array([100, NO_TIMESTAMP, 300], dtype=np.int64)
    )
    assert stamps.tolist() == [10, 20, 30]
    assert seen == [100, NO_TIMESTAMP, 300]
    assert all(type(p) is int for p in seen)


def test_stamp_without_assigner_keeps_previous_timestamps() -> None:
    stamping = TimestampAssignment(WatermarkStrategy.for_monotonous_timestamps())
    assert stamping.stamp([1, 2], None).tolist() == [NO_TIMESTAMP, NO_TIMESTAMP]
    assert stamping.stamp([1, 2], np.array([4, 5], dtype=np.int64)).tolist() == [4, 5]
    assert stamping.stamp([], None).tolist() == []


def test_stamp_length_mismatch_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="2 values but 1"):
        TimestampAssignment(None).stamp([1, 2], np.array([4], dtype=np.int64))


def test_a_field_of_a_columnar_batch_is_read_as_the_timestamp_column() -> None:
    """``lambda e, ts: e[2]`` on columns gives the column; an assigner that uses the previous
    timestamp, or whose field is not what the probe saw, is called per record."""
    from weir.codec.batch import TupleColumns

    columns = TupleColumns([np.arange(5), np.arange(5) * 2, np.arange(5, dtype=np.int64) * 100])
    by_field = TimestampAssignment(
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda e, ts: e[2])
    )
    assert by_field.stamp(columns, None).tolist() == [0, 100, 200, 300, 400]
    seen: list[int] = []

    def previous_plus_one(e: object, ts: int) -> int:
        seen.append(ts)
        return ts + 1

    stamped = TimestampAssignment(
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(previous_plus_one)
    ).stamp(columns, np.arange(5, dtype=np.int64))
    assert stamped.tolist() == [1, 2, 3, 4, 5]
    liar = TimestampAssignment(
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(
            lambda e, ts: e[2] if not isinstance(e, tuple) else e[1]
        )
    )
    assert liar.stamp(columns, None).tolist() == [0, 2, 4, 6, 8]
