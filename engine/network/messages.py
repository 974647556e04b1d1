"""The messages of the transport (Flink's NettyMessage family), as plain data. Pure.

Client (consumer TaskManager) to server (producer TaskManager): ``PartitionRequest``,
``AddCredit``, ``CancelPartitionRequest``, ``CloseRequest``; server to client:
``BufferResponse``, ``EventResponse``, ``BacklogAnnouncement``, ``ErrorResponse``.
``transport.py`` says what they mean; ``wire.py`` frames them for TCP.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.network.buffer import BufferOrEvent
from weir.network.events import Event

__all__ = [
    "AddCredit",
    "BacklogAnnouncement",
    "BufferResponse",
    "CancelPartitionRequest",
    "ClientMessage",
    "CloseRequest",
    "ErrorResponse",
    "EventResponse",
    "PartitionRequest",
    "ServerMessage",
]


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    receiver_id: int
    partition_id: str
    subpartition_index: int
    initial_credit: int


@dataclass(frozen=True, slots=True)
class AddCredit:
    receiver_id: int
    credit: int


@dataclass(frozen=True, slots=True)
class CancelPartitionRequest:
    receiver_id: int


@dataclass(frozen=True, slots=True)
class CloseRequest:
    """The client goes away: release every reader of this connection."""


@dataclass(frozen=True, slots=True)
class BufferResponse:
    receiver_id: int
    data: memoryview
    backlog: int
    source: BufferOrEvent | None = None  # in-process: the sender's reference, recycled after the copy

    def release(self) -> None:
        if self.source is not None and not self.source.is_recycled:
            self.source.recycle()


@dataclass(frozen=True, slots=True)
class EventResponse:
    receiver_id: int
    event: Event
    backlog: int


@dataclass(frozen=True, slots=True)
class BacklogAnnouncement:
    """The sender has ``backlog`` buffers for ``receiver_id`` but no credit to send them."""

    receiver_id: int
    backlog: int


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    receiver_id: int
    error: Exception


ClientMessage = PartitionRequest | AddCredit | CancelPartitionRequest | CloseRequest
ServerMessage = BufferResponse | EventResponse | BacklogAnnouncement | ErrorResponse
