"""The LMDB backend's incremental checkpoints: changed keys become delta runs, chains restore exactly."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from weir.checkpoint.storage import CheckpointStorage
from weir.cluster.checkpointing import build_metadata
from weir.cluster.client import state_backend_for
from weir.cluster.job_master import _load_restore_state
from weir.common import Configuration
from weir.datastream import StreamExecutionEnvironment
from weir.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from weir.datastream.state_backend import HashMapStateBackend, LmdbStateBackend
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, LmdbKeyedStateBackend, create_keyed_state_backend
from weir.state import lmdb_backend as lmdb_module
from weir.state.incremental import (
    DELTA,
    FULL,
    ChainRestore,
    IncrementalKeyedStateHandle,
    decode_run,
    load_for_restore,
)
from weir.state.state_file import decode_state_file
from weir.task.snapshots import OperatorSnapshot, write_operator_snapshots

MAX_PAR = 16
ALL = KeyGroupRange(0, MAX_PAR - 1)


class Harness:
    """One LMDB backend checkpointing into a real CheckpointStorage; ``complete`` plays the coordinator."""

    def __init__(self, root: Path, **kwargs: Any) -> None:
        self.root = root
        self.storage = CheckpointStorage(root / "checkpoints", "job")
        self.backend = LmdbKeyedStateBackend(
            "op", MAX_PAR, ALL, path=root / "live", incremental=True, **kwargs
        )
        self.value = self.backend.get_state(ValueStateDescriptor("value"))
        self.map = self.backend.get_state(MapStateDescriptor("map"))
        self.list = self.backend.get_state(ListStateDescriptor("list"))
        self.complete: set[int] = set()
        self.restored = 0

    def checkpoint(self, checkpoint_id: int, complete: bool = True) -> tuple[Any, Any]:
        pending = self.backend.snapshot_incremental(checkpoint_id, self.complete.__contains__)
        result = pending.write(self.storage)
        if complete:
            self.complete.add(checkpoint_id)
        return pending.plan, result

    def chain(self, result: Any) -> ChainRestore:
        loaded = load_for_restore(result.handle, result.handle.chain, self.storage.read_state_file)
        assert isinstance(loaded, ChainRestore)
        return loaded

    def restore(self, items: list[Any], key_groups: KeyGroupRange = ALL) -> LmdbKeyedStateBackend:
        self.restored += 1
        backend = LmdbKeyedStateBackend(
            "op", MAX_PAR, key_groups, path=self.root / f"restored-{self.restored}", incremental=True
        )
        backend.restore(items)
        return backend

    def put(self, key: int, value: Any) -> None:
        self.backend.set_current_key(key)
        self.value.update(value)
        self.map.put(value, key)
        self.list.add(value)


@pytest.fixture
def harness(tmp_path: Path) -> Any:
    h = Harness(tmp_path)
    yield h
    h.backend.dispose()


def test_a_delta_holds_exactly_the_keys_written_or_deleted_since_the_base(harness: Harness) -> None:
    for k in range(200):
        harness.put(k, k)
    plan, first = harness.checkpoint(1)
    assert plan.kind == FULL and first.uploaded is not None
    harness.put(3, "changed")
    harness.backend.set_current_key(4)
    harness.value.clear()
    plan, second = harness.checkpoint(2)
    assert plan.kind == DELTA
    assert second.handle.chain == (first.uploaded, second.uploaded)
    run = decode_run(harness.storage.read_state_file(second.uploaded), "delta")
    touched = {(name, value is None) for name, _, value in run.entries()}
    assert touched == {("value", False), ("map", False), ("list", False), ("value", True)}
    assert run.number_of_entries == 4  # key 3: value, new map entry, new list element; key 4: a tombstone
    restored = harness.restore([harness.chain(second)])
    try:
        assert restored.snapshot() == harness.backend.snapshot()
    finally:
        restored.dispose()


def test_the_snapshot_is_the_view_at_the_barrier_while_writes_go_on(harness: Harness) -> None:
    for k in range(100):
        harness.put(k, k)
    harness.checkpoint(1)
    harness.put(1, "before")
    expected = harness.backend.snapshot()
    pending = harness.backend.snapshot_incremental(2, harness.complete.__contains__)
    for k in range(100):
        harness.put(k, "after the barrier")  # processing goes on during the asynchronous part
    result = pending.write(harness.storage)
    restored = harness.restore([harness.chain(result)])
    try:
        assert restored.snapshot() == expected
    finally:
        restored.dispose()


def test_changes_of_an_aborted_checkpoint_reach_the_next_one(harness: Harness) -> None:
    for k in range(50):
        harness.put(k, k)
    _, base = harness.checkpoint(1)
    harness.put(10, "in the aborted checkpoint")
    harness.checkpoint(2, complete=False)  # written, then aborted: no _metadata
    harness.put(20, "in the next one")
    plan, third = harness.checkpoint(3)
    assert plan.base_chain == (base.uploaded,)
    assert third.handle.chain == (base.uploaded, third.uploaded)
    restored = harness.restore([harness.chain(third)])
    try:
        assert restored.snapshot() == harness.backend.snapshot()
        restored.set_current_key(10)
        assert restored.get_state(ValueStateDescriptor("value")).value() == "in the aborted checkpoint"
    finally:
        restored.dispose()


def test_a_chain_restores_into_backends_that_split_its_key_groups(harness: Harness) -> None:
    for k in range(300):
        harness.put(k, k)
    harness.checkpoint(1)
    for k in range(0, 300, 7):
        harness.put(k, -k)
    _, result = harness.checkpoint(2)
    chain = harness.chain(result)
    left_range, right_range = KeyGroupRange(0, 6), KeyGroupRange(7, 15)
    left, right = harness.restore([chain], left_range), harness.restore([chain], right_range)
    heap = HeapKeyedStateBackend("op", MAX_PAR, right_range)
    from weir.state.incremental import restorable_for

    heap.restore(restorable_for(heap, [chain]))
    try:
        assert left.snapshot() == harness.backend.snapshot(left_range)
        assert right.snapshot() == harness.backend.snapshot(right_range)
        assert heap.snapshot() == harness.backend.snapshot(right_range)
        assert left.number_of_keys() + right.number_of_keys() == harness.backend.number_of_keys()
        # a rescaled restore cannot continue the old chain: its next checkpoint is a new base
        assert left.snapshot_incremental(3, lambda c: True).plan.kind == FULL
    finally:
        left.dispose()
        right.dispose()


def test_a_restore_of_its_own_chain_continues_it(harness: Harness) -> None:
    for k in range(40):
        harness.put(k, k)
    harness.checkpoint(1)
    harness.put(1, "x")
    _, second = harness.checkpoint(2)
    restored = harness.restore([harness.chain(second)])
    try:
        restored.set_current_key(2)
        restored.get_state(ValueStateDescriptor("value")).update("after restore")
        pending = restored.snapshot_incremental(3, lambda c: c <= 2)
        assert pending.plan.kind == DELTA and pending.plan.base_chain == second.handle.chain
        assert pending.plan.number_of_keys() == 1  # only what changed since the restore
        pending.write(harness.storage)
    finally:
        restored.dispose()


def test_nothing_changed_uploads_nothing(harness: Harness) -> None:
    harness.put(1, 1)
    _, first = harness.checkpoint(1)
    plan, second = harness.checkpoint(2)
    assert plan.kind == "unchanged" and second.uploaded is None
    assert second.handle.chain == first.handle.chain


def _occupy_snapshot_threads(release: threading.Event) -> list[Any]:
    executor = lmdb_module._snapshot_executor()
    return [executor.submit(release.wait, 30) for _ in range(lmdb_module._SNAPSHOT_THREADS)]


def test_growing_the_map_waits_for_the_pinned_read(tmp_path: Path) -> None:
    h = Harness(tmp_path, map_size_bytes=1 << 20, commit_every_ops=500)
    try:
        for k in range(100):
            h.put(k, k)
        h.checkpoint(1)
        h.put(5, "at the barrier")
        expected = h.backend.snapshot()
        release = threading.Event()
        blockers = _occupy_snapshot_threads(release)  # the read stays pinned until released
        pending = h.backend.snapshot_incremental(2, h.complete.__contains__)
        pinned_at_growth: list[int] = []
        wait = h.backend._wait_for_pinned_reads

        def spy() -> None:
            pinned_at_growth.append(h.backend._pinned)
            wait()

        h.backend._wait_for_pinned_reads = spy  # type: ignore[method-assign]
        timer = threading.Timer(0.3, release.set)
        timer.start()
        for k in range(100, 3000):  # several MiB: the map must grow while the read is pinned
            h.backend.set_current_key(k)
            h.value.update("v" * 1000)
        assert h.backend.statistics().extra["map_resizes"] > 0
        assert pinned_at_growth and pinned_at_growth[0] == 1  # the first resize had to wait for the read
        result = pending.write(h.storage)
        for b in blockers:
            b.result()
        restored = h.restore([h.chain(result)])
        try:
            assert restored.snapshot() == expected
        finally:
            restored.dispose()
    finally:
        h.backend.dispose()


def test_closing_stops_a_pinned_read(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    release = threading.Event()
    try:
        h.put(1, 1)
        blockers = _occupy_snapshot_threads(release)
        pending = h.backend.snapshot_incremental(1, h.complete.__contains__)
        h.backend.dispose()  # nobody read the view yet: its transaction is released here
        release.set()
        for b in blockers:
            b.result()
        with pytest.raises(lmdb_module._BackendClosing):  # declined as the task's closing, not a failure
            pending.write(h.storage)
        assert h.storage.list_shared_files() == []
    finally:
        release.set()


def test_incremental_snapshots_need_the_option(tmp_path: Path) -> None:
    backend = LmdbKeyedStateBackend("op", MAX_PAR, ALL, path=tmp_path / "db")
    try:
        with pytest.raises(UsageError, match="incremental checkpointing is off"):
            backend.snapshot_incremental(1, lambda c: False)
    finally:
        backend.dispose()


def test_the_checkpoint_lists_the_chain_as_shared_files_and_restores_from_it(harness: Harness) -> None:
    storage = harness.storage
    for k in range(30):
        harness.put(k, k)

    def checkpoint(checkpoint_id: int) -> Any:
        snap = OperatorSnapshot(
            "op", 1, MAX_PAR, 0,
            keyed=harness.backend.snapshot_incremental(checkpoint_id, storage.is_complete),
            key_group_range=ALL,
        )  # fmt: skip
        acks, size = write_operator_snapshots(storage, checkpoint_id, [snap])
        metadata = build_metadata("job", checkpoint_id, 0, acks)
        storage.write_metadata(checkpoint_id, metadata)
        return metadata, size

    first, full_size = checkpoint(1)
    harness.put(3, "three")
    second, delta_size = checkpoint(2)
    (handle,) = second.operators[0].state_handles
    assert [f.path for f in handle.shared_files] == [f.path for f in second.shared_files()]
    assert handle.shared_files[0] == first.operators[0].state_handles[0].shared_files[0]
    assert len(handle.shared_files) == 2 and delta_size < full_size
    payload = decode_state_file(storage.read_state_file(handle.file), handle.file.path, trusted=False)
    assert isinstance(payload["keyed"], IncrementalKeyedStateHandle)
    restore_state = _load_restore_state(storage, storage.load(2, verify_checksums=True))
    (item,) = restore_state["op"]
    restored = harness.restore([item["keyed"]])
    try:
        assert restored.snapshot() == harness.backend.snapshot()
    finally:
        restored.dispose()


def test_the_option_comes_from_the_configuration_or_the_constructor(tmp_path: Path) -> None:
    conf = Configuration()
    conf.set_string("state.backend.type", "lmdb")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    assert not state_backend_for(env).is_incremental_checkpoints_enabled()  # Flink's default: false
    conf.set_string("state.backend.incremental", "true")
    conf.set_string("state.backend.lmdb.incremental.max-chain-length", "4")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    backend = state_backend_for(env)
    assert backend.is_incremental_checkpoints_enabled() and backend.max_chain_length == 4
    keyed = create_keyed_state_backend(backend.with_path(tmp_path), "op", 0, MAX_PAR, ALL)
    try:
        assert keyed.incremental_checkpointing and keyed.snapshot_history.max_chain_length == 4
    finally:
        keyed.dispose()
    env.set_state_backend(LmdbStateBackend(enable_incremental_checkpointing=False))
    assert not state_backend_for(env).is_incremental_checkpoints_enabled()  # explicit wins
    env2 = StreamExecutionEnvironment.get_execution_environment(Configuration())
    env2.configure(conf)
    env2.set_state_backend(HashMapStateBackend())
    heap = create_keyed_state_backend(state_backend_for(env2), "op", 0, MAX_PAR, ALL)
    assert not getattr(heap, "incremental_checkpointing", False)  # heap: always full snapshots
    with pytest.raises(UsageError, match="enable_incremental_checkpointing"):
        LmdbStateBackend(enable_incremental_checkpointing="yes")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="max_chain_length"):
        LmdbStateBackend(max_chain_length=0)


def test_a_delta_reads_many_changed_keys_by_one_scan_and_few_by_lookup(harness: Harness) -> None:
    """Both ways of reading a delta give the same sorted entries, tombstones included (a delta
    of mostly changed keys is read by one scan, so it is never slower than a full run)."""
    b = harness.backend
    for k in range(200):
        harness.put(k, k)
    harness.checkpoint(1)
    for k in range(200):  # every key changes; some are deleted
        b.set_current_key(k)
        if k % 7 == 0:
            harness.value.clear()
        else:
            harness.value.update(-k)
        harness.map.put(-1, k)
    pending = b.snapshot_incremental(2, harness.complete.__contains__)
    plan = pending.plan
    assert plan.kind == DELTA
    index = {meta.name: i for i, meta in enumerate(plan.states)}
    rtxn = b._env.begin(write=False)
    try:
        for name, keys in plan.keys.items():
            scanned = lmdb_module._changed_by_scan(rtxn, b._dbs[name], index[name], keys)
            assert scanned == lmdb_module._changed_by_lookup(rtxn, b._dbs[name], index[name], keys)
            assert [e[1] for e in scanned] == sorted(keys)
        value_keys = plan.keys["value"]
        deleted = [
            e
            for e in lmdb_module._changed_by_scan(rtxn, b._dbs["value"], index["value"], value_keys)
            if e[2] is None
        ]
        assert len(deleted) == len(range(0, 200, 7))
    finally:
        rtxn.abort()
    result = pending.write(harness.storage)
    harness.complete.add(2)
    restored = harness.restore([harness.chain(result)])
    try:
        assert restored.snapshot() == b.snapshot()
    finally:
        restored.dispose()


def test_the_window_pane_memory_budget_comes_from_the_configuration(tmp_path: Path) -> None:
    conf = Configuration()
    conf.set_string("state.backend.type", "lmdb")
    conf.set_string("state.backend.lmdb.memory.window-panes", "64 mb")
    backend = state_backend_for(StreamExecutionEnvironment.get_execution_environment(conf))
    assert backend.window_pane_memory_bytes == 64 << 20
    keyed = create_keyed_state_backend(backend.with_path(tmp_path), "op", 0, MAX_PAR, ALL)
    try:
        assert keyed.window_pane_memory_bytes == 64 << 20
    finally:
        keyed.dispose()
    explicit = LmdbStateBackend(window_pane_memory_bytes=1 << 20).configure(conf)
    assert explicit.window_pane_memory_bytes == 1 << 20  # set on the backend wins
    with pytest.raises(UsageError, match="window-panes: must be positive"):
        conf.set_string("state.backend.lmdb.memory.window-panes", "0 b")
    with pytest.raises(UsageError, match="window_pane_memory_bytes"):
        LmdbStateBackend(window_pane_memory_bytes=0)


def test_changed_keys_encode_pane_keys_only_when_read() -> None:
    from weir.state.incremental import ChangedKeys

    class Panes:
        calls = 0

        def __len__(self) -> int:
            return 3

        def raw_keys(self) -> set[bytes]:
            Panes.calls += 1
            return {b"a", b"b", b"c"}

    keys = ChangedKeys(({b"c", b"d"}, Panes()))
    assert keys and keys.size_hint() == 5 and Panes.calls == 0  # the synchronous part's questions
    assert sorted(keys) == [b"a", b"b", b"c", b"d"] and len(keys) == 4 and b"a" in keys
    assert Panes.calls == 1  # encoded once
    assert not ChangedKeys((set(),))
