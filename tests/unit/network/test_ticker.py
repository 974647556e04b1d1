"""The TaskManager's ticker: one Trio timer for every sleeper, on the Trio clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from engine.network.ticker import Ticker, sleep_until, use_ticker


async def test_sleepers_wake_at_their_deadlines_and_share_an_expiry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ticker = Ticker()
    woke: dict[str, float] = {}

    async def sleeper(name: str, deadline: float) -> None:
        await ticker.sleep_until(deadline)
        woke[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.testing.wait_all_tasks_blocked()
        assert ticker.running
        for name, deadline in [("c", 3.0), ("a", 1.0), ("b", 2.0), ("a2", 1.0)]:
            nursery.start_soon(sleeper, name, deadline)
        await trio.testing.wait_all_tasks_blocked()
        assert ticker.statistics().sleepers == 4
        await trio.sleep_until(3.5)
        nursery.cancel_scope.cancel()
    assert woke == {"a": 1.0, "a2": 1.0, "b": 2.0, "c": 3.0}
    stats = ticker.statistics()
    assert stats.wakeups == 4
    assert stats.expiries == 3  # the two sleepers of 1.0 s shared one
    assert not stats.running


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
