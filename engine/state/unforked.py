"""Arrays a forked checkpoint child does not inherit: the live tables of vectorized state.

Theory of operation
-------------------
The asynchronous part of a big checkpoint runs in a forked child (``weir.task.forked``).
``fork`` shares every page of the job's process copy-on-write, so while the child lives,
the job's first write to any page copies it, in a page fault on the task's thread. A
vectorized window's pane table is the biggest and busiest memory of its job: in the shared
window query at 10,000 keys it holds 2 M rows (about 150 MiB with its index), and the
batches write rows all over it. Each checkpoint cost the job some 35,000 page copies, most
of the 0.15-0.2 s a checkpoint took from a one-second interval, for memory the child never
reads: at the barrier the operator exported its panes into fresh arrays (``export``), and
only those go into the snapshot.

So the pane stores allocate their tables here. From ``MIN_BYTES`` an array lives in a
private anonymous mapping of its own marked ``MADV_DONTFORK``: the child has no mapping
there at all, and the job writes its tables at full speed while a child writes the
checkpoint. From ``HUGE_PAGES_FROM`` the mapping also asks for transparent huge pages,
as numpy does for its own big arrays. Smaller arrays, and every array where ``madvise``
lacks these advices (not Linux), are numpy's own.

The rule that comes with it: nothing a checkpoint child reads may be, or view, such an
array. Snapshots copy on the task's thread before the fork. A child that read one anyway
would die of SIGSEGV, which declines that checkpoint, never the job.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np

__all__ = ["HUGE_PAGES_FROM", "MIN_BYTES", "SUPPORTED", "empty", "is_unforked", "zeros"]

#: arrays at least this big are kept from forked children (smaller ones cost a child little)
MIN_BYTES = 1 << 20
#: arrays at least this big ask for transparent huge pages (numpy's own bound)
HUGE_PAGES_FROM = 4 << 20
SUPPORTED = hasattr(mmap, "MADV_DONTFORK") and hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS")


def _mapped(nbytes: int) -> mmap.mmap:
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.madvise(mmap.MADV_DONTFORK)
    if nbytes >= HUGE_PAGES_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
        region.madvise(mmap.MADV_HUGEPAGE)
    return region


def zeros(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """``np.zeros(shape, dtype)``, kept from forked children from ``MIN_BYTES`` (module docstring)."""
    dtype = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(dims) * dtype.itemsize
    if not SUPPORTED or dtype.hasobject or nbytes < MIN_BYTES:
        return np.zeros(dims, dtype)
    # a fresh anonymous mapping reads as zeros; the array keeps it mapped while it lives
    return np.frombuffer(_mapped(nbytes), dtype).reshape(dims)


def empty(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """``np.empty(shape, dtype)``, kept from forked children from ``MIN_BYTES`` (zeroed there)."""
    dtype = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not SUPPORTED or dtype.hasobject or math.prod(dims) * dtype.itemsize < MIN_BYTES:
        return np.empty(dims, dtype)
    return zeros(dims, dtype)


def is_unforked(array: np.ndarray) -> bool:
    """Whether ``array`` is, or views, memory a forked child does not inherit."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
