"""RPC between the JobManager and TaskManager processes: framed, authenticated messages over TCP.

Theory of operation
-------------------
Every message is one frame: a 4-byte big-endian body length, then the body. The body is a
4-byte header length, a JSON object (the header, with a string ``type``), and an optional
blob. Control messages are JSON only. A blob carries what JSON cannot: user code (task
deployments, job graphs) and objects made of it (checkpoint acknowledgements, exceptions)
as a pickle, and its header then holds ``mac``, the HMAC-SHA256 of the blob under the
cluster's secret. ``RpcCodec.next_message`` checks the MAC with ``hmac.compare_digest``
before it hands the blob on; only a checked blob is ever unpickled (``Message.load``).

Before any other message both ends prove they hold the secret (``Handshake``, pure)::

    client -> hello      {nonce_c, role}
    server -> challenge  {nonce_s, proof_s = HMAC(secret, "server" | nonce_c | nonce_s)}
    client -> proof      {proof_c = HMAC(secret, "client" | nonce_c | nonce_s)}
    server -> welcome

Each side checks the other's proof over both fresh nonces, so neither a replayed
conversation nor a peer without the secret gets past it. Until the handshake is done, a
blob is refused outright.

Anything malformed — a frame over ``max_frame_bytes``, a header that is not a JSON object
with a string ``type``, a blob without a valid MAC, an unexpected handshake message —
raises ``ProtocolViolation`` naming what was received; the driver closes the connection.

``RpcConnection`` is the thin Trio driver: ``send_nowait`` queues a message (synchronous,
so task callbacks can report from anywhere), one sender task writes the queue in order,
``receive`` returns the next message or None at end of stream.

What it does not do: no encryption (loopback by default), no replay protection after the
handshake (the connection is the session), no request/response matching (callers put an
id in the header when they need one).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import math
import os
import pickle
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from weir import private_files
from weir.errors import ProtocolViolation, UsageError

SECRET_BYTES = 32
MAX_FRAME_BYTES = 256 << 20  # a deployment carries restored state: generous, but bounded
_LENGTH = struct.Struct("!I")
_BLOB_DOMAIN = b"weir-rpc-blob\0"


class AuthenticationFailed(ProtocolViolation):
    """The peer could not prove it holds the cluster's secret."""


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def blob_mac(secret: bytes, blob: bytes) -> str:
    return hmac.new(secret, _BLOB_DOMAIN + blob, hashlib.sha256).hexdigest()


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` so another process can load it: functions of ``__main__`` (a job file,
    a script) and of modules registered with ``cloudpickle.register_pickle_by_value`` travel
    by value, everything else by reference (its module must be importable there)."""
    import cloudpickle

    buffer = io.BytesIO()
    cloudpickle.CloudPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


@dataclass
class Message:
    """One received message. ``blob`` is present only when its MAC was checked."""

    header: dict[str, Any]
    blob: bytes = b""

    @property
    def type(self) -> str:
        return str(self.header["type"])

    def get(self, key: str, kind: Any, peer: str = "peer") -> Any:
        """A header field of the expected JSON type, or ProtocolViolation naming it."""
        value = self.header.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ProtocolViolation(
                f"{peer} sent {self.type!r} with field {key!r} = {value!r}; expected {kind}"
            )
        return value

    def load(self) -> Any:
        """Unpickle the blob (its MAC under the cluster's secret was verified on receipt)."""
        if not self.blob:
            raise ProtocolViolation(f"message {self.type!r} carries no payload")
        return pickle.loads(self.blob)  # authenticated with HMAC-SHA256 on receipt


class RpcCodec:
    """Frames out, frames in. Pure: bytes and dicts, no sockets."""

    def __init__(self, secret: bytes, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        if len(secret) < 16:
            raise UsageError(f"the cluster secret must have at least 16 bytes, got {len(secret)}")
        self.secret = secret
        self.max_frame_bytes = max_frame_bytes
        self.authenticated = False  # blobs are refused until the handshake is done
        self._buffer = bytearray()

    def encode(self, header: dict[str, Any], blob: bytes = b"") -> bytes:
        if blob:
            header = {**header, "mac": blob_mac(self.secret, blob)}
        head = json.dumps(header, separators=(",", ":")).encode()
        body_len = _LENGTH.size + len(head) + len(blob)
        if body_len > self.max_frame_bytes:
            raise UsageError(
                f"RPC message {header.get('type')!r} is {body_len} bytes, over the limit of "
                f"{self.max_frame_bytes} bytes"
            )
        return b"".join((_LENGTH.pack(body_len), _LENGTH.pack(len(head)), head, blob))

    def receive_data(self, data: bytes) -> None:
        self._buffer += data

    def next_message(self) -> Message | None:
        """The next complete message, or None when more bytes are needed."""
        buf = self._buffer
        if len(buf) < _LENGTH.size:
            return None
        (body_len,) = _LENGTH.unpack_from(buf)
        if body_len > self.max_frame_bytes or body_len < _LENGTH.size:
            raise ProtocolViolation(
                f"received a frame of {body_len} bytes (first bytes {bytes(buf[:16])!r}); "
                f"expected {_LENGTH.size}..{self.max_frame_bytes}"
            )
        if len(buf) < _LENGTH.size + body_len:
            return None
        body = bytes(buf[_LENGTH.size : _LENGTH.size + body_len])
        del buf[: _LENGTH.size + body_len]
        (head_len,) = _LENGTH.unpack_from(body)
        if head_len > len(body) - _LENGTH.size:
            raise ProtocolViolation(f"received a header length of {head_len} in a frame of {body_len} bytes")
        raw = body[_LENGTH.size : _LENGTH.size + head_len]
        blob = body[_LENGTH.size + head_len :]
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            raise ProtocolViolation(f"received a header that is not JSON: {raw[:80]!r}") from None
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise ProtocolViolation(
                f"received header {str(header)[:80]!r}; expected a JSON object with a string 'type'"
            )
        if blob:
            if not self.authenticated:
                raise ProtocolViolation(
                    f"received a payload with {header['type']!r} before the handshake completed"
                )
            mac = header.get("mac")
            if not isinstance(mac, str) or not hmac.compare_digest(mac, blob_mac(self.secret, blob)):
                raise AuthenticationFailed(
                    f"received {header['type']!r} with a payload whose HMAC does not verify under "
                    "the cluster's secret; it was not loaded"
                )
        return Message(header, blob)


def _proof(secret: bytes, role: str, nonce_client: str, nonce_server: str) -> str:
    text = f"{role}|{nonce_client}|{nonce_server}".encode()
    return hmac.new(secret, text, hashlib.sha256).hexdigest()


@dataclass
class Handshake:
    """Mutual challenge-response over the cluster's secret. Pure: header dicts in, out.

    The client calls ``start()`` and sends what it returns; both sides feed every received
    header to ``on_message`` and send what it returns, until ``done``."""

    secret: bytes
    role: str  # "client" | "server"
    peer_role: str = ""  # what the client said it is ("taskmanager", "client"): for logs
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))
    done: bool = False
    _peer_nonce: str = ""
    _state: str = "start"

    def start(self) -> list[dict[str, Any]]:
        if self.role != "client" or self._state != "start":
            raise UsageError(f"only a client starts a handshake (role {self.role}, state {self._state})")
        self._state = "hello_sent"
        return [{"type": "hello", "nonce": self.nonce, "role": self.peer_role or "client"}]

    def on_message(self, header: dict[str, Any]) -> list[dict[str, Any]]:
        kind = header.get("type")
        expected = {
            ("server", "start"): "hello",
            ("client", "hello_sent"): "challenge",
            ("server", "challenged"): "proof",
            ("client", "proof_sent"): "welcome",
        }.get((self.role, self._state))
        if kind != expected:
            raise ProtocolViolation(
                f"RPC handshake ({self.role}, {self._state}): received {str(header)[:80]!r}; "
                f"expected {expected!r}"
            )
        if kind == "hello":
            self._peer_nonce = _nonce(header)
            self.peer_role = str(header.get("role", ""))
            self._state = "challenged"
            proof = _proof(self.secret, "server", self._peer_nonce, self.nonce)
            return [{"type": "challenge", "nonce": self.nonce, "proof": proof}]
        if kind == "challenge":
            self._peer_nonce = _nonce(header)
            _check_proof(header, _proof(self.secret, "server", self.nonce, self._peer_nonce), "server")
            self._state = "proof_sent"
            return [{"type": "proof", "proof": _proof(self.secret, "client", self.nonce, self._peer_nonce)}]
        if kind == "proof":
            _check_proof(header, _proof(self.secret, "client", self._peer_nonce, self.nonce), "client")
            self._state = "done"
            self.done = True
            return [{"type": "welcome"}]
        self._state = "done"
        self.done = True
        return []


def _nonce(header: dict[str, Any]) -> str:
    nonce = header.get("nonce")
    if not isinstance(nonce, str) or len(nonce) != 32 or any(c not in "0123456789abcdef" for c in nonce):
        raise ProtocolViolation(f"RPC handshake: received nonce {nonce!r}; expected 32 hex digits")
    return nonce


def _check_proof(header: dict[str, Any], expected: str, who: str) -> None:
    proof = header.get("proof")
    if not isinstance(proof, str) or not hmac.compare_digest(proof, expected):
        raise AuthenticationFailed(
            f"RPC handshake: the {who} could not prove it holds the cluster's secret "
            f"(received proof {str(proof)[:16]!r}...)"
        )


# -- the Trio driver -------------------------------------------------------------------------------


class RpcConnection:
    """One authenticated connection. ``send_nowait`` queues; ``run_sender`` writes the queue."""

    def __init__(self, stream: trio.abc.Stream, secret: bytes, name: str = "peer") -> None:
        self.stream = stream
        self.codec = RpcCodec(secret)
        self.name = name
        self._send, self._queue = trio.open_memory_channel[bytes](math.inf)
        self.closed = False
        self._last: Callable[[], None] = lambda: None

    async def _receive_raw(self) -> Message | None:
        while True:
            message = self.codec.next_message()
            if message is not None:
                return message
            data = await self.stream.receive_some(1 << 16)
            if not data:
                return None
            self.codec.receive_data(bytes(data))

    async def handshake(self, role: str, peer_role: str = "") -> str:
        """Authenticate both ends (role "client" or "server"); returns the role the client
        named. Raises ProtocolViolation (AuthenticationFailed) or EOFError. Cancellation:
        the connection is left half-done; close it."""
        shake = Handshake(self.codec.secret, role, peer_role=peer_role)
        out = shake.start() if role == "client" else []
        while True:
            for header in out:
                await self.stream.send_all(self.codec.encode(header))
            if shake.done:
                break
            message = await self._receive_raw()
            if message is None:
                raise EOFError(f"{self.name} closed the connection during the RPC handshake")
            out = shake.on_message(message.header)
        self.codec.authenticated = True
        return shake.peer_role

    def send_nowait(self, header: dict[str, Any], payload: Any = None, *, blob: bytes = b"") -> None:
        """Queue a message; ``payload`` (any object) travels pickled and signed."""
        if self.closed:
            return  # the peer is gone: its loss is handled where the connection ended
        if payload is not None:
            blob = dumps(payload)
        self._send.send_nowait(self.codec.encode(header, blob))

    async def send(self, header: dict[str, Any], payload: Any = None) -> None:
        """Write one message now (request/response connections, with no sender task)."""
        blob = dumps(payload) if payload is not None else b""
        await self.stream.send_all(self.codec.encode(header, blob))

    def send_frame_nowait(self, frame: bytes) -> None:
        """Queue a frame encoded with this connection's codec (or one with the same secret)."""
        if not self.closed:
            self._send.send_nowait(frame)

    def send_last_nowait(self, then: Callable[[], None]) -> None:
        """Queue nothing more: once every message queued so far is written, call ``then``
        (a process that must die right after its last words, e.g. failure injection)."""
        self._last = then
        self._send.send_nowait(b"")
        self.closed = True

    async def run_sender(self) -> None:
        """Write queued messages in order until cancelled or the peer goes away."""
        try:
            async for frame in self._queue:
                if not frame:  # send_last_nowait: everything before it is written
                    self._last()
                    return
                await self.stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed = True

    async def receive(self) -> Message | None:
        """The next message, None at end of stream (or a reset connection)."""
        try:
            return await self._receive_raw()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionResetError):
            return None

    async def aclose(self) -> None:
        self.closed = True
        with trio.CancelScope(shield=True):
            await self.stream.aclose()


async def connect(host: str, port: int, secret: bytes, role: str) -> RpcConnection:
    """Open an authenticated connection to the JobManager at host:port as ``role``."""
    stream = await trio.open_tcp_stream(host, port)
    connection = RpcConnection(stream, secret, name=f"JobManager {host}:{port}")
    try:
        await connection.handshake("client", peer_role=role)
    except BaseException:
        await connection.aclose()
        raise
    return connection


# -- the cluster's secret ---------------------------------------------------------------------------


def cluster_dir() -> Path:
    """``$WEIR_HOME/cluster``: the standalone cluster's secret, addresses and pids (0700)."""
    return private_files.weir_home() / "cluster"


def secret_path() -> Path:
    return cluster_dir() / "secret"


def create_cluster_secret() -> bytes:
    """A new secret in ``$WEIR_HOME/cluster/secret`` (0600 in a 0700 directory)."""
    private_files.private_dir(private_files.weir_home())
    directory = private_files.private_dir(cluster_dir())
    secret = new_secret()
    private_files.write_private(directory / "secret", secret.hex().encode())
    return secret


def read_cluster_secret(path: Path | None = None) -> bytes:
    """The standalone cluster's secret; UsageError when there is none or it is not private."""
    path = path or secret_path()
    try:
        private_files.check_private_dir(path.parent)
        text = private_files.read_private(path, max_bytes=1024).decode().strip()
        secret = bytes.fromhex(text)
    except FileNotFoundError:
        raise UsageError(
            f"no cluster secret at {path}: start a cluster with `weir cluster start` first"
        ) from None
    except ValueError as exc:
        raise UsageError(f"the cluster secret at {path} is unreadable: {exc}") from None
    if len(secret) < 16:
        raise UsageError(f"the cluster secret at {path} is too short ({len(secret)} bytes)")
    return secret


def secret_from_env_fd(fd: int) -> bytes:
    """Read the secret a parent process wrote (hex, one line) into pipe ``fd``."""
    with os.fdopen(fd, "rb") as pipe:
        text = pipe.readline(4096).decode().strip()
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise UsageError("the secret handed to this process is not hex") from None
