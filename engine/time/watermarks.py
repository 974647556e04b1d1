"""Watermark generators: from event timestamps to watermarks, as Flink's ``eventtime`` package.

Theory of operation
-------------------
A source (or ``assign_timestamps_and_watermarks``) stamps each record with an event
timestamp (:class:`TimestampAssignment`), shows each timestamp to a
:class:`WatermarkGenerator` (``on_event``), and asks the generator for a watermark every
auto-watermark interval (``on_periodic_emit``). A watermark ``w`` says "no record with a
timestamp <= ``w`` follows".

- :class:`BoundedOutOfOrdernessWatermarks` tracks the largest timestamp seen and emits
  ``max_timestamp - max_out_of_orderness_ms - 1``; nothing until the first event (Flink
  emits Long.MIN there, which carries no information).
- :class:`AscendingTimestampsWatermarks` is the same with a bound of 0.
- :class:`NoWatermarksGenerator` never emits.
- :class:`WatermarksWithIdleness` wraps a generator: when no event arrived for
  ``idle_timeout_ms`` it reports ``idle`` (and emits no watermark) until the next event.
  Time is passed in (``now_ms``); there is no clock here.
- :class:`WatermarkOutput` is the part of the task that turns all of this into the
  events a stream carries (Flink's ``WatermarkToDataOutput``): it forwards a watermark
  only when it advances, and announces idle/active only when the status changes. It
  returns actions (:class:`EmitWatermark`, :class:`EmitWatermarkStatus`) in the order
  they must be sent.

Invariants: a generator's watermark never decreases; ``WatermarkOutput`` never emits a
watermark <= one it emitted before. Records without a timestamp (``NO_TIMESTAMP``) do not
move a watermark. Not here: the combination of many input channels (``valve.py``) and
timers (``timers.py``). Pure: no trio, no clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from weir.columnar.probe import FieldColumn
from weir.common.watermark_strategy import TimestampAssigner, WatermarkStrategy, _CallableTimestampAssigner
from weir.errors import UsageError

NO_TIMESTAMP = int(np.iinfo(np.int64).min)  # a record without an event timestamp (== weir.codec.batch)
MIN_WATERMARK = -(1 << 63)
MAX_WATERMARK = (1 << 63) - 1


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class EmitWatermark:
    """Send a watermark downstream."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class EmitWatermarkStatus:
    """Announce that this output became idle (``idle=True``) or active again."""

    idle: bool


WatermarkAction = EmitWatermark | EmitWatermarkStatus


# --------------------------------------------------------------------------- generators


#: Up to this many timestamps, the largest is found in Python (see ``max_timestamp``).
_SMALL = 128


def max_timestamp(timestamps: np.ndarray | Sequence[int] | None) -> int | None:
    """The largest real timestamp in ``timestamps`` (``NO_TIMESTAMP`` entries ignored), or None."""
    if timestamps is None or len(timestamps) == 0:
        return None
    if type(timestamps) is np.ndarray and timestamps.dtype == np.int64 and len(timestamps) <= _SMALL:
        top = max(timestamps.tolist())  # numpy's reduction costs more than a small batch's values
    else:
        top = int(np.asarray(timestamps, dtype=np.int64).max())
    if top == NO_TIMESTAMP:  # every entry is NO_TIMESTAMP
        return None
    return top


@runtime_checkable
class WatermarkGenerator(Protocol):
    """Flink's ``WatermarkGenerator``: sees every timestamp, is polled periodically.

    ``on_event`` may return a watermark (punctuated generators); the built-in ones
    return None there and emit only from ``on_periodic_emit``. ``on_events`` is the
    batch form of ``on_event`` (one call per batch, numpy in).
    """

    def on_event(self, timestamp: int) -> int | None: ...

    def on_events(self, timestamps: np.ndarray) -> int | None: ...

    def on_periodic_emit(self) -> int | None: ...


class BoundedOutOfOrdernessWatermarks:
    """Watermark ``max_timestamp - max_out_of_orderness_ms - 1``; None until the first event."""

    def __init__(self, max_out_of_orderness_ms: int) -> None:
        if max_out_of_orderness_ms < 0:
            raise UsageError(f"max out-of-orderness must not be negative, got {max_out_of_orderness_ms} ms")
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self.max_timestamp: int | None = None

    def on_event(self, timestamp: int) -> int | None:
        if timestamp != NO_TIMESTAMP and (self.max_timestamp is None or timestamp > self.max_timestamp):
            self.max_timestamp = timestamp
        return None

    def on_events(self, timestamps: np.ndarray) -> int | None:
        top = max_timestamp(timestamps)
        if top is not None:
            self.on_event(top)
        return None

    def on_periodic_emit(self) -> int | None:
        if self.max_timestamp is None:
            return None
        # Clamp so that a timestamp near Long.MIN cannot wrap below the int64 range.
        return max(MIN_WATERMARK, self.max_timestamp - self.max_out_of_orderness_ms - 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.max_out_of_orderness_ms} ms, max_timestamp={self.max_timestamp})"


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """For timestamps that only grow: watermark ``max_timestamp - 1``."""

    def __init__(self) -> None:
        super().__init__(0)


class NoWatermarksGenerator:
    """Never emits a watermark (``WatermarkStrategy.no_watermarks()``)."""

    def on_event(self, timestamp: int) -> int | None:
        return None

    def on_events(self, timestamps: np.ndarray) -> int | None:
        return None

    def on_periodic_emit(self) -> int | None:
        return None

    def __repr__(self) -> str:
        return "NoWatermarksGenerator()"


class WatermarksWithIdleness:
    """Wraps a generator; ``idle`` once no event arrived for ``idle_timeout_ms``.

    Inactivity is measured from the last event, or, before the first event, from the
    first periodic emit (as Flink's ``IdlenessTimer``, so a source that never produces
    becomes idle too). While idle, ``on_periodic_emit`` returns None; the next event
    makes it active again. The caller announces the change (see :class:`WatermarkOutput`).
    """

    def __init__(self, generator: WatermarkGenerator, idle_timeout_ms: int) -> None:
        if idle_timeout_ms <= 0:
            raise UsageError(f"idle timeout must be positive, got {idle_timeout_ms} ms")
        self.generator = generator
        self.idle_timeout_ms = idle_timeout_ms
        self.idle = False
        self.last_activity_ms: int | None = None

    def mark_activity(self, now_ms: int) -> None:
        """Records arrived at ``now_ms`` (with or without timestamps): active again."""
        self.last_activity_ms = now_ms
        self.idle = False

    def on_event(self, timestamp: int, now_ms: int) -> int | None:
        self.mark_activity(now_ms)
        return self.generator.on_event(timestamp)

    def on_events(self, timestamps: np.ndarray, now_ms: int) -> int | None:
        if len(timestamps) == 0:
            return None
        self.mark_activity(now_ms)
        return self.generator.on_events(timestamps)

    def on_periodic_emit(self, now_ms: int) -> int | None:
        if self.last_activity_ms is None:
            self.last_activity_ms = now_ms
        if now_ms - self.last_activity_ms >= self.idle_timeout_ms:
            self.idle = True
            return None
        return self.generator.on_periodic_emit()

    def __repr__(self) -> str:
        return f"WatermarksWithIdleness({self.generator!r}, {self.idle_timeout_ms} ms, idle={self.idle})"


def create_watermark_generator(strategy: WatermarkStrategy) -> WatermarkGenerator:
    """The generator a strategy describes (without idleness; see :class:`WatermarkOutput`)."""
    kind = strategy.kind
    if kind == WatermarkStrategy.NONE:
        return NoWatermarksGenerator()
    if kind == WatermarkStrategy.MONOTONOUS:
        return AscendingTimestampsWatermarks()
    if kind == WatermarkStrategy.BOUNDED_OUT_OF_ORDERNESS:
        return BoundedOutOfOrdernessWatermarks(strategy.max_out_of_orderness_ms)
    raise UsageError(
        f"watermark strategy kind {kind!r} is unknown; expected one of "
        f"{WatermarkStrategy.NONE!r}, {WatermarkStrategy.MONOTONOUS!r}, {WatermarkStrategy.BOUNDED_OUT_OF_ORDERNESS!r}"
    )


# --------------------------------------------------------------------------- the output


class WatermarkOutput:
    """A strategy's generator plus idleness plus de-duplication: actions for one output.

    Use: ``on_events(batch.timestamps, now_ms)`` for every batch,
    ``on_periodic_emit(now_ms)`` every auto-watermark interval (or after every batch when
    the interval is 0), ``on_end_of_input()`` at the end of a bounded input; send the
    returned actions in order.
    """

    def __init__(self, strategy: WatermarkStrategy) -> None:
        self.strategy = strategy
        base = create_watermark_generator(strategy)
        self.idleness = (
            None
            if strategy.idle_timeout_ms is None
            else WatermarksWithIdleness(base, strategy.idle_timeout_ms)
        )
        self.generator = base
        self.current_watermark = MIN_WATERMARK
        self.idle = False

    def _watermark(self, watermark: int | None, actions: list[WatermarkAction]) -> None:
        if watermark is None or watermark <= self.current_watermark:
            return
        if self.idle:
            self.idle = False
            actions.append(EmitWatermarkStatus(idle=False))
        self.current_watermark = watermark
        actions.append(EmitWatermark(watermark))

    def _activity(self, actions: list[WatermarkAction]) -> None:
        if self.idle:
            self.idle = False
            actions.append(EmitWatermarkStatus(idle=False))

    def on_event(self, timestamp: int, now_ms: int) -> list[WatermarkAction]:
        actions: list[WatermarkAction] = []
        self._activity(actions)
        if self.idleness is not None:
            wm = self.idleness.on_event(timestamp, now_ms)
        else:
            wm = self.generator.on_event(timestamp)
        self._watermark(wm, actions)
        return actions

    def on_events(self, timestamps: np.ndarray | None, now_ms: int) -> list[WatermarkAction]:
        """A batch was emitted; it counts as activity even if its records carry no timestamps."""
        actions: list[WatermarkAction] = []
        self._activity(actions)
        if self.idleness is not None:
            self.idleness.mark_activity(now_ms)
        wm = None if timestamps is None or len(timestamps) == 0 else self.generator.on_events(timestamps)
        self._watermark(wm, actions)
        return actions

    def on_periodic_emit(self, now_ms: int) -> list[WatermarkAction]:
        actions: list[WatermarkAction] = []
        if self.idleness is not None:
            wm = self.idleness.on_periodic_emit(now_ms)
            if self.idleness.idle:
                if not self.idle:
                    self.idle = True
                    actions.append(EmitWatermarkStatus(idle=True))
                return actions
        else:
            wm = self.generator.on_periodic_emit()
        self._watermark(wm, actions)
        return actions

    def on_end_of_input(self) -> list[WatermarkAction]:
        """Event time is over: the final Long.MAX watermark (active again if idle)."""
        actions: list[WatermarkAction] = []
        self._watermark(MAX_WATERMARK, actions)
        return actions


# --------------------------------------------------------------------------- timestamps


class TimestampAssignment:
    """Event timestamps of a batch from a strategy's assigner (or an assigner itself).

    The assigner is user code and runs once per record; everything around it (reading
    the previous timestamps, building the int64 array) is done once per batch.
    """

    def __init__(self, assigner: TimestampAssigner | WatermarkStrategy | None) -> None:
        if isinstance(assigner, WatermarkStrategy):
            assigner = assigner.timestamp_assigner
        self.assigner = assigner
        #: the timestamps of a columnar batch as one column: weir.columnar's timestamp_field(i),
        #: or an assigner that returns one field of the record (``lambda e, ts: e[2]``)
        column_of: Any = getattr(assigner, "timestamp_column", None)
        if column_of is None and assigner is not None:
            extract = (
                assigner._fn if type(assigner) is _CallableTimestampAssigner else assigner.extract_timestamp
            )
            field = FieldColumn(lambda record: extract(record, NO_TIMESTAMP), whole_record=False)

            def column_of(values: Any) -> np.ndarray | None:
                return _integer_column(field.column(values))

        self._column_of: Any = column_of if column_of is not None else (lambda values: None)

    def stamp(self, values: Sequence[Any] | np.ndarray, previous_timestamps: np.ndarray | None) -> np.ndarray:
        """One int64 timestamp per value; ``previous_timestamps`` None means none were set.

        Without an assigner the previous timestamps are kept (``NO_TIMESTAMP`` where there
        are none). The assigner receives ``NO_TIMESTAMP`` for a record without one, as Flink
        passes Long.MIN_VALUE.
        """
        n = len(values)
        if previous_timestamps is not None and len(previous_timestamps) != n:
            raise UsageError(f"stamp got {n} values but {len(previous_timestamps)} previous timestamps")
        if self.assigner is None:
            if previous_timestamps is None:
                return np.full(n, NO_TIMESTAMP, dtype=np.int64)
            return np.asarray(previous_timestamps, dtype=np.int64)
        assigner = self.assigner
        column = self._column_of(values)
        if column is not None:  # a field of a columnar batch, read as a column
            return column
        # a plain callable is called directly, and map() keeps the per-record loop in C;
        # fromiter converts each result to int64 as int() would
        extract = assigner._fn if type(assigner) is _CallableTimestampAssigner else assigner.extract_timestamp
        records = values.tolist() if isinstance(values, np.ndarray) else values
        if previous_timestamps is None:
            previous: Any = itertools.repeat(NO_TIMESTAMP, n)
        else:
            previous = np.asarray(previous_timestamps, dtype=np.int64).tolist()
        return np.fromiter(map(extract, records, previous), dtype=np.int64, count=n)


def _integer_column(column: Any) -> np.ndarray | None:
    if not isinstance(column, np.ndarray) or column.dtype.kind not in "iu":
        return None
    return column.astype(np.int64, copy=False)
