"""Batches, and tuples held as columns (``TupleColumns``)."""

from __future__ import annotations

import numpy as np
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.codec.frame import HEADER_SIZE, parse_header
from weir.codec.serializers import serializer_for
from weir.common.typeinfo import Types


def columns() -> TupleColumns:
    return TupleColumns([np.array([3, 1, 2]), ["c", "a", "b"], np.array([0.5, 1.5, 2.5])])


def test_tuple_columns_read_as_a_sequence_of_tuples_of_python_values() -> None:
    records = columns()
    assert len(records) == 3
    assert records[0] == (3, "c", 0.5) and records[-1] == (2, "b", 2.5)
    assert list(records) == [(3, "c", 0.5), (1, "a", 1.5), (2, "b", 2.5)]
    assert all(type(v) in (int, str, float) for r in records for v in r)
    assert records == [(3, "c", 0.5), (1, "a", 1.5), (2, "b", 2.5)]
    assert records != [(3, "c", 0.5)]
    assert records[1:] == TupleColumns([np.array([1, 2]), ["a", "b"], np.array([1.5, 2.5])])


def test_tuple_columns_build_their_tuples_once_and_only_when_read() -> None:
    records = columns()
    assert records._records is None
    assert len(records) == 3 and records[1:]._records is None  # slicing stays columnar
    first = records.records()
    assert records.records() is first


def test_a_batch_of_tuple_columns_takes_and_lists_records() -> None:
    batch = Batch(columns(), np.array([10, 20, 30]))
    picked = batch.take(np.array([2, 0]))
    assert isinstance(picked.values, TupleColumns)
    assert picked.as_list() == [(2, "b", 2.5), (3, "c", 0.5)]
    assert picked.timestamps is not None and picked.timestamps.tolist() == [30, 10]
    assert batch == Batch([(3, "c", 0.5), (1, "a", 1.5), (2, "b", 2.5)], np.array([10, 20, 30]))


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match=r"one length, got lengths \[2, 1\]"):
        TupleColumns([np.array([1, 2]), ["a"]])


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_codec_writes_tuple_columns_as_it_writes_their_tuples_without_building_them(
    partitioned: bool,
) -> None:
    serializer = serializer_for(Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    as_columns = columns()
    as_tuples = as_columns.records()
    as_columns = columns()
    ts = np.array([10, 20, 30])
    if partitioned:
        channels = np.array([1, 0, 1], dtype=np.int32)
        frames = serializer.encode_partitioned(Batch(as_columns, ts), channels, 2)
        assert frames == serializer.encode_partitioned(Batch(as_tuples, ts), channels, 2)
    else:
        frame = serializer.encode(Batch(as_columns, ts))
        assert frame == serializer.encode(Batch(as_tuples, ts))
        decoded = serializer.decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:])
        assert decoded.as_list() == as_tuples
    assert as_columns._records is None


def test_tuple_columns_of_the_wrong_width_or_type_are_checked_like_tuples() -> None:
    serializer = serializer_for(Types.TUPLE([Types.INT(), Types.LONG()]))
    with pytest.raises(Exception, match="outside the range"):
        serializer.encode(Batch(TupleColumns([np.array([2**40]), np.array([1])])))
    with pytest.raises(Exception, match="expected 2"):
        serializer.encode(Batch(TupleColumns([np.array([1]), np.array([1]), np.array([1])])))


def test_a_typed_tuple_frame_decodes_to_columns_that_read_as_the_records() -> None:
    """Tuples cross an exchange as columns: numpy for numbers, lists for strings; the tuples are
    the ones encoded."""
    import numpy as np

    from weir.codec.batch import TupleColumns
    from weir.codec.serializers import serializer_for
    from weir.codec.small import SMALL_BATCH_RECORDS
    from weir.common import Types

    from .records import roundtrip

    serializer = serializer_for(Types.TUPLE([Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    records = [(i, f"k{i}", i / 3) for i in range(SMALL_BATCH_RECORDS + 10)]  # past the small-batch codec
    decoded = roundtrip(serializer, Batch(records))
    assert isinstance(decoded.values, TupleColumns)
    from weir.codec.strings import Strings

    # numbers as numpy, strings as the frame's bytes (no str built until records are read)
    assert isinstance(decoded.values.columns[0], np.ndarray) and isinstance(
        decoded.values.columns[1], Strings
    )
    assert decoded.values.columns[1]._list is None
    assert decoded.as_list() == records
