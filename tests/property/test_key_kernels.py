"""The key-group kernels agree with their plain-Python reference twins, and key-group ranges tile.

Every kernel in ``weir.keys.kernels`` is checked element by element against
``weir.keys.reference`` for arbitrary inputs, including the edges of Java's
int and long, every float bit pattern (NaN payloads, infinities, -0.0) and
unicode with astral characters and lone surrogates.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from weir.keys import kernels, reference

# The first example of each test pays numba's compile (or cache load) time.
KERNEL_SETTINGS = settings(deadline=None, max_examples=100)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.one_of(
    st.sampled_from(
        [0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**32, -(2**32)]
    ),
    INT32,
    st.integers(-(2**63), 2**63 - 1),
)
FLOAT_FROM_BITS = st.integers(0, 2**64 - 1).map(lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0])
FLOAT64 = st.one_of(
    st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, 1.7976931348623157e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    FLOAT_FROM_BITS,
)
# Every code point, astral characters and lone surrogates included.
TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=20)
SIZES = st.integers(0, 64)


@st.composite
def parallelisms(draw: st.DrawFn) -> tuple[int, int]:
    """(max_parallelism, parallelism) with 1 <= parallelism <= max_parallelism <= 32768."""
    max_parallelism = draw(
        st.one_of(st.sampled_from([1, 2, 3, 127, 128, 129, 1000, 32767, 32768]), st.integers(1, 32768))
    )
    parallelism = draw(st.one_of(st.sampled_from([1, max_parallelism]), st.integers(1, max_parallelism)))
    return max_parallelism, parallelism


@KERNEL_SETTINGS
@given(arrays(np.int32, SIZES, elements=INT32))
def test_murmur_hash_array_agrees_with_the_reference(hashes: np.ndarray) -> None:
    result = kernels.murmur_hash_array(hashes)
    assert result.dtype == np.int32
    assert result.tolist() == [reference.murmur_hash(h) for h in hashes.tolist()]


@KERNEL_SETTINGS
@given(arrays(np.int64, SIZES, elements=INT64))
def test_hash_int64_array_agrees_with_the_reference(values: np.ndarray) -> None:
    expected = [reference.java_hash(v) for v in values.tolist()]
    assert kernels.hash_int64_array(values).tolist() == expected
    assert kernels.java_hash_array(values.tolist()).tolist() == expected
    assert kernels.hash_int64_array(values[::2]).tolist() == expected[::2]


@KERNEL_SETTINGS
@given(arrays(np.float64, SIZES, elements=FLOAT64))
def test_hash_float64_array_agrees_with_the_reference(values: np.ndarray) -> None:
    expected = [reference.java_hash(v) for v in values.tolist()]
    assert kernels.hash_float64_array(values).tolist() == expected
    assert kernels.java_hash_array(values.tolist()).tolist() == expected
    assert kernels.hash_float64_array(values[::2]).tolist() == expected[::2]


@KERNEL_SETTINGS
@given(arrays(np.bool_, SIZES))
def test_hash_bool_array_agrees_with_the_reference(values: np.ndarray) -> None:
    expected = [reference.java_hash(v) for v in values.tolist()]
    assert kernels.hash_bool_array(values).tolist() == expected
    assert kernels.java_hash_array(values.tolist()).tolist() == expected


@KERNEL_SETTINGS
@given(st.lists(TEXT, max_size=32))
def test_string_hashes_agree_with_the_reference(strings: list[str]) -> None:
    expected = [reference.java_hash(s) for s in strings]
    assert kernels.string_hashes(strings).tolist() == expected
    assert kernels.java_hash_array(strings).tolist() == expected


@KERNEL_SETTINGS
@given(st.lists(TEXT, max_size=32), st.data())
def test_utf8_string_hashes_agree_with_the_reference(strings: list[str], data: st.DataObject) -> None:
    """``hash_utf8_strings`` over UTF-8 bytes (``surrogatepass``), values in any order."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    order = data.draw(st.permutations(range(len(strings))))
    blob = b"".join(encoded[i] for i in order)
    placed = dict(zip(order, itertools.accumulate((len(encoded[i]) for i in order), initial=0)))
    starts = np.array([placed[i] for i in range(len(strings))], np.int64)
    ends = starts + np.array([len(b) for b in encoded], np.int64)
    hashes = kernels.hash_utf8_strings(np.frombuffer(blob, np.uint8), starts, ends)
    assert hashes.tolist() == [reference.java_hash(s) for s in strings]


SCALAR_KEYS = st.one_of(st.none(), st.booleans(), INT64, st.integers(), FLOAT64, TEXT, st.binary(max_size=8))
KEYS = st.recursive(SCALAR_KEYS, lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=8)


@KERNEL_SETTINGS
@given(st.lists(KEYS, max_size=16))
def test_java_hash_array_agrees_with_the_reference_for_any_batch(keys: list[object]) -> None:
    assert kernels.java_hash_array(keys).tolist() == [reference.java_hash(k) for k in keys]


@KERNEL_SETTINGS
@given(arrays(np.int32, SIZES, elements=INT32), parallelisms())
def test_routing_kernels_agree_with_the_reference(hashes: np.ndarray, shape: tuple[int, int]) -> None:
    max_parallelism, parallelism = shape
    expected_key_groups = [
        reference.compute_key_group_for_key_hash(h, max_parallelism) for h in hashes.tolist()
    ]
    expected_channels = [
        reference.compute_operator_index_for_key_group(max_parallelism, parallelism, kg)
        for kg in expected_key_groups
    ]
    key_groups = kernels.key_groups_for_hashes(hashes, max_parallelism)
    assert key_groups.dtype == np.int32
    assert key_groups.tolist() == expected_key_groups
    assert (
        kernels.channels_for_key_groups(key_groups, max_parallelism, parallelism).tolist()
        == expected_channels
    )
    assert kernels.channels_for_hashes(hashes, max_parallelism, parallelism).tolist() == expected_channels


@settings(deadline=None, max_examples=60)
@given(parallelisms())
def test_subtask_ranges_tile_the_key_groups_and_own_what_they_contain(shape: tuple[int, int]) -> None:
    max_parallelism, parallelism = shape
    ranges = [
        reference.compute_key_group_range_for_operator_index(max_parallelism, parallelism, i)
        for i in range(parallelism)
    ]
    # Exact, disjoint cover of [0, max_parallelism): non-empty, in order, each starting after the last.
    assert ranges[0].start_key_group == 0
    assert ranges[-1].end_key_group == max_parallelism - 1
    for before, after in itertools.pairwise(ranges):
        assert after.start_key_group == before.end_key_group + 1
    assert all(len(r) >= 1 for r in ranges)
    assert sum(len(r) for r in ranges) == max_parallelism
    # key_group * parallelism // max_parallelism never decreases, so owning both ends of
    # its range means a subtask owns every key group in between.
    for index, key_groups in enumerate(ranges):
        for edge in (key_groups.start_key_group, key_groups.end_key_group):
            assert reference.compute_operator_index_for_key_group(max_parallelism, parallelism, edge) == index
    # And the kernel maps every key group to the subtask whose range contains it.
    owners = np.repeat(np.arange(parallelism), [len(r) for r in ranges])
    all_key_groups = np.arange(max_parallelism, dtype=np.int32)
    assert np.array_equal(
        kernels.channels_for_key_groups(all_key_groups, max_parallelism, parallelism), owners
    )


@settings(deadline=None, max_examples=200)
@given(st.integers(1, 32768), st.data())
def test_operator_index_of_any_key_group_lies_in_that_subtasks_range(
    max_parallelism: int, data: st.DataObject
) -> None:
    parallelism = data.draw(st.integers(1, max_parallelism))
    key_group = data.draw(st.integers(0, max_parallelism - 1))
    index = reference.compute_operator_index_for_key_group(max_parallelism, parallelism, key_group)
    assert key_group in reference.compute_key_group_range_for_operator_index(
        max_parallelism, parallelism, index
    )
