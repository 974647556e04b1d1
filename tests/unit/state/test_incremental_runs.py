"""Run files of incremental checkpoints: sorted, immutable, self-checking; chains fold base first."""

from __future__ import annotations

import pytest

from weir.checkpoint.metadata import FileHandle
from weir.checkpoint.storage import CorruptCheckpointError
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, StateMetaInfo
from weir.state.incremental import (
    DELTA,
    FULL,
    ChainRestore,
    IncrementalKeyedStateHandle,
    RunHeader,
    chain_to_keyed_snapshot,
    decode_run,
    encode_run,
    fold_chain,
    load_for_restore,
    restorable_for,
)
from weir.state.serde import encode_key, encode_value

STATES = (StateMetaInfo("a", "value", False), StateMetaInfo("b", "map", False))
RANGE = KeyGroupRange(0, 7)


def _key(kg: int, key: object, user: bytes = b"") -> bytes:
    return kg.to_bytes(2, "big") + encode_key(key) + encode_key(None) + user


def _header(kind: str, checkpoint_id: int = 1) -> RunHeader:
    return RunHeader(kind, "op", 8, RANGE, checkpoint_id, STATES)


def test_a_run_round_trips_and_filters_key_groups() -> None:
    entries = [
        (0, _key(1, 10), b"x"),
        (1, _key(1, 10, encode_key("m")), b"y"),
        (0, _key(5, 3), None),
        (0, _key(7, 4), b"z"),
    ]
    data = encode_run(_header(DELTA), entries)
    run = decode_run(data, "shared/r.kv")
    assert run.kind == DELTA and run.number_of_entries == 4
    assert run.header.states == STATES and run.header.key_group_range == RANGE
    assert run.key_groups() == [1, 5, 7]
    assert list(run.entries()) == [
        ("a", _key(1, 10), b"x"),
        ("b", _key(1, 10, encode_key("m")), b"y"),
        ("a", _key(5, 3), None),
        ("a", _key(7, 4), b"z"),
    ]
    assert [k for _, k, _ in run.entries(KeyGroupRange(2, 6))] == [_key(5, 3)]


def test_unsorted_or_duplicate_entries_are_refused() -> None:
    with pytest.raises(UsageError, match="must be sorted"):
        encode_run(_header(FULL), [(0, _key(3, 1), b"v"), (0, _key(2, 1), b"v")])
    with pytest.raises(UsageError, match="must be sorted"):
        encode_run(_header(FULL), [(0, _key(3, 1), b"v"), (0, _key(3, 1), b"w")])
    with pytest.raises(UsageError, match="names state 5"):
        encode_run(_header(FULL), [(5, _key(3, 1), b"v")])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:-3], "truncated"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "CRC-32"),
        (lambda d: b"NOTRUN" + d[6:], "not a weir run file"),
        (lambda d: d[:10], "truncated"),
    ],
)
def test_a_damaged_file_is_named_and_refused(damage: object, message: str) -> None:
    data = encode_run(_header(FULL), [(0, _key(1, i), b"v" * 10) for i in range(5)])
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        decode_run(damage(data), "shared/broken.kv")  # type: ignore[operator]
    assert "shared/broken.kv" in str(info.value)


def _chain(*runs: bytes) -> ChainRestore:
    handles = tuple(FileHandle.of(f"shared/{i}.kv", data, shared=True) for i, data in enumerate(runs))
    return ChainRestore(IncrementalKeyedStateHandle("op", 8, RANGE, len(runs), handles), tuple(runs))


def test_folding_a_chain_applies_deltas_in_order_and_tombstones_delete() -> None:
    base = encode_run(_header(FULL, 1), [(0, _key(1, 1), b"1"), (0, _key(1, 2), b"2"), (0, _key(4, 3), b"3")])
    d1 = encode_run(_header(DELTA, 2), [(0, _key(1, 1), b"1'"), (0, _key(4, 3), None)])
    d2 = encode_run(_header(DELTA, 3), [(0, _key(1, 1), b"1''"), (0, _key(4, 3), b"3''")])
    _, contents = fold_chain(_chain(base, d1, d2))
    assert contents["a"] == {_key(1, 1): b"1''", _key(1, 2): b"2", _key(4, 3): b"3''"}
    _, only_one = fold_chain(_chain(base, d1), KeyGroupRange(0, 2))
    assert only_one["a"] == {_key(1, 1): b"1'", _key(1, 2): b"2"}


def test_a_chain_must_start_with_one_full_run_of_the_same_state() -> None:
    delta = encode_run(_header(DELTA), [])
    with pytest.raises(CorruptCheckpointError, match="a chain is one full run followed by delta runs"):
        _chain(delta).runs()
    other = encode_run(RunHeader(FULL, "other", 8, RANGE, 1, STATES), [])
    with pytest.raises(CorruptCheckpointError, match="holds state of 'other'"):
        _chain(other).runs()


def test_a_heap_backend_restores_a_chain_through_the_canonical_form() -> None:
    base = encode_run(_header(FULL, 1), [(0, _key(1, 1), encode_value(1)), (0, _key(6, 2), encode_value(2))])
    delta = encode_run(_header(DELTA, 2), [(0, _key(6, 2), None)])
    chain = _chain(base, delta)
    snapshot = chain_to_keyed_snapshot(chain)
    assert [kg for kg, _ in snapshot.key_groups] == [1]
    assert snapshot.states == STATES
    heap = HeapKeyedStateBackend("op", 8, KeyGroupRange(0, 3))
    items = restorable_for(heap, [chain])
    assert items == [chain_to_keyed_snapshot(chain, KeyGroupRange(0, 3))]
    heap.restore(items)
    assert heap.number_of_keys() == 1


def test_loading_a_chain_reads_every_file_the_handle_lists() -> None:
    base = encode_run(_header(FULL), [])
    fh = FileHandle.of("shared/0.kv", base, shared=True)
    handle = IncrementalKeyedStateHandle("op", 8, RANGE, 1, (fh,))
    loaded = load_for_restore(handle, (fh,), lambda f: base)
    assert isinstance(loaded, ChainRestore) and loaded.files == (base,)
    assert load_for_restore("not incremental", (), lambda f: b"") == "not incremental"
    with pytest.raises(CorruptCheckpointError, match="does not list"):
        load_for_restore(handle, (), lambda f: base)
    with pytest.raises(UsageError, match="were not loaded"):
        restorable_for(HeapKeyedStateBackend("op", 8, RANGE), [handle])
