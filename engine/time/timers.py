"""Timers of one operator, partitioned by key group, as Flink's ``InternalTimerService``.

Theory of operation
-------------------
A timer is ``(timestamp, key, namespace)`` in one of two time domains: event time
(fires when the watermark reaches ``timestamp``) and processing time (fires when the
clock reaches it). The namespace is the window for window operators and a constant for
``KeyedProcessFunction``. There is at most one timer per ``(key, namespace, timestamp)``
and domain: registering it again does nothing.

Events: ``register_*`` / ``delete_*`` (from user code, for the current key), and
``advance_watermark(ts)`` / ``advance_processing_time(now_ms)``, which remove and return
the due timers (``timestamp <= ts``) in timestamp order, ties in registration order.
The caller runs the callbacks; a timer a callback registers at or before the time just
reached fires on the next advance (use ``pop_event_time_timer`` to drain in a loop
instead, which picks such timers up at once as Flink does).

Layout: per domain a heap of ``(timestamp, sequence, key_group, key, namespace)`` and,
per key group, a dict from ``(key, namespace, timestamp)`` to the sequence number of
its live heap entry. Deleting a timer removes it from the dict only; its heap entry
goes stale and is skipped when it reaches the top (a re-registered timer gets a new
sequence, so the stale entry cannot be mistaken for it). When stale entries outnumber
live ones the heap is rebuilt, so every call is O(log n) amortised.

Snapshots (:class:`TimerSnapshot`) are immutable and picklable, hold the live timers of
a key-group range in firing order, and ``restore`` keeps only the timers whose key group
lies in the new subtask's range: splitting a snapshot over new ranges that tile the old
one keeps every timer exactly once. A checkpoint takes ``snapshot_async``: the synchronous
phase copies the per-key-group dicts (C-level copies, no Timer objects), the asynchronous
phase sorts them into the snapshot. The current watermark is not part of a snapshot
(it comes back with the first watermark after recovery). Pure: no trio, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange

MIN_WATERMARK = -(1 << 63)

EVENT_TIME = "event_time"
PROCESSING_TIME = "processing_time"


@dataclass(frozen=True, slots=True)
class Timer:
    """A due (or snapshotted) timer: when, for which key and namespace, and the key's group."""

    timestamp: int
    key: Any
    namespace: Any
    key_group: int


class TimerColumns(Sequence[Timer]):
    """Timers in firing order held as columns: ``timestamps`` and ``key_groups`` (numpy),
    ``keys``, and each namespace once (``namespaces``, in order of first use) with one
    index per timer (``slots``). A sequence of ``Timer`` for every reader (built on first
    access); the state file packs the columns directly, so a snapshot of a million pane
    timers builds no ``Timer`` on the way to disk."""

    __slots__ = ("_timers", "key_groups", "keys", "namespaces", "slots", "timestamps")

    def __init__(
        self,
        timestamps: np.ndarray,
        keys: list[Any],
        namespaces: tuple[Any, ...],
        slots: np.ndarray,
        key_groups: np.ndarray,
    ) -> None:
        if not len(timestamps) == len(keys) == len(slots) == len(key_groups):
            raise UsageError(
                f"timer columns of different lengths: {len(timestamps)} timestamps, {len(keys)} keys, "
                f"{len(slots)} namespace indexes, {len(key_groups)} key groups"
            )
        self.timestamps = timestamps
        self.keys = keys
        self.namespaces = namespaces
        self.slots = slots
        self.key_groups = key_groups
        self._timers: tuple[Timer, ...] | None = None

    def _all(self) -> tuple[Timer, ...]:
        if self._timers is None:
            self._timers = tuple(
                map(
                    Timer,
                    self.timestamps.tolist(),
                    self.keys,
                    map(self.namespaces.__getitem__, self.slots.tolist()),
                    self.key_groups.tolist(),
                )
            )
        return self._timers

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __iter__(self) -> Iterator[Timer]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TimerColumns | tuple):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"TimerColumns({len(self)} timers)"


@dataclass(frozen=True, slots=True)
class TimerSnapshot:
    """The live timers of ``key_group_range`` at snapshot time, each domain in firing order."""

    key_group_range: KeyGroupRange | None
    event_time: Sequence[Timer]  # a tuple, or TimerColumns
    processing_time: Sequence[Timer]

    def __len__(self) -> int:
        return len(self.event_time) + len(self.processing_time)


_HeapEntry = tuple[int, int, int, Any, Any]  # timestamp, sequence, key_group, key, namespace
_TimerId = tuple[Any, Any, int]  # key, namespace, timestamp


class _TimerQueue:
    """One time domain: a lazily-cleaned heap plus the live timers per key group."""

    __slots__ = ("by_group", "heap", "live")

    def __init__(self) -> None:
        self.heap: list[_HeapEntry] = []
        self.by_group: dict[int, dict[_TimerId, int]] = {}
        self.live = 0

    def add(self, key: Any, key_group: int, namespace: Any, timestamp: int, sequence: int) -> bool:
        group = self.by_group.get(key_group)
        if group is None:
            group = self.by_group[key_group] = {}
        timer_id = (key, namespace, timestamp)
        if timer_id in group:
            return False
        group[timer_id] = sequence
        self.live += 1
        heapq.heappush(self.heap, (timestamp, sequence, key_group, key, namespace))
        return True

    def remove(self, key: Any, key_group: int, namespace: Any, timestamp: int) -> bool:
        group = self.by_group.get(key_group)
        if group is None or group.pop((key, namespace, timestamp), None) is None:
            return False
        if not group:
            del self.by_group[key_group]
        self.live -= 1
        if len(self.heap) > 64 and len(self.heap) > 2 * self.live:
            self._compact()
        return True

    def _is_live(self, entry: _HeapEntry) -> bool:
        timestamp, sequence, key_group, key, namespace = entry
        group = self.by_group.get(key_group)
        return group is not None and group.get((key, namespace, timestamp)) == sequence

    def _drop_stale_head(self) -> None:
        heap = self.heap
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)

    def peek(self) -> _HeapEntry | None:
        self._drop_stale_head()
        return self.heap[0] if self.heap else None

    def pop_due(self, until: int) -> Timer | None:
        head = self.peek()
        if head is None or head[0] > until:
            return None
        heapq.heappop(self.heap)
        timestamp, _, key_group, key, namespace = head
        self.remove(key, key_group, namespace, timestamp)
        return Timer(timestamp, key, namespace, key_group)

    def _compact(self) -> None:
        self.heap = [entry for entry in self.heap if self._is_live(entry)]
        heapq.heapify(self.heap)

    def ordered(self, key_group_range: KeyGroupRange | None) -> tuple[Timer, ...]:
        """The live timers (in range) in firing order."""
        return _in_firing_order(self.copy_groups(key_group_range))

    def copy_groups(self, key_group_range: KeyGroupRange | None) -> dict[int, dict[_TimerId, int]]:
        """A copy of the live timers (in range) per key group: one C-level dict copy per group."""
        if key_group_range is None:
            groups: Iterable[int] = self.by_group
        elif len(key_group_range) < len(self.by_group):
            groups = (kg for kg in key_group_range if kg in self.by_group)
        else:
            groups = (kg for kg in self.by_group if kg in key_group_range)
        return {kg: self.by_group[kg].copy() for kg in groups}


def _in_firing_order(by_group: dict[int, dict[_TimerId, int]]) -> tuple[Timer, ...]:
    entries: list[_HeapEntry] = []
    for kg, group in by_group.items():
        for (key, namespace, timestamp), sequence in group.items():
            entries.append((timestamp, sequence, kg, key, namespace))
    entries.sort(key=lambda e: (e[0], e[1]))
    return tuple(Timer(ts, key, ns, kg) for ts, _, kg, key, ns in entries)


class PendingTimerSnapshot:
    """The synchronous phase of a timer snapshot: copies of the live timers per key group
    (no Timer objects, no sorting); ``result()`` -- in the asynchronous phase, any thread --
    builds the ``TimerSnapshot`` from them, so later registrations and deletions never show."""

    def __init__(
        self,
        key_group_range: KeyGroupRange | None,
        event_time: dict[int, dict[_TimerId, int]],
        processing_time: dict[int, dict[_TimerId, int]],
    ) -> None:
        self._key_group_range = key_group_range
        self._event_time = event_time
        self._processing_time = processing_time
        self._result: TimerSnapshot | None = None

    def __len__(self) -> int:
        """How many timers were copied."""
        return sum(map(len, self._event_time.values())) + sum(map(len, self._processing_time.values()))

    def result(self) -> TimerSnapshot:
        if self._result is None:
            self._result = TimerSnapshot(
                self._key_group_range,
                _in_firing_order(self._event_time),
                _in_firing_order(self._processing_time),
            )
        return self._result


class InternalTimerService:
    """Event- and processing-time timers of one operator subtask.

    ``key_group_range`` (optional) is the subtask's range: registering a timer for a key
    group outside it is a :class:`UsageError` (the key was routed to the wrong subtask).
    """

    def __init__(self, key_group_range: KeyGroupRange | None = None) -> None:
        self.key_group_range = key_group_range
        self.current_watermark = MIN_WATERMARK
        self._event = _TimerQueue()
        self._processing = _TimerQueue()
        self._sequence = 0

    def _check_key_group(self, key_group: int) -> None:
        if self.key_group_range is not None and key_group not in self.key_group_range:
            raise UsageError(
                f"timer service of key groups {self.key_group_range} got a timer for key group {key_group}"
            )

    def _next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence

    # ------------------------------------------------------------------ register / delete

    def register_event_time_timer(
        self, key: Hashable, key_group: int, namespace: Hashable, timestamp: int
    ) -> bool:
        """Fire at watermark >= ``timestamp``; False if this exact timer already exists."""
        self._check_key_group(key_group)
        return self._event.add(key, key_group, namespace, timestamp, self._next_sequence())

    def register_processing_time_timer(
        self, key: Hashable, key_group: int, namespace: Hashable, timestamp: int
    ) -> bool:
        """Fire at processing time >= ``timestamp``; False if this exact timer already exists."""
        self._check_key_group(key_group)
        return self._processing.add(key, key_group, namespace, timestamp, self._next_sequence())

    def delete_event_time_timer(
        self, key: Hashable, key_group: int, namespace: Hashable, timestamp: int
    ) -> bool:
        """Remove the timer; False if there was none."""
        return self._event.remove(key, key_group, namespace, timestamp)

    def delete_processing_time_timer(
        self, key: Hashable, key_group: int, namespace: Hashable, timestamp: int
    ) -> bool:
        """Remove the timer; False if there was none."""
        return self._processing.remove(key, key_group, namespace, timestamp)

    # ------------------------------------------------------------------ time advances

    def advance_watermark(self, watermark: int) -> list[Timer]:
        """The event-time timers with ``timestamp <= watermark``, removed, in firing order."""
        if watermark > self.current_watermark:
            self.current_watermark = watermark
        due: list[Timer] = []
        while (timer := self._event.pop_due(watermark)) is not None:
            due.append(timer)
        return due

    def advance_processing_time(self, now_ms: int) -> list[Timer]:
        """The processing-time timers with ``timestamp <= now_ms``, removed, in firing order."""
        due: list[Timer] = []
        while (timer := self._processing.pop_due(now_ms)) is not None:
            due.append(timer)
        return due

    def pop_event_time_timer(self, watermark: int) -> Timer | None:
        """The next event-time timer due at ``watermark`` (removed), or None."""
        if watermark > self.current_watermark:
            self.current_watermark = watermark
        return self._event.pop_due(watermark)

    def pop_processing_time_timer(self, now_ms: int) -> Timer | None:
        """The next processing-time timer due at ``now_ms`` (removed), or None."""
        return self._processing.pop_due(now_ms)

    # ------------------------------------------------------------------ queries

    def next_processing_time(self) -> int | None:
        """When the earliest processing-time timer is due (to arm the clock), or None."""
        head = self._processing.peek()
        return None if head is None else head[0]

    def next_event_time(self) -> int | None:
        head = self._event.peek()
        return None if head is None else head[0]

    def number_of_timers(self) -> int:
        return self._event.live + self._processing.live

    def number_of_event_time_timers(self) -> int:
        return self._event.live

    def number_of_processing_time_timers(self) -> int:
        return self._processing.live

    def statistics(self) -> dict[str, int]:
        return {
            "event_time_timers": self._event.live,
            "processing_time_timers": self._processing.live,
            "event_time_heap_entries": len(self._event.heap),
            "processing_time_heap_entries": len(self._processing.heap),
        }

    # ------------------------------------------------------------------ snapshot / restore

    def snapshot(self, key_group_range: KeyGroupRange | None = None) -> TimerSnapshot:
        """The live timers (of ``key_group_range``, default all), immutable."""
        return TimerSnapshot(
            key_group_range=key_group_range if key_group_range is not None else self.key_group_range,
            event_time=self._event.ordered(key_group_range),
            processing_time=self._processing.ordered(key_group_range),
        )

    def snapshot_async(self, key_group_range: KeyGroupRange | None = None) -> PendingTimerSnapshot:
        """``snapshot`` split in two: here only dict copies; ``result()`` sorts, off the job's thread."""
        return PendingTimerSnapshot(
            key_group_range if key_group_range is not None else self.key_group_range,
            self._event.copy_groups(key_group_range),
            self._processing.copy_groups(key_group_range),
        )

    def restore(self, snapshots: Iterable[TimerSnapshot], key_group_range: KeyGroupRange) -> None:
        """Add the timers of ``snapshots`` whose key group is in ``key_group_range``.

        The service takes ``key_group_range`` as its range. Timers keep their relative
        order per snapshot; snapshots are taken in the order given.
        """
        self.key_group_range = key_group_range
        for snapshot in snapshots:
            for timer in snapshot.event_time:
                if timer.key_group in key_group_range:
                    self._event.add(
                        timer.key, timer.key_group, timer.namespace, timer.timestamp, self._next_sequence()
                    )
            for timer in snapshot.processing_time:
                if timer.key_group in key_group_range:
                    self._processing.add(
                        timer.key, timer.key_group, timer.namespace, timer.timestamp, self._next_sequence()
                    )

    @classmethod
    def from_snapshots(
        cls, snapshots: Iterable[TimerSnapshot], key_group_range: KeyGroupRange
    ) -> InternalTimerService:
        """A new service built from ``snapshots`` for the subtask owning ``key_group_range``."""
        service = cls(key_group_range)
        service.restore(snapshots, key_group_range)
        return service

    def __repr__(self) -> str:
        return (
            f"InternalTimerService(range={self.key_group_range}, event_time={self._event.live}, "
            f"processing_time={self._processing.live}, watermark={self.current_watermark})"
        )
