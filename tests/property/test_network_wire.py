"""The TCP transport's wire codec: every message survives a round trip, however the stream is cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from weir.errors import ProtocolViolation, UsageError
from weir.network.errors import ConnectionClosed, NetworkError, PartitionReleased
from weir.network.events import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfData,
    EndOfPartition,
    Watermark,
    WatermarkStatus,
)
from weir.network.transport import (
    AddCredit,
    BacklogAnnouncement,
    BufferResponse,
    CancelPartitionRequest,
    CloseRequest,
    ErrorResponse,
    EventResponse,
    PartitionRequest,
)
from weir.network.wire import Message, WireCodec

SEGMENT = 32 * 1024
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)

events = st.one_of(
    st.just(EndOfPartition()),
    st.just(EndOfData()),
    st.builds(Watermark, i64),
    st.builds(WatermarkStatus, st.booleans()),
    st.builds(CheckpointBarrier, i64, i64, st.booleans(), st.booleans(), st.booleans()),
    st.builds(CancelCheckpointMarker, i64),
)
errors = st.builds(
    lambda cls, text: cls(text),
    st.sampled_from([ProtocolViolation, PartitionReleased, ConnectionClosed, UsageError, NetworkError]),
    st.text(max_size=200),
)
partition_ids = st.text(min_size=1, max_size=100).filter(lambda s: 1 <= len(s.encode()) <= 1024)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(PartitionRequest, u32, partition_ids, u32, u32),
    st.builds(AddCredit, u32, st.integers(1, 2**32 - 1)),
    st.builds(CancelPartitionRequest, u32),
    st.just(CloseRequest()),
    st.builds(lambda r, d, b: BufferResponse(r, memoryview(d), b), u32, st.binary(max_size=SEGMENT), u32),
    st.builds(EventResponse, u32, events, u32),
    st.builds(BacklogAnnouncement, u32, u32),
    st.builds(ErrorResponse, u32, errors),
)


def comparable(message: Message) -> tuple[object, ...]:
    if isinstance(message, BufferResponse):
        return (BufferResponse, message.receiver_id, bytes(message.data), message.backlog)
    if isinstance(message, ErrorResponse):
        return (ErrorResponse, message.receiver_id, type(message.error), str(message.error))
    return (message,)


@given(st.lists(messages, max_size=12), st.lists(st.integers(1, 40_000), max_size=30))
def test_every_message_round_trips_however_the_stream_is_cut(batch: list[Message], cuts: list[int]) -> None:
    codec = WireCodec(SEGMENT)
    stream = b"".join(codec.encode(m) for m in batch)
    received: list[Message] = []
    pos = 0
    for cut in cuts:
        received += codec.feed(stream[pos : pos + cut])
        pos += cut
    received += codec.feed(stream[pos:])
    codec.end_of_stream()  # nothing left over
    assert [comparable(m) for m in received] == [comparable(m) for m in batch]


@given(messages)
def test_a_frame_cut_anywhere_is_truncated_at_the_end_of_the_stream(message: Message) -> None:
    frame = WireCodec(SEGMENT).encode(message)
    for cut in {1, 3, 4, 5, len(frame) - 1}:
        if 0 < cut < len(frame):
            codec = WireCodec(SEGMENT)
            assert codec.feed(frame[:cut]) == []
            try:
                codec.end_of_stream()
            except ProtocolViolation as error:
                assert "truncated" in str(error)
            else:
                raise AssertionError(f"a frame cut at {cut} of {len(frame)} bytes went unnoticed")
