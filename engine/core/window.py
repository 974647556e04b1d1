"""Window assigners and triggers, as in ``pyflink.datastream.window``.

Assigners here are pure: given a timestamp they name the windows it belongs to. The
window operator (which keeps window contents in keyed state and fires on timers) is
runtime; it reads these objects. Window starts follow Flink's
``TimeWindow.getWindowStartWithOffset``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from weir.common.time import Duration, Time, to_millis
from weir.errors import UsageError

MAX_WATERMARK = (1 << 63) - 1
MIN_TIMESTAMP = -(1 << 63)


class TimeWindow(NamedTuple):
    """A half-open interval [start, end) of event or processing time, in milliseconds.

    A named tuple: windows are hashed and compared per record, and tuples do that in C.
    """

    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))


@dataclass(frozen=True)
class GlobalWindow:
    """The single window of GlobalWindows; it never ends."""

    def max_timestamp(self) -> int:
        return MAX_WATERMARK


def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
    remainder = (timestamp - offset) % window_size
    return timestamp - remainder


def _millis(what: str, value: Time | Duration | int) -> int:
    return to_millis(what, value)


class Trigger:
    """Decides when a window fires. The operator evaluates it; here it is a description."""

    def describe(self) -> str:
        return type(self).__name__


class EventTimeTrigger(Trigger):
    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()


class ProcessingTimeTrigger(Trigger):
    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()


class CountTrigger(Trigger):
    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(f"CountTrigger needs a positive count, got {count!r}")
        self.count = count

    @staticmethod
    def of(count: int) -> CountTrigger:
        return CountTrigger(count)

    def describe(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger):
    def __init__(self, nested: Trigger) -> None:
        if not isinstance(nested, Trigger):
            raise UsageError(f"PurgingTrigger wraps a Trigger, got {nested!r}")
        self.nested = nested

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    def describe(self) -> str:
        return f"PurgingTrigger({self.nested.describe()})"


class WindowAssigner:
    is_event_time = True
    is_merging = False

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        raise NotImplementedError

    def get_default_trigger(self) -> Trigger:
        return EventTimeTrigger() if self.is_event_time else ProcessingTimeTrigger()

    def describe(self) -> str:
        return type(self).__name__


class _Tumbling(WindowAssigner):
    def __init__(self, size: int, offset: int) -> None:
        if size <= 0:
            raise UsageError(f"{type(self).__name__} needs a positive size, got {size} ms")
        if abs(offset) >= size:
            raise UsageError(
                f"{type(self).__name__} needs |offset| < size, got offset {offset} ms, size {size} ms"
            )
        self.size = size
        self.offset = offset

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        start = get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def describe(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.offset})"


class TumblingEventTimeWindows(_Tumbling):
    is_event_time = True

    @staticmethod
    def of(size: Time | Duration | int, offset: Time | Duration | int = 0) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(_millis("window size", size), _millis("window offset", offset))


class TumblingProcessingTimeWindows(_Tumbling):
    is_event_time = False

    @staticmethod
    def of(size: Time | Duration | int, offset: Time | Duration | int = 0) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(_millis("window size", size), _millis("window offset", offset))


class _Sliding(WindowAssigner):
    def __init__(self, size: int, slide: int, offset: int) -> None:
        if size <= 0 or slide <= 0:
            raise UsageError(
                f"{type(self).__name__} needs a positive size and slide, got size {size} ms, slide {slide} ms"
            )
        if abs(offset) >= slide:
            raise UsageError(
                f"{type(self).__name__} needs |offset| < slide, got offset {offset} ms, slide {slide} ms"
            )
        self.size = size
        self.slide = slide
        self.offset = offset

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        windows = []
        last_start = get_window_start_with_offset(timestamp, self.offset, self.slide)
        start = last_start
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows

    def describe(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, {self.offset})"


class SlidingEventTimeWindows(_Sliding):
    is_event_time = True

    @staticmethod
    def of(
        size: Time | Duration | int, slide: Time | Duration | int, offset: Time | Duration | int = 0
    ) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(
            _millis("window size", size), _millis("window slide", slide), _millis("window offset", offset)
        )


class SlidingProcessingTimeWindows(_Sliding):
    is_event_time = False

    @staticmethod
    def of(
        size: Time | Duration | int, slide: Time | Duration | int, offset: Time | Duration | int = 0
    ) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(
            _millis("window size", size), _millis("window slide", slide), _millis("window offset", offset)
        )


class _Session(WindowAssigner):
    is_merging = True

    def __init__(self, gap: int) -> None:
        if gap <= 0:
            raise UsageError(f"{type(self).__name__} needs a positive gap, got {gap} ms")
        self.gap = gap

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        return [TimeWindow(timestamp, timestamp + self.gap)]

    def describe(self) -> str:
        return f"{type(self).__name__}({self.gap})"


class EventTimeSessionWindows(_Session):
    is_event_time = True

    @staticmethod
    def with_gap(size: Time | Duration | int) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_millis("session gap", size))


class ProcessingTimeSessionWindows(_Session):
    is_event_time = False

    @staticmethod
    def with_gap(size: Time | Duration | int) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_millis("session gap", size))


class GlobalWindows(WindowAssigner):
    """One window for everything; it fires only through a trigger (count_window uses CountTrigger)."""

    is_event_time = False

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        return [GlobalWindow()]

    def get_default_trigger(self) -> Trigger:
        return _NeverTrigger()


class _NeverTrigger(Trigger):
    def describe(self) -> str:
        return "NeverTrigger"
