"""The connection's server core: credit per channel, events without credit, round robin, errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing

from weir.errors import ProtocolViolation
from weir.network.buffer_pool import NetworkBufferPool
from weir.network.errors import ConnectionClosed, PartitionReleased
from weir.network.events import EndOfPartition, Watermark
from weir.network.partition import ResultPartition, SubpartitionView
from weir.network.transport import (
    AddCredit,
    BacklogAnnouncement,
    BufferResponse,
    CancelPartitionRequest,
    CloseRequest,
    Connection,
    ErrorResponse,
    EventResponse,
    PartitionRequest,
    PartitionRequestClient,
    PartitionRequestServer,
)

SEG = 16


class Provider:
    """Partitions by id; requests for unknown ids wait until ``add``."""

    def __init__(self) -> None:
        self.partitions: dict[str, ResultPartition] = {}
        self.pending: list[tuple[str, int, Callable[[SubpartitionView], None]]] = []

    def add(self, partition: ResultPartition) -> None:
        self.partitions[partition.partition_id] = partition
        for pid, index, on_view in list(self.pending):
            if pid == partition.partition_id:
                self.pending.remove((pid, index, on_view))
                on_view(partition.create_subpartition_view(index))

    def request_subpartition_view(
        self,
        partition_id: str,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> Callable[[], None]:
        partition = self.partitions.get(partition_id)
        if partition is None:
            self.pending.append((partition_id, subpartition_index, on_view))
        else:
            on_view(partition.create_subpartition_view(subpartition_index))
        return lambda: None


def partition(pid: str = "p", subpartitions: int = 2) -> ResultPartition:
    network = NetworkBufferPool(64 * SEG, SEG)
    return ResultPartition(pid, subpartitions, network.create_buffer_pool(subpartitions + 1, 32))


def server() -> tuple[PartitionRequestServer, Provider]:
    provider = Provider()
    return PartitionRequestServer(Connection("client", "server"), provider), provider


def responses(srv: PartitionRequestServer) -> list[tuple[int, object]]:
    out: list[tuple[int, object]] = []
    while (message := srv.poll_response()) is not None:
        if isinstance(message, BufferResponse):
            out.append((message.receiver_id, bytes(message.data)))
            message.release()
        elif isinstance(message, EventResponse):
            out.append((message.receiver_id, message.event))
        elif isinstance(message, BacklogAnnouncement):
            out.append((message.receiver_id, message))
        else:
            out.append((message.receiver_id, type(message.error)))
    return out


def test_buffers_are_sent_only_with_credit() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(7, "p", 0, initial_credit=1))
    p.emit_nowait(0, b"a" * (3 * SEG))
    assert responses(srv) == [(7, b"a" * SEG)]
    srv.on_message(AddCredit(7, 5))
    assert responses(srv) == [(7, b"a" * SEG), (7, b"a" * SEG)]
    assert srv._readers[7].ledger.available == 3


def test_backlog_is_piggybacked() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    p.emit_nowait(0, b"a" * (3 * SEG))
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=2))
    backlogs = []
    while (message := srv.poll_response()) is not None:
        assert isinstance(message, BufferResponse)
        backlogs.append(message.backlog)
        message.release()
    assert backlogs == [2, 1]


# --- backlog announcements ----------------------------------------------------------------


def test_a_reader_without_credit_announces_a_backlog_the_receiver_has_not_heard_of() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=2))
    for data in (b"a", b"b"):  # each buffer leaves while it is the only one: "backlog 0" twice
        p.emit_nowait(0, data * SEG)
        sent = srv.poll_response()
        assert isinstance(sent, BufferResponse) and sent.backlog == 0
        sent.release()
    p.emit_nowait(0, b"c" * SEG)  # no credit left: held back, and announced instead
    p.emit_nowait(0, b"d" * SEG)
    assert responses(srv) == [(0, BacklogAnnouncement(0, 2))]  # the backlog as of sending, once
    p.emit_nowait(0, b"e" * SEG)  # it grows beyond what was announced: announced again
    assert responses(srv) == [(0, BacklogAnnouncement(0, 3))]
    p.flush(0)  # no new buffer with bytes: nothing new to tell
    assert responses(srv) == []
    srv.on_message(AddCredit(0, 3))  # the receiver borrowed floating buffers for it
    assert responses(srv) == [(0, b"c" * SEG), (0, b"d" * SEG), (0, b"e" * SEG)]


def test_no_announcement_once_credit_arrived_or_the_backlog_was_piggybacked() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=1))
    p.emit_nowait(0, b"a" * SEG)
    p.emit_nowait(0, b"b" * SEG)  # queued for an announcement (credit is still 1, but spent first)
    srv.on_message(AddCredit(0, 1))
    assert responses(srv) == [(0, b"a" * SEG), (0, b"b" * SEG)]
    srv.on_message(PartitionRequest(1, "p", 1, initial_credit=1))
    p.emit_nowait(1, b"x" * (3 * SEG))  # three buffers at once: the first says "backlog 2"
    sent = srv.poll_response()
    assert isinstance(sent, BufferResponse) and sent.backlog == 2
    sent.release()
    assert srv.poll_response() is None  # the receiver knows: no announcement
    p.emit_nowait(1, b"x" * SEG)
    assert responses(srv) == [(1, BacklogAnnouncement(1, 3))]


def test_a_request_without_initial_credit_announces_the_backlog_it_finds() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    p.emit_nowait(0, b"a" * (2 * SEG))
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=0))
    assert responses(srv) == [(0, BacklogAnnouncement(0, 2))]


def test_events_need_no_credit_but_wait_behind_data() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=0))
    p.emit_event_nowait(0, Watermark(1))
    p.emit_nowait(0, b"b")
    p.emit_event_nowait(0, Watermark(2))
    assert responses(srv) == [(0, Watermark(1))]  # the data (and the watermark behind it) wait
    srv.on_message(AddCredit(0, 1))
    assert responses(srv) == [(0, b"b"), (0, Watermark(2))]


def test_channels_without_credit_do_not_stall_the_others() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=1))
    srv.on_message(PartitionRequest(1, "p", 1, initial_credit=10))
    p.emit_nowait(0, b"0" * (4 * SEG))
    p.emit_nowait(1, b"1" * (4 * SEG))
    sent = responses(srv)
    assert [rid for rid, _ in sent] == [0, 1, 1, 1, 1]  # round robin until channel 0 runs dry of credit
    assert srv._readers[0].ledger.available == 0
    assert p.statistics().subpartitions[0].backlog == 3  # held at the sender


def test_a_request_before_the_partition_exists_waits() -> None:
    srv, provider = server()
    srv.on_message(PartitionRequest(0, "late", 0, initial_credit=2))
    assert srv.poll_response() is None
    p = partition("late")
    p.emit_nowait(0, b"x" * SEG)
    provider.add(p)
    assert responses(srv) == [(0, b"x" * SEG)]


def test_end_of_partition_releases_the_reader() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=2))
    p.finish_nowait()
    assert responses(srv) == [(0, EndOfPartition())]
    assert srv._readers == {}


def test_cancel_and_close_release_views() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=2))
    srv.on_message(PartitionRequest(1, "p", 1, initial_credit=2))
    p.emit_nowait(0, b"x" * 40)
    srv.on_message(CancelPartitionRequest(0))
    assert p.buffer_pool.used == 0  # the dropped subpartition's buffers went back
    srv.on_message(CloseRequest())
    assert srv._readers == {}
    assert srv.poll_response() is None


def test_bad_credit_and_released_partitions_become_error_responses() -> None:
    srv, provider = server()
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=1))
    srv.on_message(PartitionRequest(1, "p", 1, initial_credit=1))
    srv.on_message(AddCredit(0, 0))
    p.emit_nowait(1, b"y" * SEG)
    p.release()
    assert responses(srv) == [(0, ProtocolViolation), (1, PartitionReleased)]
    assert srv._readers == {}


def test_a_duplicate_request_is_refused() -> None:
    srv, provider = server()
    provider.add(partition())
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=1))
    srv.on_message(PartitionRequest(0, "p", 1, initial_credit=1))
    message = srv.poll_response()
    assert isinstance(message, ErrorResponse) and isinstance(message.error, ProtocolViolation)


def test_closing_the_connection_recycles_buffers_in_flight() -> None:
    connection = Connection("client", "server")
    provider = Provider()
    srv = PartitionRequestServer(connection, provider)
    p = partition()
    provider.add(p)
    srv.on_message(PartitionRequest(0, "p", 0, initial_credit=2))
    p.emit_nowait(0, b"z" * (2 * SEG))
    while (message := srv.poll_response()) is not None:
        connection.send_to_client(message)
    assert p.buffer_pool.used == 2
    connection.close()
    assert p.buffer_pool.used == 0
    connection.send_to_server(AddCredit(0, 1))  # dropped silently
    assert connection.take_server_messages() == []


async def test_run_ends_cleanly_on_cancellation(autojump_clock: trio.testing.MockClock) -> None:
    connection = Connection("client", "server")
    provider = Provider()
    srv = PartitionRequestServer(connection, provider)
    client = PartitionRequestClient(connection)
    p = partition()
    provider.add(p)

    class Channel:
        def __init__(self) -> None:
            self.errors: list[Exception] = []

        def on_error(self, error: Exception) -> None:
            self.errors.append(error)

    channel = Channel()
    client.request_subpartition(channel, "p", 0, 0)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(srv.run)
        nursery.start_soon(client.run)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert connection.closed
    assert srv._readers == {}
    assert len(channel.errors) == 1 and isinstance(channel.errors[0], ConnectionClosed)
    with pytest.raises(ProtocolViolation):
        p.create_subpartition_view(0)  # the server had taken (and released) the one view
