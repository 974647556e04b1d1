"""Deferred pane snapshots of the vectorized window operators are the synchronous ones.

A task asks ``AggregatesWindowOperator`` and ``VectorWindowOperator`` to copy their pane
columns at the barrier (``defer_pane_snapshots``); the entries and timers are built in the
asynchronous phase (``weir.state.panes.ColumnPaneSnapshot``). Whatever the operator does
between the barrier and that phase (records folded into the same arrays, firings, a move to
the hash store), the snapshot must equal, entry bytes and timers, what the synchronous way
(every pane written into the backend at the barrier) gives for the same barrier, also after
a restore or an earlier synchronous snapshot left entries in the backend; and it restores
into the per-record path and the vectorized one alike, which then emit what an
uninterrupted run emits.
"""

from __future__ import annotations

import builtins
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.property.test_aggregates_properties import ROW, STORES, outputs_of, store
from tests.unit.operators.test_vector_window import Run, per_record_op, play, steps_of, vector_op
from weir.checkpoint.storage import CheckpointStorage
from weir.columnar import Aggregates
from weir.columnar.aggregates import AggregatesWindowFunction
from weir.common import Types
from weir.core.functions import wrap_key_selector
from weir.datastream.window import SlidingEventTimeWindows, TumblingEventTimeWindows
from weir.keys import KeyGroupRange
from weir.operators.window import WindowOperator
from weir.operators.window.aggregates import (
    AggregatesPlan,
    AggregatesWindowOperator,
    aggregates_plan,
    canonical_accumulators,
    encoded_accumulators,
)
from weir.state import LmdbKeyedStateBackend, create_keyed_backend, serde
from weir.state.incremental import load_for_restore
from weir.state.panes import KeyedWithPanes, canonical_payload
from weir.state.state_file import decode_state_file, encode_state_file

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TUMBLING = TumblingEventTimeWindows.of(1_000)
SLIDING = SlidingEventTimeWindows.of(1_000, 500)
STRING_ROW = Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE(), Types.INT()])
BUILT_INS = [("count", None), ("mean", 1), ("sum", 1), ("min", 2), ("max", 1)]


def aggregates_pair(
    drawn: list[tuple[str, int]], assigner: Any, lateness: int, strings: bool
) -> tuple[Any, Any]:
    """(per-record, vectorized) operators running the same ``Aggregates``."""
    agg = Aggregates(*outputs_of(drawn, True))
    trigger = assigner.get_default_trigger()
    row = STRING_ROW if strings else ROW
    selector = wrap_key_selector(lambda r: r[0])
    plan, reason = aggregates_plan({"spec": agg.spec, "input_type": row}, assigner, trigger, None)
    assert plan is not None, reason
    return (
        WindowOperator("w", selector, assigner, trigger, lateness, None, "aggregate", agg,
                       AggregatesWindowFunction(agg.spec), None),
        AggregatesWindowOperator("w", selector, assigner, plan, row, None, agg, lateness),
    )  # fmt: skip


def built_in_pair(which: int, assigner: Any, strings: bool) -> tuple[Any, Any]:
    agg, field = BUILT_INS[which]
    row = STRING_ROW if strings else ROW
    return per_record_op(agg, field, assigner), vector_op(agg, field, row, assigner)


def events(seed: int, strings: bool) -> list[Any]:
    rng = random.Random(seed)
    out = []
    for i in range(300):
        k = rng.randrange(15)
        value = (f"k{k}" if strings else k, rng.randrange(-50, 100), rng.randrange(16) / 4, rng.randrange(9))
        out.append((value, i * 15 + rng.randrange(1_500)))
    return out


def deferred_snapshot(run: Run) -> tuple[Any, Any, Any]:
    """The synchronous phase as the task takes it: copy the panes, then the backend's and the
    timers' pending snapshots with the panes merged in; and, where the panes have a native
    section, the pair a checkpoint writes instead (the panes beside the backend's snapshot,
    the operator's own timers), else None."""
    op = run.op
    op.defer_pane_snapshots = True
    op.prepare_snapshot_pre_barrier(1)
    panes, op.pane_snapshot = op.pane_snapshot, None
    assert panes is not None and run.backend.number_of_keys() == 0  # nothing written at the barrier
    native = None
    if panes.native is not None:
        native = (panes.native_keyed(run.backend.snapshot_async()), op.timers.snapshot_async())
    return panes.keyed(run.backend.snapshot_async()), panes.pending_timers(op.timers.snapshot_async()), native


def canonical_of_native(keyed: Any, timers: Any) -> tuple[Any, Any]:
    """A native state file written and read back, untrusted: its keyed state and timers."""
    own = timers.result() if hasattr(timers, "result") else timers
    data = encode_state_file({"keyed": keyed.for_file(), "timers": own})
    assert isinstance(keyed.for_file(), KeyedWithPanes)
    payload = decode_state_file(data, "the native test file", trusted=False)
    canonical_payload(payload)
    return payload["keyed"], payload["timers"]


def file_of(keyed: Any, timers: Any) -> bytes:
    return encode_state_file({"keyed": keyed, "timers": timers})


@pytest.mark.parametrize("backend", ["hashmap", "lmdb"])
@SETTINGS
@given(
    drawn=st.lists(st.tuples(st.sampled_from(["sum", "min", "max", "mean", "first", "last"]),
                             st.sampled_from([1, 2, 3])), max_size=4),
    built_in=st.none() | st.integers(0, len(BUILT_INS) - 1),
    sliding=st.booleans(),
    lateness=st.sampled_from([0, 700]),
    strings=st.booleans(),
    pane_store=st.sampled_from(sorted(STORES)),
    seed=st.integers(0, 10_000),
    cuts=st.tuples(st.floats(0.05, 0.5), st.floats(0.5, 0.95)),
    restored_first=st.booleans(),
    later=st.integers(0, 30),
)  # fmt: skip
def test_the_deferred_snapshot_is_the_synchronous_one_and_restores_into_both_paths(
    backend: str, drawn: list[tuple[str, int]], built_in: int | None, sliding: bool, lateness: int,
    strings: bool, pane_store: str, seed: int, cuts: tuple[float, float], restored_first: bool,
    later: int,
) -> None:  # fmt: skip
    assigner = SLIDING if sliding else TUMBLING
    if built_in is not None:
        lateness = 0  # the built-ins run vectorized without allowed lateness only

    def pair() -> tuple[Any, Any]:
        if built_in is None:
            return aggregates_pair(drawn, assigner, lateness, strings)
        return built_in_pair(built_in, assigner, strings)

    steps = steps_of(events(seed, strings), seed + 1)
    first, at = (max(1, int(len(steps) * c)) for c in cuts)
    made: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp, store(pane_store):

        def keyed_store(name: str) -> Any:
            made.append(
                create_keyed_backend(backend, "op", 128, KeyGroupRange(0, 127), path=Path(tmp) / name)
            )
            return made[-1]

        try:
            whole = Run(pair()[0])
            play([whole], steps)
            # both runs hold entries in the backend at the cut: restored ones, or an earlier
            # synchronous snapshot's (some of them fire before the cut and must be gone)
            start = Run(pair()[1])
            play([start], steps[:first], end=False)
            earlier = start.checkpoint()
            emitted_before = len(start.records())
            runs = []
            for name in ("deferred", "reference"):
                if restored_first:
                    run = Run(pair()[1], keyed_store(name), restore=[earlier])
                    run.op.current_watermark = start.op.current_watermark
                    play([run], steps[first:at], end=False)
                else:
                    run = Run(pair()[1], keyed_store(name))
                    play([run], steps[:first], end=False)
                    run.checkpoint()
                    play([run], steps[first:at], end=False)
                runs.append(run)
            deferred, reference = runs
            keyed, timers, native = deferred_snapshot(deferred)
            expected = reference.checkpoint()  # the synchronous way, at the same barrier
            # the job goes on before the asynchronous phase runs: folds into the same arrays, firings
            play([deferred], steps[at : at + later], end=False)
            if native is not None:  # a checkpoint's native section reads back as the canonical state
                assert file_of(*canonical_of_native(*native)) == file_of(*expected)
            packed = file_of(keyed.for_file(), timers.result())  # from columns where they allow it
            snapshot = (keyed.result(), timers.result())
            assert snapshot == expected
            assert file_of(*snapshot) == file_of(*expected) == packed
            emitted = len(reference.records()) + (emitted_before if restored_first else 0)
            for path in (0, 1):
                restored = Run(pair()[path], keyed_store(f"restored-{path}"), restore=[snapshot])
                restored.op.current_watermark = reference.op.current_watermark
                play([restored], steps[at:])
                assert sorted(map(repr, restored.records())) == sorted(map(repr, whole.records()[emitted:]))
        finally:
            for backend_made in made:  # LMDB environments closed here, not by the garbage collector
                backend_made.dispose()


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    plan=st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=3, max_size=7),
    lateness=st.sampled_from([0, 700]),
    pane_store=st.sampled_from(sorted(STORES)),
)
def test_incremental_runs_with_copied_panes_restore_the_state_of_each_barrier(
    seed: int, plan: list[tuple[int, bool]], lateness: int, pane_store: str
) -> None:
    """Checkpoints into an incremental LMDB chain with the copied panes merged into each run
    restore exactly what the synchronous way held at their barrier."""
    drawn = [("sum", 1), ("max", 2)]
    steps = steps_of(events(seed, False), seed + 1)
    with tempfile.TemporaryDirectory() as tmp, store(pane_store):
        root = Path(tmp)
        storage = CheckpointStorage(root / "checkpoints", "job")
        live = LmdbKeyedStateBackend("op", 128, KeyGroupRange(0, 127), path=root / "live", incremental=True)
        restored: list[Any] = []
        complete: set[int] = set()
        try:
            deferred = Run(aggregates_pair(drawn, TUMBLING, lateness, False)[1], live)
            reference = Run(aggregates_pair(drawn, TUMBLING, lateness, False)[1])
            at = 0
            for checkpoint_id, (length, done) in enumerate(plan, 1):
                play([deferred, reference], steps[at : at + length], end=False)
                at += length
                deferred.op.defer_pane_snapshots = True
                deferred.op.prepare_snapshot_pre_barrier(checkpoint_id)
                panes, deferred.op.pane_snapshot = deferred.op.pane_snapshot, None
                assert panes is not None
                pending = live.snapshot_incremental(checkpoint_id, complete.__contains__, panes)
                timers = panes.pending_timers(deferred.op.timers.snapshot_async())
                expected = reference.checkpoint()
                play([deferred, reference], steps[at : at + 2], end=False)  # before the files are written
                at += 2
                written = pending.write(storage)
                if done:
                    complete.add(checkpoint_id)
                fresh = LmdbKeyedStateBackend(
                    "op", 128, KeyGroupRange(0, 127), path=root / f"r-{checkpoint_id}"
                )
                restored.append(fresh)
                fresh.restore(
                    [load_for_restore(written.handle, written.handle.chain, storage.read_state_file)]
                )
                assert (fresh.snapshot(), timers.result()) == expected
        finally:
            for backend in (live, *restored):
                backend.dispose()


@SETTINGS
@given(
    floats=st.lists(st.booleans(), max_size=5),
    data=st.data(),
)
def test_encoded_accumulators_are_the_canonical_lists_encoded(
    floats: list[bool], data: st.DataObject
) -> None:
    """The numpy encoding of the accumulator lists equals ``encode_value`` of each list."""
    rows = data.draw(st.integers(0, 40))
    int64 = st.integers(-(1 << 63), (1 << 63) - 1)
    plan = AggregatesPlan(None, tuple(range(len(floats))), tuple(floats), tuple(0 for _ in floats))
    mi, mf = len(floats) - builtins.sum(floats), builtins.sum(floats)
    counts = np.array(data.draw(st.lists(int64, min_size=rows, max_size=rows)), np.int64)
    iaccs = np.array(data.draw(st.lists(int64, min_size=rows * mi, max_size=rows * mi)), np.int64)
    faccs = np.array(
        data.draw(st.lists(st.floats(allow_nan=True), min_size=rows * mf, max_size=rows * mf)), np.float64
    )
    iaccs, faccs = iaccs.reshape(rows, mi), faccs.reshape(rows, mf)
    expected = [serde.encode_value(acc) for acc in canonical_accumulators(plan, counts, iaccs, faccs)]
    assert serde.split_rows(encoded_accumulators(plan, counts, iaccs, faccs)) == expected
