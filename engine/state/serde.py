"""Byte encodings of keys, namespaces and values for state backends and snapshots.

Keys and namespaces use a canonical, self-delimiting encoding: the same key
always gives the same bytes (in any process, on any run), and a key's bytes
followed by a namespace's bytes can be split again without a separator. Ints,
floats, strings, bytes, None, bools, tuples and dataclasses (``TimeWindow``,
``GlobalWindow``, ...) are encoded field by field; anything else falls back to
pickle, which is deterministic for the simple values keys usually are.

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
0x08  dataclass    encoded ``"module:qualname"`` str + encoded tuple of fields
0xFF  other        4-byte length + pickle protocol 5
===== ============ =====================================================

Values are ``pickle`` protocol 5 (``encode_value``/``decode_value``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import struct
from typing import Any

from engine.errors import UsageError

__all__ = ["decode_key", "decode_key_from", "decode_value", "encode_key", "encode_value"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_OFFSET = 1 << 63
_Q = struct.Struct(">Q")
_D = struct.Struct(">d")
_L = struct.Struct(">I")
_NONE = b"\x00"
_TRUE = b"\x01\x01"
_FALSE = b"\x01\x00"

_dataclass_names: dict[type, tuple[bytes, tuple[str, ...]]] = {}
_dataclass_types: dict[str, type] = {}


def encode_key(key: Any) -> bytes:
    """The canonical bytes of a key or namespace (see the module docstring)."""
    t = type(key)
    if t is int:
        if _INT64_MIN <= key <= _INT64_MAX:
            return b"\x02" + _Q.pack(key + _OFFSET)
        raw = key.to_bytes((key.bit_length() + 8) // 8, "big", signed=True)
        return b"\x03" + _L.pack(len(raw)) + raw
    if t is str:
        raw = key.encode("utf-8")
        return b"\x05" + _L.pack(len(raw)) + raw
    if key is None:
        return _NONE
    if t is bool:
        return _TRUE if key else _FALSE
    if t is float:
        return b"\x04" + _D.pack(key)
    if t is bytes or t is bytearray:
        return b"\x06" + _L.pack(len(key)) + bytes(key)
    if t is tuple:
        return b"\x07" + _L.pack(len(key)) + b"".join(encode_key(k) for k in key)
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        meta = _dataclass_names.get(t)
        if meta is None:
            name = f"{t.__module__}:{t.__qualname__}"
            meta = (encode_key(name), tuple(f.name for f in dataclasses.fields(key)))
            _dataclass_names[t] = meta
            _dataclass_types[name] = t
        fields = tuple(getattr(key, f) for f in meta[1])
        return b"\x08" + meta[0] + encode_key(fields)
    if t.__module__ == "numpy" and hasattr(key, "item"):
        return encode_key(key.item())
    try:
        raw = pickle.dumps(key, protocol=5)
    except Exception as exc:
        raise UsageError(
            f"cannot encode state key or namespace {key!r} of type {t.__qualname__}: {exc}"
        ) from exc
    return b"\xff" + _L.pack(len(raw)) + raw


def _dataclass_type(name: str) -> type:
    t = _dataclass_types.get(name)
    if t is None:
        module, _, qualname = name.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        t = obj
        _dataclass_types[name] = obj
    return t


def decode_key_from(data: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Decode one key starting at ``offset``; return it and the offset just past it."""
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
    if tag == 0x01:
        return data[offset] == 1, offset + 1
    if tag == 0x04:
        return _D.unpack_from(data, offset)[0], offset + 8
    if tag == 0x03:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        return int.from_bytes(data[offset : offset + n], "big", signed=True), offset + n
    if tag == 0x06:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        return bytes(data[offset : offset + n]), offset + n
    if tag == 0x07:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        items = []
        for _ in range(n):
            item, offset = decode_key_from(data, offset)
            items.append(item)
        return tuple(items), offset
    if tag == 0x08:
        name, offset = decode_key_from(data, offset)
        fields, offset = decode_key_from(data, offset)
        return _dataclass_type(name)(*fields), offset
    if tag == 0xFF:
        (n,) = _L.unpack_from(data, offset)
        offset += 4
        return pickle.loads(data[offset : offset + n]), offset + n
    raise UsageError(f"cannot decode state key: unknown tag 0x{tag:02x} at offset {offset - 1}")


def decode_key(data: bytes | memoryview) -> Any:
    """Decode bytes that hold exactly one encoded key."""
    key, end = decode_key_from(data, 0)
    if end != len(data):
        raise UsageError(f"encoded key has {len(data) - end} trailing bytes after {key!r}")
    return key


def encode_value(value: object) -> bytes:
    """A state value as bytes (pickle protocol 5)."""
    return pickle.dumps(value, protocol=5)


def decode_value(data: bytes | memoryview) -> Any:
    return pickle.loads(data)
