"""LocalTimeTypeInfo and ExternalTypeInfo carry their values through jobs unchanged;
WatermarkStrategy.with_watermark_alignment records Flink's alignment parameters."""

from __future__ import annotations

import datetime as dt

import pytest

from weir.common import Duration, Types, WatermarkStrategy
from weir.common.typeinfo import ExternalTypeInfo, LocalTimeTypeInfo
from weir.datastream import StreamExecutionEnvironment
from weir.errors import UsageError

LOCAL_VALUES = {
    LocalTimeTypeInfo.TimeType.LOCAL_DATE: [dt.date(2024, 2, 29), dt.date(1969, 12, 31)],
    LocalTimeTypeInfo.TimeType.LOCAL_TIME: [dt.time(23, 59, 59, 999_999), dt.time(0, 0)],
    LocalTimeTypeInfo.TimeType.LOCAL_DATE_TIME: [dt.datetime(2024, 3, 31, 2, 30), dt.datetime(1900, 1, 1)],
}


@pytest.mark.parametrize("time_type", list(LocalTimeTypeInfo.TimeType))
def test_local_values_cross_a_shuffle_without_a_time_zone(time_type: LocalTimeTypeInfo.TimeType) -> None:
    type_info = LocalTimeTypeInfo(time_type)
    values = LOCAL_VALUES[time_type]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    ds = env.from_collection(values, type_info=type_info).rebalance().map(lambda v: v, output_type=type_info)
    assert ds.get_type() == LocalTimeTypeInfo(time_type)
    assert len({LocalTimeTypeInfo(t) for t in LocalTimeTypeInfo.TimeType}) == 3
    with ds.execute_and_collect() as got:
        assert sorted(got) == sorted(values)
    assert repr(type_info) == f"LocalTimeTypeInfo<{time_type.name}>"


def test_external_type_info_stands_for_its_wrapped_type() -> None:
    wrapped = ExternalTypeInfo(Types.SQL_DATE())
    assert wrapped.need_conversion() and wrapped.to_internal_type(dt.date(1970, 1, 2)) == 1
    assert wrapped.from_internal_type(1) == dt.date(1970, 1, 2)
    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1, 2, 3], type_info=ExternalTypeInfo(Types.LONG())).map(
        lambda v: v * 10, output_type=ExternalTypeInfo(Types.LONG())
    )
    with ds.execute_and_collect() as got:
        assert sorted(got) == [10, 20, 30]
    with pytest.raises(UsageError, match="TypeInformation"):
        ExternalTypeInfo("LONG")  # type: ignore[arg-type]


def test_watermark_alignment_is_recorded_and_kept_by_later_calls() -> None:
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(20))
        .with_watermark_alignment("group-1", Duration.of_seconds(20), Duration.of_millis(500))
        .with_idleness(Duration.of_minutes(1))
        .with_timestamp_assigner(lambda v, t: v)
    )
    params = strategy.get_alignment_parameters()
    assert params is not None
    assert (params.watermark_group, params.max_allowed_watermark_drift_ms, params.update_interval_ms) == (
        "group-1",
        20_000,
        500,
    )
    assert "aligned in 'group-1' within 20000 ms (every 500 ms)" in strategy.describe()
    default = WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment(
        "g", Duration.of_seconds(1)
    )
    assert default.get_alignment_parameters().update_interval_ms == 1000  # type: ignore[union-attr]
    assert WatermarkStrategy.no_watermarks().get_alignment_parameters() is None


@pytest.mark.parametrize(
    ("group", "drift", "match"), [("", 1000, "group name"), ("g", 0, "drift must be positive")]
)
def test_bad_alignment_parameters_are_named(group: str, drift: int, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment(
            group, Duration.of_millis(drift)
        )
