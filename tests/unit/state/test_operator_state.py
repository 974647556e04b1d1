"""Operator (non-keyed) list state and its redistribution on rescaling."""

from __future__ import annotations

from typing import Any

import pytest

import weir.state.state_file  # noqa: F401  (registers the snapshot types)
from weir.datastream.state import ListStateDescriptor, ValueStateDescriptor
from weir.errors import UsageError
from weir.state import OperatorStateBackend, repartition_operator_state
from weir.state.serde import decode_value, encode_value


def _subtask(elements: list[int], union: list[str]) -> OperatorStateBackend:
    backend = OperatorStateBackend("source")
    backend.get_list_state(ListStateDescriptor("offsets")).add_all(elements)
    backend.get_union_list_state(ListStateDescriptor("partitions")).update(union)
    return backend


def test_list_state_roundtrip() -> None:
    backend = _subtask([1, 2], ["p0"])
    state = backend.get_list_state(ListStateDescriptor("offsets"))
    assert state.get() == [1, 2]
    state.add(3)
    snap = backend.snapshot()
    assert decode_value(encode_value(snap), trusted=False) == snap  # plain data in a state file
    fresh = OperatorStateBackend("source")
    fresh.restore([snap])
    assert fresh.state_names() == ["offsets", "partitions"]
    assert fresh.get_list_state(ListStateDescriptor("offsets")).get() == [1, 2, 3]
    assert fresh.get_union_list_state(ListStateDescriptor("partitions")).get() == ["p0"]
    assert fresh.snapshot() == snap


def _restored(snapshots: list[Any]) -> list[tuple[list[Any], list[Any]]]:
    """Per new subtask: its split-distributed offsets and its union partitions."""
    got = []
    for snap in snapshots:
        b = OperatorStateBackend("source")
        b.restore([snap])
        got.append(
            (b.get_list_state(ListStateDescriptor("offsets")).get(),
             b.get_union_list_state(ListStateDescriptor("partitions")).get())
        )  # fmt: skip
    return got


def test_split_distribute_is_contiguous_and_even() -> None:
    old = [_subtask([0, 1, 2], ["a"]).snapshot(), _subtask([3, 4, 5, 6], ["b"]).snapshot()]
    new = repartition_operator_state(old, 3)
    got = _restored(new)
    assert [g[0] for g in got] == [[0, 1, 2], [3, 4], [5, 6]]
    assert all(g[1] == ["a", "b"] for g in got)
    # scale in to one subtask: everything
    (single,) = repartition_operator_state(new, 1)
    b = OperatorStateBackend("source")
    b.restore([single])
    assert b.get_list_state(ListStateDescriptor("offsets")).get() == list(range(7))


def test_split_distribute_stays_with_its_subtask_at_the_same_parallelism() -> None:
    """Uneven lists (a source subtask with one unresolved claim, another with two splits) are
    not dealt anew: a region failover restores one subtask while the other runs on."""
    old = [_subtask([0], ["a"]).snapshot(), _subtask([1, 2], ["b"]).snapshot(), None]
    got = _restored(repartition_operator_state(old, 3))
    assert got == [([0], ["a", "b"]), ([1, 2], ["a", "b"]), ([], ["a", "b"])]


def test_mode_mismatch_and_bad_descriptor() -> None:
    backend = _subtask([1], [])
    with pytest.raises(UsageError, match="registered as split_distribute"):
        backend.get_union_list_state(ListStateDescriptor("offsets"))
    with pytest.raises(UsageError, match="ListStateDescriptor"):
        backend.get_list_state(ValueStateDescriptor("v"))  # type: ignore[arg-type]
    fresh = OperatorStateBackend("source")
    fresh.restore([backend.snapshot()])
    with pytest.raises(UsageError, match="restored as split_distribute"):
        fresh.get_union_list_state(ListStateDescriptor("offsets"))
    with pytest.raises(UsageError, match="None"):
        fresh.get_list_state(ListStateDescriptor("x")).add(None)
    with pytest.raises(UsageError, match="new_parallelism"):
        repartition_operator_state([], 0)
