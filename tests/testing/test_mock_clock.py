"""Under weir_clock, event time, processing time and checkpoint intervals pass without waiting."""

from __future__ import annotations

import time

import pytest

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream.window import TumblingEventTimeWindows
from weir.testing import TestStream, TimestampedValue, assert_output, collect

MINUTE_MS = 60_000
PAIR = Types.TUPLE([Types.STRING(), Types.LONG()])


def twelve_minutes() -> tuple[TestStream, list[tuple[str, int]]]:
    """One reading per sensor per minute; after each minute the watermark and the clock move on a minute."""
    stream = TestStream(type_info=PAIR)
    sums: dict[tuple[str, int], int] = {}
    for minute in range(12):
        readings = [
            TimestampedValue((sensor, minute + 1), minute * MINUTE_MS + 30_000) for sensor in ("s1", "s2")
        ]
        stream.add_elements(*readings)
        stream.advance_watermark_to(minute * MINUTE_MS + MINUTE_MS - 1)
        stream.advance_processing_time(MINUTE_MS)
        for sensor in ("s1", "s2"):
            window = minute // 10
            sums[(sensor, window)] = sums.get((sensor, window), 0) + minute + 1
    return stream.advance_watermark_to_infinity(), [(s, total) for (s, _), total in sorted(sums.items())]


@pytest.mark.weir(parallelism=[1, 2])
def test_ten_minute_windows_and_minute_checkpoints_run_in_well_under_a_second(weir_env, weir_clock) -> None:
    stream, expected = twelve_minutes()
    weir_env.enable_checkpointing(MINUTE_MS)
    windows = collect(
        weir_env.from_source(stream, WatermarkStrategy.no_watermarks(), "readings")
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.minutes(10)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=PAIR)
    )
    started = time.perf_counter()
    result = weir_env.execute("ten-minute windows")
    wall_s = time.perf_counter() - started
    print(
        f"\n12 minutes of event and processing time, 10-minute windows, checkpoint every minute: "
        f"{wall_s * 1000:.0f} ms wall time ({weir_clock})"
    )
    assert_output(windows, expected)
    # every window fired with its end as timestamp: 0-10, 10-20 and, at the end of input, 20-30 minutes
    assert sorted({ts for _, ts in windows.records_with_timestamps()}) == [
        10 * MINUTE_MS - 1,
        20 * MINUTE_MS - 1,
    ]
    # the checkpoint interval really ran on the mock clock: one per minute of processing time
    assert result.get_accumulator_result("checkpoints_completed") >= 10
    assert weir_clock.virtual_seconds >= 12 * 60
