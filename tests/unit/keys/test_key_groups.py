"""Key groups: known values from Java and Flink, ranges, defaults, and errors.

The expected hashes and key groups below were printed by OpenJDK 17: the JDK's
own ``hashCode`` of each boxed value, string and array, fed through Flink's
``MathUtils.murmurHash`` compiled as Java (int arithmetic, no masking).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from weir.common.types import Row
from weir.errors import UsageError
from weir.keys import (
    KeyGroupRange,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    channels_for_hashes,
    channels_for_key_groups,
    compute_default_max_parallelism,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    hash_utf16_strings,
    java_hash,
    java_hash_array,
    key_groups_for_hashes,
    murmur_hash,
    murmur_hash_array,
    round_up_to_power_of_two,
    string_hashes,
)

# (key, Java hashCode, key group at max parallelism 128, key group at 32768)
JAVA_KEYS = [
    pytest.param(0, 0, 94, 31198, id="int 0"),
    pytest.param(1, 1, 86, 16342, id="int 1"),
    pytest.param(42, 42, 29, 28189, id="int 42"),
    pytest.param(-7, -7, 33, 15777, id="int -7"),
    pytest.param(2**40, 256, 54, 32054, id="long 2^40"),
    pytest.param(-(2**40), -256, 93, 477, id="long -2^40"),
    pytest.param(-(2**63), -(2**31), 108, 10348, id="long MIN"),
    pytest.param(2**63 - 1, -(2**31), 108, 10348, id="long MAX"),
    pytest.param(2**31, -(2**31), 108, 10348, id="long 2^31"),
    pytest.param(-(2**31) - 1, -(2**31), 108, 10348, id="long -2^31-1"),
    pytest.param("hello", 99162322, 35, 31395, id="str hello"),
    pytest.param("", 0, 94, 31198, id="str empty"),
    pytest.param("flink", 97520992, 98, 16610, id="str flink"),
    pytest.param("user-1", -836031825, 121, 13945, id="str user-1"),
    pytest.param("keyé", 3288682, 47, 25647, id="str latin-1"),
    pytest.param("a\U0001f600b", 57849694, 113, 14321, id="str astral"),
    pytest.param(1.5, 1073217536, 65, 833, id="double 1.5"),
    pytest.param(0.0, 0, 94, 31198, id="double 0.0"),
    pytest.param(-0.0, -(2**31), 108, 10348, id="double -0.0"),
    pytest.param(math.nan, 2146959360, 41, 12713, id="double NaN"),
    pytest.param(math.inf, 2146435072, 122, 8442, id="double inf"),
    pytest.param(0.1, -1507852285, 97, 25953, id="double 0.1"),
    pytest.param(True, 1231, 77, 11725, id="true"),
    pytest.param(False, 1237, 3, 32003, id="false"),
    pytest.param(bytes([1, 2, 0xFF, 0x80]), 955075, 65, 6977, id="bytes"),
    pytest.param(b"", 1, 86, 16342, id="bytes empty"),
    pytest.param((1, "a"), 1089, 110, 23150, id="tuple"),
    pytest.param(("hello", 42, None), 805742023, 88, 728, id="tuple with None"),
    pytest.param((1, (2, 3)), 2018, 30, 10398, id="nested tuple"),
]


@pytest.mark.parametrize(("key", "java_hash_code", "key_group_128", "key_group_32768"), JAVA_KEYS)
def test_java_hash_and_key_group_match_java(
    key: object, java_hash_code: int, key_group_128: int, key_group_32768: int
) -> None:
    assert java_hash(key) == java_hash_code
    assert assign_to_key_group(key, 128) == key_group_128
    assert assign_to_key_group(key, 32768) == key_group_32768
    assert java_hash_array([key]).tolist() == [java_hash_code]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, 593689054),
        (1, 68075478),
        (-1, 1982413648),
        (42, 1134849565),
        (-(2**31), 1718298732),
        (2**31 - 1, 1653689534),
    ],
)
def test_murmur_hash_matches_flink(code: int, expected: int) -> None:
    assert murmur_hash(code) == expected
    assert murmur_hash_array(np.array([code], np.int32)).tolist() == [expected]


def test_the_java_hash_of_a_few_keys_named_in_the_design() -> None:
    assert java_hash("hello") == 99162322
    assert java_hash("") == 0
    assert java_hash(2**40) == 256
    assert java_hash(True) == 1231
    assert java_hash(None) == 0


def test_bool_is_not_hashed_as_int() -> None:
    assert java_hash(True) != java_hash(1)
    assert java_hash_array([True, 1]).tolist() == [1231, 1]


def test_a_row_hashes_as_the_tuple_of_its_values() -> None:
    assert java_hash(Row("hello", 42, None)) == java_hash(("hello", 42, None)) == 805742023
    assert java_hash(Row(id=1, name="a")) == java_hash([1, "a"]) == 1089


def test_numpy_scalars_hash_as_the_values_they_hold() -> None:
    assert java_hash(np.int64(2**40)) == 256
    assert java_hash(np.int32(-7)) == -7
    assert java_hash(np.float64(1.5)) == 1073217536
    assert java_hash(np.bool_(True)) == 1231
    assert java_hash(np.str_("hello")) == 99162322


def test_ints_beyond_64_bits_hash_their_little_endian_bytes() -> None:
    value = 2**64
    assert java_hash(value) == java_hash(value.to_bytes(9, "little", signed=True))
    assert java_hash(-(2**63) - 1) == java_hash((-(2**63) - 1).to_bytes(9, "little", signed=True))


def test_every_nan_hashes_as_the_canonical_nan() -> None:
    other_nan = np.frombuffer(np.uint64(0x7FF0000000000001).tobytes(), np.float64)[0]
    assert math.isnan(other_nan)
    assert java_hash(float(other_nan)) == java_hash(math.nan) == 2146959360
    assert java_hash_array(np.array([other_nan, -math.nan])).tolist() == [2146959360, 2146959360]


def test_lone_surrogates_hash_as_the_code_unit_they_are() -> None:
    assert java_hash("\ud800") == 0xD800
    assert string_hashes(["\ud800", "x\udfff"]).tolist() == [0xD800, 31 * ord("x") + 0xDFFF]


@pytest.mark.parametrize("key", [{1: 2}, {1}, object(), 1 + 2j, [1, {2}]])
def test_unhashable_key_types_are_a_usage_error(key: object) -> None:
    with pytest.raises(UsageError, match="keys must be bool/int/float/str/bytes/None/tuple/Row"):
        java_hash(key)


def test_the_usage_error_names_the_type() -> None:
    with pytest.raises(UsageError, match="type dict"):
        java_hash({"a": 1})


@pytest.mark.parametrize(
    ("parallelism", "ranges"),
    [
        (1, [(0, 127)]),
        (2, [(0, 63), (64, 127)]),
        (3, [(0, 42), (43, 85), (86, 127)]),
        (4, [(0, 31), (32, 63), (64, 95), (96, 127)]),
    ],
)
def test_key_group_ranges_at_max_parallelism_128(parallelism: int, ranges: list[tuple[int, int]]) -> None:
    assert [compute_key_group_range_for_operator_index(128, parallelism, i) for i in range(parallelism)] == [
        KeyGroupRange(start, end) for start, end in ranges
    ]


def test_operator_index_of_key_groups_at_the_range_edges() -> None:
    assert compute_operator_index_for_key_group(128, 3, 42) == 0
    assert compute_operator_index_for_key_group(128, 3, 43) == 1
    assert compute_operator_index_for_key_group(128, 3, 85) == 1
    assert compute_operator_index_for_key_group(128, 3, 86) == 2
    assert compute_operator_index_for_key_group(128, 3, 127) == 2


def test_keys_are_routed_to_the_subtask_owning_their_key_group() -> None:
    # "hello" is in key group 35 of 128: subtask 1 of 4 ([32, 63]); 42 is in key group 29: subtask 0.
    assert assign_key_to_parallel_operator("hello", 128, 4) == 1
    assert assign_key_to_parallel_operator(42, 128, 4) == 0
    assert assign_key_to_parallel_operator(True, 128, 4) == 2
    hashes = java_hash_array(["hello", "flink", "user-1"])
    assert channels_for_hashes(hashes, 128, 4).tolist() == [1, 3, 3]
    key_groups = key_groups_for_hashes(hashes, 128)
    assert key_groups.tolist() == [35, 98, 121]
    assert channels_for_key_groups(key_groups, 128, 4).tolist() == [1, 3, 3]


def test_key_group_range_behaves_like_a_collection() -> None:
    key_groups = KeyGroupRange(3, 6)
    assert len(key_groups) == key_groups.number_of_key_groups == 4
    assert list(key_groups) == [3, 4, 5, 6]
    assert 3 in key_groups and 6 in key_groups
    assert 2 not in key_groups and 7 not in key_groups and "4" not in key_groups
    assert key_groups.intersection(KeyGroupRange(5, 10)) == KeyGroupRange(5, 6)
    assert key_groups.intersection(KeyGroupRange(7, 10)) is KeyGroupRange.EMPTY


def test_the_empty_key_group_range() -> None:
    assert KeyGroupRange(0, -1) == KeyGroupRange.EMPTY
    assert len(KeyGroupRange.EMPTY) == 0
    assert list(KeyGroupRange.EMPTY) == []
    assert 0 not in KeyGroupRange.EMPTY
    assert KeyGroupRange.EMPTY.intersection(KeyGroupRange(0, 5)) == KeyGroupRange.EMPTY


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4), (2, -1)])
def test_an_invalid_key_group_range_is_a_usage_error(start: int, end: int) -> None:
    with pytest.raises(UsageError, match=rf"\[{start}, {end}\]"):
        KeyGroupRange(start, end)


@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [
        (1, 128),
        (2, 128),
        (85, 128),
        (86, 256),
        (100, 256),
        (1000, 2048),
        (21845, 32768),
        (30000, 32768),
        (32768, 32768),
    ],
)
def test_default_max_parallelism(parallelism: int, expected: int) -> None:
    assert compute_default_max_parallelism(parallelism) == expected


def test_round_up_to_power_of_two() -> None:
    assert [round_up_to_power_of_two(v) for v in (0, 1, 2, 3, 4, 5, 150, 256, 257)] == [
        1,
        1,
        2,
        4,
        4,
        8,
        256,
        256,
        512,
    ]


@pytest.mark.parametrize(
    ("max_parallelism", "parallelism", "message"),
    [
        (128, 300, "parallelism 300 exceeds max_parallelism 128"),
        (128, 0, "parallelism 0 is invalid"),
        (128, -2, "parallelism -2 is invalid"),
        (0, 1, "max_parallelism 0 is invalid"),
        (32769, 1, "max_parallelism 32769 is invalid"),
    ],
)
def test_bad_parallelism_is_a_usage_error(max_parallelism: int, parallelism: int, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        compute_key_group_range_for_operator_index(max_parallelism, parallelism, 0)
    with pytest.raises(UsageError, match=message):
        compute_operator_index_for_key_group(max_parallelism, parallelism, 0)
    with pytest.raises(UsageError, match=message):
        channels_for_hashes(np.zeros(1, np.int32), max_parallelism, parallelism)
    with pytest.raises(UsageError, match=message):
        channels_for_key_groups(np.zeros(1, np.int32), max_parallelism, parallelism)


@pytest.mark.parametrize("max_parallelism", [0, -1, 32769])
def test_bad_max_parallelism_for_key_groups_is_a_usage_error(max_parallelism: int) -> None:
    message = f"max_parallelism {max_parallelism} is invalid"
    with pytest.raises(UsageError, match=message):
        assign_to_key_group("a", max_parallelism)
    with pytest.raises(UsageError, match=message):
        compute_key_group_for_key_hash(0, max_parallelism)
    with pytest.raises(UsageError, match=message):
        key_groups_for_hashes(np.zeros(1, np.int32), max_parallelism)


@pytest.mark.parametrize("parallelism", [0, 32769, 2.0, True])
def test_bad_parallelism_for_the_default_max_parallelism_is_a_usage_error(parallelism: object) -> None:
    with pytest.raises(UsageError, match="parallelism"):
        compute_default_max_parallelism(parallelism)  # type: ignore[arg-type]


def test_operator_index_and_key_group_out_of_range_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=re.escape("operator_index 4 is outside 0..3")):
        compute_key_group_range_for_operator_index(128, 4, 4)
    with pytest.raises(UsageError, match=re.escape("key group 128 is outside 0..127")):
        compute_operator_index_for_key_group(128, 4, 128)
    with pytest.raises(UsageError, match=re.escape("key group -1 is outside 0..127")):
        channels_for_key_groups(np.array([3, -1], np.int32), 128, 4)


def test_string_offsets_that_do_not_fit_are_usage_errors() -> None:
    units = np.array([104, 105], np.uint16)
    with pytest.raises(UsageError, match="offsets is empty"):
        hash_utf16_strings(units, np.zeros(0, np.int64))
    with pytest.raises(UsageError, match=re.escape("offsets 0..3 of string 0")):
        hash_utf16_strings(units, np.array([0, 3], np.int64))
    assert hash_utf16_strings(units, np.array([0, 2], np.int64)).tolist() == [java_hash("hi")]


def test_empty_batches() -> None:
    assert java_hash_array([]).dtype == np.int32
    assert java_hash_array([]).shape == (0,)
    assert string_hashes([]).tolist() == []
    assert channels_for_hashes(np.zeros(0, np.int32), 128, 4).tolist() == []


def test_java_hash_array_dispatches_numpy_arrays_by_dtype() -> None:
    assert java_hash_array(np.array([2**40, -7], np.int64)).tolist() == [256, -7]
    assert java_hash_array(np.array([7, 2**63], np.uint64)).tolist() == [7, java_hash(2**63)]
    assert java_hash_array(np.array([1.5, -0.0], np.float32)).tolist() == [1073217536, -(2**31)]
    assert java_hash_array(np.array([True, False])).tolist() == [1231, 1237]
    assert java_hash_array(np.array(["hello", ""])).tolist() == [99162322, 0]
    objects = np.empty(2, dtype=object)
    objects[:] = [(1, "a"), None]
    assert java_hash_array(objects).tolist() == [1089, 0]
    with pytest.raises(UsageError, match="one-dimensional"):
        java_hash_array(np.zeros((2, 2), np.int64))


def test_java_hash_array_falls_back_to_the_reference_for_mixed_batches() -> None:
    keys: list[object] = [1, "a", 1.5, None, (1, "a"), b"\x01", 2**70, True]
    assert java_hash_array(keys).tolist() == [java_hash(k) for k in keys]
    assert java_hash_array([1, 2**64]).tolist() == [1, java_hash(2**64)]
