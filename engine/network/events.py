"""Events that travel in line with data through partitions and channels.

Events are never serialized into data buffers: a subpartition queue holds buffers and
events in order, and an event first finishes the buffer being written, so it can never
overtake records written before it.
"""

from __future__ import annotations

from dataclasses import dataclass


class Event:
    """Base of in-band events."""


@dataclass(frozen=True)
class EndOfPartition(Event):
    """The producer subtask has finished; nothing follows on this channel."""


@dataclass(frozen=True)
class Watermark(Event):
    """Event time has reached ``timestamp`` on this channel (Long.MAX at end of input)."""

    timestamp: int


MAX_WATERMARK = Watermark((1 << 63) - 1)


@dataclass(frozen=True)
class WatermarkStatus(Event):
    """A channel became idle (excluded from the watermark) or active again."""

    idle: bool


@dataclass(frozen=True)
class CheckpointBarrier(Event):
    checkpoint_id: int
    timestamp: int
    is_savepoint: bool = False
    unaligned: bool = False
    native: bool = False  # a savepoint in the backends' native form (LMDB: its incremental files)


@dataclass(frozen=True)
class EndOfData(Event):
    """All records were sent (bounded input); the consumer may finish its operators."""


@dataclass(frozen=True)
class CancelCheckpointMarker(Event):
    """Upstream aborted ``checkpoint_id``; sent in band instead of (or after) its barrier."""

    checkpoint_id: int
