"""PyFlink 1.x's ``TimeCharacteristic`` switch and the ``weir.metrics`` names."""

from __future__ import annotations

import pytest

from weir.datastream import StreamExecutionEnvironment, TimeCharacteristic
from weir.errors import UsageError


def test_event_time_is_the_default_characteristic() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_stream_time_characteristic() is TimeCharacteristic.EventTime


def test_processing_time_turns_the_watermark_interval_off_and_event_time_sets_200_ms() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_config().set_auto_watermark_interval(2000)
    env.set_stream_time_characteristic(TimeCharacteristic.ProcessingTime)
    assert env.get_stream_time_characteristic() is TimeCharacteristic.ProcessingTime
    assert env.get_config().get_auto_watermark_interval() == 0
    env.set_stream_time_characteristic(TimeCharacteristic.EventTime)
    assert env.get_config().get_auto_watermark_interval() == 200
    env.set_stream_time_characteristic(TimeCharacteristic.IngestionTime)
    assert env.get_config().get_auto_watermark_interval() == 200


def test_a_characteristic_that_is_not_one_is_refused_with_the_valid_ones() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(UsageError, match=r"got 'EventTime'.*TimeCharacteristic\.ProcessingTime"):
        env.set_stream_time_characteristic("EventTime")  # type: ignore[arg-type]


def test_the_metric_names_import_from_weir_metrics_as_from_pyflink_metrics() -> None:
    from weir.core import metrics as core
    from weir.metrics import Counter, Distribution, Meter, Metric, MetricGroup

    assert (Counter, Distribution, Meter, Metric, MetricGroup) == (
        core.Counter,
        core.Distribution,
        core.Meter,
        core.Metric,
        core.MetricGroup,
    )
    group = MetricGroup(clock_ms=lambda: 0)
    counter = group.counter("n")
    counter.inc(2)
    assert isinstance(counter, Counter) and counter.get_count() == 2
