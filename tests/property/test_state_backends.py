"""Random operation sequences leave the same visible state in the heap and the LMDB backends."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from weir.datastream.window import TimeWindow
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, KeyedStateBackend, LmdbKeyedStateBackend


class Count:
    def create_accumulator(self) -> Any:
        return 0

    def add(self, value: Any, acc: Any) -> Any:
        return acc + 1

    def get_result(self, acc: Any) -> Any:
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return a + b


def _descriptors() -> dict[str, Any]:
    ttl_value = ValueStateDescriptor("ttl")
    ttl_value.enable_time_to_live(StateTtlConfig.new_builder(30).update_ttl_on_read_and_write().build())
    ttl_list = ListStateDescriptor("ttl-list")
    ttl_list.enable_time_to_live(StateTtlConfig.new_builder(30).cleanup_full_snapshot().build())
    return {
        "value": ValueStateDescriptor("value"),
        "list": ListStateDescriptor("list"),
        "map": MapStateDescriptor("map"),
        "reducing": ReducingStateDescriptor("reducing", lambda a, b: f"{a}|{b}"),
        "aggregating": AggregatingStateDescriptor("aggregating", Count()),
        "ttl": ttl_value,
        "ttl-list": ttl_list,
    }


keys = st.one_of(st.integers(-3, 12), st.sampled_from(["a", "b", "c"]))
namespaces = st.sampled_from([None, TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(20, 30)])
values = st.one_of(st.integers(-5, 5), st.text(max_size=3))
ops = st.one_of(
    st.tuples(st.just("key"), keys),
    st.tuples(st.just("ns"), st.sampled_from(["list", "reducing", "aggregating", "map", "ttl-list"]), namespaces),
    st.tuples(st.just("tick"), st.integers(0, 20)),
    st.tuples(st.just("update"), st.sampled_from(["value", "ttl"]), st.one_of(st.none(), values)),
    st.tuples(st.just("read"), st.sampled_from(["value", "ttl", "list", "ttl-list", "reducing", "aggregating"])),
    st.tuples(st.just("add"), st.sampled_from(["list", "reducing", "aggregating", "ttl-list"]), values),
    st.tuples(st.just("list_update"), st.lists(values, max_size=3)),
    st.tuples(st.just("clear"), st.sampled_from(["value", "list", "map", "reducing", "aggregating", "ttl"])),
    st.tuples(st.just("put"), st.integers(0, 4), values),
    st.tuples(st.just("remove"), st.integers(0, 4)),
    st.tuples(st.just("map_read"), st.integers(0, 4)),
    st.tuples(st.just("merge"), st.sampled_from(["list", "reducing", "aggregating"]), namespaces, st.lists(namespaces, max_size=3)),
    st.tuples(st.just("keys"), st.sampled_from(["value", "list", "map"]), namespaces),
    st.tuples(st.just("snapshot_restore")),
)  # fmt: skip


def _apply(backend: KeyedStateBackend, descs: dict[str, Any], op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "key":
        backend.set_current_key(op[1])
        return None
    if kind == "keys":
        return sorted(backend.keys(descs[op[1]].name, op[2]), key=repr)
    if kind == "merge":
        return backend.merge_namespaces(descs[op[1]], op[2], op[3])
    if kind == "ns":
        return backend.get_state(descs[op[1]]).set_current_namespace(op[2])
    if kind == "update":
        return backend.get_state(descs[op[1]]).update(op[2])
    if kind == "read":
        state = backend.get_state(descs[op[1]])
        return state.value() if op[1] in ("value", "ttl") else state.get()
    if kind == "add":
        return backend.get_state(descs[op[1]]).add(op[2])
    if kind == "list_update":
        return backend.get_state(descs["list"]).update(op[1])
    if kind == "clear":
        return backend.get_state(descs[op[1]]).clear()
    m = backend.get_state(descs["map"])
    if kind == "put":
        return m.put(op[1], op[2])
    if kind == "remove":
        return m.remove(op[1])
    if kind == "map_read":
        return (m.get(op[1]), m.contains(op[1]), sorted(m.items(), key=repr), m.is_empty())
    raise AssertionError(op)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=60))
def test_heap_and_lmdb_agree(operations: list[tuple[Any, ...]]) -> None:
    now = [0]

    def clock() -> int:
        return now[0]

    rng = KeyGroupRange(0, 127)
    with tempfile.TemporaryDirectory() as tmp:
        heap: KeyedStateBackend = HeapKeyedStateBackend("op", 128, rng, clock)
        lmdb_backend: KeyedStateBackend = LmdbKeyedStateBackend(
            "op", 128, rng, clock, path=Path(tmp) / "a", commit_every_ops=7, map_size_bytes=1 << 16
        )
        generation = 0
        descs = _descriptors()
        try:
            heap.set_current_key(0)
            lmdb_backend.set_current_key(0)
            for op in operations:
                if op[0] == "tick":
                    now[0] += op[1]
                    continue
                if op[0] == "snapshot_restore":
                    # both restart from the other's snapshot: a savepoint swap across backends
                    h_snap, l_snap = heap.snapshot(), lmdb_backend.snapshot()
                    assert h_snap == l_snap
                    key = heap.current_key
                    generation += 1
                    heap.dispose()
                    lmdb_backend.dispose()
                    heap = HeapKeyedStateBackend("op", 128, rng, clock)
                    heap.restore([l_snap])
                    lmdb_backend = LmdbKeyedStateBackend(
                        "op", 128, rng, clock, path=Path(tmp) / f"g{generation}", commit_every_ops=7
                    )
                    lmdb_backend.restore([h_snap])
                    descs = _descriptors()
                    heap.set_current_key(key)
                    lmdb_backend.set_current_key(key)
                    continue
                expected = _apply(heap, descs, op)
                got = _apply(lmdb_backend, descs, op)
                assert got == expected, op
            assert heap.snapshot() == lmdb_backend.snapshot()
            assert heap.number_of_keys() == lmdb_backend.number_of_keys()
        finally:
            heap.dispose()
            lmdb_backend.dispose()
