"""A snapshot written by a forked child packs single-value states from columns: the heap
backend's dicts, and a full LMDB snapshot read from the child's pinned view."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weir.common import Time
from weir.core.state import ListStateDescriptor, ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor
from weir.keys import KeyGroupRange, assign_to_key_group
from weir.state import HeapKeyedStateBackend, KeyedStateBackend
from weir.state.backend import PackedKeyedStateSnapshot
from weir.state.lmdb_backend import LmdbKeyedStateBackend
from weir.state.state_file import encode_state_file

Fill = Callable[[KeyedStateBackend], None]


def _sums(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ReducingStateDescriptor("sum", lambda a, b: (a[0], a[1] + b[1])))
    for k in range(3_000):
        backend.set_current_key(k * 7919 - 10_000)
        state.add((k, k % 13))
        state.add((k, 1))


def _with(extra: Fill) -> Fill:
    def fill(backend: KeyedStateBackend) -> None:
        _sums(backend)
        extra(backend)

    return fill


def _one_more(key: Any, value: Any) -> Fill:
    """The sums, and ``key`` (added last, so in a late chunk) holding ``value`` in their state."""

    def fill(backend: KeyedStateBackend) -> None:
        backend.set_current_key(key)
        backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a)).add(value)

    return _with(fill)


def _listed(backend: KeyedStateBackend) -> None:
    backend.set_current_key(1)
    backend.get_state(ListStateDescriptor("list")).add(5)


def _second_value(backend: KeyedStateBackend) -> None:
    backend.set_current_key(2)
    backend.get_state(ValueStateDescriptor("other")).update(3)


def _ttl(backend: KeyedStateBackend) -> None:
    descriptor = ValueStateDescriptor("ttl")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(60)).build())
    for k in range(500):
        backend.set_current_key(k)
        backend.get_state(descriptor).update(k)


def _only_a_list(backend: KeyedStateBackend) -> None:
    state = backend.get_state(ListStateDescriptor("list"))
    for k in range(500):
        backend.set_current_key(k)
        state.add(k)


def _namespaced(backend: KeyedStateBackend) -> None:
    """One state in three namespaces (as a window's panes): the namespaces' order counts."""
    state: Any = backend.get_state(ValueStateDescriptor("panes"))
    for k in range(2_000):
        backend.set_current_key(k)
        for ns in (k % 3, -5, 2**40):
            state.set_current_namespace(ns)
            state.update(k * ns)


#: (fill, whether the heap packs it, whether LMDB does); neither packs what is not one
#: single-value state of one width, and the bytes are the entry-by-entry ones either way
CASES = [
    (_sums, True, True),
    (_with(_listed), False, False),
    (_with(_second_value), False, False),
    (_with(_ttl), False, False),
    (_ttl, True, True),  # values with TTL copied as they are (no cleanup in full snapshots)
    (_only_a_list, False, False),
    (_one_more("text", (1, 2)), False, False),
    (_one_more(10**6, (1, True)), False, False),
    (_one_more(10**6, (1, 2**70)), False, False),
    (_one_more(10**6, (1, 2, 3)), False, False),
    (_one_more(10**6, (1, 2.0)), False, True),  # LMDB copies values: a float is as wide as an int
    (_one_more(10**6, (-(2**63), 2**63 - 1)), True, True),
    (_one_more((1, 2), (1, 2)), False, False),
    (_namespaced, False, True),  # the heap packs keys without a namespace only
]


def _in_a_child(work: Callable[[], bytes]) -> bytes:
    """``work()`` in a forked child (where the snapshot packs), its bytes sent back."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_fd, work())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as answer:
        got = answer.read()
    os.waitpid(pid, 0)
    return got


def _packed_and_same(pending: Any) -> bytes:
    """Whether the file's form was packed, and whether it equals the entry-by-entry one."""
    for_file = pending.for_file()
    same = encode_state_file({"keyed": for_file}) == encode_state_file({"keyed": pending.result()})
    return bytes([isinstance(for_file, PackedKeyedStateSnapshot), same])


@pytest.mark.parametrize("max_parallelism", [128, 1])
@pytest.mark.parametrize(("fill", "packs", "_lmdb"), CASES)
def test_a_heap_snapshot_packs_the_entry_by_entry_bytes(
    fill: Fill, packs: bool, _lmdb: bool, max_parallelism: int
) -> None:
    """At max parallelism 1 every key is in one table, so an odd value sits in a later chunk."""
    backend = HeapKeyedStateBackend("op", max_parallelism, KeyGroupRange(0, max_parallelism - 1))
    fill(backend)
    pending = backend.snapshot_async()
    assert _in_a_child(lambda: _packed_and_same(pending)) == bytes([packs, True])
    # in the job's own process the dicts may change under it: never packed there
    assert not isinstance(pending.for_file(), PackedKeyedStateSnapshot)


def _lmdb_in_a_child(backend: LmdbKeyedStateBackend, fill: Fill) -> bytes:
    """Fill and snapshot; a forked child pins the view, as a checkpoint's child does."""
    fill(backend)
    pending = backend.snapshot_async()
    (view,) = pending.child_views()
    assert view.claim_for_child()

    def in_child() -> bytes:
        view.pin_in_child()
        try:
            return _packed_and_same(pending)
        finally:
            view.close_in_child()

    try:
        return _in_a_child(in_child)
    finally:
        view.hand_over()


@pytest.mark.parametrize(("fill", "_heap", "packs"), CASES)
def test_a_full_lmdb_snapshot_packs_the_entry_by_entry_bytes(
    tmp_path: Path, fill: Fill, _heap: bool, packs: bool
) -> None:
    backend = LmdbKeyedStateBackend("op", 128, KeyGroupRange(0, 127), path=tmp_path / "db")
    try:
        assert _lmdb_in_a_child(backend, fill) == bytes([packs, True])
        # in the job's own process a snapshot thread reads the view: never packed there
        assert not isinstance(backend.snapshot_async().for_file(), PackedKeyedStateSnapshot)
    finally:
        backend.dispose()


def test_an_lmdb_subtask_packs_only_its_own_key_groups(tmp_path: Path) -> None:
    """A subtask's range is half the key groups: its packed file lists the keys of those."""
    backend = LmdbKeyedStateBackend("op", 128, KeyGroupRange(64, 127), path=tmp_path / "db")

    def fill(b: KeyedStateBackend) -> None:
        state = b.get_state(ValueStateDescriptor("v"))
        for k in range(5_000):
            if assign_to_key_group(k, 128) >= 64:
                b.set_current_key(k)
                state.update(k)

    try:
        assert _lmdb_in_a_child(backend, fill) == bytes([True, True])
    finally:
        backend.dispose()
