"""Barrier handlers over random interleavings of per-channel streams: the cut is consistent.

A model input gate holds, per channel, data tokens and barriers in channel order; the
test reads any non-blocked channel at each step (hypothesis chooses) and carries out the
handler's actions. At each ``TakeSnapshot(X)`` it records which data the operator had
processed; while a channel is persisting for ``X`` it records the data read from it.
For every completed checkpoint, snapshot and persisted data together must be exactly
the data before each channel's barrier ``X``, without overlap; aligned checkpoints
persist nothing, so the snapshot alone is the cut. Cancel markers (in place of a barrier)
abort their checkpoint and never leave a channel blocked.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.checkpoint.barrier_handler import (
    AbortCheckpoint,
    AlignedBarrierHandler,
    AlternatingBarrierHandler,
    BarrierHandler,
    BlockChannel,
    PersistInFlight,
    StopPersisting,
    TakeSnapshot,
    UnalignedBarrierHandler,
    UnblockAll,
)
from weir.network.events import CheckpointBarrier

DATA, BARRIER, CANCEL, END = "data", "barrier", "cancel", "end"


@dataclass(frozen=True)
class Item:
    kind: str
    channel: int
    value: int  # data: sequence number on the channel; barrier: checkpoint id


@st.composite
def gate_streams(draw: st.DrawFn) -> tuple[int, int, list[list[Item]]]:
    """``channels`` streams carrying barriers 1..k in order; a stream with fewer ends early."""
    channels = draw(st.integers(1, 4))
    k = draw(st.integers(1, 4))
    streams: list[list[Item]] = []
    for ch in range(channels):
        n_barriers = draw(st.integers(0, k)) if draw(st.booleans()) and ch > 0 else k
        items: list[Item] = []
        seq = 0
        for checkpoint_id in range(1, n_barriers + 1):
            for _ in range(draw(st.integers(0, 3))):
                items.append(Item(DATA, ch, seq))
                seq += 1
            # Now and then upstream cancels the checkpoint: a marker instead of the barrier.
            kind = CANCEL if draw(st.integers(0, 9)) == 0 else BARRIER
            items.append(Item(kind, ch, checkpoint_id))
        for _ in range(draw(st.integers(0, 3))):
            items.append(Item(DATA, ch, seq))
            seq += 1
        if n_barriers < k or draw(st.booleans()):
            items.append(Item(END, ch, 0))
        streams.append(items)
    return channels, k, streams


def expected_cut(streams: list[list[Item]], checkpoint_id: int) -> set[Item]:
    """The data before barrier ``checkpoint_id`` on every channel (all of it if it never comes)."""
    cut: set[Item] = set()
    for items in streams:
        for item in items:
            if item.kind in (BARRIER, CANCEL) and item.value == checkpoint_id:
                break
            if item.kind == DATA:
                cut.add(item)
    return cut


@dataclass
class Outcome:
    snapshots: dict[int, tuple[set[Item], bool]]  # id -> (processed data, unaligned)
    persisted: dict[int, set[Item]]
    aborted: set[int]
    forwarded: list[int]
    first_barrier_step: dict[int, int]
    snapshot_step: dict[int, int]


def run(
    handler: BarrierHandler, streams: list[list[Item]], data: st.DataObject, with_time: bool = False
) -> Outcome:
    positions = [0] * len(streams)
    blocked: set[int] = set()
    persisting: dict[int, int] = {}  # channel -> checkpoint id
    processed: set[Item] = set()
    out = Outcome({}, {}, set(), [], {}, {})
    now = 0
    step = 0
    while True:
        readable = [c for c, items in enumerate(streams) if positions[c] < len(items) and c not in blocked]
        if not readable:
            # Nothing left to read; no channel may be stuck behind a block.
            assert all(positions[c] == len(items) for c, items in enumerate(streams)), (positions, blocked)
            break
        step += 1
        actions = []
        if with_time and data.draw(st.booleans()):
            now += data.draw(st.integers(0, 60))
            actions += handler.on_time(now)
        channel = data.draw(st.sampled_from(readable))
        item = streams[channel][positions[channel]]
        positions[channel] += 1
        if item.kind == DATA:
            processed.add(item)
            if channel in persisting:
                out.persisted.setdefault(persisting[channel], set()).add(item)
            actions += handler.on_buffer(channel, 1)
        elif item.kind == BARRIER:
            out.first_barrier_step.setdefault(item.value, step)
            barrier = CheckpointBarrier(item.value, timestamp=100 * item.value)
            actions += handler.on_barrier(channel, barrier, now_ms=now if with_time else None)
        elif item.kind == CANCEL:
            actions += handler.on_cancel(channel, item.value)
        else:
            actions += handler.on_end_of_partition(channel)
        for action in actions:
            if isinstance(action, BlockChannel):
                assert action.channel not in blocked
                blocked.add(action.channel)
            elif isinstance(action, UnblockAll):
                blocked.clear()
            elif isinstance(action, TakeSnapshot):
                assert action.checkpoint_id not in out.snapshots
                out.snapshots[action.checkpoint_id] = (set(processed), action.unaligned)
                out.snapshot_step[action.checkpoint_id] = step
            elif isinstance(action, PersistInFlight):
                assert action.channel not in persisting
                persisting[action.channel] = action.checkpoint_id
            elif isinstance(action, StopPersisting):
                persisting.pop(action.channel)
            elif isinstance(action, AbortCheckpoint):
                out.aborted.add(action.checkpoint_id)
            else:
                out.forwarded.append(action.barrier.checkpoint_id)
    assert not blocked
    assert not persisting
    return out


def cancelled(streams: list[list[Item]]) -> set[int]:
    return {item.value for items in streams for item in items if item.kind == CANCEL}


def check_cuts(out: Outcome, streams: list[list[Item]], k: int) -> None:
    assert cancelled(streams) <= out.aborted
    for checkpoint_id in range(1, k + 1):
        if checkpoint_id in out.aborted:
            continue
        assert checkpoint_id in out.snapshots, f"checkpoint {checkpoint_id} neither completed nor aborted"
        snapshot, unaligned = out.snapshots[checkpoint_id]
        persisted = out.persisted.get(checkpoint_id, set())
        assert not snapshot & persisted
        assert snapshot | persisted == expected_cut(streams, checkpoint_id)
        if not unaligned:
            assert not persisted
    # Barriers go downstream once each, in checkpoint order.
    assert out.forwarded == sorted(set(out.forwarded))


@settings(max_examples=300)
@given(gate_streams(), st.data())
def test_aligned_snapshot_is_exactly_the_pre_barrier_data(spec: tuple, data: st.DataObject) -> None:
    channels, k, streams = spec
    out = run(AlignedBarrierHandler(channels), streams, data)
    # Blocking keeps barriers of one checkpoint together: only cancelled ones abort.
    assert out.aborted == cancelled(streams)
    check_cuts(out, streams, k)
    assert all(not unaligned for _, unaligned in out.snapshots.values())


@settings(max_examples=300)
@given(gate_streams(), st.data())
def test_unaligned_snapshots_at_the_first_barrier_and_persists_the_rest(
    spec: tuple, data: st.DataObject
) -> None:
    channels, k, streams = spec
    out = run(UnalignedBarrierHandler(channels), streams, data)
    check_cuts(out, streams, k)
    for checkpoint_id, (_, unaligned) in out.snapshots.items():
        assert unaligned
        assert out.snapshot_step[checkpoint_id] == out.first_barrier_step[checkpoint_id]


@settings(max_examples=300)
@given(gate_streams(), st.data(), st.integers(1, 120))
def test_alternating_cut_is_consistent_whether_or_not_it_switches(
    spec: tuple, data: st.DataObject, timeout_ms: int
) -> None:
    channels, k, streams = spec
    out = run(AlternatingBarrierHandler(channels, timeout_ms), streams, data, with_time=True)
    check_cuts(out, streams, k)
