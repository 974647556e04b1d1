"""``InputGate`` and its input channels: where a task reads the buffers of all its producers.

Theory of operation
-------------------
A gate has one input channel per producer subpartition it reads (as Flink's InputGate). A
channel notifies the gate whenever it may have something to read; the gate keeps the
channels with data in a FIFO and serves them round robin, one item per turn, so a busy
channel cannot starve the others. Every item carries its ``channel_index``; the task
decodes it and then calls ``recycle()`` on it.

- ``LocalInputChannel`` reads the producer's ``SubpartitionView`` on the same TaskManager
  directly: no copy, no credit; the producer's buffer goes back to the producer's pool
  when the task recycles the item.
- ``RemoteInputChannel`` receives buffers from another TaskManager through its
  connection (``transport.PartitionRequestClient``) with credit-based flow control
  (``credit.InputChannelCredit``): its exclusive buffers, taken from the gate's pool when
  the gate is built, are announced as initial credit; every received buffer carries the
  sender's backlog (a sender without credit announces a backlog the channel has not heard
  of in a ``BacklogAnnouncement``) and the gate lends the channel floating buffers from
  the same pool to cover it, each announced as one more credit; a recycled exclusive buffer is announced
  again, a floating one is kept while the backlog wants it or returned to the pool.

The gate's pool (``floating_pool``) is created with the exclusive buffers as its required
part and ``#remote channels × buffers-per-channel + floating-buffers-per-gate`` as its
maximum. Channels waiting for a buffer (exclusive ones first) are served in FIFO order
when the pool calls back.

``get_next`` returns ``None`` once every channel has delivered ``EndOfPartition`` (the
``EndOfPartition`` items themselves are returned first, so a task can tell which channel
ended). A channel that fails (partition released, connection closed, protocol violation)
raises from ``get_next``.

What it does not do: no barrier alignment or channel blocking (the checkpoint module
decides what to read), no record decoding. One owner: the task that reads the gate; the
connection task that feeds remote channels runs on the same Trio thread and only calls
synchronous methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

from weir.errors import ProtocolViolation, UsageError
from weir.network.buffer import Buffer, BufferOrEvent
from weir.network.buffer_pool import LocalBufferPool, LocalBufferPoolStatistics, WouldBlock
from weir.network.credit import InputChannelCredit, ReturnExclusive, ReturnFloating
from weir.network.events import EndOfPartition
from weir.network.wakeup import Wakeup

if TYPE_CHECKING:
    from weir.network.partition import SubpartitionView
    from weir.network.transport import PartitionRequestClient

__all__ = [
    "InputChannel",
    "InputChannelStatistics",
    "InputGate",
    "InputGateStatistics",
    "LocalInputChannel",
    "RemoteInputChannel",
    "SubpartitionViewProvider",
]


class SubpartitionViewProvider(Protocol):
    """Finds a subpartition on this TaskManager, now or once its producer registers it."""

    def request_subpartition_view(
        self,
        partition_id: str,
        subpartition_index: int,
        on_view: Callable[[SubpartitionView], None],
        on_error: Callable[[Exception], None],
    ) -> Callable[[], None]:
        """Call ``on_view`` (or ``on_error``) when the view exists; returns a cancel function."""
        ...


@dataclass(frozen=True)
class InputChannelStatistics:
    channel_index: int
    kind: str  # "local" | "remote"
    partition_id: str
    subpartition_index: int
    buffers_received: int
    bytes_received: int
    events_received: int
    queued_buffers: int  # received, not yet read by the task (remote); 0 for local
    backlog: int  # the producer's backlog as last known
    credit: int | None  # announced credit the sender may still use (remote)
    unannounced_credit: int | None
    exclusive_buffers: int | None  # exclusive buffers held (free or filled)
    floating_buffers: int | None  # floating buffers borrowed (free or filled)
    finished: bool


@dataclass(frozen=True)
class InputGateStatistics:
    gate_index: int
    channels: tuple[InputChannelStatistics, ...]
    queued_buffers: int
    finished_channels: int
    pool: LocalBufferPoolStatistics | None


class InputChannel:
    """One producer subpartition as seen by the gate."""

    kind = "?"

    def __init__(self, channel_index: int, partition_id: str, subpartition_index: int) -> None:
        self.channel_index = channel_index
        self.partition_id = partition_id
        self.subpartition_index = subpartition_index
        self._gate: InputGate | None = None
        self._queued = False  # in the gate's FIFO of channels with data
        self._error: Exception | None = None
        self.is_finished = False  # EndOfPartition was read
        self.is_released = False
        self.buffers_received = 0
        self.bytes_received = 0
        self.events_received = 0

    def _attach(self, gate: InputGate) -> None:
        self._gate = gate

    def _notify(self) -> None:
        gate = self._gate
        if gate is not None:
            gate._on_channel_available(self)

    def _fail(self, error: Exception) -> None:
        if self._error is None and not self.is_finished:
            self._error = error
            self._notify()

    def request_subpartition(self) -> None:
        raise NotImplementedError

    def poll_next(self) -> BufferOrEvent | None:
        raise NotImplementedError

    def is_available(self) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def statistics(self) -> InputChannelStatistics:
        raise NotImplementedError

    def _count(self, item: BufferOrEvent) -> None:
        item.channel_index = self.channel_index
        if item.event is None:
            self.buffers_received += 1
            self.bytes_received += item.size
        else:
            self.events_received += 1
            if isinstance(item.event, EndOfPartition):
                self.is_finished = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.channel_index}, {self.partition_id!r}[{self.subpartition_index}])"
        )


class LocalInputChannel(InputChannel):
    """Reads a subpartition of the same TaskManager through its view (no copy, no credit)."""

    kind = "local"

    def __init__(
        self,
        channel_index: int,
        partition_id: str,
        subpartition_index: int,
        provider: SubpartitionViewProvider | None = None,
        view: SubpartitionView | None = None,
    ) -> None:
        if (provider is None) == (view is None):
            raise UsageError(
                f"local input channel {channel_index}: expected exactly one of provider and view"
            )
        super().__init__(channel_index, partition_id, subpartition_index)
        self._provider = provider
        self._view: SubpartitionView | None = None
        self._given_view = view
        self._cancel_request: Callable[[], None] | None = None

    def request_subpartition(self) -> None:
        if self._given_view is not None:
            view, self._given_view = self._given_view, None
            self._on_view(view)
            return
        if self._provider is None or self._cancel_request is not None or self._view is not None:
            return
        self._cancel_request = self._provider.request_subpartition_view(
            self.partition_id, self.subpartition_index, self._on_view, self._fail
        )

    def _on_view(self, view: SubpartitionView) -> None:
        self._cancel_request = None
        if self.is_released:
            view.release()
            return
        self._view = view
        view.set_availability_listener(self._notify)
        if view.is_available():
            self._notify()

    def poll_next(self) -> BufferOrEvent | None:
        if self._error is not None:
            raise self._error
        view = self._view
        if view is None:
            return None
        try:
            item = view.poll_next()
        except Exception as error:
            self._error = error
            raise
        if item is not None:
            self._count(item)
        return item

    def is_available(self) -> bool:
        if self._error is not None:
            return True
        view = self._view
        return view is not None and view.is_available()

    def release(self) -> None:
        if self.is_released:
            return
        self.is_released = True
        if self._cancel_request is not None:
            self._cancel_request()
            self._cancel_request = None
        if self._view is not None:
            self._view.set_availability_listener(None)
            self._view.release()
            self._view = None

    def statistics(self) -> InputChannelStatistics:
        view = self._view
        return InputChannelStatistics(
            channel_index=self.channel_index,
            kind=self.kind,
            partition_id=self.partition_id,
            subpartition_index=self.subpartition_index,
            buffers_received=self.buffers_received,
            bytes_received=self.bytes_received,
            events_received=self.events_received,
            queued_buffers=0,
            backlog=view.backlog if view is not None else 0,
            credit=None,
            unannounced_credit=None,
            exclusive_buffers=None,
            floating_buffers=None,
            finished=self.is_finished,
        )


class _ChannelRecycler:
    """The recycler of a remote channel's exclusive or floating buffers."""

    __slots__ = ("_channel", "_exclusive")

    def __init__(self, channel: RemoteInputChannel, exclusive: bool) -> None:
        self._channel = channel
        self._exclusive = exclusive

    def recycle_segment(self, segment: bytearray) -> None:
        self._channel._on_recycle(segment, self._exclusive)

    def __repr__(self) -> str:
        kind = "exclusive" if self._exclusive else "floating"
        return f"{kind} buffers of {self._channel!r}"


class RemoteInputChannel(InputChannel):
    """Receives a subpartition of another TaskManager through the connection, with credit."""

    kind = "remote"

    def __init__(
        self,
        channel_index: int,
        partition_id: str,
        subpartition_index: int,
        client: PartitionRequestClient,
        num_exclusive: int,
    ) -> None:
        super().__init__(channel_index, partition_id, subpartition_index)
        self._client = client
        self.credit: InputChannelCredit[bytearray] = InputChannelCredit(channel_index, num_exclusive)
        self._received: deque[BufferOrEvent] = deque()
        self._pool: LocalBufferPool | None = None
        self._receiver_id: int | None = None
        self._exclusive_recycler = _ChannelRecycler(self, True)
        self._floating_recycler = _ChannelRecycler(self, False)

    def _attach(self, gate: InputGate) -> None:
        if gate.floating_pool is None:
            raise UsageError(
                f"input gate {gate.gate_index}: remote channel {self.channel_index} needs a buffer pool "
                "(floating_pool) for its exclusive and floating buffers"
            )
        super()._attach(gate)
        self._pool = gate.floating_pool
        gate._acquire_exclusive(self)

    # --- buffers and credit -----------------------------------------------------------

    def _announce(self) -> None:
        action = self.credit.announce()
        if action is not None and self._receiver_id is not None:
            self._client.announce_credit(self._receiver_id, action.credit)

    def _add_exclusive(self, segment: bytearray) -> None:
        self.credit.on_exclusive_segment(segment)

    def _add_floating(self, segment: bytearray) -> None:
        self.credit.on_floating_segment(segment)

    def _on_recycle(self, segment: bytearray, exclusive: bool) -> None:
        action = self.credit.on_recycle(segment, exclusive)
        if action is None:
            self._announce()
        elif isinstance(action, ReturnFloating | ReturnExclusive):
            # the segment to give back: the recycled one, or a free floating one that a
            # recycled exclusive buffer stands in for
            assert self._pool is not None
            self._pool.recycle_segment(action.segment)

    def request_subpartition(self) -> None:
        if self._receiver_id is not None or self.is_released:
            return
        initial_credit = self.credit.take_initial_credit()
        self._receiver_id = self._client.request_subpartition(
            self, self.partition_id, self.subpartition_index, initial_credit
        )

    # --- called by the connection (PartitionRequestClient) ----------------------------

    def on_buffer(self, data: memoryview, backlog: int) -> None:
        """A buffer arrived: copy it into a free exclusive or floating buffer."""
        if self.is_released or self._error is not None:
            return
        try:
            segment, exclusive = self.credit.on_buffer(backlog)
        except ProtocolViolation as error:
            self._fail(error)
            return
        buffer = Buffer(segment, self._exclusive_recycler if exclusive else self._floating_recycler)
        if len(data) > buffer.capacity:
            buffer.recycle()
            self._fail(
                ProtocolViolation(
                    f"channel {self.channel_index}: received {len(data)} bytes, more than a "
                    f"{buffer.capacity}-byte buffer"
                )
            )
            return
        buffer.append(data)
        self._received.append(BufferOrEvent(buffer.view(), backlog=backlog, buffer=buffer))
        if self.credit.floating_wanted() > 0 and self._gate is not None:
            self._gate._request_floating(self)
        self._notify()

    def on_event(self, item: BufferOrEvent) -> None:
        """An event arrived (events take no credit)."""
        if self.is_released or self._error is not None:
            return
        self.credit.on_backlog(item.backlog)
        self._received.append(item)
        if self.credit.floating_wanted() > 0 and self._gate is not None:
            self._gate._request_floating(self)
        self._notify()

    def on_sender_backlog(self, backlog: int) -> None:
        """The sender announced a backlog it has no credit for: borrow floating buffers for it."""
        if self.is_released or self._error is not None:
            return
        try:
            self.credit.on_backlog(backlog)
        except ProtocolViolation as error:
            self._fail(error)
            return
        if self.credit.floating_wanted() > 0 and self._gate is not None:
            self._gate._request_floating(self)

    def on_error(self, error: Exception) -> None:
        """The producer side failed (partition released, connection closed)."""
        self._fail(error)

    # --- read by the gate -------------------------------------------------------------

    def poll_next(self) -> BufferOrEvent | None:
        if self._received:
            item = self._received.popleft()
            self._count(item)
            return item
        if self._error is not None:
            raise self._error
        return None

    def is_available(self) -> bool:
        return bool(self._received) or self._error is not None

    def release(self) -> None:
        if self.is_released:
            return
        self.is_released = True
        if self._gate is not None:
            self._gate._forget_waiting(self)
        if self._receiver_id is not None and not self.is_finished:
            self._client.cancel(self._receiver_id)
        exclusive, floating = self.credit.release()
        pool = self._pool
        if pool is not None:
            for segment in (*exclusive, *floating):
                pool.recycle_segment(segment)
        while self._received:
            self._received.popleft().recycle()

    def statistics(self) -> InputChannelStatistics:
        c = self.credit.statistics()
        return InputChannelStatistics(
            channel_index=self.channel_index,
            kind=self.kind,
            partition_id=self.partition_id,
            subpartition_index=self.subpartition_index,
            buffers_received=self.credit.buffers_received,
            bytes_received=self.bytes_received,
            events_received=self.events_received,
            queued_buffers=sum(1 for item in self._received if item.event is None),
            backlog=c.sender_backlog,
            credit=c.announced_credit,
            unannounced_credit=c.unannounced_credit,
            exclusive_buffers=c.exclusive_held,
            floating_buffers=c.floating_held,
            finished=self.is_finished,
        )


class InputGate:
    """All input channels of one logical input of a task, read round robin."""

    def __init__(
        self,
        gate_index: int,
        channels: Sequence[InputChannel],
        floating_pool: LocalBufferPool | None = None,
    ) -> None:
        for position, channel in enumerate(channels):
            if channel.channel_index != position:
                raise UsageError(
                    f"input gate {gate_index}: channel at position {position} has channel_index "
                    f"{channel.channel_index} (expected {position})"
                )
        self.gate_index = gate_index
        self.channels: tuple[InputChannel, ...] = tuple(channels)
        self.floating_pool = floating_pool
        self._available: deque[InputChannel] = deque()
        self._blocked: set[int] = set()
        self._wakeup = Wakeup()
        self._finished_channels = 0
        self._waiting_exclusive: deque[RemoteInputChannel] = deque()
        self._waiting_floating: deque[RemoteInputChannel] = deque()
        self._pool_listener_armed = False
        self._requested = False
        self.is_closed = False
        for channel in self.channels:
            channel._attach(self)

    # --- lifecycle --------------------------------------------------------------------

    def request_partitions(self) -> None:
        """Ask every channel's producer for its subpartition (once)."""
        if self._requested:
            return
        self._requested = True
        for channel in self.channels:
            channel.request_subpartition()

    @property
    def is_finished(self) -> bool:
        """Every channel has delivered ``EndOfPartition``."""
        return self._finished_channels == len(self.channels)

    def close(self) -> None:
        """Release every channel (cancelling remote requests) and destroy the gate's pool."""
        if self.is_closed:
            return
        self.is_closed = True
        for channel in self.channels:
            channel.release()
        self._available.clear()
        if self.floating_pool is not None:
            if self._pool_listener_armed:
                self.floating_pool.remove_listener(self._on_pool_available)
            self.floating_pool.destroy()
        self._wakeup.set()

    # --- reading ----------------------------------------------------------------------

    def poll_next(self) -> BufferOrEvent | None:
        """The next item, round robin over channels with data; ``None`` if none now."""
        if self.is_closed:
            raise UsageError(f"input gate {self.gate_index}: read after close")
        available = self._available
        blocked = self._blocked
        while available:
            channel = available.popleft()
            channel._queued = False
            if blocked and channel.channel_index in blocked:
                continue  # it is queued again when unblocked
            item = channel.poll_next()
            if item is None:
                continue
            if channel.is_available():
                channel._queued = True
                available.append(channel)
            if item.event is not None and isinstance(item.event, EndOfPartition):
                self._finished_channels += 1
            return item
        return None

    def block(self, channel_index: int) -> None:
        """Read nothing more from this channel until ``unblock_all`` (aligned checkpoints): its
        data stays in the channel, so its credit, and then its producer, stop."""
        self._blocked.add(channel_index)

    def unblock_all(self) -> None:
        blocked, self._blocked = self._blocked, set()
        for index in sorted(blocked):
            channel = self.channels[index]
            if channel.is_available():
                self._on_channel_available(channel)

    @property
    def blocked_channels(self) -> frozenset[int]:
        return frozenset(self._blocked)

    async def get_next(self) -> BufferOrEvent | None:
        """The next buffer or event of any channel; ``None`` once all channels have ended.

        One scheduling point per item. Cancellation: raises ``Cancelled`` while waiting;
        an item that was already taken is returned, never lost.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while True:
            item = self.poll_next()
            if item is not None or self.is_finished:
                if not parked:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return item
            await self._wakeup.wait()
            parked = True

    def _on_channel_available(self, channel: InputChannel) -> None:
        if not channel._queued and not self.is_closed:
            channel._queued = True
            self._available.append(channel)
            self._wakeup.set()

    # --- buffers for remote channels --------------------------------------------------

    def _acquire_exclusive(self, channel: RemoteInputChannel) -> None:
        if not self._serve_exclusive(channel):
            self._waiting_exclusive.append(channel)
            self._arm_pool_listener()

    def _serve_exclusive(self, channel: RemoteInputChannel) -> bool:
        pool = self.floating_pool
        assert pool is not None
        while channel.credit.exclusive_missing > 0:
            try:
                segment = pool.request_segment_nowait()
            except WouldBlock:
                channel._announce()
                return False
            channel._add_exclusive(segment)
        channel._announce()
        return True

    def _request_floating(self, channel: RemoteInputChannel) -> None:
        if channel in self._waiting_floating:
            return
        if not self._serve_floating(channel):
            self._waiting_floating.append(channel)
            self._arm_pool_listener()

    def _serve_floating(self, channel: RemoteInputChannel) -> bool:
        pool = self.floating_pool
        assert pool is not None
        got = 0
        while channel.credit.floating_wanted() > 0:
            try:
                segment = pool.request_segment_nowait()
            except WouldBlock:
                if got:
                    channel._announce()
                return False
            channel._add_floating(segment)
            got += 1
        if got:
            channel._announce()
        return True

    def _arm_pool_listener(self) -> None:
        pool = self.floating_pool
        if self._pool_listener_armed or pool is None or pool.is_destroyed:
            return
        self._pool_listener_armed = True
        pool.notify_when_available(self._on_pool_available)

    def _on_pool_available(self) -> None:
        self._pool_listener_armed = False
        if self.is_closed:
            return
        while self._waiting_exclusive:
            if not self._serve_exclusive(self._waiting_exclusive[0]):
                self._arm_pool_listener()
                return
            self._waiting_exclusive.popleft()
        while self._waiting_floating:
            if not self._serve_floating(self._waiting_floating[0]):
                self._arm_pool_listener()
                return
            self._waiting_floating.popleft()

    def _forget_waiting(self, channel: RemoteInputChannel) -> None:
        for waiting in (self._waiting_exclusive, self._waiting_floating):
            if channel in waiting:
                waiting.remove(channel)

    # --- metrics ----------------------------------------------------------------------

    def statistics(self) -> InputGateStatistics:
        channels = tuple(channel.statistics() for channel in self.channels)
        return InputGateStatistics(
            gate_index=self.gate_index,
            channels=channels,
            queued_buffers=sum(c.queued_buffers for c in channels),
            finished_channels=self._finished_channels,
            pool=self.floating_pool.statistics() if self.floating_pool is not None else None,
        )

    def __repr__(self) -> str:
        return f"InputGate({self.gate_index}, channels={len(self.channels)})"
