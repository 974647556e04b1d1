"""ResultPartition: buffers in the queue while written, flush without finishing, events behind data."""

from __future__ import annotations

import numpy as np
import pytest
import trio
import trio.testing

from weir.errors import ProtocolViolation, UsageError
from weir.network.buffer_pool import NetworkBufferPool, WouldBlock
from weir.network.errors import PartitionReleased
from weir.network.events import CheckpointBarrier, EndOfPartition, Watermark
from weir.network.partition import ResultPartition, SubpartitionView

SEG = 16


def make_partition(
    num_subpartitions: int = 1, buffers: int = 8, blocking: bool = False, total: int = 64
) -> ResultPartition:
    network = NetworkBufferPool(total * SEG, SEG)
    pool = network.create_buffer_pool(min(buffers, num_subpartitions + 1), buffers)
    return ResultPartition("p", num_subpartitions, pool, blocking=blocking)


def drain(view: SubpartitionView) -> list[bytes | object]:
    """Everything consumable now: bytes for data, the event object for events (recycling each)."""
    out: list[bytes | object] = []
    while (item := view.poll_next()) is not None:
        out.append(bytes(item.data) if item.data is not None else item.event)
        item.recycle()
    return out


def test_bytes_are_invisible_until_flushed() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"abc")
    assert not view.is_available() and view.poll_next() is None
    partition.flush(0)
    assert view.is_available()
    assert drain(view) == [b"abc"]


def test_a_flushed_buffer_stays_in_the_queue_and_keeps_filling() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"abc")
    partition.flush(0)
    first = view.poll_next()
    assert first is not None and bytes(first.data or b"") == b"abc"
    partition.emit_nowait(0, b"def")
    assert view.poll_next() is None  # written after the flush: invisible
    partition.flush(0)
    second = view.poll_next()
    assert second is not None and bytes(second.data or b"") == b"def"  # continues from the reader index
    assert partition.statistics().buffers_requested == 1
    assert bytes(first.data or b"") == b"abc"  # earlier slices stay valid
    first.recycle()
    second.recycle()
    assert partition.buffer_pool.used == 1  # still the buffer being written


def test_a_full_buffer_becomes_consumable_without_a_flush() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"x" * SEG)
    assert drain(view) == [b"x" * SEG]
    assert partition.buffer_pool.used == 0


def test_items_may_span_many_buffers() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    data = bytes(range(100))
    partition.emit_nowait(0, data)
    got = drain(view)
    assert got == [data[i : i + SEG] for i in range(0, 96, SEG)]  # the tail waits for a flush
    partition.flush(0)
    assert drain(view) == [data[96:]]


def test_emit_nowait_is_all_or_nothing() -> None:
    partition = make_partition(buffers=2)
    partition.emit_nowait(0, b"a" * 20)  # two buffers
    with pytest.raises(WouldBlock):
        partition.emit_nowait(0, b"b" * 20)  # 12 fit, the rest needs a third buffer
    assert partition.statistics().subpartitions[0].bytes_written == 20
    partition.emit_nowait(0, b"c" * 12)  # exactly what still fits


def test_an_event_finishes_the_buffer_and_queues_behind_it() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"abc")
    barrier = CheckpointBarrier(checkpoint_id=7, timestamp=1)
    partition.emit_event_nowait(0, barrier)
    assert view.next_is_event() is False
    assert drain(view) == [b"abc", barrier]
    partition.emit_nowait(0, b"def")  # a new buffer
    assert partition.statistics().buffers_requested == 2


def test_an_event_after_everything_was_read_recycles_the_empty_tail() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"abc")
    partition.flush(0)
    assert drain(view) == [b"abc"]
    partition.emit_event_nowait(0, Watermark(5))
    assert view.next_is_event()
    assert drain(view) == [Watermark(5)]
    assert partition.buffer_pool.used == 0


def test_backlog_counts_buffers_with_consumable_bytes() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"x" * (3 * SEG + 1))
    assert view.backlog == 3  # three full buffers; the fourth is unflushed
    partition.flush(0)
    assert view.backlog == 4
    item = view.poll_next()
    assert item is not None and item.backlog == 3
    item.recycle()


def test_finish_broadcasts_end_of_partition() -> None:
    partition = make_partition(num_subpartitions=2)
    views = [partition.create_subpartition_view(i) for i in range(2)]
    partition.emit_nowait(1, b"z")
    partition.finish_nowait()
    assert drain(views[0]) == [EndOfPartition()]
    assert drain(views[1]) == [b"z", EndOfPartition()]
    with pytest.raises(UsageError, match="write after it was finished"):
        partition.emit_nowait(0, b"late")


def test_one_view_per_pipelined_subpartition() -> None:
    partition = make_partition()
    partition.create_subpartition_view(0)
    with pytest.raises(ProtocolViolation, match="already has a consumer"):
        partition.create_subpartition_view(0)
    with pytest.raises(UsageError, match="out of range"):
        partition.create_subpartition_view(1)


def test_a_released_view_drops_data_and_later_writes() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"x" * 40)
    view.release()
    assert partition.buffer_pool.used == 0
    partition.emit_nowait(0, b"y" * 40)
    assert partition.buffer_pool.used == 0


def test_a_segment_returns_only_when_every_slice_is_recycled() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"ab")
    partition.flush(0)
    first = view.poll_next()
    partition.emit_nowait(0, b"c" * (SEG - 2))  # fills and finishes the buffer
    second = view.poll_next()
    assert first is not None and second is not None
    assert partition.buffer_pool.used == 1
    second.recycle()
    assert partition.buffer_pool.used == 1
    first.recycle()
    assert partition.buffer_pool.used == 0


def test_release_recycles_queued_buffers_and_readers_see_it() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    woken: list[bool] = []
    view.set_availability_listener(lambda: woken.append(True))
    partition.emit_nowait(0, b"x" * 40)
    partition.release()
    assert woken and partition.buffer_pool.used == 0
    assert view.is_available()
    with pytest.raises(PartitionReleased, match="'p' was released"):
        view.poll_next()
    with pytest.raises(UsageError, match="released"):
        partition.emit_nowait(0, b"x")


def test_listener_is_called_when_data_becomes_consumable() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    calls: list[int] = []
    view.set_availability_listener(lambda: calls.append(1))
    partition.emit_nowait(0, b"a")
    assert calls == []
    partition.flush(0)
    assert calls == [1]
    partition.flush(0)  # nothing new: no call
    assert calls == [1]
    partition.emit_event_nowait(0, Watermark(1))
    assert len(calls) >= 2


def test_blocking_partition_is_readable_only_after_finish() -> None:
    partition = make_partition(num_subpartitions=2, blocking=True, buffers=3)
    with pytest.raises(ProtocolViolation, match="before the partition finished"):
        partition.create_subpartition_view(0)
    for _ in range(10):  # far more than the pool: the producer never waits on a consumer
        partition.emit_nowait(0, b"q" * SEG)
    partition.emit_nowait(1, b"tail")
    assert partition.buffer_pool.used == 1  # only the buffer being written
    partition.finish_nowait()
    assert partition.buffer_pool.used == 0
    first = partition.create_subpartition_view(0)
    again = partition.create_subpartition_view(0)
    assert first.backlog == 10
    assert drain(first) == [b"q" * SEG] * 10 + [EndOfPartition()]
    assert drain(again) == [b"q" * SEG] * 10 + [EndOfPartition()]
    assert drain(partition.create_subpartition_view(1)) == [b"tail", EndOfPartition()]


def test_memoryviews_of_other_formats_count_bytes() -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    array = np.arange(3, dtype=np.int64)
    partition.emit_nowait(0, memoryview(array))
    partition.flush(0)
    assert b"".join(x for x in drain(view) if isinstance(x, bytes)) == array.tobytes()


def test_statistics() -> None:
    partition = make_partition(num_subpartitions=2)
    partition.create_subpartition_view(0)
    partition.emit_nowait(0, b"x" * 20)
    partition.flush(0)
    partition.emit_nowait(0, b"y")
    stats = partition.statistics()
    sub = stats.subpartitions[0]
    assert (sub.queued_buffers, sub.backlog, sub.bytes_written, sub.bytes_flushed) == (2, 2, 21, 20)
    assert stats.buffers_emitted == 1 and stats.buffers_requested == 2
    assert stats.pool.used == 2


async def test_emit_waits_for_a_recycled_buffer(autojump_clock: trio.testing.MockClock) -> None:
    partition = make_partition(buffers=2)
    view = partition.create_subpartition_view(0)
    await partition.emit(0, b"a" * (2 * SEG))
    done = trio.Event()

    async def writer() -> None:
        await partition.emit(0, b"b")
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await trio.sleep(1.5)
        assert not done.is_set()
        assert partition.statistics().backpressured_since is not None
        item = view.poll_next()
        assert item is not None
        item.recycle()
        await done.wait()
    stats = partition.statistics()
    assert stats.backpressured_time_s == pytest.approx(1.5)
    assert stats.backpressured_since is None


async def test_a_cancelled_emit_takes_no_buffer(autojump_clock: trio.testing.MockClock) -> None:
    partition = make_partition(buffers=2)
    await partition.emit(0, b"a" * (2 * SEG))
    with trio.move_on_after(1):
        await partition.emit(0, b"b")
    assert partition.buffer_pool.used == 2
    assert partition.buffer_pool.network_pool._waiting == {}


async def test_async_events_and_finish() -> None:
    partition = make_partition(num_subpartitions=2)
    views = [partition.create_subpartition_view(i) for i in range(2)]
    await partition.broadcast_emit(b"hi")
    await partition.broadcast_event(Watermark(3))
    await partition.emit_event(0, Watermark(4))
    await partition.finish()
    assert drain(views[0]) == [b"hi", Watermark(3), Watermark(4), EndOfPartition()]
    assert drain(views[1]) == [b"hi", Watermark(3), EndOfPartition()]


async def test_wait_available_parks_until_a_flush(autojump_clock: trio.testing.MockClock) -> None:
    partition = make_partition()
    view = partition.create_subpartition_view(0)
    seen: list[float] = []

    async def reader() -> None:
        await view.wait_available()
        seen.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(2)
        partition.emit_nowait(0, b"a")
        await trio.sleep(1)
        partition.flush(0)
    assert seen == [pytest.approx(3)]
