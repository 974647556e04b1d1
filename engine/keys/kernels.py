"""Key groups for a whole batch at once: numba kernels over numpy arrays.

Each kernel is the batch twin of a function in ``weir.keys.reference`` and
must return exactly what the reference returns for every element; the property
tests in ``tests/property/test_key_kernels.py`` hold them to that. A kernel is
called once per batch, never per record.

Java's 32-bit wrapping arithmetic is spelled out: multiplications run on
``uint64`` and are masked to 32 bits (every constant is a ``uint64`` so that
numba never promotes a mixed signed/unsigned expression to float), and results
are turned back into signed ``int32`` explicitly before they are stored.

Bad arguments (a max_parallelism outside 1..32768, a parallelism outside
1..max_parallelism, a key group outside 0..max_parallelism - 1) raise
``UsageError`` from inside the kernels.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from numba import njit

from weir.errors import UsageError
from weir.keys.reference import java_hash

__all__ = [
    "channels_for_hashes",
    "channels_for_key_groups",
    "hash_bool_array",
    "hash_float64_array",
    "hash_int64_array",
    "hash_utf8_strings",
    "hash_utf16_strings",
    "java_hash_array",
    "key_groups_for_hashes",
    "murmur_hash_array",
    "string_hashes",
]

Int32Array = npt.NDArray[np.int32]
#: A scalar integer inside a kernel: a Python int or a numpy integer of any width.
ScalarInt = int | np.integer[Any]

_UPPER_BOUND_MAX_PARALLELISM = 32768
_INT_MIN = -(1 << 31)
_INT_MAX = (1 << 31) - 1
_TWO_32 = 1 << 32
_CANONICAL_NAN_BITS = 0x7FF8000000000000

# uint64 constants: numba types uint64 <op> int64 as float64, so every operand
# of the unsigned arithmetic below must be a uint64 itself.
_U_MASK32 = np.uint64(0xFFFFFFFF)
_U_C1 = np.uint64(0xCC9E2D51)
_U_C2 = np.uint64(0x1B873593)
_U_M = np.uint64(5)
_U_N = np.uint64(0xE6546B64)
_U_MIX1 = np.uint64(0x85EBCA6B)
_U_MIX2 = np.uint64(0xC2B2AE35)
_U_4 = np.uint64(4)
_U_13 = np.uint64(13)
_U_15 = np.uint64(15)
_U_16 = np.uint64(16)
_U_17 = np.uint64(17)
_U_19 = np.uint64(19)


@njit(cache=True)
def _signed32(bits: ScalarInt) -> ScalarInt:
    """The signed Java int whose two's complement is ``bits`` (``0 <= bits < 2**32``)."""
    value = np.int64(bits)
    if value > _INT_MAX:
        value -= _TWO_32
    return value


@njit(cache=True)
def _murmur(code: ScalarInt) -> ScalarInt:
    """``MathUtils.murmurHash`` of one int32 value; the twin of ``reference.murmur_hash``."""
    c = np.uint64(np.int64(code)) & _U_MASK32
    c = (c * _U_C1) & _U_MASK32
    c = ((c << _U_15) | (c >> _U_17)) & _U_MASK32
    c = (c * _U_C2) & _U_MASK32
    c = ((c << _U_13) | (c >> _U_19)) & _U_MASK32
    c = (c * _U_M + _U_N) & _U_MASK32
    c ^= _U_4
    c ^= c >> _U_16
    c = (c * _U_MIX1) & _U_MASK32
    c ^= c >> _U_13
    c = (c * _U_MIX2) & _U_MASK32
    c ^= c >> _U_16
    signed = _signed32(c)
    if signed >= 0:
        return signed
    if signed != _INT_MIN:
        return -signed
    return 0


@njit(cache=True)
def _long_hash(value: ScalarInt) -> ScalarInt:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))``; the arithmetic shift is fine once masked."""
    return _signed32((value ^ (value >> 32)) & 0xFFFFFFFF)


@njit(cache=True)
def _check_max_parallelism(max_parallelism: int) -> None:
    if max_parallelism < 1 or max_parallelism > _UPPER_BOUND_MAX_PARALLELISM:
        raise UsageError("max_parallelism " + str(max_parallelism) + " is invalid: it must be in 1..32768")


@njit(cache=True)
def _check_parallelism(max_parallelism: int, parallelism: int) -> None:
    _check_max_parallelism(max_parallelism)
    if parallelism < 1:
        raise UsageError("parallelism " + str(parallelism) + " is invalid: it must be at least 1")
    if parallelism > max_parallelism:
        raise UsageError(
            "parallelism "
            + str(parallelism)
            + " exceeds max_parallelism "
            + str(max_parallelism)
            + ": parallelism must be in 1..max_parallelism"
        )


@njit(cache=True)
def murmur_hash_array(hashes: Int32Array) -> Int32Array:
    """``murmur_hash`` of every element (each in ``0..2**31 - 1``)."""
    out = np.empty(hashes.shape[0], np.int32)
    for i in range(hashes.shape[0]):
        out[i] = _murmur(hashes[i])
    return out


@njit(cache=True)
def hash_int64_array(values: npt.NDArray[np.int64]) -> Int32Array:
    """``java_hash`` of every int: ``Integer.hashCode`` if it fits in 32 bits, else ``Long.hashCode``."""
    out = np.empty(values.shape[0], np.int32)
    for i in range(values.shape[0]):
        v = np.int64(values[i])
        if _INT_MIN <= v <= _INT_MAX:
            out[i] = v
        else:
            out[i] = _long_hash(v)
    return out


@njit(cache=True)
def hash_float64_array(values: npt.NDArray[np.float64]) -> Int32Array:
    """``Double.hashCode`` of every float (all NaNs hash as the canonical NaN; -0.0 != 0.0)."""
    out = np.empty(values.shape[0], np.int32)
    scratch = np.empty(1, np.float64)
    scratch_bits = scratch.view(np.int64)
    for i in range(values.shape[0]):
        v = values[i]
        if np.isnan(v):
            bits = np.int64(_CANONICAL_NAN_BITS)
        else:
            scratch[0] = v
            bits = scratch_bits[0]
        out[i] = _long_hash(bits)
    return out


@njit(cache=True)
def hash_bool_array(values: npt.NDArray[np.bool_]) -> Int32Array:
    """``Boolean.hashCode`` of every element: 1231 for true, 1237 for false."""
    out = np.empty(values.shape[0], np.int32)
    for i in range(values.shape[0]):
        out[i] = 1231 if values[i] else 1237
    return out


@njit(cache=True)
def hash_utf16_strings(code_units: npt.NDArray[np.uint16], offsets: npt.NDArray[np.int64]) -> Int32Array:
    """``String.hashCode`` of each string ``code_units[offsets[i]:offsets[i + 1]]`` (UTF-16 code units)."""
    if offsets.shape[0] == 0:
        raise UsageError("offsets is empty: it must hold n + 1 entries for n strings, starting with 0")
    n = offsets.shape[0] - 1
    out = np.empty(n, np.int32)
    for i in range(n):
        start = offsets[i]
        end = offsets[i + 1]
        if start < 0 or end < start or end > code_units.shape[0]:
            raise UsageError(
                "offsets "
                + str(start)
                + ".."
                + str(end)
                + " of string "
                + str(i)
                + " do not fit 0.."
                + str(code_units.shape[0])
                + " code units: offsets must be non-decreasing and within the array"
            )
        h = np.int64(0)
        for j in range(start, end):
            h = (31 * h + np.int64(code_units[j])) & 0xFFFFFFFF
        out[i] = _signed32(h)
    return out


@njit(cache=True)
def hash_utf8_strings(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> Int32Array:
    """``String.hashCode`` of each string ``data[starts[i]:ends[i]]`` (UTF-8, ``surrogatepass``).

    The bytes are decoded to code points and hashed as Java's UTF-16 code units: a code
    point above U+FFFF counts as its surrogate pair, a lone surrogate as itself. The bytes
    must be valid UTF-8 (as Arrow and the frame decoder leave them).
    """
    n = starts.shape[0]
    out = np.empty(n, np.int32)
    for i in range(n):
        start = starts[i]
        end = ends[i]
        if start < 0 or end < start or end > data.shape[0]:
            raise UsageError(
                "string " + str(i) + " spans bytes " + str(start) + ".." + str(end)
                + ", outside the " + str(data.shape[0]) + " bytes of the column"
            )  # fmt: skip
        h = np.int64(0)
        p = start
        while p < end:
            b = np.int64(data[p])
            if b < 0x80:
                code = b
                p += 1
            elif b < 0xE0:
                code = ((b & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F)
                p += 2
            elif b < 0xF0:
                code = (
                    ((b & 0x0F) << 12)
                    | ((np.int64(data[p + 1]) & 0x3F) << 6)
                    | (np.int64(data[p + 2]) & 0x3F)
                )
                p += 3
            else:
                code = (
                    ((b & 0x07) << 18)
                    | ((np.int64(data[p + 1]) & 0x3F) << 12)
                    | ((np.int64(data[p + 2]) & 0x3F) << 6)
                    | (np.int64(data[p + 3]) & 0x3F)
                )
                p += 4
            if code >= 0x10000:
                code -= 0x10000
                h = (31 * h + (0xD800 + (code >> 10))) & 0xFFFFFFFF
                code = 0xDC00 + (code & 0x3FF)
            h = (31 * h + code) & 0xFFFFFFFF
        out[i] = _signed32(h)
    return out


@njit(cache=True)
def key_groups_for_hashes(hashes: Int32Array, max_parallelism: int) -> Int32Array:
    """The key group of every key hash: ``murmur_hash(h) % max_parallelism``."""
    _check_max_parallelism(max_parallelism)
    out = np.empty(hashes.shape[0], np.int32)
    for i in range(hashes.shape[0]):
        out[i] = _murmur(hashes[i]) % max_parallelism
    return out


@njit(cache=True)
def channels_for_key_groups(key_groups: Int32Array, max_parallelism: int, parallelism: int) -> Int32Array:
    """The subtask that owns every key group: ``key_group * parallelism // max_parallelism``."""
    _check_parallelism(max_parallelism, parallelism)
    out = np.empty(key_groups.shape[0], np.int32)
    for i in range(key_groups.shape[0]):
        key_group = np.int64(key_groups[i])
        if key_group < 0 or key_group >= max_parallelism:
            raise UsageError(
                "key group "
                + str(key_group)
                + " is outside 0.."
                + str(max_parallelism - 1)
                + " (max_parallelism "
                + str(max_parallelism)
                + ")"
            )
        out[i] = key_group * parallelism // max_parallelism
    return out


@njit(cache=True)
def channels_for_hashes(hashes: Int32Array, max_parallelism: int, parallelism: int) -> Int32Array:
    """The subtask every key hash is routed to: hash -> key group -> subtask in one pass."""
    _check_parallelism(max_parallelism, parallelism)
    out = np.empty(hashes.shape[0], np.int32)
    for i in range(hashes.shape[0]):
        key_group = _murmur(hashes[i]) % max_parallelism
        out[i] = key_group * parallelism // max_parallelism
    return out


def string_hashes(strings: Sequence[str]) -> Int32Array:
    """``String.hashCode`` of every string, through ``hash_utf16_strings``.

    Lone surrogates (legal in a Python str and in a Java String) are kept as the
    code unit they are, as Java would.
    """
    encoded = [s.encode("utf-16-le", "surrogatepass") for s in strings]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(b) // 2 for b in encoded], out=offsets[1:])
    code_units = np.frombuffer(b"".join(encoded), dtype="<u2").astype(np.uint16, copy=False)
    result: Int32Array = hash_utf16_strings(code_units, offsets)
    return result


def _hash_by_reference(keys: Sequence[object]) -> Int32Array:
    return np.fromiter((java_hash(k) for k in keys), dtype=np.int32, count=len(keys))


def _hash_ndarray(keys: np.ndarray) -> Int32Array:
    if keys.ndim != 1:
        raise UsageError(f"a batch of keys must be one-dimensional, got an array of shape {keys.shape}")
    kind = keys.dtype.kind
    if kind == "b":
        return hash_bool_array(keys)
    if kind == "i" or (kind == "u" and (keys.size == 0 or int(keys.max()) <= np.iinfo(np.int64).max)):
        return hash_int64_array(keys.astype(np.int64, copy=False))
    if kind == "f":
        return hash_float64_array(keys.astype(np.float64, copy=False))
    if kind == "U":
        return string_hashes(keys.tolist())
    return _hash_by_reference(keys.tolist())


def java_hash_array(keys: Sequence[object] | np.ndarray) -> Int32Array:
    """``java_hash`` of every key in a batch, by the kernel that fits the batch's key type.

    All bool -> ``hash_bool_array``; all int -> ``hash_int64_array`` (unless one
    does not fit in 64 bits); all float -> ``hash_float64_array``; all str ->
    ``string_hashes``; anything else (mixed types, tuples, rows, bytes, None)
    is hashed key by key with ``reference.java_hash``. A numpy array is
    dispatched by its dtype.
    """
    if isinstance(keys, np.ndarray):
        return _hash_ndarray(keys)
    hashes_of_column = getattr(keys, "java_hashes", None)  # weir.codec's Strings: hashed from its bytes
    if hashes_of_column is not None:
        column_hashes: Int32Array = hashes_of_column()
        return column_hashes
    if len(keys) == 0:
        return np.empty(0, np.int32)
    types = set(map(type, keys))
    if types == {bool}:
        return hash_bool_array(np.array(keys, dtype=np.bool_))
    if all(issubclass(t, int) and t is not bool for t in types):
        try:
            values = np.array(keys, dtype=np.int64)
        except OverflowError:
            return _hash_by_reference(keys)
        return hash_int64_array(values)
    if all(issubclass(t, float) for t in types):
        return hash_float64_array(np.array(keys, dtype=np.float64))
    if all(issubclass(t, str) for t in types):
        return string_hashes(cast("Sequence[str]", keys))
    return _hash_by_reference(keys)
