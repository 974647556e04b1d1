"""Byte encodings of keys, namespaces and values for state backends and snapshots.

Theory of operation
-------------------
One self-describing, tagged encoding serves keys, namespaces and values. Keys use
it canonically: the same key always gives the same bytes (in any process, on any
run), and a key's bytes followed by a namespace's bytes split again without a
separator. Values use the same tags, plus containers that cannot be keys (lists,
dicts, sets, numpy arrays).

It is data, not code: decoding builds only the types in the table below, and a
*named type* (a window, a ``Row``, a record of weir's snapshot format, a user's
dataclass or named tuple) only when its name is registered with ``register_type``
-- weir registers its own, and encoding a user's dataclass registers it in the
process that encodes it. Anything else is *opaque*: it is pickled under tag 0xFF,
the one place pickle is used. Decoding is *trusted* by default (the bytes were
written by this process, or came from a checkpoint whose signature proved that
this user's weir wrote it); ``trusted=False`` is for bytes of unproven origin and
refuses an opaque value or an unregistered name with ``UntrustedStateError``
instead of running the code that rebuilding it would run.

Layout (one tag byte, then):

===== ============ =====================================================
tag   type         payload
===== ============ =====================================================
0x00  None         nothing
0x01  bool         one byte, 0 or 1
0x02  int (64 bit) 8 bytes big endian of ``value + 2**63`` (order-preserving)
0x03  big int      4-byte length + signed big-endian bytes
0x04  float        8 bytes big endian IEEE 754
0x05  str          4-byte length + UTF-8
0x06  bytes        4-byte length + bytes
0x07  tuple        4-byte count + elements
0x08  named type   encoded name (str) + encoded tuple of its fields
0x09  list         4-byte count + elements
0x0A  dict         4-byte count + key, value, key, value, ...
0x0B  Row          encoded field names (tuple or None) + row kind byte + encoded tuple of values
0x0C  set          4-byte count + elements
0x0D  frozenset    4-byte count + elements
0x0E  ndarray      encoded dtype str + encoded shape tuple + 4-byte length + raw C-order bytes
0x0F  Decimal      encoded str
0x10  datetime     encoded ``isoformat()`` str (naive or a fixed UTC offset)
0x11  date         encoded ``isoformat()`` str
0x12  time         encoded ``isoformat()`` str
0xFF  opaque       4-byte length + pickle protocol 5
===== ============ =====================================================

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import importlib
import pickle
import struct
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np

from weir.common.types import Row, RowKind
from weir.errors import UsageError

__all__ = [
    "UntrustedStateError",
    "decode_key",
    "decode_key_from",
    "decode_value",
    "encode_key",
    "encode_many",
    "encode_value",
    "find_opaque",
    "register_type",
    "skip_key",
]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_OFFSET = 1 << 63
_Q = struct.Struct(">Q")
_D = struct.Struct(">d")
_L = struct.Struct(">I")
_NONE = b"\x00"
_TRUE = b"\x01\x01"
_FALSE = b"\x01\x00"
_ARRAY_KINDS = "biufcmM"  # numeric, bool, datetime64/timedelta64: raw bytes, nothing to run


class UntrustedStateError(UsageError):
    """Bytes of unproven origin hold a value that only running code (pickle, an import) would rebuild."""


@dataclasses.dataclass(frozen=True, slots=True)
class _NamedType:
    cls: type
    name_bytes: bytes  # the encoded name, written before the fields
    fields: tuple[str, ...]
    build: Callable[..., Any]
    unpack: Callable[[Any], Sequence[Any]] | None  # the fields of an instance, when not its attributes


_by_type: dict[type, _NamedType] = {}
_by_name: dict[str, _NamedType] = {}


def register_type(
    cls: type, name: str | None = None, fields: Sequence[str] | None = None,
    build: Callable[..., Any] | None = None, unpack: Callable[[Any], Sequence[Any]] | None = None,
    encode_only: bool = False,
) -> None:  # fmt: skip
    """Make ``cls`` (a dataclass, a named tuple, or any class given ``fields``) a named type.

    ``name`` is what the bytes carry (default ``"module:qualname"``; weir's own types use
    short stable names so that moving a class does not orphan old checkpoints); ``build``
    rebuilds an instance from the fields in order (default: ``cls(*fields)``), and
    ``unpack`` gives them for an instance (default: its attributes named ``fields``).
    ``encode_only``: ``cls`` is written under ``name`` but read back as the type registered
    for that name (another form of the same data)."""
    if fields is None:
        if dataclasses.is_dataclass(cls):
            fields = [f.name for f in dataclasses.fields(cls) if f.init]
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
            fields = list(cls._fields)
        else:
            raise UsageError(f"register_type needs the fields of {cls.__qualname__} (not a dataclass)")
    name = name or f"{cls.__module__}:{cls.__qualname__}"
    entry = _NamedType(cls, _encode_str(name), tuple(fields), build or cls, unpack)
    _by_type[cls] = entry
    if not encode_only:
        _by_name[name] = entry


def _encode_str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return b"\x05" + _L.pack(len(raw)) + raw


def _named(t: type, value: Any) -> _NamedType | None:
    entry = _by_type.get(t)
    if entry is None and (
        (dataclasses.is_dataclass(t) and isinstance(t, type))
        or (issubclass(t, tuple) and hasattr(t, "_fields"))
    ):
        register_type(t)  # a user's dataclass or named tuple: rebuilt by name in a trusted decode
        entry = _by_type[t]
    return entry


def _seq(tag: bytes, items: Any, encode: Callable[[Any], bytes], prefix: bytes = b"") -> bytes:
    """``prefix``, ``tag``, the count and the encoded items, joined once: a snapshot's packed
    entries (tens of MB) are copied once per level of nesting, not once per concatenation."""
    return b"".join((prefix + tag + _L.pack(len(items)), *map(encode, items)))


def encode_key(key: Any) -> bytes:
    """The canonical bytes of a key, namespace or value (see the module docstring)."""
    t = type(key)
    if t is int:
        if _INT64_MIN <= key <= _INT64_MAX:
            return b"\x02" + _Q.pack(key + _OFFSET)
        raw = key.to_bytes((key.bit_length() + 8) // 8, "big", signed=True)
        return b"\x03" + _L.pack(len(raw)) + raw
    if t is str:
        return _encode_str(key)
    if key is None:
        return _NONE
    if t is float:
        return b"\x04" + _D.pack(key)
    if t is tuple:
        return _encode_tuple(key)
    if t is bool:
        return _TRUE if key else _FALSE
    if t is bytes or t is bytearray:
        return b"\x06" + _L.pack(len(key)) + bytes(key)
    return _encode_other(t, key)


def _encode_tuple(items: tuple[Any, ...]) -> bytes:
    """A tuple, with its common scalar elements encoded inline (a tuple is the usual record and
    value); a long one of ints or of int tuples (a snapshot's column of keys) by ``encode_many``."""
    if len(items) >= _LONG and type(items[0]) in _COLUMN_TYPES:
        rows = encode_rows(items)  # the rows' bytes are the items' encodings, one after another
        body = b"".join(encode_many(items)) if rows is None else rows.tobytes()
        return b"\x07" + _L.pack(len(items)) + body
    parts = [b"\x07" + _L.pack(len(items))]
    append = parts.append
    for x in items:
        tx = type(x)
        if tx is int and _INT64_MIN <= x <= _INT64_MAX:
            append(b"\x02" + _Q.pack(x + _OFFSET))
        elif tx is float:
            append(b"\x04" + _D.pack(x))
        elif tx is str:
            raw = x.encode("utf-8")
            append(b"\x05" + _L.pack(len(raw)) + raw)
        else:
            append(encode_key(x))
    return b"".join(parts)


_LONG = 256  # from this length a tuple of ints (or int tuples) is encoded as a column
_COLUMN_TYPES = (int, tuple)


def _encode_other(t: type, value: Any) -> bytes:
    if t is list:
        return _seq(b"\x09", value, encode_key)
    if t is dict:
        return b"".join(
            (b"\x0a" + _L.pack(len(value)), *chain.from_iterable(map(encode_key, kv) for kv in value.items()))
        )
    if t is Row:
        names = value.get_field_names()
        return (
            b"\x0b" + encode_key(None if names is None else tuple(names))
            + bytes((value.get_row_kind().value,)) + _seq(b"\x07", tuple(value), encode_key)
        )  # fmt: skip
    entry = _named(t, value)
    if entry is not None:
        fields = entry.unpack(value) if entry.unpack else [getattr(value, f) for f in entry.fields]
        return _seq(b"\x07", fields, encode_key, b"\x08" + entry.name_bytes)
    if t is np.ndarray and value.dtype.kind in _ARRAY_KINDS:
        raw = np.ascontiguousarray(value).tobytes()
        return b"\x0e" + _encode_str(value.dtype.str) + encode_key(value.shape) + _L.pack(len(raw)) + raw
    if t.__module__ == "numpy" and hasattr(value, "item") and np.ndim(value) == 0:
        return encode_key(value.item())
    if t is set or t is frozenset:
        return _seq(b"\x0c" if t is set else b"\x0d", sorted(map(encode_key, value)), bytes)
    if t is decimal.Decimal:
        return b"\x0f" + _encode_str(str(value))
    if t is datetime.datetime and (value.tzinfo is None or type(value.tzinfo) is datetime.timezone):
        return b"\x10" + _encode_str(value.isoformat())
    if t is datetime.date:
        return b"\x11" + _encode_str(value.isoformat())
    if t is datetime.time and value.tzinfo is None:
        return b"\x12" + _encode_str(value.isoformat())
    try:
        raw = pickle.dumps(value, protocol=5)
    except Exception as exc:
        raise UsageError(
            f"cannot encode state key or value {value!r} of type {t.__qualname__}: {exc}"
        ) from exc
    return b"\xff" + _L.pack(len(raw)) + raw


#: Values and keys share one encoding (the module docstring's table).
encode_value = encode_key

#: From this size an array's bytes stay a view in ``encode_parts`` (smaller ones are copied).
_VIEW_FROM = 1 << 16


def encode_parts(value: Any) -> list[bytes | memoryview]:
    """``encode_value(value)`` as pieces to write one after another: the same bytes, where a
    big numpy array's are a view of the array, not a copy (dicts, named types and tuples are
    split down to them; everything else is ``encode_value``'s bytes)."""
    t = type(value)
    if t is np.ndarray and value.dtype.kind in _ARRAY_KINDS and value.nbytes >= _VIEW_FROM:
        raw = np.ascontiguousarray(value)
        head = b"\x0e" + _encode_str(value.dtype.str) + encode_key(value.shape) + _L.pack(raw.nbytes)
        return [head, raw.reshape(-1).view(np.uint8).data]
    if t is tuple and not (len(value) >= _LONG and type(value[0]) in _COLUMN_TYPES):
        parts: list[bytes | memoryview] = [b"\x07" + _L.pack(len(value))]
        for item in value:
            parts.extend(encode_parts(item))
        return parts
    if t is dict:
        parts = [b"\x0a" + _L.pack(len(value))]
        for k, v in value.items():
            parts.append(encode_key(k))
            parts.extend(encode_parts(v))
        return parts
    entry = _by_type.get(t)
    if entry is not None:
        fields = entry.unpack(value) if entry.unpack else [getattr(value, f) for f in entry.fields]
        parts = [b"\x08" + entry.name_bytes + b"\x07" + _L.pack(len(fields))]
        for field in fields:
            parts.extend(encode_parts(field))
        return parts
    return [encode_key(value)]


def encode_many(values: Sequence[Any]) -> list[bytes]:
    """``[encode_key(v) for v in values]``, byte for byte, with the common shapes of a
    snapshot's keys and values -- all int64 ints, or all tuples of one length whose
    elements are int64 ints -- encoded by numpy in one pass (3-4x fewer interpreter
    steps per entry than one ``encode_key`` call each); anything else goes one by one."""
    n = len(values)
    if n < 16:
        return [encode_key(v) for v in values]
    rows = encode_rows(values)
    if rows is not None:
        return _split(rows, n)
    return [encode_key(v) for v in values]


def encode_rows(values: Sequence[Any]) -> np.ndarray | None:
    """``encode_many(values)`` as one row of bytes per value (an ``(n, width)`` uint8 array)
    when every value is an int64 int, or every one a tuple of one length of int64 ints;
    else None."""
    if not values:
        return None
    rows = IntRows(len(values), values[0])
    return rows.rows() if rows.add(values) else None


#: values an ``IntRows`` chunk should hold: its objects stay in the cache between the checks
#: and the copy (a million scattered objects read once per pass cost a cache miss each time)
INT_ROWS_CHUNK = 512


class IntRows:
    """``encode_rows`` of ``n`` values handed over a chunk at a time (``add``), the first one
    ``first``: the type checks and the copy of a chunk read its objects while they are in the
    cache, so values scattered over the heap (a state's dicts) cost one cache miss each,
    not one per pass. Chunks of ``INT_ROWS_CHUNK`` values suit it best."""

    def __init__(self, n: int, first: Any) -> None:
        self._at = 0
        # 0: ints; w: tuples of w ints (1 <= w <= 64); -1: neither, so no rows
        if type(first) is int:
            self._width = 0
        elif type(first) is tuple and 1 <= len(first) <= 64:
            self._width = len(first)
        else:
            self._width = -1
        self._ints: np.ndarray | None = None
        if self._width >= 0:
            self._ints = np.empty((n, max(self._width, 1)), dtype=np.int64)

    def add(self, chunk: Sequence[Any]) -> bool:
        """Append ``chunk``; False (and no rows) when a value is not of the first one's kind."""
        ints, width, at = self._ints, self._width, self._at
        c = len(chunk)
        if ints is None or at + c > len(ints):
            self._ints = None
            return False
        # the checks are C-level loops (``set(map(...))``), as is the copy
        if width == 0:
            flat = chunk
            ok = set(map(type, chunk)) == {int}
        else:
            ok = set(map(type, chunk)) == {tuple} and set(map(len, chunk)) == {width}
            flat = list(chain.from_iterable(chunk)) if ok else []
            ok = ok and set(map(type, flat)) == {int}
        w = ints.shape[1]
        copied = ok and _int64s(flat, ints.reshape(-1)[at * w : (at + c) * w])
        if not copied:
            self._ints = None
            return False
        self._at = at + c
        return True

    def rows(self) -> np.ndarray | None:
        """The rows, once every value was added; None when one did not fit."""
        ints = self._ints
        if ints is None or self._at != len(ints):
            return None
        if self._width == 0:
            return _int_columns(ints, b"")
        return _int_columns(ints, b"\x07" + _L.pack(self._width))


def int64_rows(ints: np.ndarray) -> np.ndarray:
    """``encode_rows`` of the values of an int64 array: one row of bytes per value."""
    return _int_columns(np.ascontiguousarray(ints, np.int64).reshape(-1, 1), b"")


def split_rows(rows: np.ndarray) -> list[bytes]:
    """Each row of an ``(n, width)`` uint8 array as bytes."""
    return _split(rows, len(rows))


def _int64s(values: Sequence[int], out: np.ndarray) -> bool:
    """Copy ``values`` into ``out``; False when one is outside int64 (it has its own tag)."""
    try:
        out[:] = np.fromiter(values, dtype=np.int64, count=len(values))
    except OverflowError:
        return False
    return True


def _int_columns(ints: np.ndarray, header: bytes) -> np.ndarray:
    """Rows of ``header`` followed by ``b"\x02" + >Q(x + 2**63)`` per column, as uint8."""
    n, width = ints.shape
    h = len(header)
    out = np.empty((n, h + 9 * width), dtype=np.uint8)
    if h:
        out[:, :h] = np.frombuffer(header, dtype=np.uint8)
    biased = (ints.view(np.uint64) ^ np.uint64(_OFFSET)).astype(">u8")  # x + 2**63 mod 2**64
    cells = out[:, h:].reshape(n, width, 9)
    cells[:, :, 0] = 2
    cells[:, :, 1:] = biased.view(np.uint8).reshape(n, width, 8)
    return out


def _split(rows: np.ndarray, n: int) -> list[bytes]:
    data = rows.tobytes()
    size = rows.shape[1]
    return [data[i : i + size] for i in range(0, n * size, size)]


def _named_type(name: str, trusted: bool) -> _NamedType:
    entry = _by_name.get(name)
    if entry is not None:
        return entry
    if not trusted:
        raise UntrustedStateError(
            f"a value of type {name}, which weir does not know, needs an import to rebuild"
        )
    module, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type) or not (
        dataclasses.is_dataclass(obj) or (issubclass(obj, tuple) and hasattr(obj, "_fields"))
    ):
        raise UsageError(
            f"cannot decode a value of type {name}: it names {obj!r}, not a dataclass or named tuple"
        )
    register_type(obj, name)
    return _by_name[name]


def _count(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    return _L.unpack_from(data, offset)[0], offset + 4


def _items(data: bytes | memoryview, offset: int, trusted: bool) -> tuple[list[Any], int]:
    n, offset = _count(data, offset)
    items = []
    for _ in range(n):
        item, offset = decode_key_from(data, offset, trusted)
        items.append(item)
    return items, offset


def _decode_tuple(data: bytes | memoryview, offset: int, trusted: bool) -> tuple[tuple[Any, ...], int]:
    """A tuple, with int, float and str elements decoded inline (the inverse of ``_encode_tuple``)."""
    (n,) = _L.unpack_from(data, offset)
    offset += 4
    items: list[Any] = []
    append = items.append
    for _ in range(n):
        tag = data[offset]
        if tag == 0x02:
            append(_Q.unpack_from(data, offset + 1)[0] - _OFFSET)
            offset += 9
        elif tag == 0x04:
            append(_D.unpack_from(data, offset + 1)[0])
            offset += 9
        elif tag == 0x05:
            (size,) = _L.unpack_from(data, offset + 1)
            offset += 5
            append(bytes(data[offset : offset + size]).decode("utf-8"))
            offset += size
        else:
            item, offset = decode_key_from(data, offset, trusted)
            append(item)
    return tuple(items), offset


def _decode_str(data: bytes | memoryview, offset: int) -> tuple[str, int]:
    if data[offset] != 0x05:
        raise UsageError(
            f"cannot decode state: expected a string at offset {offset}, found tag 0x{data[offset]:02x}"
        )
    n, offset = _count(data, offset + 1)
    return bytes(data[offset : offset + n]).decode("utf-8"), offset + n


def decode_key_from(data: bytes | memoryview, offset: int = 0, trusted: bool = True) -> tuple[Any, int]:
    """Decode one key or value starting at ``offset``; return it and the offset just past it."""
    tag = data[offset]
    offset += 1
    if tag == 0x02:
        return _Q.unpack_from(data, offset)[0] - _OFFSET, offset + 8
    if tag == 0x05:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        return bytes(data[offset : offset + n]).decode("utf-8"), offset + n
    if tag == 0x00:
        return None, offset
    if tag == 0x04:
        return _D.unpack_from(data, offset)[0], offset + 8
    if tag == 0x07:
        return _decode_tuple(data, offset, trusted)
    if tag == 0x01:
        return data[offset] == 1, offset + 1
    if tag == 0x06:
        n, offset = _count(data, offset)
        return bytes(data[offset : offset + n]), offset + n
    return _decode_other(tag, data, offset, trusted)


def _decode_other(tag: int, data: bytes | memoryview, offset: int, trusted: bool) -> tuple[Any, int]:
    if tag == 0x09:
        return _items(data, offset, trusted)
    if tag == 0x0A:
        n, offset = _count(data, offset)
        out = {}
        for _ in range(n):
            k, offset = decode_key_from(data, offset, trusted)
            out[k], offset = decode_key_from(data, offset, trusted)
        return out, offset
    if tag == 0x08:
        name, offset = _decode_str(data, offset)
        fields, offset = decode_key_from(data, offset, trusted)
        entry = _named_type(name, trusted)
        if not isinstance(fields, tuple) or len(fields) != len(entry.fields):
            raise UsageError(f"cannot decode a {name}: expected {len(entry.fields)} fields, found {fields!r}")
        return entry.build(*fields), offset
    if tag == 0x0B:
        names, offset = decode_key_from(data, offset, trusted)
        kind = data[offset]
        values, offset = decode_key_from(data, offset + 1, trusted)
        row = Row(*values)
        if names is not None:
            row.set_field_names(list(names))
        row.set_row_kind(RowKind(kind))
        return row, offset
    if tag in (0x0C, 0x0D):
        items, offset = _items(data, offset, trusted)
        return (set if tag == 0x0C else frozenset)(items), offset
    if tag == 0x0E:
        dtype, offset = _decode_str(data, offset)
        shape, offset = decode_key_from(data, offset, trusted)
        n, offset = _count(data, offset)
        if np.dtype(dtype).kind not in _ARRAY_KINDS:
            raise UsageError(f"cannot decode an array of dtype {dtype}: only numeric arrays are encoded")
        array = np.frombuffer(bytes(data[offset : offset + n]), dtype=dtype).reshape(shape)
        return array.copy(), offset + n
    if 0x0F <= tag <= 0x12:
        text, offset = _decode_str(data, offset)
        parse = (decimal.Decimal, datetime.datetime.fromisoformat, datetime.date.fromisoformat,
                 datetime.time.fromisoformat)[tag - 0x0F]  # fmt: skip
        return parse(text), offset
    if tag == 0x03:
        n, offset = _count(data, offset)
        return int.from_bytes(data[offset : offset + n], "big", signed=True), offset + n
    if tag == 0xFF:
        n, offset = _count(data, offset)
        if not trusted:
            raise UntrustedStateError(f"a pickled Python value ({n} bytes) needs pickle to rebuild")
        return pickle.loads(data[offset : offset + n]), offset + n
    raise UsageError(f"cannot decode state: unknown tag 0x{tag:02x} at offset {offset - 1}")


#: Payload bytes after the tag of the fixed-width tags; the tags whose payload is a 4-byte
#: length and that many bytes; those holding a count of encoded elements.
_FIXED_WIDTH = {0x00: 0, 0x01: 1, 0x02: 8, 0x04: 8}
_SIZED = frozenset({0x03, 0x05, 0x06, 0xFF})
_COUNTED = frozenset({0x07, 0x09, 0x0C, 0x0D})


def skip_key(data: bytes | memoryview, offset: int = 0) -> int:
    """The offset just past the key or value encoded at ``offset``: ``decode_key_from``'s
    second result, found from the tags and lengths alone (nothing is built, nothing runs)."""
    tag = data[offset]
    offset += 1
    width = _FIXED_WIDTH.get(tag)
    if width is not None:
        return offset + width
    if tag in _SIZED:
        return offset + 4 + _L.unpack_from(data, offset)[0]
    if tag in _COUNTED or tag == 0x0A:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        for _ in range(2 * n if tag == 0x0A else n):
            offset = skip_key(data, offset)
        return offset
    if tag == 0x08:  # name, fields
        return skip_key(data, skip_key(data, offset))
    if tag == 0x0B:  # field names, row kind byte, values
        return skip_key(data, skip_key(data, offset) + 1)
    if tag == 0x0E:  # dtype, shape, raw bytes
        offset = skip_key(data, skip_key(data, offset))
        return offset + 4 + _L.unpack_from(data, offset)[0]
    if 0x0F <= tag <= 0x12:
        return skip_key(data, offset)
    raise UsageError(f"cannot decode state: unknown tag 0x{tag:02x} at offset {offset - 1}")


def decode_key(data: bytes | memoryview, trusted: bool = True) -> Any:
    """Decode bytes that hold exactly one encoded key or value."""
    key, end = decode_key_from(data, 0, trusted)
    if end != len(data):
        raise UsageError(f"encoded key has {len(data) - end} trailing bytes after {key!r}")
    return key


def decode_value(data: bytes | memoryview, trusted: bool = True) -> Any:
    """A state value from ``encode_value``'s bytes (``trusted=False``: refuse opaque values)."""
    return decode_key(data, trusted)


def find_opaque(data: bytes | memoryview) -> str | None:
    """What in ``data`` (one encoded key, value, or keys back to back) only code would rebuild; None: nothing."""
    offset = 0
    try:
        while offset < len(data):
            _, offset = decode_key_from(data, offset, trusted=False)
    except UntrustedStateError as exc:
        return str(exc)
    return None


def _register_builtin_types() -> None:
    from weir.core.window import CountWindow, GlobalWindow, TimeWindow
    from weir.keys.reference import KeyGroupRange

    register_type(TimeWindow, "weir.TimeWindow")
    register_type(CountWindow, "weir.CountWindow")
    register_type(GlobalWindow, "weir.GlobalWindow", fields=())
    register_type(KeyGroupRange, "weir.KeyGroupRange")


_register_builtin_types()
