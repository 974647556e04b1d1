"""Network memory: one ``NetworkBufferPool`` per TaskManager, one ``LocalBufferPool`` per partition or gate. Pure.

Theory of operation
-------------------
The ``NetworkBufferPool`` owns a fixed number of memory segments:
``total_bytes // segment_size`` (64 MiB of 32 KiB segments = 2048). Segments are
allocated on first use and then reused; none is ever freed or created beyond the total.

Every result partition and input gate draws from its own ``LocalBufferPool``, created
with ``num_required`` (the buffers it cannot work without) and ``max_buffers`` (Flink's
bound ``#channels × buffers-per-channel + floating-buffers-per-gate``). Each local pool has
a current *limit*. When the global pool can give every local pool its maximum, the limit
is the maximum. When it cannot, the pool is *redistributed* (Flink's
``NetworkBufferPool.redistributeBuffers``): every pool gets its required buffers plus a
share of the remaining segments proportional to its excess capacity
(``max_buffers - num_required``), rounded so the shares add up exactly (each share is
within ±1 of the exact proportion). If even the required buffers do not fit, creating the
pool fails with a ``UsageError`` that names the numbers and the option to raise.

A local pool does not cache segments: a request takes a segment from the global pool and
a recycled segment goes straight back. So a pool whose limit shrank below what it holds
simply gets no new segments until enough of its buffers come back, and segments freed by
one pool are at once available to the others.

Requests never block here: ``request_buffer_nowait`` raises ``WouldBlock`` when the pool is
at its limit or the global pool is empty. A caller that wants to wait registers a one-shot
callback with ``notify_when_available``; it is called (synchronously, after the pool's
state is consistent, so it may request at once) when a segment comes back or the limit
grows. The async wrapper ``LocalBufferPool.request_buffer`` (in ``async_pool``) parks a
Trio task on exactly that.

Invariants (checked by the property tests):

- segments are conserved: free + never allocated + held by pools (destroyed ones included)
  = total;
- no request succeeds while a pool holds ``limit`` or more segments;
- when the required buffers fit, every live pool's limit is within
  ``[num_required, max_buffers]`` and the limits add up to at most the total.

What it does not do: no trio, no clock, no threads (one owner: the TaskManager's tasks
run on one Trio thread). It does not decide pool sizes; ``NetworkEnvironment`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from weir.errors import ProtocolViolation, UsageError
from weir.network.buffer import Buffer

__all__ = [
    "LocalBufferPool",
    "LocalBufferPoolStatistics",
    "NetworkBufferPool",
    "NetworkBufferPoolStatistics",
    "WouldBlock",
    "format_bytes",
]


class WouldBlock(Exception):
    """A ``*_nowait`` request could not be served now (Trio's ``WouldBlock`` semantics)."""


def format_bytes(n: int) -> str:
    """``65536`` → ``'64 KiB'``; exact binary units when they divide, else bytes."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class LocalBufferPoolStatistics:
    name: str
    used: int  # segments held (in queues, in flight, or being read)
    limit: int  # current size after redistribution
    num_required: int
    max_buffers: int
    destroyed: bool


@dataclass(frozen=True)
class NetworkBufferPoolStatistics:
    segment_size: int
    total_segments: int
    available_segments: int  # free now (including segments never allocated)
    required_segments: int  # sum of num_required over live pools
    pools: tuple[LocalBufferPoolStatistics, ...]

    @property
    def used_segments(self) -> int:
        return self.total_segments - self.available_segments


class NetworkBufferPool:
    """The fixed set of network memory segments of one TaskManager."""

    def __init__(self, total_bytes: int, segment_size: int) -> None:
        if segment_size <= 0:
            raise UsageError(f"taskmanager.memory.segment-size must be positive, got {segment_size}")
        if total_bytes < segment_size:
            raise UsageError(
                f"network memory of {format_bytes(total_bytes)} is smaller than one segment of "
                f"{format_bytes(segment_size)}: raise taskmanager.memory.network.max"
            )
        self.segment_size = segment_size
        self.total_bytes = total_bytes
        self.total_segments = total_bytes // segment_size
        self._free: list[bytearray] = []
        self._never_allocated = self.total_segments
        self._pools: list[LocalBufferPool] = []  # live pools in creation order
        self._waiting: dict[LocalBufferPool, None] = {}  # pools with listeners (ordered set)
        self._required = 0

    # --- local pools ---------------------------------------------------------------

    def create_buffer_pool(self, num_required: int, max_buffers: int, name: str = "") -> LocalBufferPool:
        """A new local pool; redistributes all limits. ``UsageError`` if the required buffers don't fit."""
        label = name or f"local pool {len(self._pools)}"
        if num_required < 0 or max_buffers < num_required:
            raise UsageError(
                f"{label}: expected 0 <= num_required <= max_buffers, got num_required={num_required}, "
                f"max_buffers={max_buffers}"
            )
        required = self._required + num_required
        if required > self.total_segments:
            raise UsageError(
                f"network memory of {format_bytes(self.total_bytes)} ({self.total_segments} buffers of "
                f"{format_bytes(self.segment_size)}) is too small: {required} required "
                f"({self._required} by {len(self._pools)} existing pools, {num_required} by {label}); "
                f"raise taskmanager.memory.network.max to at least "
                f"{format_bytes(required * self.segment_size)}"
            )
        pool = LocalBufferPool(self, num_required, max_buffers, label)
        self._pools.append(pool)
        self._required = required
        self._redistribute()
        return pool

    def _destroy_pool(self, pool: LocalBufferPool) -> None:
        self._pools.remove(pool)
        self._waiting.pop(pool, None)
        self._required -= pool.num_required
        self._redistribute()

    def _redistribute(self) -> None:
        """Flink's redistribution: required + a share of the rest proportional to excess capacity."""
        pools = self._pools
        total_capacity = sum(p.max_buffers - p.num_required for p in pools)
        to_distribute = min(self.total_segments - self._required, total_capacity)
        parts = 0
        distributed = 0
        for p in pools:
            excess = p.max_buffers - p.num_required
            if excess == 0 or to_distribute <= 0:
                p._limit = p.num_required
                continue
            parts += excess
            share = -(-parts * to_distribute // total_capacity) - distributed  # ceil(...) - distributed
            distributed += share
            p._limit = p.num_required + share
        self._wake_waiting()

    # --- segments ---------------------------------------------------------------------

    @property
    def available_segments(self) -> int:
        return len(self._free) + self._never_allocated

    def _take_segment(self) -> bytearray:
        if self._free:
            return self._free.pop()
        if self._never_allocated:
            self._never_allocated -= 1
            return bytearray(self.segment_size)
        raise WouldBlock

    def _return_segment(self, segment: bytearray) -> None:
        self._free.append(segment)
        if self._waiting:
            self._wake_waiting()

    def _add_waiting(self, pool: LocalBufferPool) -> None:
        self._waiting[pool] = None

    def _wake_waiting(self) -> None:
        if not self._waiting or not self.available_segments:
            return
        ready = [p for p in self._waiting if p._used < p._limit]
        for p in ready:
            del self._waiting[p]
        for p in ready:
            p._fire_listeners()

    def statistics(self) -> NetworkBufferPoolStatistics:
        return NetworkBufferPoolStatistics(
            segment_size=self.segment_size,
            total_segments=self.total_segments,
            available_segments=self.available_segments,
            required_segments=self._required,
            pools=tuple(p.statistics() for p in self._pools),
        )

    def __repr__(self) -> str:
        return f"NetworkBufferPool({self.available_segments}/{self.total_segments} free)"


class LocalBufferPool:
    """The buffers of one result partition or input gate: at most ``limit`` held at a time."""

    def __init__(
        self, network_pool: NetworkBufferPool, num_required: int, max_buffers: int, name: str
    ) -> None:
        self.network_pool = network_pool
        self.num_required = num_required
        self.max_buffers = max_buffers
        self.name = name
        self.segment_size = network_pool.segment_size
        self._limit = num_required
        self._used = 0
        self._destroyed = False
        self._listeners: list[Callable[[], None]] = []

    @property
    def limit(self) -> int:
        """The current size: ``max_buffers`` unless network memory is short."""
        return self._limit

    @property
    def used(self) -> int:
        return self._used

    @property
    def is_destroyed(self) -> bool:
        return self._destroyed

    def is_available(self) -> bool:
        """Would ``request_buffer_nowait`` succeed now?"""
        return not self._destroyed and self._used < self._limit and self.network_pool.available_segments > 0

    # --- requests -------------------------------------------------------------------

    def request_segment_nowait(self) -> bytearray:
        """A bare segment (the caller recycles it with ``recycle_segment``); ``WouldBlock`` if none now."""
        if self._destroyed:
            raise UsageError(f"{self.name}: requested a buffer after the pool was destroyed")
        if self._used >= self._limit:
            raise WouldBlock
        segment = self.network_pool._take_segment()
        self._used += 1
        return segment

    def request_buffer_nowait(self) -> Buffer:
        """An empty buffer owned by this pool; ``WouldBlock`` at the limit or when the global pool is empty."""
        return Buffer(self.request_segment_nowait(), self)

    async def request_buffer(self) -> Buffer:
        """An empty buffer, parking the calling Trio task until one is recycled.

        Cancellation: if cancelled while waiting, no buffer is taken and the listener is
        removed; ``Cancelled`` propagates.
        """
        from weir.network.async_pool import request_buffer  # the pure module itself never imports trio

        return await request_buffer(self)

    def recycle_segment(self, segment: bytearray) -> None:
        """Give back a segment from ``request_segment_nowait`` (or a buffer's last reference)."""
        if self._used <= 0:
            raise ProtocolViolation(f"{self.name}: a segment was recycled but the pool holds none")
        if len(segment) != self.segment_size:
            raise ProtocolViolation(
                f"{self.name}: recycled a segment of {len(segment)} bytes, expected {self.segment_size}"
            )
        self._used -= 1
        self.network_pool._return_segment(segment)

    def recycle(self, buffer: Buffer) -> None:
        """Drop the caller's reference to ``buffer`` (same as ``buffer.recycle()``)."""
        buffer.recycle()

    # --- availability ---------------------------------------------------------------

    def notify_when_available(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once when a request may succeed (at once if it would now).

        The call happens synchronously inside whatever recycles a segment or resizes a
        pool, after the pools are consistent; it may request buffers. Spurious calls are
        possible (another waiter may win the segment): retry and register again.
        """
        if self._destroyed:
            raise UsageError(f"{self.name}: waiting for a buffer after the pool was destroyed")
        if self.is_available():
            callback()
            return
        self._listeners.append(callback)
        self.network_pool._add_waiting(self)

    def remove_listener(self, callback: Callable[[], None]) -> None:
        """Forget a callback registered with ``notify_when_available`` (no error if it fired)."""
        if callback in self._listeners:
            self._listeners.remove(callback)
        if not self._listeners:
            self.network_pool._waiting.pop(self, None)

    def _fire_listeners(self) -> None:
        listeners, self._listeners = self._listeners, []
        for callback in listeners:
            callback()

    # --- lifecycle ------------------------------------------------------------------

    def destroy(self) -> None:
        """Stop serving requests and give this pool's share back; held segments return when recycled."""
        if self._destroyed:
            return
        self._destroyed = True
        listeners, self._listeners = self._listeners, []
        self.network_pool._destroy_pool(self)
        for callback in listeners:  # waiters wake up and see the pool destroyed
            callback()

    def statistics(self) -> LocalBufferPoolStatistics:
        return LocalBufferPoolStatistics(
            name=self.name,
            used=self._used,
            limit=self._limit,
            num_required=self.num_required,
            max_buffers=self.max_buffers,
            destroyed=self._destroyed,
        )

    def __repr__(self) -> str:
        return f"LocalBufferPool({self.name!r}, used={self._used}, limit={self._limit})"
