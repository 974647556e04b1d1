"""Worker threads that live as long as a task, apart from Trio's default thread limiter.

Trio's default limiter lends threads to short jobs that end on their own: a checkpoint's
files being written, an LMDB view being read, a forked child's answer being waited for.
A user's ``SourceFunction.run`` is different: it runs for as long as its task. Giving it a
limiter of its own keeps the default one's count meaning "short work is in progress" --
which is what a test's thread-aware mock clock waits on before it lets virtual time jump --
and keeps a job with many such sources from holding all of the default limiter's threads.
"""

from __future__ import annotations

import math

import trio

__all__ = ["long_running_limiter"]

_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("weir_long_running_threads")


def long_running_limiter() -> trio.CapacityLimiter:
    """The limiter for threads that live as long as a task (one per Trio run, unbounded)."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(math.inf)
        _LIMITER.set(limiter)
        return limiter
