"""Credit: the sender's ledger and the receiver's exclusive/floating buffers, events in, actions out."""

from __future__ import annotations

import pytest

from weir.errors import ProtocolViolation, UsageError
from weir.network.credit import (
    AnnounceCredit,
    CreditLedger,
    InputChannelCredit,
    ReturnExclusive,
    ReturnFloating,
)


def test_ledger_spends_only_announced_credit() -> None:
    ledger = CreditLedger(channel=3)
    assert not ledger.try_spend()
    ledger.on_credit(2)
    assert ledger.try_spend() and ledger.try_spend()
    assert not ledger.try_spend()
    assert ledger.available == 0 and ledger.total_received == 2 and ledger.total_spent == 2


@pytest.mark.parametrize("n", [0, -1])
def test_ledger_refuses_non_positive_announcements(n: int) -> None:
    ledger = CreditLedger(channel=3)
    with pytest.raises(ProtocolViolation, match=f"channel 3: credit announcement must be positive, got {n}"):
        ledger.on_credit(n)


def make_channel(num_exclusive: int = 2) -> InputChannelCredit[str]:
    credit: InputChannelCredit[str] = InputChannelCredit(channel=0, num_exclusive=num_exclusive)
    for i in range(num_exclusive):
        credit.on_exclusive_segment(f"x{i}")
    return credit


def test_exclusive_buffers_are_the_initial_credit() -> None:
    credit = make_channel()
    assert credit.announce() is None  # nothing is announced before the partition request
    assert credit.take_initial_credit() == 2
    assert credit.announced == 2 and credit.unannounced == 0
    with pytest.raises(UsageError, match="requested twice"):
        credit.take_initial_credit()


def test_a_buffer_without_credit_is_a_protocol_violation() -> None:
    credit = make_channel()
    with pytest.raises(ProtocolViolation, match="without credit"):
        credit.on_buffer(backlog=0)
    credit.take_initial_credit()
    credit.on_buffer(0)
    credit.on_buffer(0)
    with pytest.raises(ProtocolViolation, match="without credit"):
        credit.on_buffer(0)


def test_backlog_asks_for_floating_buffers_and_each_is_announced() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    segment, exclusive = credit.on_buffer(backlog=5)
    assert (segment, exclusive) == ("x0", True)
    assert credit.floating_wanted() == 6  # backlog 5 + initial credit 2, one exclusive still free
    credit.on_floating_segment("f0")
    credit.on_floating_segment("f1")
    assert credit.announce() == AnnounceCredit(channel=0, credit=2)
    assert credit.floating_wanted() == 4
    # floating buffers are filled first, so they go back to the pool sooner
    assert credit.on_buffer(backlog=1) == ("f0", False)


def test_the_initial_credit_stays_free_beyond_the_backlog() -> None:
    """As Flink's ``backlog + initialCredit``: while the task reads a buffer, a floating one
    takes its place, so a sender with one flushed slice behind it still holds two credits."""
    credit = make_channel()
    credit.take_initial_credit()
    credit.on_buffer(backlog=1)  # x0 is being read; one slice is queued behind it
    assert credit.required_free == 3
    assert credit.floating_wanted() == 2
    credit.on_floating_segment("f0")
    credit.on_floating_segment("f1")
    assert credit.announce() == AnnounceCredit(channel=0, credit=2)
    assert credit.announced == 3  # x1, f0, f1
    credit.on_buffer(backlog=0)  # f0 is being read, nothing behind it
    assert credit.floating_wanted() == 0  # x1 and f1 are the initial credit


def test_a_buffer_being_read_is_replaced_by_a_floating_one_even_without_a_backlog() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    credit.on_buffer(backlog=0)
    credit.on_buffer(backlog=0)  # both exclusive buffers are being read
    assert credit.floating_wanted() == 2


def test_a_recycled_exclusive_buffer_stands_in_for_a_free_floating_one() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    credit.on_buffer(backlog=0)  # x0 is being read
    credit.on_floating_segment("f0")
    assert credit.announce() == AnnounceCredit(0, 1)
    # x0 comes back: three free buffers where two are wanted, so f0 goes back to the pool and
    # x0 takes over its credit (nothing new to announce)
    assert credit.on_recycle("x0", True) == ReturnFloating(0, "f0")
    assert credit.announce() is None
    stats = credit.statistics()
    assert (stats.exclusive_free, stats.floating_free, stats.floating_held, stats.announced_credit) == (
        2,
        0,
        0,
        2,
    )


def test_a_recycled_exclusive_buffer_is_announced_again() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    segment, exclusive = credit.on_buffer(backlog=0)
    assert credit.on_recycle(segment, exclusive) is None
    assert credit.announce() == AnnounceCredit(0, 1)
    assert credit.announced == 2


def test_a_recycled_floating_buffer_goes_back_unless_the_backlog_wants_it() -> None:
    credit = make_channel(num_exclusive=1)
    credit.take_initial_credit()
    credit.on_buffer(backlog=2)
    credit.on_floating_segment("f0")
    credit.on_floating_segment("f1")
    credit.announce()
    segment, exclusive = credit.on_buffer(backlog=3)
    assert (segment, exclusive) == ("f0", False)
    assert credit.floating_wanted() == 3  # backlog 3 + initial credit 1, f1 free
    assert credit.on_recycle(segment, exclusive) is None  # still wanted: kept as credit
    assert credit.announce() == AnnounceCredit(0, 1)
    credit.on_backlog(0)
    assert credit.on_recycle("x0", True) == ReturnFloating(0, "f1")  # x0 replaces a free floating
    assert credit.on_buffer(backlog=0) == ("f0", False)
    assert credit.on_recycle("f0", False) == ReturnFloating(0, "f0")


def test_release_hands_back_free_buffers_and_later_recycles() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    credit.on_buffer(backlog=1)
    credit.on_floating_segment("f0")
    exclusive, floating = credit.release()
    assert (exclusive, floating) == (["x1"], ["f0"])
    assert credit.on_recycle("x0", True) == ReturnExclusive(0, "x0")
    assert credit.announce() is None and credit.floating_wanted() == 0
    stats = credit.statistics()
    assert (stats.exclusive_held, stats.floating_held, stats.announced_credit) == (0, 0, 0)


def test_no_more_exclusive_buffers_than_configured() -> None:
    credit = make_channel(num_exclusive=1)
    assert credit.exclusive_missing == 0
    with pytest.raises(UsageError, match="beyond its 1"):
        credit.on_exclusive_segment("extra")


def test_at_least_one_exclusive_buffer() -> None:
    with pytest.raises(UsageError, match="at least 1 exclusive buffer"):
        InputChannelCredit(channel=0, num_exclusive=0)


def test_negative_backlog_is_a_protocol_violation() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    with pytest.raises(ProtocolViolation, match="backlog"):
        credit.on_buffer(backlog=-1)
    with pytest.raises(ProtocolViolation, match="backlog"):
        credit.on_backlog(-2)


def test_statistics() -> None:
    credit = make_channel()
    credit.take_initial_credit()
    credit.on_buffer(backlog=4)
    stats = credit.statistics()
    assert stats.announced_credit == 1
    assert stats.exclusive_free == 1 and stats.exclusive_held == 2
    assert stats.sender_backlog == 4 and stats.buffers_received == 1 and stats.credit_announced_total == 2
