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

So the pane stores allocate their tables here. Once ``enable()`` was called (by a task
whose checkpoints may be written by children: ``async-snapshot`` ``PROCESS``, or ``AUTO``
with periodic checkpoints), from ``MIN_BYTES`` an array lives in a
private anonymous mapping of its own marked ``MADV_DONTFORK``: the child has no mapping
there at all, and the job writes its tables at full speed while a child writes the
checkpoint. From ``HUGE_PAGES_FROM`` the mapping also asks for transparent huge pages,
as numpy does for its own big arrays. Smaller arrays, every array of a process that never
forks a checkpoint child (mappings of their own bought nothing there, and two TaskManager
processes running the shared query without checkpoints went from 1.02x to 0.83x of one
process with them), and every array where ``madvise`` lacks these advices (not Linux), are
numpy's own.

A mapping whose array is gone stays with the process for the next array of its size, up
to ``KEPT_BYTES`` in all (``release()`` gives them back): a table that grows maps fresh
memory, whose first touch costs the kernel a fault and a zeroing per page, and a process
that runs one job after another (a test session, a benchmark's rounds) would pay that for
every table of every job, as ``weir.loop.heap_memory`` keeps freed heap for the same reason.

The rule that comes with it: nothing a checkpoint child reads may be, or view, such an
array. Snapshots copy on the task's thread before the fork. A child that read one anyway
would die of SIGSEGV, which declines that checkpoint, never the job.

The barrier's copies (``CopySpace``). A table of millions of panes is copied at every
barrier, on the task's thread, and the copy grows with the table: in fresh memory each
copy cost the job as much in page faults as the copying itself (0.3-0.5 s at 2-3 M rows
on a VM that faults slowly), at every checkpoint. So an operator copies into a
``CopySpace``: two mappings that reserve address space for several times the table
(``MAP_NORESERVE``: untouched pages cost nothing), taken in turn, so a copy goes into
pages an earlier copy faulted in and faults in only what the table grew by. The
mappings are kept from forked children while they hold no copy (so the job's writes
into them never copy a page for a child), and shown to children (``MADV_DOFORK``) while
they hold one. A copy that is brought up to date rather than made anew (a pane log's
mirror) takes the mapping that holds it again (``take_again``).
"""

from __future__ import annotations

import math
import mmap
import sys
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ["HUGE_PAGES_FROM", "KEPT_BYTES", "MIN_BYTES", "SUPPORTED", "CopySpace", "empty", "enable", "enabled",
           "is_unforked", "kept_bytes", "release", "zeros"]  # fmt: skip

#: arrays at least this big are kept from forked children (smaller ones cost a child little)
MIN_BYTES = 1 << 20
#: arrays at least this big ask for transparent huge pages (numpy's own bound)
HUGE_PAGES_FROM = 4 << 20
SUPPORTED = hasattr(mmap, "MADV_DONTFORK") and hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS")


_enabled = False


def enable() -> None:
    """From now on, this process keeps its big pane tables from forked children (for good,
    as ``weir.loop.heap_memory`` keeps freed memory)."""
    global _enabled
    _enabled = True


def enabled() -> bool:
    """Whether big arrays made here are kept from forked children."""
    return SUPPORTED and _enabled


#: the most bytes of mappings whose arrays are gone the process keeps for reuse
KEPT_BYTES = 1 << 30

_lock = threading.Lock()
_kept: dict[int, list[mmap.mmap]] = {}  # free mappings by size, oldest first
_kept_total = 0


def _mapped(nbytes: int) -> tuple[mmap.mmap, bool]:
    """A mapping of ``nbytes`` and whether it is fresh (zeros) rather than a kept one."""
    global _kept_total
    with _lock:
        free = _kept.get(nbytes)
        if free:
            _kept_total -= nbytes
            region = free.pop()
            if not free:  # no size stays listed without a mapping: ``_keep`` drops the oldest listed
                del _kept[nbytes]
            return region, False
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.madvise(mmap.MADV_DONTFORK)
    if nbytes >= HUGE_PAGES_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
        region.madvise(mmap.MADV_HUGEPAGE)
    return region, True


def _keep(region: mmap.mmap) -> None:
    """An array's mapping, once the array is gone: kept for the next array of its size while
    the kept ones stay within ``KEPT_BYTES`` (the oldest go first)."""
    global _kept_total
    nbytes = len(region)
    with _lock:
        _kept.setdefault(nbytes, []).append(region)
        _kept_total += nbytes
        while _kept_total > KEPT_BYTES:  # a dropped mapping is unmapped once nothing holds it
            size = next(iter(_kept))  # the size kept longest
            del _kept[size][0]
            _kept_total -= size
            if not _kept[size]:
                del _kept[size]


def _array(dims: tuple[int, ...], dtype: np.dtype[Any], zero: bool) -> np.ndarray:
    nbytes = math.prod(dims) * dtype.itemsize
    region, fresh = _mapped(nbytes)
    flat = np.frombuffer(region, dtype)
    # every view of the array keeps ``flat`` alive; when it goes, the mapping is kept
    weakref.finalize(flat, _keep, region)
    if zero and not fresh:
        flat.fill(0)
    return flat.reshape(dims)


def _make(shape: int | tuple[int, ...], dtype: Any, zero: bool) -> np.ndarray:
    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not enabled() or dt.hasobject or math.prod(dims) * dt.itemsize < MIN_BYTES:
        return np.zeros(dims, dt) if zero else np.empty(dims, dt)
    return _array(dims, dt, zero)


def zeros(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """``np.zeros(shape, dtype)``, kept from forked children from ``MIN_BYTES`` (module docstring)."""
    return _make(shape, dtype, zero=True)


def empty(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """``np.empty(shape, dtype)``, kept from forked children from ``MIN_BYTES``."""
    return _make(shape, dtype, zero=False)


def kept_bytes() -> int:
    """Bytes of mappings kept for reuse."""
    return _kept_total


def release() -> None:
    """Give every kept mapping back to the kernel."""
    global _kept_total
    with _lock:  # each mapping is unmapped as its last reference goes
        _kept.clear()
        _kept_total = 0


def _mapping_of(array: np.ndarray) -> mmap.mmap | None:
    """The mapping ``array`` views, if it views one."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap) else None


def is_unforked(array: np.ndarray) -> bool:
    """Whether ``array`` is, or views, memory a forked child does not inherit (a mapping
    of this module's; a ``CopySpace`` shows its taken ones to children)."""
    return _mapping_of(array) is not None


#: A copy's mapping reserves this many times the rows of the copy that made it (address
#: space only, ``MAP_NORESERVE``: a page is memory once it is touched), so a growing table's
#: copies keep going into the same, already faulted, memory.
RESERVE = 32
#: Rows a mapping reserves at least.
RESERVE_MIN_ROWS = 1 << 16
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)


class _Region:
    """One mapping of a ``CopySpace``: its rows as an array, how many of them are faulted in,
    whether a copy is in it."""

    def __init__(self, rows: int, width: int) -> None:
        self.mapping = mmap.mmap(
            -1, rows * width * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
        )
        self.mapping.madvise(mmap.MADV_DONTFORK)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.mapping.madvise(mmap.MADV_HUGEPAGE)
        self.array = np.frombuffer(self.mapping, np.int64).reshape(rows, width)
        self.faulted = 0
        self.busy = False


class CopySpace:
    """The memory of the copies a barrier takes of an operator's table, rows of ``width``
    int64 columns (module docstring): ``take`` at the barrier, ``give_back`` once the copy's
    snapshot is gone."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._lock = threading.Lock()
        self._regions: list[_Region] = []  # at most two: the copy being written, and the next

    def take(self, rows: int) -> np.ndarray:
        """An array of at least ``rows`` rows that forked children inherit: a free mapping's
        whole reservation (the one with the most pages in), else a new mapping, else (no
        mappings here) fresh numpy memory."""
        if not SUPPORTED:
            return np.empty((rows, self.width), np.int64)
        with self._lock:
            free = [r for r in self._regions if not r.busy and len(r.array) >= rows]
            if free:
                region = max(free, key=lambda r: r.faulted)
            else:
                region = _Region(max(rows * RESERVE, RESERVE_MIN_ROWS), self.width)
                # a full mapping, or one too small for the table, makes way
                self._regions = [*[r for r in self._regions if r.busy][-1:], region]
            region.busy = True
            region.faulted = max(region.faulted, rows)  # the copy's writes fault these in
        region.mapping.madvise(mmap.MADV_DOFORK)
        return region.array

    def take_again(self, array: np.ndarray) -> bool:
        """Take the mapping an earlier ``take`` returned as ``array`` again, for a copy that
        builds on what it holds; False if it is gone or holds a copy still."""
        with self._lock:
            region = next((r for r in self._regions if r.array is array and not r.busy), None)
            if region is None:
                return False
            region.busy = True
        region.mapping.madvise(mmap.MADV_DOFORK)
        return True

    def holds(self, array: np.ndarray) -> bool:
        """Whether ``array`` is one of this space's mappings still."""
        with self._lock:
            return any(r.array is array for r in self._regions)

    def give_back(self, array: np.ndarray) -> None:
        """``array``'s copy is gone: its mapping takes a later one, kept from children again."""
        with self._lock:
            for region in self._regions:
                if region.array is array:
                    region.mapping.madvise(mmap.MADV_DONTFORK)
                    region.busy = False

    def regions(self) -> list[tuple[int, int, bool]]:
        """Per mapping: its rows, the rows faulted in (or being), whether a copy is in it."""
        with self._lock:
            return [(len(r.array), r.faulted, r.busy) for r in self._regions]
