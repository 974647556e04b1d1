"""The wire format of the TCP transport: frames for the eight transport messages, and the handshake. Pure.

Theory of operation
-------------------
A connection carries the messages of ``weir.network.transport`` as frames::

    frame   = length:u32  message_id:u8  fields  payload      (length counts everything after itself)

All integers are big-endian. Fixed fields are a ``struct`` layout per message; the
payload is whatever the frame has after them, so no payload needs a length of its own:

    id  message                 fields                                         payload
    1   PartitionRequest        receiver_id:u32 subpartition:u32 credit:u32    partition id (UTF-8, 1..1024 bytes)
    2   AddCredit               receiver_id:u32 credit:u32 (>= 1)              -
    3   CancelPartitionRequest  receiver_id:u32                                -
    4   CloseRequest            -                                              -
    5   BufferResponse          receiver_id:u32 backlog:u32                    the buffer's bytes (<= max_buffer_bytes)
    6   EventResponse           receiver_id:u32 backlog:u32 event_type:u8      the event's fields (below)
    7   BacklogAnnouncement     receiver_id:u32 backlog:u32                    -
    8   ErrorResponse           receiver_id:u32 error_kind:u8                  message text (UTF-8, <= 4096 bytes)

A ``BufferResponse`` carries the network buffer's bytes exactly as they are (the record
frames the codec wrote into it); nothing is re-serialized. Events are data, never
pickles: 1 EndOfPartition, 2 EndOfData, 3 Watermark (timestamp:i64), 4 WatermarkStatus
(idle:u8 0|1), 5 CheckpointBarrier (checkpoint_id:i64 timestamp:i64 flags:u8 with bits
savepoint=1, unaligned=2, native=4), 6 CancelCheckpointMarker (checkpoint_id:i64). An
``ErrorResponse`` names the error's class by a kind (``ERROR_KINDS``) and carries its text.

``WireCodec`` is sans-IO: ``encode(message) -> bytes`` and ``feed(bytes) -> messages``.
``feed`` keeps at most one incomplete frame between calls (a server's codec decodes only
requests, a client's only responses); ``end_of_stream()`` says
whether the peer stopped in the middle of one. Anything malformed -- an unknown message id
or event type, a length beyond the maximum, fields that do not fill the frame exactly
(truncated or trailing bytes), a value out of range, text that is not UTF-8 -- raises
``ProtocolViolation`` naming what was received; the codec is then unusable (the driver
closes the connection). Decoded ``BufferResponse.data`` is a read-only slice of the bytes
fed in (no copy); it stays valid for as long as it is referenced.

The handshake comes before any frame, and both sides prove that they know the cluster's
secret without sending it (a nonce challenge each way, HMAC-SHA256, compared with
``hmac.compare_digest``)::

    client -> server   ClientHello  magic "WEIRNET1", nonce_c:32 bytes, id_len:u16, client taskmanager id
    server -> client   ServerHello  magic, nonce_s:32, proof_s:32, id_len:u16, server taskmanager id
    client -> server   ClientProof  proof_c:32

    proof_s = HMAC(secret, "server" nonce_c nonce_s id_len client_id id_len server_id)
    proof_c = HMAC(secret, "client" nonce_c nonce_s id_len client_id id_len server_id)

Each proof covers both fresh nonces and a role label, so a proof from one connection or
role cannot be replayed in another. The server reads no frame before ``proof_c`` checked
out, and the client sends none before ``proof_s`` did.

What it does not do: no sockets, no waiting, no timeouts (the driver's).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from weir.errors import ProtocolViolation, UsageError, WeirError
from weir.network.errors import ConnectionClosed, NetworkError, PartitionReleased
from weir.network.events import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfData,
    EndOfPartition,
    Event,
    Watermark,
    WatermarkStatus,
)
from weir.network.messages import (
    AddCredit,
    BacklogAnnouncement,
    BufferResponse,
    CancelPartitionRequest,
    CloseRequest,
    ErrorResponse,
    EventResponse,
    PartitionRequest,
)

__all__ = [
    "ERROR_KINDS",
    "HANDSHAKE_MAGIC",
    "MAX_ERROR_TEXT_BYTES",
    "MAX_PARTITION_ID_BYTES",
    "NONCE_BYTES",
    "PROOF_BYTES",
    "ClientHello",
    "Message",
    "ServerHello",
    "WireCodec",
    "client_proof",
    "decode_client_hello",
    "decode_server_hello",
    "encode_client_hello",
    "encode_server_hello",
    "server_proof",
]

Message = (
    PartitionRequest
    | AddCredit
    | CancelPartitionRequest
    | CloseRequest
    | BufferResponse
    | EventResponse
    | BacklogAnnouncement
    | ErrorResponse
)

MAX_PARTITION_ID_BYTES = 1024
MAX_ERROR_TEXT_BYTES = 4096
_U32 = (1 << 32) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

_LENGTH = struct.Struct("!I")
_HEADER = struct.Struct("!IB")  # length, message id
_BUFFER_HEAD = struct.Struct("!IBII")  # length, message id, receiver id, backlog
_PARTITION_REQUEST = struct.Struct("!III")
_TWO_U32 = struct.Struct("!II")
_ONE_U32 = struct.Struct("!I")
_EVENT_HEAD = struct.Struct("!IIB")
_ERROR_HEAD = struct.Struct("!IB")
_I64 = struct.Struct("!q")
_U8 = struct.Struct("!B")
_BARRIER = struct.Struct("!qqB")

_PARTITION_REQUEST_ID = 1
_ADD_CREDIT_ID = 2
_CANCEL_ID = 3
_CLOSE_ID = 4
_BUFFER_ID = 5
_EVENT_ID = 6
_BACKLOG_ID = 7
_ERROR_ID = 8
_MESSAGE_NAMES = {
    _PARTITION_REQUEST_ID: "PartitionRequest",
    _ADD_CREDIT_ID: "AddCredit",
    _CANCEL_ID: "CancelPartitionRequest",
    _CLOSE_ID: "CloseRequest",
    _BUFFER_ID: "BufferResponse",
    _EVENT_ID: "EventResponse",
    _BACKLOG_ID: "BacklogAnnouncement",
    _ERROR_ID: "ErrorResponse",
}

_REQUESTS = frozenset((_PARTITION_REQUEST_ID, _ADD_CREDIT_ID, _CANCEL_ID, _CLOSE_ID))
_RESPONSES = frozenset((_BUFFER_ID, _EVENT_ID, _BACKLOG_ID, _ERROR_ID))
_ACCEPT = {"all": _REQUESTS | _RESPONSES, "requests": _REQUESTS, "responses": _RESPONSES}

_END_OF_PARTITION, _END_OF_DATA, _WATERMARK, _WATERMARK_STATUS, _BARRIER_TYPE, _CANCEL_MARKER = range(1, 7)
_SAVEPOINT, _UNALIGNED, _NATIVE = 1, 2, 4

#: error kind on the wire -> the class the receiver raises (0: any other error)
ERROR_KINDS: dict[int, type[WeirError]] = {
    0: NetworkError,
    1: ProtocolViolation,
    2: PartitionReleased,
    3: ConnectionClosed,
    4: UsageError,
}


def _error_kind(error: BaseException) -> int:
    for kind in (1, 2, 3, 4):  # most specific first: ProtocolViolation before the others
        if isinstance(error, ERROR_KINDS[kind]):
            return kind
    return 0


class WireCodec:
    """Frames transport messages; one per connection and direction pair (sans-IO)."""

    __slots__ = (
        "_accepted",
        "_broken",
        "_pending",
        "_pending_need",
        "accept",
        "max_body_bytes",
        "max_buffer_bytes",
        "peer",
    )

    def __init__(self, max_buffer_bytes: int, peer: str = "peer", accept: str = "all") -> None:
        """``accept``: what ``feed`` may decode -- "requests" (a server: client messages only),
        "responses" (a client: server messages only) or "all"."""
        if max_buffer_bytes < 1:
            raise UsageError(f"wire codec: max_buffer_bytes must be at least 1, got {max_buffer_bytes}")
        if accept not in _ACCEPT:
            raise UsageError(f"wire codec: accept must be one of {', '.join(_ACCEPT)}, got {accept!r}")
        self.accept = accept
        self._accepted = _ACCEPT[accept]
        self.max_buffer_bytes = max_buffer_bytes
        #: the largest frame body (message id onwards) this codec accepts
        self.max_body_bytes = 1 + max(_TWO_U32.size + max_buffer_bytes, 64 + MAX_ERROR_TEXT_BYTES)
        self.peer = peer
        self._pending = b""  # an incomplete frame: its bytes so far
        self._pending_need = 0  # bytes still missing from it (0: the length itself is incomplete)
        self._broken: ProtocolViolation | None = None

    # --- encoding ---------------------------------------------------------------------

    def encode(self, message: Message) -> bytes:
        """The frame of ``message``. A value the format cannot carry is a ``UsageError``."""
        out = bytearray()
        self.encode_into(out, message)
        return bytes(out)

    def encode_into(self, out: bytearray, message: Message) -> None:
        """Append the frame of ``message`` to ``out`` (a buffer's bytes are copied once, here)."""
        if type(message) is BufferResponse:
            data = message.data
            if len(data) > self.max_buffer_bytes:
                raise UsageError(
                    f"BufferResponse of {len(data)} bytes exceeds the wire's {self.max_buffer_bytes}-byte buffers"
                )
            try:
                out += _BUFFER_HEAD.pack(
                    1 + _TWO_U32.size + len(data), _BUFFER_ID, message.receiver_id, message.backlog
                )
            except struct.error as error:
                raise UsageError(
                    f"BufferResponse: a field is out of the wire's range ({error}): {message!r}"
                ) from None
            out += data
            return
        out += self._encode_other(message)

    def _encode_other(self, message: Message) -> bytes:
        kind = type(message)
        try:
            if kind is AddCredit:
                assert isinstance(message, AddCredit)
                if message.credit < 1:
                    raise UsageError(f"AddCredit: credit must be at least 1, got {message.credit}")
                return _frame(_ADD_CREDIT_ID, _TWO_U32.pack(message.receiver_id, message.credit))
            if kind is EventResponse:
                assert isinstance(message, EventResponse)
                fields = _TWO_U32.pack(message.receiver_id, message.backlog)
                return _frame(_EVENT_ID, fields + _encode_event(message.event))  # the event's type byte first
            if kind is BacklogAnnouncement:
                assert isinstance(message, BacklogAnnouncement)
                return _frame(_BACKLOG_ID, _TWO_U32.pack(message.receiver_id, message.backlog))
            if kind is PartitionRequest:
                assert isinstance(message, PartitionRequest)
                pid = message.partition_id.encode("utf-8")
                if not 1 <= len(pid) <= MAX_PARTITION_ID_BYTES:
                    raise UsageError(
                        f"PartitionRequest: partition id of {len(pid)} bytes "
                        f"(expected 1..{MAX_PARTITION_ID_BYTES}): {message.partition_id[:80]!r}"
                    )
                fields = _PARTITION_REQUEST.pack(
                    message.receiver_id, message.subpartition_index, message.initial_credit
                )
                return _frame(_PARTITION_REQUEST_ID, fields + pid)
            if kind is CancelPartitionRequest:
                assert isinstance(message, CancelPartitionRequest)
                return _frame(_CANCEL_ID, _ONE_U32.pack(message.receiver_id))
            if kind is CloseRequest:
                return _frame(_CLOSE_ID, b"")
            if kind is ErrorResponse:
                assert isinstance(message, ErrorResponse)
                text = str(message.error).encode("utf-8")[:MAX_ERROR_TEXT_BYTES].decode("utf-8", "ignore")
                fields = _ERROR_HEAD.pack(message.receiver_id, _error_kind(message.error))
                return _frame(_ERROR_ID, fields + text.encode("utf-8"))
        except struct.error as error:
            raise UsageError(
                f"{kind.__name__}: a field is out of the wire's range ({error}): {message!r}"
            ) from None
        raise UsageError(f"wire codec: {kind.__name__} is not a transport message (got {message!r})")

    # --- decoding ---------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Message]:
        """The messages completed by ``data`` (in order); an incomplete frame waits for more.

        Raises ``ProtocolViolation`` on the first malformed frame; the codec stays broken.
        """
        if self._broken is not None:
            raise self._broken
        try:
            return self._feed(data)
        except ProtocolViolation as violation:
            self._broken = violation
            raise

    def end_of_stream(self) -> None:
        """The peer closed its side: a frame cut short is a ``ProtocolViolation``."""
        if self._pending:
            have = len(self._pending)
            if self._pending_need:
                total = have + self._pending_need
                what = f"{have} of a {total}-byte frame"
            else:
                what = f"{have} bytes of a frame's length"
            raise ProtocolViolation(f"{self.peer}: stream ended inside a frame (truncated: {what})")

    def _feed(self, data: bytes) -> list[Message]:
        out: list[Message] = []
        view = memoryview(data)
        pos = 0
        end = len(data)
        if self._pending:
            pending = self._pending
            if not self._pending_need:  # the 4 length bytes were incomplete
                take = min(_LENGTH.size - len(pending), end)
                pending += bytes(view[:take])
                pos = take
                if len(pending) < _LENGTH.size:
                    self._pending = pending
                    return out
                body_length = self._check_length(_LENGTH.unpack(pending)[0])
                self._pending_need = body_length
            take = min(self._pending_need, end - pos)
            pending += bytes(view[pos : pos + take])
            pos += take
            self._pending_need -= take
            if self._pending_need:
                self._pending = pending
                return out
            self._pending = b""
            frame = memoryview(pending)
            out.append(self._decode_body(frame, _LENGTH.size, len(pending)))
        unpack_length = _LENGTH.unpack_from
        while pos < end:
            if end - pos < _LENGTH.size:
                self._pending = bytes(view[pos:])
                self._pending_need = 0
                break
            body_length = self._check_length(unpack_length(view, pos)[0])
            start = pos + _LENGTH.size
            stop = start + body_length
            if stop > end:
                self._pending = bytes(view[pos:])
                self._pending_need = stop - end
                break
            out.append(self._decode_body(view, start, stop))
            pos = stop
        return out

    def _check_length(self, body_length: int) -> int:
        if body_length < 1:
            raise ProtocolViolation(f"{self.peer}: frame of length 0 (expected at least the message id)")
        if body_length > self.max_body_bytes:
            raise ProtocolViolation(
                f"{self.peer}: frame length {body_length} exceeds the maximum of {self.max_body_bytes} bytes"
            )
        return body_length

    def _decode_body(self, view: memoryview, start: int, stop: int) -> Message:
        message_id = view[start]
        if message_id not in self._accepted and message_id in _MESSAGE_NAMES:
            sender = "server" if message_id in _RESPONSES else "client"
            raise ProtocolViolation(
                f"{self.peer}: sent a {_MESSAGE_NAMES[message_id]} (message id {message_id}), "
                f"which only a {sender} sends"
            )
        pos = start + 1
        if message_id == _BUFFER_ID:
            _need(self.peer, "BufferResponse", stop - pos, _TWO_U32.size, exact=False)
            receiver_id, backlog = _TWO_U32.unpack_from(view, pos)
            data = view[pos + _TWO_U32.size : stop].toreadonly()
            if len(data) > self.max_buffer_bytes:
                raise ProtocolViolation(
                    f"{self.peer}: BufferResponse of {len(data)} bytes exceeds the {self.max_buffer_bytes}-byte buffers"
                )
            return BufferResponse(receiver_id, data, backlog)
        if message_id == _ADD_CREDIT_ID:
            _need(self.peer, "AddCredit", stop - pos, _TWO_U32.size)
            receiver_id, credit = _TWO_U32.unpack_from(view, pos)
            if credit < 1:
                raise ProtocolViolation(
                    f"{self.peer}: AddCredit for receiver {receiver_id} with credit {credit} (expected >= 1)"
                )
            return AddCredit(receiver_id, credit)
        if message_id == _EVENT_ID:
            _need(self.peer, "EventResponse", stop - pos, _EVENT_HEAD.size, exact=False)
            receiver_id, backlog, event_type = _EVENT_HEAD.unpack_from(view, pos)
            event = _decode_event(self.peer, event_type, view[pos + _EVENT_HEAD.size : stop])
            return EventResponse(receiver_id, event, backlog)
        if message_id == _BACKLOG_ID:
            _need(self.peer, "BacklogAnnouncement", stop - pos, _TWO_U32.size)
            receiver_id, backlog = _TWO_U32.unpack_from(view, pos)
            return BacklogAnnouncement(receiver_id, backlog)
        if message_id == _PARTITION_REQUEST_ID:
            _need(self.peer, "PartitionRequest", stop - pos, _PARTITION_REQUEST.size, exact=False)
            receiver_id, subpartition, credit = _PARTITION_REQUEST.unpack_from(view, pos)
            raw = bytes(view[pos + _PARTITION_REQUEST.size : stop])
            if not 1 <= len(raw) <= MAX_PARTITION_ID_BYTES:
                raise ProtocolViolation(
                    f"{self.peer}: PartitionRequest with a partition id of {len(raw)} bytes "
                    f"(expected 1..{MAX_PARTITION_ID_BYTES})"
                )
            return PartitionRequest(
                receiver_id, _utf8(self.peer, "PartitionRequest partition id", raw), subpartition, credit
            )
        if message_id == _CANCEL_ID:
            _need(self.peer, "CancelPartitionRequest", stop - pos, _ONE_U32.size)
            return CancelPartitionRequest(_ONE_U32.unpack_from(view, pos)[0])
        if message_id == _CLOSE_ID:
            _need(self.peer, "CloseRequest", stop - pos, 0)
            return CloseRequest()
        if message_id == _ERROR_ID:
            _need(self.peer, "ErrorResponse", stop - pos, _ERROR_HEAD.size, exact=False)
            receiver_id, kind = _ERROR_HEAD.unpack_from(view, pos)
            raw = bytes(view[pos + _ERROR_HEAD.size : stop])
            if len(raw) > MAX_ERROR_TEXT_BYTES:
                raise ProtocolViolation(
                    f"{self.peer}: ErrorResponse text of {len(raw)} bytes (at most {MAX_ERROR_TEXT_BYTES})"
                )
            error_class = ERROR_KINDS.get(kind)
            if error_class is None:
                raise ProtocolViolation(
                    f"{self.peer}: ErrorResponse with unknown error kind {kind} (known: {sorted(ERROR_KINDS)})"
                )
            return ErrorResponse(receiver_id, error_class(_utf8(self.peer, "ErrorResponse text", raw)))
        raise ProtocolViolation(
            f"{self.peer}: unknown message id {message_id} in a frame of {stop - start} bytes "
            f"(known: {', '.join(f'{i} {n}' for i, n in _MESSAGE_NAMES.items())})"
        )


def _frame(message_id: int, fields: bytes) -> bytes:
    return _HEADER.pack(1 + len(fields), message_id) + fields


def _need(peer: str, name: str, have: int, need: int, *, exact: bool = True) -> None:
    if have < need:
        raise ProtocolViolation(f"{peer}: {name} truncated: {have} bytes of fields, expected {need}")
    if exact and have > need:
        raise ProtocolViolation(
            f"{peer}: {name} with {have - need} trailing bytes (expected {need} bytes of fields)"
        )


def _utf8(peer: str, what: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolViolation(f"{peer}: {what} is not UTF-8: {raw[:40]!r}") from None


def _encode_event(event: Event) -> bytes:
    kind = type(event)
    if kind is EndOfPartition:
        return _U8.pack(_END_OF_PARTITION)
    if kind is EndOfData:
        return _U8.pack(_END_OF_DATA)
    if kind is Watermark:
        assert isinstance(event, Watermark)
        return _U8.pack(_WATERMARK) + _I64.pack(event.timestamp)
    if kind is WatermarkStatus:
        assert isinstance(event, WatermarkStatus)
        return _U8.pack(_WATERMARK_STATUS) + _U8.pack(1 if event.idle else 0)
    if kind is CheckpointBarrier:
        assert isinstance(event, CheckpointBarrier)
        flags = (
            (_SAVEPOINT if event.is_savepoint else 0)
            | (_UNALIGNED if event.unaligned else 0)
            | (_NATIVE if event.native else 0)
        )
        return _U8.pack(_BARRIER_TYPE) + _BARRIER.pack(event.checkpoint_id, event.timestamp, flags)
    if kind is CancelCheckpointMarker:
        assert isinstance(event, CancelCheckpointMarker)
        return _U8.pack(_CANCEL_MARKER) + _I64.pack(event.checkpoint_id)
    raise UsageError(
        f"wire codec: event {event!r} has no wire encoding (known: EndOfPartition, EndOfData, Watermark, "
        "WatermarkStatus, CheckpointBarrier, CancelCheckpointMarker)"
    )


def _decode_event(peer: str, event_type: int, fields: memoryview) -> Event:
    have = len(fields)
    if event_type == _END_OF_PARTITION:
        _need(peer, "EventResponse EndOfPartition", have, 0)
        return EndOfPartition()
    if event_type == _END_OF_DATA:
        _need(peer, "EventResponse EndOfData", have, 0)
        return EndOfData()
    if event_type == _WATERMARK:
        _need(peer, "EventResponse Watermark", have, _I64.size)
        return Watermark(_I64.unpack_from(fields)[0])
    if event_type == _WATERMARK_STATUS:
        _need(peer, "EventResponse WatermarkStatus", have, _U8.size)
        idle = fields[0]
        if idle > 1:
            raise ProtocolViolation(f"{peer}: WatermarkStatus idle flag {idle} (expected 0 or 1)")
        return WatermarkStatus(bool(idle))
    if event_type == _BARRIER_TYPE:
        _need(peer, "EventResponse CheckpointBarrier", have, _BARRIER.size)
        checkpoint_id, timestamp, flags = _BARRIER.unpack_from(fields)
        if flags & ~(_SAVEPOINT | _UNALIGNED | _NATIVE):
            raise ProtocolViolation(f"{peer}: CheckpointBarrier flags {flags:#04x} (known bits: 0x07)")
        return CheckpointBarrier(
            checkpoint_id,
            timestamp,
            bool(flags & _SAVEPOINT),
            bool(flags & _UNALIGNED),
            bool(flags & _NATIVE),
        )
    if event_type == _CANCEL_MARKER:
        _need(peer, "EventResponse CancelCheckpointMarker", have, _I64.size)
        return CancelCheckpointMarker(_I64.unpack_from(fields)[0])
    raise ProtocolViolation(f"{peer}: EventResponse with unknown event type {event_type} (known: 1..6)")


# --- handshake --------------------------------------------------------------------------

HANDSHAKE_MAGIC = b"WEIRNET1"
NONCE_BYTES = 32
PROOF_BYTES = 32
MAX_TASKMANAGER_ID_BYTES = 256
_ID_LEN = struct.Struct("!H")


@dataclass(frozen=True)
class ClientHello:
    nonce: bytes
    taskmanager_id: str


@dataclass(frozen=True)
class ServerHello:
    nonce: bytes
    proof: bytes
    taskmanager_id: str


def _encode_id(taskmanager_id: str) -> bytes:
    raw = taskmanager_id.encode("utf-8")
    if not 1 <= len(raw) <= MAX_TASKMANAGER_ID_BYTES:
        raise UsageError(
            f"taskmanager id {taskmanager_id[:80]!r}: {len(raw)} bytes (expected 1..{MAX_TASKMANAGER_ID_BYTES})"
        )
    return _ID_LEN.pack(len(raw)) + raw


def encode_client_hello(hello: ClientHello) -> bytes:
    return HANDSHAKE_MAGIC + hello.nonce + _encode_id(hello.taskmanager_id)


def encode_server_hello(hello: ServerHello) -> bytes:
    return HANDSHAKE_MAGIC + hello.nonce + hello.proof + _encode_id(hello.taskmanager_id)


#: bytes before the taskmanager id's length is known
CLIENT_HELLO_HEAD = len(HANDSHAKE_MAGIC) + NONCE_BYTES + _ID_LEN.size
SERVER_HELLO_HEAD = len(HANDSHAKE_MAGIC) + NONCE_BYTES + PROOF_BYTES + _ID_LEN.size


def hello_id_length(peer: str, head: bytes) -> int:
    """The length of the taskmanager id that follows a hello's fixed head (checks the magic)."""
    if head[: len(HANDSHAKE_MAGIC)] != HANDSHAKE_MAGIC:
        raise ProtocolViolation(
            f"{peer}: handshake starts with {head[: len(HANDSHAKE_MAGIC)]!r}, expected {HANDSHAKE_MAGIC!r} "
            "(not a weir TaskManager, or another protocol version)"
        )
    length: int = _ID_LEN.unpack_from(head, len(head) - _ID_LEN.size)[0]
    if not 1 <= length <= MAX_TASKMANAGER_ID_BYTES:
        raise ProtocolViolation(
            f"{peer}: handshake taskmanager id of {length} bytes (expected 1..{MAX_TASKMANAGER_ID_BYTES})"
        )
    return length


def decode_client_hello(peer: str, head: bytes, raw_id: bytes) -> ClientHello:
    start = len(HANDSHAKE_MAGIC)
    return ClientHello(head[start : start + NONCE_BYTES], _utf8(peer, "handshake taskmanager id", raw_id))


def decode_server_hello(peer: str, head: bytes, raw_id: bytes) -> ServerHello:
    start = len(HANDSHAKE_MAGIC)
    nonce = head[start : start + NONCE_BYTES]
    proof = head[start + NONCE_BYTES : start + NONCE_BYTES + PROOF_BYTES]
    return ServerHello(nonce, proof, _utf8(peer, "handshake taskmanager id", raw_id))


def _proof(secret: bytes, role: bytes, client: ClientHello, server_nonce: bytes, server_id: str) -> bytes:
    message = role + client.nonce + server_nonce + _encode_id(client.taskmanager_id) + _encode_id(server_id)
    return hmac.new(secret, message, hashlib.sha256).digest()


def server_proof(secret: bytes, client: ClientHello, server_nonce: bytes, server_id: str) -> bytes:
    return _proof(secret, b"server", client, server_nonce, server_id)


def client_proof(secret: bytes, client: ClientHello, server_nonce: bytes, server_id: str) -> bytes:
    return _proof(secret, b"client", client, server_nonce, server_id)


def proofs_match(expected: bytes, received: bytes) -> bool:
    return hmac.compare_digest(expected, received)
