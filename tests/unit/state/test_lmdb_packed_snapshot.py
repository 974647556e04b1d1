"""A full LMDB snapshot read by a forked child packs one single-value state from columns."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weir.common import Time
from weir.core.state import ListStateDescriptor, ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor
from weir.keys import KeyGroupRange, assign_to_key_group
from weir.state.backend import PackedKeyedStateSnapshot
from weir.state.lmdb_backend import LmdbKeyedStateBackend
from weir.state.state_file import encode_state_file

Fill = Callable[[LmdbKeyedStateBackend], None]


def _sums(backend: LmdbKeyedStateBackend) -> None:
    state = backend.get_state(ReducingStateDescriptor("sum", lambda a, b: (a[0], a[1] + b[1])))
    for k in range(3_000):
        backend.set_current_key(k * 7919 - 10_000)
        state.add((k, k % 13))
        state.add((k, 1))


def _namespaced(backend: LmdbKeyedStateBackend) -> None:
    """One state in three namespaces (as a window's panes): the namespaces' order counts."""
    state: Any = backend.get_state(ValueStateDescriptor("panes"))
    for k in range(2_000):
        backend.set_current_key(k)
        for ns in (k % 3, -5, 2**40):
            state.set_current_namespace(ns)
            state.update(k * ns)


def _with(extra: Fill) -> Fill:
    def fill(backend: LmdbKeyedStateBackend) -> None:
        _sums(backend)
        extra(backend)

    return fill


def _listed(backend: LmdbKeyedStateBackend) -> None:
    backend.set_current_key(1)
    backend.get_state(ListStateDescriptor("list")).add(5)


def _only_a_list(backend: LmdbKeyedStateBackend) -> None:
    state = backend.get_state(ListStateDescriptor("list"))
    for k in range(500):
        backend.set_current_key(k)
        state.add(k)


def _ttl(backend: LmdbKeyedStateBackend) -> None:
    descriptor = ValueStateDescriptor("ttl")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(60)).build())
    for k in range(500):
        backend.set_current_key(k)
        backend.get_state(descriptor).update(k)


def _one_value(key: Any, value: Any) -> Fill:
    """The sums, and ``key`` holding ``value`` in the same state."""

    def fill(backend: LmdbKeyedStateBackend) -> None:
        backend.set_current_key(key)
        backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a)).add(value)

    return _with(fill)


def _in_a_child(backend: LmdbKeyedStateBackend, fill: Fill) -> bytes:
    """Fill, snapshot, and in a forked child (which pins the view, as a checkpoint's child
    does) answer whether the file's form was packed and equals the entry-by-entry one."""
    fill(backend)
    pending = backend.snapshot_async()
    (view,) = pending.child_views()
    assert view.claim_for_child()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            view.pin_in_child()
            for_file = pending.for_file()
            same = encode_state_file({"keyed": for_file}) == encode_state_file({"keyed": pending.result()})
            os.write(write_fd, bytes([isinstance(for_file, PackedKeyedStateSnapshot), same]))
            view.close_in_child()
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as answer:
        got = answer.read()
    os.waitpid(pid, 0)
    view.hand_over()
    return got


@pytest.mark.parametrize(
    ("fill", "packs"),
    [
        (_sums, True),
        (_namespaced, True),
        (_with(_listed), False),
        (_only_a_list, False),
        (_ttl, True),  # no TTL cleanup in full snapshots: the values are copied as they are
        (_one_value("text", (1, 2)), False),
        (_one_value(7, (1, 2, 3)), False),
        (_one_value(7, (1, 2**70)), False),
    ],
)
def test_the_packed_state_file_is_the_entry_by_entry_one(tmp_path: Path, fill: Fill, packs: bool) -> None:
    backend = LmdbKeyedStateBackend("op", 128, KeyGroupRange(0, 127), path=tmp_path / "db")
    try:
        assert _in_a_child(backend, fill) == bytes([packs, True])
        # in the job's own process (a snapshot thread reads the view): never packed there
        assert not isinstance(backend.snapshot_async().for_file(), PackedKeyedStateSnapshot)
    finally:
        backend.dispose()


def test_a_subtask_packs_only_its_own_key_groups(tmp_path: Path) -> None:
    """A subtask's range is half the key groups: its packed file lists the keys of those."""
    backend = LmdbKeyedStateBackend("op", 128, KeyGroupRange(64, 127), path=tmp_path / "db")

    def fill(b: LmdbKeyedStateBackend) -> None:
        state = b.get_state(ValueStateDescriptor("v"))
        for k in range(5_000):
            if assign_to_key_group(k, 128) >= 64:
                b.set_current_key(k)
                state.update(k)

    try:
        assert _in_a_child(backend, fill) == bytes([True, True])
    finally:
        backend.dispose()
