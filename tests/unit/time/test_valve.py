from __future__ import annotations

import pytest

from weir.errors import ProtocolViolation
from weir.time.valve import MIN_WATERMARK, WatermarkValve
from weir.time.watermarks import EmitWatermark, EmitWatermarkStatus


def test_output_is_the_minimum_over_channels() -> None:
    valve = WatermarkValve(2)
    assert valve.on_watermark(0, 10) is None
    assert valve.on_watermark(1, 5) == 5
    assert valve.on_watermark(1, 20) == 10
    assert valve.on_watermark(0, 15) == 15
    assert valve.current == 15


def test_lower_watermarks_on_a_channel_are_ignored() -> None:
    valve = WatermarkValve(1)
    assert valve.on_watermark(0, 10) == 10
    assert valve.on_watermark(0, 3) is None
    assert valve.channel_watermarks == [10]
    assert valve.input_watermark(0, 10) == []


def test_idle_channel_does_not_hold_the_output_back() -> None:
    valve = WatermarkValve(3)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 20)
    assert valve.on_watermark(2, 30) == 10
    assert valve.input_watermark_status(0, idle=True) == [EmitWatermark(20)]
    assert valve.on_watermark(1, 40) == 30


def test_idle_channel_that_is_not_the_minimum_changes_nothing() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 20)
    assert valve.input_watermark_status(1, idle=True) == []
    assert valve.on_watermark(0, 30) == 30


def test_all_idle_flushes_the_maximum_and_reports_idle() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 25)
    assert valve.input_watermark_status(1, idle=True) == []
    assert valve.input_watermark_status(0, idle=True) == [EmitWatermark(25), EmitWatermarkStatus(idle=True)]
    assert valve.output_idle
    assert valve.input_watermark_status(0, idle=True) == []
    assert valve.input_watermark_status(1, idle=False) == [EmitWatermarkStatus(idle=False)]
    assert not valve.output_idle
    assert valve.input_watermark_status(1, idle=False) == []


def test_all_idle_from_the_start_reports_idle_without_a_watermark() -> None:
    valve = WatermarkValve(2)
    assert valve.input_watermark_status(0, idle=True) == []
    assert valve.input_watermark_status(1, idle=True) == [EmitWatermarkStatus(idle=True)]
    assert valve.current == MIN_WATERMARK


def test_reactivated_channel_behind_the_output_does_not_hold_it_back() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 5)
    valve.on_idle(0, True)
    assert valve.on_watermark(1, 100) == 100
    assert valve.input_watermark_status(0, idle=False) == []
    assert valve.aligned == [False, True]
    # Channel 1 advances; channel 0 (still behind) does not hold the output.
    assert valve.on_watermark(1, 150) == 150
    assert valve.on_watermark(0, 120) is None
    assert not valve.aligned[0]
    # Once channel 0 catches up it counts again.
    assert valve.on_watermark(0, 160) is None
    assert valve.aligned[0]
    assert valve.on_watermark(1, 200) == 160


def test_reactivated_channel_at_or_ahead_of_the_output_counts_at_once() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 50)
    valve.on_idle(0, True)
    valve.on_watermark(1, 40)
    valve.on_idle(0, False)
    assert valve.aligned == [True, True]
    assert valve.on_watermark(1, 80) == 50


def test_watermark_on_an_idle_channel_reactivates_it() -> None:
    valve = WatermarkValve(1)
    valve.on_idle(0, True)
    assert valve.output_idle
    assert valve.input_watermark(0, 7) == [EmitWatermarkStatus(idle=False), EmitWatermark(7)]


def test_output_never_decreases_after_a_flush() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 50)
    valve.on_idle(1, True)
    valve.on_idle(0, True)
    assert valve.current == 50
    assert valve.input_watermark_status(0, idle=False) == [EmitWatermarkStatus(idle=False)]
    assert valve.on_watermark(0, 20) is None
    assert valve.on_watermark(0, 60) == 60


def test_legacy_on_idle_returns_only_the_watermark() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 10)
    valve.on_watermark(1, 30)
    assert valve.on_idle(1, True) is None
    assert valve.on_idle(0, True) == 30


def test_channel_checks() -> None:
    with pytest.raises(ProtocolViolation, match="at least one channel"):
        WatermarkValve(0)
    valve = WatermarkValve(2)
    with pytest.raises(ProtocolViolation, match="got channel 2"):
        valve.on_watermark(2, 1)
    with pytest.raises(ProtocolViolation, match="got channel -1"):
        valve.on_idle(-1, True)


def test_statistics() -> None:
    valve = WatermarkValve(2)
    valve.on_watermark(0, 1)
    stats = valve.statistics()
    assert stats["channel_watermarks"] == (1, MIN_WATERMARK)
    assert stats["idle"] is False
