"""FrameReader: frames reassembled from arbitrary cuts of a channel's byte stream, and corrupt headers."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from weir.codec.batch import Batch
from weir.codec.frame import HEADER_SIZE, MAX_PAYLOAD_BYTES
from weir.codec.reader import FrameReader
from weir.codec.serializers import BatchSerializer, serializer_for
from weir.common.typeinfo import Types
from weir.errors import ProtocolViolation, UsageError

from .records import assert_same_batch

BUFFER_SIZE = 32 * 1024
TUPLE_TYPE = Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE()])


def _stream(serializer: BatchSerializer, batches: list[Batch]) -> bytes:
    return b"".join(serializer.encode(b) for b in batches)


def _assert_batches(expected: list[Batch], actual: list[Batch]) -> None:
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        assert_same_batch(e, a)


def _small_batches() -> list[Batch]:
    return [
        Batch([("a", 1, 0.5), ("日本\U0001f600", -2, float("inf"))], np.array([10, 20])),
        Batch([]),
        Batch([("", 3, -0.0)]),
        Batch([("x" * 40, 2**62, 1e300), ("y", 0, 2.0), ("z", 5, 3.0)], np.array([1, 2, 3])),
    ]


def test_one_frame_per_feed() -> None:
    serializer = serializer_for(TUPLE_TYPE)
    reader = FrameReader(serializer)
    for batch in _small_batches():
        (decoded,) = reader.feed(serializer.encode(batch))
        assert_same_batch(batch, decoded)
        assert not reader.has_partial


def test_many_frames_in_one_feed() -> None:
    serializer = serializer_for(TUPLE_TYPE)
    batches = _small_batches() * 25
    reader = FrameReader(serializer)
    _assert_batches(batches, reader.feed(_stream(serializer, batches)))
    assert not reader.has_partial
    stats = reader.statistics()
    assert (stats.frames, stats.records, stats.partial_bytes) == (100, 25 * 6, 0)


def test_a_stream_cut_at_every_byte_boundary_gives_the_same_batches() -> None:
    serializer = serializer_for(TUPLE_TYPE)
    batches = _small_batches()
    stream = _stream(serializer, batches)
    for cut in range(len(stream) + 1):
        reader = FrameReader(serializer)
        decoded = reader.feed(stream[:cut])
        assert reader.has_partial == (cut not in _frame_ends(serializer, batches))
        decoded += reader.feed(memoryview(stream)[cut:])
        _assert_batches(batches, decoded)
        assert not reader.has_partial


def _frame_ends(serializer: BatchSerializer, batches: list[Batch]) -> set[int]:
    ends, pos = {0}, 0
    for b in batches:
        pos += len(serializer.encode(b))
        ends.add(pos)
    return ends


def test_a_stream_cut_at_every_pair_of_boundaries_gives_the_same_batches() -> None:
    serializer = serializer_for(Types.STRING())
    batches = [Batch(["ab", "\U0001f600"]), Batch(["c"], np.array([7]))]
    stream = _stream(serializer, batches)
    for first in range(len(stream) + 1):
        for second in range(first, len(stream) + 1):
            reader = FrameReader(serializer)
            pieces = [stream[:first], stream[first:second], stream[second:]]
            decoded = [b for piece in pieces for b in reader.feed(piece)]
            _assert_batches(batches, decoded)


def test_a_stream_fed_byte_by_byte_gives_the_same_batches() -> None:
    for serializer, batches in [
        (serializer_for(TUPLE_TYPE), _small_batches()),
        (serializer_for(None), [Batch([1, "two", (3,)], np.array([1, 2, 3])), Batch([None])]),
        (serializer_for(Types.LONG()), [Batch(np.arange(5)), Batch([]), Batch([7], np.array([8]))]),
    ]:
        stream = _stream(serializer, batches)
        reader = FrameReader(serializer)
        decoded = [b for i in range(len(stream)) for b in reader.feed(stream[i : i + 1])]
        _assert_batches(batches, decoded)


def test_a_frame_larger_than_a_network_buffer_spans_many_buffers() -> None:
    serializer = serializer_for(TUPLE_TYPE)
    records = [(f"user-{i}-" + "é" * (i % 7), i * 3, i / 7) for i in range(20_000)]
    big = Batch(records, np.arange(len(records), dtype=np.int64))
    small = Batch([("tail", 1, 1.0)])
    stream = _stream(serializer, [small, big, small])
    assert len(serializer.encode(big)) > 10 * BUFFER_SIZE
    reader = FrameReader(serializer)
    decoded: list[Batch] = []
    partial_seen = []
    for start in range(0, len(stream), BUFFER_SIZE):
        decoded += reader.feed(memoryview(stream)[start : start + BUFFER_SIZE])
        partial_seen.append(reader.has_partial)
    _assert_batches([small, big, small], decoded)
    assert any(partial_seen) and not reader.has_partial


def test_a_reused_buffer_does_not_change_kept_or_decoded_bytes() -> None:
    serializer = serializer_for(Types.TUPLE([Types.STRING(), Types.LONG()]))
    batches = [Batch([("a" * 100, i)]) for i in range(5)]
    stream = _stream(serializer, batches)
    buffer = bytearray(50)
    reader = FrameReader(serializer)
    decoded: list[Batch] = []
    for start in range(0, len(stream), 50):
        piece = stream[start : start + 50]
        buffer[: len(piece)] = piece
        decoded += reader.feed(memoryview(buffer)[: len(piece)])
        buffer[:] = b"\xee" * 50  # the network layer recycles the buffer
    _assert_batches(batches, decoded)


def test_partial_frames_are_visible_in_statistics() -> None:
    serializer = serializer_for(Types.LONG())
    frame = serializer.encode(Batch([1, 2, 3]))
    reader = FrameReader(serializer)
    assert reader.feed(frame[:5]) == []
    assert reader.statistics().partial_bytes == 5 and reader.has_partial
    assert reader.feed(frame[5:20]) == []
    assert reader.statistics().partial_bytes == 20
    (batch,) = reader.feed(frame[20:])
    assert batch.as_list() == [1, 2, 3]
    assert reader.statistics().partial_bytes == 0
    assert reader.statistics().bytes_decoded == len(frame)


def test_an_empty_feed_is_harmless() -> None:
    reader = FrameReader(serializer_for(Types.LONG()))
    assert reader.feed(b"") == []
    assert not reader.has_partial


# -- corrupt streams ---------------------------------------------------------------------------------


def _header(
    magic: int = 0xB7, codec: int = 1, flags: int = 0, pad: int = 0, count: int = 1, length: int = 9
) -> bytes:
    return struct.pack("<BBBBII", magic, codec, flags, pad, count, length)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (_header(magic=0x00), "frame header at stream byte 0: bad magic byte 0x00, expected 0xb7"),
        (b"GET / HTTP/1.1", "bad magic byte 0x47, expected 0xb7 (header bytes 474554202f20485454502f31)"),
        (_header(codec=7), "unknown codec 7, expected 0 (pickle) or 1 (typed columnar)"),
        (_header(flags=0x10), "unknown flag bits 0x10 in flags 0x10"),
        (_header(pad=3), "pad byte is 0x03, expected 0x00"),
        (_header(length=MAX_PAYLOAD_BYTES + 1), f"payload length {MAX_PAYLOAD_BYTES + 1} exceeds the"),
        (_header(length=2**32 - 1), "payload length 4294967295 exceeds the 1073741824-byte frame limit"),
        (
            _header(count=10**9, length=100),
            # a LONG may be packed down to one byte
            "1000000000 records need at least 1 byte each, but the payload length is 100",
        ),
        (_header(codec=0), "codec 0 (pickle), but this channel carries typed columnar Types.LONG()"),
        (_header(flags=2), "row-kind flag set on a stream of Types.LONG()"),
    ],
)
def test_a_corrupt_header_is_a_protocol_violation(header: bytes, message: str) -> None:
    serializer = serializer_for(Types.LONG())
    with pytest.raises(ProtocolViolation, match=re.escape(message)):
        FrameReader(serializer).feed(header)
    # The same header cut in two: detected as soon as its 12 bytes are there.
    reader = FrameReader(serializer)
    assert reader.feed(header[:5]) == []
    with pytest.raises(ProtocolViolation, match=re.escape(message)):
        reader.feed(header[5:])


def test_a_corrupt_header_after_good_frames_names_its_stream_offset() -> None:
    serializer = serializer_for(Types.LONG())
    good = serializer.encode(Batch([1, 2]))
    stream = good + good + _header(magic=0x42) + b"\x00" * 20
    with pytest.raises(
        ProtocolViolation, match=f"frame header at stream byte {2 * len(good)}: bad magic byte 0x42"
    ):
        FrameReader(serializer).feed(stream)
    reader = FrameReader(serializer)
    assert len(reader.feed(stream[: len(good) + 3])) == 1
    with pytest.raises(ProtocolViolation, match=f"at stream byte {2 * len(good)}"):
        reader.feed(stream[len(good) + 3 :])


def test_a_pickle_reader_rejects_columnar_frames() -> None:
    frame = serializer_for(Types.LONG()).encode(Batch([1]))
    with pytest.raises(
        ProtocolViolation, match=re.escape("codec 1 (typed columnar), but this channel carries pickle")
    ):
        FrameReader(serializer_for(None)).feed(frame)


def test_a_header_is_checked_before_its_payload_is_buffered() -> None:
    reader = FrameReader(serializer_for(None))
    with pytest.raises(ProtocolViolation, match="exceeds the 1073741824-byte frame limit"):
        reader.feed(_header(codec=0, length=2**31))


def test_frame_reader_needs_a_serializer() -> None:
    with pytest.raises(UsageError, match="FrameReader needs a BatchSerializer"):
        FrameReader(Types.LONG())  # type: ignore[arg-type]


def test_header_size_is_twelve_bytes() -> None:
    assert HEADER_SIZE == 12
