"""Helpers for the codec tests: exact record comparison (NaN-aware, type-aware) and frame plumbing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from weir.codec.batch import Batch
from weir.codec.frame import HEADER_SIZE, parse_header
from weir.codec.serializers import BatchSerializer
from weir.common.types import Row


def same_value(expected: Any, actual: Any) -> bool:
    """Equal, with NaN equal to NaN, the same Python type, and Rows equal in names and kind."""
    if isinstance(expected, float) and isinstance(actual, float):
        return (math.isnan(expected) and math.isnan(actual)) or expected == actual
    if isinstance(expected, Row):
        return (
            isinstance(actual, Row)
            and expected.get_field_names() == actual.get_field_names()
            and expected.get_row_kind() == actual.get_row_kind()
            and same_records(list(expected), list(actual))
        )
    if isinstance(expected, tuple):
        return type(actual) is tuple and same_records(list(expected), list(actual))
    return type(expected) is type(actual) and expected == actual


def same_records(expected: list[Any], actual: list[Any]) -> bool:
    return len(expected) == len(actual) and all(same_value(e, a) for e, a in zip(expected, actual))


def assert_same_batch(expected: Batch, actual: Batch) -> None:
    assert len(actual) == len(expected)
    assert same_records(expected.as_list(), actual.as_list()), (
        expected.as_list()[:10],
        actual.as_list()[:10],
    )
    if expected.timestamps is None:
        assert actual.timestamps is None
    else:
        assert actual.timestamps is not None
        assert actual.timestamps.dtype == np.int64
        assert actual.timestamps.tolist() == list(expected.timestamps)


def decode_frame(serializer: BatchSerializer, frame: bytes) -> Batch:
    header = parse_header(frame)
    assert header.frame_length == len(frame)
    serializer.check_header(header)
    return serializer.decode(header, memoryview(frame)[HEADER_SIZE:])


def roundtrip(serializer: BatchSerializer, batch: Batch) -> Batch:
    return decode_frame(serializer, serializer.encode(batch))
