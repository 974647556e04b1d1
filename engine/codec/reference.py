"""The codec kernels, the plain-Python way: the reference that ``weir.codec.kernels`` must agree with.

Every function here has the name, arguments and results of its kernel twin and
says in the most obvious code what the kernel computes. They are too slow for
the data path (per-record Python) and exist to be tested against.

Pure: no I/O, no clock, no numba.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from weir.errors import UsageError

__all__ = [
    "gather_fixed",
    "gather_strings",
    "group_by_channel",
    "int_range",
    "pack_deltas",
    "separator_bounds",
    "sum_by_channel",
    "unpack_deltas",
    "utf8_bounds",
]

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
ByteArray = npt.NDArray[np.uint8]


def _check_channel(i: int, c: int, num_channels: int) -> None:
    if not 0 <= c < num_channels:
        raise UsageError(
            f"record {i} is routed to channel {c}, outside 0..{num_channels - 1} ({num_channels} channels)"
        )


def group_by_channel(channels: Int32Array, num_channels: int) -> tuple[Int64Array, Int64Array]:
    """Stable grouping of record indices by channel: ``(permutation, offsets)``."""
    if num_channels < 1:
        raise UsageError(f"num_channels {num_channels} is invalid: it must be at least 1")
    runs: list[list[int]] = [[] for _ in range(num_channels)]
    for i, c in enumerate(channels.tolist()):
        _check_channel(i, c, num_channels)
        runs[c].append(i)
    permutation = [i for run in runs for i in run]
    offsets = [0]
    for run in runs:
        offsets.append(offsets[-1] + len(run))
    return np.array(permutation, dtype=np.int64), np.array(offsets, dtype=np.int64)


def sum_by_channel(values: Int64Array, channels: Int32Array, num_channels: int) -> Int64Array:
    """``out[c]`` = the sum of ``values[i]`` over the records ``i`` routed to channel ``c``."""
    out = [0] * num_channels
    for i, (v, c) in enumerate(zip(values.tolist(), channels.tolist(), strict=True)):
        _check_channel(i, c, num_channels)
        out[c] += v
    return np.array(out, dtype=np.int64)


def gather_fixed(
    dst: ByteArray,
    dst_positions: Int64Array,
    src: ByteArray,
    width: int,
    permutation: Int64Array,
    offsets: Int64Array,
) -> None:
    """Copy record ``permutation[k]`` (``width`` bytes) to ``dst_positions[c] + (k - offsets[c]) * width``."""
    if width < 1:
        raise UsageError(f"width {width} is invalid: a fixed-width column has at least 1 byte")
    if len(src) != len(permutation) * width:
        raise UsageError(f"column has {len(src)} bytes, expected {len(permutation)} records of {width} bytes")
    for c in range(len(offsets) - 1):
        p = int(dst_positions[c])
        if p < 0 or p + (offsets[c + 1] - offsets[c]) * width > len(dst):
            raise UsageError(f"channel {c}'s column does not fit the output buffer")
        for k in range(offsets[c], offsets[c + 1]):
            i = int(permutation[k])
            dst[p : p + width] = src[i * width : (i + 1) * width]
            p += width


def gather_strings(
    dst: ByteArray,
    dst_positions: Int64Array,
    blob: ByteArray,
    starts: Int64Array,
    ends: Int64Array,
    permutation: Int64Array,
    offsets: Int64Array,
    separator: int,
) -> None:
    """Each channel's records' bytes, in permutation order, joined by ``separator`` unless it is -1."""
    for c in range(len(offsets) - 1):
        pieces = []
        for k in range(offsets[c], offsets[c + 1]):
            i = int(permutation[k])
            s, e = int(starts[i]), int(ends[i])
            if s < 0 or e < s or e > len(blob):
                raise UsageError(
                    f"record {i} spans bytes {s}..{e}, outside the blob of {len(blob)} bytes or the output buffer"
                )
            pieces.append(blob[s:e].tobytes())
        joined = (bytes([separator]) if separator >= 0 else b"").join(pieces)
        p = int(dst_positions[c])
        if p + len(joined) > len(dst):
            raise UsageError("channel's strings do not fit the output buffer")
        dst[p : p + len(joined)] = np.frombuffer(joined, dtype=np.uint8)


def separator_bounds(blob: ByteArray, n: int, separator: int) -> tuple[Int64Array, Int64Array]:
    """``(starts, ends)`` of ``n`` strings joined by ``separator``; empty if the separator count is not n - 1."""
    empty = np.empty(0, np.int64)
    if n == 0:
        return empty, empty
    data = blob.tobytes()
    if data.count(bytes([separator])) != n - 1:
        return empty, empty
    starts, ends = [], []
    p = 0
    for piece in data.split(bytes([separator])):
        starts.append(p)
        ends.append(p + len(piece))
        p += len(piece) + 1
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def utf8_bounds(blob: ByteArray, code_point_lengths: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Byte ``(starts, ends)`` of concatenated UTF-8 strings, from their lengths in code points."""
    data = blob.tobytes()
    # Byte offset of every code point (the first byte, and every byte that is not a
    # continuation byte 10xxxxxx), then the end of the blob.
    lead = [p for p, b in enumerate(data) if p == 0 or b & 0xC0 != 0x80]
    lead.append(len(data))
    starts, ends = [], []
    cp = 0
    for i, length in enumerate(code_point_lengths.tolist()):
        if length < 0:
            raise UsageError(f"string {i} has a negative length {length}")
        if cp + length > len(lead) - 1:
            raise UsageError(f"string {i} runs past the end of the {len(data)}-byte UTF-8 blob")
        starts.append(lead[cp])
        cp += length
        ends.append(lead[cp])
    end = lead[cp]
    if end != len(data):
        raise UsageError(f"the strings' lengths cover {end} bytes of a UTF-8 blob of {len(data)} bytes")
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def int_range(values: Int64Array) -> tuple[int, int]:
    """``(smallest, largest)`` of a non-empty int64 array."""
    as_ints = values.tolist()
    return min(as_ints), max(as_ints)


def pack_deltas(values: Int64Array, base: int, out: npt.NDArray[np.unsignedinteger]) -> None:
    """``out[i] = values[i] - base``; every difference fits ``out``'s width."""
    for i, v in enumerate(values.tolist()):
        out[i] = v - base


def unpack_deltas(deltas: npt.NDArray[np.unsignedinteger], base: int, out: Int64Array) -> None:
    """``out[i] = base + deltas[i]``, wrapped to int64."""
    for i, d in enumerate(deltas.tolist()):
        out[i] = (base + d + (1 << 63)) % (1 << 64) - (1 << 63)
