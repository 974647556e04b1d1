"""Codec kernels on known inputs and bad arguments (their agreement with the reference is a property test)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from weir.codec import kernels, reference
from weir.errors import UsageError

TWINS = [kernels, reference]


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_group_by_channel_is_a_stable_counting_sort(impl: Any) -> None:
    channels = np.array([2, 0, 2, 1, 0, 2], dtype=np.int32)
    permutation, offsets = impl.group_by_channel(channels, 4)
    assert permutation.tolist() == [1, 4, 3, 0, 2, 5]
    assert offsets.tolist() == [0, 2, 3, 6, 6]
    permutation, offsets = impl.group_by_channel(np.empty(0, np.int32), 2)
    assert permutation.tolist() == [] and offsets.tolist() == [0, 0, 0]


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_group_by_channel_names_a_channel_out_of_range(impl: Any) -> None:
    with pytest.raises(
        UsageError, match=re.escape("record 2 is routed to channel 3, outside 0..2 (3 channels)")
    ):
        impl.group_by_channel(np.array([0, 1, 3], dtype=np.int32), 3)
    with pytest.raises(UsageError, match="num_channels 0 is invalid: it must be at least 1"):
        impl.group_by_channel(np.array([0], dtype=np.int32), 0)


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_gather_fixed_copies_each_channels_records_to_its_frame(impl: Any) -> None:
    src = np.array([10, 11, 12, 13], dtype="<i2")
    channels = np.array([1, 0, 1, 1], dtype=np.int32)
    permutation, offsets = kernels.group_by_channel(channels, 2)
    dst = np.zeros(12, np.uint8)
    impl.gather_fixed(dst, np.array([1, 5]), src.view(np.uint8), 2, permutation, offsets)
    assert dst[1:3].view("<i2").tolist() == [11]
    assert dst[5:11].view("<i2").tolist() == [10, 12, 13]
    assert dst[[0, 3, 4, 11]].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_gather_fixed_rejects_a_column_of_the_wrong_size(impl: Any) -> None:
    permutation, offsets = kernels.group_by_channel(np.zeros(3, np.int32), 1)
    with pytest.raises(UsageError, match="column has 5 bytes, expected 3 records of 2 bytes"):
        impl.gather_fixed(
            np.zeros(8, np.uint8), np.zeros(1, np.int64), np.zeros(5, np.uint8), 2, permutation, offsets
        )
    with pytest.raises(UsageError, match="channel 0's column does not fit the output buffer"):
        impl.gather_fixed(
            np.zeros(4, np.uint8), np.zeros(1, np.int64), np.zeros(6, np.uint8), 2, permutation, offsets
        )


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_gather_strings_joins_each_channels_strings(impl: Any) -> None:
    blob = np.frombuffer(b"aabbbc", dtype=np.uint8)
    starts, ends = np.array([0, 2, 5, 6]), np.array([2, 5, 6, 6])
    permutation, offsets = kernels.group_by_channel(np.array([0, 1, 0, 0], dtype=np.int32), 2)
    dst = np.zeros(10, np.uint8)
    impl.gather_strings(dst, np.array([0, 6]), blob, starts, ends, permutation, offsets, 0)
    assert dst.tobytes() == b"aa\x00c\x00\x00bbb\x00"
    dst = np.zeros(6, np.uint8)
    impl.gather_strings(dst, np.array([0, 3]), blob, starts, ends, permutation, offsets, -1)
    assert dst.tobytes() == b"aacbbb"


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_separator_bounds_finds_each_string(impl: Any) -> None:
    blob = np.frombuffer("ab\x00\x00日本".encode(), dtype=np.uint8)
    starts, ends = impl.separator_bounds(blob, 3, 0)
    assert starts.tolist() == [0, 3, 4] and ends.tolist() == [2, 3, 10]
    for n in (0, 2, 4):  # the wrong number of separators: the caller must use the lengths layout
        starts, ends = impl.separator_bounds(blob, n, 0)
        assert starts.tolist() == [] and ends.tolist() == []
    starts, ends = impl.separator_bounds(np.empty(0, np.uint8), 1, 0)
    assert starts.tolist() == [0] and ends.tolist() == [0]


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_utf8_bounds_counts_code_points(impl: Any) -> None:
    blob = np.frombuffer("aé\U0001f600b".encode(), dtype=np.uint8)
    starts, ends = impl.utf8_bounds(blob, np.array([2, 0, 1, 1]))
    assert starts.tolist() == [0, 3, 3, 7] and ends.tolist() == [3, 3, 7, 8]
    with pytest.raises(UsageError, match="string 1 runs past the end of the 8-byte UTF-8 blob"):
        impl.utf8_bounds(blob, np.array([3, 2]))
    with pytest.raises(UsageError, match="the strings' lengths cover 3 bytes of a UTF-8 blob of 8 bytes"):
        impl.utf8_bounds(blob, np.array([2]))
    with pytest.raises(UsageError, match="string 0 has a negative length -1"):
        impl.utf8_bounds(blob, np.array([-1]))


@pytest.mark.parametrize("impl", TWINS, ids=["kernel", "reference"])
def test_sum_by_channel(impl: Any) -> None:
    out = impl.sum_by_channel(np.array([1, 2, 3, 4]), np.array([1, 1, 0, 2], dtype=np.int32), 4)
    assert out.tolist() == [3, 3, 4, 0]
    with pytest.raises(UsageError, match=re.escape("record 0 is routed to channel 5, outside 0..1")):
        impl.sum_by_channel(np.array([1]), np.array([5], dtype=np.int32), 2)
