"""Buffer: appending, slicing, reference counting; BufferOrEvent: recycle exactly once."""

from __future__ import annotations

import pytest

from weir.errors import ProtocolViolation
from weir.network.buffer import Buffer, BufferOrEvent
from weir.network.events import EndOfPartition


class Recycler:
    def __init__(self) -> None:
        self.segments: list[bytearray] = []

    def recycle_segment(self, segment: bytearray) -> None:
        self.segments.append(segment)


def test_append_copies_what_fits_and_reports_it() -> None:
    buffer = Buffer(bytearray(8), Recycler())
    assert buffer.writable_bytes == 8
    assert buffer.append(b"abc") == 3
    assert buffer.append(b"defghijk") == 5
    assert buffer.size == 8 and buffer.writable_bytes == 0
    assert buffer.append(b"x") == 0
    assert bytes(buffer.view()) == b"abcdefgh"
    assert bytes(buffer.view(2, 5)) == b"cde"


def test_append_accepts_memoryviews() -> None:
    buffer = Buffer(bytearray(4), Recycler())
    assert buffer.append(memoryview(b"123456")[1:]) == 4
    assert bytes(buffer.view()) == b"2345"


def test_views_are_read_only_slices_of_the_segment() -> None:
    buffer = Buffer(bytearray(4), Recycler())
    buffer.append(b"ab")
    view = buffer.view()
    with pytest.raises(TypeError):
        view[0] = 1  # type: ignore[index]
    buffer.append(b"cd")
    assert bytes(view) == b"ab"  # a slice covers what was written when it was taken


def test_the_last_reference_returns_the_segment() -> None:
    recycler = Recycler()
    segment = bytearray(4)
    buffer = Buffer(segment, recycler)
    buffer.retain()
    assert buffer.reference_count == 2
    buffer.recycle()
    assert recycler.segments == []
    buffer.recycle()
    assert recycler.segments == [segment]
    assert buffer.is_recycled


def test_recycling_a_dead_buffer_is_a_protocol_violation() -> None:
    buffer = Buffer(bytearray(4), Recycler())
    buffer.recycle()
    with pytest.raises(ProtocolViolation, match="recycled again"):
        buffer.recycle()
    with pytest.raises(ProtocolViolation, match="append after"):
        buffer.append(b"x")
    with pytest.raises(ProtocolViolation, match="retained after"):
        buffer.retain()
    with pytest.raises(ProtocolViolation, match="read after"):
        buffer.view()


def test_buffer_or_event_recycles_its_reference_once() -> None:
    recycler = Recycler()
    buffer = Buffer(bytearray(4), recycler)
    buffer.append(b"ab")
    item = BufferOrEvent(buffer.view(), backlog=3, buffer=buffer, channel_index=1)
    assert item.is_buffer and not item.is_event and item.size == 2 and item.backlog == 3
    item.recycle()
    assert len(recycler.segments) == 1
    with pytest.raises(ProtocolViolation, match="channel 1: recycled twice"):
        item.recycle()


def test_event_items_have_no_data() -> None:
    item = BufferOrEvent(event=EndOfPartition())
    assert item.is_event and item.size == 0 and item.data is None
    item.recycle()
    assert item.is_recycled


def test_buffer_or_event_needs_exactly_one_of_data_and_event() -> None:
    with pytest.raises(ProtocolViolation):
        BufferOrEvent()
    with pytest.raises(ProtocolViolation):
        BufferOrEvent(memoryview(b"x"), EndOfPartition())
