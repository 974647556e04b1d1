"""The task's drain lock: no scheduling point when free, handed over in arrival order."""

from __future__ import annotations

import trio
import trio.testing

from weir.task.task import _DrainLock


async def test_a_free_lock_is_taken_without_a_scheduling_point() -> None:
    lock = _DrainLock()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        async with lock:
            assert lock.locked()
            assert ran == []  # the other task had no chance to run
        assert not lock.locked()


async def test_release_hands_the_lock_to_the_longest_waiter() -> None:
    lock = _DrainLock()
    order: list[str] = []

    async def waiter(name: str) -> None:
        async with lock:
            order.append(name)
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        async with lock:
            nursery.start_soon(waiter, "first")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(waiter, "second")
            await trio.testing.wait_all_tasks_blocked()
        # released while two wait: the holder cannot take it back before them
        async with lock:
            order.append("holder again")
    assert order == ["first", "second", "holder again"]
    assert not lock.locked()


async def test_a_waiter_cancelled_while_it_waits_does_not_get_the_lock() -> None:
    lock = _DrainLock()
    got: list[str] = []

    async def waiter(name: str, scope_out: list[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            scope_out.append(scope)
            async with lock:
                got.append(name)

    scopes: list[trio.CancelScope] = []
    async with trio.open_nursery() as nursery, lock:
        nursery.start_soon(waiter, "cancelled", scopes)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter, "kept", scopes)
        await trio.testing.wait_all_tasks_blocked()
        scopes[0].cancel()
        await trio.testing.wait_all_tasks_blocked()
    assert got == ["kept"]
    assert not lock.locked()
