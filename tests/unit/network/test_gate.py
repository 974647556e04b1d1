"""InputGate and its channels: round robin, end of partition, credit of remote channels."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from weir.errors import ProtocolViolation, UsageError
from weir.network.buffer import BufferOrEvent
from weir.network.buffer_pool import LocalBufferPool, NetworkBufferPool
from weir.network.errors import PartitionReleased
from weir.network.events import EndOfPartition, Watermark
from weir.network.gate import InputGate, LocalInputChannel, RemoteInputChannel
from weir.network.partition import ResultPartition
from weir.network.transport import (
    AddCredit,
    BacklogAnnouncement,
    CancelPartitionRequest,
    Connection,
    PartitionRequest,
    PartitionRequestClient,
)

SEG = 16


def producer(num_subpartitions: int) -> ResultPartition:
    network = NetworkBufferPool(64 * SEG, SEG)
    return ResultPartition("p", num_subpartitions, network.create_buffer_pool(num_subpartitions + 1, 16))


def local_gate(partition: ResultPartition) -> InputGate:
    channels = [
        LocalInputChannel(i, "p", i, view=partition.create_subpartition_view(i))
        for i in range(partition.num_subpartitions)
    ]
    gate = InputGate(0, channels)
    gate.request_partitions()
    return gate


def test_round_robin_over_channels_with_data() -> None:
    partition = producer(3)
    gate = local_gate(partition)
    for sub in range(3):
        partition.emit_nowait(sub, bytes([sub]) * (2 * SEG))
    order = []
    while (item := gate.poll_next()) is not None:
        order.append(item.channel_index)
        item.recycle()
    assert order == [0, 1, 2, 0, 1, 2]


def test_end_of_partition_then_none() -> None:
    partition = producer(2)
    gate = local_gate(partition)
    partition.emit_nowait(0, b"a")
    partition.finish_nowait()
    items = []
    while (item := gate.poll_next()) is not None:
        items.append((item.channel_index, bytes(item.data) if item.data is not None else item.event))
        item.recycle()
    assert sorted(items, key=repr) == sorted(
        [(0, b"a"), (0, EndOfPartition()), (1, EndOfPartition())], key=repr
    )
    assert gate.is_finished
    assert items.index((0, b"a")) < items.index((0, EndOfPartition()))


async def test_get_next_parks_until_data_and_returns_none_at_the_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    partition = producer(1)
    gate = local_gate(partition)
    got: list[tuple[float, object]] = []

    async def consumer() -> None:
        while (item := await gate.get_next()) is not None:
            got.append((trio.current_time(), bytes(item.data) if item.data is not None else item.event))
            item.recycle()
        got.append((trio.current_time(), None))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.sleep(1)
        partition.emit_nowait(0, b"x")
        partition.flush(0)
        await trio.sleep(1)
        await partition.finish()
    assert got == [(1, b"x"), (2, EndOfPartition()), (2, None)]


async def test_get_next_is_cancellable_while_waiting(autojump_clock: trio.testing.MockClock) -> None:
    partition = producer(1)
    gate = local_gate(partition)
    with trio.move_on_after(5) as scope:
        await gate.get_next()
    assert scope.cancelled_caught


def test_a_gate_without_channels_is_finished() -> None:
    assert InputGate(0, []).is_finished


def test_channel_indices_must_match_positions() -> None:
    partition = producer(1)
    with pytest.raises(UsageError, match="expected 0"):
        InputGate(0, [LocalInputChannel(1, "p", 0, view=partition.create_subpartition_view(0))])


def test_a_released_partition_fails_the_read() -> None:
    partition = producer(1)
    gate = local_gate(partition)
    partition.release()
    with pytest.raises(PartitionReleased):
        gate.poll_next()


def test_close_releases_local_views() -> None:
    partition = producer(1)
    gate = local_gate(partition)
    partition.emit_nowait(0, b"y" * 40)
    gate.close()
    assert partition.buffer_pool.used == 0
    with pytest.raises(UsageError, match="after close"):
        gate.poll_next()


# --- remote channels, driven by hand through a real client on a connection -------------------


def remote_gate(
    num_channels: int = 1, floating: int = 2, exclusive: int = 2
) -> tuple[InputGate, Connection, LocalBufferPool]:
    connection = Connection("consumer-tm", "producer-tm")
    client = PartitionRequestClient(connection)
    network = NetworkBufferPool(64 * SEG, SEG)
    pool = network.create_buffer_pool(num_channels * exclusive, num_channels * exclusive + floating)
    channels = [RemoteInputChannel(i, "p", i, client, exclusive) for i in range(num_channels)]
    gate = InputGate(0, channels, pool)
    gate.request_partitions()
    return gate, connection, pool


def test_exclusive_buffers_are_sent_as_initial_credit() -> None:
    _gate, connection, pool = remote_gate(num_channels=2)
    assert connection.take_server_messages() == [
        PartitionRequest(0, "p", 0, initial_credit=2),
        PartitionRequest(1, "p", 1, initial_credit=2),
    ]
    assert pool.used == 4


def test_backlog_borrows_floating_buffers_and_announces_them() -> None:
    gate, connection, _pool = remote_gate(floating=2)
    connection.take_server_messages()
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_buffer(memoryview(b"abc"), backlog=5)
    # free: one exclusive; backlog 5 wants 4 floating, the pool lends 2
    assert connection.take_server_messages() == [AddCredit(0, 2)]
    stats = gate.statistics().channels[0]
    assert (stats.credit, stats.floating_buffers, stats.backlog, stats.queued_buffers) == (3, 2, 5, 1)
    item = gate.poll_next()
    assert item is not None and bytes(item.data or b"") == b"abc" and item.channel_index == 0
    item.recycle()  # an exclusive buffer: announced again
    assert connection.take_server_messages() == [AddCredit(0, 1)]


def test_floating_buffers_go_to_waiting_channels_when_recycled() -> None:
    gate, connection, _pool = remote_gate(num_channels=2, floating=1)
    connection.take_server_messages()
    first, second = gate.channels
    assert isinstance(first, RemoteInputChannel) and isinstance(second, RemoteInputChannel)
    first.on_buffer(memoryview(b"1"), backlog=3)  # takes the one floating buffer
    first.on_buffer(memoryview(b"2"), backlog=3)  # floating first
    second.on_buffer(memoryview(b"3"), backlog=4)  # nothing left: waits
    assert connection.take_server_messages() == [AddCredit(0, 1)]
    items = []
    while (item := gate.poll_next()) is not None:
        items.append(item)
    assert [(i.channel_index, bytes(i.data or b"")) for i in items] == [(0, b"1"), (1, b"3"), (0, b"2")]
    floating_item = items[2]
    first.credit.on_backlog(0)  # the first channel wants only its initial credit free again
    items[0].recycle()  # its exclusive buffer: free again and announced
    assert connection.take_server_messages() == [AddCredit(0, 1)]
    floating_item.recycle()  # no longer wanted: back to the pool, where the second one waits
    assert connection.take_server_messages() == [AddCredit(1, 1)]
    assert gate.statistics().channels[1].floating_buffers == 1


def test_a_recycled_exclusive_buffer_keeps_its_segment_and_gives_back_a_floating_one() -> None:
    gate, connection, pool = remote_gate(floating=2)
    connection.take_server_messages()
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_buffer(memoryview(b"1"), backlog=0)  # an exclusive buffer is being read...
    assert connection.take_server_messages() == [AddCredit(0, 1)]  # ...so a floating one stands in
    assert pool.used == 3
    item = gate.poll_next()
    assert item is not None
    item.recycle()  # three free buffers where two are wanted: the floating one goes back
    assert connection.take_server_messages() == []
    assert pool.used == 2
    stats = gate.statistics().channels[0]
    assert (stats.exclusive_buffers, stats.floating_buffers, stats.credit) == (2, 0, 2)
    # the segment the pool got back is not one the channel still counts as its own
    mine = {id(s) for s in channel.credit._exclusive_free}
    assert len(mine) == 2
    lent = pool.request_buffer_nowait()
    assert id(lent.segment) not in mine


def test_an_announced_backlog_borrows_floating_buffers_without_data() -> None:
    gate, connection, _pool = remote_gate(floating=8)
    connection.take_server_messages()
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_buffer(memoryview(b"1"), backlog=0)
    channel.on_buffer(memoryview(b"2"), backlog=0)  # both exclusive buffers being read
    # two floating buffers take their place: the initial credit stays free
    assert connection.take_server_messages() == [AddCredit(0, 1), AddCredit(0, 1)]
    assert connection.client is not None
    connection.client.on_message(BacklogAnnouncement(0, 5))
    connection.client.on_message(BacklogAnnouncement(9, 5))  # an unknown receiver: ignored
    assert connection.take_server_messages() == [AddCredit(0, 5)]
    stats = gate.statistics().channels[0]
    assert (stats.credit, stats.floating_buffers, stats.backlog, stats.queued_buffers) == (7, 7, 5, 2)
    channel.on_sender_backlog(5)  # already covered
    assert connection.take_server_messages() == []
    assert [bytes(i.data or b"") for i in iter(gate.poll_next, None)] == [b"1", b"2"]  # no item for it


def test_an_announced_backlog_waits_for_the_pool_like_a_piggybacked_one() -> None:
    gate, connection, pool = remote_gate(num_channels=2, floating=1)
    connection.take_server_messages()
    first, second = gate.channels
    assert isinstance(first, RemoteInputChannel) and isinstance(second, RemoteInputChannel)
    first.on_sender_backlog(3)  # 2 free of 5 wanted (3 + initial credit): takes the floating one
    second.on_sender_backlog(4)  # nothing left in the pool: waits
    assert connection.take_server_messages() == [AddCredit(0, 1)]
    assert pool.used == pool.limit
    first.on_buffer(memoryview(b"a"), backlog=0)  # into the floating buffer (floating first)
    item = gate.poll_next()
    assert item is not None
    item.recycle()  # the first channel no longer wants it: it goes to the waiting one
    assert connection.take_server_messages() == [AddCredit(1, 1)]


def test_a_negative_announced_backlog_fails_the_channel() -> None:
    gate, _connection, _pool = remote_gate()
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_sender_backlog(-1)
    with pytest.raises(ProtocolViolation, match="backlog must not be negative"):
        gate.poll_next()


def test_a_buffer_beyond_credit_fails_the_channel() -> None:
    gate, _connection, _pool = remote_gate(floating=0, exclusive=1)
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_buffer(memoryview(b"a"), backlog=0)
    channel.on_buffer(memoryview(b"b"), backlog=0)
    item = gate.poll_next()
    assert item is not None
    with pytest.raises(ProtocolViolation, match="without credit"):
        gate.poll_next()


def test_events_take_no_credit() -> None:
    gate, _connection, _pool = remote_gate(floating=0, exclusive=1)
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    for ts in range(5):
        channel.on_event(BufferOrEvent(event=Watermark(ts)))
    events = []
    while (item := gate.poll_next()) is not None:
        events.append(item.event)
    assert events == [Watermark(ts) for ts in range(5)]


def test_close_returns_every_buffer_and_cancels_the_request() -> None:
    gate, connection, pool = remote_gate(floating=2)
    connection.take_server_messages()
    channel = gate.channels[0]
    assert isinstance(channel, RemoteInputChannel)
    channel.on_buffer(memoryview(b"a"), backlog=3)
    channel.on_buffer(memoryview(b"b"), backlog=3)
    held = gate.poll_next()
    assert held is not None
    network = pool.network_pool
    gate.close()
    assert CancelPartitionRequest(0) in connection.take_server_messages()
    assert network.available_segments == network.total_segments - 1  # the one the task still holds
    held.recycle()
    assert network.available_segments == network.total_segments


def test_remote_channels_need_a_pool() -> None:
    connection = Connection("a", "b")
    client = PartitionRequestClient(connection)
    with pytest.raises(UsageError, match="needs a buffer pool"):
        InputGate(0, [RemoteInputChannel(0, "p", 0, client, 2)])


def test_exclusive_buffers_wait_for_a_busy_global_pool() -> None:
    connection = Connection("a", "b")
    client = PartitionRequestClient(connection)
    network = NetworkBufferPool(2 * SEG, SEG)
    other = network.create_buffer_pool(0, 2)
    held = [other.request_buffer_nowait() for _ in range(2)]
    pool = network.create_buffer_pool(2, 2)  # other's limit shrinks to 0, but it holds both
    gate = InputGate(0, [RemoteInputChannel(0, "p", 0, client, 2)], pool)
    gate.request_partitions()
    assert connection.take_server_messages() == [PartitionRequest(0, "p", 0, 0)]
    held[0].recycle()
    assert connection.take_server_messages() == [AddCredit(0, 1)]
    held[1].recycle()
    assert connection.take_server_messages() == [AddCredit(0, 1)]
