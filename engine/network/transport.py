"""The transport's messages and cores, and the in-process ``Connection``: one per ordered pair of TaskManagers.

Theory of operation
-------------------
As Flink's physical transport: all remote channels from the subtasks of one TaskManager
(the *client*, where the consumers run) to another (the *server*, where the producers
run) share one connection. The messages are the whole interface between the two ends.
Two transports carry them: the in-process ``Connection`` here (two message queues, one per
direction; the default) and ``tcp.TcpConnection`` (the messages framed by ``wire.py`` on
an authenticated TCP stream). Both run the same cores, ``PartitionRequestClient`` and
``PartitionRequestServer``, through ``ConnectionBase``:

    client → server   PartitionRequest(receiver_id, partition_id, subpartition_index, initial_credit)
                      AddCredit(receiver_id, credit)
                      CancelPartitionRequest(receiver_id)
                      CloseRequest()
    server → client   BufferResponse(receiver_id, data, backlog)
                      EventResponse(receiver_id, event, backlog)
                      BacklogAnnouncement(receiver_id, backlog)
                      ErrorResponse(receiver_id, error)

Server side (``PartitionRequestServer``, run by the producer's ``NetworkEnvironment``):
each partition request gets a *reader* (Flink's CreditBasedSequenceNumberingViewReader)
with a ``CreditLedger`` and, once the partition exists, a subpartition view. A reader is
in the FIFO of available readers when its next item is an event, or when it has data and
credit. The server takes one reader at a time, sends one item, and puts the reader back
at the tail if it can still send: round robin over channels, and a channel without credit
is simply not in the FIFO. So backpressure on one channel (credit 0) never stalls the
others on the same connection, and the bytes it cannot send stay in its subpartition
(its backlog).

The receiver learns the backlog from the buffers and events it gets, so a reader that ran
out of credit while its backlog was still 0 (its last buffer said "nothing behind me")
would leave the receiver unaware of the data piling up behind it: the receiver would not
borrow floating buffers for it until its task recycled a buffer and the next one brought
the backlog along (and never, if the task does not read). So a reader
remembers the backlog it last told its receiver; when it has data but no credit and its
backlog is larger than that, it is queued for a ``BacklogAnnouncement`` (Flink's
NettyMessage.BacklogAnnouncement), sent ahead of the buffers with the backlog as of the
moment it is sent. The client hands it to the channel, which borrows floating buffers for
it through the gate and announces them as credit like any other. An announcement never
carries data: "no buffer without credit" still holds, and a reader announces at most once
per buffer its backlog grows by while it has no credit.

A ``BufferResponse`` carries the sender's slice and the reference that keeps it alive, and
the client copies the bytes into the receiver's exclusive or floating buffer and then
recycles the sender's reference (as Netty would after writing). Over TCP the server's
writer recycles it once the bytes are copied into its send batch, and the client's
``BufferResponse`` holds a slice of the received bytes (no sender reference).

Client side (``PartitionRequestClient``, run by the consumer's ``NetworkEnvironment``):
assigns receiver ids, sends requests and credit for its ``RemoteInputChannel``\\ s, and
dispatches responses to them; dispatching never waits (a buffer only arrives if its
channel announced a free buffer for it).

When either side stops, the connection closes: buffers in flight are recycled, the
server releases its readers' views, and the client fails the channels that had not yet
finished with ``ConnectionClosed``.

What it does not do: no serialization, no sockets, no retries (``wire.py`` and ``tcp.py``
do the first two for TCP); partition lookup (and waiting for a producer that is not
registered yet) is the ``SubpartitionViewProvider``'s.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import trio

from weir.errors import ProtocolViolation
from weir.network.buffer import BufferOrEvent
from weir.network.credit import CreditLedger
from weir.network.errors import ConnectionClosed
from weir.network.events import EndOfPartition
from weir.network.messages import (
    AddCredit,
    BacklogAnnouncement,
    BufferResponse,
    CancelPartitionRequest,
    ClientMessage,
    CloseRequest,
    ErrorResponse,
    EventResponse,
    PartitionRequest,
    ServerMessage,
)
from weir.network.wakeup import Wakeup

if TYPE_CHECKING:
    from collections.abc import Callable

    from weir.network.gate import RemoteInputChannel, SubpartitionViewProvider
    from weir.network.partition import SubpartitionView

__all__ = [
    "AddCredit",
    "BacklogAnnouncement",
    "BufferResponse",
    "CancelPartitionRequest",
    "ClientMessage",
    "CloseRequest",
    "Connection",
    "ConnectionBase",
    "ConnectionStatistics",
    "ErrorResponse",
    "EventResponse",
    "PartitionRequest",
    "PartitionRequestClient",
    "PartitionRequestServer",
    "ServerMessage",
]


# --- the connection ---------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionStatistics:
    client_taskmanager: str
    server_taskmanager: str
    closed: bool
    partition_requests: int
    credit_announcements: int
    credit_announced: int
    buffers_sent: int
    bytes_sent: int
    events_sent: int
    backlog_announcements: int
    readers: int  # partition requests the server is serving now
    readers_with_credit: int
    channels: int  # remote channels the client has registered
    transport: str = "local"  # "local" (in-process queues) | "tcp"
    end: str = "both"  # "both" (in-process: one object) | "client" | "server" (one end of a TCP connection)


class ConnectionBase:
    """What the client and server cores use of a connection, whatever carries its messages.

    The client core calls ``send_to_server``; the server core sets ``server_wakeup``
    when a reader may send and leaves the sending to the driver (``poll_response``).
    Subclasses: the in-process ``Connection`` below and ``weir.network.tcp.TcpConnection``.
    """

    transport = "?"
    end = "both"  # which end(s) of the connection this object is

    def __init__(self, client_taskmanager: str, server_taskmanager: str) -> None:
        self.client_taskmanager = client_taskmanager
        self.server_taskmanager = server_taskmanager
        self.server_wakeup = Wakeup()
        self.closed = False
        self.partition_requests = 0
        self.credit_announcements = 0
        self.credit_announced = 0
        self.buffers_sent = 0
        self.bytes_sent = 0
        self.events_sent = 0
        self.backlog_announcements = 0
        self.client: PartitionRequestClient | None = None
        self.server: PartitionRequestServer | None = None

    def send_to_server(self, message: ClientMessage) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _count_to_server(self, message: ClientMessage) -> None:
        if type(message) is AddCredit:
            self.credit_announcements += 1
            self.credit_announced += message.credit
        elif type(message) is PartitionRequest:
            self.partition_requests += 1

    def _count_to_client(self, message: ServerMessage) -> None:
        if type(message) is BufferResponse:
            self.buffers_sent += 1
            self.bytes_sent += len(message.data)
        elif type(message) is EventResponse:
            self.events_sent += 1
        elif type(message) is BacklogAnnouncement:
            self.backlog_announcements += 1

    def statistics(self) -> ConnectionStatistics:
        server = self.server
        client = self.client
        return ConnectionStatistics(
            client_taskmanager=self.client_taskmanager,
            server_taskmanager=self.server_taskmanager,
            closed=self.closed,
            partition_requests=self.partition_requests,
            credit_announcements=self.credit_announcements,
            credit_announced=self.credit_announced,
            buffers_sent=self.buffers_sent,
            bytes_sent=self.bytes_sent,
            events_sent=self.events_sent,
            backlog_announcements=self.backlog_announcements,
            readers=len(server._readers) if server is not None else 0,
            readers_with_credit=(
                sum(1 for r in server._readers.values() if r.ledger.available > 0)
                if server is not None
                else 0
            ),
            channels=len(client._channels) if client is not None else 0,
            transport=self.transport,
            end=self.end,
        )

    def owned_by(self, taskmanager_id: str) -> bool:
        """Whether this object is (part of) ``taskmanager_id``'s side of the connection."""
        if self.end == "client":
            return taskmanager_id == self.client_taskmanager
        if self.end == "server":
            return taskmanager_id == self.server_taskmanager
        return taskmanager_id in (self.client_taskmanager, self.server_taskmanager)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"{type(self).__name__}({self.client_taskmanager!r} <- {self.server_taskmanager!r}, {state})"


class Connection(ConnectionBase):
    """Two message queues between a client TaskManager (consumers) and a server TaskManager (producers)."""

    transport = "local"

    def __init__(self, client_taskmanager: str, server_taskmanager: str) -> None:
        super().__init__(client_taskmanager, server_taskmanager)
        self._to_server: deque[ClientMessage] = deque()
        self._to_client: deque[ServerMessage] = deque()
        self.client_wakeup = Wakeup()

    def send_to_server(self, message: ClientMessage) -> None:
        if self.closed:
            return
        self._count_to_server(message)
        self._to_server.append(message)
        self.server_wakeup.set()

    def send_to_client(self, message: ServerMessage) -> None:
        if self.closed:
            if type(message) is BufferResponse:
                message.release()
            return
        self._count_to_client(message)
        self._to_client.append(message)
        self.client_wakeup.set()

    def take_server_messages(self) -> list[ClientMessage]:
        messages = list(self._to_server)
        self._to_server.clear()
        return messages

    def take_client_messages(self) -> list[ServerMessage]:
        messages = list(self._to_client)
        self._to_client.clear()
        return messages

    def close(self) -> None:
        """Close both directions; buffers in flight are recycled. Idempotent."""
        if self.closed:
            return
        self.closed = True
        while self._to_client:
            message = self._to_client.popleft()
            if type(message) is BufferResponse:
                message.release()
        self._to_server.clear()
        self.server_wakeup.set()
        self.client_wakeup.set()


# --- client side (consumers) ------------------------------------------------------------


class PartitionRequestClient:
    """The consumer TaskManager's end of a connection: requests, credit, dispatch."""

    def __init__(self, connection: ConnectionBase) -> None:
        self.connection = connection
        connection.client = self
        self._channels: dict[int, RemoteInputChannel] = {}
        self._next_receiver_id = 0

    def request_subpartition(
        self, channel: RemoteInputChannel, partition_id: str, subpartition_index: int, initial_credit: int
    ) -> int:
        """Register ``channel`` and ask the server for the subpartition; returns the receiver id."""
        receiver_id = self._next_receiver_id
        self._next_receiver_id += 1
        self._channels[receiver_id] = channel
        if self.connection.closed:
            channel.on_error(self._closed_error())
        else:
            self.connection.send_to_server(
                PartitionRequest(receiver_id, partition_id, subpartition_index, initial_credit)
            )
        return receiver_id

    def announce_credit(self, receiver_id: int, credit: int) -> None:
        if receiver_id in self._channels:
            self.connection.send_to_server(AddCredit(receiver_id, credit))

    def cancel(self, receiver_id: int) -> None:
        if self._channels.pop(receiver_id, None) is not None:
            self.connection.send_to_server(CancelPartitionRequest(receiver_id))

    def on_message(self, message: ServerMessage) -> None:
        """Dispatch one response to its channel (never waits)."""
        channel = self._channels.get(message.receiver_id)
        if type(message) is BufferResponse:
            try:
                if channel is not None:
                    channel.on_buffer(message.data, message.backlog)
            finally:
                message.release()
        elif channel is None:
            return
        elif type(message) is BacklogAnnouncement:
            channel.on_sender_backlog(message.backlog)
        elif type(message) is EventResponse:
            channel.on_event(BufferOrEvent(event=message.event, backlog=message.backlog))
            if isinstance(message.event, EndOfPartition):
                del self._channels[message.receiver_id]  # the server released its reader
        elif type(message) is ErrorResponse:
            del self._channels[message.receiver_id]
            channel.on_error(message.error)

    def _closed_error(self) -> ConnectionClosed:
        c = self.connection
        return ConnectionClosed(
            f"connection from taskmanager {c.client_taskmanager!r} to {c.server_taskmanager!r} closed"
        )

    def fail_all(self, error: Exception | None = None) -> None:
        """Fail every channel that has not finished (with ``ConnectionClosed`` unless ``error``)."""
        channels, self._channels = self._channels, {}
        if not channels:
            return
        if error is None:
            error = self._closed_error()
        for channel in channels.values():
            channel.on_error(error)

    async def run(self) -> None:
        """Dispatch the responses of an in-process ``Connection`` until it closes.

        Cancellation: closes the connection (the server releases this client's readers)
        and fails every channel that has not finished with ``ConnectionClosed``.
        """
        connection = self.connection
        assert isinstance(connection, Connection), "run() drives in-process connections"
        try:
            while True:
                for message in connection.take_client_messages():
                    self.on_message(message)
                if connection.closed:
                    return
                await connection.client_wakeup.wait()
        finally:
            if not connection.closed:
                connection.send_to_server(CloseRequest())
                connection.close()
            self.fail_all()


# --- server side (producers) ------------------------------------------------------------


class _Reader:
    __slots__ = (
        "announce_queued",
        "cancel_request",
        "done",
        "ledger",
        "queued",
        "receiver_id",
        "told_backlog",
        "view",
    )

    def __init__(self, receiver_id: int) -> None:
        self.receiver_id = receiver_id
        self.ledger = CreditLedger(receiver_id)
        self.view: SubpartitionView | None = None
        self.queued = False
        self.announce_queued = False  # in the server's FIFO of backlog announcements
        self.told_backlog = 0  # the backlog the receiver last heard of (buffer, event or announcement)
        self.done = False
        self.cancel_request: Callable[[], None] | None = None

    def can_send(self) -> bool:
        view = self.view
        if view is None or self.done:
            return False
        if view.next_is_event():
            return True
        return self.ledger.available > 0 and view.is_available()

    def backlog_to_announce(self) -> int:
        """The backlog to announce now: data but no credit, and more than the receiver heard of; else 0."""
        view = self.view
        if view is None or self.done or self.ledger.available > 0:
            return 0
        backlog = view.backlog
        return backlog if backlog > self.told_backlog else 0


class PartitionRequestServer:
    """The producer TaskManager's end of a connection: serves subpartitions within credit.

    ``on_message`` and ``poll_response`` are the synchronous core; ``run`` moves messages.
    """

    def __init__(self, connection: ConnectionBase, provider: SubpartitionViewProvider) -> None:
        self.connection = connection
        connection.server = self
        self._provider = provider
        self._readers: dict[int, _Reader] = {}
        self._available: deque[_Reader] = deque()
        self._announcements: deque[_Reader] = deque()
        self._outbox: deque[ServerMessage] = deque()

    # --- core -------------------------------------------------------------------------

    def on_message(self, message: ClientMessage) -> None:
        if type(message) is AddCredit:
            reader = self._readers.get(message.receiver_id)
            if reader is None:
                return  # cancelled or finished meanwhile
            try:
                reader.ledger.on_credit(message.credit)
            except ProtocolViolation as error:
                self._fail_reader(reader, error)
                return
            self._on_available(reader)
        elif type(message) is PartitionRequest:
            self._on_partition_request(message)
        elif type(message) is CancelPartitionRequest:
            reader = self._readers.get(message.receiver_id)
            if reader is not None:
                self._release_reader(reader)
        elif type(message) is CloseRequest:
            for reader in list(self._readers.values()):
                self._release_reader(reader)

    def _on_partition_request(self, request: PartitionRequest) -> None:
        if request.receiver_id in self._readers:
            self._outbox.append(
                ErrorResponse(
                    request.receiver_id,
                    ProtocolViolation(f"receiver {request.receiver_id}: requested a partition twice"),
                )
            )
            self.connection.server_wakeup.set()
            return
        reader = _Reader(request.receiver_id)
        self._readers[request.receiver_id] = reader
        if request.initial_credit < 0:
            self._fail_reader(
                reader,
                ProtocolViolation(
                    f"receiver {request.receiver_id}: initial credit must not be negative, got {request.initial_credit}"
                ),
            )
            return
        if request.initial_credit:
            reader.ledger.on_credit(request.initial_credit)
        reader.cancel_request = self._provider.request_subpartition_view(
            request.partition_id,
            request.subpartition_index,
            partial(self._on_view, reader),
            partial(self._fail_reader, reader),
        )

    def _on_view(self, reader: _Reader, view: SubpartitionView) -> None:
        reader.cancel_request = None
        if reader.done:
            view.release()
            return
        reader.view = view
        view.set_availability_listener(partial(self._on_available, reader))
        self._on_available(reader)

    def _on_available(self, reader: _Reader) -> None:
        if reader.queued:
            return  # its next item carries the backlog
        if reader.can_send():
            reader.queued = True
            self._available.append(reader)
            self.connection.server_wakeup.set()
        elif not reader.announce_queued and reader.backlog_to_announce():
            reader.announce_queued = True
            self._announcements.append(reader)
            self.connection.server_wakeup.set()

    def _release_reader(self, reader: _Reader) -> None:
        reader.done = True
        self._readers.pop(reader.receiver_id, None)
        if reader.cancel_request is not None:
            reader.cancel_request()
            reader.cancel_request = None
        if reader.view is not None:
            reader.view.set_availability_listener(None)
            reader.view.release()
            reader.view = None

    def _fail_reader(self, reader: _Reader, error: Exception) -> None:
        was_live = not reader.done
        self._release_reader(reader)
        if was_live:
            self._outbox.append(ErrorResponse(reader.receiver_id, error))
            self.connection.server_wakeup.set()

    def poll_response(self) -> ServerMessage | None:
        """The next message to send: errors, then backlog announcements, then one item of the next reader in turn."""
        if self._outbox:
            return self._outbox.popleft()
        announcements = self._announcements
        while announcements:
            reader = announcements.popleft()
            reader.announce_queued = False
            backlog = reader.backlog_to_announce()  # as of now: credit may have come meanwhile
            if backlog:
                reader.told_backlog = backlog
                return BacklogAnnouncement(reader.receiver_id, backlog)
        available = self._available
        while available:
            reader = available.popleft()
            reader.queued = False
            view = reader.view
            if view is None or reader.done:
                continue
            try:
                if view.next_is_event():
                    item = view.poll_next()
                    assert item is not None and item.event is not None
                    response: ServerMessage = EventResponse(reader.receiver_id, item.event, item.backlog)
                    reader.told_backlog = item.backlog
                    if isinstance(item.event, EndOfPartition):
                        self._release_reader(reader)
                        return response
                elif reader.ledger.available > 0 and view.is_available():
                    item = view.poll_next()
                    if item is None or item.data is None:
                        continue
                    reader.ledger.try_spend()
                    response = BufferResponse(reader.receiver_id, item.data, item.backlog, item)
                    reader.told_backlog = item.backlog
                else:
                    continue
            except Exception as error:  # the partition was released under the reader
                self._fail_reader(reader, error)
                return self._outbox.popleft()
            if reader.can_send():
                reader.queued = True
                available.append(reader)
            return response
        return None

    def release_all(self) -> None:
        """Release every reader's view (the connection went away); queued responses are dropped."""
        for reader in list(self._readers.values()):
            self._release_reader(reader)
        self._available.clear()
        self._announcements.clear()
        self._outbox.clear()

    # --- driver -----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve an in-process ``Connection`` until it closes; one scheduling point per message sent.

        Cancellation: releases every reader's view, closes the connection (in-flight
        buffers are recycled; the client's unfinished channels fail with ``ConnectionClosed``).
        """
        connection = self.connection
        assert isinstance(connection, Connection), "run() drives in-process connections"
        try:
            while True:
                for message in connection.take_server_messages():
                    self.on_message(message)
                if connection.closed:
                    return
                response = self.poll_response()
                if response is None:
                    await connection.server_wakeup.wait()
                    continue
                connection.send_to_client(response)
                await trio.lowlevel.checkpoint()
        finally:
            self.release_all()
            connection.close()
