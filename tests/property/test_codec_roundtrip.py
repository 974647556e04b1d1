"""Codec properties: encode -> decode is the identity, partitioning keeps every record in order, and the
numba kernels agree with their plain-Python reference twins.

Typed batches are drawn with their type: a basic type, or a TUPLE / ROW / ROW_NAMED of basic fields
(sometimes with a LIST field, which travels as a pickled column), values covering every code point
(astral characters, lone surrogates, U+0000), every float (NaN, infinities, -0.0) and the edges of
every integer type; ROW fields may be None and rows carry random row kinds.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from weir.codec import columns, kernels, reference, serializers
from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.codec.frame import HEADER_SIZE, parse_header
from weir.codec.reader import FrameReader
from weir.codec.serializers import BatchSerializer, serializer_for
from weir.common.typeinfo import TypeInformation, Types
from weir.common.types import Row, RowKind
from weir.errors import UsageError

# The first example of each test pays numba's compile (or cache load) time.
PROPERTY_SETTINGS = settings(deadline=None, max_examples=150)

TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())


def _ints(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.one_of(st.sampled_from([lo, hi, 0, -1, 1]), st.integers(lo, hi))


BASIC: dict[str, tuple[TypeInformation, st.SearchStrategy[Any]]] = {
    "BOOLEAN": (Types.BOOLEAN(), st.booleans()),
    "BYTE": (Types.BYTE(), _ints(8)),
    "SHORT": (Types.SHORT(), _ints(16)),
    "INT": (Types.INT(), _ints(32)),
    "LONG": (Types.LONG(), _ints(64)),
    "FLOAT": (Types.FLOAT(), st.floats(width=32)),
    "DOUBLE": (Types.DOUBLE(), st.floats()),
    "CHAR": (Types.CHAR(), CHAR),
    "STRING": (Types.STRING(), st.one_of(TEXT, st.sampled_from(["", "\x00", "a\x00b"]))),
    "BYTE_ARRAY": (Types.BYTE_ARRAY(), st.binary(max_size=12)),
}
NUMERIC = {"BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE"}
LIST_FIELD = (Types.LIST(Types.LONG()), st.lists(st.integers(-(2**70), 2**70), max_size=3))
FIELD_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: not re.fullmatch(r"f\d+", s)
)


def same_value(expected: Any, actual: Any) -> bool:
    """Equal, with NaN equal to NaN, the same Python type, and Rows equal in names and kind."""
    if isinstance(expected, float) and isinstance(actual, float):
        return (math.isnan(expected) and math.isnan(actual)) or (
            expected == actual and math.copysign(1, expected) == math.copysign(1, actual)
        )
    if isinstance(expected, Row):
        return (
            isinstance(actual, Row)
            and expected.get_field_names() == actual.get_field_names()
            and expected.get_row_kind() == actual.get_row_kind()
            and same_records(list(expected), list(actual))
        )
    if isinstance(expected, tuple | list):
        return type(actual) is type(expected) and same_records(list(expected), list(actual))
    if isinstance(expected, dict):
        return (
            type(actual) is dict
            and list(expected) == list(actual)
            and same_records(list(expected.values()), list(actual.values()))
        )
    return type(expected) is type(actual) and expected == actual


def same_records(expected: list[Any], actual: list[Any]) -> bool:
    return len(expected) == len(actual) and all(same_value(e, a) for e, a in zip(expected, actual))


@st.composite
def typed_batches(draw: st.DrawFn) -> tuple[TypeInformation, Batch]:
    """A type and a batch of records of that type, as a list or (numeric types) a numpy array."""
    shape = draw(st.sampled_from(["basic", "tuple", "row", "row_named"]))
    n = draw(st.integers(0, 40))
    if shape == "basic":
        name = draw(st.sampled_from(sorted(BASIC)))
        type_info, values = BASIC[name]
        records: Any = draw(st.lists(values, min_size=n, max_size=n))
        if name in NUMERIC and draw(st.booleans()):
            records = np.array(records, dtype=type_info.numpy_dtype)  # type: ignore[attr-defined]
    else:
        fields = draw(
            st.lists(
                st.one_of(st.sampled_from(sorted(BASIC)).map(BASIC.get), st.just(LIST_FIELD)),
                min_size=1,
                max_size=4,
            )
        )
        field_types = [t for t, _ in fields]
        nullable = shape != "tuple"
        field_values = [st.one_of(st.none(), v) if nullable else v for _, v in fields]
        tuples = draw(st.lists(st.tuples(*field_values), min_size=n, max_size=n))
        if shape == "tuple":
            type_info = Types.TUPLE(field_types)
            records = tuples
        elif shape == "row":
            type_info = Types.ROW(field_types)  # decodes named f0, f1, ..., as PyFlink's row coder
            records = [Row(**{f"f{i}": v for i, v in enumerate(t)}) for t in tuples]
        else:
            names = draw(st.lists(FIELD_NAME, min_size=len(fields), max_size=len(fields), unique=True))
            type_info = Types.ROW_NAMED(names, field_types)
            records = [Row(**dict(zip(names, t))) for t in tuples]
        if shape != "tuple":
            for row in records:
                row.set_row_kind(draw(st.sampled_from(list(RowKind))))
    timestamps = None
    if draw(st.booleans()):
        timestamps = draw(arrays(np.int64, n, elements=st.one_of(st.just(int(NO_TIMESTAMP)), _ints(64))))
    return type_info, Batch(records, timestamps)


PICKLABLE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT, st.binary(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner, inner), st.dictionaries(TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)


def _decode(serializer: BatchSerializer, frame: bytes) -> Batch:
    header = parse_header(frame)
    assert header.frame_length == len(frame)
    serializer.check_header(header)
    return serializer.decode(header, memoryview(frame)[HEADER_SIZE:])


def _assert_same_batch(expected: Batch, actual: Batch) -> None:
    assert same_records(expected.as_list(), actual.as_list()), (expected, actual)
    if expected.timestamps is None:
        assert actual.timestamps is None
    else:
        assert actual.timestamps is not None and actual.timestamps.tolist() == expected.timestamps.tolist()


# -- encode -> decode --------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(typed_batches())
def test_typed_batches_round_trip(case: tuple[TypeInformation, Batch]) -> None:
    type_info, batch = case
    serializer = serializer_for(type_info)
    assert serializer.describe().startswith("typed columnar")
    frame = serializer.encode(batch)
    decoded = _decode(serializer, frame)
    _assert_same_batch(batch, decoded)
    if isinstance(batch.values, np.ndarray):
        assert isinstance(decoded.values, np.ndarray) and decoded.values.dtype == batch.values.dtype


@PROPERTY_SETTINGS
@given(st.lists(PICKLABLE, max_size=20), st.booleans())
def test_pickled_batches_round_trip(values: list[Any], with_timestamps: bool) -> None:
    ts = np.arange(len(values), dtype=np.int64) if with_timestamps else None
    batch = Batch(values, ts)
    serializer = serializer_for(None)
    _assert_same_batch(batch, _decode(serializer, serializer.encode(batch)))


@st.composite
def routed(
    draw: st.DrawFn, batches: st.SearchStrategy[tuple[TypeInformation | None, Batch]]
) -> tuple[Any, ...]:
    type_info, batch = draw(batches)
    num_channels = draw(st.integers(1, 6))
    channels = draw(arrays(np.int32, len(batch), elements=st.integers(0, num_channels - 1)))
    return type_info, batch, channels, num_channels


PICKLED_BATCHES = st.lists(PICKLABLE, max_size=20).map(lambda v: (None, Batch(v)))


@PROPERTY_SETTINGS
@given(st.one_of(routed(typed_batches()), routed(PICKLED_BATCHES)))
def test_encode_partitioned_routes_every_record_in_order(case: tuple[Any, ...]) -> None:
    # both ways of encoding: one pass over all channels, and one encode per channel (small batches)
    saved = serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL
    try:
        for threshold in (0, 1 << 30):
            serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL = threshold
            _check_routed(case)
    finally:
        serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL = saved


def _check_routed(case: tuple[Any, ...]) -> None:
    type_info, batch, channels, num_channels = case
    serializer = serializer_for(type_info)
    frames = serializer.encode_partitioned(batch, channels, num_channels)
    assert len(frames) == num_channels
    records = batch.as_list()
    stamps = batch.timestamp_list()
    concatenated: list[Any] = []
    for c, frame in enumerate(frames):
        expected = [r for r, ch in zip(records, channels.tolist()) if ch == c]
        if not expected:
            assert frame is None
            continue
        assert frame is not None
        decoded = _decode(serializer, frame)
        assert same_records(expected, decoded.as_list())
        assert decoded.timestamp_list() == [t for t, ch in zip(stamps, channels.tolist()) if ch == c]
        concatenated += decoded.as_list()
    order = np.argsort(channels, kind="stable").tolist()
    assert same_records([records[i] for i in order], concatenated)


@PROPERTY_SETTINGS
@given(typed_batches(), st.lists(st.integers(1, 64), min_size=1, max_size=8))
def test_a_stream_cut_anywhere_reads_back_the_same_batches(
    case: tuple[TypeInformation, Batch], cut_sizes: list[int]
) -> None:
    type_info, batch = case
    serializer = serializer_for(type_info)
    stream = serializer.encode(batch) * 3
    reader = FrameReader(serializer)
    decoded: list[Batch] = []
    pos, k = 0, 0
    while pos < len(stream):
        size = cut_sizes[k % len(cut_sizes)]
        decoded += reader.feed(stream[pos : pos + size])
        pos, k = pos + size, k + 1
    assert len(decoded) == 3 and not reader.has_partial
    for d in decoded:
        _assert_same_batch(batch, d)


# -- kernels == reference twins ----------------------------------------------------------------------


@st.composite
def routing(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    num_channels = draw(st.integers(1, 9))
    channels = draw(arrays(np.int32, st.integers(0, 60), elements=st.integers(0, num_channels - 1)))
    return channels, num_channels


def _same_outcome(kernel: Any, twin: Any, *args: Any) -> Any:
    """Both return equal results or both raise UsageError with the same message."""
    try:
        expected = twin(*args)
    except UsageError as error:
        with pytest.raises(UsageError) as raised:
            kernel(*args)
        assert str(raised.value) == str(error)
        return None
    result = kernel(*args)
    if isinstance(expected, tuple):
        assert len(result) == len(expected)
        for r, e in zip(result, expected):
            assert r.dtype == e.dtype and r.tolist() == e.tolist()
    return result


@PROPERTY_SETTINGS
@given(routing(), st.integers(-2, 2))
def test_group_by_channel_agrees_with_the_reference(case: tuple[np.ndarray, int], shift: int) -> None:
    channels, num_channels = case
    _same_outcome(kernels.group_by_channel, reference.group_by_channel, channels, num_channels)
    # Out-of-range channels and channel counts fail the same way.
    _same_outcome(
        kernels.group_by_channel, reference.group_by_channel, channels + shift, num_channels + shift
    )


@PROPERTY_SETTINGS
@given(routing(), st.data())
def test_sum_by_channel_agrees_with_the_reference(case: tuple[np.ndarray, int], data: st.DataObject) -> None:
    channels, num_channels = case
    values = data.draw(arrays(np.int64, len(channels), elements=st.integers(0, 2**40)))
    expected = reference.sum_by_channel(values, channels, num_channels)
    assert kernels.sum_by_channel(values, channels, num_channels).tolist() == expected.tolist()


def _layout(sizes: list[int], gaps: list[int]) -> tuple[np.ndarray, int]:
    """Channel positions in an output buffer: each channel's part after a gap."""
    positions, pos = [], 0
    for size, gap in zip(sizes, gaps):
        pos += gap
        positions.append(pos)
        pos += size
    return np.array(positions, dtype=np.int64), pos


@PROPERTY_SETTINGS
@given(routing(), st.sampled_from([1, 2, 3, 4, 8, 12]), st.data())
def test_gather_fixed_agrees_with_the_reference(
    case: tuple[np.ndarray, int], width: int, data: st.DataObject
) -> None:
    channels, num_channels = case
    n = len(channels)
    src = data.draw(arrays(np.uint8, n * width))
    permutation, offsets = reference.group_by_channel(channels, num_channels)
    gaps = data.draw(st.lists(st.integers(0, 5), min_size=num_channels, max_size=num_channels))
    positions, size = _layout((np.diff(offsets) * width).tolist(), gaps)
    fill = data.draw(arrays(np.uint8, size + 3))
    expected, result = fill.copy(), fill.copy()
    reference.gather_fixed(expected, positions, src, width, permutation, offsets)
    kernels.gather_fixed(result, positions, src, width, permutation, offsets)
    assert result.tolist() == expected.tolist()


@PROPERTY_SETTINGS
@given(routing(), st.sampled_from([-1, 0, 0xFF]), st.data())
def test_gather_strings_agrees_with_the_reference(
    case: tuple[np.ndarray, int], separator: int, data: st.DataObject
) -> None:
    channels, num_channels = case
    n = len(channels)
    pieces = data.draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
    blob = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    ends = np.cumsum([len(p) for p in pieces], dtype=np.int64)
    starts = ends - np.array([len(p) for p in pieces], dtype=np.int64)
    permutation, offsets = reference.group_by_channel(channels, num_channels)
    counts = np.diff(offsets)
    sizes = reference.sum_by_channel(ends - starts, channels, num_channels)
    if separator >= 0:
        sizes = sizes + np.maximum(counts - 1, 0)
    gaps = data.draw(st.lists(st.integers(0, 5), min_size=num_channels, max_size=num_channels))
    positions, size = _layout(sizes.tolist(), gaps)
    fill = data.draw(arrays(np.uint8, size + 2))
    expected, result = fill.copy(), fill.copy()
    reference.gather_strings(expected, positions, blob, starts, ends, permutation, offsets, separator)
    kernels.gather_strings(result, positions, blob, starts, ends, permutation, offsets, separator)
    assert result.tolist() == expected.tolist()


@PROPERTY_SETTINGS
@given(st.lists(TEXT, max_size=30), st.integers(-1, 1))
def test_separator_bounds_agrees_with_the_reference(strings: list[str], miscount: int) -> None:
    blob = np.frombuffer("\x00".join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    n = max(len(strings) + miscount, 0)
    _same_outcome(kernels.separator_bounds, reference.separator_bounds, blob, n, 0)
    starts, ends = kernels.separator_bounds(blob, len(strings), 0)
    if strings and all("\x00" not in s for s in strings):
        data = blob.tobytes()
        assert [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)] == strings


@PROPERTY_SETTINGS
@given(st.lists(TEXT, max_size=30), st.integers(-2, 2), st.booleans())
def test_utf8_bounds_agrees_with_the_reference(strings: list[str], error: int, corrupt: bool) -> None:
    blob = np.frombuffer("".join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    starts, ends = kernels.utf8_bounds(blob, lengths)
    data = blob.tobytes()
    assert [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)] == strings
    if corrupt and len(lengths):
        lengths[len(lengths) // 2] += error  # wrong lengths: the same error (or result) from both
    _same_outcome(kernels.utf8_bounds, reference.utf8_bounds, blob, lengths)
    _same_outcome(kernels.utf8_bounds, reference.utf8_bounds, blob[1:], lengths)


# -- packed int64 ----------------------------------------------------------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def packable(draw: st.DrawFn) -> tuple[np.ndarray, int, np.dtype[Any]]:
    """(values, base, width dtype): values whose differences from ``base`` fit the dtype."""
    dtype = np.dtype(draw(st.sampled_from(["u1", "<u2", "<u4"])))
    top = 2 ** (8 * dtype.itemsize) - 1
    base = draw(st.integers(-(2**63), 2**63 - 1 - top))
    deltas = draw(st.lists(st.integers(0, top) | st.sampled_from([0, top]), min_size=1, max_size=40))
    return np.array([base + d for d in deltas], np.int64), base, dtype


@PROPERTY_SETTINGS
@given(st.lists(INT64 | st.sampled_from([-(2**63), 2**63 - 1]), min_size=1, max_size=50))
def test_int_range_agrees_with_the_reference(values: list[int]) -> None:
    array = np.array(values, np.int64)
    assert (
        tuple(map(int, kernels.int_range(array))) == reference.int_range(array) == (min(values), max(values))
    )


@PROPERTY_SETTINGS
@given(packable())
def test_pack_and_unpack_deltas_agree_with_the_reference(case: tuple[np.ndarray, int, np.dtype[Any]]) -> None:
    values, base, dtype = case
    packed, expected = np.empty(len(values), dtype), np.empty(len(values), dtype)
    kernels.pack_deltas(values, base, packed)
    reference.pack_deltas(values, base, expected)
    assert packed.tolist() == expected.tolist() == [v - base for v in values.tolist()]
    unpacked, expected_back = np.empty(len(values), np.int64), np.empty(len(values), np.int64)
    kernels.unpack_deltas(packed, base, unpacked)
    reference.unpack_deltas(packed, base, expected_back)
    assert unpacked.tolist() == expected_back.tolist() == values.tolist()


@PROPERTY_SETTINGS
@given(
    st.lists(INT64, min_size=0, max_size=60)
    | st.integers(-(2**63), 2**63 - 1 - 2**33).flatmap(
        lambda lo: st.lists(st.integers(lo, lo + 2**33), max_size=60)
    ),
    st.booleans(),
)
def test_long_columns_and_timestamps_round_trip_packed_or_not(values: list[int], as_array: bool) -> None:
    """Values that span less than 2**32 travel packed; any values come back exactly, through the
    whole-batch, the per-channel and the one-pass partitioned encodes."""
    ts = np.array(values, np.int64)
    batch = Batch(np.array(values, np.int64) if as_array else values, ts)
    longs = serializer_for(Types.LONG())
    columns.PACK_MIN_VALUES, saved_min = 0, columns.PACK_MIN_VALUES  # pack even short columns
    try:
        _round_trip_every_way(longs, batch, values)
    finally:
        columns.PACK_MIN_VALUES = saved_min


def _round_trip_every_way(longs: BatchSerializer, batch: Batch, values: list[int]) -> None:
    decoded = _decode(longs, longs.encode(batch))
    assert decoded.values.tolist() == values
    assert decoded.timestamps is not None and decoded.timestamps.tolist() == values
    channels = (np.arange(len(values)) % 3).astype(np.int32)
    for threshold in (0, 1 << 30):  # one-pass plans, then frames cut per channel
        serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL, saved = (
            threshold,
            serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL,
        )
        try:
            frames = longs.encode_partitioned(batch, channels, 3)
        finally:
            serializers.SPLIT_ENCODE_RECORDS_PER_CHANNEL = saved
        for c, frame in enumerate(frames):
            expected = values[c::3]
            if not expected:
                assert frame is None
                continue
            assert frame is not None
            got = longs.decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:])
            assert got.values.tolist() == expected and got.timestamps.tolist() == expected  # type: ignore[union-attr]
