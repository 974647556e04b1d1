"""Property: for any puts, deletes and checkpoints (complete, aborted or failed), restoring a checkpoint's
chain gives exactly the state a full snapshot at that checkpoint gives, also split over two backends."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.checkpoint.storage import CheckpointStorage
from weir.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, KeyedStateSnapshot, LmdbKeyedStateBackend
from weir.state.incremental import ChainRestore, load_for_restore, restorable_for

MAX_PAR = 16
ALL = KeyGroupRange(0, MAX_PAR - 1)

keys = st.integers(0, 40)
values = st.one_of(st.integers(-3, 3), st.text(max_size=2))
ops = st.one_of(
    st.tuples(st.just("put"), keys, values),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("map_put"), keys, st.integers(0, 3), values),
    st.tuples(st.just("map_remove"), keys, st.integers(0, 3)),
    st.tuples(st.just("list_add"), keys, values),
    st.tuples(st.just("list_clear"), keys),
    st.tuples(st.just("checkpoint"), st.sampled_from(["complete", "complete", "abort", "fail"])),
)


def _lmdb(path: Path, key_groups: KeyGroupRange = ALL) -> LmdbKeyedStateBackend:
    return LmdbKeyedStateBackend("op", MAX_PAR, key_groups, path=path, incremental=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=st.lists(ops, min_size=1, max_size=40),
    max_chain_length=st.sampled_from([2, 3, 10]),
    split=st.integers(0, MAX_PAR - 2),
)
def test_restoring_a_chain_equals_restoring_a_full_snapshot(
    program: list[tuple[Any, ...]], max_chain_length: int, split: int
) -> None:
    left_range, right_range = KeyGroupRange(0, split), KeyGroupRange(split + 1, MAX_PAR - 1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        storage = CheckpointStorage(root / "checkpoints", "job")
        backend = LmdbKeyedStateBackend(
            "op", MAX_PAR, ALL, path=root / "live", incremental=True, max_chain_length=max_chain_length
        )
        value = backend.get_state(ValueStateDescriptor("value"))
        mapped = backend.get_state(MapStateDescriptor("map"))
        listed = backend.get_state(ListStateDescriptor("list"))
        complete: set[int] = set()
        taken: list[tuple[KeyedStateSnapshot, ChainRestore]] = []
        checkpoint_id = 0
        try:
            for op in [*program, ("checkpoint", "complete")]:
                kind = op[0]
                if kind == "checkpoint":
                    checkpoint_id += 1
                    expected = backend.snapshot()
                    pending = backend.snapshot_incremental(checkpoint_id, complete.__contains__)
                    if op[1] == "fail":  # the upload fails: nothing written, nothing complete
                        continue
                    result = pending.write(storage)
                    if op[1] == "complete":
                        complete.add(checkpoint_id)
                        chain = load_for_restore(result.handle, result.handle.chain, storage.read_state_file)
                        taken.append((expected, chain))
                    continue
                backend.set_current_key(op[1])
                if kind == "put":
                    value.update(op[2])
                elif kind == "delete":
                    value.clear()
                elif kind == "map_put":
                    mapped.put(op[2], op[3])
                elif kind == "map_remove":
                    mapped.remove(op[2])
                elif kind == "list_add":
                    listed.add(op[2])
                elif kind == "list_clear":
                    listed.clear()

            for i, (expected, chain) in enumerate(taken):
                restored = _lmdb(root / f"restored-{i}")
                try:
                    restored.restore([chain])
                    assert restored.snapshot() == expected, f"checkpoint {chain.handle.checkpoint_id}"
                finally:
                    restored.dispose()

            expected, chain = taken[-1]
            from_full = _lmdb(root / "from-full")
            left, right = _lmdb(root / "left", left_range), _lmdb(root / "right", right_range)
            heap = HeapKeyedStateBackend("op", MAX_PAR, left_range)
            try:
                from_full.restore([expected])
                left.restore([chain])
                right.restore([chain])
                heap.restore(restorable_for(heap, [chain]))
                assert left.snapshot() == from_full.snapshot(left_range)
                assert right.snapshot() == from_full.snapshot(right_range)
                assert heap.snapshot() == from_full.snapshot(left_range)
                assert left.number_of_keys() + right.number_of_keys() == from_full.number_of_keys()
            finally:
                for b in (from_full, left, right):
                    b.dispose()
        finally:
            backend.dispose()
