from __future__ import annotations

import pytest

import weir.state.state_file  # noqa: F401  (registers the snapshot types)
from weir.errors import UsageError
from weir.keys.reference import KeyGroupRange
from weir.state.serde import decode_value, encode_value
from weir.time.timers import InternalTimerService, Timer, TimerSnapshot

NS = "ns"


def test_event_time_timers_fire_in_timestamp_then_registration_order() -> None:
    timers = InternalTimerService()
    timers.register_event_time_timer("b", 1, NS, 20)
    timers.register_event_time_timer("a", 0, NS, 10)
    timers.register_event_time_timer("c", 2, NS, 20)
    timers.register_event_time_timer("d", 3, NS, 30)
    assert timers.advance_watermark(5) == []
    due = timers.advance_watermark(20)
    assert [(t.timestamp, t.key) for t in due] == [(10, "a"), (20, "b"), (20, "c")]
    assert due[0] == Timer(10, "a", NS, 0)
    assert timers.number_of_timers() == 1
    assert timers.current_watermark == 20
    assert [t.key for t in timers.advance_watermark(1 << 62)] == ["d"]


def test_one_timer_per_key_namespace_timestamp() -> None:
    timers = InternalTimerService()
    assert timers.register_event_time_timer("a", 0, NS, 10)
    assert not timers.register_event_time_timer("a", 0, NS, 10)
    assert timers.register_event_time_timer("a", 0, "other", 10)
    assert timers.register_event_time_timer("a", 0, NS, 11)
    assert timers.register_processing_time_timer("a", 0, NS, 10)
    assert timers.number_of_timers() == 4
    assert timers.number_of_event_time_timers() == 3
    assert len(timers.advance_watermark(11)) == 3


def test_deleted_timers_do_not_fire() -> None:
    timers = InternalTimerService()
    timers.register_event_time_timer("a", 0, NS, 10)
    timers.register_event_time_timer("b", 0, NS, 10)
    assert timers.delete_event_time_timer("a", 0, NS, 10)
    assert not timers.delete_event_time_timer("a", 0, NS, 10)
    assert not timers.delete_event_time_timer("zzz", 9, NS, 10)
    assert timers.number_of_timers() == 1
    assert [t.key for t in timers.advance_watermark(10)] == ["b"]


def test_re_registered_timer_takes_its_new_registration_order() -> None:
    timers = InternalTimerService()
    timers.register_event_time_timer("a", 0, NS, 10)
    timers.register_event_time_timer("b", 0, NS, 10)
    timers.delete_event_time_timer("a", 0, NS, 10)
    timers.register_event_time_timer("a", 0, NS, 10)
    assert [t.key for t in timers.advance_watermark(10)] == ["b", "a"]
    assert timers.number_of_timers() == 0


def test_processing_time_timers_and_next_deadline() -> None:
    timers = InternalTimerService()
    assert timers.next_processing_time() is None
    timers.register_processing_time_timer("a", 0, NS, 300)
    timers.register_processing_time_timer("b", 0, NS, 100)
    assert timers.next_processing_time() == 100
    timers.delete_processing_time_timer("b", 0, NS, 100)
    assert timers.next_processing_time() == 300
    assert timers.advance_processing_time(299) == []
    assert timers.advance_processing_time(300) == [Timer(300, "a", NS, 0)]
    assert timers.next_processing_time() is None
    # Event-time advances do not fire processing-time timers.
    timers.register_processing_time_timer("c", 0, NS, 5)
    assert timers.advance_watermark(1000) == []
    assert timers.number_of_processing_time_timers() == 1


def test_timer_registered_at_or_before_the_watermark_fires_on_the_next_advance() -> None:
    timers = InternalTimerService()
    timers.advance_watermark(100)
    timers.register_event_time_timer("late", 0, NS, 50)
    assert timers.advance_watermark(100) == [Timer(50, "late", NS, 0)]


def test_pop_drains_timers_registered_while_firing() -> None:
    timers = InternalTimerService()
    timers.register_event_time_timer("a", 0, NS, 10)
    fired = []
    while (timer := timers.pop_event_time_timer(20)) is not None:
        fired.append(timer.key)
        if timer.key == "a":
            timers.register_event_time_timer("b", 0, NS, 15)
    assert fired == ["a", "b"]
    assert timers.pop_processing_time_timer(1 << 62) is None


def test_many_deletions_compact_the_heap() -> None:
    timers = InternalTimerService()
    for i in range(1000):
        timers.register_event_time_timer(i, i % 8, NS, i)
    for i in range(990):
        timers.delete_event_time_timer(i, i % 8, NS, i)
    assert timers.statistics()["event_time_heap_entries"] <= 200
    assert [t.key for t in timers.advance_watermark(10_000)] == list(range(990, 1000))
    assert timers.next_event_time() is None


def test_range_check_on_register() -> None:
    timers = InternalTimerService(KeyGroupRange(0, 3))
    timers.register_event_time_timer("a", 3, NS, 1)
    with pytest.raises(UsageError, match="key group 4"):
        timers.register_event_time_timer("a", 4, NS, 1)


def test_snapshot_is_immutable_ordered_and_picklable() -> None:
    timers = InternalTimerService()
    timers.register_event_time_timer("b", 1, NS, 20)
    timers.register_event_time_timer("a", 0, NS, 10)
    timers.register_processing_time_timer("p", 5, (1, 2), 7)
    snap = timers.snapshot()
    assert isinstance(snap, TimerSnapshot)
    assert snap.event_time == (Timer(10, "a", NS, 0), Timer(20, "b", NS, 1))
    assert snap.processing_time == (Timer(7, "p", (1, 2), 5),)
    assert len(snap) == 3
    assert decode_value(encode_value(snap), trusted=False) == snap  # plain data in a state file
    timers.advance_watermark(100)
    assert len(snap.event_time) == 2  # not affected by later changes
    with pytest.raises(AttributeError):
        snap.event_time = ()  # type: ignore[misc]


def test_an_async_snapshot_holds_the_timers_of_the_barrier() -> None:
    """The synchronous phase copies; registrations, deletions and firings after it never show."""
    timers = InternalTimerService(KeyGroupRange(0, 7))
    for kg in range(8):
        timers.register_event_time_timer(f"k{kg}", kg, NS, 100 - kg)
    timers.register_processing_time_timer("p", 3, NS, 7)
    expected = timers.snapshot()
    pending = timers.snapshot_async()
    timers.register_event_time_timer("late", 2, NS, 1)
    timers.delete_event_time_timer("k3", 3, NS, 97)
    timers.advance_watermark(95)
    timers.register_processing_time_timer("q", 4, NS, 8)
    assert pending.result() == expected
    assert pending.result() is pending.result()


def test_snapshot_of_a_range_and_restore_split() -> None:
    timers = InternalTimerService()
    for kg in range(8):
        timers.register_event_time_timer(f"k{kg}", kg, NS, 100 - kg)
        timers.register_processing_time_timer(f"k{kg}", kg, NS, kg)
    assert len(timers.snapshot(KeyGroupRange(2, 3))) == 4
    snap = timers.snapshot()
    low = InternalTimerService.from_snapshots([snap], KeyGroupRange(0, 3))
    high = InternalTimerService()
    high.restore([snap], KeyGroupRange(4, 7))
    assert low.number_of_timers() == high.number_of_timers() == 8
    assert [t.key_group for t in low.advance_watermark(1000)] == [3, 2, 1, 0]
    assert high.next_processing_time() == 4
    with pytest.raises(UsageError):
        low.register_event_time_timer("x", 5, NS, 1)
