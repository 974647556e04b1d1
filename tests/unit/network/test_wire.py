"""The wire codec refuses every kind of malformed frame with a ProtocolViolation naming what it got."""

from __future__ import annotations

import re
import struct

import pytest

from weir.errors import ProtocolViolation, UsageError
from weir.network.events import Event, Watermark
from weir.network.transport import AddCredit, BufferResponse, EventResponse, PartitionRequest
from weir.network.wire import (
    ClientHello,
    WireCodec,
    client_proof,
    proofs_match,
    server_proof,
)

SEGMENT = 32 * 1024


def frame(message_id: int, fields: bytes) -> bytes:
    return struct.pack("!IB", 1 + len(fields), message_id) + fields


def refused(data: bytes) -> str:
    codec = WireCodec(SEGMENT, peer="taskmanager 'x'")
    with pytest.raises(ProtocolViolation) as caught:
        codec.feed(data)
    return str(caught.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (frame(99, b""), "unknown message id 99"),
        (struct.pack("!IB", 10_000_000, 5), "frame length 10000000 exceeds the maximum"),
        (struct.pack("!I", 0), "frame of length 0"),
        (frame(2, struct.pack("!I", 7)), "AddCredit truncated: 4 bytes of fields, expected 8"),
        (frame(3, struct.pack("!II", 7, 8)), "CancelPartitionRequest with 4 trailing bytes"),
        (frame(4, b"\x00"), "CloseRequest with 1 trailing bytes"),
        (frame(2, struct.pack("!II", 7, 0)), "AddCredit for receiver 7 with credit 0"),
        (frame(6, struct.pack("!IIB", 1, 0, 42)), "unknown event type 42"),
        (frame(6, struct.pack("!IIBB", 1, 0, 4, 2)), "WatermarkStatus idle flag 2"),
        (frame(6, struct.pack("!IIBqqB", 1, 0, 5, 1, 2, 8)), "CheckpointBarrier flags 0x08"),
        (frame(6, struct.pack("!IIBq", 1, 0, 3, 5) + b"!"), "Watermark with 1 trailing bytes"),
        (frame(1, struct.pack("!III", 1, 0, 2) + b"\xff\xfe"), "partition id is not UTF-8"),
        (frame(1, struct.pack("!III", 1, 0, 2)), "partition id of 0 bytes"),
        (frame(8, struct.pack("!IB", 1, 77) + b"boom"), "unknown error kind 77"),
        (frame(5, struct.pack("!II", 1, 0) + b"x" * (SEGMENT + 1)), "exceeds the maximum"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_malformed_frame_is_a_protocol_violation_naming_it(data: bytes, expected: str) -> None:
    message = refused(data)
    assert expected in message
    assert message.startswith("taskmanager 'x': ")


def test_a_buffer_larger_than_the_segments_is_refused_even_within_the_frame_limit() -> None:
    codec = WireCodec(1024)
    with pytest.raises(ProtocolViolation, match="exceeds the 1024-byte buffers"):
        codec.feed(frame(5, struct.pack("!II", 1, 0) + b"x" * 1025))


def test_each_side_decodes_only_what_the_other_side_sends() -> None:
    credit = WireCodec(SEGMENT).encode(AddCredit(1, 2))
    buffer = WireCodec(SEGMENT).encode(BufferResponse(1, memoryview(b"x"), 0))
    assert WireCodec(SEGMENT, accept="requests").feed(credit) == [AddCredit(1, 2)]
    with pytest.raises(
        ProtocolViolation, match=re.escape("sent a BufferResponse (message id 5), which only a server sends")
    ):
        WireCodec(SEGMENT, accept="requests").feed(buffer)
    with pytest.raises(
        ProtocolViolation, match=re.escape("sent a AddCredit (message id 2), which only a client sends")
    ):
        WireCodec(SEGMENT, accept="responses").feed(credit)
    with pytest.raises(UsageError, match="accept must be one of all, requests, responses"):
        WireCodec(SEGMENT, accept="both")


def test_a_violation_leaves_the_codec_broken() -> None:
    codec = WireCodec(SEGMENT)
    good = codec.encode(AddCredit(1, 2))
    with pytest.raises(ProtocolViolation):
        codec.feed(frame(99, b"") + good)
    with pytest.raises(ProtocolViolation, match="unknown message id 99"):
        codec.feed(good)  # nothing more is decoded from that peer


def test_many_frames_in_one_feed_and_one_frame_over_many() -> None:
    codec = WireCodec(SEGMENT)
    data = b"r" * SEGMENT
    stream = codec.encode(BufferResponse(3, memoryview(data), 9)) + codec.encode(
        EventResponse(3, Watermark(5), 8)
    )
    (only,) = codec.feed(stream[: len(stream) - 20])
    assert isinstance(only, BufferResponse) and bytes(only.data) == data and only.backlog == 9
    assert codec.feed(stream[len(stream) - 20 : len(stream) - 1]) == []
    assert codec.feed(stream[-1:]) == [EventResponse(3, Watermark(5), 8)]
    codec.end_of_stream()


def test_values_the_format_cannot_carry_are_the_callers_mistake() -> None:
    codec = WireCodec(SEGMENT)

    class Private(Event):
        pass

    with pytest.raises(UsageError, match="no wire encoding"):
        codec.encode(EventResponse(0, Private(), 0))
    with pytest.raises(UsageError, match="out of the wire's range"):
        codec.encode(PartitionRequest(0, "p", 0, -1))
    with pytest.raises(UsageError, match="partition id of 0 bytes"):
        codec.encode(PartitionRequest(0, "", 0, 1))
    with pytest.raises(UsageError, match="exceeds the wire's 16-byte buffers"):
        WireCodec(16).encode(BufferResponse(0, memoryview(b"x" * 17), 0))


def test_proofs_depend_on_the_secret_the_role_and_both_nonces() -> None:
    hello = ClientHello(b"c" * 32, "tm1")
    proof = server_proof(b"s" * 32, hello, b"n" * 32, "tm0")
    assert proofs_match(proof, server_proof(b"s" * 32, hello, b"n" * 32, "tm0"))
    assert not proofs_match(proof, server_proof(b"t" * 32, hello, b"n" * 32, "tm0"))
    assert not proofs_match(proof, server_proof(b"s" * 32, hello, b"m" * 32, "tm0"))
    assert not proofs_match(proof, client_proof(b"s" * 32, hello, b"n" * 32, "tm0"))
    assert not proofs_match(proof, server_proof(b"s" * 32, ClientHello(b"d" * 32, "tm1"), b"n" * 32, "tm0"))
