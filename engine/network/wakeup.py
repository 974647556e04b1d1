"""``Wakeup``: how a Trio task that owns a queue parks until someone has put work in it.

Producers of work call ``set()`` synchronously (from pool callbacks, views, connections);
the one owner task calls ``await wait()`` and then looks at its state again. A ``set()``
that happens while the owner is busy is remembered, so the owner never sleeps through
work, and any number of ``set()`` calls wake it once.
"""

from __future__ import annotations

import trio

__all__ = ["Wakeup"]


class Wakeup:
    """A level-triggered, self-clearing wakeup flag for one waiting task."""

    __slots__ = ("_flag", "_lot")

    def __init__(self) -> None:
        self._flag = False
        self._lot = trio.lowlevel.ParkingLot()

    @property
    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        if self._lot:
            self._lot.unpark_all()

    async def wait(self) -> None:
        """Return once ``set()`` was called since the last return, clearing the flag.

        Cancellation: if cancelled while parked, raises ``Cancelled`` and the flag is
        left as it was (a later ``set()`` is not lost).
        """
        if self._flag:
            self._flag = False
            await trio.lowlevel.checkpoint()
            return
        await self._lot.park()
        self._flag = False
