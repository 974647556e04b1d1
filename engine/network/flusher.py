"""The output flusher: buffer timeout semantics (pure ``FlushPolicy``) and the timer task.

As Flink's flush after the buffer timeout: a buffer becomes consumable when it is full, when
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

A shared timer with a ticker sleeps *lazily* while none of its partitions holds bytes
written since its last flush (``ResultPartition.unflushed``): its deadline then arms no
timer, and the flusher runs only at a tick the ticker has anyway (the sources it wakes),
or once a write makes a partition unflushed (``on_unflushed`` makes the sleep an ordinary
one, due at the same tick). The bound is unchanged: a byte waits at most one interval, and
records written by tasks woken at a tick still leave with it; what goes is the wake-up at
ticks with nothing to flush (an idle job at a 1 ms timeout spent about a tenth of a core on
them).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from weir.errors import UsageError
from weir.network.partition import ResultPartition

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

    def next_flush_at(self, previous_deadline: float, now: float, resumed: bool = False) -> float:
        """The deadline after a flush at ``now`` for ``previous_deadline``: the next tick
        (``tick_after``) when the flush was on time or ``resumed`` from a lazy sleep;
        one interval from ``now`` when it ran an interval or more late, never a burst of
        the missed ticks (measured under load, this flushes less often than the next tick
        would, and costs the tail less)."""
        interval = self._interval()
        if resumed or now < previous_deadline + interval:
            return self.tick_after(now)
        return now + interval

    def tick_after(self, now: float) -> float:
        """The first whole multiple of the interval on the clock after ``now``. Ticks there
        are points of the TaskManager ticker's 1 ms grid, where the sources wake; counted,
        not summed, so float error never moves one across a grid point (adding 1 ms to a
        clock near 1e5 s does within a few hundred ticks). A time read back a nanosecond
        before a tick counts as that tick."""
        interval = self._interval()
        return (math.floor(now / interval + 1e-6) + 1) * interval

    def _interval(self) -> float:
        interval = self.interval_s
        if interval is None:
            raise UsageError(f"buffer timeout {self.buffer_timeout_ms} ms uses no timer")
        return interval

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


class _LazySleep:
    """A shared timer's lazy sleeps on the ticker, and what its partitions call when a write
    leaves one of them unflushed: the sleep becomes an ordinary one, due at the same tick
    (the next one, if that passed while no expiry came)."""

    __slots__ = ("deadline", "policy", "task", "ticker")

    def __init__(self, ticker: Any, policy: FlushPolicy) -> None:
        self.ticker = ticker
        self.policy = policy
        self.task: Any = None
        self.deadline = 0.0

    async def sleep(self, deadline: float) -> None:
        """Cancellation: as the ticker's ``sleep_until``."""
        self.deadline = deadline
        self.task = trio.lowlevel.current_task()
        try:
            await self.ticker.sleep_until(deadline, lazy=True)
        finally:
            self.task = None

    def on_unflushed(self) -> None:
        task = self.task
        if task is None:
            return  # awake (it flushes what was written), or already woken by this
        now = trio.current_time()
        self.ticker.hasten(task, self.deadline if self.deadline > now else self.policy.tick_after(now))
        self.task = None


async def _flush_every(
    policy: FlushPolicy,
    group: dict[ResultPartition, None],
    sleep_until: Callable[[float], Awaitable[None]] = trio.sleep_until,
    lazy: _LazySleep | None = None,
) -> None:
    """Flush every partition of ``group`` on the policy's ticks until none is left (it may
    change between ticks: partitions come and go). With ``lazy``, sleep lazily while no
    partition has unflushed bytes."""
    if policy.interval_s is None:
        return
    deadline = policy.tick_after(trio.current_time())
    while _live(group):
        lazily = lazy if lazy is not None and not any(p.unflushed for p in group) else None
        await (sleep_until(deadline) if lazily is None else lazily.sleep(deadline))
        # one scheduling round before flushing: the tasks woken at the same tick (open-loop
        # sources on the TaskManager's ticker) write first, and their records leave now
        # instead of an interval later
        await trio.lowlevel.checkpoint()
        if not _live(group):
            return
        for partition in list(group):
            partition.flush_all()
        deadline = policy.next_flush_at(deadline, trio.current_time(), resumed=lazily is not None)


class SharedFlusher:
    """Timers that flush every registered partition every ``buffer_timeout_ms``: one Trio task
    per timeout value, started on the first registration (through ``spawn``) and ended when
    its last partition has gone. A partition leaves when it is unregistered, or when a tick
    finds it finished or released."""

    def __init__(
        self, spawn: Callable[[Callable[[], Awaitable[None]], str], None], ticker: Any = None
    ) -> None:
        """``ticker``: the TaskManager's ``Ticker``, which the timers sleep on (lazily while
        they have nothing to flush); without one they sleep on Trio's own timer."""
        self._spawn = spawn
        self._sleep_until = trio.sleep_until if ticker is None else ticker.sleep_until
        self._ticker = ticker
        self._groups: dict[int, dict[ResultPartition, None]] = {}
        self._lazy: dict[int, _LazySleep] = {}

    def register(self, partition: ResultPartition, buffer_timeout_ms: int) -> None:
        """Flush ``partition`` by timer from now on (a no-op for timeouts 0 and -1)."""
        policy = FlushPolicy(buffer_timeout_ms)
        if policy.interval_s is None:
            return
        group = self._groups.get(buffer_timeout_ms)
        if group is None:
            group = self._groups[buffer_timeout_ms] = {}
            lazy = None if self._ticker is None else _LazySleep(self._ticker, policy)
            if lazy is not None:
                self._lazy[buffer_timeout_ms] = lazy
            self._spawn(lambda: self._run(policy, group, lazy), f"output flusher {buffer_timeout_ms} ms")
        group[partition] = None
        lazy = self._lazy.get(buffer_timeout_ms)
        if lazy is not None:
            partition.on_unflushed = lazy.on_unflushed
            if partition.unflushed:
                lazy.on_unflushed()

    def unregister(self, partition: ResultPartition, buffer_timeout_ms: int) -> None:
        group = self._groups.get(buffer_timeout_ms)
        if group is not None and partition in group:
            del group[partition]
            partition.on_unflushed = None

    def partitions(self, buffer_timeout_ms: int) -> list[ResultPartition]:
        """The partitions the timer of ``buffer_timeout_ms`` flushes."""
        return list(self._groups.get(buffer_timeout_ms, ()))

    async def _run(
        self, policy: FlushPolicy, group: dict[ResultPartition, None], lazy: _LazySleep | None
    ) -> None:
        buffer_timeout_ms = policy.buffer_timeout_ms
        try:
            await _flush_every(policy, group, self._sleep_until, lazy)
        finally:
            if self._groups.get(buffer_timeout_ms) is group:
                del self._groups[buffer_timeout_ms]
                self._lazy.pop(buffer_timeout_ms, None)
                for partition in group:
                    partition.on_unflushed = None
