"""``ResultPartition``: a subtask's output, one subpartition (queue of buffers and events) per consumer.

Theory of operation
-------------------
As Flink writes records into network buffers and flushes them to the network. Each
subpartition holds a queue of buffers and in-band events, in write order. The buffer
being written sits at the tail of the queue from the moment it is requested (Flink's
BufferBuilder / BufferConsumer pair): the writer appends to it, and a reader may already
consume the part of it that has been made *consumable*. Bytes become consumable when

- the buffer is full: it is *finished* and the next write requests a new buffer from the
  partition's ``LocalBufferPool`` (awaiting the pool is backpressure);
- ``flush()`` (the output flusher's timer, or the writer itself with buffer timeout 0)
  marks everything written so far consumable *without* finishing the buffer: it stays in
  the queue and keeps filling; bytes written after the flush stay invisible until the
  next flush, a full buffer, or an event;
- an event is written: it finishes the current buffer and queues behind it, so events
  never overtake data.

A reader takes items from a ``SubpartitionView``. Reading a flushed, unfinished buffer
returns the consumable slice and leaves the buffer in the queue; the next read continues
from the reader index. Every data slice carries a reference to its buffer
(``BufferOrEvent.recycle()`` drops it); the queue's own reference goes to the reader with
the last slice of a finished buffer, so a segment returns to the pool only when it is
finished and every slice of it has been recycled. ``backlog`` is the number of buffers
with consumable bytes still queued (Flink's buffers-in-backlog), sent with every buffer so
the receiver can ask for floating buffers.

A *blocking* partition (batch exchanges) keeps its finished buffers' bytes outside network
memory (Flink writes them to a file; weir keeps them in memory) and returns the network
buffers at once, so its producer never waits on consumers. Its views may only be created
after ``finish()``; each view reads the whole subpartition from the start.

A pipelined subpartition has one consumer; when its view is released, data still queued is
dropped and later writes to it are discarded (the consumer is gone).

What it does not do: it does not serialize records (the RecordWriter does), pick
subpartitions, or run the output flusher (``flusher.run_output_flusher`` calls
``flush_all``). One owner writes (the producing task); views are read by one consumer each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from weir.errors import ProtocolViolation, UsageError
from weir.network.async_pool import request_buffer
from weir.network.buffer import Buffer, BufferOrEvent
from weir.network.buffer_pool import LocalBufferPool, LocalBufferPoolStatistics, WouldBlock
from weir.network.errors import PartitionReleased
from weir.network.events import EndOfPartition, Event
from weir.network.wakeup import Wakeup

__all__ = [
    "ResultPartition",
    "ResultPartitionStatistics",
    "SubpartitionStatistics",
    "SubpartitionView",
]

_Bytes = bytes | bytearray | memoryview


def _byte_view(data: _Bytes) -> _Bytes:
    """``data`` as something whose ``len`` counts bytes (memoryviews of other formats are cast)."""
    if type(data) is bytes or type(data) is bytearray:
        return data
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class SubpartitionView(Protocol):
    """What a consumer (local input channel or connection server) reads a subpartition through."""

    def poll_next(self) -> BufferOrEvent | None:
        """The next consumable item, or ``None`` if nothing is consumable now."""
        ...

    def is_available(self) -> bool: ...

    def next_is_event(self) -> bool:
        """Is the next item an event (sent without credit)?"""
        ...

    @property
    def backlog(self) -> int: ...

    def set_availability_listener(self, listener: Callable[[], None] | None) -> None:
        """``listener()`` is called whenever items may have become consumable.

        It is not called for what is already consumable when it is set: check
        ``is_available()`` after setting it.
        """
        ...

    async def wait_available(self) -> None:
        """Park until ``poll_next`` may return an item. Cancellation: nothing is consumed."""
        ...

    def release(self) -> None:
        """The consumer is done with the subpartition."""
        ...


@dataclass(frozen=True)
class SubpartitionStatistics:
    index: int
    queued_buffers: int  # data buffers in the queue (blocking: stored chunks not yet released)
    queued_events: int
    backlog: int
    bytes_written: int
    bytes_flushed: int  # bytes made consumable (by flush, full buffer, event or finish)
    buffers_finished: int
    released: bool


@dataclass(frozen=True)
class ResultPartitionStatistics:
    partition_id: str
    blocking: bool
    finished: bool
    released: bool
    buffers_requested: int
    buffers_emitted: int  # finished buffers over all subpartitions
    backpressured_time_s: float  # time spent waiting for buffers (trio clock), completed waits
    backpressured_since: float | None  # trio time when the current wait began, if waiting now
    subpartitions: tuple[SubpartitionStatistics, ...]
    pool: LocalBufferPoolStatistics


class _Subpartition:
    """Shared writer-side state: the buffer being written and the counters."""

    def __init__(self, partition: ResultPartition, index: int) -> None:
        self.partition = partition
        self.index = index
        self.current: Buffer | None = None
        self.released = False  # the consumer went away (pipelined) or the partition was released
        self.bytes_written = 0
        self.bytes_flushed = 0
        self.buffers_finished = 0
        self.events = 0

    def start_buffer(self, buffer: Buffer) -> None:
        raise NotImplementedError

    def finish_current(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def add_event(self, event: Event) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def statistics(self) -> SubpartitionStatistics:
        raise NotImplementedError


class _PipelinedSubpartition(_Subpartition):
    def __init__(self, partition: ResultPartition, index: int) -> None:
        super().__init__(partition, index)
        self.queue: deque[Buffer | Event] = deque()
        self.flush_limit = 0  # consumable bytes of ``current``
        self.reader_index = 0  # bytes of queue[0] already read (when it is a buffer)
        self.finished_in_queue = 0  # finished data buffers in the queue
        self.view: _PipelinedView | None = None
        self.view_created = False

    # --- writer side ------------------------------------------------------------------

    def start_buffer(self, buffer: Buffer) -> None:
        self.queue.append(buffer)
        self.current = buffer
        self.flush_limit = 0

    def finish_current(self) -> None:
        buffer = self.current
        if buffer is None:
            return
        self.current = None
        size = buffer.size
        self.bytes_flushed += size - self.flush_limit
        self.flush_limit = 0
        queue = self.queue
        if queue[0] is buffer and self.reader_index >= size:
            queue.popleft()  # everything was read already: the queue's reference is done
            self.reader_index = 0
            buffer.recycle()
            return
        if size == 0:
            queue.pop()
            buffer.recycle()
            return
        self.finished_in_queue += 1
        self.buffers_finished += 1
        self._notify()

    def flush(self) -> None:
        buffer = self.current
        if buffer is not None and buffer.size > self.flush_limit:
            self.bytes_flushed += buffer.size - self.flush_limit
            self.flush_limit = buffer.size
            self._notify()

    def add_event(self, event: Event) -> None:
        if self.current is not None:
            self.finish_current()
        self.queue.append(event)
        self.events += 1
        self._notify()

    def overtake(self, event: Event) -> bytes:
        """Put ``event`` ahead of everything not yet read (an unaligned checkpoint barrier)
        and return the data bytes it overtook; they are still delivered, after the event."""
        if self.current is not None:
            self.finish_current()
        overtaken = bytearray()
        for i, item in enumerate(self.queue):
            if isinstance(item, Buffer):
                start = self.reader_index if i == 0 else 0
                overtaken += item.view(start, item.size)
        self.queue.appendleft(event)
        self.events += 1
        self._notify()
        return bytes(overtaken)

    def _notify(self) -> None:
        view = self.view
        if view is not None:
            view._notify()

    # --- reader side ------------------------------------------------------------------

    def backlog(self) -> int:
        n = self.finished_in_queue
        current = self.current
        if current is not None:
            start = self.reader_index if self.queue[0] is current else 0
            if self.flush_limit > start:
                n += 1
        return n

    def is_available(self) -> bool:
        queue = self.queue
        if not queue:
            return False
        head = queue[0]
        if head is self.current:
            return self.flush_limit > self.reader_index
        return True

    def next_is_event(self) -> bool:
        return bool(self.queue) and not isinstance(self.queue[0], Buffer)

    def poll(self) -> BufferOrEvent | None:
        queue = self.queue
        while queue:
            head = queue[0]
            if isinstance(head, Buffer):
                start = self.reader_index
                if head is self.current:
                    end = self.flush_limit
                    if end <= start:
                        return None
                    head.retain()  # the slice's own reference; the queue keeps its one
                    self.reader_index = end
                    return BufferOrEvent(head.view(start, end), backlog=self.backlog(), buffer=head)
                queue.popleft()
                self.reader_index = 0
                self.finished_in_queue -= 1
                end = head.size
                if end <= start:
                    head.recycle()
                    continue
                # the last slice of a finished buffer: the queue's reference goes with it
                return BufferOrEvent(head.view(start, end), backlog=self.backlog(), buffer=head)
            queue.popleft()
            return BufferOrEvent(event=head, backlog=self.backlog())
        return None

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        queue = self.queue
        while queue:
            item = queue.popleft()
            if isinstance(item, Buffer):
                item.recycle()
        self.current = None
        self.reader_index = 0
        self.flush_limit = 0
        self.finished_in_queue = 0
        self._notify()

    def statistics(self) -> SubpartitionStatistics:
        buffers = sum(1 for item in self.queue if isinstance(item, Buffer))
        return SubpartitionStatistics(
            index=self.index,
            queued_buffers=buffers,
            queued_events=len(self.queue) - buffers,
            backlog=self.backlog(),
            bytes_written=self.bytes_written,
            bytes_flushed=self.bytes_flushed,
            buffers_finished=self.buffers_finished,
            released=self.released,
        )


class _PipelinedView:
    """The one reader of a pipelined subpartition."""

    def __init__(self, subpartition: _PipelinedSubpartition) -> None:
        self._sub = subpartition
        self._listener: Callable[[], None] | None = None
        self._wakeup: Wakeup | None = None
        self.is_released = False

    def _check(self) -> _PipelinedSubpartition:
        sub = self._sub
        if self.is_released:
            raise UsageError(
                f"view of subpartition {sub.index} of {sub.partition.partition_id!r}: used after release"
            )
        if sub.partition.is_released:
            raise PartitionReleased(
                f"result partition {sub.partition.partition_id!r} was released while subpartition "
                f"{sub.index} was being consumed"
            )
        return sub

    def poll_next(self) -> BufferOrEvent | None:
        return self._check().poll()

    def is_available(self) -> bool:
        if self.is_released:
            return False
        if self._sub.partition.is_released:
            return True  # the next poll raises PartitionReleased
        return self._sub.is_available()

    def next_is_event(self) -> bool:
        return not self.is_released and not self._sub.partition.is_released and self._sub.next_is_event()

    @property
    def backlog(self) -> int:
        return 0 if self.is_released else self._sub.backlog()

    def set_availability_listener(self, listener: Callable[[], None] | None) -> None:
        self._listener = listener

    async def wait_available(self) -> None:
        """Park until ``poll_next`` may return an item (or raise).

        Cancellation: raises ``Cancelled``; nothing is consumed.
        """
        if self._wakeup is None:
            self._wakeup = Wakeup()
        while not self.is_available():
            await self._wakeup.wait()
        await trio.lowlevel.checkpoint()

    def _notify(self) -> None:
        if self._listener is not None:
            self._listener()
        if self._wakeup is not None:
            self._wakeup.set()

    def release(self) -> None:
        """The consumer is done: queued data is dropped, later writes are discarded."""
        if self.is_released:
            return
        self.is_released = True
        sub = self._sub
        sub.view = None
        sub.release()


class _BlockingSubpartition(_Subpartition):
    def __init__(self, partition: ResultPartition, index: int) -> None:
        super().__init__(partition, index)
        self.items: list[bytes | Event] = []
        self.data_items = 0

    def start_buffer(self, buffer: Buffer) -> None:
        self.current = buffer

    def finish_current(self) -> None:
        buffer = self.current
        if buffer is None:
            return
        self.current = None
        if buffer.size:
            self.items.append(bytes(buffer.view()))
            self.data_items += 1
            self.bytes_flushed += buffer.size
            self.buffers_finished += 1
        buffer.recycle()  # the bytes live outside network memory now

    def flush(self) -> None:
        """Nothing to do: a blocking partition becomes readable as a whole, at finish."""

    def add_event(self, event: Event) -> None:
        self.finish_current()
        self.items.append(event)
        self.events += 1

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        if self.current is not None:
            self.current.recycle()
            self.current = None
        self.items = []
        self.data_items = 0

    def statistics(self) -> SubpartitionStatistics:
        return SubpartitionStatistics(
            index=self.index,
            queued_buffers=self.data_items,
            queued_events=len(self.items) - self.data_items,
            backlog=self.data_items,
            bytes_written=self.bytes_written,
            bytes_flushed=self.bytes_flushed,
            buffers_finished=self.buffers_finished,
            released=self.released,
        )


class _BlockingView:
    """One read of a finished blocking subpartition, from the start."""

    def __init__(self, subpartition: _BlockingSubpartition) -> None:
        self._sub = subpartition
        self._position = 0
        self._data_left = subpartition.data_items
        self.is_released = False

    def _items(self) -> list[bytes | Event]:
        sub = self._sub
        if self.is_released:
            raise UsageError(
                f"view of subpartition {sub.index} of {sub.partition.partition_id!r}: used after release"
            )
        if sub.released:
            raise PartitionReleased(
                f"result partition {sub.partition.partition_id!r} was released while subpartition "
                f"{sub.index} was being consumed"
            )
        return sub.items

    def poll_next(self) -> BufferOrEvent | None:
        items = self._items()
        if self._position >= len(items):
            return None
        item = items[self._position]
        self._position += 1
        if isinstance(item, Event):
            return BufferOrEvent(event=item, backlog=self._data_left)
        self._data_left -= 1
        return BufferOrEvent(memoryview(item), backlog=self._data_left)

    def is_available(self) -> bool:
        if self.is_released:
            return False
        return self._sub.released or self._position < len(self._sub.items)

    def next_is_event(self) -> bool:
        items = self._sub.items
        return (
            not self.is_released
            and not self._sub.released
            and self._position < len(items)
            and isinstance(items[self._position], Event)
        )

    @property
    def backlog(self) -> int:
        return 0 if self.is_released else self._data_left

    def set_availability_listener(self, listener: Callable[[], None] | None) -> None:
        """Nothing new ever arrives: everything is consumable from the start."""

    async def wait_available(self) -> None:
        """Returns at once (a finished blocking subpartition is readable to its end).

        Cancellation: raises ``Cancelled`` if cancelled at the checkpoint.
        """
        await trio.lowlevel.checkpoint()

    def release(self) -> None:
        self.is_released = True


class ResultPartition:
    """The output of one subtask: ``num_subpartitions`` queues written by one RecordWriter."""

    def __init__(
        self,
        partition_id: str,
        num_subpartitions: int,
        buffer_pool: LocalBufferPool,
        blocking: bool = False,
    ) -> None:
        if num_subpartitions < 1:
            raise UsageError(
                f"result partition {partition_id!r}: num_subpartitions must be at least 1, got {num_subpartitions}"
            )
        self.partition_id = partition_id
        self.num_subpartitions = num_subpartitions
        self.buffer_pool = buffer_pool
        self.blocking = blocking
        self.segment_size = buffer_pool.segment_size
        kind = _BlockingSubpartition if blocking else _PipelinedSubpartition
        self._subpartitions: list[_Subpartition] = [kind(self, i) for i in range(num_subpartitions)]
        self._finished = False
        self._released = False
        self._finish_listeners: list[Callable[[], None]] = []
        self.buffers_requested = 0
        self._backpressured_s = 0.0
        self._backpressured_since: float | None = None
        # bytes may have been written since the last ``flush_all`` (set before the write,
        # so it errs on the side of "unflushed"); ``on_unflushed`` hears of each change to True
        self.unflushed = False
        self.on_unflushed: Callable[[], None] | None = None

    # --- state ------------------------------------------------------------------------

    @property
    def is_finished(self) -> bool:
        return self._finished

    @property
    def is_released(self) -> bool:
        return self._released

    def _writable(self, subpartition: int) -> _Subpartition:
        if self._finished or self._released:
            state = "released" if self._released else "finished"
            raise UsageError(f"result partition {self.partition_id!r}: write after it was {state}")
        if not 0 <= subpartition < self.num_subpartitions:
            raise UsageError(
                f"result partition {self.partition_id!r}: subpartition {subpartition} out of range "
                f"0..{self.num_subpartitions - 1}"
            )
        return self._subpartitions[subpartition]

    # --- data -------------------------------------------------------------------------

    def emit_nowait(self, subpartition: int, data: _Bytes) -> None:
        """Append ``data`` to the subpartition, all or nothing: ``WouldBlock`` if the pool lacks buffers."""
        sub = self._writable(subpartition)
        data = _byte_view(data)
        n = len(data)
        if n == 0 or sub.released:
            return
        if not self.unflushed:
            self._mark_unflushed()
        current = sub.current
        room = 0 if current is None else current.writable_bytes
        if n > room:
            needed = -(-(n - room) // self.segment_size)
            pool = self.buffer_pool
            if needed > min(pool.limit - pool.used, pool.network_pool.available_segments):
                raise WouldBlock
        written = current.append(data) if current is not None else 0
        while written < n:
            if sub.current is not None:
                sub.finish_current()
            buffer = self.buffer_pool.request_buffer_nowait()
            self.buffers_requested += 1
            sub.start_buffer(buffer)
            written += buffer.append(memoryview(data)[written:])
        sub.bytes_written += n
        last = sub.current
        if last is not None and last.writable_bytes == 0:
            sub.finish_current()

    async def emit(self, subpartition: int, data: _Bytes) -> None:
        """Append ``data`` (any length) to the subpartition's buffers.

        Not a scheduling point unless the pool has no buffer for it: then it parks until one
        is recycled (backpressure). The producing task yields once per batch on its own; a
        scheduling point per buffer cost more than the buffer's processing.

        Cancellation: only while waiting for a buffer. The bytes written so far stay
        written, so the item is cut off: a cancelled emit leaves the partition fit only
        for release (the producing task is being torn down).
        """
        sub = self._writable(subpartition)
        data = _byte_view(data)
        n = len(data)
        if n == 0 or sub.released:
            return
        if not self.unflushed:
            self._mark_unflushed()
        current = sub.current
        if current is not None:
            written = current.append(data)
            sub.bytes_written += written
            if written == n:
                if current.writable_bytes == 0:
                    sub.finish_current()
                return
        else:
            written = 0
        view = memoryview(data)
        while written < n:
            if sub.current is not None:
                sub.finish_current()
            buffer = await self._request_buffer()
            if sub.released or self._released:
                buffer.recycle()
                if self._released:
                    raise PartitionReleased(
                        f"result partition {self.partition_id!r} was released during emit"
                    )
                return
            sub.start_buffer(buffer)
            appended = buffer.append(view[written:])
            written += appended
            sub.bytes_written += appended
        last = sub.current
        if last is not None and last.writable_bytes == 0:
            sub.finish_current()

    async def _request_buffer(self) -> Buffer:
        """A new buffer from the pool, timing any wait as backpressure. A scheduling point
        only when it has to wait.

        Cancellation: raises ``Cancelled`` before a buffer is taken; the wait so far is
        still counted in the backpressured time.
        """
        pool = self.buffer_pool
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            buffer = pool.request_buffer_nowait()
        except WouldBlock:
            start = trio.current_time()
            self._backpressured_since = start
            try:
                buffer = await request_buffer(pool)
            finally:
                self._backpressured_since = None
                self._backpressured_s += trio.current_time() - start
        self.buffers_requested += 1
        return buffer

    async def broadcast_emit(self, data: _Bytes) -> None:
        """``emit`` the same bytes to every subpartition.

        Cancellation: as ``emit``; subpartitions after the interrupted one get nothing.
        """
        data = _byte_view(data)
        for index in range(self.num_subpartitions):
            await self.emit(index, data)

    def flush(self, subpartition: int) -> None:
        """Make every byte written so far consumable, without finishing the buffer."""
        if not 0 <= subpartition < self.num_subpartitions:
            raise UsageError(
                f"result partition {self.partition_id!r}: subpartition {subpartition} out of range "
                f"0..{self.num_subpartitions - 1}"
            )
        self._subpartitions[subpartition].flush()

    def flush_all(self) -> None:
        self.unflushed = False
        for sub in self._subpartitions:
            sub.flush()

    def _mark_unflushed(self) -> None:
        self.unflushed = True
        if self.on_unflushed is not None:
            self.on_unflushed()

    # --- events -----------------------------------------------------------------------

    def emit_event_nowait(self, subpartition: int, event: Event) -> None:
        """Finish the current buffer and queue ``event`` behind it (never needs a buffer)."""
        sub = self._writable(subpartition)
        if not sub.released:
            sub.add_event(event)

    def broadcast_event_nowait(self, event: Event) -> None:
        for index in range(self.num_subpartitions):
            self.emit_event_nowait(index, event)

    def broadcast_priority_event(self, event: Event) -> list[bytes]:
        """``event`` overtakes the unread data of every subpartition (unaligned checkpoint
        barriers); returns, per subpartition, the data bytes it overtook (channel state).
        A blocking partition has no readers yet: the event just goes behind its data."""
        out = []
        for sub in self._subpartitions:
            if sub.released:
                out.append(b"")
            elif isinstance(sub, _PipelinedSubpartition):
                out.append(sub.overtake(event))
            else:
                sub.add_event(event)
                out.append(b"")
        return out

    async def emit_event(self, subpartition: int, event: Event) -> None:
        """Queue ``event`` on one subpartition behind the data written before it.

        Cancellation: if cancelled at entry nothing is queued; otherwise the event is queued.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self.emit_event_nowait(subpartition, event)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def broadcast_event(self, event: Event) -> None:
        """Queue ``event`` on every subpartition (barriers, watermarks).

        Cancellation: if cancelled at entry nothing is queued; otherwise all are queued.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self.broadcast_event_nowait(event)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def finish_nowait(self) -> None:
        """Broadcast ``EndOfPartition``; no writes afterwards. Blocking partitions become readable."""
        self.broadcast_event_nowait(EndOfPartition())
        self._finished = True
        listeners, self._finish_listeners = self._finish_listeners, []
        for listener in listeners:
            listener()

    async def finish(self) -> None:
        """The producer is done: ``EndOfPartition`` goes to every subpartition.

        Cancellation: if cancelled at entry the partition is not finished; otherwise it is.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self.finish_nowait()
        await trio.lowlevel.cancel_shielded_checkpoint()

    def add_finish_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` once when the partition finishes (at once if it has)."""
        if self._finished:
            listener()
        else:
            self._finish_listeners.append(listener)

    # --- readers ----------------------------------------------------------------------

    def create_subpartition_view(self, index: int) -> SubpartitionView:
        """A reader of subpartition ``index``: one per pipelined subpartition; blocking ones after finish."""
        if self._released:
            raise PartitionReleased(f"result partition {self.partition_id!r} was released")
        if not 0 <= index < self.num_subpartitions:
            raise UsageError(
                f"result partition {self.partition_id!r}: subpartition {index} out of range "
                f"0..{self.num_subpartitions - 1}"
            )
        sub = self._subpartitions[index]
        if isinstance(sub, _BlockingSubpartition):
            if not self._finished:
                raise ProtocolViolation(
                    f"blocking result partition {self.partition_id!r}: view of subpartition {index} "
                    "requested before the partition finished (expected after finish())"
                )
            return _BlockingView(sub)
        assert isinstance(sub, _PipelinedSubpartition)
        if sub.view_created:
            raise ProtocolViolation(
                f"pipelined result partition {self.partition_id!r}: subpartition {index} already has "
                "a consumer (expected one view per subpartition)"
            )
        sub.view_created = True
        view = _PipelinedView(sub)
        sub.view = view
        return view

    def release(self) -> None:
        """Drop every queued buffer; readers get ``PartitionReleased``. Idempotent."""
        if self._released:
            return
        self._released = True
        for sub in self._subpartitions:
            sub.release()

    # --- metrics ----------------------------------------------------------------------

    def statistics(self) -> ResultPartitionStatistics:
        subs = tuple(sub.statistics() for sub in self._subpartitions)
        return ResultPartitionStatistics(
            partition_id=self.partition_id,
            blocking=self.blocking,
            finished=self._finished,
            released=self._released,
            buffers_requested=self.buffers_requested,
            buffers_emitted=sum(s.buffers_finished for s in subs),
            backpressured_time_s=self._backpressured_s,
            backpressured_since=self._backpressured_since,
            subpartitions=subs,
            pool=self.buffer_pool.statistics(),
        )

    def __repr__(self) -> str:
        kind = "blocking" if self.blocking else "pipelined"
        return f"ResultPartition({self.partition_id!r}, {kind}, subpartitions={self.num_subpartitions})"
