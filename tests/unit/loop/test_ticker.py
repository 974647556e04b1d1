"""The TaskManager's ticker: one Trio timer for every sleeper, on the Trio clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

from weir.loop.ticker import Ticker, TickerStatistics, sleep_until, use_ticker
from weir.loop.timerfd import TimerFd


async def _wake_times(
    ticker: Ticker,
    deadlines: dict[str, float],
    until: float,
    check: Callable[[], None] = lambda: None,
    lazy: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """Start ``ticker``, park one sleeper per deadline on it (lazily for the names in
    ``lazy``; ``check`` runs once all are parked), run the clock to ``until``; when each
    sleeper woke."""
    woke: dict[str, float] = {}

    async def sleeper(name: str, deadline: float) -> None:
        await ticker.sleep_until(deadline, lazy=name in lazy)
        woke[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        for name, deadline in deadlines.items():
            nursery.start_soon(sleeper, name, deadline)
        await trio.testing.wait_all_tasks_blocked()
        check()
        await trio.sleep_until(until)
        nursery.cancel_scope.cancel()
    return woke


async def test_sleepers_wake_at_their_deadlines_and_share_an_expiry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker()

    def all_parked() -> None:
        assert ticker.running
        assert ticker.statistics().sleepers == 4

    woke = await _wake_times(ticker, {"c": 3.0, "a": 1.0, "b": 2.0, "a2": 1.0}, 3.5, all_parked)
    assert woke == {"a": 1.0, "a2": 1.0, "b": 2.0, "c": 3.0}
    stats = ticker.statistics()
    assert stats.wakeups == 4
    assert stats.expiries == 3  # the two sleepers of 1.0 s shared one


async def test_an_earlier_deadline_moves_the_timer(autojump_clock: trio.testing.MockClock) -> None:
    ticker = Ticker()
    woke: list[float] = []

    async def sleeper(deadline: float) -> None:
        await ticker.sleep_until(deadline)
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        nursery.start_soon(sleeper, 10.0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(sleeper, 2.0)  # while the timer is set for 10 s
        await trio.sleep_until(11)
        nursery.cancel_scope.cancel()
    assert woke == [2.0, 10.0]


async def test_a_cancelled_sleeper_is_forgotten(autojump_clock: trio.testing.MockClock) -> None:
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1) as scope:
            await ticker.sleep_until(5.0)
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(1.0)
        assert ticker.statistics().sleepers == 0
        nursery.cancel_scope.cancel()
    assert ticker.statistics().wakeups == 0


async def test_sleepers_of_a_stopped_ticker_still_sleep_to_their_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker()
    woke: list[float] = []

    async def sleeper() -> None:
        await ticker.sleep_until(5.0)
        woke.append(trio.current_time())

    async with trio.open_nursery() as outer:
        outer.start_soon(sleeper)
        async with trio.open_nursery() as inner:
            inner.start_soon(ticker.run)
            await trio.testing.wait_all_tasks_blocked()
            outer.start_soon(sleeper)
            await trio.sleep(1)
            inner.cancel_scope.cancel()  # the ticker stops while one sleeper is parked on it
    assert woke == [5.0, 5.0]  # the first never used it (not running yet); neither woke early


async def test_sleep_until_uses_the_tasks_ticker_or_trio(autojump_clock: trio.testing.MockClock) -> None:
    await sleep_until(1.0)  # no ticker: trio's own timer
    assert trio.current_time() == pytest.approx(1.0)
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()

        async def task() -> None:
            use_ticker(ticker)
            await sleep_until(2.0)
            await sleep_until(1.5)  # a deadline that has passed is a checkpoint

        nursery.start_soon(task)
        await trio.sleep(2)
        assert ticker.statistics().wakeups == 1
        nursery.cancel_scope.cancel()


async def test_a_ticker_runs_once() -> None:
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already running"):
            await ticker.run()
        nursery.cancel_scope.cancel()


async def test_deadlines_round_up_to_the_grid_and_share_its_expiry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker(grid_s=0.001)
    deadlines = {"flusher": 1.001, "source": 1.0002, "late source": 1.0009, "next": 1.0011}
    woke = await _wake_times(ticker, deadlines, 1.5)
    assert woke == pytest.approx({"flusher": 1.001, "source": 1.001, "late source": 1.001, "next": 1.002})
    assert ticker.statistics().expiries == 2  # three sleepers of one millisecond, one of the next
    assert ticker.on_grid(2.0) == 2.0  # a grid point stays where it is
    assert ticker.on_grid(2.000_000_000_1) == pytest.approx(2.0)  # float error is not a millisecond


def test_the_grid_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        Ticker(grid_s=0)


@pytest.mark.skipif(TimerFd.open() is None, reason="the platform has no timerfd (Linux only)")
async def test_on_the_system_clock_the_ticker_sleeps_on_a_timerfd() -> None:
    # the one ticker test on the real clock: the OS timer is what it is about
    ticker = Ticker(grid_s=0.001)
    woke: dict[str, float] = {}
    asked: dict[str, float] = {}

    async def sleeper(name: str, delay: float) -> None:
        asked[name] = trio.current_time() + delay
        await ticker.sleep_until(asked[name])
        woke[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        assert ticker.uses_timerfd
        nursery.start_soon(sleeper, "late", 0.030)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(sleeper, "early", 0.005)  # re-arms the timer set for the later one
        with trio.fail_after(5):
            while len(woke) < 2:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert woke["early"] < woke["late"]
    for name in woke:
        assert woke[name] >= ticker.on_grid(asked[name])  # never before its grid point
    assert not ticker.uses_timerfd  # closed when the ticker stopped


@pytest.mark.skipif(TimerFd.open() is None, reason="the platform has no timerfd (Linux only)")
async def test_a_sleeper_every_grid_step_keeps_one_repeating_timer() -> None:
    # the output flusher's pattern: a deadline one millisecond after the last
    ticker = Ticker(grid_s=0.001)
    late: list[float] = []

    async def flusher() -> None:
        deadline = trio.current_time()
        for _ in range(30):
            deadline = ticker.on_grid(deadline + 0.001)
            await ticker.sleep_until(deadline)
            late.append(trio.current_time() - deadline)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):
            await flusher()
        nursery.cancel_scope.cancel()
    assert len(late) == 30 and min(late) >= 0  # never before its deadline
    # set once, then it repeats (again only if this busy machine made the sleeper miss a step)
    assert ticker.statistics().timer_sets < 10


async def _park_lazily(
    ticker: Ticker, nursery: trio.Nursery, deadlines: dict[str, float]
) -> tuple[dict[str, object], dict[str, float]]:
    """Park one lazy sleeper per deadline on ``ticker``; their tasks, and when each woke
    (filled in as they wake)."""
    tasks: dict[str, object] = {}
    woke: dict[str, float] = {}

    async def sleeper(name: str, deadline: float) -> None:
        tasks[name] = trio.lowlevel.current_task()
        await ticker.sleep_until(deadline, lazy=True)
        woke[name] = trio.current_time()

    for name, deadline in deadlines.items():
        nursery.start_soon(sleeper, name, deadline)
    await trio.testing.wait_all_tasks_blocked()
    return tasks, woke


async def test_a_lazy_sleep_arms_no_timer_and_ends_at_the_next_expiry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Its deadline passes with no expiry: it sleeps on, and wakes with the first sleeper whose
    deadline did arm the timer; one before its deadline does not end it."""
    ticker = Ticker()

    def all_parked() -> None:
        assert ticker.statistics().sleepers == 3

    deadlines = {"lazy": 1.0, "early": 0.5, "late": 3.0}
    woke = await _wake_times(ticker, deadlines, 4.0, all_parked, lazy=frozenset({"lazy"}))
    assert woke == {"early": 0.5, "lazy": 3.0, "late": 3.0}
    assert ticker.statistics().expiries == 2  # none at the lazy sleeper's own deadline


async def test_hasten_makes_a_lazy_sleep_an_ordinary_one(autojump_clock: trio.testing.MockClock) -> None:
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        tasks, woke = await _park_lazily(ticker, nursery, {"own": 1.0, "later": 1.0, "past": 0.5})
        assert ticker.hasten(tasks["own"], 1.0)
        assert ticker.hasten(tasks["later"], 2.0)
        assert not ticker.hasten(tasks["own"], 1.5)  # no longer lazy: its deadline stays
        await trio.sleep(0.7)  # the third one's deadline passed with no expiry
        assert woke == {}
        assert ticker.hasten(tasks["past"], 0.6)  # a deadline that passed: at once
        await trio.testing.wait_all_tasks_blocked()
        assert woke == {"past": pytest.approx(0.7)}
        await trio.sleep_until(3.0)
        nursery.cancel_scope.cancel()
    assert woke == {"past": pytest.approx(0.7), "own": 1.0, "later": 2.0}
    assert ticker.statistics().expiries == 2


async def test_a_cancelled_lazy_or_hastened_sleep_is_forgotten(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as sleepers:
            tasks, woke = await _park_lazily(ticker, sleepers, {"lazy": 1.0, "hastened": 1.0})
            assert ticker.hasten(tasks["hastened"], 2.0)
            assert ticker.statistics().sleepers == 2
            sleepers.cancel_scope.cancel()
        assert ticker.statistics().sleepers == 0
        assert not ticker.hasten(tasks["lazy"], 1.0)
        await trio.sleep(3.0)
        nursery.cancel_scope.cancel()
    assert woke == {}
    assert ticker.statistics().wakeups == 0  # the timer the hastened sleep armed woke no one


async def test_a_lazy_sleeper_of_a_stopped_ticker_still_sleeps_to_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker()
    async with trio.open_nursery() as nursery, trio.open_nursery() as ticking:
        ticking.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        _, woke = await _park_lazily(ticker, nursery, {"lazy": 2.0})
        await trio.sleep(0.5)
        ticking.cancel_scope.cancel()  # the ticker stops; the sleeper sleeps on, on Trio's timer
    assert woke == {"lazy": 2.0}


def _on_busy_poll_clock(
    min_load: float, sleeps: int, patch: Callable[[Ticker], None] = lambda ticker: None
) -> tuple[list[float], TickerStatistics, TickerStatistics]:
    """Run a ticker on the busy-polling clock (``min_load`` 1e-9: the loop polls from the
    end of its first window; 1.0: it never polls) with one sleeper that sleeps to the next
    grid point ``sleeps`` times, as the output flusher does. How late each wake was, and
    the ticker's statistics before its sleeps and after them."""
    from weir.loop.busy_poll import BusyPollClock, BusyPollPolicy

    ticker = Ticker(grid_s=0.001)
    patch(ticker)
    late: list[float] = []
    stats: list[TickerStatistics] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker.run)
            with trio.fail_after(10):
                await ticker.sleep_until(trio.current_time() + 0.02)  # the policy's first window
                stats.append(ticker.statistics())
                deadline = trio.current_time()
                for _ in range(sleeps):
                    deadline = ticker.on_grid(deadline + 0.001)
                    await ticker.sleep_until(deadline)
                    late.append(trio.current_time() - deadline)
            stats.append(ticker.statistics())
            nursery.cancel_scope.cancel()

    trio.run(main, clock=BusyPollClock(BusyPollPolicy(min_load, work_min_s=0.0)))
    return late, stats[0], stats[1]


@pytest.mark.skipif(TimerFd.open() is None, reason="the platform has no timerfd (Linux only)")
def test_on_the_busy_poll_clock_a_polling_loop_drives_the_expiries_without_a_timer() -> None:
    late, before, after = _on_busy_poll_clock(min_load=1e-9, sleeps=50)
    assert before.loop_driven and after.loop_driven
    assert len(late) == 50 and min(late) >= 0  # never before its deadline
    assert sorted(late)[25] < 0.002  # the polling loop finds the grid point at once
    # the loop woke all 50, with no system call for the timer while it polled
    assert after.wakeups - before.wakeups == 50
    assert after.timer_sets - before.timer_sets <= 1  # at most: stopping a timer left from blocking


@pytest.mark.skipif(TimerFd.open() is None, reason="the platform has no timerfd (Linux only)")
def test_on_the_busy_poll_clock_a_blocking_loop_still_wakes_by_the_timerfd() -> None:
    late, before, after = _on_busy_poll_clock(min_load=1.0, sleeps=30)
    assert after.loop_driven
    assert len(late) == 30 and min(late) >= 0
    # the loop blocks, so the timerfd is what wakes it: set before blocking, repeating
    assert 1 <= after.timer_sets - before.timer_sets < 10


@pytest.mark.skipif(TimerFd.open() is None, reason="the platform has no timerfd (Linux only)")
def test_a_failing_loop_hook_hands_the_ticker_back_to_its_timer(caplog: pytest.LogCaptureFixture) -> None:
    def fail_once(ticker: Ticker) -> None:
        expire_due = ticker.expire_due
        calls = [0]

        def flaky(now: float) -> None:
            calls[0] += 1
            if calls[0] == 100:
                raise RuntimeError("a bug in the expiry")
            expire_due(now)

        ticker.expire_due = flaky  # type: ignore[method-assign]

    late, _, after = _on_busy_poll_clock(min_load=1e-9, sleeps=40, patch=fail_once)
    assert len(late) == 40 and min(late) >= 0  # every sleeper still woke, none early
    assert not after.loop_driven  # the timerfd alone from the failure on
    assert "a bug in the expiry" in caplog.text  # Trio logged it and dropped the hook
