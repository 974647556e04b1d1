"""Keeping freed memory in the process once it runs jobs, as a JVM keeps its heap.

A columnar job allocates and frees arrays of megabytes all the time: a batch's columns, a
window's pane table when it grows, the columns of a firing. glibc's allocator hands blocks
past its mmap threshold (128 KiB, raised as big blocks are freed, up to 32 MiB) straight to
the kernel and back, and gives the top of its heap back once more than the trim threshold
of it is free. Every such block then costs a page fault per page on first touch, and
numpy asks for transparent huge pages for arrays of 4 MiB or more, so a fault is 2 MiB of
zeroing and, where the kernel defragments for such ranges, a compaction. In the shared
window query at 10,000 keys that was 0.4-0.6 s of kernel time in a 1 s run, and whether it
happened depended on what the process had allocated before (an ``np.unique`` over the
input was enough): the same job ran in 0.5 s or in 1.05 s.

From the first job on, blocks up to ``MMAP_THRESHOLD`` come from the heap, and up to
``KEPT_FREE`` bytes of it stay with the process once freed, so the next batch's arrays, and
the next job's, land on pages that are already there. The setting stays after the job, as a
TaskManager's JVM keeps its heap between jobs: a process that runs one job after another (a
test session, a benchmark's rounds) would otherwise fault its working set in again at the
start of each. Memory in use is not affected; only free memory is kept, at most
``KEPT_FREE``, and the process's other allocations reuse it too. ``release()`` gives it back.

Elsewhere than glibc (no ``mallopt``) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

#: a block at least this big is mapped on its own (and unmapped when freed)
MMAP_THRESHOLD = 256 << 20
#: free memory at the top of the heap the process keeps
KEPT_FREE = 1 << 30
#: glibc's thresholds after ``release`` (its defaults, held fixed)
DEFAULT_THRESHOLD = 128 << 10

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _libc() -> Any | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None
    if not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return None
    return libc


_LIBC = _libc()
_kept = False


def supported() -> bool:
    """Whether the allocator can be told (glibc)."""
    return _LIBC is not None


def kept() -> bool:
    """Whether the process keeps freed memory now."""
    return _kept


def _set(mmap_threshold: int, trim_threshold: int) -> None:
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(mmap_threshold))
        _LIBC.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(trim_threshold))


def keep_freed_memory() -> None:
    """Keep freed memory from now on (a job starts; a TaskManager process starts)."""
    global _kept
    if not _kept and _LIBC is not None:
        _set(MMAP_THRESHOLD, KEPT_FREE)
        _kept = True


def release() -> None:
    """Give the free memory back and use glibc's default thresholds again (until the next
    job starts)."""
    global _kept
    if _LIBC is not None:
        _set(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD)
        _LIBC.malloc_trim(ctypes.c_size_t(0))
    _kept = False
