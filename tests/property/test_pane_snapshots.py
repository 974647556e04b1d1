"""Deferred pane snapshots of the fast window mode are a consistent cut.

A task asks the fast mode to freeze its panes at the barrier (``defer_pane_snapshots``) and
merges them into the backend's and the timers' snapshots in the asynchronous phase
(``weir.state.panes``). Whatever the operator does between the barrier and that phase --
new records, firings, spills to LMDB, accumulators mutated in place -- the snapshot must
be the one the synchronous way (every pane written into the backend at the barrier)
gives, or the checkpoint must fail; and it restores into the fast and the general mode
alike, which then emit what an uninterrupted run emits.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.unit.operators.test_vector_window import MAX_WM, Run, disordered, play, steps_of
from tests.unit.operators.test_window_perf_fast_mode import SLIDING, TUMBLING, Average, general
from weir.checkpoint.storage import CheckpointStorage
from weir.core.functions import wrap_key_selector, wrap_reduce
from weir.core.window import TimeWindow
from weir.datastream import AggregateFunction
from weir.keys import KeyGroupRange
from weir.operators.window import WindowOperator
from weir.operators.window import fast as fast_module
from weir.state import LmdbKeyedStateBackend, create_keyed_backend, serde
from weir.state.backend import StateMetaInfo
from weir.state.incremental import FULL, RunHeader, encode_run, encode_run_groups, load_for_restore
from weir.state.panes import MutableAccumulatorError, _all_immutable, is_immutable
from weir.state.state_file import decode_state_file, encode_state_file
from weir.time.timers import Timer, TimerSnapshot


class ListSum(AggregateFunction):
    """An accumulator mutated in place (a list): never frozen by reference."""

    def create_accumulator(self) -> Any:
        return [0, 0]

    def add(self, value: Any, accumulator: Any) -> Any:
        accumulator[0] += value[1]
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: Any) -> Any:
        return tuple(accumulator)

    def merge(self, a: Any, b: Any) -> Any:
        return [a[0] + b[0], a[1] + b[1]]


class Sneaky(AggregateFunction):
    """Starts immutable, turns into a list mutated in place for some keys."""

    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        if value[0] % 3 == 1:
            acc = accumulator if type(accumulator) is list else list(accumulator)
            acc[0] += value[1]
            acc[1] += 1
            return acc
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator: Any) -> Any:
        return tuple(accumulator)

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


def _mutating_reduce(a: Any, b: Any) -> Any:
    a[1] += b[1]
    return a


KINDS = ["tuple-reduce", "tuple-aggregate", "list-reduce", "list-aggregate", "sneaky-aggregate"]


def make(kind: str, assigner: Any) -> WindowOperator:
    if kind == "tuple-reduce":
        function: Any = wrap_reduce("r", lambda a, b: (a[0], a[1] + b[1]))
    elif kind == "list-reduce":
        function = wrap_reduce("r", _mutating_reduce)
    else:
        function = {"tuple-aggregate": Average, "list-aggregate": ListSum, "sneaky-aggregate": Sneaky}[kind]()
    op_kind = "reduce" if kind.endswith("reduce") else "aggregate"
    return WindowOperator(
        "w", wrap_key_selector(lambda r: r[0]), assigner, assigner.get_default_trigger(), 0, None,
        op_kind, function, None, None,
    )  # fmt: skip


def record(kind: str) -> Any:
    if kind == "list-reduce":
        return lambda r: [r.randrange(12), r.randrange(100)]
    return lambda r: (r.randrange(12), r.randrange(100))


def deferred_snapshot(run: Run) -> tuple[Any, Any]:
    """The synchronous phase as the task takes it: freeze (or write) the panes, then the
    backend's and the timers' pending snapshots with the panes merged in."""
    op = run.op
    op.defer_pane_snapshots = True
    op.prepare_snapshot_pre_barrier(1)
    keyed = run.backend.snapshot() if op.shares_state_objects else run.backend.snapshot_async()
    timers: Any = op.timers.snapshot_async()
    panes = op.pane_snapshot
    op.pane_snapshot = None
    if panes is not None:
        keyed, timers = panes.keyed(keyed), panes.pending_timers(timers)
    return keyed, timers


def result(pending: Any) -> Any:
    return pending.result() if hasattr(pending, "result") else pending


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(KINDS),
    sliding=st.booleans(),
    seed=st.integers(0, 10_000),
    cut=st.floats(0.1, 0.9),
    later=st.integers(0, 40),
    spill=st.sampled_from([4, 1 << 18]),
)
def test_the_deferred_pane_snapshot_holds_the_barrier_and_restores_into_both_modes(
    backend: str, kind: str, sliding: bool, seed: int, cut: float, later: int, spill: int
) -> None:
    # a reduce that mutates its first argument is only well defined when a record lands in one window
    assigner = SLIDING if sliding and kind != "list-reduce" else TUMBLING
    events = disordered(300, seed, record(kind), disorder_ms=1_500)
    steps = steps_of(events, seed + 1)
    at = max(1, int(len(steps) * cut))
    stores: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_module, "SPILL_PANES", spill)

        def store(name: str) -> Any:
            made = create_keyed_backend(backend, "op", 128, KeyGroupRange(0, 127), path=Path(tmp) / name)
            stores.append(made)
            return made

        try:
            check_one_cut(kind, assigner, steps, at, later, store)
        finally:
            for made in stores:  # LMDB environments closed here, not by the garbage collector
                made.dispose()


def check_one_cut(kind: str, assigner: Any, steps: list[Any], at: int, later: int, store: Any) -> None:
    """Snapshot deferred at step ``at`` while ``later`` more steps run, against the synchronous way."""

    def fresh() -> list[Any]:  # a mutating reduce changes its records: each run gets its own
        return copy.deepcopy(steps)

    whole = Run(general(make(kind, assigner)))
    play([whole], fresh())
    deferred = Run(make(kind, assigner), store("deferred"))
    reference = Run(make(kind, assigner), store("reference"))
    play([deferred], fresh()[:at], end=False)
    play([reference], fresh()[:at], end=False)
    assert deferred.op.fast
    keyed, timers = deferred_snapshot(deferred)
    expected = reference.checkpoint()  # the synchronous way, at the same barrier
    # the job goes on before the asynchronous phase runs: records, firings, spills, mutations
    play([deferred], fresh()[at : at + later], end=False)
    try:
        snapshot = (result(keyed), result(timers))
    except MutableAccumulatorError:
        event("declined: a mutable accumulator")
        assert kind == "sneaky-aggregate" and not deferred.op._deferrable
        assert deferred_snapshot(deferred)[0] is not None and deferred.op.shares_state_objects
        return
    assert snapshot == expected
    event("deferred" if not deferred.op.shares_state_objects else "synchronous")
    emitted = len(reference.records())
    for mode in ("fast", "general"):
        made = make(kind, assigner)
        restored = Run(
            made if mode == "fast" else general(made), store(f"restored-{mode}"), restore=[snapshot]
        )
        play([restored], fresh()[at:])
        assert restored.records() == whole.records()[emitted:]


def test_mutable_accumulators_are_written_at_the_barrier() -> None:
    run = Run(make("list-aggregate", TUMBLING))
    run.batch([((1, 5), 1_000)])
    deferred_snapshot(run)
    assert run.op.shares_state_objects and run.backend.number_of_keys() == 1


def test_immutable_accumulators_stay_out_of_the_backend_at_the_barrier() -> None:
    run = Run(make("tuple-reduce", TUMBLING))
    run.batch([((1, 5), 1_000), ((2, 7), 6_000)])
    keyed, timers = deferred_snapshot(run)
    assert not run.op.shares_state_objects and run.backend.number_of_keys() == 0
    run.batch([((1, 1), 1_500)])  # after the barrier
    run.watermark(MAX_WM)
    assert result(keyed).number_of_entries() == 2 and len(result(timers)) == 2
    assert [v for v, _ in run.records()] == [(1, 6), (2, 7)]


@given(st.recursive(st.integers() | st.text() | st.floats() | st.none() | st.binary(),
                    lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=2) | st.sets(st.integers())))  # fmt: skip
def test_is_immutable_accepts_only_scalars_and_tuples_of_them(value: Any) -> None:
    def reference(v: Any) -> bool:
        if isinstance(v, (list, set, dict)):
            return False
        return all(map(reference, v)) if isinstance(v, tuple) else True

    assert is_immutable(value) == reference(value) == _all_immutable([value, 0, value])


_timers = st.lists(
    st.builds(
        Timer,
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers() | st.text(max_size=5) | st.tuples(st.integers(), st.text(max_size=3)),
        st.none()
        | st.builds(lambda s, n: TimeWindow(s, s + n), st.integers(-1000, 1000), st.integers(1, 50)),
        st.integers(0, 32767),
    ),
    max_size=30,
).map(tuple)


@given(event=_timers, processing=_timers, old=st.booleans())
def test_timer_snapshots_round_trip_through_a_state_file_packed_and_in_the_earlier_form(
    event: tuple[Timer, ...], processing: tuple[Timer, ...], old: bool
) -> None:
    snapshot = TimerSnapshot(KeyGroupRange(0, 127), event, processing)
    payload = {"keyed": None, "timers": snapshot}
    with pytest.MonkeyPatch.context() as patch:
        if old:  # files written before timers were packed: one weir.Timer each
            patch.setitem(serde._by_type, TimerSnapshot, serde._by_name["weir.TimerSnapshot"])
        data = encode_state_file(payload)
    assert (b"weir.PackedTimerSnapshot" in data) is not old
    assert decode_state_file(data, "test", trusted=False)["timers"] == snapshot


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    plan=st.lists(st.tuples(st.integers(1, 12), st.booleans(), st.booleans()), min_size=3, max_size=8),
    sliding=st.booleans(),
    spill=st.sampled_from([4, 1 << 18]),
)
def test_incremental_runs_with_frozen_panes_restore_the_state_of_each_barrier(
    seed: int, plan: list[tuple[int, bool, bool]], sliding: bool, spill: int
) -> None:
    """Checkpoints into an incremental LMDB chain with the panes merged into each run (some
    not completed, some written only after the next barrier) restore exactly what the
    synchronous way held at their barrier."""
    assigner = SLIDING if sliding else TUMBLING
    steps = steps_of(disordered(400, seed, record("tuple-reduce"), disorder_ms=1_500), seed + 1)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_module, "SPILL_PANES", spill)
        root = Path(tmp)
        storage = CheckpointStorage(root / "checkpoints", "job")
        live = LmdbKeyedStateBackend("op", 128, KeyGroupRange(0, 127), path=root / "live", incremental=True)
        restored: list[Any] = []
        complete: set[int] = set()
        try:
            deferred = Run(make("tuple-reduce", assigner), live)
            reference = Run(make("tuple-reduce", assigner))

            def finish(taken: tuple[int, Any, Any, Any, bool]) -> None:
                checkpoint_id, pending, timers, expected, done = taken
                written = pending.write(storage)
                if done:
                    complete.add(checkpoint_id)
                fresh = LmdbKeyedStateBackend(
                    "op", 128, KeyGroupRange(0, 127), path=root / f"restored-{checkpoint_id}"
                )
                restored.append(fresh)
                fresh.restore(
                    [load_for_restore(written.handle, written.handle.chain, storage.read_state_file)]
                )
                assert (fresh.snapshot(), timers.result()) == expected

            at, previous = 0, None
            for checkpoint_id, (length, done, late) in enumerate(plan, 1):
                play([deferred, reference], steps[at : at + length], end=False)
                at += length
                if previous is not None and not late:
                    finish(previous)
                deferred.op.defer_pane_snapshots = True
                deferred.op.prepare_snapshot_pre_barrier(checkpoint_id)
                panes, deferred.op.pane_snapshot = deferred.op.pane_snapshot, None
                assert panes is not None
                pending = live.snapshot_incremental(checkpoint_id, complete.__contains__, panes)
                timers = panes.pending_timers(deferred.op.timers.snapshot_async())
                taken = (checkpoint_id, pending, timers, reference.checkpoint(), done)
                if previous is not None and late:
                    finish(previous)
                previous = taken
            assert previous is not None
            finish(previous)
        finally:
            for backend in (live, *restored):
                backend.dispose()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), sliding=st.booleans(), others=st.integers(0, 40))
def test_a_run_packed_from_columns_is_the_entry_by_entry_run(seed: int, sliding: bool, others: int) -> None:
    """The frozen panes' run built from columns has the bytes of the one merged entry by entry,
    with the backend's entries of the states before and after the panes' own in each key group."""
    run = Run(make("tuple-reduce", SLIDING if sliding else TUMBLING))
    play(
        [run], steps_of(disordered(300, seed, record("tuple-reduce"), disorder_ms=1_500), seed + 1), end=False
    )
    run.op.defer_pane_snapshots = True
    run.op.prepare_snapshot_pre_barrier(1)
    panes = run.op.pane_snapshot
    assert panes is not None and len(panes)
    entries = sorted(
        ((state, (k % 128).to_bytes(2, "big") + serde.encode_key(k), None if k % 3 == 0 else serde.encode_key(-k))
         for k in range(others) for state in (0, 2)),
        key=lambda e: (e[1][:2], e[0], e[1]),
    )  # fmt: skip
    states = tuple(StateMetaInfo(name, "value", False) for name in ("a", panes.state_name, "z"))
    header = RunHeader(FULL, "op", 128, KeyGroupRange(0, 127), 1, states)
    packed = panes.packed_run_groups(entries, 1)
    assert packed is not None
    assert encode_run_groups(header, packed) == encode_run(header, panes.merge_run(entries, 1))
    replaced = [(1, b"\x00\x00" + serde.encode_key(0), b"x")]
    assert panes.packed_run_groups(replaced, 1) is None  # a pane replaces a backend entry: entry by entry
