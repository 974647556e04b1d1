"""Key groups, the plain-Python way: the reference that the numba kernels must agree with.

A keyed stream is cut into ``max_parallelism`` key groups; a key belongs to the
key group ``murmur_hash(java_hash(key)) % max_parallelism`` and a key group to
the subtask ``key_group * parallelism // max_parallelism``. Every subtask owns
one contiguous ``KeyGroupRange``; keyed state is snapshotted and rescaled per
key group, so a key never moves unless its key group does.

``java_hash`` follows Java's ``hashCode`` for each key type, so that a key
lands on the same key group as it would in Flink, and so that the assignment is
stable across processes and runs (Python's ``hash()`` of ``str`` is salted and
must never decide where a key goes). All arithmetic here is Java's: 32-bit
two's complement that wraps.

Pure: no I/O, no clock, no numba. Per-record speed is the kernels' job
(``weir.keys.kernels``); this module is what they are tested against.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from weir.errors import UsageError

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "compute_default_max_parallelism",
    "compute_key_group_for_key_hash",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "java_hash",
    "murmur_hash",
    "round_up_to_power_of_two",
]

#: Flink's ``KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM`` (1 << 7).
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128
#: Flink's ``Transformation.UPPER_BOUND_MAX_PARALLELISM`` (1 << 15).
UPPER_BOUND_MAX_PARALLELISM = 32768

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
#: ``Double.doubleToLongBits`` folds every NaN onto this one bit pattern.
CANONICAL_NAN_BITS = 0x7FF8000000000000
TRUE_HASH = 1231
FALSE_HASH = 1237


def to_int32(value: int) -> int:
    """The low 32 bits of ``value`` as a signed Java ``int``."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def _rotl32(value: int, distance: int) -> int:
    value &= _MASK32
    return ((value << distance) | (value >> (32 - distance))) & _MASK32


def _long_hash(value: int) -> int:
    """``Long.hashCode``: ``(int)(v ^ (v >>> 32))`` on the 64-bit two's complement of ``value``."""
    bits = value & _MASK64
    return to_int32(bits ^ (bits >> 32))


def _bytes_hash(data: bytes | bytearray) -> int:
    """``Arrays.hashCode(byte[])``: Java bytes are signed."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b >= 128 else b)) & _MASK32
    return to_int32(h)


def _int_hash(value: int) -> int:
    if INT_MIN <= value <= INT_MAX:
        return value  # Integer.hashCode
    if LONG_MIN <= value <= LONG_MAX:
        return _long_hash(value)
    # Beyond a Java long: hash the shortest little-endian two's complement bytes.
    # (Java's BigInteger.hashCode differs; Flink has no such key type to agree with.)
    size = (value.bit_length() + 8) // 8
    return _bytes_hash(value.to_bytes(size, "little", signed=True))


def _float_hash(value: float) -> int:
    """``Double.hashCode``: bits of ``doubleToLongBits`` (one canonical NaN), folded to 32 bits."""
    if math.isnan(value):
        bits = CANONICAL_NAN_BITS
    else:
        (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return to_int32(bits ^ (bits >> 32))


def _str_hash(value: str) -> int:
    """``String.hashCode`` over UTF-16 code units; a non-BMP character is a surrogate pair."""
    h = 0
    for char in value:
        unit = ord(char)
        if unit > 0xFFFF:
            unit -= 0x10000
            h = (31 * h + (0xD800 | (unit >> 10))) & _MASK32
            unit = 0xDC00 | (unit & 0x3FF)
        h = (31 * h + unit) & _MASK32
    return to_int32(h)


def _sequence_hash(values: Any) -> int:
    """``Arrays.hashCode(Object[])``: ``31 * h + hash(e)`` from 1.

    Flink's ``TupleN.hashCode`` uses the same 31-fold but starts from the hash
    of ``f0`` instead of 1, so the two differ by a factor ``31**n``; weir uses
    the ``Arrays.hashCode`` form for tuples, lists and rows alike.
    """
    h = 1
    for element in values:
        h = (31 * h + java_hash(element)) & _MASK32
    return to_int32(h)


def java_hash(key: object) -> int:
    """A stable, signed 32-bit hash of ``key`` that matches Java's ``hashCode`` for its type.

    bool -> ``Boolean.hashCode`` (1231/1237); int -> ``Integer.hashCode`` when
    it fits in 32 bits, else ``Long.hashCode`` (ints wider than 64 bits: the
    byte-array rule over their little-endian two's complement); float ->
    ``Double.hashCode``; str -> ``String.hashCode`` over UTF-16 code units;
    bytes -> ``Arrays.hashCode(byte[])``; None -> 0; tuple, list and
    row-like objects (with ``_values``) -> ``Arrays.hashCode`` of the elements.
    numpy scalars hash as the Python value they hold.
    """
    if key is None:
        return 0
    if isinstance(key, bool):
        return TRUE_HASH if key else FALSE_HASH
    if isinstance(key, int):
        return _int_hash(key)
    if isinstance(key, float):
        return _float_hash(key)
    if isinstance(key, str):
        return _str_hash(key)
    if isinstance(key, bytes | bytearray):
        return _bytes_hash(key)
    if isinstance(key, tuple | list):
        return _sequence_hash(key)
    values = getattr(key, "_values", None)
    if isinstance(values, tuple | list):
        return _sequence_hash(values)
    item = getattr(key, "item", None)
    if item is not None and type(key).__module__ == "numpy":
        value = item()
        if isinstance(value, bool | int | float):
            return java_hash(value)
    raise UsageError(
        f"cannot hash key {key!r} of type {type(key).__qualname__}: keys must be "
        "bool/int/float/str/bytes/None/tuple/Row (or a value whose key selector returns one)"
    )


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash(int)``: a non-negative, well-mixed 32-bit int."""
    code = (code * 0xCC9E2D51) & _MASK32
    code = _rotl32(code, 15)
    code = (code * 0x1B873593) & _MASK32
    code = _rotl32(code, 13)
    code = (code * 5 + 0xE6546B64) & _MASK32
    code ^= 4
    # bitMix
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _MASK32
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK32
    code ^= code >> 16
    signed = to_int32(code)
    if signed >= 0:
        return signed
    if signed != INT_MIN:
        return -signed
    return 0


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an int, got {value!r} of type {type(value).__qualname__}")
    return value


def _check_max_parallelism(max_parallelism: int) -> None:
    _check_int("max_parallelism", max_parallelism)
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise UsageError(
            f"max_parallelism {max_parallelism} is invalid: it must be in 1..{UPPER_BOUND_MAX_PARALLELISM}"
        )


def _check_parallelism(max_parallelism: int, parallelism: int) -> None:
    _check_max_parallelism(max_parallelism)
    _check_int("parallelism", parallelism)
    if parallelism < 1:
        raise UsageError(f"parallelism {parallelism} is invalid: it must be at least 1")
    if parallelism > max_parallelism:
        raise UsageError(
            f"parallelism {parallelism} exceeds max_parallelism {max_parallelism}: "
            "parallelism must be in 1..max_parallelism"
        )


def _check_key_group(max_parallelism: int, key_group: int) -> None:
    _check_int("key_group", key_group)
    if not 0 <= key_group < max_parallelism:
        raise UsageError(
            f"key group {key_group} is outside 0..{max_parallelism - 1} (max_parallelism {max_parallelism})"
        )


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """The key group of a key whose ``java_hash`` is ``key_hash``."""
    _check_max_parallelism(max_parallelism)
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: object, max_parallelism: int) -> int:
    """The key group, in ``0..max_parallelism - 1``, that ``key`` belongs to."""
    return compute_key_group_for_key_hash(java_hash(key), max_parallelism)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The subtask, in ``0..parallelism - 1``, that owns ``key_group``."""
    _check_parallelism(max_parallelism, parallelism)
    _check_key_group(max_parallelism, key_group)
    return key_group * parallelism // max_parallelism


def assign_key_to_parallel_operator(key: object, max_parallelism: int, parallelism: int) -> int:
    """The subtask, in ``0..parallelism - 1``, that ``key`` is routed to."""
    return compute_operator_index_for_key_group(
        max_parallelism, parallelism, assign_to_key_group(key, max_parallelism)
    )


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """The key groups ``start_key_group..end_key_group`` (both inclusive) that one subtask owns.

    ``KeyGroupRange.EMPTY`` (0, -1) is the only empty range.
    """

    start_key_group: int
    end_key_group: int

    EMPTY: ClassVar[KeyGroupRange]  # KeyGroupRange(0, -1), set right after the class

    def __post_init__(self) -> None:
        start, end = self.start_key_group, self.end_key_group
        _check_int("start_key_group", start)
        _check_int("end_key_group", end)
        if (start, end) != (0, -1) and not 0 <= start <= end:
            raise UsageError(
                f"key group range [{start}, {end}] is invalid: it needs 0 <= start <= end, "
                "or (0, -1) for the empty range"
            )

    def __contains__(self, key_group: object) -> bool:
        return (
            isinstance(key_group, int)
            and not isinstance(key_group, bool)
            and self.start_key_group <= key_group <= self.end_key_group
        )

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def __len__(self) -> int:
        return self.end_key_group - self.start_key_group + 1

    @property
    def number_of_key_groups(self) -> int:
        return len(self)

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups in both ranges (``EMPTY`` when they are disjoint)."""
        start = max(self.start_key_group, other.start_key_group)
        end = min(self.end_key_group, other.end_key_group)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY

    def __repr__(self) -> str:
        return f"KeyGroupRange({self.start_key_group}, {self.end_key_group})"


KeyGroupRange.EMPTY = KeyGroupRange(0, -1)


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The key groups that subtask ``operator_index`` owns; the subtasks' ranges tile ``0..max - 1``."""
    _check_parallelism(max_parallelism, parallelism)
    _check_int("operator_index", operator_index)
    if not 0 <= operator_index < parallelism:
        raise UsageError(
            f"operator_index {operator_index} is outside 0..{parallelism - 1} (parallelism {parallelism})"
        )
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def round_up_to_power_of_two(value: int) -> int:
    """The smallest power of two ``>= value`` (1 for values below 1), as Flink's ``MathUtils``."""
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def compute_default_max_parallelism(parallelism: int) -> int:
    """Flink's default: ``parallelism * 1.5`` rounded up to a power of two, clamped to 128..32768."""
    _check_int("parallelism", parallelism)
    if not 1 <= parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise UsageError(
            f"parallelism {parallelism} is invalid: it must be in 1..{UPPER_BOUND_MAX_PARALLELISM}"
        )
    return min(
        max(round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )
