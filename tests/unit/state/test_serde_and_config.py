"""Canonical key encoding, and the state backend choices of ``weir.datastream.state_backend``."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.common.types import Row
from weir.datastream.state_backend import HashMapStateBackend, LmdbStateBackend, state_backend_from_config
from weir.datastream.window import GlobalWindow, TimeWindow
from weir.errors import UsageError
from weir.keys import KeyGroupRange
from weir.state import HeapKeyedStateBackend, LmdbKeyedStateBackend, create_keyed_state_backend
from weir.state.serde import decode_key, decode_key_from, encode_key, encode_value, skip_key

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
    assert k == key and decode_key(both[end:]) == "ns" and skip_key(both) == end


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


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.binary(max_size=8) | st.decimals(allow_nan=False, allow_infinity=False).map(Decimal)
    | st.datetimes() | st.dates() | st.times()
    | st.builds(TimeWindow, st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40))
)  # fmt: skip
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.tuples(inner, inner)
        | st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.integers() | st.text(max_size=4), inner, max_size=3)
        | st.frozensets(st.integers(), max_size=3)
        | st.sets(st.text(max_size=3), max_size=3)
        | st.lists(inner, max_size=3).map(lambda xs: Row(*xs))
        | st.lists(st.integers(-100, 100), max_size=5).map(lambda xs: np.array(xs, dtype=np.int64))
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES, _VALUES)
def test_skip_key_finds_where_decoding_ends(first: Any, second: Any) -> None:
    data = b"\x07\x07" + encode_value(first) + encode_value(second)
    end = skip_key(data, 2)
    assert end == decode_key_from(data, 2)[1]
    assert skip_key(data, end) == len(data)
