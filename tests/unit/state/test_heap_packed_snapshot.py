"""A heap snapshot written by a forked child packs single-value states from columns."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from weir.common import Time
from weir.core.state import ListStateDescriptor, ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend
from weir.state.backend import PackedKeyedStateSnapshot
from weir.state.state_file import encode_state_file


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
    chunks = []
    with os.fdopen(read_fd, "rb") as answer:
        while chunk := answer.read(1 << 16):
            chunks.append(chunk)
    os.waitpid(pid, 0)
    return b"".join(chunks)


def _backend(fill: Callable[[HeapKeyedStateBackend], None], max_parallelism: int) -> HeapKeyedStateBackend:
    backend = HeapKeyedStateBackend("op", max_parallelism, KeyGroupRange(0, max_parallelism - 1))
    fill(backend)
    return backend


def _sums(backend: HeapKeyedStateBackend) -> None:
    state = backend.get_state(ReducingStateDescriptor("sum", lambda a, b: (a[0], a[1] + b[1])))
    for k in range(3_000):
        backend.set_current_key(k * 7919 - 10_000)
        state.add((k, k % 13))
        state.add((k, 1))


def _with(extra: Callable[[HeapKeyedStateBackend], None]) -> Callable[[HeapKeyedStateBackend], None]:
    def fill(backend: HeapKeyedStateBackend) -> None:
        _sums(backend)
        extra(backend)

    return fill


def _listed(backend: HeapKeyedStateBackend) -> None:
    backend.set_current_key(1)
    backend.get_state(ListStateDescriptor("list")).add(5)


def _second_value(backend: HeapKeyedStateBackend) -> None:
    backend.set_current_key(2)
    backend.get_state(ValueStateDescriptor("other")).update(3)


def _ttl(backend: HeapKeyedStateBackend) -> None:
    descriptor = ValueStateDescriptor("ttl")
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(60)).build())
    backend.set_current_key(3)
    backend.get_state(descriptor).update(4)


def _text(backend: HeapKeyedStateBackend) -> None:
    backend.set_current_key(4)
    backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a)).add(("x", 1))


def _odd_value(value: Any) -> Callable[[HeapKeyedStateBackend], None]:
    """The sums, and one more key (the last one added, so in a late chunk) holding ``value``."""

    def fill(backend: HeapKeyedStateBackend) -> None:
        backend.set_current_key(10**6)
        backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a)).add(value)

    return _with(fill)


def _int_keys_and_tuple_key(backend: HeapKeyedStateBackend) -> None:
    backend.set_current_key((1, 2))
    backend.get_state(ReducingStateDescriptor("sum", lambda a, b: a)).add((1, 2))


@pytest.mark.parametrize("max_parallelism", [128, 1])
@pytest.mark.parametrize(
    ("fill", "packs"),
    [
        (_sums, True),
        (_with(_listed), False),
        (_with(_second_value), False),
        (_with(_ttl), False),
        (_with(_text), False),
        (_odd_value((1, True)), False),
        (_odd_value((1, 2**70)), False),
        (_odd_value((1, 2, 3)), False),
        (_odd_value((1, 2.0)), False),
        (_odd_value((-(2**63), 2**63 - 1)), True),
        (_with(_int_keys_and_tuple_key), False),
    ],
)
def test_the_packed_state_file_is_the_entry_by_entry_one(
    fill: Any, packs: bool, max_parallelism: int
) -> None:
    """At max parallelism 1 every key is in one table, so an odd value sits in a later chunk."""
    backend = _backend(fill, max_parallelism)
    pending = backend.snapshot_async()

    def both() -> bytes:
        for_file = pending.for_file()
        packed = encode_state_file({"keyed": for_file})
        plain = encode_state_file({"keyed": pending.result()})
        return bytes([isinstance(for_file, PackedKeyedStateSnapshot), packed == plain])

    assert _in_a_child(both) == bytes([packs, True])
    # in the job's own process the dicts may change under it: never packed there
    assert not isinstance(pending.for_file(), PackedKeyedStateSnapshot)
