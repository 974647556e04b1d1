"""Network buffers and what readers receive: ``Buffer`` and ``BufferOrEvent``. Pure.

Theory of operation
-------------------
A ``Buffer`` wraps one memory segment (a ``bytearray`` of the segment size, 32 KiB by
default) that belongs to a recycler: a ``LocalBufferPool``, or the exclusive or floating
buffers of a remote input channel. The writer appends bytes (``append`` copies as much
as fits); readers take ``memoryview`` slices.

A buffer is reference counted, like Flink's ``NetworkBuffer``: it starts with one
reference, ``retain()`` adds one for every reader slice handed out while the buffer is
still in a subpartition queue, and ``recycle()`` drops one. When the count reaches zero
the segment goes back to its recycler and the buffer is dead: using it again, or
recycling it once more, raises ``ProtocolViolation``. Segments are pooled, ``Buffer``
objects are not: a pool wraps a segment in a fresh ``Buffer`` for every request, so a
stale reference can never recycle a segment that has been handed out again.

A ``BufferOrEvent`` is one item a reader takes from a subpartition view or an input gate:
either a slice of data (with the buffer reference that keeps it alive) or an in-band
event, plus the sender's backlog and the channel it came from. Its ``recycle()`` releases
that reference exactly once.

What it does not do: no locking (one owner at a time), no trio, no accounting of pools.
"""

from __future__ import annotations

from typing import Protocol

from weir.errors import ProtocolViolation
from weir.network.events import Event

__all__ = ["Buffer", "BufferOrEvent", "BufferRecycler"]


class BufferRecycler(Protocol):
    """Where a buffer's segment goes when the last reference to it is recycled."""

    def recycle_segment(self, segment: bytearray) -> None: ...


class Buffer:
    """One network buffer: a memory segment, the bytes written to it, and its references."""

    __slots__ = ("_recycler", "_refcount", "segment", "size")

    def __init__(self, segment: bytearray, recycler: BufferRecycler, size: int = 0) -> None:
        if not 0 <= size <= len(segment):
            raise ProtocolViolation(f"buffer: size {size} outside the segment of {len(segment)} bytes")
        self.segment = segment
        self.size = size  # bytes written (Flink's writer index)
        self._recycler = recycler
        self._refcount = 1

    @property
    def capacity(self) -> int:
        return len(self.segment)

    @property
    def writable_bytes(self) -> int:
        return len(self.segment) - self.size

    @property
    def is_recycled(self) -> bool:
        return self._refcount == 0

    @property
    def reference_count(self) -> int:
        return self._refcount

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy as much of ``data`` as fits behind the written bytes; return the bytes copied."""
        if self._refcount == 0:
            raise ProtocolViolation(f"buffer of {self._recycler!r}: append after the buffer was recycled")
        start = self.size
        n = len(data)
        room = len(self.segment) - start
        if n > room:
            n = room
            data = memoryview(data)[:n]
        self.segment[start : start + n] = data
        self.size = start + n
        return n

    def view(self, start: int = 0, end: int | None = None) -> memoryview:
        """The written bytes ``[start, end)`` as a read-only slice of the segment (no copy)."""
        if self._refcount == 0:
            raise ProtocolViolation(f"buffer of {self._recycler!r}: read after the buffer was recycled")
        stop = self.size if end is None else end
        return memoryview(self.segment)[start:stop].toreadonly()

    def retain(self) -> None:
        """Add a reference (a reader slice that will be recycled separately)."""
        if self._refcount == 0:
            raise ProtocolViolation(f"buffer of {self._recycler!r}: retained after it was recycled")
        self._refcount += 1

    def recycle(self) -> None:
        """Drop one reference; the last one returns the segment to its recycler."""
        count = self._refcount
        if count == 0:
            raise ProtocolViolation(
                f"buffer of {self._recycler!r}: recycled again after its segment went back "
                "(expected exactly one recycle per reference)"
            )
        self._refcount = count - 1
        if count == 1:
            self._recycler.recycle_segment(self.segment)

    def __repr__(self) -> str:
        return f"Buffer(size={self.size}, capacity={len(self.segment)}, refs={self._refcount})"


class BufferOrEvent:
    """A slice of data or an in-band event taken from a view or a gate.

    ``data`` is a read-only ``memoryview`` valid until ``recycle()``; ``backlog`` is the
    number of buffers still queued at the sender after this one; ``channel_index`` is the
    input channel it arrived on (-1 before it reached a gate).
    """

    __slots__ = ("_buffer", "_recycled", "backlog", "channel_index", "data", "event")

    def __init__(
        self,
        data: memoryview | None = None,
        event: Event | None = None,
        backlog: int = 0,
        buffer: Buffer | None = None,
        channel_index: int = -1,
    ) -> None:
        if (data is None) == (event is None):
            raise ProtocolViolation("BufferOrEvent: expected exactly one of data and event")
        self.data = data
        self.event = event
        self.backlog = backlog
        self.channel_index = channel_index
        self._buffer = buffer
        self._recycled = False

    @property
    def is_buffer(self) -> bool:
        return self.data is not None

    @property
    def is_event(self) -> bool:
        return self.event is not None

    @property
    def size(self) -> int:
        """Bytes of data (0 for an event)."""
        return 0 if self.data is None else len(self.data)

    @property
    def is_recycled(self) -> bool:
        return self._recycled

    def recycle(self) -> None:
        """Release the data (the slice must not be used afterwards). Exactly once per item."""
        if self._recycled:
            raise ProtocolViolation(
                f"BufferOrEvent from channel {self.channel_index}: recycled twice (expected once)"
            )
        self._recycled = True
        buffer = self._buffer
        if buffer is not None:
            self._buffer = None
            buffer.recycle()

    def __repr__(self) -> str:
        what = f"event={self.event!r}" if self.event is not None else f"bytes={self.size}"
        return f"BufferOrEvent({what}, backlog={self.backlog}, channel={self.channel_index})"
