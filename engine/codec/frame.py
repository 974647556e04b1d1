"""Frames: the unit of data on a channel's byte stream.

A channel carries a byte stream of frames. A frame holds one batch (or the part
of a batch routed to that channel): a fixed 12-byte header, then the payload.

Header, little endian::

    offset  size  field
    0       1     magic           0xB7
    1       1     codec           0 = pickled, 1 = typed columnar
    2       1     flags           bit 0: the payload has a timestamp column
                                  bit 1: the payload has a row-kind column (ROW types)
                                  bit 2: the timestamp column is packed (with bit 0 only)
    3       1     pad             0
    4       4     record count    uint32
    8       4     payload length  uint32 (bytes after the header)

The network layer writes frames into 32 KiB buffers back to back; a frame may
span any number of buffers and ``weir.codec.reader.FrameReader`` reassembles
it. Payload layouts belong to the serializers (``weir.codec.serializers``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from weir.errors import ProtocolViolation, UsageError

__all__ = [
    "CODEC_COLUMNAR",
    "CODEC_NAMES",
    "CODEC_PICKLE",
    "FLAG_ROW_KINDS",
    "FLAG_TIMESTAMPS",
    "FLAG_TIMESTAMPS_PACKED",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_PAYLOAD_BYTES",
    "FrameHeader",
    "header_at",
    "pack_header",
    "parse_header",
]

MAGIC = 0xB7
CODEC_PICKLE = 0
CODEC_COLUMNAR = 1
CODEC_NAMES = {CODEC_PICKLE: "pickle", CODEC_COLUMNAR: "typed columnar"}
FLAG_TIMESTAMPS = 0x01
FLAG_ROW_KINDS = 0x02
#: The timestamp column is packed like a LONG column (``weir.codec.columns``): keeps a
#: batch's event times, which lie close together, to one, two or four bytes each.
FLAG_TIMESTAMPS_PACKED = 0x04
_KNOWN_FLAGS = FLAG_TIMESTAMPS | FLAG_ROW_KINDS | FLAG_TIMESTAMPS_PACKED

#: The largest payload a frame may announce (1 GiB). Larger batches must be split by
#: the sender; a header announcing more is taken as corrupt, not buffered.
MAX_PAYLOAD_BYTES = 1 << 30

HEADER = struct.Struct("<BBBBII")
HEADER_SIZE = HEADER.size  # 12


class FrameHeader(NamedTuple):
    """A parsed, validated frame header."""

    codec: int
    flags: int
    record_count: int
    payload_length: int

    @property
    def has_timestamps(self) -> bool:
        return bool(self.flags & FLAG_TIMESTAMPS)

    @property
    def timestamps_packed(self) -> bool:
        return bool(self.flags & FLAG_TIMESTAMPS_PACKED)

    @property
    def has_row_kinds(self) -> bool:
        return bool(self.flags & FLAG_ROW_KINDS)

    @property
    def frame_length(self) -> int:
        return HEADER_SIZE + self.payload_length


def pack_header(codec: int, flags: int, record_count: int, payload_length: int) -> bytes:
    """The 12 header bytes; a payload above ``MAX_PAYLOAD_BYTES`` is the caller's mistake."""
    if payload_length > MAX_PAYLOAD_BYTES:
        raise UsageError(
            f"a batch of {record_count} records encodes to {payload_length} bytes, more than the "
            f"{MAX_PAYLOAD_BYTES}-byte frame limit; emit smaller batches"
        )
    return HEADER.pack(MAGIC, codec, flags, 0, record_count, payload_length)


def header_at(stream_offset: int) -> str:
    """Where a header is, for error messages (formatted only when one is raised: headers
    are checked for every frame)."""
    return f"frame header at stream byte {stream_offset}"


def parse_header(
    data: bytes | bytearray | memoryview, offset: int = 0, *, stream_offset: int = 0
) -> FrameHeader:
    """Parse and check the header at ``data[offset:offset + 12]``.

    ``stream_offset`` is the header's position in the channel's byte stream, named
    in errors. Raises ``ProtocolViolation`` for a bad magic byte, an unknown codec
    or flag, a non-zero pad byte, or a payload length above ``MAX_PAYLOAD_BYTES``.
    """
    magic, codec, flags, pad, count, length = HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        raise ProtocolViolation(
            f"{header_at(stream_offset)}: bad magic byte 0x{magic:02x}, expected 0x{MAGIC:02x} "
            f"(header bytes {bytes(data[offset : offset + HEADER_SIZE]).hex()})"
        )
    if codec not in CODEC_NAMES:
        raise ProtocolViolation(
            f"{header_at(stream_offset)}: unknown codec {codec}, expected {CODEC_PICKLE} (pickle) or {CODEC_COLUMNAR} (typed columnar)"
        )
    if flags & ~_KNOWN_FLAGS:
        raise ProtocolViolation(
            f"{header_at(stream_offset)}: unknown flag bits 0x{flags & ~_KNOWN_FLAGS:02x} in flags 0x{flags:02x}"
        )
    if flags & FLAG_TIMESTAMPS_PACKED and not flags & FLAG_TIMESTAMPS:
        raise ProtocolViolation(
            f"{header_at(stream_offset)}: flags 0x{flags:02x} pack a timestamp column the frame does not have"
        )
    if pad != 0:
        raise ProtocolViolation(f"{header_at(stream_offset)}: pad byte is 0x{pad:02x}, expected 0x00")
    if length > MAX_PAYLOAD_BYTES:
        raise ProtocolViolation(
            f"{header_at(stream_offset)}: payload length {length} exceeds the {MAX_PAYLOAD_BYTES}-byte frame limit"
        )
    return FrameHeader(codec, flags, count, length)
