"""``Ticker``: one Trio timer for every task of a TaskManager that sleeps until a deadline.

Open-loop sources and the output flusher sleep about once a millisecond each. A plain
``trio.sleep_until`` builds a cancel scope, registers its deadline and, when the deadline
passes, delivers a ``Cancelled`` that unwinds back out of the scope: about 40 us of CPU
in this project's VM, against 9 us to park a task and reschedule it. The ticker keeps
one such timer, at the earliest deadline asked for; a sleeper parks in a heap and the
ticker reschedules, at each expiry, every sleeper whose deadline has passed. Sleepers
that share a millisecond (the flusher and the sources, whose timeouts ``epoll`` rounds
to whole milliseconds anyway) share one expiry.

A *lazy* sleep (``sleep_until(deadline, lazy=True)``) arms no timer: it ends at the first
expiry the ticker has anyway (for some other sleeper) at or after its deadline, or on a
timer of its own once ``hasten`` makes it an ordinary sleep. The output flusher sleeps
lazily while it has nothing to flush: a tick with nothing to do then costs no wake-up of
the thread, yet the sources the ticker wakes at a tick still have their records flushed
with it.

*Driven by the loop.* On a clock that offers ``attach_ticker`` (the busy-polling clock,
``weir.loop.busy_poll``), the ticker's expiries come from the event loop itself:
after every ``epoll`` the clock hands the time to ``expire_due``, which wakes the sleepers
whose deadline has passed, and the timerfd is set only when the loop is about to block
(``before_block``; a repeating one is stopped again when the loop polls, ``on_poll``). A
loaded loop goes through ``epoll`` at least once per round of tasks, and while it polls
every few microseconds, so no timer is needed then. That saves the ticker task's step at
each expiry (about 50 us in the job: reading the timerfd, re-registering it with
``epoll``, the task switch) and wakes the sleepers one round earlier. The invariant is
unchanged: no sleep ends before its deadline, and a loop never blocks past the earliest
one.

``sleep_until`` is what tasks call: it uses the ticker of the TaskManager the calling
task runs in (``use_ticker`` sets it for a task and the tasks it starts), and
``trio.sleep_until`` when there is none or it is not running. A ticker that stops while
tasks sleep on it wakes them, and they finish their sleep with ``trio.sleep_until``:
no sleep ever ends before its deadline.
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys
from contextvars import ContextVar
from typing import Any

import trio

from weir.loop.timerfd import TimerFd

__all__ = ["Ticker", "TickerStatistics", "on_mock_clock", "sleep_until", "use_ticker"]


def on_mock_clock() -> bool:
    """Whether the running Trio loop's clock is ``trio.testing.MockClock``. Only a test
    that imported ``trio.testing`` can have one, so the module is never imported here:
    it imports pytest, half a second of every TaskManager process's and command's start."""
    testing = sys.modules.get("trio.testing")
    return testing is not None and isinstance(trio.lowlevel.current_clock(), testing.MockClock)


class TickerStatistics:
    __slots__ = ("expiries", "loop_driven", "running", "sleepers", "timer_sets", "wakeups")

    def __init__(
        self,
        running: bool,
        sleepers: int,
        expiries: int,
        wakeups: int,
        timer_sets: int = 0,
        loop_driven: bool = False,
    ) -> None:
        self.running = running
        self.sleepers = sleepers  # parked now
        self.expiries = expiries  # times sleepers were due: the timer expired, or the loop found them due
        self.wakeups = wakeups  # sleepers it woke
        self.timer_sets = timer_sets  # times a timerfd was set or stopped (a system call each)
        self.loop_driven = loop_driven  # the event loop drives the expiries (see the module docstring)

    def __repr__(self) -> str:
        return (
            f"TickerStatistics(running={self.running}, sleepers={self.sleepers}, "
            f"expiries={self.expiries}, wakeups={self.wakeups}, timer_sets={self.timer_sets}, "
            f"loop_driven={self.loop_driven})"
        )


#: The grid deadlines are rounded up to (seconds): sleepers whose deadlines fall in one
#: millisecond wake together. ``epoll`` counts its timeouts in whole milliseconds, so no
#: timer on Trio's own deadlines was ever finer than this.
GRID_S = 0.001


class Ticker:
    """Wakes parked tasks at their deadlines (Trio clock seconds) with one timer.

    A deadline is rounded up to the next point of a grid (``grid_s``, 1 ms): the output
    flusher and the sources that sleep a little less than a millisecond then wake at the
    same instant, in one wake-up of the thread, instead of one each (timer coalescing, as
    kernels round timers to their tick). The timer is a Linux timerfd when the clock is the
    system clock (``TimerFd``; it wakes within tens of microseconds of the grid point) and
    a cancel scope's deadline otherwise (MockClock in tests, other systems)."""

    def __init__(self, grid_s: float = GRID_S) -> None:
        if not grid_s > 0:
            raise ValueError(f"the ticker's grid must be a positive number of seconds, got {grid_s!r}")
        self._grid_s = grid_s
        self._per_s = 1.0 / grid_s
        # entries are [deadline, sequence, task]; a cancelled sleeper's task is None
        self._heap: list[list[Any]] = []
        # lazy sleepers: woken by expiries, never the reason for one (see ``hasten``)
        self._lazy: list[list[Any]] = []
        # a lazy sleeper's box holds its live entry, lazy or (after ``hasten``) in the heap
        self._lazy_by_task: dict[Any, list[list[Any]]] = {}
        self._sequence = itertools.count()
        self._scope: trio.CancelScope | None = None
        self._timer: TimerFd | None = None
        self._armed = math.inf  # the deadline the timer is set for
        self._periodic = False  # the timerfd repeats every grid step
        self._loop_driven = False  # expiries come from the event loop (``expire_due``)
        self._running = False
        self._expiries = 0
        self._wakeups = 0
        self._timer_sets = 0

    @property
    def running(self) -> bool:
        return self._running

    @property
    def uses_timerfd(self) -> bool:
        return self._timer is not None

    def statistics(self) -> TickerStatistics:
        sleepers = sum(entry[2] is not None for entry in (*self._heap, *self._lazy))
        return TickerStatistics(
            self._running, sleepers, self._expiries, self._wakeups, self._timer_sets, self._loop_driven
        )

    def on_grid(self, deadline: float) -> float:
        """The first grid point at or after ``deadline`` (a nanosecond of float error
        is not rounded up to the next point)."""
        return math.ceil(deadline * self._per_s - 1e-6) / self._per_s

    async def sleep_until(self, deadline: float, lazy: bool = False) -> None:
        """Return at the first grid point at or after ``deadline``, like
        ``trio.sleep_until`` (a checkpoint even when the deadline has passed). A ``lazy``
        sleep arms no timer: it returns at the first expiry at or after its deadline that
        another sleeper caused, unless ``hasten`` makes it an ordinary sleep first.
        Cancellation: raises ``Cancelled``; the ticker forgets the sleeper."""
        if not self._running:
            await trio.sleep_until(deadline)
            return
        if deadline <= trio.current_time():
            await trio.lowlevel.checkpoint()
            return
        task = trio.lowlevel.current_task()
        box = [[self.on_grid(deadline), next(self._sequence), task]]
        if lazy:
            heapq.heappush(self._lazy, box[0])
            self._lazy_by_task[task] = box
        else:
            self._push(box[0])

        def abort(_: Any) -> trio.lowlevel.Abort:
            box[0][2] = None
            self._lazy_by_task.pop(task, None)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if trio.current_time() < deadline:  # woken by a ticker that stopped
            await trio.sleep_until(deadline)

    def hasten(self, task: Any, deadline: float) -> bool:
        """Make the lazy sleep of ``task`` an ordinary one that ends at ``deadline`` (on
        the grid; at once if that has passed): from now on it arms the timer. False when
        ``task`` is not sleeping lazily. A sleep never ends before its own deadline: one
        hastened to an earlier one finishes on Trio's timer."""
        box = self._lazy_by_task.pop(task, None)
        if box is None:
            return False
        box[0][2] = None  # the lazy entry is dead; the sleeper now waits in the heap
        wake = self.on_grid(deadline)
        if wake <= trio.current_time():
            trio.lowlevel.reschedule(task)
            return True
        box[0] = [wake, next(self._sequence), task]  # where the sleeper's abort finds it
        self._push(box[0])
        return True

    def _push(self, entry: list[Any]) -> None:
        heapq.heappush(self._heap, entry)
        if entry[0] < self._armed and not self._loop_driven:
            self._arm(entry[0])

    # -- driven by the event loop (called by the clock, see the module docstring) ------------

    def expire_due(self, now: float) -> None:
        """After an ``epoll``: wake the sleepers whose deadline is at or before ``now``."""
        heap = self._heap
        if heap and heap[0][0] <= now:
            self._expire(now)

    def before_block(self) -> None:
        """The loop is about to block in ``epoll``: the timerfd must wake it by the
        earliest deadline. As on the timerfd alone, a repeating timer stays while its next
        expiry is that deadline, and stops when nobody sleeps."""
        heap = self._heap
        if not heap:
            if self._periodic:
                self._disarm()
            return
        deadline = heap[0][0]
        if deadline < self._armed or (self._periodic and deadline > self._armed):
            self._arm(deadline)

    def on_poll(self) -> None:
        """The loop polls: it finds the deadlines itself, so a repeating timer left from
        blocking stops (it would wake the ticker's task every grid step for nothing)."""
        if self._periodic:
            self._disarm()

    def leave_loop_driving(self) -> None:
        """Go back to the timerfd alone (the loop's hook failed): arm it for the earliest
        deadline, so no sleeper waits for an expiry the loop no longer delivers."""
        self._loop_driven = False
        self.before_block()

    async def run(self) -> None:
        """Run the timer until cancelled. Cancellation: every parked sleeper is woken and
        finishes its sleep on its own timer."""
        if self._running:
            raise RuntimeError("this ticker is already running")
        self._running = True
        clock = trio.lowlevel.current_clock()
        if not on_mock_clock():
            self._timer = TimerFd.open()
        # a clock that drives tickers from the loop (weir.loop.busy_poll.BusyPollClock)
        attach = getattr(clock, "attach_ticker", None) if self._timer is not None else None
        detach = getattr(clock, "detach_ticker", None)
        try:
            if self._timer is None:
                await self._run_on_scopes()
            elif attach is not None and detach is not None:
                attach(self)
                self._loop_driven = True
                try:
                    await self._run_loop_driven(self._timer)
                finally:
                    self._loop_driven = False
                    detach(self)
            else:
                await self._run_on_timerfd(self._timer)
        finally:
            self._running = False
            self._scope = None
            self._armed = math.inf
            self._periodic = False
            if self._timer is not None:
                trio.lowlevel.notify_closing(self._timer.fd)
                self._timer.close()
                self._timer = None
            for entry in (*self._heap, *self._lazy):
                if entry[2] is not None:
                    trio.lowlevel.reschedule(entry[2])
            self._heap.clear()
            self._lazy.clear()
            self._lazy_by_task.clear()

    async def _run_on_scopes(self) -> None:
        heap = self._heap
        while True:
            self._armed = heap[0][0] if heap else math.inf
            with trio.CancelScope(deadline=self._armed) as self._scope:
                await trio.sleep_forever()
            self._scope = None
            self._armed = math.inf
            self._expire(trio.current_time())

    async def _run_on_timerfd(self, timer: TimerFd) -> None:
        heap = self._heap
        woke = 0
        while True:
            if heap:
                if not (self._periodic and heap[0][0] <= self._armed):
                    self._arm(heap[0][0])
            elif not (self._periodic and woke):
                # a repeating timer outlives an empty heap for one step (the tasks it just
                # woke usually sleep again within it), then stops
                self._disarm()
            await trio.lowlevel.wait_readable(timer.fd)
            timer.clear()
            self._armed = math.inf
            woke = self._expire(trio.current_time())
            if self._periodic:
                self._armed = self.on_grid(trio.current_time())  # the timer's next expiry

    async def _run_loop_driven(self, timer: TimerFd) -> None:
        """The timerfd is set only while the loop blocks (``before_block``); this task
        consumes its expiries. Sleepers are woken by whoever comes first: the loop's
        ``expire_due`` or this task, one round later."""
        while True:
            await trio.lowlevel.wait_readable(timer.fd)
            timer.clear()
            now = trio.current_time()
            self._armed = self.on_grid(now) if self._periodic else math.inf
            self.expire_due(now)
            if not self._loop_driven:  # the loop's hook failed: the timerfd alone from now on
                await self._run_on_timerfd(timer)
                return

    def _arm(self, deadline: float) -> None:
        """Set the timer for ``deadline``. With a timerfd, a deadline within one grid step
        starts a timer that repeats every step, on the grid: while sleepers keep coming
        (a flusher and sources every millisecond) it is not set again at every expiry, one
        system call less each time."""
        self._armed = deadline
        timer = self._timer
        if timer is not None:
            delay = deadline - trio.current_time()
            self._periodic = 0 < delay <= self._grid_s  # a periodic timer starts on a grid point
            timer.arm(delay, self._grid_s if self._periodic else 0.0)
            self._timer_sets += 1
        elif self._scope is not None:
            self._scope.deadline = deadline

    def _disarm(self) -> None:
        assert self._timer is not None
        self._timer.disarm()
        self._timer_sets += 1
        self._armed = math.inf
        self._periodic = False

    def _expire(self, now: float) -> int:
        """Reschedule every sleeper whose deadline is at or before ``now``; how many there were."""
        self._expiries += 1
        heap = self._heap
        woke = 0
        while heap and heap[0][0] <= now:
            task = heapq.heappop(heap)[2]
            if task is not None:
                woke += 1
                trio.lowlevel.reschedule(task)
        lazy = self._lazy
        while lazy and lazy[0][0] <= now:
            task = heapq.heappop(lazy)[2]
            if task is not None:
                self._lazy_by_task.pop(task, None)
                woke += 1
                trio.lowlevel.reschedule(task)
        self._wakeups += woke
        return woke


_current: ContextVar[Ticker | None] = ContextVar("weir_ticker", default=None)


def use_ticker(ticker: Ticker | None) -> None:
    """Make ``ticker`` the one ``sleep_until`` uses in the calling task and the tasks it
    starts from now on."""
    _current.set(ticker)


async def sleep_until(deadline: float) -> None:
    """``trio.sleep_until`` through the current TaskManager's ticker when one runs.
    Cancellation: raises ``Cancelled``."""
    ticker = _current.get()
    if ticker is None:
        await trio.sleep_until(deadline)
    else:
        await ticker.sleep_until(deadline)
