"""The small-batch path (``weir.codec.small``) against the full columnar path.

For every schema it takes, the two paths must write the same bytes, read a frame back to the
same batch, and reject the same bad input with the same message (the small path hands what it
cannot take to the full path). The full path is the serializer with its small path removed.
"""

from __future__ import annotations

import copy
import random
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.property.test_codec_roundtrip import BASIC, same_records
from weir.codec import columns, small
from weir.codec.batch import Batch
from weir.codec.frame import HEADER_SIZE, parse_header
from weir.codec.serializers import ColumnarSerializer, serializer_for
from weir.common.typeinfo import TypeInformation, Types
from weir.errors import ProtocolViolation, UsageError

SETTINGS = settings(deadline=None, max_examples=100)

#: The field types the small path takes, with values of them (and, for FLOAT, any double:
#: both paths must round it to 32 bits alike).
SMALL_FIELDS: dict[str, tuple[TypeInformation, st.SearchStrategy[Any]]] = {
    name: BASIC[name] for name in ("BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "DOUBLE", "STRING")
}
SMALL_FIELDS["FLOAT"] = (Types.FLOAT(), st.one_of(st.floats(width=32), st.floats(-3.5e38, 3.5e38)))


def full_path(serializer: ColumnarSerializer) -> ColumnarSerializer:
    """The same serializer without its small path."""
    full = copy.copy(serializer)
    full._small = None
    return full


@st.composite
def small_batches(draw: st.DrawFn, max_records: int = 300) -> tuple[ColumnarSerializer, Batch]:
    fields = draw(st.lists(st.sampled_from(sorted(SMALL_FIELDS)), min_size=1, max_size=5))
    type_info = Types.TUPLE([SMALL_FIELDS[f][0] for f in fields])
    n = draw(st.integers(1, max_records))
    # a few distinct records repeated keeps hypothesis fast at a few hundred records
    pool = draw(st.lists(st.tuples(*(SMALL_FIELDS[f][1] for f in fields)), min_size=1, max_size=8))
    rng = random.Random(draw(st.integers(0, 2**32)))
    records = [rng.choice(pool) for _ in range(n)]
    timestamps = None
    if draw(st.booleans()):
        timestamps = np.array([rng.randint(-(2**63), 2**63 - 1) for _ in range(n)], dtype=np.int64)
    serializer = serializer_for(type_info)
    assert isinstance(serializer, ColumnarSerializer)
    return serializer, Batch(records, timestamps)


def outcome(fn: Any, *args: Any) -> Any:
    """What ``fn`` returns, or the type and message of what it raises."""
    try:
        return fn(*args)
    except (UsageError, ProtocolViolation) as e:
        return (type(e), str(e))


def test_the_small_path_takes_tuples_of_basic_fields_only() -> None:
    def has_small(t: TypeInformation) -> bool:
        s = serializer_for(t)
        return isinstance(s, ColumnarSerializer) and s._small is not None

    assert has_small(Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE(), Types.BOOLEAN()]))
    assert not has_small(Types.TUPLE([Types.STRING(), Types.CHAR()]))
    assert not has_small(Types.TUPLE([Types.LONG(), Types.LIST(Types.LONG())]))
    assert not has_small(Types.ROW([Types.LONG()]))
    assert not has_small(Types.LONG())


@SETTINGS
@given(small_batches(), st.integers(1, 5), st.data())
def test_partitioned_frames_are_the_full_paths_bytes(
    case: tuple[ColumnarSerializer, Batch], num_channels: int, data: st.DataObject
) -> None:
    serializer, batch = case
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    channels = np.array([rng.randrange(num_channels) for _ in range(len(batch))], dtype=np.int32)
    full = full_path(serializer)
    frames = outcome(serializer.encode_partitioned, batch, channels, num_channels)
    assert frames == outcome(full.encode_partitioned, batch, channels, num_channels)
    assert outcome(serializer.encode, batch) == outcome(full.encode, batch)


@SETTINGS
@given(small_batches(max_records=small.SMALL_BATCH_RECORDS))
def test_frames_decode_to_what_the_full_path_decodes(case: tuple[ColumnarSerializer, Batch]) -> None:
    serializer, batch = case
    frame = outcome(full_path(serializer).encode, batch)
    assume(isinstance(frame, bytes))  # not a FLOAT too large for 32 bits
    header = parse_header(frame)
    payload = memoryview(frame)[HEADER_SIZE:]
    assert serializer._small is not None
    mine = serializer._small.decode(header, payload)
    theirs = full_path(serializer).decode(header, payload)
    nul = any("\x00" in v for r in batch.as_list() for v in r if isinstance(v, str))
    if nul:  # a string holds U+0000: the lengths layout, which only the full path reads
        assert mine is None
        return
    if mine is None:  # only a column long enough to be packed may be declined
        assert len(batch) >= columns.PACK_MIN_VALUES
        return
    assert same_records(theirs.as_list(), mine.as_list())
    assert (mine.timestamps is None) == (theirs.timestamps is None)
    if mine.timestamps is not None:
        assert mine.timestamps.dtype == np.int64
        assert np.array_equal(mine.timestamps, theirs.timestamps)


LONGS = Types.TUPLE([Types.STRING(), Types.LONG()])
INTS = Types.TUPLE([Types.INT(), Types.FLOAT(), Types.BOOLEAN()])


@pytest.mark.parametrize(
    ("type_info", "records"),
    [
        (LONGS, [("a", 1), ("b", True)]),  # bool is not a LONG
        (LONGS, [("a", 1), ("b", 2**63)]),  # out of range
        (LONGS, [("a", 1), ("b", 1.5)]),
        (LONGS, [("a", 1), (2, 2)]),  # not a str
        (LONGS, [("a", 1), ("b", 2, 3)]),  # arity
        (LONGS, [("a", 1), ["b", 2]]),  # a list record: taken by the full path
        (LONGS, [("a\x00b", 1), ("c", 2)]),  # U+0000: the lengths layout
        (LONGS, [("a", np.int64(1)), ("c", 2)]),  # numpy ints: taken by the full path
        (INTS, [(2**31, 1.0, True)]),
        (INTS, [(1, 1e39, True)]),  # too large for FLOAT
        (INTS, [(1, 1.0, 1)]),  # an int is not a BOOLEAN
        (INTS, [(1, 2, False)]),  # an int is a FLOAT
    ],
)
def test_what_the_small_path_declines_comes_out_as_the_full_path_says(
    type_info: TypeInformation, records: list[Any]
) -> None:
    serializer = serializer_for(type_info)
    assert isinstance(serializer, ColumnarSerializer)
    batch = Batch(records)
    channels = np.arange(len(records), dtype=np.int32) % 2
    full = full_path(serializer)
    assert outcome(serializer.encode, batch) == outcome(full.encode, batch)
    assert outcome(serializer.encode_partitioned, batch, channels, 2) == outcome(
        full.encode_partitioned, batch, channels, 2
    )


def test_bad_channels_are_named_by_the_full_path() -> None:
    serializer = serializer_for(LONGS)
    batch = Batch([("a", 1), ("b", 2)])
    with pytest.raises(UsageError):
        serializer.encode_partitioned(batch, np.array([0, 2], dtype=np.int32), 2)
    with pytest.raises(UsageError):
        serializer.encode_partitioned(batch, np.array([0], dtype=np.int32), 2)


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda p: p[:-1],  # cut short
        lambda p: p + b"\x00",  # a byte after the last column
        lambda p: p[:16] + b"\x05" + p[17:],  # bad column flags
        lambda p: p[:17] + struct.pack("<I", 99) + p[21:],  # a blob size past the end
        lambda p: p[:21] + b"\xff" + p[22:],  # not UTF-8
        lambda p: p[:21] + b"\x00" + p[22:],  # one string too many
    ],
)
def test_corrupt_frames_are_named_by_the_full_path(corrupt: Any) -> None:
    serializer = serializer_for(LONGS)
    assert isinstance(serializer, ColumnarSerializer)
    frame = full_path(serializer).encode(Batch([("ab", 1), ("c", 2)], np.array([5, 6])))
    header = parse_header(frame)
    # timestamps [0, 16), flags 16, blob size [17, 21), blob "ab\0c" [21, 25), flags 25, LONGs
    payload = corrupt(frame[HEADER_SIZE:])
    header = header._replace(payload_length=len(payload))
    mine = outcome(serializer.decode, header, memoryview(payload))
    assert isinstance(mine, tuple) and mine[0] is ProtocolViolation
    assert mine == outcome(full_path(serializer).decode, header, memoryview(payload))
