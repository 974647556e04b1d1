"""Keeping Python's garbage collections short and rare while jobs run.

A full (generation 2) collection walks every container object the process tracks: the
modules, numba's and LLVM's compiled code, pyarrow, the cluster's own objects, and every
window's dict of live panes, entry by entry. With weir loaded that is tens of
milliseconds (35 to 86 ms in traces of the keyed-shuffle benchmark), and it happens at
moments nobody chose, in the one thread every task runs in, where it is latency for
every record in flight.

While at least one job runs:

- The objects that existed when the first job started are frozen (``gc.freeze``: moved
  to a generation collections never walk), so a full collection only walks what the jobs
  created. When the last running job ends they are unfrozen, so cyclic garbage among them
  can still be collected later: a process that runs many jobs (a test session on a shared
  cluster) does not keep it forever.
- Collections run less often (``JOB_THRESHOLDS``): the young generation is collected
  every 10,000 net allocations instead of Python's 700. A task allocates a few objects per
  record (tuples, ints) that die young, and almost none are in cycles, so at the default
  the collector ran 12,000 times in the 3-million-record window job of a million keys and
  walked the windows' pane dicts 80 times: 40% of the job's time, for no garbage. Ten
  thousand young objects are a few MB at most; the older generations keep Python's
  ratios, so cyclic garbage is still found, later.

When the last running job ends, what it left in cycles (its tasks' operators and state,
which refer to one another) is collected before the objects are unfrozen, so the
collection walks only what the jobs created, and the next job's tables reuse the memory
instead of taking fresh pages (``weir.cluster.task_executor`` does the same in a
TaskManager process when its last task ends).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: ``gc.set_threshold`` while jobs run (Python's default is 700, 10, 10)
JOB_THRESHOLDS = (10_000, 10, 10)

_running_jobs = 0
_outside_jobs: tuple[int, ...] = ()


def use_job_thresholds() -> tuple[int, ...]:
    """Collect no more often than ``JOB_THRESHOLDS`` (a higher threshold already set stays);
    returns the thresholds before."""
    before = gc.get_threshold()
    gc.set_threshold(*(max(now, job) for now, job in zip(before, JOB_THRESHOLDS)))
    return before


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the heap and collect less often for the duration of a job (nested and
    concurrent jobs share one freeze)."""
    global _running_jobs, _outside_jobs
    if _running_jobs == 0:
        gc.freeze()
        _outside_jobs = use_job_thresholds()
    _running_jobs += 1
    try:
        yield
    finally:
        _running_jobs -= 1
        if _running_jobs == 0:
            gc.collect()  # the ended jobs' cycles, walking only what they created
            gc.set_threshold(*_outside_jobs)
            gc.unfreeze()
