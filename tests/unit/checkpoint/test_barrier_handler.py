"""Barrier alignment: every transition of the aligned, unaligned and alternating handlers."""

from __future__ import annotations

import pytest

from weir.checkpoint.barrier_handler import (
    AbortCheckpoint,
    AlignedBarrierHandler,
    AlternatingBarrierHandler,
    BlockChannel,
    CancelCheckpointMarker,
    CollectingAligned,
    CollectingUnaligned,
    ForwardBarrier,
    PersistInFlight,
    StopPersisting,
    TakeSnapshot,
    UnalignedBarrierHandler,
    UnblockAll,
    WaitingForFirstBarrier,
    make_barrier_handler,
)
from weir.errors import ProtocolViolation, UsageError
from weir.network.events import CheckpointBarrier, EndOfPartition, Watermark


def b(
    checkpoint_id: int, timestamp: int = 0, *, savepoint: bool = False, unaligned: bool = False
) -> CheckpointBarrier:
    return CheckpointBarrier(checkpoint_id, timestamp, is_savepoint=savepoint, unaligned=unaligned)


# ------------------------------------------------------------------------------- aligned


def test_alignment_waits_for_the_last_channel() -> None:
    # STYLE.md's sketch; the completing step also forwards the barrier downstream.
    gate = AlignedBarrierHandler(channels=2)
    assert gate.on_barrier(channel=0, checkpoint_id=7) == [BlockChannel(0)]
    assert gate.on_barrier(channel=1, checkpoint_id=7) == [
        TakeSnapshot(7),
        ForwardBarrier(CheckpointBarrier(7, 0)),
        UnblockAll(),
    ]
    assert gate.state == WaitingForFirstBarrier(7)


def test_aligned_with_one_channel_snapshots_at_once() -> None:
    gate = AlignedBarrierHandler(channels=1)
    assert gate.on_barrier(0, b(3, 10)) == [TakeSnapshot(3), ForwardBarrier(b(3, 10))]
    assert isinstance(gate.state, WaitingForFirstBarrier)


def test_aligned_three_channels_blocks_each_in_turn() -> None:
    gate = AlignedBarrierHandler(3)
    assert gate.on_barrier(2, b(1)) == [BlockChannel(2)]
    assert gate.on_barrier(0, b(1)) == [BlockChannel(0)]
    assert gate.state == CollectingAligned(b(1), frozenset({0, 2}))
    assert gate.blocked_channels == {0, 2}
    assert gate.on_buffer(1, 100) == []
    assert gate.on_barrier(1, b(1)) == [TakeSnapshot(1), ForwardBarrier(b(1)), UnblockAll()]
    assert gate.blocked_channels == frozenset()


def test_aligned_ignores_an_unaligned_flag() -> None:
    gate = AlignedBarrierHandler(2)
    assert gate.on_barrier(0, b(1, unaligned=True)) == [BlockChannel(0)]


def test_newer_barrier_aborts_the_older_alignment() -> None:
    gate = AlignedBarrierHandler(2)
    gate.on_barrier(0, b(1))
    actions = gate.on_barrier(1, b(2))
    assert isinstance(actions[0], AbortCheckpoint) and actions[0].checkpoint_id == 1
    assert actions[1:] == [UnblockAll(), BlockChannel(1)]
    assert gate.state == CollectingAligned(b(2), frozenset({1}))
    # The stale barrier 1 on channel 1 never comes (channel 1 was past it); barrier 2 on 0:
    assert gate.on_barrier(0, b(2)) == [TakeSnapshot(2), ForwardBarrier(b(2)), UnblockAll()]


def test_barriers_of_finished_checkpoints_are_ignored() -> None:
    gate = AlignedBarrierHandler(2)
    gate.on_barrier(0, b(1))
    gate.on_barrier(1, b(2))  # aborts 1
    assert gate.on_barrier(0, b(1)) == []  # older than the one in progress
    gate.on_barrier(0, b(2))
    assert gate.on_barrier(0, b(2)) == []  # completed
    assert gate.on_barrier(1, b(1)) == []


def test_cancel_marker_aborts_and_unblocks() -> None:
    gate = AlignedBarrierHandler(2)
    gate.on_barrier(0, b(4))
    assert gate.on_cancel(1, 4) == [
        AbortCheckpoint(4, "cancelled by upstream (marker on channel 1)"),
        UnblockAll(),
    ]
    assert gate.state == WaitingForFirstBarrier(4)
    assert gate.on_barrier(1, b(4)) == []  # the aborted checkpoint's late barrier
    assert gate.on_event(0, CancelCheckpointMarker(4)) == []


def test_cancel_marker_for_a_checkpoint_not_yet_seen() -> None:
    gate = AlignedBarrierHandler(2)
    assert gate.on_cancel(0, 5) == [AbortCheckpoint(5, "cancelled by upstream (marker on channel 0)")]
    assert gate.on_barrier(1, b(5)) == []
    assert gate.on_barrier(1, b(6)) == [BlockChannel(1)]


def test_cancel_marker_for_a_newer_checkpoint_aborts_both() -> None:
    gate = AlignedBarrierHandler(2)
    gate.on_barrier(0, b(1))
    actions = gate.on_cancel(1, 2)
    assert [type(a) for a in actions] == [AbortCheckpoint, UnblockAll, AbortCheckpoint]
    assert [a.checkpoint_id for a in actions if isinstance(a, AbortCheckpoint)] == [1, 2]
    assert gate.state == WaitingForFirstBarrier(2)
    assert gate.on_cancel(1, 1) == []


def test_end_of_partition_counts_as_aligned() -> None:
    gate = AlignedBarrierHandler(3)
    gate.on_barrier(0, b(1))
    assert gate.on_end_of_partition(2) == []
    assert gate.on_event(1, EndOfPartition()) == [TakeSnapshot(1), ForwardBarrier(b(1)), UnblockAll()]
    # Later checkpoints need only the live channel; it snapshots at once.
    assert gate.on_barrier(0, b(2)) == [TakeSnapshot(2), ForwardBarrier(b(2))]


def test_end_of_partition_while_idle_and_then_anything_on_it_is_illegal() -> None:
    gate = AlignedBarrierHandler(2)
    assert gate.on_end_of_partition(1) == []
    with pytest.raises(ProtocolViolation, match="end of partition"):
        gate.on_barrier(1, b(1))
    with pytest.raises(ProtocolViolation):
        gate.on_buffer(1, 10)


def test_illegal_inputs_name_handler_state_and_event() -> None:
    gate = AlignedBarrierHandler(2)
    with pytest.raises(
        ProtocolViolation, match=r"AlignedBarrierHandler: illegal barrier 1 on channel 2 in state"
    ):
        gate.on_barrier(2, b(1))
    with pytest.raises(ProtocolViolation, match="channel -1"):
        gate.on_buffer(-1)
    with pytest.raises(ProtocolViolation, match="checkpoint id >= 0"):
        gate.on_barrier(0, b(-3))
    with pytest.raises(ProtocolViolation, match="cancel marker -1"):
        gate.on_cancel(0, -1)
    gate.on_barrier(0, b(1))
    with pytest.raises(ProtocolViolation, match=r"CollectingAligned.*second barrier"):
        gate.on_barrier(0, b(1))
    with pytest.raises(ProtocolViolation, match="blocked"):
        gate.on_buffer(0, 1)
    with pytest.raises(UsageError):
        AlignedBarrierHandler(0)
    with pytest.raises(UsageError):
        gate.on_barrier(1)


def test_other_events_give_no_actions() -> None:
    gate = AlignedBarrierHandler(2)
    assert gate.on_event(0, Watermark(5)) == []
    assert gate.on_event(0, b(1)) == [BlockChannel(0)]


def test_aligned_statistics() -> None:
    gate = AlignedBarrierHandler(2)
    gate.on_barrier(0, b(1), now_ms=100)
    gate.on_buffer(1, 40)
    stats = gate.statistics()
    assert stats.state == "CollectingAligned"
    assert stats.checkpoint_id == 1
    assert stats.num_blocked_channels == 1
    assert stats.alignment_start_ms == 100
    assert stats.bytes_processed_during_alignment == 40
    gate.on_barrier(1, b(1), now_ms=130)
    stats = gate.statistics()
    assert stats.checkpoint_id is None
    assert stats.last_completed_checkpoint_id == 1
    assert stats.last_alignment_duration_ms == 30


# ----------------------------------------------------------------------------- unaligned


def test_unaligned_snapshots_at_the_first_barrier_and_persists_the_rest() -> None:
    gate = UnalignedBarrierHandler(3)
    assert gate.on_barrier(1, b(1)) == [
        ForwardBarrier(b(1, unaligned=True)),
        TakeSnapshot(1, unaligned=True),
        PersistInFlight(0, 1),
        PersistInFlight(2, 1),
    ]
    assert gate.state == CollectingUnaligned(b(1, unaligned=True), frozenset({0, 2}))
    assert gate.blocked_channels == frozenset()
    gate.on_buffer(0, 10)
    gate.on_buffer(1, 99)  # after its barrier: not persisted
    gate.on_buffer(2, 5)
    assert gate.statistics().bytes_persisted == 15
    assert gate.on_barrier(2, b(1)) == [StopPersisting(2)]
    gate.on_buffer(2, 7)
    assert gate.on_barrier(0, b(1)) == [StopPersisting(0)]
    assert gate.state == WaitingForFirstBarrier(1)
    assert gate.statistics().bytes_persisted == 15
    assert gate.statistics().last_completed_checkpoint_id == 1


def test_unaligned_with_one_channel() -> None:
    gate = UnalignedBarrierHandler(1)
    assert gate.on_barrier(0, b(1, unaligned=True)) == [
        ForwardBarrier(b(1, unaligned=True)),
        TakeSnapshot(1, unaligned=True),
    ]
    assert isinstance(gate.state, WaitingForFirstBarrier)


def test_unaligned_handler_aligns_savepoints() -> None:
    gate = UnalignedBarrierHandler(2)
    assert gate.on_barrier(0, b(1, savepoint=True)) == [BlockChannel(0)]
    assert gate.on_barrier(1, b(1, savepoint=True)) == [
        TakeSnapshot(1),
        ForwardBarrier(b(1, savepoint=True)),
        UnblockAll(),
    ]


def test_unaligned_newer_barrier_aborts_and_stops_persisting() -> None:
    gate = UnalignedBarrierHandler(3)
    gate.on_barrier(0, b(1))
    actions = gate.on_barrier(1, b(2))
    assert actions[0] == AbortCheckpoint(1, "subsumed by checkpoint 2 (barrier on channel 1)")
    assert actions[1:3] == [StopPersisting(1), StopPersisting(2)]
    assert actions[3:] == [
        ForwardBarrier(b(2, unaligned=True)),
        TakeSnapshot(2, unaligned=True),
        PersistInFlight(0, 2),
        PersistInFlight(2, 2),
    ]


def test_unaligned_cancel_and_end_of_partition() -> None:
    gate = UnalignedBarrierHandler(3)
    gate.on_barrier(0, b(1))
    assert gate.on_end_of_partition(1) == [StopPersisting(1)]
    assert gate.on_cancel(2, 1) == [
        AbortCheckpoint(1, "cancelled by upstream (marker on channel 2)"),
        StopPersisting(2),
    ]
    assert gate.on_barrier(2, b(1)) == []
    gate.on_barrier(0, b(2))
    assert gate.on_end_of_partition(2) == [StopPersisting(2)]
    assert gate.state == WaitingForFirstBarrier(2)


def test_unaligned_second_barrier_on_a_channel_is_illegal() -> None:
    gate = UnalignedBarrierHandler(2)
    gate.on_barrier(0, b(1))
    with pytest.raises(ProtocolViolation, match=r"UnalignedBarrierHandler.*CollectingUnaligned"):
        gate.on_barrier(0, b(1))


# --------------------------------------------------------------------------- alternating


def test_alternating_stays_aligned_within_the_timeout() -> None:
    gate = AlternatingBarrierHandler(2, aligned_timeout_ms=50)
    assert gate.on_barrier(0, b(1, 1000), now_ms=1010) == [BlockChannel(0)]
    assert gate.on_time(1050) == []
    assert gate.on_barrier(1, b(1, 1000), now_ms=1050) == [
        TakeSnapshot(1),
        ForwardBarrier(b(1, 1000)),
        UnblockAll(),
    ]
    assert gate.statistics().num_switched_to_unaligned == 0


def test_alternating_switches_on_time() -> None:
    gate = AlternatingBarrierHandler(3, aligned_timeout_ms=50)
    gate.on_barrier(0, b(1, 1000), now_ms=1010)
    assert gate.on_time(1051) == [
        ForwardBarrier(b(1, 1000, unaligned=True)),
        TakeSnapshot(1, unaligned=True),
        PersistInFlight(1, 1),
        PersistInFlight(2, 1),
        UnblockAll(),
    ]
    assert gate.on_barrier(2, b(1, 1000)) == [StopPersisting(2)]
    assert gate.on_barrier(1, b(1, 1000)) == [StopPersisting(1)]
    assert gate.state == WaitingForFirstBarrier(1)
    assert gate.statistics().num_switched_to_unaligned == 1
    # The next checkpoint starts aligned again.
    assert gate.on_barrier(0, b(2, 2000), now_ms=2000) == [BlockChannel(0)]


def test_alternating_switches_when_a_late_barrier_arrives() -> None:
    gate = AlternatingBarrierHandler(3, aligned_timeout_ms=50)
    gate.on_barrier(0, b(1, 1000), now_ms=1000)
    assert gate.on_barrier(1, b(1, 1000), now_ms=1100) == [
        ForwardBarrier(b(1, 1000, unaligned=True)),
        TakeSnapshot(1, unaligned=True),
        PersistInFlight(2, 1),
        UnblockAll(),
    ]


def test_alternating_first_barrier_already_late_starts_unaligned() -> None:
    gate = AlternatingBarrierHandler(2, aligned_timeout_ms=50)
    assert gate.on_barrier(0, b(1, 1000), now_ms=2000) == [
        ForwardBarrier(b(1, 1000, unaligned=True)),
        TakeSnapshot(1, unaligned=True),
        PersistInFlight(1, 1),
    ]


def test_alternating_honours_an_unaligned_barrier() -> None:
    gate = AlternatingBarrierHandler(2, aligned_timeout_ms=50)
    assert gate.on_barrier(0, b(1, unaligned=True))[1] == TakeSnapshot(1, unaligned=True)


def test_alternating_never_switches_a_savepoint() -> None:
    gate = AlternatingBarrierHandler(2, aligned_timeout_ms=50)
    assert gate.on_barrier(0, b(1, 0, savepoint=True), now_ms=10_000) == [BlockChannel(0)]
    assert gate.on_time(1_000_000) == []
    assert gate.on_barrier(1, b(1, 0, savepoint=True))[0] == TakeSnapshot(1)


def test_factory_and_validation() -> None:
    assert isinstance(make_barrier_handler(2, unaligned=False), AlignedBarrierHandler)
    assert isinstance(make_barrier_handler(2, unaligned=True), UnalignedBarrierHandler)
    assert isinstance(
        make_barrier_handler(2, unaligned=True, aligned_timeout_ms=5), AlternatingBarrierHandler
    )
    with pytest.raises(UsageError):
        AlternatingBarrierHandler(2, aligned_timeout_ms=-1)


def test_checkpoint_modules_are_pure() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import weir.checkpoint.coordinator, weir.checkpoint.barrier_handler; "
        "print(sorted(m for m in ('trio', 'lmdb', 'socket', 'asyncio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
