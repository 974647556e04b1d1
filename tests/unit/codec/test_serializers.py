"""Batch serializers: round trips of every supported type, partitioning, fallbacks and errors."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import numpy as np
import pytest

from weir.codec import columns
from weir.codec.batch import NO_TIMESTAMP, Batch
from weir.codec.columns import COLUMN_PACKED, PACK_MIN_VALUES
from weir.codec.frame import (
    CODEC_COLUMNAR,
    CODEC_PICKLE,
    FLAG_ROW_KINDS,
    FLAG_TIMESTAMPS,
    FLAG_TIMESTAMPS_PACKED,
    HEADER_SIZE,
    MAGIC,
    parse_header,
)
from weir.codec.serializers import ColumnarSerializer, PickleSerializer, serializer_for
from weir.common.typeinfo import TypeInformation, Types
from weir.common.types import Row, RowKind
from weir.errors import ProtocolViolation, UsageError

from .records import assert_same_batch, decode_frame, roundtrip, same_records

I64 = (-(2**63), 2**63 - 1)
TEXT = [
    "",
    "a",
    "hello world",
    "é",
    "日本語",
    "\U0001f600",
    "a\U0001f600b\U00010348",
    "\ud800",
    "\udfff x",
    "  ",
]

BASIC_CASES = [
    pytest.param(Types.BOOLEAN(), [True, False, True], id="BOOLEAN"),
    pytest.param(Types.BYTE(), [-128, 0, 127, 5], id="BYTE"),
    pytest.param(Types.SHORT(), [-32768, 0, 32767, -1], id="SHORT"),
    pytest.param(Types.INT(), [-(2**31), 0, 2**31 - 1, 42], id="INT"),
    pytest.param(Types.LONG(), [I64[0], 0, I64[1], -(2**40), 2**31], id="LONG"),
    pytest.param(Types.FLOAT(), [1.5, -0.0, 0.25, 3.4028234663852886e38, 1.401298464324817e-45], id="FLOAT"),
    pytest.param(Types.DOUBLE(), [1.5, -0.0, 5e-324, 1.7976931348623157e308, 0.1], id="DOUBLE"),
    pytest.param(Types.CHAR(), ["a", "\x00", "é", "\U0001f600", "\ud800", "\uffff"], id="CHAR"),
    pytest.param(Types.STRING(), TEXT, id="STRING"),
    pytest.param(Types.STRING(), ["with\x00nul", "", "\x00", "x"], id="STRING-with-NUL"),
    pytest.param(Types.BYTE_ARRAY(), [b"", b"\x00", b"abc", bytes(range(256))], id="BYTE_ARRAY"),
]

NUMERIC = ["BOOLEAN", "BYTE", "SHORT", "INT", "LONG", "FLOAT", "DOUBLE"]


@pytest.fixture(params=["one-pass", "per-channel"])
def encode_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """encode_partitioned both ways: one pass over all channels, or one encode per channel."""
    from weir.codec import serializers

    threshold = 0 if request.param == "one-pass" else 1 << 30
    monkeypatch.setattr(serializers, "SPLIT_ENCODE_RECORDS_PER_CHANNEL", threshold)
    return str(request.param)


def _batch(values: list[Any], with_timestamps: bool) -> Batch:
    if not with_timestamps:
        return Batch(values)
    ts = np.arange(len(values), dtype=np.int64) * 1000 - 7
    if len(values):
        ts[0] = NO_TIMESTAMP
    return Batch(values, ts)


# -- round trips -----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_timestamps", [False, True], ids=["no-ts", "ts"])
@pytest.mark.parametrize(("type_info", "values"), BASIC_CASES)
def test_a_basic_type_round_trips(
    type_info: TypeInformation, values: list[Any], with_timestamps: bool
) -> None:
    serializer = serializer_for(type_info)
    assert isinstance(serializer, ColumnarSerializer)
    batch = _batch(values, with_timestamps)
    decoded = roundtrip(serializer, batch)
    assert_same_batch(batch, decoded)


@pytest.mark.parametrize(("type_info", "values"), BASIC_CASES)
def test_numeric_streams_decode_to_numpy_arrays_and_the_rest_to_lists(
    type_info: TypeInformation, values: list[Any]
) -> None:
    decoded = roundtrip(serializer_for(type_info), Batch(values))
    if type_info in [getattr(Types, name)() for name in NUMERIC]:
        assert isinstance(decoded.values, np.ndarray)
        assert decoded.values.dtype == np.dtype(type_info.numpy_dtype)  # type: ignore[attr-defined]
    else:
        assert isinstance(decoded.values, list)


@pytest.mark.parametrize(("type_info", "values"), BASIC_CASES)
def test_an_empty_batch_round_trips(type_info: TypeInformation, values: list[Any]) -> None:
    serializer = serializer_for(type_info)
    for batch in (Batch([]), Batch([], np.empty(0, np.int64))):
        frame = serializer.encode(batch)
        assert parse_header(frame).record_count == 0
        assert_same_batch(batch, decode_frame(serializer, frame))


def test_float_special_values_round_trip_bit_for_bit() -> None:
    values = [math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324]
    decoded = roundtrip(serializer_for(Types.DOUBLE()), Batch(values))
    assert isinstance(decoded.values, np.ndarray)
    assert decoded.values.tobytes() == np.array(values, dtype=np.float64).tobytes()
    floats = roundtrip(serializer_for(Types.FLOAT()), Batch(values[:5])).as_list()
    assert math.isnan(floats[0]) and floats[1:] == [math.inf, -math.inf, -0.0, 0.0]
    assert math.copysign(1.0, floats[3]) == -1.0


def test_float_rounds_to_32_bits_as_in_flink() -> None:
    (value,) = roundtrip(serializer_for(Types.FLOAT()), Batch([0.1])).as_list()
    assert value == float(np.float32(0.1)) != 0.1


def test_numpy_arrays_are_accepted_and_converted() -> None:
    cases: list[tuple[TypeInformation, np.ndarray]] = [
        (Types.LONG(), np.array([1, -2, 3], dtype=np.int32)),
        (Types.LONG(), np.array([1, 2**40], dtype=np.uint64)),
        (Types.INT(), np.array([-5, 7], dtype=np.int64)),
        (Types.BYTE(), np.array([-128, 127], dtype=np.int64)),
        (Types.DOUBLE(), np.array([1, 2], dtype=np.int16)),
        (Types.FLOAT(), np.array([1.5, math.inf], dtype=np.float64)),
        (Types.BOOLEAN(), np.array([True, False])),
        (Types.STRING(), np.array(["ab", "", "日本"])),
        (Types.CHAR(), np.array(["a", "b"])),
        (Types.LONG(), np.array([3, 4], dtype=object)),
        (Types.LONG(), np.arange(10)[::2]),
    ]
    for type_info, array in cases:
        decoded = roundtrip(serializer_for(type_info), Batch(array))
        assert decoded.as_list() == array.tolist(), type_info


def test_numpy_scalars_in_lists_are_accepted() -> None:
    values = [np.int64(1), np.int32(-2), 3]
    assert roundtrip(serializer_for(Types.LONG()), Batch(values)).as_list() == [1, -2, 3]
    assert roundtrip(serializer_for(Types.DOUBLE()), Batch([np.float32(0.5), 2])).as_list() == [0.5, 2.0]
    assert roundtrip(serializer_for(Types.BOOLEAN()), Batch([np.True_, False])).as_list() == [True, False]


def test_integers_are_accepted_for_floating_point_types() -> None:
    decoded = roundtrip(serializer_for(Types.DOUBLE()), Batch([1, 2**70, -3]))
    assert decoded.as_list() == [1.0, float(2**70), -3.0]


TUPLE_TYPE = Types.TUPLE([Types.STRING(), Types.LONG()])
MIXED_FIELDS = [
    Types.BOOLEAN(),
    Types.BYTE(),
    Types.SHORT(),
    Types.INT(),
    Types.LONG(),
    Types.FLOAT(),
    Types.DOUBLE(),
    Types.CHAR(),
    Types.STRING(),
    Types.BYTE_ARRAY(),
]
MIXED_RECORDS = [
    (True, -128, -32768, -(2**31), I64[0], 1.5, math.nan, "\U0001f600", "", b""),
    (False, 127, 32767, 2**31 - 1, I64[1], -math.inf, -0.0, "\x00", "日本語\x00", b"\x00\xff"),
    (True, 0, 0, 0, 0, 0.0, 1e308, "z", "\ud83d lone", b"bytes"),
]


@pytest.mark.parametrize("with_timestamps", [False, True], ids=["no-ts", "ts"])
def test_a_tuple_of_every_field_type_round_trips(with_timestamps: bool) -> None:
    serializer = serializer_for(Types.TUPLE(MIXED_FIELDS))
    batch = _batch(MIXED_RECORDS, with_timestamps)
    decoded = roundtrip(serializer, batch)
    assert all(type(r) is tuple for r in decoded.values)
    assert_same_batch(batch, decoded)


def test_tuple_fields_decode_to_python_scalars() -> None:
    (record,) = roundtrip(serializer_for(Types.TUPLE(MIXED_FIELDS)), Batch(MIXED_RECORDS[:1])).values
    assert [type(v) for v in record] == [bool, int, int, int, int, float, float, str, str, bytes]


def test_a_one_field_tuple_round_trips() -> None:
    serializer = serializer_for(Types.TUPLE([Types.INT()]))
    assert roundtrip(serializer, Batch([(1,), (2,)])).values == [(1,), (2,)]


def test_tuple_streams_accept_lists_rows_and_named_tuples() -> None:
    from collections import namedtuple

    Pair = namedtuple("Pair", "name count")
    decoded = roundtrip(serializer_for(TUPLE_TYPE), Batch([["a", 1], Row("b", 2), Pair("c", 3), ("d", 4)]))
    assert decoded.values == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]


def test_row_named_preserves_field_names() -> None:
    serializer = serializer_for(Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]))
    rows = [Row(id=1, name="a"), Row(id=2, name="é\U0001f600")]
    decoded = roundtrip(serializer, Batch(rows))
    assert decoded.values == rows
    assert same_records(rows, decoded.as_list())
    first = decoded.values[0]
    assert first.get_field_names() == ["id", "name"]
    assert (first.id, first["name"], first.as_dict()) == (1, "a", {"id": 1, "name": "a"})


def test_positional_rows_and_tuples_in_a_named_stream_get_the_names() -> None:
    serializer = serializer_for(Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]))
    decoded = roundtrip(serializer, Batch([Row(1, "a"), (2, "b"), [3, "c"]]))
    assert [r.as_dict() for r in decoded.values] == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "c"},
    ]


def test_row_decodes_to_rows_named_f0_f1_as_pyflink_names_them() -> None:
    serializer = serializer_for(Types.ROW([Types.LONG(), Types.STRING()]))
    decoded = roundtrip(serializer, Batch([Row(1, "a"), Row(x=2, y="b"), (3, "c")]))
    assert [r.get_field_names() for r in decoded.values] == [["f0", "f1"]] * 3
    assert [repr(r) for r in decoded.values] == [
        "Row(f0=1, f1='a')",
        "Row(f0=2, f1='b')",
        "Row(f0=3, f1='c')",
    ]


def test_row_kinds_are_preserved() -> None:
    serializer = serializer_for(Types.ROW_NAMED(["k"], [Types.INT()]))
    rows = []
    for i, kind in enumerate(RowKind):
        row = Row(k=i)
        row.set_row_kind(kind)
        rows.append(row)
    frame = serializer.encode(Batch(rows))
    assert parse_header(frame).flags & FLAG_ROW_KINDS
    decoded = decode_frame(serializer, frame)
    assert [r.get_row_kind() for r in decoded.values] == list(RowKind)
    assert same_records(rows, decoded.as_list())
    only_inserts = serializer.encode(Batch([Row(k=1)]))
    assert not parse_header(only_inserts).flags & FLAG_ROW_KINDS


def test_row_fields_may_be_none() -> None:
    fields = [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.CHAR(), Types.BYTE_ARRAY()]
    serializer = serializer_for(Types.ROW(fields))
    rows = [
        Row(None, "a", None, True, None, b"x"),
        Row(1, None, 2.5, None, "c", None),
        Row(None, None, None, None, None, None),
    ]
    decoded = roundtrip(serializer, Batch(rows))
    named = [Row(**{f"f{i}": v for i, v in enumerate(r)}) for r in rows]
    assert same_records(named, decoded.as_list())


def test_decoded_rows_are_independent() -> None:
    serializer = serializer_for(Types.ROW_NAMED(["a"], [Types.INT()]))
    first, second = roundtrip(serializer, Batch([Row(a=1), Row(a=2)])).values
    first.a = 10
    first.set_field_names(["z"])
    assert second.a == 2 and second.get_field_names() == ["a"]


def test_fields_without_a_columnar_layout_are_pickled_columns() -> None:
    type_info = Types.TUPLE(
        [
            Types.LONG(),
            Types.LIST(Types.STRING()),
            Types.MAP(Types.STRING(), Types.INT()),
            Types.ROW([Types.INT()]),
        ]
    )
    serializer = serializer_for(type_info)
    assert isinstance(serializer, ColumnarSerializer)
    assert "pickled" in serializer.describe()
    records = [(1, ["a", "b"], {"x": 1}, Row(5)), (2, [], {}, Row(6))]
    assert roundtrip(serializer, Batch(records, np.array([1, 2]))).values == records


def test_a_batch_can_be_decoded_from_bytes_and_then_its_buffer_reused() -> None:
    serializer = serializer_for(Types.TUPLE([Types.LONG(), Types.STRING(), Types.BYTE_ARRAY()]))
    frame = bytearray(serializer.encode(Batch([(1, "a", b"b"), (2, "c", b"d")], np.array([5, 6]))))
    longs = serializer_for(Types.LONG())
    long_frame = bytearray(longs.encode(Batch(np.array([7, 8]), np.array([1, 2]))))
    decoded = decode_frame(serializer, bytes(frame))
    long_header = parse_header(long_frame)
    long_batch = longs.decode(long_header, memoryview(long_frame)[HEADER_SIZE:])
    frame[:] = bytes(len(frame))
    long_frame[HEADER_SIZE:] = bytes(len(long_frame) - HEADER_SIZE)
    assert decoded.values == [(1, "a", b"b"), (2, "c", b"d")]
    assert long_batch.values.tolist() == [7, 8] and long_batch.timestamps.tolist() == [1, 2]  # type: ignore[union-attr]


def test_the_frame_header_is_as_documented() -> None:
    wide = [-(2**40), 0, 2**40]  # spans 2**32 or more: raw int64
    frame = serializer_for(Types.LONG()).encode(Batch(wide, np.array(wide)))
    magic, codec, flags, pad, count, length = struct.unpack_from("<BBBBII", frame)
    assert (magic, codec, flags, pad, count) == (MAGIC, CODEC_COLUMNAR, FLAG_TIMESTAMPS, 0, 3)
    assert length == len(frame) - HEADER_SIZE == 3 * 8 + 1 + 3 * 8
    assert frame[HEADER_SIZE + 24] == 0  # column flags: raw
    pickled = serializer_for(None).encode(Batch([1]))
    assert pickled[1] == CODEC_PICKLE


@pytest.fixture
def pack_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack columns of any length (by default only columns of PACK_MIN_VALUES values or more)."""
    monkeypatch.setattr(columns, "PACK_MIN_VALUES", 0)


def test_only_long_columns_of_many_values_travel_packed() -> None:
    longs = serializer_for(Types.LONG())
    for n, packed in [(PACK_MIN_VALUES - 1, False), (PACK_MIN_VALUES, True)]:
        values = list(range(n))
        frame = longs.encode(Batch(values, np.array(values)))
        assert bool(frame[2] & FLAG_TIMESTAMPS_PACKED) is packed
        decoded = decode_frame(longs, frame)
        assert decoded.values.tolist() == values and decoded.timestamps.tolist() == values  # type: ignore[union-attr]


@pytest.mark.usefixtures("pack_small")
def test_long_columns_and_timestamps_that_lie_close_together_travel_packed() -> None:
    longs = serializer_for(Types.LONG())
    frame = longs.encode(Batch([10, 11, 300], np.array([1000, 1001, 1002])))
    _, _, flags, _, count, length = struct.unpack_from("<BBBBII", frame)
    assert (flags, count) == (FLAG_TIMESTAMPS | FLAG_TIMESTAMPS_PACKED, 3)
    payload = frame[HEADER_SIZE:]
    # timestamps: width 1, base 1000, differences 0 1 2; column flags COLUMN_PACKED; the
    # column: width 2 (300 - 10 needs two bytes), base 10, differences 0 1 290
    assert payload == (
        struct.pack("<Bq3B", 1, 1000, 0, 1, 2)
        + bytes([COLUMN_PACKED])
        + struct.pack("<Bq3H", 2, 10, 0, 1, 290)
    )
    assert length == len(payload) == 12 + 1 + 15
    decoded = decode_frame(longs, frame)
    assert decoded.values.tolist() == [10, 11, 300] and decoded.timestamps.tolist() == [1000, 1001, 1002]  # type: ignore[union-attr]


@pytest.mark.usefixtures("pack_small")
@pytest.mark.parametrize(
    ("values", "width"),
    [
        ([5, 5 + 255] * 3, 1),
        ([5, 5 + 256] * 3, 2),
        ([-(2**63), -(2**63) + 2**16 - 1] * 3, 2),
        ([2**63 - 2**16, 2**63 - 1] * 3, 2),
        ([2**63 - 2**16 - 1, 2**63 - 1] * 3, 4),
        ([0, 2**32 - 1] * 3, 4),
        ([0, 2**32] * 3, None),
        ([-(2**63), 2**63 - 1] * 3, None),
        ([7, 8], None),  # two values: the 9 bytes of width and base would cost more than they save
    ],
)
def test_a_long_column_packs_to_the_narrowest_width_that_holds_its_span(
    values: list[int], width: int | None
) -> None:
    longs = serializer_for(Types.LONG())
    frame = longs.encode(Batch(values))
    flags = frame[HEADER_SIZE]
    if width is None:
        assert flags == 0 and len(frame) == HEADER_SIZE + 1 + 8 * len(values)
    else:
        assert flags == COLUMN_PACKED and frame[HEADER_SIZE + 1] == width
        assert len(frame) == HEADER_SIZE + 1 + 9 + width * len(values)
    assert decode_frame(longs, frame).values.tolist() == values


@pytest.mark.usefixtures("pack_small")
def test_a_packed_column_of_a_bad_width_is_a_protocol_violation() -> None:
    longs = serializer_for(Types.LONG())
    frame = bytearray(longs.encode(Batch([1, 2, 3, 4])))
    assert frame[HEADER_SIZE] == COLUMN_PACKED
    frame[HEADER_SIZE + 1] = 3
    with pytest.raises(ProtocolViolation, match="packed 3 bytes per value; packed widths are 1, 2 and 4"):
        decode_frame(longs, bytes(frame))
    frame = bytearray(longs.encode(Batch([1, 2, 3, 4], np.array([5, 6, 7, 8]))))
    frame[2] = FLAG_TIMESTAMPS_PACKED  # packed timestamps, but no timestamp column
    with pytest.raises(ProtocolViolation, match="pack a timestamp column the frame does not have"):
        decode_frame(longs, bytes(frame))


def test_strings_are_one_utf8_blob_split_by_nul() -> None:
    frame = serializer_for(Types.STRING()).encode(Batch(["ab", "é", ""]))
    payload = frame[HEADER_SIZE:]
    assert payload == b"\x00" + struct.pack("<I", 6) + b"ab\x00\xc3\xa9\x00"


# -- pickle fallback -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "type_info",
    [
        None,
        Types.PICKLED_BYTE_ARRAY(),
        Types.LIST(Types.LONG()),
        Types.MAP(Types.STRING(), Types.LONG()),
        Types.BASIC_ARRAY(Types.INT()),
        Types.PRIMITIVE_ARRAY(Types.LONG()),
        Types.ROW([]),
    ],
    ids=repr,
)
def test_types_without_a_columnar_layout_fall_back_to_pickle(type_info: TypeInformation | None) -> None:
    serializer = serializer_for(type_info)
    assert isinstance(serializer, PickleSerializer)
    assert serializer.describe().startswith("pickle")


def test_pickled_batches_round_trip_any_values() -> None:
    serializer = serializer_for(None)
    values = [1, "a", (2, [3]), {"k": Row(a=1)}, None, math.inf, b"x", 2**100]
    for batch in (Batch(values), Batch(values, np.arange(len(values)))):
        assert_same_batch(batch, roundtrip(serializer, batch))


def test_pickled_numpy_batches_stay_arrays_and_do_not_alias_the_payload() -> None:
    serializer = serializer_for(None)
    frame = bytearray(serializer.encode(Batch(np.arange(5, dtype=np.int16), np.arange(5))))
    decoded = serializer.decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:])
    frame[HEADER_SIZE:] = b"\xff" * (len(frame) - HEADER_SIZE)
    assert isinstance(decoded.values, np.ndarray) and decoded.values.dtype == np.int16
    assert decoded.values.tolist() == [0, 1, 2, 3, 4]
    assert decoded.timestamps is not None and decoded.timestamps.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("type_info", "values"),
    [
        (Types.LONG(), np.arange(5)),
        (Types.DOUBLE(), np.arange(5.0)),
        (Types.TUPLE([Types.INT(), Types.LONG()]), [(i, -i) for i in range(5)]),
    ],
)
def test_columnar_batches_do_not_alias_the_payload_and_are_aligned(
    type_info: TypeInformation, values: Any
) -> None:
    # the value column starts one byte after the timestamps (its flag byte): unaligned in the frame
    serializer = serializer_for(type_info)
    frame = bytearray(serializer.encode(Batch(values, np.arange(5))))
    decoded = serializer.decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:])
    frame[HEADER_SIZE:] = b"\xff" * (len(frame) - HEADER_SIZE)
    assert decoded.timestamps is not None and decoded.timestamps.tolist() == [0, 1, 2, 3, 4]
    assert decoded.timestamps.flags.aligned and decoded.timestamps.flags.writeable
    if isinstance(decoded.values, np.ndarray):
        assert decoded.values.tolist() == [0, 1, 2, 3, 4]
        assert decoded.values.flags.aligned and decoded.values.flags.writeable
    else:
        assert decoded.values == values


def test_an_unpicklable_record_is_named() -> None:
    with pytest.raises(
        UsageError, match=r"record 1 cannot be sent on a stream of pickled values: got <function"
    ):
        serializer_for(None).encode(Batch([1, lambda: 2]))


def test_serializers_are_shared_per_type() -> None:
    assert serializer_for(Types.LONG()) is serializer_for(Types.LONG())
    assert serializer_for(TUPLE_TYPE) is serializer_for(Types.TUPLE([Types.STRING(), Types.LONG()]))


def test_serializer_for_rejects_what_is_not_type_information() -> None:
    with pytest.raises(UsageError, match=r"serializer_for needs a TypeInformation such as Types.LONG\(\)"):
        serializer_for(Types.LONG)  # type: ignore[arg-type]


def test_describe_names_the_layout() -> None:
    assert serializer_for(TUPLE_TYPE).describe() == (
        "typed columnar Types.TUPLE([Types.STRING(), Types.LONG()]): "
        "[Types.STRING() as a UTF-8 blob, Types.LONG() as <i8]"
    )
    assert serializer_for(None).describe() == "pickle (untyped stream)"


# -- errors for values that do not fit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_info", "values", "message"),
    [
        (Types.LONG(), [1, 2, 3, "abc"], "record 3 does not match Types.LONG(): got 'abc' (str)"),
        (Types.LONG(), [1, 2.5], "record 1 does not match Types.LONG(): got 2.5 (float)"),
        (Types.LONG(), [True], "record 0 does not match Types.LONG(): got True (bool)"),
        (Types.LONG(), [None], "record 0 does not match Types.LONG(): got None (NoneType)"),
        (
            Types.LONG(),
            [0, 2**63],
            "record 1 does not match Types.LONG(): got 9223372036854775808 (int), "
            "outside the range -9223372036854775808..9223372036854775807",
        ),
        (
            Types.INT(),
            [2**31],
            "record 0 does not match Types.INT(): got 2147483648 (int), outside the range -2147483648..2147483647",
        ),
        (
            Types.BYTE(),
            [1, -129],
            "record 1 does not match Types.BYTE(): got -129 (int), outside the range -128..127",
        ),
        (
            Types.SHORT(),
            [32768],
            "record 0 does not match Types.SHORT(): got 32768 (int), outside the range -32768..32767",
        ),
        (
            Types.FLOAT(),
            [1.0, 1e39],
            "record 1 does not match Types.FLOAT(): got 1e+39 (float), outside the range of a 32-bit float",
        ),
        (Types.DOUBLE(), [1.0, "2"], "record 1 does not match Types.DOUBLE(): got '2' (str)"),
        (
            Types.DOUBLE(),
            [10**400],
            "record 0 does not match Types.DOUBLE(): got 1000000000000",
        ),
        (Types.BOOLEAN(), [True, 1], "record 1 does not match Types.BOOLEAN(): got 1 (int)"),
        (
            Types.CHAR(),
            ["a", "bc"],
            "record 1 does not match Types.CHAR(): got 'bc' (str), expected a string of exactly one character",
        ),
        (Types.CHAR(), [b"a"], "record 0 does not match Types.CHAR(): got b'a' (bytes)"),
        (Types.STRING(), ["a", b"b"], "record 1 does not match Types.STRING(): got b'b' (bytes)"),
        (Types.STRING(), ["a", None], "record 1 does not match Types.STRING(): got None (NoneType)"),
        (
            Types.BYTE_ARRAY(),
            [b"", "s"],
            "record 1 does not match Types.PRIMITIVE_ARRAY(Types.BYTE()): got 's' (str), expected bytes",
        ),
        (
            TUPLE_TYPE,
            [("a", 1), ("b", "x")],
            "record 1 does not match Types.TUPLE([Types.STRING(), Types.LONG()]): field 1 got 'x' (str), "
            "expected Types.LONG(); the record is ('b', 'x') (tuple)",
        ),
        (
            TUPLE_TYPE,
            [("a", 1), ("b", 2, 3)],
            "record 1 does not match Types.TUPLE([Types.STRING(), Types.LONG()]): "
            "got ('b', 2, 3) (tuple) with 3 fields, expected 2",
        ),
        (
            TUPLE_TYPE,
            [("a", 1), 5],
            "record 1 does not match Types.TUPLE([Types.STRING(), Types.LONG()]): "
            "got 5 (int), expected a tuple, list or Row of 2 fields",
        ),
        (
            TUPLE_TYPE,
            ["ab"],
            "record 0 does not match Types.TUPLE([Types.STRING(), Types.LONG()]): "
            "got 'ab' (str), expected a tuple, list or Row of 2 fields",
        ),
        (
            TUPLE_TYPE,
            [(None, 1)],
            "record 0 does not match Types.TUPLE([Types.STRING(), Types.LONG()]): field 0 got None (NoneType)",
        ),
        (
            Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]),
            [Row(id=1, name="a"), Row(id="x", name="b")],
            "record 1 does not match Types.ROW_NAMED(['id', 'name'], [Types.LONG(), Types.STRING()]): "
            "field 0 ('id') got 'x' (str), expected Types.LONG(); the record is Row(id='x', name='b') (Row)",
        ),
        (
            Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]),
            [Row(name="a", id=1)],
            "record 0 does not match Types.ROW_NAMED(['id', 'name'], [Types.LONG(), Types.STRING()]): "
            "its field names ['name', 'id'] differ from the declared ['id', 'name']",
        ),
        (
            Types.ROW([Types.INT()]),
            [Row(1), Row(1, 2)],
            "record 1 does not match Types.ROW([Types.INT()]): got <Row(1, 2)> (Row) with 2 fields, expected 1",
        ),
        (
            Types.LONG(),
            np.array([1.5, 2.0]),
            "record 0 does not match Types.LONG(): got 1.5 (float) in a numpy array of dtype float64",
        ),
        (
            Types.INT(),
            np.array([True]),
            "record 0 does not match Types.INT(): got True (bool) in a numpy array of dtype bool",
        ),
        (
            Types.INT(),
            np.array([1, 2**40]),
            "record 1 does not match Types.INT(): got 1099511627776 (int), outside the range",
        ),
        (
            Types.LONG(),
            np.array([2**64 - 1], dtype=np.uint64),
            "record 0 does not match Types.LONG(): got 18446744073709551615 (int), outside the range",
        ),
    ],
)
def test_a_value_that_does_not_fit_the_type_is_named(
    type_info: TypeInformation, values: Any, message: str
) -> None:
    serializer = serializer_for(type_info)
    with pytest.raises(UsageError, match=re.escape(message)):
        serializer.encode(Batch(values))
    channels = np.zeros(len(values), np.int32)
    with pytest.raises(UsageError, match=re.escape(message)):
        serializer.encode_partitioned(Batch(values), channels, 2)


# -- partitioning ----------------------------------------------------------------------------------


def _routed(values: list[Any], channels: np.ndarray, c: int) -> list[Any]:
    return [v for v, ch in zip(values, channels.tolist()) if ch == c]


@pytest.mark.parametrize(
    ("type_info", "values"),
    [
        *BASIC_CASES,
        pytest.param(Types.TUPLE(MIXED_FIELDS), MIXED_RECORDS * 3, id="TUPLE"),
        pytest.param(
            Types.TUPLE([Types.LIST(Types.INT()), Types.STRING()]),
            [([i], str(i)) for i in range(9)],
            id="pickled-column",
        ),
        pytest.param(None, [1, "x", (2,), None, [3]], id="pickle"),
    ],
)
def test_encode_partitioned_gives_each_channel_its_records_in_order(
    type_info: TypeInformation | None, values: list[Any], encode_path: str
) -> None:
    serializer = serializer_for(type_info)
    num_channels = 4
    channels = (np.arange(len(values), dtype=np.int32) * 7 + 3) % 3  # channel 3 stays empty
    ts = np.arange(len(values), dtype=np.int64) + 100
    frames = serializer.encode_partitioned(Batch(values, ts), channels, num_channels)
    assert len(frames) == num_channels
    assert frames[3] is None
    for c, frame in enumerate(frames[:3]):
        expected = _routed(values, channels, c)
        if not expected:
            assert frame is None
            continue
        assert frame is not None
        decoded = decode_frame(serializer, frame)
        assert same_records(expected, decoded.as_list())
        assert decoded.timestamps is not None
        assert decoded.timestamps.tolist() == _routed(ts.tolist(), channels, c)


def test_a_single_channel_frame_equals_the_unpartitioned_frame(encode_path: str) -> None:
    cases: list[tuple[TypeInformation, list[Any]]] = [
        (Types.LONG(), [1, 2, 3]),
        (TUPLE_TYPE, [("a", 1), ("b", 2)]),
    ]
    for type_info, values in cases:
        serializer = serializer_for(type_info)
        batch = Batch(values, np.array([4, 5, 6][: len(values)]))
        assert serializer.encode_partitioned(batch, np.zeros(len(values), np.int32), 1) == [
            serializer.encode(batch)
        ]


def test_encode_partitioned_of_rows_keeps_names_kinds_and_nulls(encode_path: str) -> None:
    serializer = serializer_for(Types.ROW_NAMED(["id", "tag"], [Types.LONG(), Types.STRING()]))
    rows = [Row(id=i, tag=None if i % 3 == 0 else f"t{i}") for i in range(10)]
    rows[4].set_row_kind(RowKind.UPDATE_AFTER)
    channels = np.array([i % 2 for i in range(10)], dtype=np.int32)
    frames = serializer.encode_partitioned(Batch(rows), channels, 2)
    for c, frame in enumerate(frames):
        assert frame is not None
        assert same_records(_routed(rows, channels, c), decode_frame(serializer, frame).as_list())


def test_strings_with_nul_are_partitioned_with_the_lengths_layout() -> None:
    serializer = serializer_for(Types.STRING())
    values = ["a\x00", "", "\x00\x00", "日\x00本", "x"]
    channels = np.array([1, 0, 1, 0, 1], dtype=np.int32)
    frames = serializer.encode_partitioned(Batch(values), channels, 2)
    assert [decode_frame(serializer, f).values for f in frames if f is not None] == [
        ["", "日\x00本"],
        ["a\x00", "\x00\x00", "x"],
    ]


def test_encode_partitioned_of_an_empty_batch_has_no_frames() -> None:
    for type_info in (Types.LONG(), TUPLE_TYPE, None):
        assert serializer_for(type_info).encode_partitioned(Batch([]), np.empty(0, np.int32), 3) == [None] * 3


def test_encode_partitioned_accepts_any_integer_channel_array() -> None:
    serializer = serializer_for(Types.LONG())
    for dtype in (np.int8, np.uint16, np.int64):
        frames = serializer.encode_partitioned(Batch([1, 2]), np.array([1, 0], dtype=dtype), 2)
        assert [decode_frame(serializer, f).as_list() for f in frames if f is not None] == [[2], [1]]


@pytest.mark.parametrize(
    ("channels", "num_channels", "message"),
    [
        (np.array([0, 4], np.int32), 4, "record 1 is routed to channel 4, outside 0..3 (4 channels)"),
        (np.array([-1, 0], np.int32), 2, "record 0 is routed to channel -1, outside 0..1 (2 channels)"),
        (np.array([0], np.int32), 2, "channels has 1 entries for a batch of 2 records"),
        (np.array([0.0, 1.0]), 2, "channels must be a one-dimensional integer array"),
        (np.array([0, 0], np.int32), 0, "num_channels must be a positive int, got 0"),
    ],
)
def test_bad_channels_are_usage_errors(channels: np.ndarray, num_channels: int, message: str) -> None:
    for serializer in (serializer_for(Types.LONG()), serializer_for(None)):
        with pytest.raises(UsageError, match=re.escape(message)):
            serializer.encode_partitioned(Batch([1, 2]), channels, num_channels)


# -- decoding errors -------------------------------------------------------------------------------


def _corrupt(frame: bytes, at: int, value: bytes) -> tuple[Any, memoryview]:
    data = bytearray(frame)
    data[at : at + len(value)] = value
    return parse_header(bytes(data)), memoryview(bytes(data))[HEADER_SIZE:]


def test_inconsistent_payloads_are_protocol_violations() -> None:
    strings = serializer_for(Types.STRING())
    frame = strings.encode(Batch(["ab", "c"]))
    header, payload = _corrupt(frame, HEADER_SIZE + 1, struct.pack("<I", 99))
    with pytest.raises(ProtocolViolation, match="ends inside a STRING column"):
        strings.decode(header, payload)
    header, payload = _corrupt(frame, HEADER_SIZE + 7, b"x")  # the separator
    with pytest.raises(ProtocolViolation, match="holds 1 strings, the frame header says 2 records"):
        strings.decode(header, payload)
    header, payload = _corrupt(frame, HEADER_SIZE + 5, b"\xff")
    with pytest.raises(ProtocolViolation, match="is not valid UTF-8"):
        strings.decode(header, payload)
    header, payload = _corrupt(frame, HEADER_SIZE, b"\x04")
    with pytest.raises(
        ProtocolViolation, match=r"column 0 of Types.STRING\(\) has flags 0x04; allowed are 0x02"
    ):
        strings.decode(header, payload)
    longs = serializer_for(Types.LONG())
    frame = longs.encode(Batch([1, 2]))
    with pytest.raises(ProtocolViolation, match="frame payload has 16 bytes, its header announces 17"):
        longs.decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:-1])
    header = parse_header(frame)._replace(record_count=1, payload_length=17)
    with pytest.raises(ProtocolViolation, match="has 8 bytes after its last column"):
        longs.decode(header, memoryview(frame)[HEADER_SIZE:])
    with pytest.raises(
        ProtocolViolation, match=re.escape("codec 1 (typed columnar) cannot be decoded by the pickle")
    ):
        serializer_for(None).decode(parse_header(frame), memoryview(frame)[HEADER_SIZE:])
    pickled = serializer_for(None).encode(Batch([1]))
    header, payload = _corrupt(pickled, HEADER_SIZE + 2, b"\xff\xff")
    with pytest.raises(ProtocolViolation, match="a pickled batch cannot be unpickled"):
        serializer_for(None).decode(header, payload)


def test_check_header_rejects_record_counts_the_payload_cannot_hold() -> None:
    longs = serializer_for(Types.LONG())
    header = parse_header(longs.encode(Batch([1, 2])))
    longs.check_header(header)
    with pytest.raises(  # a LONG column may be packed to a byte per record
        ProtocolViolation, match="18 records need at least 1 byte each, but the payload length is 17"
    ):
        longs.check_header(header._replace(record_count=18))
    doubles = serializer_for(Types.DOUBLE())
    with pytest.raises(
        ProtocolViolation, match="3 records need at least 8 bytes each, but the payload length is 17"
    ):
        doubles.check_header(parse_header(doubles.encode(Batch([1.0, 2.0])))._replace(record_count=3))
    with pytest.raises(ProtocolViolation, match=r"row-kind flag set on a stream of Types.LONG\(\)"):
        longs.check_header(header._replace(flags=FLAG_ROW_KINDS))
    with pytest.raises(
        ProtocolViolation, match=re.escape("codec 0 (pickle), but this channel carries typed columnar")
    ):
        longs.check_header(header._replace(codec=CODEC_PICKLE))


@pytest.mark.parametrize("records", [10, 5_000])  # the small-batch path and the one-pass path
def test_a_bad_record_in_a_partitioned_batch_is_named_by_its_place_in_the_batch(records: int) -> None:
    serializer = serializer_for(Types.TUPLE([Types.STRING(), Types.INT()]))
    values: list[Any] = [(f"k{i}", i) for i in range(records)]
    values[7] = ("k7", 2**40)
    channels = np.array([i % 2 for i in range(records)], dtype=np.int32)
    with pytest.raises(
        UsageError, match=r"record 7 does not match .*field 1 got 1099511627776 \(int\), outside the range"
    ):
        serializer.encode_partitioned(Batch(values), channels, 2)
