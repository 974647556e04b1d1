"""``pyflink.datastream.window``: window assigners, triggers and windows, at PyFlink's path.

They live in ``weir.core.window`` (descriptions the window operators read); this
module hands out the same classes.
"""

from __future__ import annotations

from weir.core.window import (
    MAX_WATERMARK,
    MIN_TIMESTAMP,
    CountTrigger,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    Trigger,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
    get_window_start_with_offset,
)

__all__ = [
    "MAX_WATERMARK",
    "MIN_TIMESTAMP",
    "CountTrigger",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "GlobalWindow",
    "GlobalWindows",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "Trigger",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "WindowAssigner",
    "get_window_start_with_offset",
]
