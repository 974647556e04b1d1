"""``TimeCharacteristic``: PyFlink 1.x's switch between processing and event time.

Flink 1.12 made event time the default and deprecated the switch; Flink 2.0 removed it.
weir keeps it so job files and tests written for PyFlink 1.x import and run: setting
``ProcessingTime`` turns the periodic watermark interval off (0), any other value sets it
to 200 ms, as ``StreamExecutionEnvironment.setStreamTimeCharacteristic`` did. Windows and
timers choose their time domain by their assigner, whatever the characteristic.
"""

from __future__ import annotations

import enum


class TimeCharacteristic(enum.Enum):
    ProcessingTime = 0
    IngestionTime = 1
    EventTime = 2
