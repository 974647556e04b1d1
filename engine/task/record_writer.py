"""RecordWriter: routes a batch to subpartitions, serializes it into frames, writes the frames.

Operators only queue batches and watermarks here (synchronously); the task awaits
``drain`` after each input batch. Draining keeps the queue's order, so an event is never
written ahead of records queued before it.

The writers of one task share a ``FrameCache``: a batch that goes whole (one subpartition,
or broadcast) to several outputs of the same type -- one stream consumed twice -- is
serialized once and its frame written to each.

A writer into a two-phase window (``weir.operators.window.two_phase``) has a ``combiner``:
batches fold into the partial rows it holds, which are queued before the next watermark or
event and whenever ``flush_held`` is called (the task calls it before a barrier and at the
end of input).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from weir.codec.batch import Batch
from weir.network.events import Event, Watermark
from weir.task.channel_selectors import ChannelSelector


class FrameCache:
    """The frame of the last batch a task's writers serialized whole. It keeps that batch
    alive, so an identity match is the same batch; the batch is not changed in between, as
    every writer drains what one input batch produced before the task reads the next."""

    __slots__ = ("batch", "frame", "serializer")

    def __init__(self) -> None:
        self.batch: Batch | None = None
        self.serializer: Any = None
        self.frame = b""

    def encode(self, serializer: Any, batch: Batch) -> bytes:
        if batch is not self.batch or serializer is not self.serializer:
            self.frame = serializer.encode(batch)
            self.batch, self.serializer = batch, serializer
        return self.frame


class RecordWriter:
    def __init__(
        self,
        partition: Any,
        selector: ChannelSelector,
        serializer: Any,
        flush_after_emit: bool,
        frames: FrameCache | None = None,
    ) -> None:
        self.partition = partition
        self.selector = selector
        self.serializer = serializer
        self.frames = frames if frames is not None else FrameCache()
        self.flush_after_emit = flush_after_emit
        self.num_channels: int = partition.num_subpartitions
        self.pending: deque[Batch | Event] = deque()
        self.records_out = 0
        self.last_watermark = -(1 << 63)
        #: the local phase of a two-phase window downstream (``two_phase.LocalAggregator``)
        self.combiner: Any = None

    # -- the synchronous side (called by operators through outputs) ----------------------------
    def add(self, batch: Batch) -> None:
        if len(batch):
            if self.combiner is not None:
                self.pending.extend(self.combiner.add(batch, self.last_watermark))
            else:
                self.pending.append(batch)

    def add_watermark(self, timestamp: int) -> None:
        if timestamp > self.last_watermark:
            self.flush_held()
            self.last_watermark = timestamp
            self.pending.append(Watermark(timestamp))

    def add_event(self, event: Event) -> None:
        self.flush_held()
        self.pending.append(event)

    def flush_held(self) -> None:
        """Queue the partial rows the local phase holds (before a barrier, at the end of input)."""
        if self.combiner is not None:
            batch = self.combiner.flush()
            if batch is not None:
                self.pending.append(batch)

    # -- the asynchronous side -----------------------------------------------------------------
    async def drain(self) -> None:
        """Write everything queued. Cancellation: the item being written may be partly written;
        the job is being torn down then, so nothing downstream reads it."""
        pending = self.pending
        while pending:
            item = pending[0]
            if isinstance(item, Batch):
                await self._write(item)
            else:
                await self.partition.broadcast_event(item)
            pending.popleft()

    async def _write(self, batch: Batch) -> None:
        partition = self.partition
        n = self.num_channels
        self.records_out += len(batch)
        if n == 1 or self.selector.broadcast:
            frame = self.frames.encode(self.serializer, batch)
            if n == 1:
                await partition.emit(0, frame)
            else:
                await partition.broadcast_emit(frame)
        else:
            channels = self.selector.select(batch, n)
            frames = self.serializer.encode_partitioned(batch, channels, n)
            for channel, frame in enumerate(frames):
                if frame is not None:
                    await partition.emit(channel, frame)
        if self.flush_after_emit:
            partition.flush_all()
