"""The output flusher: buffer timeout semantics (pure ``FlushPolicy``) and the timer task.

Seed 002, "Flush after Buffer Timeout": a buffer becomes consumable when it is full, when
an event is written, or when the output flusher fires. ``execution.buffer-timeout.interval``
chooses how often it fires:

- ``0``: after every record; the RecordWriter calls ``flush`` itself after each emit
  (``FlushPolicy.flush_after_every_emit``) and no timer runs;
- ``-1``: never by timer; buffers leave only when full or pushed out by an event;
- ``> 0``: every ``buffer_timeout_ms`` on the Trio clock (so ``MockClock`` drives it in
  tests). The timeout is an upper bound on the latency a lone record adds only when the
  channel is not backpressured: a flush only makes bytes consumable.
"""

from __future__ import annotations

import trio

from engine.errors import UsageError
from engine.network.partition import ResultPartition

__all__ = ["FlushPolicy", "run_output_flusher"]


class FlushPolicy:
    """What a buffer timeout means for the writer and the flusher. Pure."""

    __slots__ = ("buffer_timeout_ms",)

    def __init__(self, buffer_timeout_ms: int) -> None:
        if (
            isinstance(buffer_timeout_ms, bool)
            or not isinstance(buffer_timeout_ms, int)
            or buffer_timeout_ms < -1
        ):
            raise UsageError(
                "execution.buffer-timeout.interval: expected -1 (flush only when full), 0 (flush every "
                f"record) or a positive number of milliseconds, got {buffer_timeout_ms!r}"
            )
        self.buffer_timeout_ms = buffer_timeout_ms

    @property
    def flush_after_every_emit(self) -> bool:
        """The writer flushes after each record (timeout 0)."""
        return self.buffer_timeout_ms == 0

    @property
    def uses_timer(self) -> bool:
        return self.buffer_timeout_ms > 0

    @property
    def interval_s(self) -> float | None:
        """Seconds between timer flushes, or ``None`` when no timer runs."""
        return self.buffer_timeout_ms / 1000 if self.buffer_timeout_ms > 0 else None

    def next_flush_at(self, previous_deadline: float, now: float) -> float:
        """The deadline after ``previous_deadline``: fixed rate, but never a burst of missed ticks."""
        interval = self.interval_s
        if interval is None:
            raise UsageError(f"buffer timeout {self.buffer_timeout_ms} ms uses no timer")
        deadline = previous_deadline + interval
        return deadline if deadline > now else now + interval

    def __repr__(self) -> str:
        return f"FlushPolicy(buffer_timeout_ms={self.buffer_timeout_ms})"


async def run_output_flusher(partition: ResultPartition, buffer_timeout_ms: int) -> None:
    """Call ``partition.flush_all()`` every ``buffer_timeout_ms`` until it finishes or is released.

    Returns at once for 0 and -1 (no timer). Cancellation: stops between flushes; a
    flush is never half done.
    """
    policy = FlushPolicy(buffer_timeout_ms)
    interval = policy.interval_s
    if interval is None:
        return
    deadline = trio.current_time() + interval
    while not partition.is_finished and not partition.is_released:
        await trio.sleep_until(deadline)
        if partition.is_finished or partition.is_released:
            return
        partition.flush_all()
        deadline = policy.next_flush_at(deadline, trio.current_time())
