"""Testing a windowed job with TestStream, weir_env and weir_clock.

.venv/bin/pytest examples/testing -q
"""

from __future__ import annotations

import pytest
from sensor_job import READING, build

from weir.common import WatermarkStrategy
from weir.testing import TestStream, TimestampedValue, assert_output, collect


def readings() -> TestStream:
    return (
        TestStream(type_info=READING)
        .add_elements(TimestampedValue(("s1", 1), 1_000), TimestampedValue(("s2", 10), 2_000))
        .add_elements(TimestampedValue(("s1", 2), 9_000))
        .advance_watermark_to(10_000)  # the window [0 s, 10 s) fires
        .add_elements(TimestampedValue(("s1", 100), 5_000))  # behind the watermark: late
        .add_elements(TimestampedValue(("s1", 4), 12_000))
        .advance_processing_time(60_000)  # a minute passes, instantly under weir_clock
        .advance_watermark_to_infinity()
    )


@pytest.mark.weir(parallelism=[1, 2])  # the same test at parallelism 1 and 2
def test_sums_per_window_and_late_readings(weir_env, weir_clock) -> None:
    sums, late = build(weir_env, readings(), WatermarkStrategy.no_watermarks())
    sums_out, late_out = collect(sums), collect(late)

    weir_env.execute()

    assert_output(sums_out, [("s1", 3), ("s2", 10), ("s1", 4)])
    assert_output(late_out, [("s1", 100)])
    assert sorted({ts for _, ts in sums_out.records_with_timestamps()}) == [9_999, 19_999]
