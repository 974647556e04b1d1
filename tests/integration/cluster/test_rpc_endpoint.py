"""The JobManager's RPC endpoint against peers that do not hold the secret or send garbage.

A real listening socket on loopback; the test plays the peer with raw frames."""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from weir.cluster import rpc
from weir.cluster.gateway import JobManagerEndpoint, RemoteTaskHandle
from weir.cluster.resource_manager import ResourceManager

SECRET = rpc.new_secret()


class Planted:
    """Unpickling this creates ``path``: the proof that a payload was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (Path(self.path),))  # type: ignore[return-value]


async def open_endpoint(nursery: trio.Nursery) -> JobManagerEndpoint:
    endpoint = JobManagerEndpoint(SECRET, ResourceManager(), [])
    await nursery.start(endpoint.serve)
    return endpoint


async def until_closed(stream: trio.SocketStream) -> None:
    """Read until the endpoint closes the connection (the event the tests wait for)."""
    with trio.fail_after(30):
        try:
            while await stream.receive_some(1 << 16):
                pass
        except trio.BrokenResourceError:
            pass  # closed with our data unread: a reset


def frame(header: dict[str, object], blob: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    body = struct.pack("!I", len(head)) + head + blob
    return struct.pack("!I", len(body)) + body


async def test_a_peer_without_the_secret_is_closed_before_any_request(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        endpoint = await open_endpoint(nursery)
        with pytest.raises(rpc.AuthenticationFailed, match="the server could not prove"):
            await rpc.connect("127.0.0.1", endpoint.port, rpc.new_secret(), "client")
        # one that skips checking the server and forges its own proof
        stream = await trio.open_tcp_stream("127.0.0.1", endpoint.port)
        await stream.send_all(frame({"type": "hello", "nonce": "a" * 32, "role": "taskmanager"}))
        await stream.send_all(frame({"type": "proof", "proof": "0" * 64}))
        await stream.send_all(frame({"type": "submit"}, pickle.dumps(Planted(str(tmp_path / "ran")))))
        await until_closed(stream)
        nursery.cancel_scope.cancel()
    assert any("the client could not prove" in v for v in endpoint.violations), endpoint.violations
    assert not (tmp_path / "ran").exists()
    assert endpoint.gateways == {}


async def test_a_forged_payload_after_the_handshake_is_refused_unread(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        endpoint = await open_endpoint(nursery)
        connection = await rpc.connect("127.0.0.1", endpoint.port, SECRET, "taskmanager")
        await connection.send({"type": "register", "taskmanager_id": "tm", "slots": 1, "pid": 1})
        blob = pickle.dumps(Planted(str(tmp_path / "ran")))
        forged = {"type": "checkpoint_ack", "execution_id": "x", "mac": rpc.blob_mac(b"k" * 32, blob)}
        await connection.stream.send_all(frame(forged, blob))
        await until_closed(connection.stream)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
    assert any("HMAC does not verify" in v for v in endpoint.violations), endpoint.violations
    assert not (tmp_path / "ran").exists()


async def test_a_malformed_message_closes_the_connection_naming_what_came() -> None:
    async with trio.open_nursery() as nursery:
        endpoint = await open_endpoint(nursery)
        connection = await rpc.connect("127.0.0.1", endpoint.port, SECRET, "taskmanager")
        await connection.send({"type": "register", "taskmanager_id": "tm", "slots": 1, "pid": 1})
        await connection.stream.send_all(struct.pack("!II", 12, 8) + b"not json")
        await until_closed(connection.stream)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
    assert any("header that is not JSON: b'not json'" in v for v in endpoint.violations), endpoint.violations
    assert endpoint.gateways["tm"].connection is None  # the TaskManager is gone with its connection


async def test_collected_records_reach_the_jobs_channel_and_records_of_another_node_close_the_connection() -> (
    None
):
    """A TaskManager's ``collect`` message goes to the collect channel of its task's node and is
    acknowledged; one naming a node that collects nothing is a protocol violation."""
    async with trio.open_nursery() as nursery:
        endpoint = await open_endpoint(nursery)
        connection = await rpc.connect("127.0.0.1", endpoint.port, SECRET, "taskmanager")
        await connection.send({"type": "register", "taskmanager_id": "tm", "slots": 1, "pid": 1})
        assert (await connection.receive()).type == "registered"  # type: ignore[union-attr]
        gateway = endpoint.gateways["tm"]
        send, receive = trio.open_memory_channel[tuple[object, ...]](0)
        deployment = SimpleNamespace(execution_id="e1", collect_channels={7: send})
        gateway.tasks["e1"] = RemoteTaskHandle(deployment, lambda *a: None, gateway)  # type: ignore[arg-type]
        records = ("records", 0, [("a", 1), ("b", 2)])
        await connection.send({"type": "collect", "execution_id": "e1", "node": 7}, records)
        with trio.fail_after(30):
            assert await receive.receive() == records
            while (reply := await connection.receive()) is not None and reply.type != "collect_ack":
                pass  # peers, ...
        assert reply is not None and reply.header == {"type": "collect_ack", "execution_id": "e1", "node": 7}
        await connection.send(
            {"type": "collect", "execution_id": "e1", "node": 8}, ("records", 2, [("c", 3)])
        )
        await until_closed(connection.stream)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
    assert any(
        "sent records of node 8 for e1, which collects none (collect nodes: [7])" in v
        for v in endpoint.violations
    ), endpoint.violations
