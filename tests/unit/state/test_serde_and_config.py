"""Canonical key encoding, and the state backend choices of ``weir.datastream.state_backend``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from weir.datastream.state_backend import HashMapStateBackend, LmdbStateBackend, state_backend_from_config
from weir.datastream.window import GlobalWindow, TimeWindow
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, LmdbKeyedStateBackend, create_keyed_state_backend
from weir.state.serde import decode_key, decode_key_from, encode_key

KEYS: list[Any] = [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**70, -(2**80), 1.5, float("-inf"), "", "héllo", b"\x00\xff",
    (), (1, "a", (None, 2.0)), TimeWindow(0, 10), GlobalWindow(), frozenset({1, 2}),
]  # fmt: skip


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_keys_roundtrip_and_are_self_delimiting(key: Any) -> None:
    data = encode_key(key)
    assert encode_key(key) == data
    assert decode_key(data) == key and type(decode_key(data)) is type(key)
    both = data + encode_key("ns")
    k, end = decode_key_from(both)
    assert k == key and decode_key(both[end:]) == "ns"


def test_encoding_distinguishes_types_and_orders_ints() -> None:
    assert len({encode_key(k) for k in (1, True, 1.0, "1", b"1", (1,))}) == 6
    ints = [-(2**63), -5, -1, 0, 1, 7, 2**40]
    assert sorted(ints, key=encode_key) == ints


def test_trailing_bytes_are_an_error() -> None:
    with pytest.raises(UsageError, match="trailing"):
        decode_key(encode_key(1) + b"x")
    with pytest.raises(UsageError, match="unknown tag"):
        decode_key(b"\x42")


def test_state_backend_choices(tmp_path: Path) -> None:
    assert isinstance(state_backend_from_config("hashmap"), HashMapStateBackend)
    assert isinstance(state_backend_from_config("rocksdb", tmp_path), LmdbStateBackend)
    with pytest.raises(UsageError, match="hashmap or lmdb"):
        state_backend_from_config("memory")
    heap = create_keyed_state_backend(HashMapStateBackend(), "op", 0, 128, KeyGroupRange(0, 127))
    assert isinstance(heap, HeapKeyedStateBackend)
    lmdb_backend = create_keyed_state_backend(
        LmdbStateBackend(tmp_path), "win/dow", 1, 128, KeyGroupRange(64, 127)
    )
    assert isinstance(lmdb_backend, LmdbKeyedStateBackend)
    assert lmdb_backend.path == tmp_path / "win_dow-1"
    lmdb_backend.dispose()
