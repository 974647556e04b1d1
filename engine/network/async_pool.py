"""The async side of ``LocalBufferPool``: park a Trio task until a buffer is recycled.

``LocalBufferPool.request_buffer`` delegates here so the pool itself stays free of Trio.
"""

from __future__ import annotations

import trio

from weir.network.buffer import Buffer
from weir.network.buffer_pool import LocalBufferPool, WouldBlock

__all__ = ["request_buffer", "wait_until_available"]


async def wait_until_available(pool: LocalBufferPool) -> None:
    """Park until ``pool`` may serve a request (spurious returns are possible: retry).

    Cancellation: raises ``Cancelled`` and unregisters the listener; nothing is taken.
    """
    event = trio.Event()
    pool.notify_when_available(event.set)
    try:
        await event.wait()
    finally:
        if not event.is_set():
            pool.remove_listener(event.set)


async def request_buffer(pool: LocalBufferPool) -> Buffer:
    """An empty buffer from ``pool``; a scheduling point even when one is free at once.

    Cancellation: if cancelled before a buffer is obtained, raises ``Cancelled`` and takes
    nothing; once obtained, the buffer is returned (the final yield is shielded).
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    while True:
        try:
            buffer = pool.request_buffer_nowait()
        except WouldBlock:
            await wait_until_available(pool)
            continue
        await trio.lowlevel.cancel_shielded_checkpoint()
        return buffer
