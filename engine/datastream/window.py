"""``pyflink.datastream.window``: window assigners, triggers, evictors and windows, at PyFlink's path.

They live in ``weir.core.window`` (descriptions the window operators read); this
module hands out the same classes. Evictors (``Evictor``, ``CountEvictor``,
``TimeEvictor``, ``TimestampedValue``) follow Flink's Java API: PyFlink has none.
"""

from __future__ import annotations

from typing import Any

from weir.common.time import Time  # noqa: F401 - importable from here, as in PyFlink
from weir.core.window import (
    MAX_WATERMARK,
    MIN_TIMESTAMP,
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountEvictor,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    CountWindowSerializer,
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    Evictor,
    GlobalWindow,
    GlobalWindows,
    GlobalWindowSerializer,
    MergingWindowAssigner,
    Min,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    TimeWindowSerializer,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    Window,
    WindowAssigner,
    get_window_start_with_offset,
)

__all__ = [
    "MAX_WATERMARK",
    "MIN_TIMESTAMP",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountSlidingWindowAssigner",
    "CountTrigger",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "CountWindowSerializer",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "Evictor",
    "GlobalWindow",
    "GlobalWindowSerializer",
    "GlobalWindows",
    "MergingWindowAssigner",
    "Min",
    "NeverTrigger",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeEvictor",
    "TimeWindow",
    "TimeWindowSerializer",
    "TimestampedValue",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
    "WindowOperationDescriptor",
    "get_window_start_with_offset",
]


class WindowOperationDescriptor:
    """What a window operation is made of (PyFlink's ``WindowOperationDescriptor``); the
    windowed streams build one per window operator and take the operator's description from
    it (``generate_op_desc``), as PyFlink does."""

    def __init__(
        self,
        assigner: Any,
        trigger: Any,
        allowed_lateness: int,
        late_data_output_tag: Any,
        window_state_descriptor: Any,
        window_serializer: Any,
        internal_window_function: Any,
    ) -> None:
        self.assigner = assigner
        self.trigger = trigger
        self.allowed_lateness = allowed_lateness
        self.late_data_output_tag = late_data_output_tag
        self.window_state_descriptor = window_state_descriptor
        self.window_serializer = window_serializer
        self.internal_window_function = internal_window_function

    def generate_op_name(self) -> str:
        """The assigner's class name (PyFlink names window operators so)."""
        return type(self.assigner).__name__

    def generate_op_desc(self, windowed_stream_type: str, func_desc: str) -> str:
        """``<Window|AllWindow>(<assigner>, <trigger class>, <function>)``."""
        describe = getattr(self.assigner, "describe", None)
        assigner = describe() if callable(describe) else str(self.assigner)
        return f"{windowed_stream_type}({assigner}, {type(self.trigger).__name__}, {func_desc})"
