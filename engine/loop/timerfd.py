"""``TimerFd``: a Linux timerfd, a file descriptor that becomes readable when a timer expires.

Trio's only timer is a cancel scope's deadline. Sleeping on one costs a scope, a
``Cancelled`` raised and caught, and a wake-up that ``epoll`` rounds up to the next whole
millisecond (its timeout is in milliseconds). A task waiting for a timerfd to become
readable costs one ``epoll_ctl`` and wakes within tens of microseconds of the expiry. The
``Ticker`` uses one when the platform has it and the Trio clock is the system clock;
``TimerFd.open()`` returns None otherwise (other systems, or a libc without it).

The clock is ``CLOCK_MONOTONIC``, the clock of ``time.perf_counter`` and so of Trio's
``SystemClock`` on Linux; timers are armed with a delay relative to now, so the offset
Trio adds to its clock does not matter.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys

__all__ = ["TimerFd"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = 0o2000000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _load() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int
    return libc


_libc = _load()


class TimerFd:
    """One timer. ``arm(delay, interval)`` (re)starts it, once or repeating, ``disarm()``
    stops it; the file descriptor ``fd`` is readable from an expiry until ``clear()``. Not
    thread-safe."""

    __slots__ = ("_spec", "_spec_ref", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._spec = _Itimerspec()
        self._spec_ref = ctypes.byref(self._spec)

    @staticmethod
    def open() -> TimerFd | None:
        """A new timer, or None where the platform has no timerfd."""
        if _libc is None:
            return None
        fd = _libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            return None
        return TimerFd(fd)

    def arm(self, delay_s: float, interval_s: float = 0.0) -> None:
        """Expire ``delay_s`` seconds from now (at once, if it is not positive), then every
        ``interval_s`` seconds if that is positive."""
        ns = math.ceil(delay_s * 1e9)  # never a nanosecond early
        value = self._spec.it_value
        if ns <= 0:
            value.tv_sec, value.tv_nsec = 0, 1  # zero would disarm it
        else:
            value.tv_sec, value.tv_nsec = divmod(ns, 1_000_000_000)
        interval = self._spec.it_interval
        interval.tv_sec, interval.tv_nsec = divmod(max(0, round(interval_s * 1e9)), 1_000_000_000)
        self._settime()

    def disarm(self) -> None:
        value, interval = self._spec.it_value, self._spec.it_interval
        value.tv_sec = value.tv_nsec = interval.tv_sec = interval.tv_nsec = 0
        self._settime()

    def clear(self) -> None:
        """Consume an expiry, so the descriptor is not readable until the next one."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _settime(self) -> None:
        assert _libc is not None
        if _libc.timerfd_settime(self.fd, 0, self._spec_ref, None) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"timerfd_settime failed: {os.strerror(errno)}")
