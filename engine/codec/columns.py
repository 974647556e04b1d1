"""Column codecs: one column of a batch to and from bytes, for the typed columnar frames.

A column codec turns the values of one field (a list, a tuple or a numpy array)
into wire bytes in three steps:

* ``prepare`` checks every value against the declared type and converts the
  column once (to a little-endian numpy array, or to one UTF-8 blob); a value
  that does not fit raises ``Mismatch`` with its position, which the serializer
  turns into a ``UsageError`` naming the record.
* ``Prepared.parts`` gives the column body for a single frame, as buffers to join.
* ``Prepared.plan`` lays the column out for a partitioned batch: the body size in
  every channel's frame, and ``write``, which copies each record's bytes straight
  to its channel's frame with one numba kernel call (``weir.codec.kernels``).

``decode`` reads a column body back from a frame payload (a memoryview into a
network buffer): what it returns never aliases the payload, because the buffer
is recycled once the frame is read.

Column bodies (all integers little endian):

* fixed width (BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, CHAR): ``n`` raw
  values. CHAR is a one-character ``str`` carried as its uint32 code point (not a
  UTF-16 code unit, so astral characters and lone surrogates survive).
* LONG, packed (column flag ``COLUMN_PACKED``; also the timestamp column, see
  ``weir.codec.frame``): ``u8 width`` (1, 2 or 4), ``i64 base`` (the smallest
  value), then ``n`` unsigned ``width``-byte differences ``value - base``. Written
  when the batch's values span less than 2**32 and packing saves bytes: keys,
  ids, counters and event times usually do, and a LONG column of 4,096 such values
  shrinks from 32 KiB to 8 KiB or less (fewer network buffers, fewer copies).
* STRING, NUL-separated layout: ``u32 blob length``, then the strings joined by
  0x00 and encoded once as UTF-8 (``surrogatepass``, so lone surrogates survive).
  The reader decodes the blob once and splits it. Used whenever no string of the
  column contains U+0000.
* STRING, lengths layout (column flag ``COLUMN_STRING_LENGTHS``): ``n × u32``
  lengths in code points, ``u32 blob length``, the concatenated UTF-8 blob; the
  reader decodes once and slices.
* BYTE_ARRAY (``bytes``): ``n × u32`` lengths, then the concatenated bytes.
* BIG_INT, BIG_DEC, SQL_DATE, SQL_TIME, SQL_TIMESTAMP, INSTANT: as a STRING column of their
  text (``str(int)``, ``str(Decimal)``, ISO 8601, ``seconds.nanos``), read back with the
  type's parser.
* pickled (a field of any other type, e.g. LIST, MAP, BASIC_ARRAY, a nested ROW):
  ``u32 length`` and ``pickle.dumps(list_of_values, protocol=5)``.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime
import decimal
import pickle
import reprlib
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from weir.codec import kernels
from weir.codec.strings import Strings
from weir.common.time import Instant
from weir.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    Types,
)
from weir.errors import ProtocolViolation

__all__ = [
    "COLUMN_NULLS",
    "COLUMN_PACKED",
    "COLUMN_STRING_LENGTHS",
    "BytesColumn",
    "ColumnCodec",
    "ColumnPlan",
    "FixedColumn",
    "Mismatch",
    "PickledColumn",
    "Prepared",
    "StringColumn",
    "TextColumn",
    "column_for",
    "copy_out",
    "describe_value",
    "fixed_plan",
    "pack_int64",
    "prepare_int64",
    "read_fixed",
    "read_packed",
    "type_expr",
]

#: Column flag: a null mask (``n`` bytes, 1 = None) precedes the body (ROW fields only).
COLUMN_NULLS = 0x01
#: Column flag: a STRING column uses the lengths layout instead of NUL separators.
COLUMN_STRING_LENGTHS = 0x02
#: Column flag: a LONG column is packed (width, base, differences).
COLUMN_PACKED = 0x04

Int64Array = npt.NDArray[np.int64]
ByteArray = npt.NDArray[np.uint8]
Values = Sequence[Any] | np.ndarray
#: bytes-like: a part of a payload (numpy arrays export their buffer).
Buffer = Any

_U32 = np.dtype("<u4")
_U32_MAX = (1 << 32) - 1

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 60


def describe_value(value: object) -> str:
    """``'abc' (str)``: a short repr of the value and its type, for error messages."""
    return f"{_repr.repr(value)} ({type(value).__name__})"


_BASIC_NAMES = {
    "String": "STRING",
    "Byte": "BYTE",
    "Boolean": "BOOLEAN",
    "Short": "SHORT",
    "Integer": "INT",
    "Long": "LONG",
    "Float": "FLOAT",
    "Double": "DOUBLE",
    "Character": "CHAR",
    "BigInteger": "BIG_INT",
    "BigDecimal": "BIG_DEC",
    "SqlDate": "SQL_DATE",
    "SqlTime": "SQL_TIME",
    "SqlTimestamp": "SQL_TIMESTAMP",
    "Instant": "INSTANT",
}


def type_expr(type_info: TypeInformation | None) -> str:
    """The ``Types`` expression that builds ``type_info``, e.g. ``Types.TUPLE([Types.STRING(), Types.LONG()])``."""
    if type_info is None:
        return "no type information (pickled)"
    if isinstance(type_info, BasicTypeInfo) and type_info.name in _BASIC_NAMES:
        return f"Types.{_BASIC_NAMES[type_info.name]}()"
    if isinstance(type_info, PickledBytesTypeInfo):
        return "Types.PICKLED_BYTE_ARRAY()"
    if isinstance(type_info, PrimitiveArrayTypeInfo):
        return f"Types.PRIMITIVE_ARRAY({type_expr(type_info.element_type)})"
    if isinstance(type_info, BasicArrayTypeInfo):
        return f"Types.BASIC_ARRAY({type_expr(type_info.element_type)})"
    if isinstance(type_info, ObjectArrayTypeInfo):
        return f"Types.OBJECT_ARRAY({type_expr(type_info.element_type)})"
    if isinstance(type_info, ListTypeInfo):
        return f"Types.LIST({type_expr(type_info.element_type)})"
    if isinstance(type_info, MapTypeInfo):
        return f"Types.MAP({type_expr(type_info.key_type)}, {type_expr(type_info.value_type)})"
    if isinstance(type_info, TupleTypeInfo):
        return "Types.TUPLE([" + ", ".join(type_expr(t) for t in type_info.field_types) + "])"
    if isinstance(type_info, RowTypeInfo):
        fields = "[" + ", ".join(type_expr(t) for t in type_info.field_types) + "]"
        if type_info.field_names == [f"f{i}" for i in range(len(type_info.field_types))]:
            return f"Types.ROW({fields})"
        return f"Types.ROW_NAMED({type_info.field_names!r}, {fields})"
    return repr(type_info)


class Mismatch(Exception):
    """Value ``index`` of a column does not fit the column's type; ``detail`` says how."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(f"value {index}: {detail}")
        self.index = index
        self.detail = detail


def _first(values: Sequence[Any] | np.ndarray, bad: Callable[[Any], bool]) -> int:
    for i, v in enumerate(values):
        if bad(v):
            return i
    raise AssertionError("no offending value found")  # pragma: no cover - callers know one exists


def _first_of_type(values: Sequence[Any] | np.ndarray, t: type) -> int:
    return _first(values, lambda v: type(v) is t)


def _check_classes(values: Values, classes: Any, expected: str) -> None:
    """Raise ``Mismatch`` for the first value that is not an instance of ``classes``."""
    for t in set(map(type, values)):
        if not issubclass(t, classes):
            i = _first_of_type(values, t)
            raise Mismatch(i, f"got {describe_value(values[i])}{expected}")


def _need(payload: memoryview, pos: int, size: int, what: str) -> None:
    if size < 0 or pos + size > len(payload):
        raise ProtocolViolation(
            f"frame payload of {len(payload)} bytes ends inside {what}: needs bytes {pos}..{pos + size}"
        )


def read_fixed(
    payload: memoryview, pos: int, n: int, dtype: np.dtype[Any], what: str
) -> tuple[np.ndarray, int]:
    """``n`` values of ``dtype`` at ``payload[pos:]``, as a view of the payload (copy it before keeping it)."""
    size = n * dtype.itemsize
    _need(payload, pos, size, what)
    return np.frombuffer(payload, dtype=dtype, count=n, offset=pos), pos + size


def copy_out(raw: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """A fresh, aligned copy (as ``dtype``) of a fixed-width column read from a payload.

    The payload sits at any offset of a network buffer that is reused, so a decoded column
    is copied out once: numpy's copy (a memcpy, about 1.4 us for 32 KiB) rather than a
    compiled byte loop, which measured 12x slower on unaligned columns. A column that owns
    its memory (an unpacked one: never a view of the payload) is already that copy."""
    if raw.flags.owndata and raw.dtype == dtype:
        return raw
    return np.array(raw, dtype=dtype, copy=True)


# -- packed int64 ----------------------------------------------------------------------------------

_PACK_PREFIX = struct.Struct("<Bq")  # width, base
#: Bytes before a packed column's differences.
PACK_PREFIX_BYTES = _PACK_PREFIX.size
_PACK_DTYPES: dict[int, np.dtype[Any]] = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}
#: Columns shorter than this travel raw: a small frame is flushed by the buffer timeout long
#: before it could fill a buffer, so its bytes cost next to nothing, while packing and
#: unpacking cost a few microseconds per column (a third of a small batch's codec time),
#: and raw batches of plain tuples take the ``struct`` path (``weir.codec.small``). Open-loop
#: sources at half the maximum rate emit batches of 500-1,000 rows and catch-up batches of
#: 1,024: raw, a (STRING, LONG, LONG, LONG) batch of 700 rows to two channels encodes in 300
#: instead of 424 ns a record and decodes in 146 instead of 208 (packed), for 40 bytes a
#: record instead of 15. Throughput batches
#: (4,096 rows) are still packed: there the bytes decide (a packed 4,096-row LONG batch
#: with timestamps is one buffer instead of three).
PACK_MIN_VALUES = 2_048


def pack_int64(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """An int64 column packed: ``(differences, base)``, the differences in the narrowest of
    1, 2 or 4 unsigned bytes that holds ``value - base`` for every value (``base`` is the
    smallest). None when the column is shorter than ``PACK_MIN_VALUES`` (read at each call;
    at least 3: below, the width and base cost more than a byte per value saves), or its
    values span 2**32 or more."""
    n = len(values)
    if n < max(PACK_MIN_VALUES, 3):
        return None
    lo, hi = kernels.int_range(values)
    span = int(hi) - int(lo)
    width = 1 if span < 1 << 8 else 2 if span < 1 << 16 else 4 if span < 1 << 32 else 0
    if not width:
        return None
    deltas = np.empty(n, _PACK_DTYPES[width])
    kernels.pack_deltas(values, lo, deltas)
    return deltas, int(lo)


def pack_prefix(deltas: np.ndarray, base: int) -> bytes:
    return _PACK_PREFIX.pack(deltas.dtype.itemsize, base)


def read_packed(payload: memoryview, pos: int, n: int, what: str) -> tuple[np.ndarray, int]:
    """A packed int64 column at ``payload[pos:]``, unpacked into a fresh array."""
    _need(payload, pos, PACK_PREFIX_BYTES, what)
    width, base = _PACK_PREFIX.unpack_from(payload, pos)
    dtype = _PACK_DTYPES.get(width)
    if dtype is None:
        raise ProtocolViolation(f"{what} is packed {width} bytes per value; packed widths are 1, 2 and 4")
    deltas, end = read_fixed(payload, pos + PACK_PREFIX_BYTES, n, dtype, what)
    out = np.empty(n, np.int64)
    if n:
        kernels.unpack_deltas(deltas, base, out)
    return out, end


def packed_plan(
    deltas: np.ndarray, base: int, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
) -> ColumnPlan:
    """The plan of a packed column: every channel's part starts with the batch's width and
    base (valid for any subset of its values), then its records' differences."""
    prefix = np.frombuffer(pack_prefix(deltas, base), np.uint8)
    body = fixed_plan(deltas, permutation, offsets, counts)

    def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
        starts = positions[nonempty]
        out[starts[:, None] + np.arange(PACK_PREFIX_BYTES)] = prefix
        body.write(out, positions + PACK_PREFIX_BYTES, nonempty)

    return ColumnPlan(body.sizes + PACK_PREFIX_BYTES, write)


def _as_bytes(array: np.ndarray) -> ByteArray:
    return np.ascontiguousarray(array).view(np.uint8).reshape(-1)


class ColumnPlan:
    """One column's part of every channel's frame: ``sizes[c]`` bytes, written by ``write``."""

    def __init__(self, sizes: Int64Array, write: Callable[[ByteArray, Int64Array, np.ndarray], None]) -> None:
        self.sizes = sizes
        self._write = write

    def write(self, out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
        """Write the column into ``out``, channel ``c``'s part at ``positions[c]`` (only where ``nonempty``)."""
        self._write(out, positions, nonempty)


def fixed_plan(
    array: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
) -> ColumnPlan:
    """The plan of a fixed-width little-endian array: one ``gather_fixed`` call."""
    width = array.dtype.itemsize
    src = _as_bytes(array)

    def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
        kernels.gather_fixed(out, positions, src, width, permutation, offsets)

    return ColumnPlan(counts * width, write)


def put_u32(out: ByteArray, positions: Int64Array, values: Int64Array) -> None:
    """Write ``values[k]`` as a little-endian uint32 at ``positions[k]``."""
    if len(positions):
        out[positions[:, None] + np.arange(4)] = values.astype(_U32).view(np.uint8).reshape(-1, 4)


class Prepared(ABC):
    """A column checked and converted for the wire."""

    #: Column flag bits of this column (``COLUMN_STRING_LENGTHS``); the null mask is the caller's.
    flags = 0

    @abstractmethod
    def parts(self) -> list[Buffer]:
        """The column body of a single frame holding every record."""

    def select(self, rows: np.ndarray) -> Prepared | None:
        """The column of the records at ``rows`` if it can be cut from this one, else None
        (the caller prepares those records' values again)."""
        return None

    @abstractmethod
    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        """The column body of each channel's frame."""


class ColumnCodec(ABC):
    """Encodes and decodes one column of a declared type."""

    type_info: TypeInformation
    #: A lower bound of the body's bytes per record (0 if none), for header sanity checks.
    min_record_bytes: int
    #: Whether a top-level stream of this type decodes to a numpy array.
    decodes_to_array = False
    #: Whether the column may be packed (``COLUMN_PACKED``: LONG columns, down to a byte per value).
    packs = False

    @abstractmethod
    def prepare(self, values: Values) -> Prepared:
        """Check and convert the column; raises ``Mismatch`` for the first value that does not fit."""

    def check_types(self, values: Values) -> None:
        """Raise ``Mismatch`` for the first value whose Python type this column cannot hold
        (None is the caller's business). Cheaper than ``prepare``: no conversion, no range
        check; for records that stay inside an operator chain and are never encoded."""
        self.prepare(values)

    @abstractmethod
    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        """Read ``n`` values at ``payload[pos:]``: ``(raw column, position after it)``."""

    def to_python(self, raw: Any) -> list[Any]:
        """The decoded column as Python values (one per record)."""
        return list(raw)

    def to_batch_values(self, raw: Any) -> list[Any] | np.ndarray:
        """The decoded column as ``Batch.values`` of a stream of this type."""
        return self.to_python(raw)

    def to_column(self, raw: Any) -> Any:
        """The decoded column as a column of ``TupleColumns``."""
        return self.to_batch_values(raw)

    def describe(self) -> str:
        return type_expr(self.type_info)


# -- fixed width -----------------------------------------------------------------------------------


class _PackedPrepared(Prepared):
    flags = COLUMN_PACKED

    def __init__(self, deltas: np.ndarray, base: int) -> None:
        self.deltas = deltas
        self.base = base

    def parts(self) -> list[Buffer]:
        return [pack_prefix(self.deltas, self.base), self.deltas]

    def select(self, rows: np.ndarray) -> Prepared:
        return _PackedPrepared(self.deltas[rows], self.base)

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        return packed_plan(self.deltas, self.base, permutation, offsets, counts)


class _FixedPrepared(Prepared):
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def parts(self) -> list[Buffer]:
        return [self.array]

    def select(self, rows: np.ndarray) -> Prepared:
        return _FixedPrepared(self.array[rows])

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        return fixed_plan(self.array, permutation, offsets, counts)


def prepare_int64(array: np.ndarray) -> Prepared:
    """A little-endian int64 array for the wire: packed (``flags`` is ``COLUMN_PACKED``) when
    ``pack_int64`` finds that it pays, else as it is."""
    packed = pack_int64(array)
    return _FixedPrepared(array) if packed is None else _PackedPrepared(*packed)


def _is_int_type(t: type) -> bool:
    return (issubclass(t, int) and not issubclass(t, bool)) or issubclass(t, np.integer)


def _is_float_type(t: type) -> bool:
    return _is_int_type(t) or issubclass(t, float | np.floating)


def _is_bool_type(t: type) -> bool:
    return issubclass(t, bool | np.bool_)


def _is_str_type(t: type) -> bool:
    return issubclass(t, str)


class FixedColumn(ColumnCodec):
    """BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE: raw little-endian values; CHAR: uint32 code points."""

    def __init__(self, type_info: BasicTypeInfo) -> None:
        self.type_info = type_info
        self._what = f"a {type_expr(type_info)} column"  # for errors; built once, not per frame
        name = type_info.name
        self.kind = {"Boolean": "bool", "Float": "float", "Double": "float", "Character": "char"}.get(
            name, "int"
        )
        self.wire_dtype: np.dtype[Any] = (
            np.dtype("<u4") if self.kind == "char" else np.dtype(type_info.numpy_dtype).newbyteorder("<")
        )
        self.native_dtype: np.dtype[Any] = self.wire_dtype.newbyteorder("=")
        self.width = self.wire_dtype.itemsize
        self.packs = self.kind == "int" and self.width == 8
        self.min_record_bytes = 1 if self.packs else self.width
        self.decodes_to_array = self.kind != "char"
        if self.kind == "int":
            info = np.iinfo(self.native_dtype)
            self.lo, self.hi = int(info.min), int(info.max)
        self._type_ok = {
            "int": _is_int_type,
            "float": _is_float_type,
            "bool": _is_bool_type,
            "char": _is_str_type,
        }[self.kind]
        fast_types: dict[str, set[type]] = {
            "int": {int},
            "float": {float, int},
            "bool": {bool},
            "char": {str},
        }
        self._fast_types = frozenset(fast_types[self.kind])

    def describe(self) -> str:
        return f"{type_expr(self.type_info)} as {self.wire_dtype.str}"

    # Encoding ---------------------------------------------------------------------------------

    def prepare(self, values: Values) -> Prepared:
        if isinstance(values, np.ndarray) and values.dtype.kind != "O":
            array = self._from_array(values)
        else:
            array = self._from_values(values.tolist() if isinstance(values, np.ndarray) else values)
        array = np.ascontiguousarray(array, dtype=self.wire_dtype)
        return prepare_int64(array) if self.packs else _FixedPrepared(array)

    def check_types(self, values: Values) -> None:
        if isinstance(values, np.ndarray) and values.dtype.kind != "O":
            self._from_array(values)  # vectorized
        else:
            self._check_types(values.tolist() if isinstance(values, np.ndarray) else values)

    def _check_types(self, values: Sequence[Any]) -> None:
        types = set(map(type, values))
        if types <= self._fast_types:
            return
        for t in types:
            if not self._type_ok(t):
                i = _first_of_type(values, t)
                raise Mismatch(i, f"got {describe_value(values[i])}")

    def _from_values(self, values: Sequence[Any]) -> np.ndarray:
        self._check_types(values)
        n = len(values)
        if self.kind == "int":
            try:
                wide = np.array(values, dtype=np.int64) if n else np.empty(0, np.int64)
            except OverflowError:
                i = _first(values, lambda v: not self.lo <= int(v) <= self.hi)
                raise Mismatch(
                    i, f"got {describe_value(values[i])}, outside the range {self.lo}..{self.hi}"
                ) from None
            return self._narrow_ints(wide, values)
        if self.kind == "float":
            try:
                wide_f = np.array(values, dtype=np.float64) if n else np.empty(0, np.float64)
            except OverflowError:
                i = _first(values, _overflows_float)
                raise Mismatch(i, f"got {describe_value(values[i])}, too large for a float") from None
            return self._narrow_floats(wide_f, values)
        if self.kind == "bool":
            return np.array(values, dtype=np.bool_) if n else np.empty(0, np.bool_)
        try:
            return np.fromiter(map(ord, values), dtype=np.uint32, count=n)
        except TypeError:
            i = _first(values, lambda v: len(v) != 1)
            raise Mismatch(
                i, f"got {describe_value(values[i])}, expected a string of exactly one character"
            ) from None

    def _from_array(self, values: np.ndarray) -> np.ndarray:
        kind = values.dtype.kind
        if values.ndim != 1:
            raise Mismatch(
                0, f"got a numpy array of shape {values.shape}; a batch column must be one-dimensional"
            )
        if self.kind == "int" and kind in "iu":
            return self._narrow_ints(values, values)
        if self.kind == "float" and kind in "iuf":
            return self._narrow_floats(values.astype(np.float64, copy=False), values)
        if self.kind == "bool" and kind == "b":
            return values
        if self.kind == "char" and kind == "U":
            return self._from_values(values.tolist())
        if len(values) == 0:
            return np.empty(0, self.native_dtype)
        return self._from_values(values.tolist()) if kind == "O" else self._reject_array(values)

    def _reject_array(self, values: np.ndarray) -> np.ndarray:
        raise Mismatch(0, f"got {describe_value(values[0].item())} in a numpy array of dtype {values.dtype}")

    def _narrow_ints(self, wide: np.ndarray, original: Values) -> np.ndarray:
        if np.can_cast(wide.dtype, self.native_dtype):
            return wide
        bad = (wide < self.lo) | (wide > self.hi)
        if bad.any():
            i = int(np.argmax(bad))
            value = original[i]
            value = value.item() if isinstance(value, np.generic) else value
            raise Mismatch(i, f"got {describe_value(value)}, outside the range {self.lo}..{self.hi}")
        return wide.astype(self.native_dtype)

    def _narrow_floats(self, wide: np.ndarray, original: Values) -> np.ndarray:
        if self.width == 8:
            return wide
        with np.errstate(over="ignore"):
            narrow = wide.astype(np.float32)
        bad = np.isinf(narrow) & ~np.isinf(wide)
        if bad.any():
            i = int(np.argmax(bad))
            value = original[i]
            value = value.item() if isinstance(value, np.generic) else value
            raise Mismatch(i, f"got {describe_value(value)}, outside the range of a 32-bit float")
        return narrow

    # Decoding ---------------------------------------------------------------------------------

    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        if flags & COLUMN_PACKED:
            return read_packed(payload, pos, n, self._what)
        return read_fixed(payload, pos, n, self.wire_dtype, self._what)

    def to_python(self, raw: Any) -> list[Any]:
        values: list[Any] = raw.tolist()
        if self.kind == "char":
            try:
                return list(map(chr, values))
            except ValueError:
                i = _first(values, lambda v: v > 0x10FFFF)
                raise ProtocolViolation(f"CHAR value {i} is {values[i]}, not a Unicode code point") from None
        return values

    def to_batch_values(self, raw: Any) -> list[Any] | np.ndarray:
        if self.kind == "char":
            return self.to_python(raw)
        return copy_out(raw, self.native_dtype)


def _overflows_float(value: Any) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    return False


# -- strings ---------------------------------------------------------------------------------------


class _StringPrepared(Prepared):
    def __init__(self, values: Sequence[str]) -> None:
        n = len(values)
        self.n = n
        try:
            joined = "\x00".join(values)
        except TypeError:
            i = _first(values, lambda v: not isinstance(v, str))
            raise Mismatch(i, f"got {describe_value(values[i])}") from None
        blob = joined.encode("utf-8", "surrogatepass")
        self.code_point_lengths: Int64Array | None = None
        if n and blob.count(0) != n - 1:
            # Some string contains U+0000 itself: fall back to lengths.
            self.flags = COLUMN_STRING_LENGTHS
            self.code_point_lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
            blob = "".join(values).encode("utf-8", "surrogatepass")
        self.blob = blob

    def parts(self) -> list[Buffer]:
        size = np.array([len(self.blob)], dtype=_U32)
        if self.code_point_lengths is None:
            return [size, self.blob]
        return [self.code_point_lengths.astype(_U32), size, self.blob]

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        blob = np.frombuffer(self.blob, dtype=np.uint8)
        lengths = self.code_point_lengths
        if lengths is None:
            starts, ends = kernels.separator_bounds(blob, self.n, 0)
        else:
            starts, ends = kernels.utf8_bounds(blob, lengths)
        return _strings_plan(blob, starts, ends, lengths, channels, permutation, offsets, counts)


def _strings_plan(
    blob: ByteArray,
    starts: Int64Array,
    ends: Int64Array,
    lengths: Int64Array | None,
    channels: np.ndarray,
    permutation: Int64Array,
    offsets: Int64Array,
    counts: Int64Array,
) -> ColumnPlan:
    """Each channel's STRING column body: the strings ``blob[starts[i]:ends[i]]`` NUL-separated
    (``lengths`` None) or after their code point lengths."""
    blob_sizes = kernels.sum_by_channel(ends - starts, channels, len(counts))
    if lengths is None:
        blob_sizes += np.maximum(counts - 1, 0)  # the separators
    lengths_plan = None if lengths is None else fixed_plan(lengths.astype(_U32), permutation, offsets, counts)
    separator = 0 if lengths is None else -1

    def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
        p = positions
        if lengths_plan is not None:
            lengths_plan.write(out, p, nonempty)
            p = p + lengths_plan.sizes
        put_u32(out, p[nonempty], blob_sizes[nonempty])
        kernels.gather_strings(out, p + 4, blob, starts, ends, permutation, offsets, separator)

    sizes = 4 + blob_sizes + (0 if lengths_plan is None else lengths_plan.sizes)
    return ColumnPlan(sizes, write)


class _StringsPrepared(Prepared):
    """A ``Strings`` column without U+0000: its bytes go to the frames as they are."""

    def __init__(self, values: Strings) -> None:
        self.values = values

    def parts(self) -> list[Buffer]:
        blob = self.values.joined()
        return [np.array([len(blob)], dtype=_U32), blob]

    def select(self, rows: np.ndarray) -> Prepared:
        return _StringsPrepared(self.values.take(rows))

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        v = self.values
        return _strings_plan(v.data, v.starts, v.ends, None, channels, permutation, offsets, counts)


class StringColumn(ColumnCodec):
    """STRING: one UTF-8 blob per column (see the module docstring for the two layouts)."""

    min_record_bytes = 1  # a separator or a 4-byte length; one record may need none (slack)

    def __init__(self, type_info: TypeInformation) -> None:
        self.type_info = type_info

    def describe(self) -> str:
        return f"{type_expr(self.type_info)} as a UTF-8 blob"

    def prepare(self, values: Values) -> Prepared:
        if isinstance(values, Strings):
            return _StringsPrepared(values) if values.has_no_nul() else _StringPrepared(values.tolist())
        return _StringPrepared(values.tolist() if isinstance(values, np.ndarray) else values)

    def check_types(self, values: Values) -> None:
        if not isinstance(values, Strings):  # Strings hold str only
            _check_classes(values, str, "")

    def to_python(self, raw: Any) -> list[Any]:
        return raw.tolist() if isinstance(raw, Strings) else list(raw)

    def to_column(self, raw: Any) -> Any:
        return raw  # Strings stay bytes until something reads them

    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        what = "a STRING column"
        lengths = None
        if flags & COLUMN_STRING_LENGTHS:
            lengths, pos = read_fixed(payload, pos, n, _U32, what)
        (size,), pos = read_fixed(payload, pos, 1, _U32, what)
        size = int(size)
        _need(payload, pos, size, what)
        try:
            text = str(payload[pos : pos + size], "utf-8", "surrogatepass")
        except UnicodeDecodeError as e:
            raise ProtocolViolation(f"{what} is not valid UTF-8: {e}") from None
        pos += size
        if lengths is None and n:
            # the frame's bytes as they are: the values are built when something reads them
            blob = np.frombuffer(payload, np.uint8, count=size, offset=pos - size).copy()
            starts, ends = kernels.separator_bounds(blob, n, 0)
            if len(starts) != n:
                raise ProtocolViolation(
                    f"{what} holds {blob.tolist().count(0) + 1} strings, the frame header says {n} records"
                )
            return Strings(blob, starts, ends, nul_free=True), pos
        if lengths is None:
            values = text.split("\x00") if n else []
            if len(values) != n:
                raise ProtocolViolation(
                    f"{what} holds {len(values)} strings, the frame header says {n} records"
                )
            return values, pos
        ends = np.cumsum(lengths, dtype=np.int64)
        if n and ends[-1] != len(text):
            raise ProtocolViolation(
                f"{what}: the lengths add up to {int(ends[-1])} code points, the blob holds {len(text)}"
            )
        bounds = ends.tolist()
        return [text[a:b] for a, b in zip([0, *bounds[:-1]], bounds)], pos


class TextColumn(ColumnCodec):
    """A type without a fixed width that reads back from its text: BIG_INT, BIG_DEC and the
    SQL date/time types travel as a STRING column of ``str(value)``/``value.isoformat()``."""

    min_record_bytes = 1  # n values take at least 4 + 2n - 1 bytes (a character and a separator each)

    def __init__(
        self,
        type_info: BasicTypeInfo,
        accepts: Callable[[Any], bool],
        to_text: Callable[[Any], str],
        from_text: Callable[[str], Any],
        placeholder: Any,
    ) -> None:
        self.type_info = type_info
        self._text = StringColumn(type_info)
        self.placeholder = placeholder  # stands in for None in a ROW field (the null mask says None)
        self.accepts = accepts
        self.to_text = to_text
        self.from_text = from_text

    def describe(self) -> str:
        return f"{type_expr(self.type_info)} as text in a UTF-8 blob"

    def check_types(self, values: Values) -> None:
        accepts = self.accepts
        for i, v in enumerate(values):
            if not accepts(v):
                expected = self.type_info.python_type  # type: ignore[attr-defined]
                raise Mismatch(
                    i, f"got {describe_value(v)}, expected a {expected.__module__}.{expected.__name__}"
                )

    def prepare(self, values: Values) -> Prepared:
        self.check_types(values)
        return _StringPrepared([self.to_text(v) for v in values])

    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        texts, pos = self._text.decode(payload, pos, n, flags)
        try:
            return [self.from_text(t) for t in texts], pos
        except ValueError as e:
            raise ProtocolViolation(
                f"a {type_expr(self.type_info)} column holds unreadable text: {e}"
            ) from None


def _text_column(type_info: BasicTypeInfo) -> TextColumn | None:
    """BIG_INT, BIG_DEC, SQL_DATE, SQL_TIME, SQL_TIMESTAMP (a datetime is a date and a bool an
    int in Python; neither fits the other's column)."""
    name = type_info.name
    if name == "BigInteger":
        return TextColumn(type_info, _is_big_int, str, int, 0)
    if name == "BigDecimal":
        return TextColumn(type_info, _is_decimal, str, _decimal, decimal.Decimal(0))
    if name == "SqlDate":
        return TextColumn(
            type_info,
            _is_date,
            datetime.date.isoformat,
            datetime.date.fromisoformat,
            datetime.date(1970, 1, 1),
        )
    if name == "SqlTime":
        return TextColumn(
            type_info, _is_time, datetime.time.isoformat, datetime.time.fromisoformat, datetime.time(0)
        )
    if name == "SqlTimestamp":
        return TextColumn(
            type_info,
            _is_datetime,
            datetime.datetime.isoformat,
            datetime.datetime.fromisoformat,
            datetime.datetime(1970, 1, 1),
        )
    if name == "Instant":
        return TextColumn(type_info, _is_instant, _instant_text, _instant, Instant(0, 0))
    return None


def _is_instant(v: Any) -> bool:
    return isinstance(v, Instant)


def _instant_text(v: Instant) -> str:
    return f"{v.seconds}.{v.nanos:09d}"


def _instant(text: str) -> Instant:
    seconds, _, nanos = text.partition(".")
    return Instant(int(seconds), int(nanos))


def _is_big_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_decimal(v: Any) -> bool:
    return isinstance(v, decimal.Decimal)


def _is_date(v: Any) -> bool:
    return isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)


def _is_time(v: Any) -> bool:
    return isinstance(v, datetime.time)


def _is_datetime(v: Any) -> bool:
    return isinstance(v, datetime.datetime)


def _decimal(text: str) -> decimal.Decimal:
    try:
        return decimal.Decimal(text)
    except decimal.InvalidOperation:
        raise ValueError(f"{text!r} is not a decimal number") from None


# -- bytes -----------------------------------------------------------------------------------------


class _BytesPrepared(Prepared):
    def __init__(self, values: Sequence[Any]) -> None:
        types = set(map(type, values))
        if not types <= {bytes}:
            for t in types:
                if not issubclass(t, bytes | bytearray):
                    i = _first_of_type(values, t)
                    raise Mismatch(i, f"got {describe_value(values[i])}, expected bytes")
        self.lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        self.blob = b"".join(values)

    def parts(self) -> list[Buffer]:
        return [self.lengths.astype(_U32), self.blob]

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        blob = np.frombuffer(self.blob, dtype=np.uint8)
        ends = np.cumsum(self.lengths)
        starts = ends - self.lengths
        blob_sizes = kernels.sum_by_channel(self.lengths, channels, len(counts))
        lengths_plan = fixed_plan(self.lengths.astype(_U32), permutation, offsets, counts)

        def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
            lengths_plan.write(out, positions, nonempty)
            kernels.gather_strings(
                out, positions + lengths_plan.sizes, blob, starts, ends, permutation, offsets, -1
            )

        return ColumnPlan(lengths_plan.sizes + blob_sizes, write)


class BytesColumn(ColumnCodec):
    """BYTE_ARRAY (``Types.PRIMITIVE_ARRAY(Types.BYTE())``): Python ``bytes``, lengths plus one blob."""

    min_record_bytes = 4

    def __init__(self, type_info: TypeInformation) -> None:
        self.type_info = type_info

    def describe(self) -> str:
        return f"{type_expr(self.type_info)} as lengths and a blob"

    def prepare(self, values: Values) -> Prepared:
        return _BytesPrepared(values.tolist() if isinstance(values, np.ndarray) else values)

    def check_types(self, values: Values) -> None:
        _check_classes(values, bytes | bytearray, ", expected bytes")

    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        what = "a BYTE_ARRAY column"
        lengths, pos = read_fixed(payload, pos, n, _U32, what)
        bounds = np.cumsum(lengths, dtype=np.int64).tolist()
        size = bounds[-1] if n else 0
        _need(payload, pos, size, what)
        blob = bytes(payload[pos : pos + size])
        return [blob[a:b] for a, b in zip([0, *bounds[:-1]], bounds)], pos + size


# -- pickled ---------------------------------------------------------------------------------------


def pickle_values(values: Sequence[Any], describe_index: Callable[[int], str] | None = None) -> bytes:
    """``pickle.dumps(list(values), protocol=5)``; a value that cannot be pickled raises ``Mismatch``."""
    try:
        return pickle.dumps(values if isinstance(values, list) else list(values), protocol=5)
    except Exception as error:
        for i, v in enumerate(values):
            try:
                pickle.dumps(v, protocol=5)
            except Exception as e:
                raise Mismatch(i, f"got {describe_value(v)}, which cannot be pickled: {e}") from None
        raise Mismatch(0, f"the values cannot be pickled: {error}") from None


class _PickledPrepared(Prepared):
    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.data = pickle_values(values)

    def parts(self) -> list[Buffer]:
        return [np.array([len(self.data)], dtype=_U32), self.data]

    def plan(
        self, channels: np.ndarray, permutation: Int64Array, offsets: Int64Array, counts: Int64Array
    ) -> ColumnPlan:
        values = self.values
        take = values.__getitem__
        order = permutation.tolist()
        pieces = [
            pickle.dumps(list(map(take, order[a:b])), protocol=5)
            for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())
        ]
        sizes = np.array([4 + len(p) for p in pieces], dtype=np.int64)

        def write(out: ByteArray, positions: Int64Array, nonempty: np.ndarray) -> None:
            for c in np.flatnonzero(nonempty).tolist():
                p = int(positions[c])
                piece = pieces[c]
                out[p : p + 4] = np.array([len(piece)], dtype=_U32).view(np.uint8)
                out[p + 4 : p + 4 + len(piece)] = np.frombuffer(piece, dtype=np.uint8)

        return ColumnPlan(sizes, write)


class PickledColumn(ColumnCodec):
    """A field of a type without a columnar layout (LIST, MAP, arrays, nested ROW/TUPLE): pickled."""

    min_record_bytes = 1  # every pickled list element takes at least one opcode

    def __init__(self, type_info: TypeInformation) -> None:
        self.type_info = type_info

    def describe(self) -> str:
        return f"{type_expr(self.type_info)} pickled"

    def prepare(self, values: Values) -> Prepared:
        return _PickledPrepared(values.tolist() if isinstance(values, np.ndarray) else list(values))

    def check_types(self, values: Values) -> None:
        """Anything picklable fits; whether it pickles shows only when it is encoded."""

    def decode(self, payload: memoryview, pos: int, n: int, flags: int) -> tuple[Any, int]:
        what = f"a pickled {type_expr(self.type_info)} column"
        (size,), pos = read_fixed(payload, pos, 1, _U32, what)
        size = int(size)
        _need(payload, pos, size, what)
        values = unpickle(payload[pos : pos + size], what)
        if not isinstance(values, list) or len(values) != n:
            raise ProtocolViolation(f"{what} holds {describe_value(values)}, expected a list of {n} values")
        return values, pos + size


def unpickle(data: memoryview, what: str) -> Any:
    """``pickle.loads``; undecodable bytes raise ``ProtocolViolation``. Peers are trusted, as Flink trusts Kryo."""
    try:
        return pickle.loads(data)
    except Exception as e:
        raise ProtocolViolation(f"{what} cannot be unpickled: {type(e).__name__}: {e}") from None


# -- choosing a codec ------------------------------------------------------------------------------

_FIXED_NAMES = {"Boolean", "Byte", "Short", "Integer", "Long", "Float", "Double", "Character"}


def column_for(type_info: TypeInformation) -> ColumnCodec | None:
    """The columnar codec of a field type, or None if the type has no columnar layout."""
    if isinstance(type_info, BasicTypeInfo):
        if type_info.name == "String":
            return StringColumn(type_info)
        if type_info.name in _FIXED_NAMES:
            return FixedColumn(type_info)
        return _text_column(type_info)
    if isinstance(type_info, PrimitiveArrayTypeInfo) and type_info.element_type == Types.BYTE():
        return BytesColumn(type_info)
    return None
