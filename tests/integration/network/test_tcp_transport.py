"""The TCP transport on real loopback sockets: authentication first, malformed peers cut off, addresses."""

from __future__ import annotations

import secrets
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from network_cluster import assert_all_returned, read_channels

from weir.errors import ProtocolViolation, UsageError
from weir.network.environment import ChannelSpec, NetworkEnvironment
from weir.network.errors import AuthenticationFailed, ConnectionClosed
from weir.network.events import EndOfPartition
from weir.network.tcp import TcpNetwork
from weir.network.transport import PartitionRequest
from weir.network.wire import (
    CLIENT_HELLO_HEAD,
    NONCE_BYTES,
    PROOF_BYTES,
    SERVER_HELLO_HEAD,
    ClientHello,
    ServerHello,
    WireCodec,
    client_proof,
    decode_client_hello,
    decode_server_hello,
    encode_client_hello,
    encode_server_hello,
    hello_id_length,
    server_proof,
)

SECRET = b"k" * 32
MiB = 1 << 20


@asynccontextmanager
async def serving(*environments: NetworkEnvironment) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        for environment in environments:
            await nursery.start(environment.run)
        yield
        nursery.cancel_scope.cancel()


async def receive_exactly(stream: trio.SocketStream, n: int, buffer: bytearray) -> bytes:
    while len(buffer) < n:
        data = await stream.receive_some(65536)
        assert data, f"the peer closed after {len(buffer)} of {n} bytes"
        buffer += data
    out = bytes(buffer[:n])
    del buffer[:n]
    return out


async def handshake_as_client(stream: trio.SocketStream, secret: bytes, me: str = "intruder") -> None:
    """The client's half of the handshake, proving ``secret`` (right or wrong)."""
    hello = ClientHello(secrets.token_bytes(NONCE_BYTES), me)
    await stream.send_all(encode_client_hello(hello))
    buffer = bytearray()
    head = await receive_exactly(stream, SERVER_HELLO_HEAD, buffer)
    answer = decode_server_hello(
        "test", head, await receive_exactly(stream, hello_id_length("test", head), buffer)
    )
    await stream.send_all(client_proof(secret, hello, answer.nonce, answer.taskmanager_id))


async def until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the peer sends until it closes (a reset counts as closed)."""
    received = b""
    try:
        while data := await stream.receive_some(65536):
            received += data
    except trio.BrokenResourceError:
        pass
    return received


async def test_a_peer_with_the_wrong_secret_is_refused_before_any_message_is_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    network = TcpNetwork(SECRET)
    tm0 = NetworkEnvironment("tm0", network, total_bytes=4 * MiB)
    async with serving(tm0):
        tm0.create_result_partition("p", 1)
        assert tm0.listen_address is not None and tm0.listen_address[0] == "127.0.0.1"
        stream = await trio.open_tcp_stream(*tm0.listen_address)
        async with stream:
            await handshake_as_client(stream, b"w" * 32)
            # it goes on as if it were in: a request for the partition right behind its proof
            await stream.send_all(WireCodec(32 * 1024).encode(PartitionRequest(0, "p", 0, 2)))
            with trio.fail_after(10):
                assert await until_closed(stream) == b""
        (why,) = network.refused
        assert "says taskmanager 'intruder'" in why and "did not prove" in why
        assert network.connections() == ()  # no connection, so no message was ever decoded
        assert tm0.result_partition("p").create_subpartition_view(0) is not None  # nobody took the view


async def test_a_producer_that_cannot_prove_the_secret_fails_its_consumers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    consumers, producers = TcpNetwork(SECRET), TcpNetwork(b"o" * 32)
    tm0 = NetworkEnvironment("tm0", producers, total_bytes=4 * MiB)
    tm1 = NetworkEnvironment("tm1", consumers, total_bytes=4 * MiB)
    async with serving(tm0, tm1):
        assert tm0.listen_address is not None
        consumers.set_address("tm0", *tm0.listen_address)
        tm0.create_result_partition("p", 1)
        gate = tm1.create_input_gate(0, [ChannelSpec("p", 0, "tm0")])
        with (
            trio.fail_after(10),
            pytest.raises(AuthenticationFailed, match=r"taskmanager 'tm0' at 127\.0\.0\.1"),
        ):
            await gate.get_next()
        gate.close()
        assert_all_returned(tm1.network_buffer_pool)
    assert len(producers.refused) == 1  # and the producer refused the consumer as well


async def test_a_malformed_frame_from_a_consumer_closes_its_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    network = TcpNetwork(SECRET)
    tm0 = NetworkEnvironment("tm0", network, total_bytes=4 * MiB)
    async with serving(tm0):
        partition = tm0.create_result_partition("p", 1)
        assert tm0.listen_address is not None
        stream = await trio.open_tcp_stream(*tm0.listen_address)
        async with stream:
            await handshake_as_client(stream, SECRET, me="tm9")
            codec = WireCodec(32 * 1024)
            await stream.send_all(codec.encode(PartitionRequest(0, "p", 0, 2)) + struct.pack("!IB", 1, 99))
            with trio.fail_after(10):
                await until_closed(stream)
        (connection,) = network.connections()
        assert (connection.client_taskmanager, connection.end, connection.closed) == ("tm9", "server", True)
        assert isinstance(connection.error, ProtocolViolation)
        assert "taskmanager 'tm9'" in str(connection.error) and "unknown message id 99" in str(
            connection.error
        )
        await trio.testing.wait_all_tasks_blocked()
        assert connection.statistics().readers == 0  # the reader it had opened was released
        partition.release()
        assert_all_returned(tm0.network_buffer_pool)


async def test_a_malformed_frame_from_a_producer_fails_the_consumers_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    network = TcpNetwork(SECRET)
    tm1 = NetworkEnvironment("tm1", network, total_bytes=4 * MiB)

    async def impostor(stream: trio.SocketStream) -> None:
        """Answers the handshake like a TaskManager 'tm0', then sends an event of an unknown type."""
        buffer = bytearray()
        head = await receive_exactly(stream, CLIENT_HELLO_HEAD, buffer)
        hello = decode_client_hello(
            "test", head, await receive_exactly(stream, hello_id_length("test", head), buffer)
        )
        nonce = secrets.token_bytes(NONCE_BYTES)
        await stream.send_all(
            encode_server_hello(ServerHello(nonce, server_proof(SECRET, hello, nonce, "tm0"), "tm0"))
        )
        await receive_exactly(stream, PROOF_BYTES, buffer)
        await stream.send_all(struct.pack("!IBIIB", 10, 6, 0, 0, 42))
        await until_closed(stream)

    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        nursery.start_soon(trio.serve_listeners, impostor, [listener])
        network.set_address("tm0", "127.0.0.1", listener.socket.getsockname()[1])
        async with serving(tm1):
            gate = tm1.create_input_gate(0, [ChannelSpec("p", 0, "tm0"), ChannelSpec("q", 0, "tm0")])
            with trio.fail_after(10), pytest.raises(ProtocolViolation, match="unknown event type 42"):
                await gate.get_next()
            (client_end,) = network.connections()
            assert client_end.closed and client_end.end == "client"
            gate.close()
            assert_all_returned(tm1.network_buffer_pool)
        nursery.cancel_scope.cancel()


async def test_a_producer_without_an_address_fails_its_consumers_clearly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tm1 = NetworkEnvironment("tm1", TcpNetwork(SECRET), total_bytes=4 * MiB)
    async with serving(tm1):
        gate = tm1.create_input_gate(0, [ChannelSpec("p", 0, "tm7")])
        with trio.fail_after(10), pytest.raises(ConnectionClosed, match="no address for taskmanager 'tm7'"):
            await gate.get_next()
        gate.close()


async def test_two_processes_worth_of_networks_exchange_data_by_address(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # what a process cluster does: one TcpNetwork per TaskManager, told where the others are
    producers, consumers = TcpNetwork(SECRET), TcpNetwork(SECRET)
    tm0 = NetworkEnvironment("tm0", producers, total_bytes=4 * MiB)
    tm1 = NetworkEnvironment("tm1", consumers, total_bytes=4 * MiB)
    async with serving(tm0, tm1):
        assert tm0.listen_address is not None
        consumers.set_address("tm0", *tm0.listen_address)
        partition = tm0.create_result_partition("p", 2)
        gate = tm1.create_input_gate(0, [ChannelSpec("p", 0, "tm0"), ChannelSpec("p", 1, "tm0")])
        payload = bytes(range(256)) * 1000
        async with trio.open_nursery() as nursery:
            result: dict[int, list[object]] = {}

            async def consume() -> None:
                result.update(await read_channels(gate))  # type: ignore[arg-type]

            nursery.start_soon(consume)
            for sub in (0, 1):
                await partition.emit(sub, payload)
            await partition.finish()
        assert result == {0: [payload, EndOfPartition()], 1: [payload, EndOfPartition()]}
        (client_end,) = consumers.connections()
        (server_end,) = producers.connections()
        assert client_end.statistics().partition_requests == 2
        assert server_end.statistics().bytes_sent == 2 * len(payload)
        assert server_end.bytes_written > 2 * len(payload)  # plus the frames' headers
        gate.close()
    assert_all_returned(tm0.network_buffer_pool)
    assert_all_returned(tm1.network_buffer_pool)
    assert client_end.closed and server_end.closed


def test_bad_settings_are_clear_errors() -> None:
    with pytest.raises(UsageError, match="at least 16 bytes, got 3"):
        TcpNetwork(b"abc")
    with pytest.raises(UsageError, match=r"taskmanager\.data\.port: 70000 is not a TCP port"):
        TcpNetwork(SECRET, port=70000)
    with pytest.raises(UsageError, match="data port 0 is not a TCP port"):
        TcpNetwork(SECRET).set_address("tm0", "127.0.0.1", 0)


async def test_closing_a_consumer_mid_stream_releases_what_it_held_at_both_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    producers, consumers = TcpNetwork(SECRET), TcpNetwork(SECRET)
    tm0 = NetworkEnvironment("tm0", producers, total_bytes=4 * MiB)
    tm1 = NetworkEnvironment("tm1", consumers, total_bytes=4 * MiB)
    async with serving(tm0, tm1):
        assert tm0.listen_address is not None
        consumers.set_address("tm0", *tm0.listen_address)
        partition = tm0.create_result_partition("p", 2)
        gate = tm1.create_input_gate(0, [ChannelSpec("p", 0, "tm0"), ChannelSpec("p", 1, "tm0")])

        async def produce() -> None:
            while True:
                await partition.emit(0, b"x" * 10_000)
                await partition.emit(1, b"y" * 10_000)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            with trio.fail_after(10):
                item = await gate.get_next()
            assert item is not None and item.size > 0
            item.recycle()
            await trio.testing.wait_all_tasks_blocked()  # back pressure: the producer waits for credit
            (server_end,) = producers.connections()
            assert server_end.statistics().readers == 2
            nursery.cancel_scope.cancel()
        gate.close()  # cancels both partition requests on the shared connection
        await trio.testing.wait_all_tasks_blocked()
        assert server_end.statistics().readers == 0 and not server_end.closed
        assert_all_returned(tm1.network_buffer_pool)  # received buffers, exclusive and floating
        partition.release()
        assert_all_returned(tm0.network_buffer_pool)
    (client_end,) = consumers.connections()
    assert client_end.closed and server_end.closed  # the environments stopped
