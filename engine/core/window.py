"""Window assigners and triggers, as in ``pyflink.datastream.window``.

Assigners here are pure: given a timestamp they name the windows it belongs to. The
window operator (which keeps window contents in keyed state and fires on timers) is
runtime; it reads these objects. Window starts follow Flink's
``TimeWindow.getWindowStartWithOffset``.
"""

from __future__ import annotations

import struct
from abc import ABC
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, NamedTuple, TypeVar

from weir.common.serializer import TypeSerializer
from weir.common.time import Duration, Time, to_millis
from weir.core.functions import ReduceFunction
from weir.errors import UsageError

MAX_WATERMARK = (1 << 63) - 1
MIN_TIMESTAMP = -(1 << 63)


class Window(ABC):  # noqa: B024 - the named tuples register as windows
    """A bucket of elements with a ``max_timestamp`` (PyFlink's ``Window``). TimeWindow and
    CountWindow are named tuples (hashed and compared per record in C) registered as windows."""

    def max_timestamp(self) -> int:
        raise NotImplementedError


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

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        return get_window_start_with_offset(timestamp, offset, window_size)

    @staticmethod
    def merge_windows(windows: Any, callback: Any) -> None:
        """Merge overlapping windows: ``callback.merge(to_be_merged, merge_result)`` once per
        group of two or more windows that overlap (sessions)."""
        groups: list[tuple[TimeWindow, set[TimeWindow]]] = []
        for candidate in sorted(windows):
            if groups and groups[-1][0].intersects(candidate):
                cover, members = groups[-1]
                members.add(candidate)
                groups[-1] = (cover.cover(candidate), members)
            else:
                groups.append((candidate, {candidate}))
        for cover, members in groups:
            if len(members) > 1:
                callback.merge(members, cover)


class CountWindow(NamedTuple):
    """The window of count windows: a window id, never ending in time (PyFlink's ``CountWindow``)."""

    id: int

    def max_timestamp(self) -> int:
        return MAX_WATERMARK


Window.register(TimeWindow)
Window.register(CountWindow)


@dataclass(frozen=True)
class GlobalWindow(Window):
    """The single window of GlobalWindows; it never ends."""

    def max_timestamp(self) -> int:
        return MAX_WATERMARK

    @staticmethod
    def get() -> GlobalWindow:
        return GlobalWindow()

    def __repr__(self) -> str:
        return "GlobalWindow"


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """A ``TimeWindow`` as two big-endian longs (start, end): 16 bytes, Flink's layout."""

    def serialize(self, element: TimeWindow, stream: Any) -> None:
        stream.write(_LONGS2.pack(element.start, element.end))

    def deserialize(self, stream: Any) -> TimeWindow:
        return TimeWindow(*_LONGS2.unpack(_read_exactly(stream, 16, "TimeWindow")))


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """A ``CountWindow`` as its id, one big-endian long."""

    def serialize(self, element: CountWindow, stream: Any) -> None:
        stream.write(_LONG.pack(element.id))

    def deserialize(self, stream: Any) -> CountWindow:
        return CountWindow(_LONG.unpack(_read_exactly(stream, 8, "CountWindow"))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    """The ``GlobalWindow`` as one zero byte (Flink's ``GlobalWindow.Serializer``)."""

    def serialize(self, element: GlobalWindow, stream: Any) -> None:
        stream.write(b"\x00")

    def deserialize(self, stream: Any) -> GlobalWindow:
        _read_exactly(stream, 1, "GlobalWindow")
        return GlobalWindow.get()


_LONG = struct.Struct(">q")
_LONGS2 = struct.Struct(">qq")


def _read_exactly(stream: Any, n: int, what: str) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise UsageError(f"a serialized {what} is {n} bytes; the stream had {len(data)} left")
    return data


def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
    remainder = (timestamp - offset) % window_size
    return timestamp - remainder


def _millis(what: str, value: Time | Duration | int) -> int:
    return to_millis(what, value)


T = TypeVar("T")
W = TypeVar("W")


class TriggerResult(Enum):
    """What a trigger decides for a window: evaluate it (fire), clear it (purge), both, or neither."""

    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return bool(self.value[0])

    def is_purge(self) -> bool:
        return bool(self.value[1])


class Trigger(Generic[T, W]):
    """Decides when a window (pane) fires, as PyFlink's ``Trigger``.

    The window operator calls ``on_element`` for every element added to a window and
    ``on_event_time``/``on_processing_time`` when a timer the trigger registered through
    its context fires; each returns a ``TriggerResult``. A trigger keeps no state in its
    own attributes (one instance serves every key and window): it keeps it in
    ``ctx.get_partitioned_state(descriptor)``, scoped to the key and window, which is
    checkpointed with the operator. ``clear`` removes that state and the timers when the
    window is cleaned up. With a merging assigner (sessions), ``can_merge`` must be true
    and ``on_merge`` re-registers what the merged window needs.
    """

    class TriggerContext:
        """What a trigger may use: the clocks, timers of the current key and window, and
        state scoped to them."""

        def get_current_processing_time(self) -> int:
            raise NotImplementedError

        def get_metric_group(self) -> Any:
            raise NotImplementedError

        def get_current_watermark(self) -> int:
            raise NotImplementedError

        def register_processing_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def register_event_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def delete_processing_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def delete_event_time_timer(self, time: int) -> None:
            raise NotImplementedError

        def get_partitioned_state(self, state_descriptor: Any) -> Any:
            raise NotImplementedError

    class OnMergeContext(TriggerContext):
        """The context of ``on_merge``: also merges the merged windows' state into the new one."""

        def merge_partitioned_state(self, state_descriptor: Any) -> None:
            raise NotImplementedError

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        raise NotImplementedError(f"{type(self).__name__} must implement on_element")

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        raise NotImplementedError(f"{type(self).__name__} must implement on_processing_time")

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        raise NotImplementedError(f"{type(self).__name__} must implement on_event_time")

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        raise UsageError(f"trigger {type(self).__name__} does not support merging windows")

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement clear")

    def describe(self) -> str:
        return type(self).__name__


class EventTimeTrigger(Trigger[Any, Any]):
    """Fires once the watermark passes the window's ``max_timestamp`` (at once for a late
    element of a window still within the allowed lateness)."""

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()


class ProcessingTimeTrigger(Trigger[Any, Any]):
    """Fires once the processing-time clock passes the window's ``max_timestamp``."""

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()


class Min(ReduceFunction):
    """Keeps the smaller value (the continuous triggers' next firing time)."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        return min(value1, value2)


def _plus(a: int, b: int) -> int:
    return a + b


def _interval(what: str, interval: Time | Duration | int) -> int:
    millis = _millis(what, interval)
    if millis <= 0:
        raise UsageError(f"{what} must be positive, got {millis} ms")
    return millis


class _Continuous(Trigger[Any, Any]):
    """Fires every ``interval`` ms (aligned to multiples of it) until the window's end; the
    next firing time is kept in the state ``fire-time`` of the window."""

    def __init__(self, interval: int) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise UsageError(f"{type(self).__name__} needs a positive interval in ms, got {interval!r}")
        self.interval = interval
        from weir.core.state import ReducingStateDescriptor

        self.state_desc = ReducingStateDescriptor("fire-time", Min())

    def register_next_fire_timestamp(
        self, time: int, window: Any, ctx: Trigger.TriggerContext, fire_timestamp_state: Any
    ) -> None:
        """Registers the next firing, ``interval`` after ``time`` but not past the window's end,
        and keeps it in ``fire_timestamp_state``."""
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_timestamp_state.add(next_fire)
        self._register(ctx, next_fire)

    def _register(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_desc)
        next_fire = ctx.get_partitioned_state(self.state_desc).get()
        if next_fire is not None:
            self._register(ctx, next_fire)

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        state = ctx.get_partitioned_state(self.state_desc)
        time = state.get()
        if time is not None:
            self._delete(ctx, time)
            state.clear()

    def describe(self) -> str:
        return f"{type(self).__name__}({self.interval})"


class ContinuousEventTimeTrigger(_Continuous):
    """Fires every ``interval`` of event time while the window is open, and at its end."""

    @staticmethod
    def of(interval: Time | Duration | int) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(_interval("ContinuousEventTimeTrigger interval", interval))

    def _register(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is past the window already
        ctx.register_event_time_timer(window.max_timestamp())
        state = ctx.get_partitioned_state(self.state_desc)
        if state.get() is None:
            self.register_next_fire_timestamp(timestamp - (timestamp % self.interval), window, ctx, state)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        state = ctx.get_partitioned_state(self.state_desc)
        fire_time = state.get()
        if fire_time is not None and fire_time == time:
            state.clear()
            self.register_next_fire_timestamp(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE


class ContinuousProcessingTimeTrigger(_Continuous):
    """Fires every ``interval`` of processing time while the window is open."""

    @staticmethod
    def of(interval: Time | Duration | int) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(
            _interval("ContinuousProcessingTimeTrigger interval", interval)
        )

    def _register(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        now = ctx.get_current_processing_time()
        if state.get() is None:
            self.register_next_fire_timestamp(now - (now % self.interval), window, ctx, state)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        if state.get() == time:
            state.clear()
            self.register_next_fire_timestamp(time, window, ctx, state)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE


class CountTrigger(Trigger[Any, Any]):
    """Fires each time the window has received ``count`` more elements (state ``count``)."""

    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(f"CountTrigger needs a positive count, got {count!r}")
        self.count = count
        from weir.core.state import ReducingStateDescriptor

        self.state_desc = ReducingStateDescriptor("count", _plus)

    @staticmethod
    def of(window_size: int) -> CountTrigger:
        return CountTrigger(window_size)

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        state = ctx.get_partitioned_state(self.state_desc)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self.state_desc)

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self.state_desc).clear()

    def describe(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger[Any, Any]):
    """Turns the nested trigger's FIRE into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        if not isinstance(nested_trigger, Trigger):
            raise UsageError(f"PurgingTrigger wraps a Trigger, got {nested_trigger!r}")
        self.nested_trigger = nested_trigger

    @property
    def nested(self) -> Trigger:
        return self.nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def describe(self) -> str:
        return f"PurgingTrigger({self.nested_trigger.describe()})"


class NeverTrigger(Trigger[Any, Any]):
    """Never fires: the default trigger of GlobalWindows."""

    def on_element(
        self, element: Any, timestamp: int, window: Any, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Any, ctx: Trigger.OnMergeContext) -> None:
        pass

    def clear(self, window: Any, ctx: Trigger.TriggerContext) -> None:
        pass


class WindowAssigner(Generic[T, W]):
    """Names the windows an element belongs to (PyFlink's ``WindowAssigner``).

    ``is_event_time`` is a bool attribute here; a subclass written the PyFlink way, with an
    ``is_event_time(self)`` method, has it turned into the same attribute. ``assign_windows``
    gets a ``WindowAssigner.WindowAssignerContext`` as its third argument (the processing
    time, and a runtime context whose keyed state is the current key's).
    """

    is_event_time: bool = True
    is_merging = False

    class WindowAssignerContext:
        def get_current_processing_time(self) -> int:
            raise NotImplementedError

        def get_runtime_context(self) -> Any:
            raise NotImplementedError

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        method = cls.__dict__.get("is_event_time")
        if callable(method):
            cls.is_event_time = property(lambda self: bool(method(self)))  # type: ignore[assignment]

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        raise NotImplementedError

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger() if self.is_event_time else ProcessingTimeTrigger()

    def get_window_serializer(self) -> Any:
        """The serializer of this assigner's windows (a user's assigner may give its own)."""
        return None

    def describe(self) -> str:
        return type(self).__name__


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows merge (sessions): ``merge_windows`` names which."""

    is_merging = True

    class MergeCallback:
        def merge(self, to_be_merged: Any, merge_result: Any) -> None:
            raise NotImplementedError

    def merge_windows(self, windows: Any, callback: Any) -> None:
        raise NotImplementedError


class SessionWindowTimeGapExtractor:
    """Gives a session's gap in milliseconds from an element (dynamic session windows)."""

    def extract(self, element: Any) -> int:
        raise NotImplementedError


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

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        start = get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def describe(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.offset})"

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()


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

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        windows = []
        last_start = get_window_start_with_offset(timestamp, self.offset, self.slide)
        start = last_start
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows

    def describe(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, {self.offset})"

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()


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


class _Session(MergingWindowAssigner[Any, TimeWindow]):
    def __init__(self, gap: int) -> None:
        if gap <= 0:
            raise UsageError(f"{type(self).__name__} needs a positive gap, got {gap} ms")
        self.gap = gap

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        return [TimeWindow(timestamp, timestamp + self.gap)]

    def merge_windows(self, windows: Any, callback: Any) -> None:
        TimeWindow.merge_windows(windows, callback)

    def describe(self) -> str:
        return f"{type(self).__name__}({self.gap})"

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()


class EventTimeSessionWindows(_Session):
    is_event_time = True

    @staticmethod
    def with_gap(size: Time | Duration | int) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_millis("session gap", size))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(_Session):
    is_event_time = False

    @staticmethod
    def with_gap(size: Time | Duration | int) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_millis("session gap", size))

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)


class _DynamicSession(MergingWindowAssigner[Any, TimeWindow]):
    """Sessions whose gap an extractor gives per element (``extract(element)`` in ms)."""

    def __init__(self, extractor: SessionWindowTimeGapExtractor | Callable[[Any], int]) -> None:
        extract = getattr(extractor, "extract", None)
        if not callable(extract):
            if not callable(extractor):
                raise UsageError(
                    f"{type(self).__name__} needs a SessionWindowTimeGapExtractor or a callable "
                    f"element -> gap in ms, got {extractor!r}"
                )
            extract = extractor
        self.extractor = extractor
        self._extract = extract

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        gap = self._extract(element)
        if isinstance(gap, Time | Duration):
            gap = gap.to_milliseconds()
        if isinstance(gap, bool) or not isinstance(gap, int) or gap <= 0:
            raise UsageError(
                f"{type(self).__name__}: the gap extractor returned {gap!r} for {element!r}; "
                f"a session gap must be a positive number of milliseconds"
            )
        return [TimeWindow(timestamp, timestamp + gap)]

    def merge_windows(self, windows: Any, callback: Any) -> None:
        TimeWindow.merge_windows(windows, callback)

    def get_window_serializer(self) -> TimeWindowSerializer:
        return TimeWindowSerializer()


class DynamicEventTimeSessionWindows(_DynamicSession):
    is_event_time = True

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)


class DynamicProcessingTimeSessionWindows(_DynamicSession):
    is_event_time = False

    @staticmethod
    def with_dynamic_gap(
        extractor: SessionWindowTimeGapExtractor | Callable[[Any], int],
    ) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)


def _count_size(what: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{what} must be a positive number of elements, got {value!r}")
    return value


class CountTumblingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Windows of ``window_size`` consecutive elements per key: the n-th element (from 0) goes
    to ``CountWindow(n // window_size)``; the default trigger fires a window when it is full.
    The per-key element count is keyed state ``tumble-count-assigner``."""

    is_event_time = False

    def __init__(self, window_size: int) -> None:
        self.window_size = _count_size("CountTumblingWindowAssigner window_size", window_size)
        from weir.core.state import ValueStateDescriptor

        self.count_descriptor = ValueStateDescriptor("tumble-count-assigner")

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        state = context.get_runtime_context().get_state(self.count_descriptor)
        count = state.value() or 0
        state.update(count + 1)
        return [CountWindow(count // self.window_size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return CountTrigger(self.window_size)

    def describe(self) -> str:
        return f"CountTumblingWindowAssigner({self.window_size})"

    def get_window_serializer(self) -> CountWindowSerializer:
        return CountWindowSerializer()


class CountSlidingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """Windows of ``window_size`` elements starting every ``window_slide`` elements per key:
    window ``i`` holds elements ``i*slide .. i*slide + size - 1`` (from 0), and the default
    trigger fires it when it is full (as PyFlink: a window fires once, with ``size`` elements).
    The per-key element count is keyed state ``slide-count-assigner``."""

    is_event_time = False

    def __init__(self, window_size: int, window_slide: int) -> None:
        self.window_size = _count_size("CountSlidingWindowAssigner window_size", window_size)
        self.window_slide = _count_size("CountSlidingWindowAssigner window_slide", window_slide)
        from weir.core.state import ValueStateDescriptor

        self.count_descriptor = ValueStateDescriptor("slide-count-assigner")

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        state = context.get_runtime_context().get_state(self.count_descriptor)
        count = state.value() or 0
        state.update(count + 1)
        size, slide = self.window_size, self.window_slide
        windows = []
        window_id = count // slide
        while window_id >= 0 and window_id * slide <= count <= window_id * slide + size - 1:
            windows.append(CountWindow(window_id))
            window_id -= 1
        return windows

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return CountTrigger(self.window_size)

    def describe(self) -> str:
        return f"CountSlidingWindowAssigner({self.window_size}, {self.window_slide})"

    def get_window_serializer(self) -> CountWindowSerializer:
        return CountWindowSerializer()


class GlobalWindows(WindowAssigner):
    """One window for everything; it fires only through a trigger (count_window uses CountTrigger)."""

    is_event_time = False

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, context: Any = None) -> list[Any]:
        return [GlobalWindow()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def get_window_serializer(self) -> GlobalWindowSerializer:
        return GlobalWindowSerializer()


class TimestampedValue:
    """An element of a window with its timestamp (None when it has none), as evictors see it."""

    __slots__ = ("_timestamp", "_value")

    def __init__(self, value: Any, timestamp: int | None = None) -> None:
        self._value = value
        self._timestamp = timestamp

    def get_value(self) -> Any:
        return self._value

    def get_timestamp(self) -> int | None:
        return self._timestamp

    def has_timestamp(self) -> bool:
        return self._timestamp is not None

    def __repr__(self) -> str:
        return f"TimestampedValue({self._value!r}, {self._timestamp!r})"


class Evictor(Generic[T, W]):
    """Removes elements from a window when it fires, before and/or after the window function
    (Flink's ``Evictor``; PyFlink has none). ``elements`` is a list of ``TimestampedValue``
    in arrival order that the evictor shortens in place (``del elements[i]``); what is left
    after ``evict_after`` stays in the window."""

    class EvictorContext:
        def get_current_processing_time(self) -> int:
            raise NotImplementedError

        def get_current_watermark(self) -> int:
            raise NotImplementedError

        def get_metric_group(self) -> Any:
            raise NotImplementedError

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        raise NotImplementedError

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class CountEvictor(Evictor[Any, Any]):
    """Keeps the last ``max_count`` elements (evicting from the front), before the window
    function, or after it with ``do_evict_after``."""

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        self.max_count = _count_size("CountEvictor max_count", max_count)
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if size > self.max_count:
            del elements[: size - self.max_count]

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if self.do_evict_after:
            self._evict(elements, size)

    def describe(self) -> str:
        return f"CountEvictor({self.max_count}{', after' if self.do_evict_after else ''})"


class TimeEvictor(Evictor[Any, Any]):
    """Keeps the elements whose timestamp is within ``window_size`` ms of the newest one:
    elements with ``timestamp <= max_timestamp - window_size`` go (none when no element has a
    timestamp)."""

    def __init__(self, window_size: int, do_evict_after: bool = False) -> None:
        size = _millis("TimeEvictor window_size", window_size)
        if size < 0:
            raise UsageError(f"TimeEvictor window_size must not be negative, got {size} ms")
        self.window_size = size
        self.do_evict_after = bool(do_evict_after)

    @staticmethod
    def of(window_size: Time | Duration | int, do_evict_after: bool = False) -> TimeEvictor:
        return TimeEvictor(_millis("TimeEvictor window_size", window_size), do_evict_after)

    def _evict(self, elements: list[TimestampedValue]) -> None:
        stamps = [t for e in elements if (t := e.get_timestamp()) is not None]
        if not stamps:
            return
        cutoff = max(stamps) - self.window_size
        elements[:] = [e for e in elements if (t := e.get_timestamp()) is None or t > cutoff]

    def evict_before(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if not self.do_evict_after:
            self._evict(elements)

    def evict_after(
        self, elements: list[TimestampedValue], size: int, window: Any, evictor_context: Any
    ) -> None:
        if self.do_evict_after:
            self._evict(elements)

    def describe(self) -> str:
        return f"TimeEvictor({self.window_size}{', after' if self.do_evict_after else ''})"
