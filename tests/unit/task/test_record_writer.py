"""RecordWriter: the writers of one task serialize a batch they all send whole only once."""

from __future__ import annotations

from typing import Any

from weir.codec.batch import Batch
from weir.codec.serializers import serializer_for
from weir.common import Types
from weir.task.channel_selectors import FirstChannelSelector
from weir.task.record_writer import FrameCache, RecordWriter


class CountingSerializer:
    """A serializer that counts its whole-batch encodes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.encodes = 0

    def encode(self, batch: Batch) -> bytes:
        self.encodes += 1
        frame: bytes = self.inner.encode(batch)
        return frame


class FakePartition:
    num_subpartitions = 1

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    async def emit(self, channel: int, frame: bytes) -> None:
        self.frames.append(bytes(frame))


def writers(serializers: list[Any], cache: FrameCache) -> list[tuple[RecordWriter, FakePartition]]:
    out = []
    for serializer in serializers:
        partition = FakePartition()
        out.append(
            (RecordWriter(partition, FirstChannelSelector(), serializer, False, frames=cache), partition)
        )
    return out


async def test_a_batch_sent_on_two_outputs_of_one_type_is_encoded_once() -> None:
    serializer = CountingSerializer(serializer_for(Types.LONG()))
    pair = writers([serializer, serializer], FrameCache())
    batches = [Batch([1, 2, 3]), Batch([4, 5])]
    for batch in batches:
        for writer, _ in pair:
            writer.add(batch)
            await writer.drain()
    assert serializer.encodes == 2
    expected = [serializer.inner.encode(b) for b in batches]
    assert [p.frames for _, p in pair] == [expected, expected]


async def test_an_equal_batch_that_is_another_object_is_encoded_again() -> None:
    serializer = CountingSerializer(serializer_for(Types.LONG()))
    pair = writers([serializer, serializer], FrameCache())
    pair[0][0].add(Batch([1, 2, 3]))
    pair[1][0].add(Batch([1, 2, 3]))
    for writer, _ in pair:
        await writer.drain()
    assert serializer.encodes == 2


async def test_outputs_of_different_types_encode_with_their_own_serializer() -> None:
    longs = CountingSerializer(serializer_for(Types.LONG()))
    doubles = CountingSerializer(serializer_for(Types.DOUBLE()))
    (w1, p1), (w2, p2) = writers([longs, doubles], FrameCache())
    batch = Batch([1, 2, 3])
    for writer in (w1, w2):
        writer.add(batch)
        await writer.drain()
    assert (longs.encodes, doubles.encodes) == (1, 1)
    assert p1.frames == [longs.inner.encode(batch)]
    assert p2.frames == [doubles.inner.encode(batch)]
    assert p1.frames != p2.frames
