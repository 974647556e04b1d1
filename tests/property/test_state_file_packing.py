"""The state file's column packers write exactly the bytes of the plain, one-entry-at-a-time form."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.core.window import TimeWindow
from weir.keys import KeyGroupRange
from weir.state.backend import KeyedStateSnapshot, StateMetaInfo
from weir.state.panes import PaneSnapshot
from weir.state.serde import decode_key, encode_key
from weir.state.state_file import _pack_entries, _pack_timers, decode_state_file, encode_state_file
from weir.time.timers import Timer, TimerSnapshot

_GROUP = struct.Struct(">HI")
_ENTRY = struct.Struct(">HIIII")


def reference_pack(snapshot: KeyedStateSnapshot) -> bytes:
    """The packed entries built one entry at a time with ``struct``."""
    names: dict[str, int] = {}
    parts: list[bytes] = []
    for key_group, entries in snapshot.key_groups:
        parts.append(_GROUP.pack(key_group, len(entries)))
        for name, key, namespace, user_key, value in entries:
            index = names.setdefault(name, len(names))
            parts.append(_ENTRY.pack(index, len(key), len(namespace), len(user_key), len(value)))
            parts += (key, namespace, user_key, value)
    return b"".join(parts)


blobs = st.binary(max_size=12)
entries = st.tuples(st.sampled_from(["a", "b", "window-contents"]), blobs, blobs, blobs, blobs)
key_groups = st.dictionaries(st.integers(0, 127), st.lists(entries, max_size=6), max_size=8).map(
    lambda d: tuple((kg, tuple(es)) for kg, es in sorted(d.items()))
)


@settings(max_examples=200, deadline=None)
@given(key_groups)
def test_packed_entries_are_the_entry_by_entry_bytes(groups: Any) -> None:
    snapshot = KeyedStateSnapshot("op", 128, KeyGroupRange(0, 127), (), groups)
    packed = _pack_entries(snapshot)
    assert packed[-1] == reference_pack(snapshot)
    names_in_order = list(dict.fromkeys(e[0] for _, es in groups for e in es))
    assert list(packed[4]) == names_in_order and packed[5] == len(groups)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.dictionaries(st.integers(-50, 50), st.integers(), max_size=40)),
        max_size=4,
        unique_by=lambda w: w[0],
    )
)
def test_pane_timer_columns_pack_as_the_timer_objects(windows: Any) -> None:
    frozen = [(TimeWindow(w * 10, w * 10 + 10), w * 10 + 9, panes, None) for w, panes in windows]
    snapshot = PaneSnapshot("window-contents", frozen, True, 128)
    columns = snapshot.timer_columns()
    objects = tuple(snapshot.timers())
    assert tuple(columns) == objects
    assert _pack_timers(columns) == _pack_timers(objects)
    rng = KeyGroupRange(0, 127)
    data = encode_state_file({"timers": TimerSnapshot(rng, columns, ())})
    assert data == encode_state_file({"timers": TimerSnapshot(rng, objects, ())})
    restored = decode_state_file(data, "test", trusted=False)["timers"]
    assert restored.event_time == objects


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-(2**70), 2**70), st.tuples(st.integers(), st.integers())),
        min_size=250,
        max_size=400,
    )
)
def test_a_long_tuple_encodes_as_its_elements_one_by_one(items: list[Any]) -> None:
    value = tuple(items)
    expected = b"\x07" + struct.pack(">I", len(value)) + b"".join(encode_key(x) for x in value)
    assert encode_key(value) == expected
    assert decode_key(expected) == value


def test_timer_columns_are_a_sequence_of_timers() -> None:
    snapshot = PaneSnapshot("w", [(TimeWindow(0, 10), 9, {3: 1, 4: 2}, None)], True, 128)
    columns = snapshot.timer_columns()
    assert len(columns) == 2 and columns[0] == Timer(9, 3, TimeWindow(0, 10), columns[0].key_group)
    assert isinstance(np.asarray(columns.key_groups), np.ndarray)


int_panes = st.dictionaries(
    st.integers(-(2**63), 2**63 - 1),
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 99)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 5), int_panes), max_size=4, unique_by=lambda w: w[0]))
def test_panes_packed_from_columns_write_the_merged_snapshot_bytes(windows: Any) -> None:
    frozen = [(TimeWindow(w * 10, w * 10 + 10), w * 10 + 9, panes, None) for w, panes in windows]
    snapshot = PaneSnapshot("window-contents", frozen, True, 128)
    base = KeyedStateSnapshot(
        "op", 128, KeyGroupRange(0, 127), (StateMetaInfo("window-contents", "reducing", False),), ()
    )
    packed = snapshot.packed_keyed(base)
    merged = snapshot.merge_keyed(base)
    if not any(panes for _, panes in windows):
        assert packed is None
        return
    assert packed is not None
    assert encode_state_file({"keyed": packed}) == encode_state_file({"keyed": merged})
    restored = decode_state_file(encode_state_file({"keyed": packed}), "test", trusted=False)["keyed"]
    assert restored == merged


def test_panes_that_do_not_pack_from_columns_say_so() -> None:
    base = KeyedStateSnapshot("op", 128, KeyGroupRange(0, 127), (StateMetaInfo("w", "reducing", False),), ())
    window = TimeWindow(0, 10)
    strings = PaneSnapshot("w", [(window, 9, {"a": (1, 2), "b": (3, 4)}, None)], True, 128)
    mixed = PaneSnapshot("w", [(window, 9, {1: (1, 2), 2: (3,)}, None)], True, 128)
    backed = PaneSnapshot("w", [(window, 9, {1: (1, 2)}, {1: None})], True, 128)
    assert strings.packed_keyed(base) is None and mixed.packed_keyed(base) is None
    assert backed.packed_keyed(base) is None
    held = KeyedStateSnapshot(
        "op", 128, base.key_group_range, base.states, ((3, (("w", b"k", b"n", b"", b"v"),)),)
    )
    assert PaneSnapshot("w", [(window, 9, {1: (1, 2)}, None)], True, 128).packed_keyed(held) is None
