"""Credit-based flow control of one remote channel: the sender's ledger and the receiver's buffers. Pure.

Theory of operation
-------------------
As Flink's credit-based flow control: a sender may forward a buffer on a logical
channel only if the receiver has announced room for it; one buffer = one credit.

Sender side (``CreditLedger``, one per subpartition being served to a remote channel):
``on_credit(n)`` adds announced credit, ``try_spend()`` takes one before a buffer is sent
and refuses at zero. Events do not take credit (the receiver does not put them into
network buffers), but they queue behind data, so they never overtake it.

Receiver side (``InputChannelCredit``, one per remote input channel). The channel owns
``num_exclusive`` exclusive buffers (Flink's buffers-per-channel) and borrows floating
buffers from its gate's pool. Every *free* buffer the channel holds stands for exactly
one credit, either already announced to the sender or still to be announced:

    announced + unannounced == len(free exclusive) + len(free floating)

Events in, actions out:

- ``on_exclusive_segment`` / ``on_floating_segment``: a buffer became free for this
  channel (at setup, or borrowed from the pool). Before the partition request is sent
  the credit accumulates as the *initial credit* (``take_initial_credit``); afterwards
  ``announce()`` returns ``AnnounceCredit(channel, n)`` for the driver to send.
- ``on_buffer(backlog)``: a buffer arrived. It takes one announced credit (a buffer without
  credit is a ``ProtocolViolation`` by the sender) and returns the free segment to copy
  it into, floating first so floating buffers go back to the pool sooner. The sender's
  backlog is recorded; ``floating_wanted()`` then says how many floating buffers to
  borrow so that the free buffers cover the backlog *plus* the channel's initial credit
  (``num_exclusive``), as Flink's ``backlog + initialCredit`` (the gate may give all, some
  or none). So the sender keeps ``num_exclusive`` credits beyond its backlog while the
  receiver's task still reads the buffers it was sent: with a buffer timeout of a
  millisecond every flush sends a small slice that takes a whole credit, and without the
  margin the sender waited at zero credit for each slice to be read, recycled and its
  credit to travel back.
- ``on_recycle(segment, exclusive)``: the task is done with a received buffer. An
  exclusive segment becomes free again: one more credit, or, when that leaves more free
  buffers than wanted, it stands in for a free floating one, which goes back
  (``ReturnFloating``). A floating one is kept while the free buffers are fewer than
  wanted, else the action is ``ReturnFloating(channel, segment)``.
- ``release()``: the channel closes; every free segment is handed back and later
  recycles return floating segments to the pool and exclusive ones via ``ReturnExclusive``.

Invariants: credit counts never go negative; the equation above holds after every event;
a segment is in exactly one place (free here, filled and being read, or in a pool).

What it does not do: no I/O, no waiting, no pools (the driver asks the pool and reports
what it got). Segments are opaque to this module.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

from weir.errors import ProtocolViolation, UsageError

__all__ = [
    "AnnounceCredit",
    "CreditLedger",
    "InputChannelCredit",
    "InputChannelCreditStatistics",
    "ReturnExclusive",
    "ReturnFloating",
]

S = TypeVar("S")


@dataclass(frozen=True)
class AnnounceCredit:
    """Tell the sender of ``channel`` that ``credit`` more buffers are free."""

    channel: int
    credit: int


@dataclass(frozen=True)
class ReturnFloating(Generic[S]):
    """Give a floating ``segment`` back to the gate's pool."""

    channel: int
    segment: S


@dataclass(frozen=True)
class ReturnExclusive(Generic[S]):
    """The channel was released: give an exclusive ``segment`` back to the pool it came from."""

    channel: int
    segment: S


class CreditLedger:
    """Sender-side credit of one remote channel. Pure. Invariant: 0 <= available."""

    __slots__ = ("available", "channel", "total_received", "total_spent")

    def __init__(self, channel: int) -> None:
        self.channel = channel
        self.available = 0
        self.total_received = 0
        self.total_spent = 0

    def on_credit(self, n: int) -> None:
        if n <= 0:
            raise ProtocolViolation(f"channel {self.channel}: credit announcement must be positive, got {n}")
        self.available += n
        self.total_received += n

    def try_spend(self) -> bool:
        if self.available == 0:
            return False
        self.available -= 1
        self.total_spent += 1
        return True


@dataclass(frozen=True)
class InputChannelCreditStatistics:
    channel: int
    announced_credit: int  # the sender may send this many buffers now
    unannounced_credit: int  # free buffers not yet told to the sender
    exclusive_free: int
    floating_free: int
    exclusive_held: int  # exclusive buffers the channel owns (free or filled)
    floating_held: int  # floating buffers borrowed (free or filled)
    sender_backlog: int
    buffers_received: int
    credit_announced_total: int


class InputChannelCredit(Generic[S]):
    """Receiver-side credit of one remote input channel (see the module docstring)."""

    def __init__(self, channel: int, num_exclusive: int) -> None:
        if num_exclusive < 1:
            raise UsageError(
                f"channel {channel}: credit-based flow control needs at least 1 exclusive buffer "
                f"(taskmanager.network.memory.buffers-per-channel), got {num_exclusive}"
            )
        self.channel = channel
        self.num_exclusive = num_exclusive
        self._exclusive_free: deque[S] = deque()
        self._floating_free: deque[S] = deque()
        self._exclusive_held = 0
        self._floating_held = 0
        self.announced = 0
        self.unannounced = 0
        self.sender_backlog = 0
        self.requested = False  # partition request sent (with the initial credit)
        self.released = False
        self.buffers_received = 0
        self.credit_announced_total = 0

    # --- buffers becoming free --------------------------------------------------------

    @property
    def exclusive_missing(self) -> int:
        """Exclusive buffers still to obtain from the pool (0 once set up)."""
        return 0 if self.released else self.num_exclusive - self._exclusive_held

    def on_exclusive_segment(self, segment: S) -> None:
        if self.released or self._exclusive_held >= self.num_exclusive:
            raise UsageError(
                f"channel {self.channel}: got an exclusive buffer beyond its {self.num_exclusive} "
                f"(released={self.released})"
            )
        self._exclusive_held += 1
        self._exclusive_free.append(segment)
        self.unannounced += 1

    def on_floating_segment(self, segment: S) -> None:
        if self.released:
            raise UsageError(f"channel {self.channel}: got a floating buffer after it was released")
        self._floating_held += 1
        self._floating_free.append(segment)
        self.unannounced += 1

    def take_initial_credit(self) -> int:
        """The credit to send with the partition request; later credit goes through ``announce``."""
        if self.requested:
            raise UsageError(f"channel {self.channel}: partition requested twice")
        self.requested = True
        n, self.unannounced = self.unannounced, 0
        self.announced += n
        self.credit_announced_total += n
        return n

    def announce(self) -> AnnounceCredit | None:
        """Credit to announce now (``None`` if none, or before the request is sent)."""
        n = self.unannounced
        if n == 0 or not self.requested or self.released:
            return None
        self.unannounced = 0
        self.announced += n
        self.credit_announced_total += n
        return AnnounceCredit(self.channel, n)

    # --- data arriving ----------------------------------------------------------------

    def on_buffer(self, backlog: int) -> tuple[S, bool]:
        """A buffer arrived: the free segment to copy it into and whether it is exclusive."""
        if self.announced <= 0:
            raise ProtocolViolation(
                f"channel {self.channel}: received a buffer without credit (announced credit is 0)"
            )
        if backlog < 0:
            raise ProtocolViolation(f"channel {self.channel}: backlog must not be negative, got {backlog}")
        self.announced -= 1
        self.sender_backlog = backlog
        self.buffers_received += 1
        if self._floating_free:
            return self._floating_free.popleft(), False
        return self._exclusive_free.popleft(), True

    def on_backlog(self, backlog: int) -> None:
        """The sender's backlog as carried by an event."""
        if backlog < 0:
            raise ProtocolViolation(f"channel {self.channel}: backlog must not be negative, got {backlog}")
        self.sender_backlog = backlog

    @property
    def required_free(self) -> int:
        """Free buffers the channel wants: the sender's backlog plus the initial credit
        (Flink's ``backlog + initialCredit``)."""
        return self.sender_backlog + self.num_exclusive

    def floating_wanted(self) -> int:
        """How many floating buffers to borrow so that the free buffers reach ``required_free``."""
        if self.released:
            return 0
        return max(0, self.required_free - len(self._floating_free) - len(self._exclusive_free))

    # --- buffers coming back ----------------------------------------------------------

    def on_recycle(self, segment: S, exclusive: bool) -> ReturnFloating[S] | ReturnExclusive[S] | None:
        """A received buffer was recycled: keep it as credit, or the action that gives it away."""
        if exclusive:
            if self.released:
                self._exclusive_held -= 1
                return ReturnExclusive(self.channel, segment)
            self._exclusive_free.append(segment)
            if self._floating_free and self.free_buffers > self.required_free:
                # the exclusive buffer takes the place of a free floating one, whose credit
                # it inherits; the floating one goes back to the pool (Flink's BufferManager)
                self._floating_held -= 1
                return ReturnFloating(self.channel, self._floating_free.popleft())
            self.unannounced += 1
            return None
        if self.floating_wanted() > 0:
            self._floating_free.append(segment)
            self.unannounced += 1
            return None
        self._floating_held -= 1
        return ReturnFloating(self.channel, segment)

    def release(self) -> tuple[list[S], list[S]]:
        """Close the channel: its free (exclusive, floating) segments, to return to the pool."""
        self.released = True
        exclusive = list(self._exclusive_free)
        floating = list(self._floating_free)
        self._exclusive_free.clear()
        self._floating_free.clear()
        self._exclusive_held -= len(exclusive)
        self._floating_held -= len(floating)
        self.announced = 0
        self.unannounced = 0
        return exclusive, floating

    # --- inspection -------------------------------------------------------------------

    @property
    def free_buffers(self) -> int:
        return len(self._exclusive_free) + len(self._floating_free)

    def statistics(self) -> InputChannelCreditStatistics:
        return InputChannelCreditStatistics(
            channel=self.channel,
            announced_credit=self.announced,
            unannounced_credit=self.unannounced,
            exclusive_free=len(self._exclusive_free),
            floating_free=len(self._floating_free),
            exclusive_held=self._exclusive_held,
            floating_held=self._floating_held,
            sender_backlog=self.sender_backlog,
            buffers_received=self.buffers_received,
            credit_announced_total=self.credit_announced_total,
        )
