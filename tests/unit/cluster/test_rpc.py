"""The RPC codec and handshake (pure): framing, authentication, and what is refused."""

from __future__ import annotations

import json
import pickle
import struct

import pytest

from weir.cluster.rpc import AuthenticationFailed, Handshake, RpcCodec, blob_mac
from weir.errors import ProtocolViolation

SECRET = bytes(range(32))
OTHER = bytes(range(1, 33))


def shake(client_secret: bytes, server_secret: bytes) -> tuple[Handshake, Handshake]:
    client = Handshake(client_secret, "client", peer_role="taskmanager")
    server = Handshake(server_secret, "server")
    to_server = client.start()
    while to_server:
        to_client = [out for message in to_server for out in server.on_message(message)]
        to_server = [out for message in to_client for out in client.on_message(message)]
    return client, server


def test_both_ends_holding_the_secret_complete_the_handshake() -> None:
    client, server = shake(SECRET, SECRET)
    assert client.done and server.done
    assert server.peer_role == "taskmanager"


def test_a_server_without_the_secret_is_refused_by_the_client() -> None:
    with pytest.raises(AuthenticationFailed, match="the server could not prove"):
        shake(SECRET, OTHER)


def test_a_client_without_the_secret_is_refused_by_the_server() -> None:
    client = Handshake(OTHER, "client")
    server = Handshake(SECRET, "server")
    (challenge,) = server.on_message(client.start()[0])
    # the client cannot check the server's proof either, but a forging client skips that check
    forged = {"type": "proof", "proof": "0" * 64}
    assert challenge["type"] == "challenge"
    with pytest.raises(AuthenticationFailed, match="the client could not prove"):
        server.on_message(forged)


def test_a_replayed_proof_does_not_pass_a_fresh_challenge() -> None:
    client = Handshake(SECRET, "client")
    server = Handshake(SECRET, "server")
    (challenge,) = server.on_message(client.start()[0])
    (proof,) = client.on_message(challenge)
    fresh = Handshake(SECRET, "server")
    fresh.on_message({"type": "hello", "nonce": client.nonce})
    with pytest.raises(AuthenticationFailed):
        fresh.on_message(proof)


def test_a_message_out_of_turn_names_what_was_received() -> None:
    with pytest.raises(ProtocolViolation, match=r"received \"\{'type': 'submit'.*expected 'hello'"):
        Handshake(SECRET, "server").on_message({"type": "submit"})


def authenticated() -> RpcCodec:
    codec = RpcCodec(SECRET)
    codec.authenticated = True
    return codec


def test_messages_and_signed_payloads_round_trip_in_pieces() -> None:
    sender, receiver = authenticated(), authenticated()
    data = sender.encode({"type": "heartbeat"}) + sender.encode({"type": "submit"}, pickle.dumps([1, 2]))
    for i in range(len(data)):  # one byte at a time
        receiver.receive_data(data[i : i + 1])
    first, second = receiver.next_message(), receiver.next_message()
    assert first is not None and first.type == "heartbeat" and first.blob == b""
    assert second is not None and second.type == "submit" and second.load() == [1, 2]
    assert receiver.next_message() is None


def frame(header: bytes, blob: bytes = b"") -> bytes:
    body = struct.pack("!I", len(header)) + header + blob
    return struct.pack("!I", len(body)) + body


def test_a_payload_whose_mac_does_not_verify_is_never_loaded() -> None:
    blob = pickle.dumps("payload")
    forged = json.dumps({"type": "submit", "mac": blob_mac(OTHER, blob)}).encode()
    codec = authenticated()
    codec.receive_data(frame(forged, blob))
    with pytest.raises(AuthenticationFailed, match="'submit' with a payload whose HMAC does not verify"):
        codec.next_message()


def test_a_payload_before_the_handshake_is_refused() -> None:
    blob = b"x"
    codec = RpcCodec(SECRET)
    codec.receive_data(frame(json.dumps({"type": "submit", "mac": blob_mac(SECRET, blob)}).encode(), blob))
    with pytest.raises(ProtocolViolation, match="before the handshake completed"):
        codec.next_message()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (frame(b"not json"), "header that is not JSON: b'not json'"),
        (frame(b"[1, 2]"), r"received header '\[1, 2\]'; expected a JSON object"),
        (frame(b'{"kind": 1}'), "with a string 'type'"),
        (struct.pack("!I", 1 << 30) + b"GET / HTTP/1.1", "frame of 1073741824 bytes"),
        (struct.pack("!II", 8, 100) + b"abcd", "header length of 100"),
    ],
)
def test_malformed_frames_raise_protocol_violation_naming_what_came(data: bytes, match: str) -> None:
    codec = authenticated()
    codec.receive_data(data)
    with pytest.raises(ProtocolViolation, match=match):
        codec.next_message()
