"""TCP transport: the connection of ``transport.py`` over a Trio TCP stream, one per ordered pair of TaskManagers.

Theory of operation
-------------------
``TcpNetwork`` is the TCP sibling of the in-process ``NetworkRegistry``: a
``NetworkEnvironment`` built with it serves its partitions on a TCP listener
(``serve``: 127.0.0.1 and an ephemeral port unless configured) and reaches a producer on
another TaskManager by its address (``address_of``). The addresses come from the
environments of this process (recorded when they start serving) and from
``set_address`` (a process cluster tells each TaskManager where the others are).

A consumer TaskManager opens ONE connection to each producer TaskManager it reads from,
and every remote channel between the two is multiplexed over it, as in Flink. The
connection carries the same messages as the in-process ``Connection`` and runs the same
cores: ``PartitionRequestClient`` (requests, credit, dispatch) at the consumer and
``PartitionRequestServer`` (readers, credit ledgers, round robin, backlog announcements)
at the producer; only the drivers differ. The wire format and the handshake are in
``wire.py``.

Lifecycle of a connection (``TcpConnection``; both ends are one object each):

1. connect, then the handshake (``wire.py``): both sides prove that they know the cluster's
   secret; the server reads no frame before the client's proof checked out, and the
   client sends none before the server's did. A failed or slow handshake (``handshake_timeout_s``)
   closes the socket: nothing from that peer is ever decoded.
2. two tasks per end: a reader (``receive_some`` -> ``WireCodec.feed`` -> the core's
   ``on_message``, many frames per receive) and a writer that batches: the client's writer
   sends every queued request and credit in one ``send_all``; the server's writer takes
   responses from ``poll_response`` until about ``SEND_BATCH_BYTES`` are encoded, sends them
   in one ``send_all`` and recycles the buffers it copied.
3. close: any error ends both tasks (``close(error)`` cancels the connection's scope). The
   server releases its readers' views; the client fails its unfinished channels -- with the
   ``ProtocolViolation`` itself when the server sent something malformed, else with
   ``ConnectionClosed`` naming both TaskManagers, the address and the cause.

Credit keeps the stream from ever blocking on one channel: a buffer goes out only for a
credit its receiver announced, so the receiver always has room for it and reads the socket
without waiting for its task; a channel without credit is not in the server's round robin.
So a stalled channel never stalls another on the same connection.

What it does not do: no reconnects (a closed connection fails its channels; the next gate
opens a new one), no encryption (loopback; the handshake authenticates, it does not hide).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from weir.errors import ProtocolViolation, UsageError, WeirError
from weir.network.errors import AuthenticationFailed, ConnectionClosed
from weir.network.transport import (
    BufferResponse,
    ClientMessage,
    ConnectionBase,
    PartitionRequestClient,
    PartitionRequestServer,
)
from weir.network.wakeup import Wakeup
from weir.network.wire import (
    CLIENT_HELLO_HEAD,
    NONCE_BYTES,
    PROOF_BYTES,
    SERVER_HELLO_HEAD,
    ClientHello,
    Message,
    ServerHello,
    WireCodec,
    client_proof,
    decode_client_hello,
    decode_server_hello,
    encode_client_hello,
    encode_server_hello,
    hello_id_length,
    proofs_match,
    server_proof,
)

if TYPE_CHECKING:
    from weir.network.environment import NetworkEnvironment

__all__ = ["DEFAULT_BIND_HOST", "TcpConnection", "TcpNetwork"]

DEFAULT_BIND_HOST = "127.0.0.1"
RECEIVE_BYTES = 256 << 10
SEND_BATCH_BYTES = 256 << 10
MIN_SECRET_BYTES = 16

#: what ends a connection (anything else is a bug and propagates)
_CONNECTION_ERRORS = (
    OSError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio.TooSlowError,
    WeirError,
)


class TcpConnection(ConnectionBase):
    """One end of a TCP connection from consumers on ``client_taskmanager`` to producers on ``server_taskmanager``."""

    transport = "tcp"

    def __init__(self, client_taskmanager: str, server_taskmanager: str, end: str, peer: str = "") -> None:
        super().__init__(client_taskmanager, server_taskmanager)
        self.end = end  # "client" (the consumers' end) | "server" (the producers' end)
        self.peer = peer  # host:port of the other end, once known
        self._outbox: deque[ClientMessage] = deque()
        self.writer_wakeup = Wakeup()
        self.cancel_scope = trio.CancelScope()
        #: why the connection closed, if not on request
        self.error: Exception | None = None
        self.bytes_written = 0
        self.bytes_read = 0

    def send_to_server(self, message: ClientMessage) -> None:
        """Queue a client message for the writer (never waits)."""
        if self.closed:
            return
        self._count_to_server(message)
        self._outbox.append(message)
        self.writer_wakeup.set()

    def close(self, error: Exception | None = None) -> None:
        """Close this end: its tasks are cancelled, its socket closes. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.error = error
        self._outbox.clear()
        self.cancel_scope.cancel()
        self.server_wakeup.set()
        self.writer_wakeup.set()

    def describe(self) -> str:
        at = f" at {self.peer}" if self.peer else ""
        return f"connection from taskmanager {self.client_taskmanager!r} to {self.server_taskmanager!r}{at}"


class TcpNetwork:
    """The TCP network of one process: the cluster's secret, where to listen, where each TaskManager is.

    ``secret``: the cluster's shared secret (at least 16 bytes); every connection proves it
    in the handshake. ``host``/``port``: where this process's environments listen
    (``taskmanager.bind-host``, ``taskmanager.data.port``; port 0 = ephemeral). With a fixed
    port only one environment of the process can listen.
    """

    def __init__(
        self,
        secret: bytes,
        host: str = DEFAULT_BIND_HOST,
        port: int = 0,
        handshake_timeout_s: float = 30.0,
    ) -> None:
        if not isinstance(secret, bytes | bytearray) or len(secret) < MIN_SECRET_BYTES:
            size = len(secret) if isinstance(secret, bytes | bytearray) else type(secret).__name__
            raise UsageError(
                f"TCP network: the cluster's secret must be at least {MIN_SECRET_BYTES} bytes, got {size}"
            )
        if not 0 <= port <= 65535:
            raise UsageError(
                f"taskmanager.data.port: {port} is not a TCP port (expected 0..65535, 0 = any free port)"
            )
        if handshake_timeout_s <= 0:
            raise UsageError(f"TCP network: handshake timeout must be positive, got {handshake_timeout_s} s")
        self.secret = bytes(secret)
        self.host = host
        self.port = port
        self.handshake_timeout_s = handshake_timeout_s
        self._environments: dict[str, NetworkEnvironment] = {}
        self._addresses: dict[str, tuple[str, int]] = {}
        self._connections: list[TcpConnection] = []
        #: handshakes this process refused, newest last: "host:port: why"
        self.refused: list[str] = []

    # --- environments and addresses ---------------------------------------------------

    def register(self, environment: NetworkEnvironment) -> None:
        tm = environment.taskmanager_id
        if tm in self._environments:
            raise UsageError(f"TCP network: taskmanager {tm!r} is already registered")
        self._environments[tm] = environment

    def unregister(self, taskmanager_id: str) -> None:
        self._environments.pop(taskmanager_id, None)
        self._addresses.pop(taskmanager_id, None)

    def set_address(self, taskmanager_id: str, host: str, port: int) -> None:
        """The TaskManager ``taskmanager_id`` serves its partitions at ``host:port``."""
        if not 1 <= port <= 65535:
            raise UsageError(
                f"taskmanager {taskmanager_id!r}: data port {port} is not a TCP port (expected 1..65535)"
            )
        self._addresses[taskmanager_id] = (host, port)

    def forget_address(self, taskmanager_id: str) -> None:
        self._addresses.pop(taskmanager_id, None)

    def address_of(self, taskmanager_id: str) -> tuple[str, int]:
        try:
            return self._addresses[taskmanager_id]
        except KeyError:
            known = (
                ", ".join(f"{tm!r} at {h}:{p}" for tm, (h, p) in sorted(self._addresses.items())) or "none"
            )
            raise UsageError(
                f"TCP network: no address for taskmanager {taskmanager_id!r} (known: {known})"
            ) from None

    @property
    def addresses(self) -> dict[str, tuple[str, int]]:
        return dict(self._addresses)

    def connections(self) -> tuple[TcpConnection, ...]:
        return tuple(self._connections)

    def _track(self, connection: TcpConnection) -> None:
        self._connections = [c for c in self._connections if not c.closed]
        self._connections.append(connection)

    # --- client side ------------------------------------------------------------------

    def connect(self, environment: NetworkEnvironment, server_taskmanager: str) -> PartitionRequestClient:
        """A client for a new connection to ``server_taskmanager``; it connects in the background
        (requests queue until the handshake is done) and its channels fail if it cannot."""
        connection = TcpConnection(environment.taskmanager_id, server_taskmanager, "client")
        self._track(connection)
        client = PartitionRequestClient(connection)
        environment._spawn(
            partial(self._run_client_end, environment, connection, client),
            f"tcp client {environment.taskmanager_id}<-{server_taskmanager}",
        )
        return client

    async def _run_client_end(
        self, environment: NetworkEnvironment, connection: TcpConnection, client: PartitionRequestClient
    ) -> None:
        """Connect, authenticate, then read and write until the connection closes.

        Cancellation: the socket closes and the unfinished channels fail with ``ConnectionClosed``.
        """
        try:
            with connection.cancel_scope:
                try:
                    host, port = self.address_of(connection.server_taskmanager)
                    connection.peer = f"{host}:{port}"
                    stream = await trio.open_tcp_stream(host, port)
                except _CONNECTION_ERRORS as error:
                    connection.close(error)
                    return
                async with stream:
                    codec = WireCodec(
                        environment.segment_size,
                        peer=f"taskmanager {connection.server_taskmanager!r}",
                        accept="responses",
                    )
                    try:
                        with trio.fail_after(self.handshake_timeout_s):
                            leftover = await self._client_handshake(stream, connection)
                    except _CONNECTION_ERRORS as error:
                        connection.close(error)
                        return
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(
                            _guarded, connection, partial(_write_client_messages, stream, connection, codec)
                        )
                        await _guarded(
                            connection,
                            partial(_read_messages, stream, connection, codec, leftover, client.on_message),
                        )
        finally:
            cause = connection.error
            connection.close()
            if isinstance(cause, ProtocolViolation):
                client.fail_all(cause)
            elif cause is not None:
                client.fail_all(
                    ConnectionClosed(f"{connection.describe()} closed: {type(cause).__name__}: {cause}")
                )
            else:
                client.fail_all(ConnectionClosed(f"{connection.describe()} closed"))

    async def _client_handshake(self, stream: trio.SocketStream, connection: TcpConnection) -> bytes:
        peer = f"taskmanager {connection.server_taskmanager!r} at {connection.peer}"
        hello = ClientHello(secrets.token_bytes(NONCE_BYTES), connection.client_taskmanager)
        await stream.send_all(encode_client_hello(hello))
        reader = _ExactReader(stream, peer)
        head = await reader.exactly(SERVER_HELLO_HEAD)
        answer = decode_server_hello(peer, head, await reader.exactly(hello_id_length(peer, head)))
        if answer.taskmanager_id != connection.server_taskmanager:
            raise ProtocolViolation(f"{peer}: answered as taskmanager {answer.taskmanager_id!r}")
        expected = server_proof(self.secret, hello, answer.nonce, answer.taskmanager_id)
        if not proofs_match(expected, answer.proof):
            raise AuthenticationFailed(
                f"{peer} did not prove that it knows the cluster's secret (HMAC-SHA256 mismatch): refused"
            )
        await stream.send_all(client_proof(self.secret, hello, answer.nonce, answer.taskmanager_id))
        return reader.rest()

    # --- server side ------------------------------------------------------------------

    async def serve(
        self,
        environment: NetworkEnvironment,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen for connections to ``environment``'s partitions; starts with its address.

        Cancellation: the listener and every connection it accepted close (their readers'
        views are released).
        """
        try:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        except OSError as error:
            raise UsageError(
                f"taskmanager {environment.taskmanager_id!r}: cannot listen on {self.host}:{self.port} "
                f"(taskmanager.bind-host / taskmanager.data.port): {error}"
            ) from None
        listener = listeners[0]
        for extra in listeners[1:]:
            await extra.aclose()
        host, port = listener.socket.getsockname()[:2]
        self._addresses[environment.taskmanager_id] = (host, port)
        environment.listen_address = (host, port)
        try:
            async with listener, trio.open_nursery() as nursery:
                task_status.started((host, port))
                while True:
                    stream = await listener.accept()
                    nursery.start_soon(self._serve_connection, environment, stream)
        finally:
            environment.listen_address = None
            if self._addresses.get(environment.taskmanager_id) == (host, port):
                del self._addresses[environment.taskmanager_id]

    async def _serve_connection(self, environment: NetworkEnvironment, stream: trio.SocketStream) -> None:
        """Authenticate one client, then serve it until either side closes.

        Cancellation: the socket closes; the server's readers release their views.
        """
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        async with stream:
            try:
                with trio.fail_after(self.handshake_timeout_s):
                    client_taskmanager, leftover = await self._server_handshake(stream, environment, peer)
            except _CONNECTION_ERRORS as error:
                self.refused.append(f"{peer}: {type(error).__name__}: {error}")
                del self.refused[:-100]
                return
            connection = TcpConnection(client_taskmanager, environment.taskmanager_id, "server", peer)
            self._track(connection)
            server = PartitionRequestServer(connection, environment)
            environment._adopt_server(server)
            codec = WireCodec(
                environment.segment_size,
                peer=f"taskmanager {client_taskmanager!r} at {peer}",
                accept="requests",
            )
            try:
                with connection.cancel_scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(
                            _guarded,
                            connection,
                            partial(_write_server_messages, stream, connection, server, codec),
                        )
                        await _guarded(
                            connection,
                            partial(_read_messages, stream, connection, codec, leftover, server.on_message),
                        )
            finally:
                server.release_all()
                connection.close()

    async def _server_handshake(
        self, stream: trio.SocketStream, environment: NetworkEnvironment, peer: str
    ) -> tuple[str, bytes]:
        reader = _ExactReader(stream, peer)
        head = await reader.exactly(CLIENT_HELLO_HEAD)
        hello = decode_client_hello(peer, head, await reader.exactly(hello_id_length(peer, head)))
        me = environment.taskmanager_id
        nonce = secrets.token_bytes(NONCE_BYTES)
        await stream.send_all(
            encode_server_hello(ServerHello(nonce, server_proof(self.secret, hello, nonce, me), me))
        )
        received = await reader.exactly(PROOF_BYTES)
        if not proofs_match(client_proof(self.secret, hello, nonce, me), received):
            raise AuthenticationFailed(
                f"{peer} (says taskmanager {hello.taskmanager_id!r}) did not prove that it knows the cluster's "
                "secret (HMAC-SHA256 mismatch): refused before reading any message"
            )
        return hello.taskmanager_id, reader.rest()

    def __repr__(self) -> str:
        return f"TcpNetwork({self.host}:{self.port}, taskmanagers={sorted(self._addresses)})"


# --- the tasks of one connection --------------------------------------------------------


async def _guarded(connection: TcpConnection, fn: Callable[[], Awaitable[None]]) -> None:
    """Run one task of ``connection``; an I/O or protocol error closes the connection (never propagates)."""
    try:
        await fn()
    except _CONNECTION_ERRORS as error:
        connection.close(error)


async def _read_messages(
    stream: trio.SocketStream,
    connection: TcpConnection,
    codec: WireCodec,
    leftover: bytes,
    dispatch: Callable[[Any], None],
) -> None:
    """Decode and dispatch every frame the peer sends; raises when the stream ends."""
    messages: list[Message] = codec.feed(leftover) if leftover else []
    for message in messages:
        dispatch(message)
    while True:
        data = await stream.receive_some(RECEIVE_BYTES)
        if not data:
            codec.end_of_stream()
            raise ConnectionClosed(f"{codec.peer} closed the connection")
        connection.bytes_read += len(data)
        for message in codec.feed(data):
            dispatch(message)


async def _write_client_messages(
    stream: trio.SocketStream, connection: TcpConnection, codec: WireCodec
) -> None:
    """Send queued requests and credit, all that are queued in one ``send_all``."""
    outbox = connection._outbox
    while True:
        if not outbox:
            await connection.writer_wakeup.wait()
            continue
        out = bytearray()
        while outbox:
            codec.encode_into(out, outbox.popleft())
        await stream.send_all(out)
        connection.bytes_written += len(out)


async def _write_server_messages(
    stream: trio.SocketStream, connection: TcpConnection, server: PartitionRequestServer, codec: WireCodec
) -> None:
    """Send the server's responses, up to ``SEND_BATCH_BYTES`` per ``send_all``; recycles sent buffers."""
    poll = server.poll_response
    while True:
        out = bytearray()
        while len(out) < SEND_BATCH_BYTES:
            response = poll()
            if response is None:
                break
            try:
                codec.encode_into(out, response)  # copies a buffer's bytes
            finally:
                if type(response) is BufferResponse:
                    response.release()
            connection._count_to_client(response)
        if out:
            await stream.send_all(out)
            connection.bytes_written += len(out)
        else:
            await connection.server_wakeup.wait()


class _ExactReader:
    """Reads exact byte counts of a handshake; what came after it is ``rest()``."""

    def __init__(self, stream: trio.SocketStream, peer: str) -> None:
        self._stream = stream
        self._peer = peer
        self._buffer = bytearray()

    async def exactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            data = await self._stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise ConnectionClosed(
                    f"{self._peer} closed the connection during the handshake ({len(self._buffer)} of {n} bytes)"
                )
            self._buffer += data
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    def rest(self) -> bytes:
        out = bytes(self._buffer)
        self._buffer.clear()
        return out
