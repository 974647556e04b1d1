"""What every window operator of the family shares: times, late records, clocks, pane checkpoints, keys.

``WindowOperatorBase`` is the one base of ``WindowOperator`` (per-record: general and fast
mode) and ``VectorWindowOperator`` (vectorized built-ins). It owns the pieces whose
semantics must not differ between them, written once:

- event time of a batch, and the one error for a record without a timestamp;
- late records: to the late-data side output if there is one, else counted in
  ``late_records_dropped``;
- driving by the clocks: a watermark fires what is due in event time, the processing-time
  clock what is due in processing time (``_fire``), and the next processing-time deadline
  is the earliest open window's ``max_timestamp`` (``_next_fire_time``); the general mode
  overrides these with its timer service;
- checkpoints of pane strategies (fast mode and vectorized) taken the synchronous way (a
  task defers them: ``weir.state.panes``): live panes are written into
  the keyed backend in the general mode's canonical form (state ``window-contents``,
  namespace = the ``TimeWindow``) with one timer per pane at ``max_timestamp`` in
  ``self.timers`` (``_write_panes``), and a restore turns those timers back into panes
  (``_restored_panes``); so a checkpoint of any path restores into any other;
- the key probe: a key selector that reads one field (or returns the record) is read as a
  column, checked against the real selector on two records of every batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.core.window import TimeWindow, WindowAssigner
from weir.errors import UsageError
from weir.operators.base import StreamOperator
from weir.time.timers import InternalTimerService

#: A pane whose accumulator is in the keyed backend only (``_write_panes`` leaves it there).
MISSING: Any = object()


class WindowOperatorBase(StreamOperator):
    """The family's base: a keyed window over ``assigner`` with an optional late-data tag."""

    timers: InternalTimerService
    backend: Any
    contents: Any

    def __init__(self, name: str, key_selector: Any, assigner: WindowAssigner, late_data_tag: Any) -> None:
        super().__init__(name)
        self.key_selector = key_selector
        self.assigner = assigner
        self.late_data_tag = late_data_tag
        self.event_time = assigner.is_event_time

    # -- records -------------------------------------------------------------------------------
    def _no_timestamp(self, record: Any) -> UsageError:
        return UsageError(
            f"operator '{self.name}': an event-time window got a record without a timestamp "
            f"({record!r}); assign timestamps with a WatermarkStrategy "
            f"(with_timestamp_assigner) on the source or assign_timestamps_and_watermarks(...)"
        )

    def _times(self, batch: Batch) -> np.ndarray:
        """The time of every record as int64: its timestamp in event time (a missing one is a
        ``UsageError``), the processing-time clock otherwise."""
        n = len(batch)
        if not self.event_time:
            return np.full(n, self.context.processing_time_ms(), np.int64)
        ts = batch.timestamps
        if ts is not None:
            ts = np.asarray(ts, dtype=np.int64)
            if ts.min() != NO_TIMESTAMP:  # NO_TIMESTAMP is the smallest int64
                return ts
        missing = 0 if ts is None else int(np.flatnonzero(ts == NO_TIMESTAMP)[0])
        raise self._no_timestamp(batch.as_list()[missing])

    def _emit_late(self, batch: Batch, late: Any) -> None:
        """Records of ``batch`` at positions ``late`` (none of their windows was open): to the
        late-data side output, else counted as dropped."""
        if not len(late):
            return
        if self.late_data_tag is not None:
            self.chain_output.emit_side(self.late_data_tag, batch.take(np.asarray(late, np.int64)))
        else:
            self.metrics.late_records_dropped += len(late)

    # -- time ----------------------------------------------------------------------------------
    def _fire(self, until: int) -> None:
        """Emit the windows whose ``max_timestamp`` is at or before ``until`` on this operator's clock."""
        raise NotImplementedError

    def _next_fire_time(self) -> int | None:
        """The earliest ``max_timestamp`` of an open window, if any."""
        raise NotImplementedError

    def _advance(self, event_time: bool, until: int) -> None:
        if event_time == self.event_time:
            self._fire(until)

    def process_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        self._advance(True, timestamp)
        self.chain_output.emit_watermark(timestamp)

    def next_processing_time_deadline(self) -> int | None:
        return None if self.event_time else self._next_fire_time()

    def on_processing_time(self, now_ms: int) -> None:
        self._advance(False, now_ms)

    # -- checkpoints of pane strategies --------------------------------------------------------
    def _write_panes(
        self, panes: Iterable[tuple[Any, TimeWindow, Any]], lateness: int = 0, fired: Any = None
    ) -> list[tuple[Any, TimeWindow]]:
        """Write ``(key, window, stored)`` panes into ``window-contents`` (``MISSING``: it is there
        already) and their timers into a new ``self.timers``, in this order; returns the
        (key, window) of the panes.

        A pane's timers are the general mode's: the trigger's at the window's ``max_timestamp``
        (unless ``fired[i]``: the window fired already and waits for late records) and, with
        allowed ``lateness``, the cleanup timer at ``max_timestamp + lateness``."""
        backend, contents = self.backend, self.contents
        timers = InternalTimerService()
        register = (
            timers.register_event_time_timer if self.event_time else timers.register_processing_time_timer
        )
        written = []
        for i, (key, window, stored) in enumerate(panes):
            backend.set_current_key(key)
            contents.set_current_namespace(window)
            if stored is not MISSING:
                contents.update_internal(stored)
            group = backend.current_key_group
            end = window.max_timestamp()
            if fired is None or not fired[i]:
                register(key, group, window, end)
            if lateness:
                register(key, group, window, end + lateness)
            written.append((key, window))
        self.timers = timers
        return written

    def _restored_panes(self) -> list[tuple[Any, Any]]:
        """(key, window) of every timer a restore put into ``self.timers`` on this operator's
        clock, in firing order; ``self.timers`` starts over empty."""
        return [(key, window) for key, window, _ in self._restored_timers()]

    def _restored_timers(self) -> list[tuple[Any, Any, int]]:
        """(key, window, time) of every timer a restore put into ``self.timers`` on this
        operator's clock, in firing order; ``self.timers`` starts over empty."""
        snapshot = self.timers.snapshot()
        self.timers = InternalTimerService()
        restored = snapshot.event_time if self.event_time else snapshot.processing_time
        return [(timer.key, timer.namespace, timer.timestamp) for timer in restored]


# ----------------------------------------------------------------------------- the key probe
# (in weir.columnar.probe: the record writer and timestamp assignment read fields as columns too)
from weir.columnar.probe import IDENTITY, identity, probe_agrees, probe_key_field  # noqa: E402

__all__ = ["IDENTITY", "WindowOperatorBase", "identity", "probe_agrees", "probe_key_field"]
