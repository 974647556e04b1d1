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

Flink runs one flusher thread per task. A TaskManager here runs one ``SharedFlusher``
timer per buffer timeout for all its partitions: every task of the same timeout is
flushed at the same tick, so N producing tasks cost one timer wake-up per interval instead
of N, and a consumer reading from several of them finds all their data at once (one
wake-up instead of one per producer). At a 1 ms timeout with two producers that is about
a tenth of the thread's time at small batches. The bound is the same: a byte waits at most
one interval. The shared timers sleep on the TaskManager's ``Ticker`` (one Trio timer for
the flusher and the sources). ``run_output_flusher`` is the one-partition timer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from engine.errors import UsageError
from engine.network.partition import ResultPartition

__all__ = ["FlushPolicy", "SharedFlusher", "run_output_flusher"]


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
    await _flush_every(FlushPolicy(buffer_timeout_ms), {partition: None})


def _live(group: dict[ResultPartition, None]) -> bool:
    """Drop the finished and released partitions of ``group``; whether any is left."""
    for partition in [p for p in group if p.is_finished or p.is_released]:
        del group[partition]
    return bool(group)


async def _flush_every(
    policy: FlushPolicy,
    group: dict[ResultPartition, None],
    sleep_until: Callable[[float], Awaitable[None]] = trio.sleep_until,
) -> None:
    """Flush every partition of ``group`` on the policy's ticks until none is left (it may
    change between ticks: partitions come and go)."""
    interval = policy.interval_s
    if interval is None:
        return
    deadline = trio.current_time() + interval
    while _live(group):
        await sleep_until(deadline)
        # one scheduling round before flushing: the tasks woken at the same tick (open-loop
        # sources on the TaskManager's ticker) write first, and their records leave now
        # instead of an interval later
        await trio.lowlevel.checkpoint()
        if not _live(group):
            return
        for partition in list(group):
            partition.flush_all()
        deadline = policy.next_flush_at(deadline, trio.current_time())


class SharedFlusher:
    """Timers that flush every registered partition every ``buffer_timeout_ms``: one Trio task
    per timeout value, started on the first registration (through ``spawn``) and ended when
    its last partition has gone. A partition leaves when it is unregistered, or when a tick
    finds it finished or released."""

    def __init__(
        self,
        spawn: Callable[[Callable[[], Awaitable[None]], str], None],
        sleep_until: Callable[[float], Awaitable[None]] = trio.sleep_until,
    ) -> None:
        self._spawn = spawn
        self._sleep_until = sleep_until
        self._groups: dict[int, dict[ResultPartition, None]] = {}

    def register(self, partition: ResultPartition, buffer_timeout_ms: int) -> None:
        """Flush ``partition`` by timer from now on (a no-op for timeouts 0 and -1)."""
        if FlushPolicy(buffer_timeout_ms).interval_s is None:
            return
        group = self._groups.get(buffer_timeout_ms)
        if group is None:
            group = self._groups[buffer_timeout_ms] = {}
            self._spawn(lambda: self._run(buffer_timeout_ms, group), f"output flusher {buffer_timeout_ms} ms")
        group[partition] = None

    def unregister(self, partition: ResultPartition, buffer_timeout_ms: int) -> None:
        group = self._groups.get(buffer_timeout_ms)
        if group is not None:
            group.pop(partition, None)

    def partitions(self, buffer_timeout_ms: int) -> list[ResultPartition]:
        """The partitions the timer of ``buffer_timeout_ms`` flushes."""
        return list(self._groups.get(buffer_timeout_ms, ()))

    async def _run(self, buffer_timeout_ms: int, group: dict[ResultPartition, None]) -> None:
        try:
            await _flush_every(FlushPolicy(buffer_timeout_ms), group, self._sleep_until)
        finally:
            if self._groups.get(buffer_timeout_ms) is group:
                del self._groups[buffer_timeout_ms]
