"""``FrameReader``: one input channel's byte stream back into batches.

Theory of operation. The network layer hands the reader the bytes of one channel
in order, one buffer at a time; frames were written back to back and may span any
number of buffers. ``feed`` decodes every frame that is complete within the bytes
it has, straight from the given buffer (no copy), and keeps only the bytes of the
one frame that is still incomplete at the end:

* states: *between frames* (nothing kept), *inside a header* (fewer than 12 bytes
  of the next header kept), *inside a payload* (the header parsed and checked, a
  buffer of exactly the frame's size allocated and partly filled);
* event: ``feed(data)``; action: a list of completed batches, in stream order;
* invariants: kept bytes never exceed one frame; a header is checked (magic,
  codec, flags, lengths, and by the channel's serializer) as soon as its 12 bytes
  are there, before any payload is buffered, so a corrupt stream fails at the
  first bad header with ``ProtocolViolation`` naming the byte offset and what was
  found. After a ``ProtocolViolation`` the channel's stream is unusable.

It does not know about events (barriers, watermarks), which travel beside the
buffers, and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.codec.batch import Batch
from weir.codec.frame import HEADER_SIZE, FrameHeader, pack_header, parse_header
from weir.codec.serializers import BatchSerializer
from weir.errors import UsageError

__all__ = ["FrameReader", "ReaderStatistics"]


@dataclass(frozen=True)
class ReaderStatistics:
    """A snapshot of a reader's counters."""

    frames: int
    records: int
    bytes_decoded: int
    partial_bytes: int


class FrameReader:
    """Reassembles the frames of one input channel and decodes them with ``serializer``."""

    def __init__(self, serializer: BatchSerializer) -> None:
        if not isinstance(serializer, BatchSerializer):
            raise UsageError(f"FrameReader needs a BatchSerializer (see serializer_for), got {serializer!r}")
        self.serializer = serializer
        self._header_part = bytearray()  # inside a header: its first bytes
        self._header: FrameHeader | None = None  # inside a payload: the parsed header
        self._payload = bytearray()  # inside a payload: the frame's payload, filled up to _filled
        self._filled = 0
        self._stream_offset = 0  # stream position of the first byte not yet consumed
        self._frames = 0
        self._records = 0

    @property
    def has_partial(self) -> bool:
        """True while the bytes of an incomplete frame are kept."""
        return bool(self._header_part) or self._header is not None

    def pending_bytes(self) -> bytes:
        """The bytes of the incomplete frame kept so far, as they came in (an unaligned
        checkpoint persists them; feeding them to a fresh reader restores this one)."""
        header = self._header
        if header is None:
            return bytes(self._header_part)
        raw = pack_header(header.codec, header.flags, header.record_count, header.payload_length)
        return raw + bytes(self._payload[: self._filled])

    def statistics(self) -> ReaderStatistics:
        partial = len(self._header_part) + (HEADER_SIZE + self._filled if self._header is not None else 0)
        return ReaderStatistics(self._frames, self._records, self._stream_offset, partial)

    def feed(self, data: memoryview | bytes | bytearray) -> list[Batch]:
        """Every batch completed by ``data`` (the channel's next bytes), in order.

        ``data`` may be reused by the caller once this returns: decoded batches never
        alias it, and only the incomplete tail is copied.
        """
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        batches: list[Batch] = []
        pos = 0
        end = len(view)
        if self.has_partial:
            pos = self._continue_partial(view, batches)
        serializer = self.serializer
        while end - pos >= HEADER_SIZE:
            header = self._parse(view, pos)
            frame_end = pos + HEADER_SIZE + header.payload_length
            if frame_end > end:
                break
            batch = serializer.decode(header, view[pos + HEADER_SIZE : frame_end])
            self._done(batch, HEADER_SIZE + header.payload_length)
            batches.append(batch)
            pos = frame_end
        if pos < end:
            self._keep_tail(view[pos:])
        return batches

    # -- internals ---------------------------------------------------------------------------------

    def _parse(self, data: memoryview | bytearray, pos: int) -> FrameHeader:
        header = parse_header(data, pos, stream_offset=self._stream_offset)
        self.serializer.check_header(header, self._stream_offset)
        return header

    def _done(self, batch: Batch, frame_length: int) -> None:
        self._frames += 1
        self._records += len(batch)
        self._stream_offset += frame_length

    def _keep_tail(self, tail: memoryview) -> None:
        """Keep the incomplete frame at the end of a feed (called between frames only)."""
        if len(tail) < HEADER_SIZE:
            self._header_part[:] = tail
            return
        self._start_payload(self._parse(tail, 0))
        self._fill(tail[HEADER_SIZE:])

    def _start_payload(self, header: FrameHeader) -> None:
        self._header = header
        self._payload = bytearray(header.payload_length)
        self._filled = 0

    def _fill(self, data: memoryview) -> int:
        assert self._header is not None
        take = min(len(data), self._header.payload_length - self._filled)
        self._payload[self._filled : self._filled + take] = data[:take]
        self._filled += take
        return take

    def _continue_partial(self, view: memoryview, batches: list[Batch]) -> int:
        """Complete the kept frame with the start of ``view``; the position after what was used."""
        pos = 0
        if self._header is None:
            take = min(HEADER_SIZE - len(self._header_part), len(view))
            self._header_part += view[:take]
            pos = take
            if len(self._header_part) < HEADER_SIZE:
                return pos
            parsed = self._parse(self._header_part, 0)
            self._header_part.clear()
            self._start_payload(parsed)
        pos += self._fill(view[pos:])
        header = self._header
        assert header is not None
        if self._filled < header.payload_length:
            return pos
        payload = self._payload
        self._header = None
        self._payload = bytearray()
        self._filled = 0
        batch = self.serializer.decode(header, memoryview(payload))
        self._done(batch, HEADER_SIZE + header.payload_length)
        batches.append(batch)
        return pos
