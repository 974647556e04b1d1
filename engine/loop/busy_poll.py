"""Busy polling: the event loop polls instead of blocking while it is loaded.

Theory of operation
-------------------
When Trio's loop runs out of runnable tasks it asks its clock how long it may block in
``epoll``. A blocked thread lets the virtual CPU halt, and on the machines weir runs on
waking it again is not free: the wake-up itself costs tens of microseconds of CPU, and the
work that follows runs slower for a while (``docs/decisions.md`` has the figures: under an
open-loop load of half the maximum the stages cost 8-12% less per record with the loop
polling). A loaded job goes idle for a fraction of a millisecond between rounds (the
output flusher and the sources tick every millisecond), so it pays that price a thousand
times a second.

``BusyPollPolicy`` (pure: no Trio, no clock of its own) decides, each time the loop goes
idle, whether to poll (an ``epoll`` timeout of 0) or to block. It keeps the loop's load
over windows of ``window_s``: the CPU time the thread spent between two idle moments
counts as work when it is at least ``work_min_s`` (a poll that found nothing costs a few
microseconds and is not work; a flusher tick with nothing to flush costs tens). At the end
of each window the loop polls through the next one if the load was at least
``min_load``, and blocks otherwise. So:

- a loaded job (``min_load`` or more of the thread doing work) never halts the CPU
  between rounds; the polling costs at most the remaining ``1 - min_load`` of a core;
- an idle job, or a lightly loaded one, blocks as before: it burns no CPU;
- when the load stops, the loop polls for at most one more window, then blocks.

Invariant: the answer changes only at window ends, so one busy or idle moment does not
flip it.

``BusyPollClock`` is Trio's system clock (``time.perf_counter`` plus a random offset, like
Trio's own) whose ``deadline_to_sleep_time`` asks the policy. It measures the thread's CPU
time with ``time.thread_time``. ``execute()`` runs jobs on it unless
``execution.busy-poll.enabled`` is false; TaskManager processes run on it too, without a
policy (it never polls) when busy polling is off.

The offset is a whole number of seconds. ``perf_counter`` is ``CLOCK_MONOTONIC``, which
every process of the machine shares, so the TaskManagers' 1 ms ticker grids fall on the
same instants in every process: TaskManager processes flush at the same moments, and a
source that times its batches on ``CLOCK_MONOTONIC`` (the process bench's) wakes on a tick
in each of them.

The clock also drives the TaskManagers' tickers (``weir.loop.ticker``): a ticker
that runs on it attaches itself (``attach_ticker``), and from then on

- after every ``epoll`` an instrument hands the time to the ticker, which wakes the
  sleepers that are due (``Ticker.expire_due``);
- when the loop is about to block, the ticker sets its timerfd for its earliest deadline
  (``Ticker.before_block``); when it polls, a repeating timer stops (``Ticker.on_poll``).

So a loop that polls or is busy wakes sleepers with no timer at all, and one that blocks
still wakes by the earliest deadline.

What it does not do: it never delays a deadline (polling only shortens the wait), and it
does not change what any task does. Worker threads (``trio.to_thread``) still get the
GIL; while the loop polls they may wait for Python's switch interval to take it.
"""

from __future__ import annotations

import random
import time
from typing import Any

import trio

__all__ = ["BusyPollClock", "BusyPollPolicy"]

#: The window over which the load is measured (seconds).
WINDOW_S = 0.010
#: CPU time between two idle moments that counts as work (seconds): more than an empty poll
#: costs, less than any task step that moved data.
WORK_MIN_S = 25e-6


class BusyPollPolicy:
    """Whether the loop polls or blocks when it goes idle. Pure; times are seconds."""

    __slots__ = (
        "_busy_s",
        "_last_cpu_s",
        "_polling",
        "_window_start_s",
        "min_load",
        "window_s",
        "work_min_s",
    )

    def __init__(self, min_load: float, window_s: float = WINDOW_S, work_min_s: float = WORK_MIN_S) -> None:
        if not 0 < min_load <= 1:
            raise ValueError(f"busy polling's minimum load must be within (0, 1], got {min_load!r}")
        if not window_s > 0:
            raise ValueError(f"busy polling's window must be positive, got {window_s!r} s")
        if work_min_s < 0:
            raise ValueError(f"busy polling's smallest work must not be negative, got {work_min_s!r} s")
        self.min_load = min_load
        self.window_s = window_s
        self.work_min_s = work_min_s
        self._window_start_s: float | None = None
        self._last_cpu_s = 0.0
        self._busy_s = 0.0
        self._polling = False

    @property
    def polling(self) -> bool:
        return self._polling

    def on_idle(self, now_s: float, cpu_s: float) -> bool:
        """The loop has nothing to run at wall time ``now_s``, with the thread's CPU time at
        ``cpu_s``: True to poll, False to block."""
        if self._window_start_s is None:
            self._window_start_s = now_s
            self._last_cpu_s = cpu_s
            return False
        spent = cpu_s - self._last_cpu_s
        self._last_cpu_s = cpu_s
        if spent >= self.work_min_s:
            self._busy_s += spent
        elapsed = now_s - self._window_start_s
        if elapsed >= self.window_s:
            self._polling = self._busy_s >= self.min_load * elapsed
            self._window_start_s = now_s
            self._busy_s = 0.0
        return self._polling


class BusyPollClock(trio.abc.Clock):
    """Trio's system clock, except that the loop polls instead of blocking while
    ``policy`` says it is loaded (never without one)."""

    def __init__(self, policy: BusyPollPolicy | None) -> None:
        self.policy = policy
        # like Trio's SystemClock: an arbitrary offset, so nothing mistakes it for a wall
        # time; whole seconds, so grid points are CLOCK_MONOTONIC's in every process
        self._offset = float(random.randint(10_000, 200_000))
        self._tickers: list[Any] = []
        self._hook = _TickerHook(self)

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._offset + time.perf_counter()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        now = time.perf_counter()
        if self.policy is not None and self.policy.on_idle(now, time.thread_time()):
            for ticker in self._tickers:
                ticker.on_poll()
            return 0.0
        for ticker in self._tickers:
            ticker.before_block()
        return deadline - (self._offset + now)

    # -- the tickers it drives (called from inside the Trio run) -----------------------------

    def attach_ticker(self, ticker: Any) -> None:
        """Drive ``ticker``'s expiries from the loop until ``detach_ticker``."""
        if not self._tickers:
            trio.lowlevel.add_instrument(self._hook)
        self._tickers.append(ticker)

    def detach_ticker(self, ticker: Any) -> None:
        if ticker not in self._tickers:
            return  # already let go (the hook failed)
        self._tickers.remove(ticker)
        if not self._tickers:
            trio.lowlevel.remove_instrument(self._hook)

    def expire_tickers(self) -> None:
        now = self.current_time()
        for ticker in self._tickers:
            ticker.expire_due(now)

    def release_tickers(self) -> None:
        """Hand every ticker back to its own timer (the hook failed; Trio removes it)."""
        tickers, self._tickers = self._tickers, []
        for ticker in tickers:
            ticker.leave_loop_driving()


class _TickerHook(trio.abc.Instrument):
    """The instrument that gives the attached tickers the time after every ``epoll``. If a
    ticker raises there, Trio drops the instrument and logs the error; the tickers go back
    to their timers first, so no sleeper waits for an expiry that no longer comes."""

    def __init__(self, clock: BusyPollClock) -> None:
        self._clock = clock

    def after_io_wait(self, timeout: float) -> None:
        try:
            self._clock.expire_tickers()
        except BaseException:
            self._clock.release_tickers()
            raise
