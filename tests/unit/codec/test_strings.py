"""``Strings``: a column of strings as UTF-8 bytes, read as a sequence of str."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from weir.codec.batch import Batch, TupleColumns
from weir.codec.serializers import serializer_for
from weir.codec.strings import Strings
from weir.common import Types
from weir.keys.reference import java_hash

from .records import decode_frame

VALUES = ["key-1", "", "héllo", "😀x", "\ud800a", "z"]


def test_strings_read_as_the_list_they_hold() -> None:
    s = Strings.from_list(VALUES)
    assert len(s) == len(VALUES)
    assert list(s) == VALUES and s.tolist() == VALUES
    assert [s[i] for i in range(len(s))] == VALUES
    assert s[-1] == "z"
    assert s == VALUES and s == tuple(VALUES) and s != VALUES[:-1]
    assert s[1:4] == VALUES[1:4] and isinstance(s[1:4], Strings)
    assert s.take(np.array([4, 0, 0])) == [VALUES[4], VALUES[0], VALUES[0]]
    assert np.asarray(s).tolist() == VALUES


def test_values_are_built_from_the_bytes_when_first_read() -> None:
    fresh = Strings.from_list(VALUES)
    built = Strings(fresh.data, fresh.starts, fresh.ends)  # the bytes only
    assert built._list is None
    assert built[2] == "héllo" and built._list is None  # one value: no list
    assert built.tolist() == VALUES
    assert built.take(np.array([3, 2])).tolist() == ["😀x", "héllo"]


def test_a_value_holding_nul_is_read_value_by_value() -> None:
    values = ["a\x00b", "", "c"]
    s = Strings.from_list(values)
    assert not s.has_no_nul()
    assert Strings(s.data, s.starts, s.ends).tolist() == values
    assert Strings.from_list(["a", "b"]).has_no_nul()


def test_java_hashes_are_string_hash_code() -> None:
    s = Strings.from_list(VALUES)
    assert s.java_hashes().tolist() == [java_hash(v) for v in VALUES]
    assert s.take(np.array([2, 1])).java_hashes().tolist() == [java_hash("héllo"), java_hash("")]


def test_from_arrow_shares_the_bytes_of_a_sliced_array() -> None:
    array = pa.array(["x", "yy", "zzz", "w"]).slice(1, 2)
    s = Strings.from_arrow(array)
    assert s is not None and s.tolist() == ["yy", "zzz"]
    assert Strings.from_arrow(pa.array(["x", None])) is None  # nulls stay Python values
    assert Strings.from_arrow(pa.array([1, 2])) is None
    large = Strings.from_arrow(pa.array(["p", "q"], pa.large_string()))
    assert large is not None and large.tolist() == ["p", "q"]


def test_to_arrow_gives_the_values() -> None:
    s = Strings.from_list(["a", "bé", "c"])
    assert s[1:].to_arrow().to_pylist() == ["bé", "c"]
    assert s.take(np.array([2, 0])).to_arrow().to_pylist() == ["c", "a"]
    with pytest.raises(UnicodeEncodeError):  # Arrow holds strict UTF-8, as with a list
        Strings.from_list(["\ud800"]).to_arrow()


def test_tuple_columns_of_strings_pick_and_read_records() -> None:
    columns = TupleColumns([Strings.from_list(["a", "b", "c"]), np.array([1, 2, 3])])
    assert columns.records() == [("a", 1), ("b", 2), ("c", 3)]
    picked = columns.take(np.array([2, 0]))
    assert isinstance(picked.columns[0], Strings)
    assert picked.records() == [("c", 3), ("a", 1)]
    assert Batch(columns).take(np.array([1])).as_list() == [("b", 2)]


@pytest.mark.parametrize("split_per_channel", [False, True])
def test_a_strings_column_encodes_to_the_frames_of_its_list(
    split_per_channel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from weir.codec import serializers

    monkeypatch.setattr(serializers, "SPLIT_ENCODE_RECORDS_PER_CHANNEL", 1 << 30 if split_per_channel else 0)
    serializer = serializer_for(Types.TUPLE([Types.STRING(), Types.LONG()]))
    keys = [f"k{i % 37}é" for i in range(3000)]
    numbers = np.arange(3000, dtype=np.int64)
    channels = (np.arange(3000) * 7 % 3).astype(np.int32)
    as_list = serializer.encode_partitioned(Batch(TupleColumns([keys, numbers])), channels, 3)
    as_bytes = serializer.encode_partitioned(
        Batch(TupleColumns([Strings.from_list(keys), numbers])), channels, 3
    )
    assert as_bytes == as_list
    assert serializer.encode(Batch(TupleColumns([Strings.from_list(keys), numbers]))) == serializer.encode(
        Batch(TupleColumns([keys, numbers]))
    )
    frame = as_list[1]
    assert frame is not None
    decoded = decode_frame(serializer, frame)
    assert decoded.as_list() == [
        (k, n) for k, n, c in zip(keys, numbers.tolist(), channels.tolist()) if c == 1
    ]


def test_a_frame_whose_strings_miscount_is_a_protocol_violation() -> None:
    from weir.errors import ProtocolViolation

    serializer = serializer_for(Types.TUPLE([Types.STRING(), Types.LONG()]))
    frame = bytearray(serializer.encode(Batch([(f"k{i}", i) for i in range(2000)])))
    at = frame.index(b"k5\x00") + 2
    frame[at] = ord("x")  # one separator less: 1999 strings for 2000 records
    with pytest.raises(ProtocolViolation, match="strings, the frame header says 2000"):
        decode_frame(serializer, bytes(frame))
