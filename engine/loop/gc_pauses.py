"""Keeping Python's full garbage collections short while jobs run.

A full (generation 2) collection walks every container object the process tracks: the
modules, numba's and LLVM's compiled code, pyarrow, the cluster's own objects. With
weir loaded that is tens of milliseconds (35 to 86 ms in traces of the keyed-shuffle
benchmark), and it happens at moments nobody chose, in the one thread every task runs
in, where it is latency for every record in flight.

While at least one job runs, the objects that existed when the first job started are
frozen (``gc.freeze``: moved to a generation collections never walk), so a full
collection only walks what the jobs created. When the last running job ends they are
unfrozen, so cyclic garbage among them can still be collected later: a process that runs
many jobs (a test session on a shared cluster) does not keep it forever.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_running_jobs = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the heap for the duration of a job (nested and concurrent jobs share one freeze)."""
    global _running_jobs
    if _running_jobs == 0:
        gc.freeze()
    _running_jobs += 1
    try:
        yield
    finally:
        _running_jobs -= 1
        if _running_jobs == 0:
            gc.unfreeze()
