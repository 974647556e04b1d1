"""The async wrapper of LocalBufferPool: park until a buffer is recycled; cancellation takes nothing."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.errors import UsageError
from weir.network.buffer import Buffer
from weir.network.buffer_pool import NetworkBufferPool
from weir.network.wakeup import Wakeup


async def test_request_parks_until_a_recycle(autojump_clock: trio.testing.MockClock) -> None:
    pool = NetworkBufferPool(1024, 1024).create_buffer_pool(1, 1)
    held = await pool.request_buffer()
    got: list[tuple[float, Buffer]] = []

    async def waiter() -> None:
        buffer = await pool.request_buffer()
        got.append((trio.current_time(), buffer))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(3)
        assert got == []
        held.recycle()
    assert got[0][0] == pytest.approx(3) and pool.used == 1


async def test_a_cancelled_request_leaves_no_listener(autojump_clock: trio.testing.MockClock) -> None:
    pool = NetworkBufferPool(1024, 1024).create_buffer_pool(1, 1)
    held = await pool.request_buffer()
    with trio.move_on_after(1):
        await pool.request_buffer()
    assert pool._listeners == [] and pool.network_pool._waiting == {}
    held.recycle()
    assert pool.used == 0


async def test_a_destroyed_pool_wakes_its_waiters_with_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pool = NetworkBufferPool(1024, 1024).create_buffer_pool(1, 1)
    await pool.request_buffer()
    errors: list[Exception] = []

    async def waiter() -> None:
        try:
            await pool.request_buffer()
        except UsageError as error:
            errors.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        pool.destroy()
    assert len(errors) == 1 and "destroyed" in str(errors[0])


async def test_wakeup_remembers_a_set_while_busy(autojump_clock: trio.testing.MockClock) -> None:
    wakeup = Wakeup()
    wakeup.set()
    wakeup.set()
    await wakeup.wait()  # returns at once and clears
    assert not wakeup.is_set
    with trio.move_on_after(1) as scope:
        await wakeup.wait()
    assert scope.cancelled_caught
