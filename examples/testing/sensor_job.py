"""A windowed job written the way a user writes one: the pipeline takes its source as a parameter,
so production code passes a real source and the tests pass a TestStream.

Readings are (sensor, value) with event timestamps; the job sums each sensor's values per
10-second event-time window and sends readings that arrive after their window closed to a
side output.
"""

from __future__ import annotations

from typing import Any

from weir.common import Time, Types, WatermarkStrategy
from weir.datastream import DataStream, OutputTag, StreamExecutionEnvironment
from weir.datastream.window import TumblingEventTimeWindows

READING = Types.TUPLE([Types.STRING(), Types.LONG()])
LATE = OutputTag("late-readings", READING)


def build(
    env: StreamExecutionEnvironment, source: Any, strategy: WatermarkStrategy
) -> tuple[DataStream, DataStream]:
    """The pipeline: per-sensor sums over 10-second windows, and the late readings."""
    readings = env.from_source(source, strategy, "readings")
    sums = (
        readings.key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(10)))
        .side_output_late_data(LATE)
        .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=READING)
        .name("sensor sums")
    )
    return sums, sums.get_side_output(LATE)
